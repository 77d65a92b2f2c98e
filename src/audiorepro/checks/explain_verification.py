"""``audiorepro explain DUMP --trials FILE``: every speaker-verification definition side by
side for one dump and one trial list, and why each differs from the ROC crossing.

The trials' scores are the cosines of their clips' embeddings
(:func:`audiorepro.metrics.verification.trial_scores`, as a speaker-verification study scores
them); the definitions are :data:`audiorepro.metrics.verification_toolkits.DEFINITIONS`, all
from one sort. The JSON maps each definition's name to its value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audiorepro.core.errors import UserError
from audiorepro.formats.probe_inputs import read_clip_embeddings
from audiorepro.formats.trials import read_trials
from audiorepro.metrics.verification import trial_scores
from audiorepro.metrics.verification_toolkits import DEFINITIONS, compute_definitions

#: Why a definition's value differs from the ROC crossing (``eer``), one line each.
WHY: dict[str, str] = {
    "eer": "where the ROC's segments between operating points meet F = M (ties together)",
    "eer_rocch": "the ROC convex hull meets F = M: thresholds may be mixed, so at most eer",
    "eer_pyannote": "the mean of the two ROC points around the crossing (scikit-learn's "
    "points, collinear ones dropped), not the crossing itself",
    "eer_speechbrain": "(FAR + FRR) / 2 at the threshold, among scores and midpoints, "
    "nearest to FAR = FRR, in float32; no interpolation",
    "eer_kaldi": "a rank walk over float32 scores: a multiple of 1 / target trials",
    "min_dcf_p0.01": "least cost over thresholds at p_target 0.01, c_miss = c_fa = 1, "
    "divided by the cost of always rejecting (NIST SRE)",
    "min_dcf_p0.05": "the same at p_target 0.05 (VoxSRC)",
    "min_dcf_speechbrain_p0.01": "speechbrain's least cost, NOT normalized (x 1/0.01 = "
    "min_dcf_p0.01 but for its missing accept-all point)",
    "min_dcf_speechbrain_p0.05": "speechbrain's least cost at p_target 0.05, NOT normalized",
    "act_dcf_p0.01": "cost of the Bayes decision reading scores as log-likelihood ratios: "
    "cosines are not calibrated",
    "act_dcf_p0.05": "the same at p_target 0.05",
    "cllr": "scores read as natural-log likelihood ratios: cosines are not calibrated",
    "min_cllr": "Cllr after the best monotone recalibration (PAV): what calibration could reach",
}


@dataclass(frozen=True)
class TrialsExplanation:
    """One dump and trial list under every definition."""

    dump: str
    trials: str
    form: str  #: the trial list's form (csv, voxceleb, nist)
    target_trials: int
    nontarget_trials: int
    values: dict[str, float | None]  #: definition name -> value (the JSON)


def explain_trials(dump: str | Path, trials: str | Path) -> TrialsExplanation:
    """Every definition over the trials of ``trials`` scored by the embeddings of ``dump``;
    a bad dump or trial list is one line (:class:`~audiorepro.core.errors.UserError`)."""
    clips = read_clip_embeddings(dump)
    listed = read_trials(trials)
    i, j = listed.indices(clips.ids)
    used = np.unique(np.concatenate([i, j]))
    zero = used[~np.any(clips.embeds[used] != 0, axis=1)]
    if zero.size:  # a clip no trial uses is not read (trial_scores)
        raise UserError(
            f"is all zeros for clip {clips.ids[int(zero[0])]!r}, which a trial of "
            f"{Path(trials).name} scores; a zero embedding has no cosine: expected a "
            "non-zero row",
            source=str(dump),
            key="audio_embeds",
        )
    scores = trial_scores(clips.embeds, i, j)
    target = listed.target
    return TrialsExplanation(
        Path(dump).name, Path(trials).name, listed.format, int(target.sum()),
        int((~target).sum()), compute_definitions(scores, target),
    )  # fmt: skip


def explain_trials_text(report: TrialsExplanation) -> str:
    """The side-by-side table: name, measure, value, whose definition, and why it differs."""
    lines = [
        f"{report.dump} over {report.trials} ({report.form}): {report.target_trials} target "
        f"and {report.nontarget_trials} non-target trials, cosine scores",
        "",
        f"{'definition':<27} {'measure':<8} {'value':>11}  follows",
    ]
    for d in DEFINITIONS:
        value = report.values[d.name]
        shown = "-" if value is None else f"{value:.8f}"
        lines.append(f"{d.name:<27} {d.measure:<8} {shown:>11}  {d.follows}")
    lines += ["", "why they differ:"]
    lines += [f"  {d.name}: {WHY[d.name]}" for d in DEFINITIONS]
    return "\n".join(lines)

"""A speaker-verification study -> its output folder.

Per cell: the clip embeddings (a dump's ``audio_embeds`` and ``audio_ids``, or every clip of
an audio folder embedded by any encoder through the extraction cache as an audio-only dump,
copied to ``dumps/<cell>.npz``), a trial list (:mod:`audiorepro.formats.trials`: pairs of
clips, target or not), each trial's score (the cosine of its two embeddings), the equal
error rate over the trials (:mod:`audiorepro.metrics.verification`) and every verification
definition beside it (the toolkits' EERs, minDCF, actDCF, Cllr, minCllr:
:data:`audiorepro.metrics.verification_toolkits.DEFINITIONS`, each a value a published number
may name: ``eer_rocch`` for a BOSARIS EER); parity against the
independent twin (:mod:`audiorepro.reference.verification`: its cosines within
:data:`SCORE_TOLERANCE` of ours, its EER over our scores equal to ours to the last bit),
published values (``eer``), the tables, ``report.html``, ``bundle.json.gz``,
``verification.json`` and the manifest. Extraction cells run as Slurm arrays like any kind's
(:meth:`SpeakerVerificationKind.extraction`).
"""

from __future__ import annotations

import html
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, cast

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.checks.moves import (
    CELL_CAUSES,
    Identity,
    Moves,
    extracted,
    extraction_records,
    identity,
    in_cell,
    keys,
    pick,
    run_records,
    study_level,
)
from audiorepro.checks.verify import Summary, ValueRow, summarize, value_rows
from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import JsonObject, JsonValue, atomic_write_bytes, parse_json, slug
from audiorepro.formats.dump import read_npz
from audiorepro.formats.probe_inputs import ClipEmbeddings, read_clip_embeddings
from audiorepro.formats.speakers import read_speakers, trial_speakers
from audiorepro.formats.trials import Trials, read_trials
from audiorepro.metrics.verification import (
    DEFINITIONS_VERSION,
    eer_of_points,
    equal_error_rate,
    min_dcf_point,
    operating_points,
    trial_scores,
)
from audiorepro.metrics.verification_bootstrap import BOOTSTRAP_VERSION, speaker_bootstrap
from audiorepro.metrics.verification_norm import NORMALIZATION_VERSION, normalize_scores
from audiorepro.metrics.verification_toolkits import DEFINITIONS, compute_definitions
from audiorepro.reference import verification as twin
from audiorepro.render.det import det_chart
from audiorepro.render.html import kind_report
from audiorepro.render.tables import Column, Table, published_table
from audiorepro.runner.executors.extraction import StudyExtraction
from audiorepro.runner.kinds import (
    Better,
    BundlePart,
    Context,
    Identities,
    KindState,
    NumberRecord,
    NumberTier,
    StudyKind,
    cell_records,
    input_name,
    parity_verification,
    record_parity,
    register_kind,
    rest_records,
)
from audiorepro.runner.kinds.audio_extraction import (
    AudioCell,
    audio_cell_extraction,
    audio_cell_key,
    audio_models,
    audio_read_only,
    cached_audio_cell,
)
from audiorepro.runner.kinds.speaker_verification.spec import (
    SpeakerBootstrap,
    SpeakerCell,
    SpeakerScoreNorm,
    SpeakerVerificationStudy,
    parse_speaker_verification,
)

SPEAKER_BUNDLE: Final = "audiorepro.speaker-verification-bundle/1"
#: How far the twin's cosines (``math.fsum`` over Python floats) may lie from ours (float64
#: einsum): both are float64 sums of 256-odd products of unit vectors' entries.
SCORE_TOLERANCE: Final = 1e-12


class ScoreParity(TypedDict):
    """One cell against the independent twin."""

    cell: str
    n_trials: int  #: the trials the twin saw: every one, or a seeded subset (below)
    #: None: every trial; else the seed of the subset of ``TWIN_TRIALS`` trials the twin saw
    twin_subset_seed: int | None
    max_score_delta: float  #: the largest |our cosine - the twin's| over the trials
    score_tolerance: float
    eer: float
    twin_eer_of_our_scores: float | None  #: must equal ``eer`` to the last bit
    twin_eer: float | None  #: the twin's EER over its own cosines (recorded)
    #: every definition with a twin over our scores: ours, the twin's, agreed
    definitions: dict[str, DefinitionParity]
    passed: bool


class SpeakerParity(TypedDict):
    cells: list[ScoreParity]
    passed: bool


class SpeakerVerification(TypedDict):
    """``verification.json`` of a speaker-verification study."""

    metric_parity: SpeakerParity
    metric_parity_passed: bool
    failures: list[str]
    golden: Summary


class ScoreNormRecord(TypedDict):
    """A cell's score normalization: the definition and its parameters."""

    method: str  #: z-norm, t-norm, s-norm or as-norm
    top_n: int | None  #: as-norm's cohort scores kept per clip
    cohort: str  #: the cohort dump's file name
    cohort_sha256: str
    n_cohort: int  #: cohort clips
    version: int  #: normalization definitions version


class BootstrapRecord(TypedDict):
    """A cell's speaker-level bootstrap (docs/metrics.md): its parameters and intervals."""

    method: Literal["speakers"]  #: speakers resampled with replacement, trials weighted
    resamples: int
    seed: int  #: numpy.random.default_rng's seed
    level: float
    speakers: str  #: the speakers file's name, or "voxceleb paths" (each clip's first part)
    speakers_sha256: str | None
    n_speakers: int
    skipped: int  #: resamples without target or non-target trials
    version: int  #: bootstrap definitions version
    #: eer, min_dcf_p0.01, min_dcf_p0.05 -> [low, high] (None: every resample skipped)
    intervals: dict[str, list[float] | None]


class SpeakerBundleCell(TypedDict):
    """One cell of the bundle: its inputs, trial counts and equal error rate."""

    id: str
    model: str
    dump: str  #: the dump's file name (given) or its path in the output folder (extracted)
    dump_sha256: str
    trials: str  #: the trial list's file name
    trials_sha256: str
    n_clips: int  #: clips in the embeddings
    n_dims: int
    embeds_dtype: str
    target_trials: int
    nontarget_trials: int
    eer: float  #: lower is better, in [0, 1]
    #: every verification definition (``eer_rocch``, ``min_dcf_p0.01``, ...) -> its value;
    #: all lower-better
    definitions: dict[str, float | None]
    #: the normalization every number above is of (None: the cosines as they are)
    score_norm: ScoreNormRecord | None
    #: intervals of the EER and minDCF over speakers (None: the cell asks for none)
    bootstrap: BootstrapRecord | None
    model_meta: dict[str, JsonValue]  #: the dump's meta_json (an extraction's: weights, code, ...)


class SpeakerStudyRecord(TypedDict):
    """The study in its bundle: name, title, definitions version."""

    name: str
    title: str
    definitions_version: int


class SpeakerBundle(TypedDict):
    """``bundle.json.gz`` of a speaker-verification study (decompressed)."""

    schema: Literal["audiorepro.speaker-verification-bundle/1"]
    study: SpeakerStudyRecord
    cells: list[SpeakerBundleCell]
    verification: SpeakerVerification


# --- extraction -----------------------------------------------------------------------------


def audio_cell(cell: SpeakerCell) -> AudioCell:
    """An extraction cell as an audio-only extraction of its folder."""
    e = cell.extract
    assert e is not None
    return AudioCell(cell.id, e.model, e.registry, e.settings, e.device, e.audio)


def cell_key(cell: SpeakerCell) -> str:
    """The extraction cache's key of an extraction cell (:func:`.audio_cell_key`)."""
    return audio_cell_key(audio_cell(cell))


def speaker_extraction(study: SpeakerVerificationStudy) -> StudyExtraction | None:
    """The extraction cells as the executors see them (local, Slurm arrays, ``extract-part``):
    an array task writes one shard of whole batches (``extract --shard``), the parts merge
    into the dump one process writes; None when every cell names a dump."""
    cells = [audio_cell(c) for c in study.cells if c.extract is not None]
    if not cells:
        return None
    read_only = {study.source.parent.resolve(), *audio_read_only(cells)}
    read_only |= {c.trials.resolve().parent for c in study.cells if c.extract is not None}
    return StudyExtraction(
        study.name,
        study.source,
        tuple(map(audio_cell_extraction, cells)),
        frozenset(read_only),
        audio_models(cells),
    )


# --- one cell -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellInputs:
    """One cell's embeddings, its trials as row indices into them, and the files."""

    clips: ClipEmbeddings
    trials: Trials
    enrollment: npt.NDArray[np.int64]
    test: npt.NDArray[np.int64]
    dump_rel: str  #: the dump's name (a given dump) or its path in OUT (an extracted one)
    dump_sha256: str
    meta: dict[str, JsonValue]
    score_norm: SpeakerScoreNorm | None = None
    cohort: npt.NDArray[np.float64] | None = None  #: the cohort's embeddings (score_norm)

    #: the scores once computed (the record, the DET curve and the bootstrap read them)
    _memo: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict, compare=False)

    def scores(self) -> npt.NDArray[np.float64]:
        """Each trial's score: the cosine, normalized over the cohort when the cell says so."""
        if "scores" not in self._memo:
            raw = trial_scores(self.clips.embeds, self.enrollment, self.test)
            self._memo["scores"] = self.normalized(raw)
            self._memo["scores"].setflags(write=False)
        return self._memo["scores"]

    def normalized(self, raw: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        n = self.score_norm
        if n is None:
            return raw
        assert self.cohort is not None
        try:
            return normalize_scores(raw, self.enrollment, self.test, self.clips.embeds,
                                    self.cohort, method=n.method, top_n=n.top_n)  # fmt: skip
        except ValueError as exc:  # a zero cohort row, or cohort scores with no deviation
            raise UserError(
                f"cannot {n.method} the trial scores over this cohort ({exc}); expected "
                "non-zero embeddings whose cosines with each clip vary (as-norm: top_n >= 2)",
                source=str(n.cohort),
                key="score_norm",
            ) from None

    def normalized_at(self, pick: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The scores of the trials ``pick`` alone (each trial's normalization reads only
        its own two clips and the cohort)."""
        enr, tst = self.enrollment[pick], self.test[pick]
        raw = trial_scores(self.clips.embeds, enr, tst)
        n = self.score_norm
        if n is None:
            return raw
        assert self.cohort is not None
        return normalize_scores(raw, enr, tst, self.clips.embeds, self.cohort,
                                method=n.method, top_n=n.top_n)  # fmt: skip


def _dump_meta(path: Path) -> dict[str, JsonValue]:
    """The dump's ``meta_json`` as a dict (empty when it has none)."""
    arrays = read_npz(path, what="an .npz dump")
    if "meta_json" not in arrays:
        return {}
    meta = parse_json(str(arrays["meta_json"]), source=path, key="meta_json")
    return meta if isinstance(meta, dict) else {}


def load_cell(cell: SpeakerCell, ctx: Context) -> CellInputs:
    """A cell's inputs (an extracted dump is copied to ``dumps/<cell>.npz``); a given dump that
    is not here raises FileNotFoundError (the cell is then a failure, not bad input)."""
    if cell.extract is not None:
        rel = f"dumps/{slug(cell.id)}.npz"
        atomic_write_bytes(
            ctx.out / rel, cached_audio_cell(audio_cell(cell), ctx.cache).read_bytes()
        )
        path = ctx.out / rel
    else:
        assert cell.dump is not None
        if not cell.dump.exists():
            raise FileNotFoundError(cell.dump)
        path, rel = cell.dump, cell.dump.name
    clips = read_clip_embeddings(path)
    trials = read_trials(cell.trials)
    i, j = trials.indices(clips.ids)
    _check_cosines(clips, np.concatenate([i, j]), source=str(path))
    cohort = None
    if cell.score_norm is not None:
        cohort = read_clip_embeddings(cell.score_norm.cohort).embeds
    return CellInputs(
        clips, trials, i, j, rel, sha256_file(path), _dump_meta(path), cell.score_norm, cohort
    )


def _check_cosines(clips: ClipEmbeddings, rows: npt.NDArray[np.int64], *, source: str) -> None:
    """A trial's score is a cosine, undefined for an all-zero or a non-finite embedding:
    refused, one line naming the dump and the first such clip that a trial uses (a clip no
    trial uses is not read). A finite row whose norm overflows (or underflows) float64 is
    scored, scaled by its largest |value| (:func:`~audiorepro.metrics.verification.unit_rows`;
    the twin scales it too), as ``explain --trials`` scores it: one rule for both."""
    used = np.unique(rows)
    embeds = clips.embeds[used]
    finite = np.all(np.isfinite(embeds), axis=1)
    bad = used[~finite | ~np.any(embeds != 0, axis=1)]
    if bad.size:
        k = int(bad[0])
        what = "is not finite" if not np.all(np.isfinite(clips.embeds[k])) else "is all zero"
        raise UserError(
            f"row {k} (clip {clips.ids[k]!r}) {what}; a trial's score is the cosine of two "
            "embeddings, which needs a non-zero finite embedding",
            source=source,
            key="audio_embeds",
        )


def cell_record(cell: SpeakerCell, inputs: CellInputs) -> SpeakerBundleCell:
    """A cell's numbers: the trials' scores, their equal error rate and every definition."""
    scores = inputs.scores()
    target = inputs.trials.target
    definitions = compute_definitions(scores, target)
    eer = definitions["eer"]
    assert eer is not None  # a trial list has target and non-target trials (formats.trials)
    return {
        "id": cell.id,
        "model": cell.model,
        "dump": inputs.dump_rel,
        "dump_sha256": inputs.dump_sha256,
        "trials": cell.trials.name,
        "trials_sha256": sha256_file(cell.trials),
        "n_clips": len(inputs.clips.ids),
        "n_dims": int(inputs.clips.embeds.shape[1]),
        "embeds_dtype": inputs.clips.dtype,
        "target_trials": int(target.sum()),
        "nontarget_trials": int((~target).sum()),
        "eer": eer,
        "definitions": definitions,
        "score_norm": _norm_record(cell.score_norm, inputs.cohort),
        "bootstrap": _bootstrap_record(cell.bootstrap, inputs),
        "model_meta": inputs.meta,
    }


def _bootstrap_record(b: SpeakerBootstrap | None, inputs: CellInputs) -> BootstrapRecord | None:
    """The cell's speaker-level bootstrap over its (normalized) scores."""
    if b is None:
        return None
    table = None if b.speakers is None else read_speakers(b.speakers)
    where = "voxceleb paths" if b.speakers is None else str(b.speakers)
    enr, test = trial_speakers(inputs.trials, table, source=where)
    r = speaker_bootstrap(inputs.scores(), inputs.trials.target, enr, test,
                          resamples=b.resamples, seed=b.seed, level=b.level)  # fmt: skip
    return {
        "method": "speakers",
        "resamples": b.resamples,
        "seed": b.seed,
        "level": b.level,
        "speakers": "voxceleb paths" if b.speakers is None else b.speakers.name,
        "speakers_sha256": b.speakers_sha256,
        "n_speakers": r.n_speakers,
        "skipped": r.skipped,
        "version": BOOTSTRAP_VERSION,
        "intervals": {k: None if v is None else list(v) for k, v in r.intervals.items()},
    }


def _norm_record(
    n: SpeakerScoreNorm | None, cohort: npt.NDArray[np.float64] | None
) -> ScoreNormRecord | None:
    if n is None or cohort is None:
        return None
    return {
        "method": n.method,
        "top_n": n.top_n,
        "cohort": n.cohort.name,
        "cohort_sha256": n.cohort_sha256,
        "n_cohort": int(cohort.shape[0]),
        "version": NORMALIZATION_VERSION,
    }


def cell_det(cell_id: str, index: int, inputs: CellInputs) -> str:
    """The cell's DET curve (probit axes) with the EER and both minDCF points marked."""
    scores = inputs.scores()
    op = operating_points(scores, inputs.trials.target)
    eer = eer_of_points(op)
    assert eer is not None  # a trial list has target and non-target trials (formats.trials)
    marks = [(f"EER {eer:.2%}", eer, eer)]
    for p in (0.01, 0.05):
        point = min_dcf_point(op, p)
        if point is not None:
            marks.append((f"minDCF point, p_target {p}", *point))
    return det_chart(
        op.false_alarms / op.n_nontarget, op.misses / op.n_target, marks,
        chart_id=f"det-{index}", title=f"DET curve: {cell_id}",
    )  # fmt: skip


#: Twin of each definition (:data:`DEFINITIONS`' names), called over our scores.
TWINS: Final[Mapping[str, Callable[[list[float], list[bool]], float | None]]] = {
    "eer": twin.equal_error_rate,
    "eer_rocch": twin.eer_rocch,
    "eer_pyannote": twin.eer_pyannote,
    "eer_speechbrain": twin.eer_speechbrain,
    "eer_kaldi": twin.eer_kaldi,
    "min_dcf_p0.01": lambda s, t: twin.min_dcf(s, t, p_target=0.01),
    "min_dcf_p0.05": lambda s, t: twin.min_dcf(s, t, p_target=0.05),
    "min_dcf_speechbrain_p0.01": lambda s, t: twin.min_dcf_speechbrain(s, t, p_target=0.01),
    "min_dcf_speechbrain_p0.05": lambda s, t: twin.min_dcf_speechbrain(s, t, p_target=0.05),
    "act_dcf_p0.01": lambda s, t: twin.act_dcf(s, t, p_target=0.01),
    "act_dcf_p0.05": lambda s, t: twin.act_dcf(s, t, p_target=0.05),
    "cllr": twin.cllr,
    "min_cllr": twin.min_cllr,
}
#: Definitions from integer counts in one exact step (or the toolkit's own float32 steps):
#: ours and the twin's agree to the last bit; the others sum costs or logs in another order.
EXACT: Final = frozenset(
    {"eer", "eer_rocch", "eer_pyannote", "eer_speechbrain", "eer_kaldi",
     "min_dcf_speechbrain_p0.01", "min_dcf_speechbrain_p0.05"}
)  # fmt: skip
#: How far a summed definition's twin may lie from ours.
DEFINITION_TOLERANCE: Final = 1e-12
#: The most trials the twin (pure Python: per-trial ``math.fsum`` cosines, fractions) sees;
#: a longer list is checked on a seeded subset of this many trials (:func:`twin_subset`).
TWIN_TRIALS: Final = 4_096
#: The seed of that subset (numpy's PCG64 ``Generator.choice`` without replacement, sorted).
TWIN_SEED: Final = 0


class DefinitionParity(TypedDict):
    """One definition over the trials the twin saw: ours, the twin's, and whether they agree."""

    ours: float | None
    twin: float | None
    tolerance: float  #: 0.0: to the last bit
    passed: bool


def twin_subset(n: int, target: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64] | None:
    """The trials the twin sees: every one (None) up to :data:`TWIN_TRIALS`, else that many
    drawn without replacement by ``numpy.random.default_rng(TWIN_SEED)``, in list order (a
    draw without both classes adds the first trial of the missing one)."""
    if n <= TWIN_TRIALS:
        return None
    pick = np.sort(np.random.default_rng(TWIN_SEED).choice(n, TWIN_TRIALS, replace=False))
    for flag in (True, False):
        if not (target[pick] == flag).any():
            pick = np.sort(np.append(pick[1:], np.flatnonzero(target == flag)[0]))
    return pick.astype(np.int64)


def definition_parity(scores: list[float], target: list[bool]) -> dict[str, DefinitionParity]:
    """Every definition with a twin: ours (:func:`compute_definitions`) against the twin's
    over the same scores."""
    ours = compute_definitions(np.asarray(scores, dtype=np.float64), np.asarray(target))
    out: dict[str, DefinitionParity] = {}
    for name, f in TWINS.items():
        mine, theirs = ours[name], f(scores, target)
        tol = 0.0 if name in EXACT else DEFINITION_TOLERANCE
        ok = (mine is None and theirs is None) or (
            mine is not None and theirs is not None and abs(mine - theirs) <= tol
        )
        out[name] = {"ours": mine, "twin": theirs, "tolerance": tol, "passed": ok}
    return out


def twin_parity(cell_id: str, inputs: CellInputs, eer: float) -> ScoreParity:
    """The twin's cosines against ours (within :data:`SCORE_TOLERANCE`), its EER and every
    other definition with a twin (:data:`TWINS`) over our scores (normalized as the cell says;
    the EER equal to ours to the last bit), on every trial or on :func:`twin_subset`'s."""
    pick = twin_subset(len(inputs.test), inputs.trials.target)
    enr, tst, flags = inputs.enrollment, inputs.test, inputs.trials.target
    if pick is not None:
        enr, tst, flags = enr[pick], tst[pick], flags[pick]
        eer_of = equal_error_rate(inputs.normalized_at(pick), flags)
        assert eer_of is not None  # twin_subset keeps both classes
        eer = eer_of
    ours = trial_scores(inputs.clips.embeds, enr, tst)
    theirs = twin.trial_scores(inputs.clips.embeds, enr, tst)
    target = flags.tolist()
    delta = float(np.max(np.abs(ours - np.asarray(theirs, dtype=np.float64))))
    ours_n = (inputs.normalized(ours) if pick is None else inputs.normalized_at(pick)).tolist()
    definitions = definition_parity(ours_n, target)
    of_ours = definitions["eer"]["twin"]
    n = inputs.score_norm
    if n is not None:
        theirs = twin.normalize_scores(theirs, enr, tst, inputs.clips.embeds, inputs.cohort,
                                       method=n.method, top_n=n.top_n)  # fmt: skip
    return {
        "cell": cell_id,
        "n_trials": len(target),
        "twin_subset_seed": None if pick is None else TWIN_SEED,
        "max_score_delta": delta,
        "score_tolerance": SCORE_TOLERANCE,
        "eer": eer,
        "twin_eer_of_our_scores": of_ours,
        "twin_eer": twin.equal_error_rate(theirs, target),
        "definitions": definitions,
        "passed": delta <= SCORE_TOLERANCE
        and of_ours == eer
        and all(d["passed"] for d in definitions.values()),
    }


# --- the kind -------------------------------------------------------------------------------


@dataclass
class SpeakerState(KindState):
    """A speaker-verification study between the steps of :class:`SpeakerVerificationKind`."""

    study: SpeakerVerificationStudy | None = None
    inputs: dict[str, CellInputs] = field(default_factory=dict)
    cells: dict[str, SpeakerBundleCell] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    parity: list[ScoreParity] = field(default_factory=list)
    det: dict[str, str] = field(default_factory=dict)  #: cell id -> its DET curve (SVG)


def _load(state: SpeakerState, cell: SpeakerCell, ctx: Context) -> None:
    try:
        state.inputs[cell.id] = load_cell(cell, ctx)
    except FileNotFoundError as exc:  # a declared dump that is not here: an incomplete study
        state.errors[cell.id] = f"dump {Path(str(exc.args[0])).name} is missing"
        state.failures.append(f"cell {cell.id}: {state.errors[cell.id]}")


def _golden(
    study: SpeakerVerificationStudy, cells: Mapping[str, SpeakerBundleCell], errors: dict[str, str]
) -> Summary:
    rows: list[ValueRow] = []
    for pub in study.published:
        reason = errors.get(pub.cell) or (None if pub.cell in cells else "not computed")
        got = _published_values(cells[pub.cell]) if reason is None else {}
        rows += [
            ValueRow(**r, provenance=pub.provenance)
            for r in value_rows(pub.cell, pub.values, pub.tolerance, got, reason, "eer")
        ]
    return summarize(rows)


def _published_values(cell: SpeakerBundleCell) -> dict[str, float]:
    """What a published value may name: the EER and every definition with a value."""
    got = {name: v for name, v in cell["definitions"].items() if v is not None}
    return {"eer": cell["eer"], **got}


def _definitions_table(
    study: SpeakerVerificationStudy, cells: Mapping[str, SpeakerBundleCell]
) -> Table:
    """Every definition of every cell: a row per cell, a column per definition."""
    columns = tuple(Column(d.name, False) for d in DEFINITIONS)
    rows = []
    for cell in study.cells:
        c = cells.get(cell.id)
        got = c["definitions"] if c is not None else {}
        rows.append((cell.id, tuple(got.get(d.name) for d in DEFINITIONS)))
    return Table(
        title="Speaker verification: every definition",
        columns=columns,
        rows=tuple(rows),
        row_header="cell",
        notes=(
            "each column is one definition of docs/metrics.md (the toolkit it equals: eer the "
            "ROC crossing, eer_rocch BOSARIS, eer_pyannote pyannote.metrics 4.2, "
            "eer_speechbrain and min_dcf_speechbrain_* speechbrain 1.1.2 (not normalized), "
            "eer_kaldi Kaldi compute-eer; min_dcf_p* normalized NIST/VoxSRC costs; act_dcf_*, "
            "cllr read the cosines as log-likelihood ratios); lower is better",
        ),
    )


def _tables(
    study: SpeakerVerificationStudy, cells: Mapping[str, SpeakerBundleCell], golden: Summary
) -> dict[str, Table]:
    columns = (
        Column("clips"),
        Column("target trials"),
        Column("non-target trials"),
        Column("EER", False),
    )
    rows = []
    for cell in study.cells:
        c = cells.get(cell.id)
        values = (
            (None,) * len(columns)
            if c is None
            else (c["n_clips"], c["target_trials"], c["nontarget_trials"], c["eer"])
        )
        rows.append((cell.id, values))
    main = Table(
        title="Speaker verification: equal error rate",
        columns=columns,
        rows=tuple(rows),
        row_header="cell",
        notes=(
            f"verification definitions {DEFINITIONS_VERSION}: a trial's score is the cosine "
            "of its two clips' embeddings (float64); the EER is where the false-acceptance "
            "and miss rates meet on the segments between operating points (ties accepted "
            "together); lower is better",
        ),
    )
    out = {
        "speaker_verification": main,
        "verification_definitions": _definitions_table(study, cells),
        "published": published_table(golden["rows"]),
    }
    if any(c["bootstrap"] is not None for c in cells.values()):
        out["speaker_verification_intervals"] = _intervals_table(study, cells)
    return out


def _intervals_table(
    study: SpeakerVerificationStudy, cells: Mapping[str, SpeakerBundleCell]
) -> Table:
    """Each bootstrapped cell's EER and minDCF beside their intervals over speakers."""
    names = ("eer", "min_dcf_p0.01", "min_dcf_p0.05")
    columns = tuple(Column(f"{n}{part}", False) for n in names for part in ("", " low", " high"))
    rows = []
    for cell in study.cells:
        c = cells.get(cell.id)
        b = None if c is None else c["bootstrap"]
        if c is None or b is None:
            continue
        values: list[float | None] = []
        for n in names:
            got = b["intervals"].get(n)
            values += [c["definitions"].get(n), *(got if got is not None else (None, None))]
        rows.append((cell.id, tuple(values)))
    return Table(
        title="Speaker verification: intervals over speakers",
        columns=columns,
        rows=tuple(rows),
        row_header="cell",
        notes=(
            "speaker-level bootstrap (docs/metrics.md, bootstrap definitions "
            f"{BOOTSTRAP_VERSION}): speakers resampled with replacement, each trial counted "
            "m_enrollment x m_test times; the interval is the quantiles of the resamples' "
            "values; the cell's bundle records resamples, seed, level and speakers",
        ),
    )


def _beside(values: Mapping[str, float | None]) -> str:
    """The definitions a speaker paper prints beside the EER, in words."""

    def show(name: str) -> str:
        v = values.get(name)
        return "-" if v is None else f"{v:.4f}"

    return (
        f"minDCF {show('min_dcf_p0.01')} (p_target 0.01) and {show('min_dcf_p0.05')} (0.05); "
        f"EER as BOSARIS' ROC hull {show('eer_rocch')}, pyannote {show('eer_pyannote')}, "
        f"speechbrain {show('eer_speechbrain')}, Kaldi {show('eer_kaldi')}; "
        f"minCllr {show('min_cllr')}"
    )


def _interval(b: BootstrapRecord | None, name: str) -> str:
    """`` [low, high]`` of a measure's bootstrap interval, or nothing."""
    got = None if b is None else b["intervals"].get(name)
    return "" if got is None else f" [{got[0]:.4f}, {got[1]:.4f}]"


def _bootstrap_words(b: BootstrapRecord | None) -> str:
    if b is None:
        return ""
    return (
        f"; intervals ({b['level']:.0%}) over {b['n_speakers']} speakers ({b['speakers']}), "
        f"{b['resamples']} resamples, seed {b['seed']}: minDCF p_target 0.01"
        f"{_interval(b, 'min_dcf_p0.01')}, 0.05{_interval(b, 'min_dcf_p0.05')}"
    )


def _report(
    study: SpeakerVerificationStudy,
    cells: Mapping[str, SpeakerBundleCell],
    tables: dict[str, Table],
    failures: list[str],
    det: Mapping[str, str],
) -> str:
    e = html.escape
    lines = [
        f"<p>{e(c['id'])}: EER {c['eer']:.4f}{e(_interval(c['bootstrap'], 'eer'))} "
        f"({c['eer']:.2%}) over {c['target_trials']} "
        f"target and {c['nontarget_trials']} non-target trials of {e(c['trials'])}; "
        f"{e(_beside(c['definitions']))}{e(_bootstrap_words(c['bootstrap']))}</p>"
        + det.get(c["id"], "")
        for c in cells.values()
    ]
    return kind_report(study.title, failures, tables, paragraphs=lines)


@register_kind
class SpeakerVerificationKind(StudyKind[SpeakerVerificationStudy, SpeakerState]):
    """The equal error rate of trial lists over clip embeddings (any audio encoder)."""

    name = "speaker-verification"
    bundle_schema = SPEAKER_BUNDLE  # how diff finds this kind's typed view of a bundle
    parse = staticmethod(parse_speaker_verification)  # its spec: .spec
    extracts = True

    def extraction(self, study: SpeakerVerificationStudy) -> StudyExtraction | None:
        return speaker_extraction(study)

    def load(self, study: SpeakerVerificationStudy, ctx: Context) -> SpeakerState:
        state = SpeakerState(study=study)
        for cell in study.cells:
            _load(state, cell, ctx)
        return state

    def compute(self, state: SpeakerState) -> None:
        assert state.study is not None
        for i, cell in enumerate(state.study.cells):
            if cell.id in state.inputs:
                state.cells[cell.id] = cell_record(cell, state.inputs[cell.id])
                state.det[cell.id] = cell_det(cell.id, i, state.inputs[cell.id])

    def check_parity(self, state: SpeakerState) -> None:
        for cell_id, record in state.cells.items():
            p = twin_parity(cell_id, state.inputs[cell_id], record["eer"])
            record_parity(state.parity, state.failures, cell_id, p)

    def compare_published(self, state: SpeakerState) -> Summary:
        assert state.study is not None
        return _golden(state.study, state.cells, state.errors)

    def tables(self, state: SpeakerState, golden: Summary) -> dict[str, Table]:
        assert state.study is not None
        return _tables(state.study, state.cells, golden)

    def bundle_part(
        self, state: SpeakerState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        study = state.study
        assert study is not None
        verification: SpeakerVerification = parity_verification(
            state.parity, len(study.cells), state.failures, golden
        )
        bundle: SpeakerBundle = {
            "schema": "audiorepro.speaker-verification-bundle/1",
            "study": {
                "name": study.name,
                "title": study.title,
                "definitions_version": DEFINITIONS_VERSION,
            },
            "cells": [state.cells[c.id] for c in study.cells if c.id in state.cells],
            "verification": verification,
        }
        inputs = {}
        for c in study.cells:
            if c.id in state.cells:
                rec = state.cells[c.id]
                inputs[input_name(c.trials, study.source)] = rec["trials_sha256"]
                if c.score_norm is not None:
                    inputs[input_name(c.score_norm.cohort, study.source)] = (
                        c.score_norm.cohort_sha256
                    )
                b = c.bootstrap
                if b is not None and b.speakers is not None and b.speakers_sha256 is not None:
                    inputs[input_name(b.speakers, study.source)] = b.speakers_sha256
                if c.extract is None and c.dump is not None:
                    inputs[input_name(c.dump, study.source)] = rec["dump_sha256"]
        report = _report(study, state.cells, tables, state.failures, state.det)
        return BundlePart(verification, report, cast(Mapping[str, object], bundle), [], inputs)

    def verify(self, study: SpeakerVerificationStudy, cache: Path) -> Summary:
        with tempfile.TemporaryDirectory() as tmp:
            ctx = Context(Path(tmp), cache)
            state = SpeakerState(study=study)
            needed = {p.cell for p in study.published}
            for cell in study.cells:
                if cell.id in needed:
                    _load(state, cell, ctx)
            self.compute(state)
            return _golden(study, state.cells, state.errors)

    def numbers(self, bundle: JsonObject) -> Iterator[NumberRecord]:
        yield from cell_records(bundle, "cells", classify=_classify, identities=_identities)
        yield from rest_records(bundle, ("cells",), _classify_rest)

    def records(self, bundle: JsonObject) -> list[Identity]:
        """What each cell depends on: an extracted dump's recorded meta (weights, encoder
        code, preprocessing, software; its clips with the trial list's hash as inputs) or a
        given dump's hash, and the trial list's hash; the run's definitions' version."""
        out = run_records(None, bundle["study"]["definitions_version"])
        for cell in bundle["cells"]:
            cid = str(cell["id"])
            inputs = pick(cell, ("trials_sha256",))
            if extracted(cell):
                weights, code, pre, clips, software = extraction_records(cid, cell["model_meta"])
                out += [weights, code, pre, software]
                inputs["clips"] = clips.value
            else:
                inputs |= pick(cell, ("dump_sha256",))
            out.append(identity(cid, "inputs", inputs))
        return out

    def moves(self, bundle: JsonObject, number: NumberRecord) -> Moves:
        """A cell's EER (and any measure of its scores): tier b, cosines of its embeddings,
        with no tolerance derived (rule None: a move under another machine is a change); its
        counts of clips and trials: tier a, moved by its inputs only; its dimension and dump
        meta tier a; a study-level number follows the cell its row names, else every cell."""
        where = number.where
        if not in_cell(where):
            return study_level(bundle, where, CELL_CAUSES, tier="b")
        cid = str(bundle["cells"][where[1]]["id"])
        if where[2] in _COUNTS:
            return Moves(cid, "a", keys(cid, ("inputs",), tier="a"))
        if where[2] in ("n_dims", "model_meta"):
            return Moves(cid, "a", keys(cid, CELL_CAUSES, tier="a"))
        return Moves(cid, "b", keys(cid, CELL_CAUSES, tier="b"))


#: A cell's counts of clips and trials: what its inputs (clips, trial list) alone move.
_COUNTS: Final = frozenset({"n_clips", "target_trials", "nontarget_trials", "n_trials"})


def _classify(cell: JsonObject, below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A cell's EER and every definition are lower-better, tier b (cosines of embeddings:
    extracted ones follow the CPU, and a reordering of two scores closer than their tolerance
    moves them); its counts and the dump's meta are no computed value."""
    if below == ("eer",) or (len(below) == 2 and below[0] == "definitions"):
        return ("lower", "b")
    if below[:2] == ("bootstrap", "intervals"):  # interval bounds: no better side
        return (None, "b")
    return (None, None)


def _classify_rest(below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    if "metric_parity" in below:
        return None, "b"
    return None, None


def _identities(cell: JsonObject) -> Identities:
    meta = cell.get("model_meta") or {}
    norm = cell.get("score_norm")
    settings: tuple[str, ...] = (f"verification definitions={DEFINITIONS_VERSION}",)
    files: tuple[str, ...] = (str(cell.get("trials_sha256")),)
    if isinstance(norm, dict):
        settings += (
            f"score_norm={norm.get('method')} top_n={norm.get('top_n')} "
            f"version={norm.get('version')}",
        )
        files += (str(norm.get("cohort_sha256")),)
    boot = cell.get("bootstrap")
    if isinstance(boot, dict):
        settings += (
            f"bootstrap resamples={boot.get('resamples')} seed={boot.get('seed')} "
            f"level={boot.get('level')} version={boot.get('version')}",
        )
        files += (str(boot.get("speakers_sha256")),)
    return Identities(
        dump=cell.get("dump_sha256"),
        weights=meta.get("weights_sha256"),
        settings=settings,
        files=files,
    )

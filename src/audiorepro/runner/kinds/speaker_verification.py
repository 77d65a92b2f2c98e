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
from collections.abc import Iterator, Mapping
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
from audiorepro.formats.trials import Trials, read_trials
from audiorepro.metrics.verification import (
    DEFINITIONS_VERSION,
    eer_of_points,
    min_dcf_point,
    operating_points,
    trial_scores,
)
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
from audiorepro.specs.study import SpeakerCell, SpeakerScoreNorm, SpeakerVerificationStudy

SPEAKER_BUNDLE: Final = "audiorepro.speaker-verification-bundle/1"
#: How far the twin's cosines (``math.fsum`` over Python floats) may lie from ours (float64
#: einsum): both are float64 sums of 256-odd products of unit vectors' entries.
SCORE_TOLERANCE: Final = 1e-12


class ScoreParity(TypedDict):
    """One cell against the independent twin."""

    cell: str
    n_trials: int
    max_score_delta: float  #: the largest |our cosine - the twin's| over the trials
    score_tolerance: float
    eer: float
    twin_eer_of_our_scores: float | None  #: must equal ``eer`` to the last bit
    twin_eer: float | None  #: the twin's EER over its own cosines (recorded)
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

    def scores(self) -> npt.NDArray[np.float64]:
        """Each trial's score: the cosine, normalized over the cohort when the cell says so."""
        raw = trial_scores(self.clips.embeds, self.enrollment, self.test)
        return self.normalized(raw)

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
    """A trial's score is a cosine, undefined for an all-zero embedding (and for one whose
    norm overflows float64, which would make every cosine 0): refused, one line naming the
    dump and the first such clip that a trial uses (a clip no trial uses is not read)."""
    used = np.unique(rows)
    norms = np.linalg.norm(clips.embeds[used], axis=1)
    bad = used[~(np.isfinite(norms) & (norms > 0))]
    if bad.size:
        k = int(bad[0])
        what = "is all zero" if not np.any(clips.embeds[k]) else "has a norm over float64's range"
        raise UserError(
            f"row {k} (clip {clips.ids[k]!r}) {what}; a trial's score is the cosine of two "
            "embeddings, which needs a non-zero finite norm",
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
        "model_meta": inputs.meta,
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


def twin_parity(cell_id: str, inputs: CellInputs, eer: float) -> ScoreParity:
    """The twin's cosines against ours (within :data:`SCORE_TOLERANCE`) and its EER over our
    scores (normalized as the cell says; equal to ours: both are one exact fraction rounded
    once)."""
    ours = trial_scores(inputs.clips.embeds, inputs.enrollment, inputs.test)
    theirs = twin.trial_scores(inputs.clips.embeds, inputs.enrollment, inputs.test)
    target = inputs.trials.target.tolist()
    delta = float(np.max(np.abs(ours - np.asarray(theirs, dtype=np.float64))))
    of_ours = twin.equal_error_rate(inputs.normalized(ours).tolist(), target)
    n = inputs.score_norm
    if n is not None:
        theirs = twin.normalize_scores(theirs, inputs.enrollment, inputs.test,
                                       inputs.clips.embeds, inputs.cohort, method=n.method,
                                       top_n=n.top_n)  # fmt: skip
    return {
        "cell": cell_id,
        "n_trials": len(target),
        "max_score_delta": delta,
        "score_tolerance": SCORE_TOLERANCE,
        "eer": eer,
        "twin_eer_of_our_scores": of_ours,
        "twin_eer": twin.equal_error_rate(theirs, target),
        "passed": delta <= SCORE_TOLERANCE and of_ours == eer,
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
    return {
        "speaker_verification": main,
        "verification_definitions": _definitions_table(study, cells),
        "published": published_table(golden["rows"]),
    }


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


def _report(
    study: SpeakerVerificationStudy,
    cells: Mapping[str, SpeakerBundleCell],
    tables: dict[str, Table],
    failures: list[str],
    det: Mapping[str, str],
) -> str:
    e = html.escape
    lines = [
        f"<p>{e(c['id'])}: EER {c['eer']:.4f} ({c['eer']:.2%}) over {c['target_trials']} "
        f"target and {c['nontarget_trials']} non-target trials of {e(c['trials'])}; "
        f"{e(_beside(c['definitions']))}</p>" + det.get(c["id"], "")
        for c in cells.values()
    ]
    return kind_report(study.title, failures, tables, paragraphs=lines)


@register_kind
class SpeakerVerificationKind(StudyKind[SpeakerVerificationStudy, SpeakerState]):
    """The equal error rate of trial lists over clip embeddings (any audio encoder)."""

    name = "speaker-verification"
    bundle_schema = SPEAKER_BUNDLE  # how diff finds this kind's typed view of a bundle
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
            state.parity.append(p)
            if not p["passed"]:
                state.failures.append(f"metric parity failed for cell {cell_id}")

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
        parity = state.parity
        passed = len(parity) == len(study.cells) and all(p["passed"] for p in parity)
        verification: SpeakerVerification = {
            "metric_parity": {"cells": parity, "passed": passed},
            "metric_parity_passed": passed,
            "failures": state.failures,
            "golden": golden,
        }
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
    return Identities(
        dump=cell.get("dump_sha256"),
        weights=meta.get("weights_sha256"),
        settings=settings,
        files=files,
    )

"""A speaker-verification study -> its output folder.

Per cell: the clip embeddings (a dump's ``audio_embeds`` and ``audio_ids``, or every clip of
an audio folder embedded by any encoder through the extraction cache as an audio-only dump,
copied to ``dumps/<cell>.npz``), a trial list (:mod:`audiorepro.formats.trials`: pairs of
clips, target or not), each trial's score (the cosine of its two embeddings) and the equal
error rate over the trials (:mod:`audiorepro.metrics.verification`); parity against the
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

from audiorepro.checks.verify import Summary, ValueRow, summarize, value_rows
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import JsonObject, JsonValue, atomic_write_bytes, parse_json, slug
from audiorepro.formats.dump import read_npz
from audiorepro.formats.probe_inputs import ClipEmbeddings, read_clip_embeddings
from audiorepro.formats.trials import Trials, read_trials
from audiorepro.metrics.verification import DEFINITIONS_VERSION, equal_error_rate, trial_scores
from audiorepro.reference import verification as twin
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
from audiorepro.specs.study import SpeakerCell, SpeakerVerificationStudy

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
    return CellInputs(clips, trials, i, j, rel, sha256_file(path), _dump_meta(path))


def cell_record(cell: SpeakerCell, inputs: CellInputs) -> SpeakerBundleCell:
    """A cell's numbers: the trials' scores and their equal error rate."""
    scores = trial_scores(inputs.clips.embeds, inputs.enrollment, inputs.test)
    target = inputs.trials.target
    eer = equal_error_rate(scores, target)
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
        "model_meta": inputs.meta,
    }


def twin_parity(cell_id: str, inputs: CellInputs, eer: float) -> ScoreParity:
    """The twin's cosines against ours (within :data:`SCORE_TOLERANCE`) and its EER over our
    scores (equal to ours: both are one exact fraction rounded once)."""
    ours = trial_scores(inputs.clips.embeds, inputs.enrollment, inputs.test)
    theirs = twin.trial_scores(inputs.clips.embeds, inputs.enrollment, inputs.test)
    target = inputs.trials.target.tolist()
    delta = float(np.max(np.abs(ours - np.asarray(theirs, dtype=np.float64))))
    of_ours = twin.equal_error_rate(ours.tolist(), target)
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
        got = {"eer": cells[pub.cell]["eer"]} if reason is None else {}
        rows += [
            ValueRow(**r, provenance=pub.provenance)
            for r in value_rows(pub.cell, pub.values, pub.tolerance, got, reason, "eer")
        ]
    return summarize(rows)


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
    return {"speaker_verification": main, "published": published_table(golden["rows"])}


def _report(
    study: SpeakerVerificationStudy,
    cells: Mapping[str, SpeakerBundleCell],
    tables: dict[str, Table],
    failures: list[str],
) -> str:
    e = html.escape
    lines = [
        f"<p>{e(c['id'])}: EER {c['eer']:.4f} ({c['eer']:.2%}) over {c['target_trials']} "
        f"target and {c['nontarget_trials']} non-target trials of {e(c['trials'])}</p>"
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
        for cell in state.study.cells:
            if cell.id in state.inputs:
                state.cells[cell.id] = cell_record(cell, state.inputs[cell.id])

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
                inputs[c.trials.name] = rec["trials_sha256"]
                if c.extract is None:
                    inputs[rec["dump"]] = rec["dump_sha256"]
        report = _report(study, state.cells, tables, state.failures)
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


def _classify(cell: JsonObject, below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A cell's EER is lower-better, tier b (cosines of embeddings: extracted ones follow the
    CPU, and a reordering of two scores closer than their tolerance moves it); its counts and
    the dump's meta are no computed value."""
    return ("lower", "b") if below == ("eer",) else (None, None)


def _classify_rest(below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    if "metric_parity" in below:
        return None, "b"
    return None, None


def _identities(cell: JsonObject) -> Identities:
    meta = cell.get("model_meta") or {}
    return Identities(
        dump=cell.get("dump_sha256"),
        weights=meta.get("weights_sha256"),
        settings=(f"verification definitions={DEFINITIONS_VERSION}",),
        files=(str(cell.get("trials_sha256")),),
    )

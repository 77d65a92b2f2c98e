"""A linear-probe study -> its output folder; and ``audiorepro linear-probe DUMP``.

Per cell: the clip embeddings (a dump's ``audio_embeds`` and ``audio_ids``, or every clip of
an audio folder embedded by any encoder, a text tower or not, through the extraction cache as
an audio-only dump, as a speaker-verification cell extracts it),
the labels (:mod:`audiorepro.formats.probe_inputs`), the protocol's splits (leave one fold
out, or a declared train/test split), the ``linear-v1`` probe on every split
(:mod:`audiorepro.metrics.linear_probe`), each split's test predictions written in the
existing prediction-file format (``predictions/<cell>/<fold>.npz``: ``cls_names``,
``cls_true``, ``cls_pred``), so that ``probe-metrics`` and a probe study read them unchanged;
the classification metrics of each split and of the pooled predictions (with the
fold-grouped bootstrap interval), parity against the independent SciPy twin
(:mod:`audiorepro.reference.linear_probe`) and against the written files re-read, published
values, tables, ``report.html``, ``bundle.json.gz``, ``verification.json`` and the manifest.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

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
from audiorepro.core.errors import UserError, WriteError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import JsonObject, JsonValue, atomic_write_bytes, npz_bytes, slug
from audiorepro.formats.probe_inputs import (
    Aligned,
    ClipEmbeddings,
    Labels,
    align,
    read_clip_embeddings,
    read_labels,
)
from audiorepro.metrics.classification import (
    classification_report,
    group_bootstrap_accuracy_ci,
)
from audiorepro.metrics.linear_probe import (
    DEFINITIONS_VERSION,
    TWIN_BAND,
    DefinitionRecord,
    FoldResult,
    Split,
    declared_split,
    definition_record,
    leave_one_fold_out,
    mean_accuracy,
    probe_splits,
    top_two_margin,
)
from audiorepro.metrics.probe import probe_report_file
from audiorepro.metrics.probe_records import ClassificationReport
from audiorepro.reference.linear_probe import reference_linear_v1
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
    audio_models,
    audio_read_only,
    cached_audio_cell,
)
from audiorepro.runner.kinds.linear_probe.spec import (
    LinearProbeCell,
    LinearProbeStudy,
    parse_linear_probe,
)
from audiorepro.runner.output.outputs import BootstrapRecord
from audiorepro.specs.schema import distinct_file_names
from audiorepro.specs.study import Bootstrap

LINEAR_PROBE_BUNDLE: Final = "audiorepro.linear-probe-bundle/1"
POOLED: Final = ("accuracy", "balanced_accuracy", "macro_f1")


class TwinRow(TypedDict):
    """One split against the SciPy twin and its prediction file re-read."""

    fold: str
    accuracy: float
    twin_accuracy: float
    tolerance: float  #: the share of test items inside the twin's near-tie band
    disagreements: int
    disagreements_outside_band: int
    predictions_file_accuracy: Any  #: probe-metrics' accuracy of the written file
    passed: bool


class TwinCell(TypedDict):
    cell: str
    rows: list[TwinRow]
    passed: bool


class TwinParity(TypedDict):
    cells: list[TwinCell]
    passed: bool


class LinearProbeVerification(TypedDict):
    """``verification.json`` of a linear-probe study."""

    metric_parity: TwinParity
    metric_parity_passed: bool
    failures: list[str]
    golden: Summary


class LinearProbeFold(TypedDict):
    """One split of a cell: its probe and its test predictions' numbers."""

    fold: str
    n_train: int
    n_test: int
    C: float
    accuracy: float
    near_ties: int  #: test items within NEAR_TIE of a tie (tier b: may move by these)
    min_margin: float
    predictions: str  #: the prediction file in the output folder
    predictions_sha256: str
    report: ClassificationReport  #: the classification report (probe-metrics' classification)


class PooledReport(ClassificationReport):
    """The pooled predictions' classification report and the fold-bootstrap interval of its
    accuracy (None: undefined)."""

    accuracy_ci_fold_bootstrap: list[float] | None


class LinearProbeBundleCell(TypedDict):
    """One cell of the bundle: its inputs, probe, splits, mean and pooled numbers."""

    id: str
    model: str
    dump: str  #: the dump's file name (given) or its path in the output folder (extracted)
    dump_sha256: str
    labels: str
    labels_sha256: str
    fold_column: str
    protocol: Any  #: "leave-one-fold-out" or {train, test}
    n_clips: int
    n_dims: int
    embeds_dtype: str
    classes: list[str]
    probe: DefinitionRecord  #: the definition, its version, C or grid, scikit-learn's version
    folds: list[LinearProbeFold]
    mean_accuracy: float
    pooled: PooledReport  #: the pooled predictions' report, fold-bootstrap interval
    model_meta: dict[str, JsonValue]  #: the dump's meta_json


class LinearProbeStudyRecord(TypedDict):
    """The study in its bundle: name, title, definitions version, bootstrap."""

    name: str
    title: str
    definitions_version: str
    bootstrap: BootstrapRecord


class LinearProbeBundle(TypedDict):
    """``bundle.json.gz`` of a linear-probe study (decompressed)."""

    schema: Literal["audiorepro.linear-probe-bundle/1"]
    study: LinearProbeStudyRecord
    cells: list[LinearProbeBundleCell]
    verification: LinearProbeVerification


@dataclass(frozen=True)
class CellInputs:
    """One cell's embeddings, labels and splits, and the files they came from."""

    clips: ClipEmbeddings
    labels: Labels
    aligned: Aligned
    splits: list[Split]
    dump_rel: str  #: the dump's name (a given dump) or its path in OUT (an extracted one)
    dump_sha256: str
    meta: dict[str, JsonValue]


def cell_splits(cell: LinearProbeCell, labels: Labels, aligned: Aligned) -> list[Split]:
    """The protocol's splits over the dump's clips; a fold the labels lack, or a split with an
    empty side or a training side of one class, is one line naming the labels file."""
    where = str(cell.labels)
    if cell.split is None:
        if len(labels.folds) < 2:
            raise UserError(
                f"has {len(labels.folds)} fold(s) in column {cell.folds!r}; leave "
                "one fold out needs at least two",
                source=where,
                key=cell.folds,
            )
        splits = leave_one_fold_out(aligned.folds, labels.folds)
    else:
        for f in (*cell.split[0], *cell.split[1]):
            if f not in labels.folds:
                raise UserError(
                    f"has no fold {f!r} (folds: {', '.join(labels.folds)})",
                    source=where,
                    key=cell.folds,
                )
        splits = declared_split(aligned.folds, *cell.split)
    # Each split's predictions go to predictions/<cell>/<slug(fold)>.npz: two fold values
    # that slug alike ("a b", "a_b") would write one file, the second over the first.
    distinct_file_names(
        [(f"{cell.folds} column", s.name) for s in splits], source=where, what="a fold value"
    )
    for s in splits:
        if s.test.size == 0 or np.unique(aligned.y[s.train]).size < 2:
            raise UserError(
                f"leaves split {s.name!r} without test clips or with one training "
                "class; a probe needs both",
                source=where,
                key=cell.folds,
            )
    return splits


def audio_cell(cell: LinearProbeCell) -> AudioCell:
    """An extraction cell as an audio-only extraction of its folder: a probe needs the clips'
    embeddings only, so any encoder runs it, a text tower or not."""
    e = cell.extract
    assert e is not None and cell.audio is not None
    return AudioCell(cell.id, e.model, e.registry, e.settings, e.device, cell.audio)


def linear_probe_extraction(study: LinearProbeStudy) -> StudyExtraction | None:
    """The extraction cells of a linear-probe study as the executors see them (local
    ``--jobs``, Slurm arrays, ``slurm-template``, ``extract-part``): each one an audio-only
    extraction of its folder; None when every cell names a dump."""
    cells = [audio_cell(c) for c in study.cells if c.extract is not None]
    if not cells:
        return None
    read_only = {study.source.parent.resolve(), *audio_read_only(cells)}
    read_only |= {c.labels.resolve().parent for c in study.cells if c.extract is not None}
    return StudyExtraction(
        study.name,
        study.source,
        tuple(map(audio_cell_extraction, cells)),
        frozenset(read_only),
        audio_models(cells),
    )


def load_cell(cell: LinearProbeCell, study: LinearProbeStudy, ctx: Context) -> CellInputs:
    """A cell's inputs (an extracted dump is copied to ``dumps/<cell>.npz``)."""
    if cell.extract is not None:
        rel = f"dumps/{slug(cell.id)}.npz"
        cached = cached_audio_cell(audio_cell(cell), ctx.cache)
        atomic_write_bytes(ctx.out / rel, cached.read_bytes())
        path = ctx.out / rel
    else:
        assert cell.dump is not None
        if not cell.dump.exists():
            raise FileNotFoundError(cell.dump)
        path, rel = cell.dump, cell.dump.name
    clips = read_clip_embeddings(path)
    labels = read_labels(cell.labels, fold_column=cell.folds)
    aligned = align(labels, clips, labels_source=str(cell.labels))
    splits = cell_splits(cell, labels, aligned)
    meta = _dump_meta(path)
    return CellInputs(clips, labels, aligned, splits, rel, sha256_file(path), meta)


def _dump_meta(path: Path) -> dict[str, JsonValue]:
    """The dump's ``meta_json`` as a dict, when it has one that parses (else empty)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "meta_json" not in npz.files:
                return {}
            meta = json.loads(str(npz["meta_json"]))
    except (ValueError, OSError):
        return {}
    return meta if isinstance(meta, dict) else {}


def predictions_arrays(
    classes: tuple[str, ...], true: npt.ArrayLike, pred: npt.ArrayLike
) -> dict[str, npt.NDArray[np.str_] | npt.NDArray[np.int64]]:
    """One split's test predictions as a prediction file's classification section."""
    return {
        "cls_names": np.asarray(classes, dtype=str),
        "cls_true": np.asarray(true, dtype=np.int64),
        "cls_pred": np.asarray(pred, dtype=np.int64),
    }


def fold_record(r: FoldResult, inputs: CellInputs, rel: str, sha: str) -> LinearProbeFold:
    """One split's numbers as the bundle holds them."""
    true = inputs.aligned.y[r.split.test]
    return {
        "fold": r.split.name,
        "n_train": int(r.split.train.size),
        "n_test": int(r.split.test.size),
        "C": r.fit.c,
        "accuracy": r.accuracy,
        "near_ties": r.near_ties,
        "min_margin": r.min_margin,
        "predictions": rel,
        "predictions_sha256": sha,
        "report": classification_report(true, r.fit.pred, class_names=list(inputs.labels.classes)),
    }


def cell_record(
    cell: LinearProbeCell,
    inputs: CellInputs,
    results: list[FoldResult],
    folds: list[LinearProbeFold],
    bootstrap: Bootstrap,
) -> LinearProbeBundleCell:
    """A cell's numbers: every split, their mean, the pooled predictions' metrics."""
    true = np.concatenate([inputs.aligned.y[r.split.test] for r in results])
    pred = np.concatenate([r.fit.pred for r in results])
    groups = [r.split.name for r in results for _ in range(r.split.test.size)]
    report = classification_report(true, pred, class_names=list(inputs.labels.classes))
    ci = group_bootstrap_accuracy_ci(
        true,
        pred,
        groups,
        n_resamples=bootstrap.resamples,
        seed=bootstrap.seed,
        level=bootstrap.level,
    )
    pooled: PooledReport = {
        **report,
        "accuracy_ci_fold_bootstrap": None if ci is None else list(ci),
    }
    protocol: Any = (
        "leave-one-fold-out"
        if cell.split is None
        else {"train": list(cell.split[0]), "test": list(cell.split[1])}
    )
    return {
        "id": cell.id,
        "model": cell.model,
        "dump": inputs.dump_rel,
        "dump_sha256": inputs.dump_sha256,
        "labels": cell.labels.name,
        "labels_sha256": sha256_file(cell.labels),
        "fold_column": cell.folds,
        "protocol": protocol,
        "n_clips": len(inputs.clips.ids),
        "n_dims": int(inputs.clips.embeds.shape[1]),
        "embeds_dtype": inputs.clips.dtype,
        "classes": list(inputs.labels.classes),
        "probe": definition_record(None if cell.grid else cell.c, cell.grid),
        "folds": folds,
        "mean_accuracy": mean_accuracy(results),
        "pooled": pooled,
        "model_meta": inputs.meta,
    }


def reproduced(cell: LinearProbeBundleCell) -> dict[str, float]:
    """A cell's published names -> values (mean_accuracy, fold/<f>/accuracy, pooled/...)."""
    out = {"mean_accuracy": float(cell["mean_accuracy"])}
    out.update({f"fold/{f['fold']}/accuracy": float(f["accuracy"]) for f in cell["folds"]})
    pooled = {m: cell["pooled"][m] for m in POOLED}
    out.update({f"pooled/{m}": float(v) for m, v in pooled.items() if v is not None})
    return out


def twin_parity(
    cell_id: str,
    inputs: CellInputs,
    results: list[FoldResult],
    out: Path,
    folds: list[LinearProbeFold],
) -> TwinCell:
    """Per split: the SciPy twin's predictions against scikit-learn's (equal outside the
    twin's near-tie band, accuracies within the band's share), and the written prediction
    file re-read by ``probe-metrics``' code (its accuracy equal to the split's)."""
    rows: list[TwinRow] = []
    x, y = inputs.clips.embeds, inputs.aligned.y
    for r, f in zip(results, folds, strict=True):
        s = r.split
        pred, scores = reference_linear_v1(x[s.train], y[s.train], x[s.test], c=r.fit.c)
        twin = np.asarray(pred, dtype=np.int64)
        band = top_two_margin(scores) < TWIN_BAND
        outside = int(np.count_nonzero((twin != r.fit.pred) & ~band))
        twin_acc = int(np.count_nonzero(twin == y[s.test])) / int(s.test.size)
        tolerance = int(np.count_nonzero(band)) / int(s.test.size)
        reread = probe_report_file(out / f["predictions"])["classification"]["accuracy"]
        rows.append(
            {
                "fold": s.name,
                "accuracy": r.accuracy,
                "twin_accuracy": twin_acc,
                "tolerance": tolerance,
                "disagreements": int(np.count_nonzero(twin != r.fit.pred)),
                "disagreements_outside_band": outside,
                "predictions_file_accuracy": reread,
                "passed": outside == 0
                and abs(twin_acc - r.accuracy) <= tolerance
                and reread == r.accuracy,
            }
        )
    return {"cell": cell_id, "rows": rows, "passed": all(r["passed"] for r in rows)}


@dataclass
class LinearProbeState(KindState):
    """A linear-probe study between the steps of :class:`LinearProbeKind`."""

    study: LinearProbeStudy | None = None
    ctx: Context | None = None
    inputs: dict[str, CellInputs] = field(default_factory=dict)
    results: dict[str, list[FoldResult]] = field(default_factory=dict)
    cells: dict[str, LinearProbeBundleCell] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    parity: list[TwinCell] = field(default_factory=list)


def _load(
    study: LinearProbeStudy, ctx: Context, state: LinearProbeState, cell: LinearProbeCell
) -> None:
    try:
        state.inputs[cell.id] = load_cell(cell, study, ctx)
    except FileNotFoundError as exc:  # a declared dump that is not here: an incomplete study
        state.errors[cell.id] = f"dump {Path(str(exc.args[0])).name} is missing"
        state.failures.append(f"cell {cell.id}: {state.errors[cell.id]}")


def compute_cell(
    cell: LinearProbeCell, inputs: CellInputs, out: Path, bootstrap: Bootstrap
) -> tuple[list[FoldResult], LinearProbeBundleCell]:
    """Every split's probe, its prediction file written under ``out``, the cell's record."""
    results = probe_splits(
        inputs.clips.embeds, inputs.aligned.y, inputs.splits, c=cell.c, grid=cell.grid
    )
    folds: list[LinearProbeFold] = []
    for r in results:
        rel = f"predictions/{slug(cell.id)}/{slug(r.split.name)}.npz"
        arrays = predictions_arrays(
            inputs.labels.classes, inputs.aligned.y[r.split.test], r.fit.pred
        )
        atomic_write_bytes(out / rel, npz_bytes(arrays))
        folds.append(fold_record(r, inputs, rel, sha256_file(out / rel)))
    return results, cell_record(cell, inputs, results, folds, bootstrap)


def _golden(
    study: LinearProbeStudy, cells: Mapping[str, LinearProbeBundleCell], errors: dict[str, str]
) -> Summary:
    rows: list[ValueRow] = []
    for pub in study.published:
        reason = errors.get(pub.cell) or (None if pub.cell in cells else "not computed")
        got = reproduced(cells[pub.cell]) if reason is None else {}
        rows += [
            ValueRow(**r, provenance=pub.provenance)
            for r in value_rows(pub.cell, pub.values, pub.tolerance, got, reason, "linear-v1")
        ]
    return summarize(rows)


def _tables(
    study: LinearProbeStudy, cells: Mapping[str, LinearProbeBundleCell], golden: Summary
) -> dict[str, Table]:
    names = list(dict.fromkeys(f["fold"] for c in cells.values() for f in c["folds"]))
    columns = (
        Column("mean_accuracy", True),
        *(Column(f"fold {n}", True) for n in names),
        *(Column(f"pooled {m}", True) for m in POOLED),
    )
    rows: list[tuple[str, tuple[float | None, ...]]] = []
    for cell in study.cells:
        c = cells.get(cell.id)
        if c is None:
            rows.append((cell.id, tuple(None for _ in columns)))
            continue
        by = {f["fold"]: f["accuracy"] for f in c["folds"]}
        rows.append(
            (
                cell.id,
                (
                    c["mean_accuracy"],
                    *(by.get(n) for n in names),
                    *(c["pooled"][m] for m in POOLED),
                ),
            )
        )
    main = Table(
        title="Linear probe (linear-v1): accuracy per held-out fold",
        columns=columns,
        rows=tuple(rows),
        row_header="cell",
        notes=(
            f"linear-v1 (linear-probe definitions {DEFINITIONS_VERSION}): standardized "
            "float64 features, LogisticRegression(C, lbfgs, max_iter=1000, tol=1e-6); "
            "mean_accuracy is the unweighted mean over the splits",
        ),
    )
    published = published_table(golden["rows"])
    return {"linear_probe": main, "published": published}


def _report(study: LinearProbeStudy, tables: dict[str, Table], failures: list[str]) -> str:
    return kind_report(study.title, failures, tables)


@register_kind
class LinearProbeKind(StudyKind[LinearProbeStudy, LinearProbeState]):
    """Linear probes on clip embeddings, fold by fold, re-derived from the embeddings."""

    name = "linear-probe"
    bundle_schema = LINEAR_PROBE_BUNDLE  # how diff finds this kind's typed view of a bundle
    parse = staticmethod(parse_linear_probe)  # its spec: .spec
    # An extraction cell (an ESC-50-form folder) goes through the cache in ``load``, and
    # through the executors (Slurm arrays) by :meth:`extraction`.
    extracts = True

    def load(self, study: LinearProbeStudy, ctx: Context) -> LinearProbeState:
        state = LinearProbeState(study=study, ctx=ctx)
        for cell in study.cells:
            try:
                _load(study, ctx, state, cell)
            except WriteError:
                raise
        return state

    def compute(self, state: LinearProbeState) -> None:
        assert state.study is not None and state.ctx is not None
        for cell in state.study.cells:
            if cell.id in state.inputs:
                results, record = compute_cell(
                    cell, state.inputs[cell.id], state.ctx.out, state.study.bootstrap
                )
                state.results[cell.id], state.cells[cell.id] = results, record

    def check_parity(self, state: LinearProbeState) -> None:
        assert state.ctx is not None
        for cell_id, results in state.results.items():
            p = twin_parity(
                cell_id,
                state.inputs[cell_id],
                results,
                state.ctx.out,
                state.cells[cell_id]["folds"],
            )
            record_parity(state.parity, state.failures, cell_id, p)

    def compare_published(self, state: LinearProbeState) -> Summary:
        assert state.study is not None
        return _golden(state.study, state.cells, state.errors)

    def tables(self, state: LinearProbeState, golden: Summary) -> dict[str, Table]:
        assert state.study is not None
        return _tables(state.study, state.cells, golden)

    def bundle_part(
        self, state: LinearProbeState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        assert state.study is not None
        study = state.study
        verification: LinearProbeVerification = parity_verification(
            state.parity, len(study.cells), state.failures, golden
        )
        b = study.bootstrap
        cells = [state.cells[c.id] for c in study.cells if c.id in state.cells]
        bundle: LinearProbeBundle = {
            "schema": "audiorepro.linear-probe-bundle/1",
            "study": {
                "name": study.name,
                "title": study.title,
                "definitions_version": DEFINITIONS_VERSION,
                "bootstrap": {"resamples": b.resamples, "seed": b.seed, "level": b.level},
            },
            "cells": cells,
            "verification": verification,
        }
        inputs = {}
        for c in study.cells:
            if c.id in state.cells:
                rec = state.cells[c.id]
                inputs[input_name(c.labels, study.source)] = rec["labels_sha256"]
                if c.extract is None and c.dump is not None:
                    inputs[input_name(c.dump, study.source)] = rec["dump_sha256"]
        return BundlePart(
            verification, _report(study, tables, state.failures), bundle, [], inputs=inputs
        )

    def extraction(self, study: LinearProbeStudy) -> StudyExtraction | None:
        return linear_probe_extraction(study)

    def verify(self, study: LinearProbeStudy, cache: Path) -> Summary:
        with tempfile.TemporaryDirectory() as tmp:
            ctx = Context(Path(tmp), cache)
            state = LinearProbeState(study=study, ctx=ctx)
            needed = {p.cell for p in study.published}
            for cell in study.cells:
                if cell.id in needed:
                    _load(study, ctx, state, cell)
            self.compute(state)
            return _golden(study, state.cells, state.errors)

    def numbers(self, bundle: JsonObject) -> Iterator[NumberRecord]:
        yield from cell_records(bundle, "cells", classify=_classify, identities=_identities)
        yield from rest_records(bundle, ("cells",), _classify_rest)

    def records(self, bundle: JsonObject) -> list[Identity]:
        """What each cell depends on: its embeddings (the dump's hash, and an extracted
        dump's recorded meta), its labels and protocol (inputs), and the probe's definition
        (definition, C or grid, scikit-learn's version: ``definitions``)."""
        study = bundle["study"]
        out = run_records({"bootstrap": study["bootstrap"]}, study["definitions_version"])
        for cell in bundle["cells"]:
            cid = str(cell["id"])
            if extracted(cell):
                weights, code, pre, _, software = extraction_records(cid, cell["model_meta"])
                out += [weights, code, pre, software]
            inputs = pick(cell, ("dump_sha256", "labels_sha256", "fold_column", "protocol"))
            out.append(identity(cid, "inputs", inputs))
            out.append(identity(cid, "definitions", cell.get("probe")))
        return out

    def moves(self, bundle: JsonObject, number: NumberRecord) -> Moves:
        """A cell's accuracies and reports: tier b (an iterative solver over float64 BLAS),
        on the cell's records and the probe's definition, no tolerance derived; its counts
        of clips and of each fold's clips: tier a, moved by its inputs (labels, folds,
        embeddings) only; its dimension tier a."""
        where = number.where
        causes = (*CELL_CAUSES, "definitions")
        if not in_cell(where):
            return study_level(bundle, where, causes, tier="b")
        cid = str(bundle["cells"][where[1]]["id"])
        if where[-1] in ("n_clips", "n_train", "n_test"):
            return Moves(cid, "a", keys(cid, ("inputs",), tier="a"))
        if where[2] == "n_dims":
            return Moves(cid, "a", keys(cid, CELL_CAUSES, tier="a"))
        return Moves(cid, "b", keys(cid, causes, tier="b"))


_COUNTS = frozenset(
    {"n", "n_train", "n_test", "n_clips", "n_dims", "near_ties", "confusion_matrix"}
)


def _classify(cell: JsonObject, below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A cell's number: an accuracy, recall, precision or F1 (higher, tier b: an iterative
    solver over float64 BLAS), a margin (tier b), a count or setting (no tier)."""
    if not below or below[0] in ("probe", "model_meta", "protocol"):
        return None, None
    if any(str(k) in _COUNTS for k in below) or "C" in below:
        return None, None
    if "min_margin" in below:
        return None, "b"
    return "higher", "b"


def _classify_rest(below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    if "metric_parity" in below:
        return None, "b"
    return None, None


def _identities(cell: JsonObject) -> Identities:
    probe = cell.get("probe") or {}
    settings = tuple(
        f"{k}={probe[k]}" for k in ("definition", "C", "grid", "scikit_learn") if k in probe
    )
    meta = cell.get("model_meta") or {}
    return Identities(
        dump=cell.get("dump_sha256"),
        weights=meta.get("weights_sha256"),
        settings=settings,
        files=(str(cell.get("labels_sha256")),),
    )

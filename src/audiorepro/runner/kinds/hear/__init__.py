"""A HEAR study (``kind = "hear"``) -> its output folder.

Per cell (one encoder over one HEAR task, :mod:`audiorepro.runner.kinds.hear.spec`): every clip of
every split is read as heareval reads it (soundfile, float32, at the module's sample rate from
``<rate>/<split>/``) and embedded by the module's own ``get_scene_embeddings`` in heareval's
embedding batches (a ``py:`` encoder's clip embedding, ``embed_audio``, one clip per call);
the embeddings are written in
heareval's layout to ``OUT/<cell id>/``
(:mod:`audiorepro.formats.hear_embeddings`), so heareval's own predictor can run on them too;
the predictor is trained on each of heareval's data splits
(:func:`audiorepro.formats.hear.data_splits`: train/valid/test, or each fold tested in turn)
and the task's scores (:mod:`audiorepro.metrics.hear`) go to
``OUT/<cell id>/test.predicted-scores.json`` under heareval's keys. Parity: every score again
by the independent twin (:mod:`audiorepro.reference.hear`) over the same predictions, within
:data:`SCORE_TOLERANCE`. Published values are a leaderboard row's scores: a task's test score
(the mean over folds for a fold task, as HEAR's leaderboard reports it). Then the tables,
``report.html``, ``bundle.json.gz``, ``verification.json`` and the manifest, as for any kind.

Predictors: ``linear-v1`` (docs/linear-probe.md: standardized features, L2 logistic
regression, C = 1.0) on the training split(s) alone; its class scores are the softmax of its
decision values over the classes seen in training (0 for the others), so that mAP, d' and AUC
have scores to rank; a multiclass probe, so multilabel scene tasks are refused. Event tasks
(timestamp embeddings, ``linear-v1`` per label per frame, heareval's event post-processing
chosen on validation) are :mod:`.frames`. ``hear-mlp-v1`` (heareval's own MLP grid, on
scene multiclass, scene multilabel and event tasks) is :mod:`.mlp`.

The embeddings go through the extraction cache (:mod:`.entry`): one entry per (encoder, task),
keyed by the encoder's weights and code and the task's files and clips, computed here or as
Slurm array tasks (``--executor slurm``), checked by its SHA-256 on every read; a second run of
the same cell reads the entry and computes nothing. Its SHA-256 is the cell's ``dump_sha256``.
"""

from __future__ import annotations

import html
import json
import math
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, NotRequired, cast

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.checks.moves import (
    CELL_CAUSES,
    Identity,
    Moves,
    identity,
    in_cell,
    keys,
    pick,
    run_records,
    study_level,
)
from audiorepro.checks.verify import Summary, ValueRow, summarize, value_rows
from audiorepro.core.errors import UserError
from audiorepro.core.io import JsonObject, JsonValue, atomic_write_bytes, slug
from audiorepro.formats.hear import (
    HearTask,
    check_task_audio,
    data_splits,
    read_task,
)
from audiorepro.formats.hear_embeddings import write_embeddings
from audiorepro.metrics import hear as scores
from audiorepro.metrics.hear_events import Setting
from audiorepro.metrics.linear_probe import LINEAR, fit_linear_v1
from audiorepro.models.user_encoders import Loaded
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
    parity_verification,
    record_parity,
    register_kind,
    rest_records,
)
from audiorepro.runner.kinds.hear.entry import (
    ClipHash,
    audio_sha256,
    cell_embeddings,
    check_clips,
    hear_extraction,
    load_model,
    task_files,
)
from audiorepro.runner.kinds.hear.frames import EVENT_SCORES, event_fold, frame_source
from audiorepro.runner.kinds.hear.mlp import grid_points, mlp_cell
from audiorepro.runner.kinds.hear.saved import (
    SavedEmbeddings,
    read_saved_embeddings,
    score_saved,
)
from audiorepro.runner.kinds.hear.scene import (
    SCENE_SCORES,
    TWIN_SCORES,
    FoldPrediction,
    fold_scores,
)
from audiorepro.runner.kinds.hear.spec import MLP, HearCell, HearStudy, parse_hear

HEAR_BUNDLE: Final = "audiorepro.hear-bundle/1"
PREDICTED_SCORES: Final = "test.predicted-scores.json"
#: How far the twin's scores (Python floats, pairwise counts) may lie from ours (numpy): both
#: are sums and ratios of at most a few thousand float64 terms.
SCORE_TOLERANCE: Final = 1e-12


# --- one task -------------------------------------------------------------------------------


def check_task(task: HearTask, predictor: str) -> None:
    """A task the predictor and the scene scores run on (else one line naming the task)."""
    meta = task.metadata
    if predictor == MLP:  # its grid, as the task updates it, is checked before any work
        grid_points(task)
    if meta.embedding_type == "event":
        unknown = [e for e in meta.evaluation if e not in EVENT_SCORES]
        if unknown:
            raise UserError(
                f"names {unknown[0]!r}, not an event score", source=task.path, key="evaluation"
            )
        return
    if predictor == LINEAR and meta.prediction_type != "multiclass":
        raise UserError(
            f"is a {meta.prediction_type} task; {LINEAR} is a multiclass probe", source=task.path
        )
    unknown = [e for e in meta.evaluation if e not in SCENE_SCORES]
    if unknown:
        raise UserError(
            f"names {unknown[0]!r}, not a scene score", source=task.path, key="evaluation"
        )


def _softmax(decision: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    shifted = decision - decision.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


def _rows(
    task: HearTask, emb: dict[str, dict[str, Any]], splits: tuple[str, ...]
) -> tuple[Any, Any]:
    index = {label: i for i, label in enumerate(task.vocabulary)}
    names = [(s, n) for s in splits for n in task.files(s)]
    x = np.stack([emb[s][n] for s, n in names])
    y = np.array([index[task.scene_labels[s][n][0]] for s, n in names], dtype=np.int64)
    return x, y


def linear_fold(
    task: HearTask, emb: dict[str, dict[str, Any]], split: dict[str, tuple[str, ...]]
) -> FoldPrediction:
    """linear-v1 on one data split: trained on its training split(s) alone."""
    x_train, y_train = _rows(task, emb, split["train"])
    x_valid, y_valid = _rows(task, emb, split["valid"])
    x_test, y_test = _rows(task, emb, split["test"])
    fit = fit_linear_v1(x_train, y_train, np.concatenate([x_valid, x_test]))
    probs = np.zeros((len(fit.decision), len(task.vocabulary)))
    probs[:, list(fit.classes)] = _softmax(fit.decision)
    onehot = np.eye(len(task.vocabulary))
    n = len(y_valid)
    return FoldPrediction(probs[:n], onehot[y_valid], probs[n:], onehot[y_test])


def predicted_scores(
    task: HearTask,
    folds: dict[str, tuple[dict[str, float], float]],
    predictor: str,
    postprocessing: Mapping[str, Setting] | None = None,
) -> dict[str, Any]:
    """heareval's ``test.predicted-scores.json`` keys: per test split ``test_score`` (the
    first score), ``test_<name>`` and ``validation_score``; ``aggregated_scores`` (mean and
    sample standard deviation over folds, :func:`fold_mean_std`) when there are several."""
    primary = task.metadata.evaluation[0]
    out: dict[str, Any] = {}
    for fold, (test, valid) in folds.items():
        row = {"test_score": test[primary], "validation_score": valid}
        row.update({f"test_{name}": value for name, value in test.items()})
        out[fold] = row
    if len(folds) > 1:
        agg: dict[str, float] = {}
        for key in out[next(iter(folds))]:
            mean, std = fold_mean_std([out[f][key] for f in folds])
            agg[f"{key}_mean"], agg[f"{key}_std"] = mean, std
        out["aggregated_scores"] = agg
    maximize = scores.HEAR_SCORE_DIRECTIONS[primary]
    out["hparams"] = {"predictor": predictor, "C": 1.0}
    # heareval writes the test step's post-processing (event tasks), [] for scene tasks.
    chosen = list((postprocessing or {}).values())
    out["postprocessing"] = [list(pair) for pair in chosen[-1]] if chosen else []
    out["score_mode"] = "max" if maximize else "min"
    out["embedding_path"] = task.name
    return out


def _dumps(obj: Any) -> bytes:
    """Sorted keys, indent 4; NaN written as heareval writes it (``NaN``)."""
    return (json.dumps(obj, sort_keys=True, indent=4, allow_nan=True) + "\n").encode()


def leaderboard(folds: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """A task's score by name as HEAR's leaderboard reports it: the test split's, or the mean
    over folds.

    >>> leaderboard({"fold00": {"mAP": 0.5}, "fold01": {"mAP": 0.7}})
    {'mAP': 0.6}
    """
    first = next(iter(folds.values()))
    return {k: fold_mean_std([f[k] for f in folds.values()])[0] for k in first}


def fold_mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation over folds as heareval's
    ``aggregate_test_results`` computes them (pandas' ``mean()`` and ``std()``): NaN folds
    are left out (a score undefined on one fold), NaN when none is left (the deviation when
    fewer than two are); infinities are kept.

    >>> fold_mean_std([0.5, float("nan"), 0.7])
    (0.6, 0.14142135623730948)
    >>> fold_mean_std([0.5, float("nan")])
    (0.5, nan)
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return math.nan, math.nan
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as pandas gives it quietly
        mean = float(np.mean(v))
        std = float(np.std(v, ddof=1)) if len(v) > 1 else math.nan
    return mean, std


# --- the bundle -----------------------------------------------------------------------------


class HearBundleCell(TypedDict):
    """One cell of the bundle: the encoder, the task and its scores."""

    id: str
    model: str
    task: str  #: the task's folder name
    task_name: str
    predictor: str
    task_files_sha256: dict[str, str]  #: task_metadata.json, labelvocabulary.csv, <split>.json
    #: the clips read (:func:`~.entry.audio_sha256`); None where none is (saved predictions)
    audio_sha256: str | None
    clips: int
    embedding_size: int
    sample_rate: int
    #: test split (or fold) -> score name -> value; null where heareval writes NaN or
    #: Infinity (the cell's test.predicted-scores.json holds those as heareval writes them)
    scores: dict[str, dict[str, float | None]]
    validation_scores: dict[str, float | None]  #: test split (or fold) -> the first score
    leaderboard: dict[str, float | None]  #: score name -> test value (mean over folds)
    primary_score: str  #: the task's first evaluation score (model selection, the table's)
    predicted_scores: str  #: the path of its test.predicted-scores.json in OUT
    #: weights' SHA-256 and the code's identity; a submission's saved files' SHA-256
    #: (``saved_sha256`` per predictions file, ``embeddings_sha256`` over its embeddings)
    model_meta: dict[str, JsonValue]
    #: the SHA-256 of the cell's embeddings' cache entry (absent: saved files scored)
    dump_sha256: NotRequired[str]
    #: event tasks: test split (or fold) -> the post-processing chosen on validation
    postprocessing: NotRequired[dict[str, dict[str, float]]]


class ScoreParity(TypedDict):
    cell: str
    max_score_delta: float
    score_tolerance: float
    passed: bool


class HearParity(TypedDict):
    cells: list[ScoreParity]
    passed: bool


class HearVerification(TypedDict):
    metric_parity: HearParity
    metric_parity_passed: bool
    failures: list[str]
    golden: Summary


class HearStudyRecord(TypedDict):
    name: str
    title: str


class HearBundle(TypedDict):
    """``bundle.json.gz`` of a HEAR study (decompressed)."""

    schema: Literal["audiorepro.hear-bundle/1"]
    study: HearStudyRecord
    cells: list[HearBundleCell]
    verification: HearVerification


# --- the kind -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellInputs:
    task: HearTask
    loaded: Loaded | None  #: None: a submission's saved embeddings stand for the model
    rate: int  #: the module's sample rate (0 for saved embeddings: no audio is read)
    saved: SavedEmbeddings | None = None
    #: every clip's SHA-256, as the load's check read it (:func:`~.entry.check_clips`): the
    #: cache key's and the cell's ``audio_sha256`` (empty for saved embeddings)
    clips: tuple[ClipHash, ...] = ()


@dataclass
class HearState(KindState):
    """A HEAR study between the steps of :class:`HearKind`."""

    study: HearStudy | None = None
    inputs: dict[str, CellInputs] = field(default_factory=dict)
    results: dict[str, CellResult] = field(default_factory=dict)
    cells: dict[str, HearBundleCell] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: cells scored from heareval's saved predictions (no model): their tasks
    saved: dict[str, HearTask] = field(default_factory=dict)
    parity: list[ScoreParity] = field(default_factory=list)
    out: Path = Path(".")
    cache: Path = Path(".")  #: the extraction cache (``OUT/cache/dumps``)


def _load(state: HearState, cells: tuple[HearCell, ...]) -> None:
    """Every cell's task and encoder, and every task's audio, before anything is written
    (bad input is one line, exit 2); a task folder a lenient read did not find is a cell
    that cannot be computed (its values NOT VERIFIED)."""
    tasks: dict[str, HearTask] = {}
    for cell in cells:
        if cell.task_path is None:
            state.errors[cell.id] = f"tasks folder {cell.tasks_dir} is missing"
            state.failures.append(f"cell {cell.id}: {state.errors[cell.id]}")
            continue
        tasks[cell.id] = read_task(cell.task_path)
        if cell.predictions is not None:  # heareval's predictions: no model, no predictor
            check_task(tasks[cell.id], "heareval")
            if not cell.predictions.is_dir():
                state.errors[cell.id] = f"predictions folder {cell.predictions} is missing"
                state.failures.append(f"cell {cell.id}: {state.errors[cell.id]}")
            else:
                state.saved[cell.id] = tasks[cell.id]
            continue
        check_task(tasks[cell.id], cell.predictor)
        if cell.embeddings is not None:  # heareval's embeddings: the predictor, no model
            if not cell.embeddings.is_dir():
                state.errors[cell.id] = f"embeddings folder {cell.embeddings} is missing"
                state.failures.append(f"cell {cell.id}: {state.errors[cell.id]}")
                continue
            saved = read_saved_embeddings(tasks[cell.id], cell.embeddings)
            state.inputs[cell.id] = CellInputs(tasks[cell.id], None, 0, saved)
    for cell in cells:
        if cell.id in tasks and cell.predictions is None and cell.embeddings is None:
            loaded = load_model(cell.model)
            rate = int(loaded.encoder.sample_rate)
            if tasks[cell.id].metadata.embedding_type == "event":
                frame_source(loaded.encoder)  # frames or one line, before any clip is read
            check_task_audio(tasks[cell.id], rate)
            clips = check_clips(tasks[cell.id], rate)
            state.inputs[cell.id] = CellInputs(tasks[cell.id], loaded, rate, clips=clips)


def _finite(value: float) -> float | None:
    """A number as the bundle holds it: JSON has no NaN or infinity (None for those)."""
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class CellResult:
    """One computed cell: its bundle record, predictions and scores (NaN and inf kept)."""

    record: HearBundleCell
    scores: dict[str, dict[str, float]]
    #: the independent twin's scores over the same predictions (class scores or events)
    twin_scores: dict[str, dict[str, float]]


def compute_cell(cell: HearCell, inputs: CellInputs, out: Path | None, cache: Path) -> CellResult:
    """A cell's embeddings (from the extraction cache ``cache``, computed into it when it
    lacks them; written to ``out/<cell id>/`` in heareval's layout when ``out`` is given,
    with its ``test.predicted-scores.json``), predictions and scores."""
    task = inputs.task
    rel = slug(cell.id)
    splits = {"|".join(s["test"]): s for s in data_splits(task.metadata)}
    names = task.metadata.evaluation
    stamps: dict[str, dict[str, Any]] | None = None
    settings: dict[str, Setting] | None = None
    fit: Any = None
    dump_sha256: str | None = None
    if inputs.saved is not None:  # a submission's saved embeddings, read in load
        emb, stamps = inputs.saved.embeddings, inputs.saved.timestamps
    else:
        entry = cell_embeddings(cell, cache, inputs.clips)
        dump_sha256 = entry.sha256
        # each split's files in <split>.json's order (the entry's members are sorted by name)
        emb = {s: {n: entry.embeddings[s][n] for n in task.files(s)} for s in task.metadata.splits}
        if entry.timestamps is not None:
            stamps = {s: {n: entry.timestamps[s][n] for n in task.files(s)} for s in emb}
    if cell.predictor == MLP:
        fit = mlp_cell(task, emb, stamps)
        folds, twins, settings = fit.folds, fit.twins, fit.settings
    elif stamps is not None:
        events = {k: event_fold(task, emb, stamps, s) for k, s in splits.items()}
        folds = {k: (e.test, e.valid) for k, e in events.items()}
        twins = {k: e.twin_test for k, e in events.items()}
        settings = {k: e.setting for k, e in events.items()}
    else:
        preds = {k: linear_fold(task, emb, s) for k, s in splits.items()}
        folds = {k: fold_scores(names, p) for k, p in preds.items()}
        twins = {k: fold_scores(names, p, TWIN_SCORES)[0] for k, p in preds.items()}
    if out is not None:
        if inputs.saved is None:  # saved embeddings are the run's input, not copied
            write_embeddings(task, out / rel, emb, stamps)
        doc = predicted_scores(task, folds, cell.predictor, settings)
        if fit is not None:  # hear-mlp-v1's grid point, and each split's checkpoint epoch
            doc["hparams"] = fit.hparams
            for key, epoch in fit.epochs.items():
                doc[key]["epoch"] = epoch
        atomic_write_bytes(out / rel / PREDICTED_SCORES, _dumps(doc))
    first = next(iter(next(iter(emb.values())).values()))
    board = leaderboard({k: v[0] for k, v in folds.items()})
    meta = _model_meta(inputs)
    record: HearBundleCell = {
        "id": cell.id,
        "model": cell.model,
        "task": task.path.name,
        "task_name": task.name,
        "predictor": cell.predictor,
        "task_files_sha256": task_files(task),
        "audio_sha256": None if inputs.saved is not None else audio_sha256(inputs.clips),
        "clips": sum(len(v) for v in emb.values()),
        "embedding_size": int(first.shape[-1]),
        "sample_rate": inputs.rate,
        "scores": {k: {n: _finite(x) for n, x in v[0].items()} for k, v in folds.items()},
        "validation_scores": {k: _finite(v[1]) for k, v in folds.items()},
        "leaderboard": {n: _finite(x) for n, x in board.items()},
        "primary_score": task.metadata.evaluation[0],
        "predicted_scores": f"{rel}/{PREDICTED_SCORES}",
        "model_meta": meta,
    }
    if dump_sha256 is not None:
        record["dump_sha256"] = dump_sha256
    if settings is not None:
        record["postprocessing"] = {k: dict(v) for k, v in settings.items()}
    return CellResult(record, {k: v[0] for k, v in folds.items()}, twins)


def _model_meta(inputs: CellInputs) -> dict[str, JsonValue]:
    """The module's weights' SHA-256 and code identity, or the saved embeddings' SHA-256."""
    if inputs.loaded is None:
        assert inputs.saved is not None
        return {"weights_sha256": {}, "code": None, "embeddings_sha256": inputs.saved.sha256}
    return {
        "weights_sha256": cast(JsonValue, dict(sorted(inputs.loaded.hashes.items()))),
        "code": cast(JsonValue, inputs.loaded.code),
    }


def saved_cell(cell: HearCell, task: HearTask, out: Path | None) -> CellResult:
    """A cell scored from heareval's saved predictions (:mod:`.saved`), no model run;
    its ``test.predicted-scores.json`` (the kit's scores) goes to ``out/<cell id>/`` without
    validation scores, which only heareval's own file holds."""
    assert cell.predictions is not None
    saved = score_saved(task, cell.predictions, (SCENE_SCORES, TWIN_SCORES))
    folds = {k: (v, math.nan) for k, v in saved.scores.items()}
    rel, predictor = slug(cell.id), "heareval (saved predictions)"
    if out is not None:
        with np.errstate(invalid="ignore"):  # NaN validation scores, removed below
            doc = predicted_scores(task, folds, predictor)
        for row in (doc[k] for k in (*folds, "aggregated_scores") if k in doc):
            for key in [k for k in row if k.startswith("validation_score")]:
                del row[key]
        doc["hparams"] = {"predictions": "heareval's saved <test split>.predictions.pkl"}
        atomic_write_bytes(out / rel / PREDICTED_SCORES, _dumps(doc))
    board = leaderboard(saved.scores)
    record: HearBundleCell = {
        "id": cell.id,
        "model": cell.model,
        "task": task.path.name,
        "task_name": task.name,
        "predictor": predictor,
        "task_files_sha256": task_files(task),
        "audio_sha256": None,
        "clips": sum(len(task.files(s)) for s in task.metadata.splits),
        "embedding_size": saved.embedding_size,
        "sample_rate": 0,
        "scores": {k: {n: _finite(x) for n, x in v.items()} for k, v in saved.scores.items()},
        "validation_scores": {k: None for k in folds},
        "leaderboard": {n: _finite(x) for n, x in board.items()},
        "primary_score": task.metadata.evaluation[0],
        "predicted_scores": f"{rel}/{PREDICTED_SCORES}",
        "model_meta": {
            "weights_sha256": {},
            "code": None,
            "saved_sha256": cast(JsonValue, saved.saved_sha256),
        },
    }
    return CellResult(record, saved.scores, saved.twin_scores)


def twin_parity(result: CellResult) -> ScoreParity:
    """The twin's scores over the same predictions against ours (NaN equals NaN)."""
    delta = 0.0
    for fold, theirs in result.twin_scores.items():
        for name, value in result.scores[fold].items():
            other = theirs[name]
            if math.isnan(value) or math.isnan(other):
                d = 0.0 if math.isnan(value) and math.isnan(other) else math.inf
            elif math.isinf(value) or math.isinf(other):
                d = 0.0 if value == other else math.inf
            else:
                d = abs(value - other)
            delta = max(delta, d)
    passed = delta <= SCORE_TOLERANCE
    return {
        "cell": result.record["id"],
        "max_score_delta": delta,
        "score_tolerance": SCORE_TOLERANCE,
        "passed": passed,
    }


def _golden(
    study: HearStudy, cells: Mapping[str, HearBundleCell], errors: Mapping[str, str]
) -> Summary:
    rows: list[ValueRow] = []
    for pub in study.published:
        reason = errors.get(pub.cell) or (None if pub.cell in cells else "not computed")
        board = cells[pub.cell]["leaderboard"] if reason is None else {}
        got = {k: math.nan if v is None else v for k, v in board.items()}
        rows += [
            ValueRow(**r, provenance=pub.provenance)
            for r in value_rows(pub.cell, pub.values, pub.tolerance, got, reason, "hear")
        ]
    return summarize(rows)


def _tables(
    study: HearStudy, cells: Mapping[str, HearBundleCell], golden: Summary
) -> dict[str, Table]:
    columns = (Column("task"), Column("predictor"), Column("score"), Column("value"))
    rows: list[tuple[str, tuple[Any, ...]]] = []
    for cell in study.cells:
        c = cells.get(cell.id)
        if c is None:
            rows.append((cell.id, (cell.task, cell.predictor, None, None)))
            continue
        for name, value in c["leaderboard"].items():
            rows.append((cell.id, (c["task"], c["predictor"], name, value)))
    main = Table(
        title="HEAR: test scores (the mean over folds for a fold task)",
        columns=columns,
        rows=tuple(rows),
        row_header="cell",
        notes=(
            "heareval 2021.1.3's scores (docs/hear.md) of the predictor trained on each of "
            "heareval's data splits; per split in each cell's test.predicted-scores.json",
        ),
    )
    return {"hear": main, "published": published_table(golden["rows"])}


def _report(
    study: HearStudy,
    cells: Mapping[str, HearBundleCell],
    tables: dict[str, Table],
    failures: list[str],
) -> str:
    e = html.escape
    lines = [
        f"<p>{e(c['id'])}: {e(c['model'])} on {e(c['task'])} ({c['clips']} clips, embedding "
        f"size {c['embedding_size']}), {e(c['predictor'])}</p>"
        for c in cells.values()
    ]
    return kind_report(study.title, failures, tables, paragraphs=lines)


@register_kind
class HearKind(StudyKind[HearStudy, HearState]):
    """HEAR 2021 tasks run by encoders, scored as heareval scores them."""

    name = "hear"
    bundle_schema = HEAR_BUNDLE
    parse = staticmethod(parse_hear)  # its spec: .spec

    def load(self, study: HearStudy, ctx: Context) -> HearState:
        state = HearState(study=study, out=ctx.out, cache=ctx.cache)
        _load(state, study.cells)
        return state

    def compute(self, state: HearState) -> None:
        assert state.study is not None
        for cell in state.study.cells:
            if cell.id in state.inputs:
                result = compute_cell(cell, state.inputs[cell.id], state.out, state.cache)
                state.results[cell.id], state.cells[cell.id] = result, result.record
            elif cell.id in state.saved:
                result = saved_cell(cell, state.saved[cell.id], state.out)
                state.results[cell.id], state.cells[cell.id] = result, result.record

    def check_parity(self, state: HearState) -> None:
        for cell_id, result in state.results.items():
            p = twin_parity(result)
            record_parity(state.parity, state.failures, cell_id, p)

    def compare_published(self, state: HearState) -> Summary:
        assert state.study is not None
        return _golden(state.study, state.cells, state.errors)

    def tables(self, state: HearState, golden: Summary) -> dict[str, Table]:
        assert state.study is not None
        return _tables(state.study, state.cells, golden)

    def bundle_part(
        self, state: HearState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        study = state.study
        assert study is not None
        verification: HearVerification = parity_verification(
            state.parity, len(study.cells), state.failures, golden
        )
        bundle: HearBundle = {
            "schema": "audiorepro.hear-bundle/1",
            "study": {"name": study.name, "title": study.title},
            "cells": [state.cells[c.id] for c in study.cells if c.id in state.cells],
            "verification": verification,
        }
        inputs = {
            f"{rec['task']}/{name}": digest
            for rec in state.cells.values()
            for name, digest in rec["task_files_sha256"].items()
        }
        report = _report(study, state.cells, tables, state.failures)
        return BundlePart(verification, report, cast(Mapping[str, object], bundle), [], inputs)

    def extraction(self, study: HearStudy) -> StudyExtraction | None:
        return hear_extraction(study)

    def verify(self, study: HearStudy, cache: Path) -> Summary:
        with tempfile.TemporaryDirectory() as tmp:
            needed = {p.cell for p in study.published}
            state = HearState(study=study, out=Path(tmp), cache=cache)
            _load(state, tuple(c for c in study.cells if c.id in needed))
            self.compute(state)
            return _golden(study, state.cells, state.errors)

    def numbers(self, bundle: JsonObject) -> Iterator[NumberRecord]:
        yield from cell_records(bundle, "cells", classify=_classify, identities=_identities)
        yield from rest_records(bundle, ("cells",), _classify_rest)

    def records(self, bundle: JsonObject) -> list[Identity]:
        """What each cell depends on: the module's weights and code, the predictor and the
        sample rate, the task's files and clips."""
        out = run_records(None, None)
        for cell in bundle["cells"]:
            cid = str(cell["id"])
            meta = cell.get("model_meta") or {}
            weights = {"model": cell.get("model"), "weights_sha256": meta.get("weights_sha256")}
            for saved in ("saved_sha256", "embeddings_sha256"):  # a submission's files
                if meta.get(saved) is not None:
                    weights[saved] = meta[saved]
            out += [
                identity(cid, "weights", weights),
                identity(cid, "encoder code", meta.get("code")),
                identity(cid, "preprocessing", pick(cell, ("predictor", "sample_rate"))),
                identity(cid, "inputs", pick(cell, _INPUT_KEYS)),
            ]
        return out

    def moves(self, bundle: JsonObject, number: NumberRecord) -> Moves:
        """A cell's scores (per split, validation, leaderboard): tier b, a probe over its
        embeddings, no tolerance derived; its counts, sizes and post-processing settings tier
        a; a study-level number follows the cell its row names, else every cell."""
        where = number.where
        if not in_cell(where):
            return study_level(bundle, where, CELL_CAUSES, tier="b")
        cid = str(bundle["cells"][where[1]]["id"])
        tier: Literal["a", "b"] = "b" if where[2] in _SCORE_KEYS else "a"
        return Moves(cid, tier, keys(cid, CELL_CAUSES, tier=tier))


#: A cell's inputs: its task and, for a computed cell, its embeddings' cache entry.
_INPUT_KEYS: Final = ("task", "task_files_sha256", "audio_sha256", "clips", "dump_sha256")
_SCORE_KEYS: Final = frozenset({"scores", "validation_scores", "leaderboard"})


def _classify(cell: JsonObject, below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A cell's scores are tier b (a probe over CPU-extracted embeddings), each in its score's
    direction; its counts, sizes and hashes are no computed value."""
    if below and below[0] in ("scores", "validation_scores", "leaderboard"):
        name = str(below[-1])
        better = scores.HEAR_SCORE_DIRECTIONS.get(name)
        return ("higher" if better is not False else "lower"), "b"
    return None, None


def _classify_rest(below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    return (None, "b") if "metric_parity" in below else (None, None)


def _identities(cell: JsonObject) -> Identities:
    meta = cell.get("model_meta") or {}
    weights = meta.get("weights_sha256")
    files = cell.get("task_files_sha256") or {}
    return Identities(
        dump=cell.get("dump_sha256"),
        weights=json.dumps(weights, sort_keys=True) if weights else None,
        settings=(f"predictor={cell.get('predictor')}",),
        files=tuple(str(files[k]) for k in sorted(files)),
    )

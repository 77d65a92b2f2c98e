"""audiorepro's Python API, for notebooks and other tools: the same checks as the command line.

Everything here is re-exported by ``import audiorepro`` (``audiorepro.__all__``). From arrays:

- :func:`retrieval_metrics`: embeddings and their relevance to every canonical retrieval metric
  (both directions), with the tie bounds and the dump's identity;
- :func:`score_metrics`: any score matrix (queries x items) and each query's relevant items,
  for a system that is not an embedding model;
- :func:`parity`: the harness against the independent reference on the same arrays;
- :func:`explain`: every peer profile's value of each concept beside the canonical one;

and from files: :func:`load_dump`, :func:`reproduce` (a study to its output folder) and
:func:`verify` (an output folder, or a study's published values). Results are typed records
with ``to_dict()`` giving the same JSON documents the command line writes.

>>> import numpy as np
>>> import audiorepro
>>> audio = np.eye(3, dtype=np.float32)
>>> text = np.array([[1, 0, 0], [0, 1, 0], [1, 0, 0]], dtype=np.float32)
>>> m = audiorepro.retrieval_metrics(audio, text, text_to_audio=[0, 1, 2])
>>> m.metrics["t2a"]["r@1"]  # caption 2 points at clip 0, not at its clip 2
0.6666666666666666
>>> m.to_dict()["schema"]
'audiorepro.metrics/1'

A user error (a bad array, an unknown option) raises :class:`UserError`, whose message is the
one line the command line would print.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.checks.explain import explain as _explain
from audiorepro.checks.parity import DEFAULT_TOLERANCE, ParityCell, parity_cell
from audiorepro.checks.verify import Summary
from audiorepro.core.errors import UserError
from audiorepro.formats.dump import Dump, load_dump, make_dump
from audiorepro.metrics.retrieval import (
    DEFINITIONS_VERSION,
    METRICS,
    MetricsReport,
    TiePolicy,
    all_metrics,
    compute_retrieval,
    counts_from_scores,
    metrics_report,
    positions_from_counts,
)
from audiorepro.runner.study import run_studies, verify_output_dir, verify_study
from audiorepro.specs.study import load_study

__all__ = [
    "Dump",
    "ExplainResult",
    "ParityResult",
    "RetrievalMetrics",
    "RunResult",
    "ScoreMetrics",
    "UserError",
    "VerifyResult",
    "explain",
    "load_dump",
    "parity",
    "reproduce",
    "retrieval_metrics",
    "score_metrics",
    "verify",
]

ArrayLike = npt.ArrayLike


def _bad(param: str, func: str, expected: str, got: str) -> UserError:
    """The one message of a malformed argument (:func:`~audiorepro.core.errors.param_error`'s
    form), with what was found where."""
    return UserError(f"The '{param}' parameter of {func} must be {expected}. Got {got}.")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _array(value: object, param: str, func: str) -> npt.NDArray[Any]:
    """``value`` as an array; a ragged nesting (rows of different lengths) is refused."""
    try:
        return np.asarray(value)
    except (ValueError, TypeError):
        raise _bad(param, func, "a rectangular array (every row the same length)",
                   _short(value)) from None  # fmt: skip


def _sequence(value: object, *, ndim: int | None) -> bool:
    """A list, tuple or array (of ``ndim`` dimensions when given), not text."""
    if isinstance(value, np.ndarray):
        return value.ndim >= 1 if ndim is None else value.ndim == ndim
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _index_lists(value: object, param: str, func: str) -> list[list[int]]:
    """One list of integer indices (>= 0) per row: a float index (``0.9`` was truncated to
    0), a bool, None, a negative index (``-1`` was the last item) or a number or text instead
    of a list is refused, naming where."""
    expected = "a list with one list of integer indices (>= 0) per row"
    if not _sequence(value, ndim=None):
        raise _bad(param, func, expected, _short(value))
    rows: list[list[int]] = []
    listed: Sequence[Any] = value  # type: ignore[assignment]
    for i, items in enumerate(listed):
        if not _sequence(items, ndim=1):
            raise _bad(param, func, expected, f"{param}[{i}] = {_short(items)}")
        row: list[int] = []
        for x in items:
            if isinstance(x, bool | np.bool_) or not isinstance(x, int | np.integer) or x < 0:
                raise _bad(param, func, expected, f"{param}[{i}] = {_short(items)}")
            row.append(int(x))
        rows.append(row)
    return rows


def _dump(
    audio_embeds: ArrayLike | Dump,
    text_embeds: ArrayLike | None,
    text_to_audio: ArrayLike | None,
    relevance: Sequence[Sequence[int]] | None,
    func: str,
) -> Dump:
    """A validated dump from a :class:`Dump` or arrays: ``text_to_audio`` (each text's one
    clip) or ``relevance`` (each clip's relevant texts), not both."""
    if isinstance(audio_embeds, Dump):
        if text_embeds is not None or text_to_audio is not None or relevance is not None:
            raise UserError("give a Dump alone, or arrays; not both", key="audio_embeds")
        return audio_embeds
    if text_embeds is None:
        raise UserError("is missing (give text_embeds with audio_embeds)", key="text_embeds")
    if (text_to_audio is None) == (relevance is None):
        raise UserError(
            "give exactly one of text_to_audio (each text's clip) or relevance (each clip's texts)",
            key="relevance",
        )
    audio = _array(audio_embeds, "audio_embeds", func)
    text = _array(text_embeds, "text_embeds", func)
    if text_to_audio is not None:
        return make_dump(audio, text, _array(text_to_audio, "text_to_audio", func))
    rows = _index_lists(relevance, "relevance", func)
    indptr = np.cumsum([0, *(len(r) for r in rows)], dtype=np.int64)
    indices = np.asarray([t for r in rows for t in r], dtype=np.int64)
    return make_dump(audio, text, relevance_indptr=indptr, relevance_indices=indices)


@dataclass(frozen=True)
class RetrievalMetrics:
    """Every canonical metric of one dump: ``metrics[direction][name]`` under ``tie_policy``,
    and ``bounds[direction][name] = (optimistic, pessimistic)`` for each metric whose value
    depends on how ties are broken (absent: no tie moves it)."""

    metrics: dict[str, dict[str, float]]
    bounds: dict[str, dict[str, tuple[float, float]]]
    tie_policy: TiePolicy
    definitions_version: int
    report: MetricsReport

    def to_dict(self) -> dict[str, Any]:
        """The ``audiorepro.metrics/1`` document (what ``audiorepro metrics --json`` writes)."""
        return dict(self.report)


def retrieval_metrics(
    audio_embeds: ArrayLike | Dump,
    text_embeds: ArrayLike | None = None,
    *,
    text_to_audio: ArrayLike | None = None,
    relevance: Sequence[Sequence[int]] | None = None,
    tie_policy: TiePolicy = "pessimistic",
) -> RetrievalMetrics:
    """Exact canonical retrieval metrics (definitions version 1, both directions) of
    embeddings, scored by their dot product, with tie bounds.

    >>> import numpy as np
    >>> e = np.eye(2, dtype=np.float32)
    >>> retrieval_metrics(e, e, text_to_audio=[0, 1]).metrics["a2t"]["map"]
    1.0
    >>> tied = retrieval_metrics(e, np.ones((2, 2), np.float32), text_to_audio=[0, 1])
    >>> tied.bounds["t2a"]["r@1"]  # both clips tie for every caption
    (1.0, 0.0)
    """
    dump = _dump(audio_embeds, text_embeds, text_to_audio, relevance, "retrieval_metrics")
    result = compute_retrieval(dump)
    report = metrics_report(dump, result, tie_policy=tie_policy)
    bounds = {
        d: {name: (b[0], b[1]) for name, b in summary["bounds"].items()}
        for d, summary in report["ties"].items()
    }
    return RetrievalMetrics(report["metrics"], bounds, tie_policy, DEFINITIONS_VERSION, report)


@dataclass(frozen=True)
class ScoreMetrics:
    """The canonical metrics of one score matrix: ``metrics[name]`` under ``tie_policy`` and
    ``bounds[name] = (optimistic, pessimistic)`` where a tie moves the value."""

    metrics: dict[str, float]
    bounds: dict[str, tuple[float, float]]
    tie_policy: TiePolicy

    def to_dict(self) -> dict[str, Any]:
        return {
            "definitions_version": DEFINITIONS_VERSION,
            "tie_policy": self.tie_policy,
            "metrics": dict(self.metrics),
            "bounds": {k: list(v) for k, v in self.bounds.items()},
        }


def _score_inputs(scores: ArrayLike, relevant: object) -> tuple[npt.NDArray[Any], list[list[int]]]:
    """``scores`` a finite 2-D matrix of numbers with a row and an item at least; ``relevant``
    one non-empty list of distinct item indices per row (a NaN score ranked first, a query
    without its list was dropped, ``-1`` was the last item)."""
    func = "score_metrics"
    matrix = _array(scores, "scores", func)
    if matrix.ndim != 2 or 0 in matrix.shape or matrix.dtype.kind not in "iuf":
        raise _bad("scores", func, "a 2-D matrix of numbers [queries, items], not empty",
                   f"shape {matrix.shape}, dtype {matrix.dtype}")  # fmt: skip
    if not np.all(np.isfinite(matrix)):
        q, i = np.argwhere(~np.isfinite(matrix))[0]
        raise _bad("scores", func, "finite numbers", f"scores[{q}, {i}] = {matrix[q, i]}")
    rows = _index_lists(relevant, "relevant", func)
    if len(rows) != matrix.shape[0]:
        raise _bad("relevant", func, f"one list per row of scores ({matrix.shape[0]})",
                   f"{len(rows)} lists")  # fmt: skip
    for q, row in enumerate(rows):
        if not row or len(set(row)) != len(row) or max(row) >= matrix.shape[1]:
            raise _bad("relevant", func, "non-empty lists of distinct item indices in "
                       f"[0, {matrix.shape[1]})", f"relevant[{q}] = {_short(row)}")  # fmt: skip
    return matrix.astype(np.float64), rows


def score_metrics(
    scores: ArrayLike,
    relevant: Sequence[Sequence[int]],
    *,
    tie_policy: TiePolicy = "pessimistic",
) -> ScoreMetrics:
    """The canonical metrics of any ranking system: ``scores[q, i]`` is query q's score of
    item i (higher first), ``relevant[q]`` its relevant items. Ties are bounded exactly.

    >>> s = [[0.9, 0.1, 0.5], [0.2, 0.2, 0.7]]
    >>> m = score_metrics(s, [[0], [1]])
    >>> m.metrics["r@1"], m.metrics["mrr"]
    (0.5, 0.6666666666666666)
    >>> m.bounds["mrr"]  # query 1's item ties item 0 for second place
    (0.75, 0.6666666666666666)
    """
    matrix, rows = _score_inputs(scores, relevant)
    counts = counts_from_scores(matrix, rows)
    values = {
        p: all_metrics(positions_from_counts(counts, tie_policy=p))
        for p in ("optimistic", "pessimistic")
    }
    bounds = {
        name: (values["optimistic"][name], values["pessimistic"][name])
        for name in METRICS
        if values["optimistic"][name] != values["pessimistic"][name]
    }
    chosen = all_metrics(positions_from_counts(counts, tie_policy=tie_policy))
    return ScoreMetrics(chosen, bounds, tie_policy)


@dataclass(frozen=True)
class ParityResult:
    """The harness and the independent reference on one dump: ``passed`` when every metric
    agrees within ``tolerance``; ``cell`` is the ``metric_parity`` cell readers know."""

    passed: bool
    worst_abs_delta: float
    cell: ParityCell

    def to_dict(self) -> dict[str, Any]:
        return dict(self.cell)


def parity(
    audio_embeds: ArrayLike | Dump,
    text_embeds: ArrayLike | None = None,
    *,
    text_to_audio: ArrayLike | None = None,
    relevance: Sequence[Sequence[int]] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    tie_policy: TiePolicy = "pessimistic",
) -> ParityResult:
    """Every canonical metric computed twice, by the harness and by
    :mod:`audiorepro.reference` (written independently from the definitions).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a, t = rng.normal(size=(5, 4)), rng.normal(size=(10, 4))
    >>> parity(a, t, text_to_audio=np.repeat(np.arange(5), 2)).passed
    True
    """
    tol = tolerance
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < math.inf:
        raise _bad("tolerance", "parity", "a finite number >= 0", _short(tolerance))
    dump = _dump(audio_embeds, text_embeds, text_to_audio, relevance, "parity")
    cell = parity_cell(dump, tolerance=tolerance, tie_policy=tie_policy)
    return ParityResult(cell["passed"], cell["worst_abs_delta"], cell)


@dataclass(frozen=True)
class ExplainResult:
    """Per direction, every concept under every peer profile beside the canonical value, and
    one line per difference with its cause (what ``audiorepro explain --json`` writes)."""

    report: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.report)


def explain(
    audio_embeds: ArrayLike | Dump,
    text_embeds: ArrayLike | None = None,
    *,
    text_to_audio: ArrayLike | None = None,
    relevance: Sequence[Sequence[int]] | None = None,
) -> ExplainResult:
    """How each peer's definitions differ from the canonical ones on these embeddings."""
    dump = _dump(audio_embeds, text_embeds, text_to_audio, relevance, "explain")
    return ExplainResult(_explain(dump))


@dataclass(frozen=True)
class RunResult:
    """One study of a ``reproduce`` run: its name, its folder in OUT, whether every check
    held, and the failures in the words of the report."""

    study: str
    folder: Path
    passed: bool
    failures: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "folder": str(self.folder),
            "passed": self.passed,
            "failures": list(self.failures),
        }


def reproduce(study: str | Path, out: str | Path) -> list[RunResult]:
    """Run a study file into the output folder ``out`` (published whole, as ``audiorepro
    reproduce STUDY --out OUT`` does, locally), and say how each study of the run went."""
    loaded = load_study(study)
    results = run_studies([(loaded, ".")], Path(out), progress=False, say=lambda _: None)
    return [
        RunResult(s.name, folder, bool(r["passed"]), [str(f) for f in r["failures"]])
        for s, folder, r in results
    ]


@dataclass(frozen=True)
class VerifyResult:
    """``verify``'s verdict: ``passed`` only when every value passes; ``rows`` one per value
    (PASS, FAIL or NOT VERIFIED with its reason), as ``audiorepro verify --json`` writes."""

    passed: bool
    summary: Summary

    def to_dict(self) -> dict[str, Any]:
        return dict(self.summary)


def verify(target: str | Path) -> VerifyResult:
    """Verify an output folder of ``reproduce`` (every file against its manifest, every
    recorded check) or a study file (its published values recomputed from its dumps)."""
    path = Path(target)
    if path.is_dir():
        summary = verify_output_dir(path)
    else:
        with tempfile.TemporaryDirectory(prefix="audiorepro-verify-") as cache:
            summary = verify_study(load_study(path, strict=False), Path(cache))
    return VerifyResult(bool(summary["passed"]), summary)

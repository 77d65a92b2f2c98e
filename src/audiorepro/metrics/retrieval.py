"""Canonical retrieval metrics for audio-text embeddings (definitions version 1).

Directions
----------
- **t2a** (text to audio): each caption is a query; its relevant items are the clips it is
  relevant to: its one clip in a ``text_to_audio`` dump (format version 1), any number of
  clips (at least one) in a relevance dump (version 2, e.g. a class prompt and every clip of
  its class).
- **a2t** (audio to text): each clip is a query; its relevant items are all its texts.

Every definition below is stated for a query with any number of relevant items (a2t always
needed that), so general relevance changes no formula: a query's ``r@k`` is whether *a*
relevant item is within the top ``k`` (its first relevant position ``pos_1 <= k``), its AP
averages ``i / pos_i`` over *all* its relevant items, ``mrr``/``mean_rank``/``median_rank``
use the position of its *first* relevant item. Version-1 dumps keep every value, and
:data:`DEFINITIONS_VERSION` stays 1.

>>> from audiorepro.formats.dump import make_dump
>>> e = np.eye(3)
>>> d = make_dump(e, e[[0, 1, 2, 0]], relevance_indptr=[0, 2, 4, 5],
...               relevance_indices=[0, 3, 0, 1, 2])  # text 0 is relevant to clips 0 and 1
>>> r = compute_retrieval(d).ranking("t2a")
>>> r.ptr.tolist(), r.pos.tolist()  # text 0: clip 0 first; clip 1 ties clip 2
([0, 2, 3, 4, 5], [1, 3, 1, 1, 1])
>>> mean_average_precision(r)  # text 0: (1/1 + 2/3) / 2; the others 1
0.9583333333333334

Scores are the dot products of the stored vectors (no re-normalization).

Ranks and ties
--------------
Each query's relevant items get 1-based positions in a strict ordering of all items by
descending score. Ties are broken by a **tie policy**:

- ``optimistic``: the best strict ordering consistent with the scores (relevant items before
  tied non-relevant ones);
- ``pessimistic`` (the default): the worst (relevant items after tied non-relevant ones).

Ties among relevant items do not matter (they are interchangeable). Every metric below is a
function of the positions (a :class:`Ranking`); the tie policy decides the positions.

Rounding rule
-------------
Each query's value is the float64 nearest to its exact rational value, and a metric is
``math.fsum(per-query values) / n_queries`` (one correctly rounded sum, one division). The
result therefore never depends on query order, chunking or threads, and an independent
implementation that follows the same rule (:mod:`audiorepro.reference`) agrees bit for bit.

The definitions are versioned: :data:`DEFINITIONS_VERSION` changes whenever any formula or
policy here changes.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.core.errors import param_error
from audiorepro.formats.dump import Dump
from audiorepro.metrics._exact import (
    ExactStats,
    RankCounts,
    exact_rank_counts,
    exact_relevance_counts,
)

DEFINITIONS_VERSION = 1
TiePolicy = Literal["pessimistic", "optimistic"]
TIE_POLICIES: tuple[TiePolicy, ...] = ("pessimistic", "optimistic")
DIRECTIONS = ("t2a", "a2t")
SCHEMA = "audiorepro.metrics/1"

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Ranking:
    """1-based positions of each query's relevant items, ascending, in CSR form.

    ``pos[ptr[q]:ptr[q+1]]`` are the positions of query ``q``'s relevant items.

    >>> Ranking.from_lists([[1], [2, 5]]).n_queries
    2
    """

    ptr: npt.NDArray[np.int64]
    pos: npt.NDArray[np.int64]

    @classmethod
    def from_lists(cls, positions: Sequence[Sequence[int]]) -> Ranking:
        ptr = np.zeros(len(positions) + 1, np.int64)
        ptr[1:] = np.cumsum([len(p) for p in positions])
        pos = np.array([x for p in positions for x in sorted(p)], dtype=np.int64)
        return cls(ptr=ptr, pos=pos)

    @property
    def n_queries(self) -> int:
        return int(self.ptr.shape[0] - 1)

    @property
    def n_relevant(self) -> npt.NDArray[np.int64]:
        return np.diff(self.ptr)

    @property
    def first(self) -> npt.NDArray[np.int64]:
        """Position of each query's first relevant item."""
        return np.asarray(self.pos[self.ptr[:-1]], dtype=np.int64)

    def _order_in_query(self) -> npt.NDArray[np.int64]:
        """1-based index of each relevant item among its query's relevant items."""
        return (
            np.arange(self.pos.shape[0], dtype=np.int64)
            - np.repeat(self.ptr[:-1], self.n_relevant)
            + 1
        )


def _check_tie_policy(tie_policy: object, func: str) -> None:
    if tie_policy not in TIE_POLICIES:
        raise param_error("tie_policy", func, "'pessimistic' or 'optimistic'", tie_policy)


def _check_k(k: object, func: str) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise param_error("k", func, "an int >= 1", k)


def positions_from_counts(counts: RankCounts, *, tie_policy: TiePolicy = "pessimistic") -> Ranking:
    """Positions of relevant items from exact counts of non-relevant items above and tied.

    With the relevant items of a query ordered so that the counts ``c`` of non-relevant items
    before them ascend (``c = greater`` when optimistic, ``greater + equal`` when pessimistic),
    the i-th relevant item sits at position ``i + c_i``.

    >>> from audiorepro.metrics._exact import RankCounts
    >>> rc = RankCounts(ptr=np.array([0, 2]), greater=np.array([3, 0]), equal=np.array([0, 1]))
    >>> positions_from_counts(rc, tie_policy="optimistic").pos.tolist()
    [1, 5]
    >>> positions_from_counts(rc, tie_policy="pessimistic").pos.tolist()
    [2, 5]
    """
    _check_tie_policy(tie_policy, "positions_from_counts")
    before = counts.greater + (counts.equal if tie_policy == "pessimistic" else 0)
    n_rel = np.diff(counts.ptr)
    query = np.repeat(np.arange(n_rel.shape[0]), n_rel)
    order = np.lexsort((before, query))
    sorted_before = before[order]
    within = np.arange(order.shape[0], dtype=np.int64) - np.repeat(counts.ptr[:-1], n_rel)
    return Ranking(
        ptr=counts.ptr.astype(np.int64), pos=(sorted_before + within + 1).astype(np.int64)
    )


def counts_from_scores(scores: npt.ArrayLike, relevant: Sequence[Sequence[int]]) -> RankCounts:
    """Rank counts from an explicit score matrix ``[queries, items]`` (small inputs, doctests).

    >>> counts_from_scores([[0.5, 0.5, 0.1]], [[1]]).equal.tolist()
    [1]
    """
    s = np.asarray(scores, dtype=np.float64)
    ptr = np.zeros(len(relevant) + 1, np.int64)
    ptr[1:] = np.cumsum([len(r) for r in relevant])
    greater, equal = [], []
    for q, rel in enumerate(relevant):
        nonrel = np.ones(s.shape[1], dtype=bool)
        nonrel[list(rel)] = False
        for r in rel:
            greater.append(int(np.sum(s[q, nonrel] > s[q, r])))
            equal.append(int(np.sum(s[q, nonrel] == s[q, r])))
    return RankCounts(ptr=ptr, greater=np.array(greater, np.int64), equal=np.array(equal, np.int64))


def ranking_from_scores(
    scores: npt.ArrayLike,
    relevant: Sequence[Sequence[int]],
    *,
    tie_policy: TiePolicy = "pessimistic",
) -> Ranking:
    """Positions of relevant items for an explicit score matrix.

    Item 1 is relevant and ties with item 0:

    >>> ranking_from_scores([[0.5, 0.5, 0.1]], [[1]], tie_policy="optimistic").pos.tolist()
    [1]
    >>> ranking_from_scores([[0.5, 0.5, 0.1]], [[1]], tie_policy="pessimistic").pos.tolist()
    [2]
    """
    _check_tie_policy(tie_policy, "ranking_from_scores")
    return positions_from_counts(counts_from_scores(scores, relevant), tie_policy=tie_policy)


def _mean(values: npt.ArrayLike) -> float:
    v: list[float] = np.asarray(values, dtype=np.float64).tolist()
    return math.fsum(v) / len(v)


def _per_query_count(ranking: Ranking, flags: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    out: npt.NDArray[np.int64] = np.add.reduceat(flags.astype(np.int64), ranking.ptr[:-1])
    return out


# --- per-query values (used for means and for bootstrap intervals) -------------------------


def hit_at_k_per_query(ranking: Ranking, *, k: int) -> FloatArray:
    """Per query ``[pos_1 <= k]``; their mean is :func:`hit_rate_at_k`.

    >>> hit_at_k_per_query(Ranking.from_lists([[1], [3, 4]]), k=2).tolist()
    [1.0, 0.0]
    """
    _check_k(k, "hit_at_k_per_query")
    return (ranking.first <= k).astype(np.float64)


def recall_at_k_per_query(ranking: Ranking, *, k: int) -> FloatArray:
    """Per query ``|{i: pos_i <= k}| / |R|``; their mean is :func:`recall_at_k`.

    >>> recall_at_k_per_query(Ranking.from_lists([[1], [3, 4]]), k=3).tolist()
    [1.0, 0.5]
    """
    _check_k(k, "recall_at_k_per_query")
    # An integer count over an integer: one IEEE division, correctly rounded.
    return _per_query_count(ranking, ranking.pos <= k) / ranking.n_relevant


def average_precision_per_query(ranking: Ranking, *, k: int | None = None) -> FloatArray:
    """Per query ``(1/|R|) * sum_{i : pos_i <= k} i / pos_i``, correctly rounded.

    One relevant item: one IEEE division. Several: exact fractions, rounded once.

    >>> average_precision_per_query(Ranking.from_lists([[2], [1, 3]])).tolist()
    [0.5, 0.8333333333333334]
    """
    if k is not None:
        _check_k(k, "average_precision_per_query")
    limit = np.iinfo(np.int64).max if k is None else k
    n_rel = ranking.n_relevant
    first = ranking.first
    out = np.where(first <= limit, 1.0 / first, 0.0)
    ptr = ranking.ptr.tolist()
    pos_all = ranking.pos.tolist()
    for q in np.flatnonzero(n_rel > 1).tolist():
        pos = [p for p in pos_all[ptr[q] : ptr[q + 1]] if p <= limit]
        if not pos:
            out[q] = 0.0
            continue
        # sum_i i / p_i = numer / lcm exactly; int / int is correctly rounded in Python.
        lcm = math.lcm(*pos)
        numer = sum((i + 1) * (lcm // p) for i, p in enumerate(pos))
        out[q] = numer / (lcm * (ptr[q + 1] - ptr[q]))
    return out


# --- the metrics -------------------------------------------------------------------------


def hit_rate_at_k(ranking: Ranking, *, k: int) -> float:
    """``r@k``: fraction of queries with at least one relevant item in the top ``k``.

    Formula: ``mean_q [pos_q,1 <= k]`` where ``pos_q,1`` is the position of query ``q``'s first
    relevant item. This is the "R@k" of CLAP papers (pytrec_eval ``success_k``, ranx
    ``hit_rate@k``). Denominator: the number of queries. Ties: by the ranking's tie policy.

    >>> hit_rate_at_k(Ranking.from_lists([[1], [3], [2, 5]]), k=2)
    0.6666666666666666
    >>> scores, rel = [[0.5, 0.5, 0.1]], [[1]]  # relevant item 1 ties with item 0
    >>> hit_rate_at_k(ranking_from_scores(scores, rel, tie_policy="optimistic"), k=1)
    1.0
    >>> hit_rate_at_k(ranking_from_scores(scores, rel, tie_policy="pessimistic"), k=1)
    0.0
    """
    _check_k(k, "hit_rate_at_k")
    return _mean(hit_at_k_per_query(ranking, k=k))


def recall_at_k(ranking: Ranking, *, k: int) -> float:
    """``recall@k``: mean fraction of a query's relevant items that are in its top ``k``.

    Formula: ``mean_q |{i : pos_q,i <= k}| / |R_q|`` (pytrec_eval ``recall_k``). With five
    captions per clip, a2t ``recall@1`` is at most 0.2. Ties: by the ranking's tie policy.

    >>> recall_at_k(Ranking.from_lists([[1, 2, 7, 8, 9]]), k=5)
    0.4
    >>> recall_at_k(ranking_from_scores([[0.9, 0.9, 0.2]], [[0, 1]], tie_policy="optimistic"), k=1)
    0.5
    """
    _check_k(k, "recall_at_k")
    return _mean(recall_at_k_per_query(ranking, k=k))


def mean_average_precision(ranking: Ranking) -> float:
    """``map``: mean over queries of average precision over all relevant items.

    Formula: ``AP_q = (1/|R_q|) * sum_i i / pos_q,i`` with ``pos_q,1 < pos_q,2 < ...``, and
    ``map = mean_q AP_q`` (pytrec_eval ``map``). Ties: the ranking's tie policy places relevant
    items before (optimistic) or after (pessimistic) tied non-relevant items.

    >>> mean_average_precision(Ranking.from_lists([[1, 3]]))  # (1/1 + 2/3) / 2 = 5/6
    0.8333333333333334
    >>> scores, rel = [[0.5, 0.5, 0.5]], [[2]]  # all scores equal
    >>> mean_average_precision(ranking_from_scores(scores, rel, tie_policy="optimistic"))
    1.0
    >>> mean_average_precision(ranking_from_scores(scores, rel, tie_policy="pessimistic"))
    0.3333333333333333
    """
    return _mean(average_precision_per_query(ranking))


def mean_average_precision_at_k(ranking: Ranking, *, k: int) -> float:
    """``map@k``: AP truncated at ``k``, divided by the number of relevant items.

    Formula: ``AP@k_q = (1/|R_q|) * sum_{i : pos_q,i <= k} i / pos_q,i`` (pytrec_eval
    ``map_cut_k``, DCASE's mAP@10). Ties: the ranking's tie policy.

    >>> mean_average_precision_at_k(Ranking.from_lists([[1, 12]]), k=10)
    0.5
    >>> tied = ranking_from_scores([[0.7, 0.7, 0.1]], [[1]], tie_policy="pessimistic")
    >>> mean_average_precision_at_k(tied, k=10)
    0.5
    """
    _check_k(k, "mean_average_precision_at_k")
    return _mean(average_precision_per_query(ranking, k=k))


def mean_reciprocal_rank(ranking: Ranking) -> float:
    """``mrr``: mean reciprocal rank of each query's first relevant item.

    Formula: ``mean_q 1 / pos_q,1`` (pytrec_eval ``recip_rank``). Ties: the ranking's tie
    policy.

    >>> mean_reciprocal_rank(Ranking.from_lists([[1], [4, 5]]))
    0.625
    >>> mean_reciprocal_rank(ranking_from_scores([[0.2, 0.2]], [[0]], tie_policy="pessimistic"))
    0.5
    """
    return _mean(1.0 / ranking.first)


def mean_rank(ranking: Ranking) -> float:
    """``mean_rank``: mean 1-based position of each query's first relevant item.

    Formula: ``mean_q pos_q,1``; lower is better. Ties: the ranking's tie policy.

    >>> mean_rank(Ranking.from_lists([[1], [4, 5]]))
    2.5
    >>> mean_rank(ranking_from_scores([[0.2, 0.2, 0.2]], [[0]], tie_policy="pessimistic"))
    3.0
    """
    return _mean(ranking.first)


def median_rank(ranking: Ranking) -> float:
    """``median_rank``: median 1-based position of each query's first relevant item.

    Formula: ``median_q pos_q,1`` as numpy's median (the mean of the two middle values for an
    even count, so it can end in .5); lower is better. Ties: the ranking's tie policy.

    >>> median_rank(Ranking.from_lists([[1], [4, 5]]))
    2.5
    >>> median_rank(ranking_from_scores([[0.2, 0.2, 0.2]], [[0]], tie_policy="optimistic"))
    1.0
    """
    return float(np.median(ranking.first))


@dataclass(frozen=True)
class Metric:
    """A named metric: its function, fixed arguments and direction."""

    name: str
    func: Callable[..., float]
    kwargs: dict[str, Any]
    higher_is_better: bool

    def __call__(self, ranking: Ranking) -> float:
        return self.func(ranking, **self.kwargs)


def _registry() -> dict[str, Metric]:
    reg: dict[str, Metric] = {}
    for k in (1, 5, 10):
        reg[f"r@{k}"] = Metric(f"r@{k}", hit_rate_at_k, {"k": k}, True)
    for k in (1, 5, 10):
        reg[f"recall@{k}"] = Metric(f"recall@{k}", recall_at_k, {"k": k}, True)
    reg["map"] = Metric("map", mean_average_precision, {}, True)
    reg["map@10"] = Metric("map@10", mean_average_precision_at_k, {"k": 10}, True)
    reg["mrr"] = Metric("mrr", mean_reciprocal_rank, {}, True)
    reg["mean_rank"] = Metric("mean_rank", mean_rank, {}, False)
    reg["median_rank"] = Metric("median_rank", median_rank, {}, False)
    return reg


#: Every canonical metric, in report order.
METRICS: dict[str, Metric] = _registry()


def all_metrics(ranking: Ranking) -> dict[str, float]:
    return {name: metric(ranking) for name, metric in METRICS.items()}


@dataclass(frozen=True)
class RetrievalResult:
    """Exact counts for both directions of one dump, and everything derived from them."""

    counts: dict[str, RankCounts]
    stats: ExactStats
    _cache: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict, repr=False)

    def ranking(self, direction: str, tie_policy: TiePolicy = "pessimistic") -> Ranking:
        return positions_from_counts(self.counts[direction], tie_policy=tie_policy)

    def metrics(self, tie_policy: TiePolicy = "pessimistic") -> dict[str, dict[str, float]]:
        _check_tie_policy(tie_policy, "RetrievalResult.metrics")
        if tie_policy not in self._cache:
            self._cache[tie_policy] = {
                d: all_metrics(self.ranking(d, tie_policy)) for d in DIRECTIONS
            }
        return copy.deepcopy(self._cache[tie_policy])

    def ties(self) -> dict[str, TieSummary]:
        """Per direction: queries whose positions depend on the tie policy, and the bounds
        ``[optimistic, pessimistic]`` of every metric whose value depends on it."""
        out: dict[str, TieSummary] = {}
        opt, pes = self.metrics("optimistic"), self.metrics("pessimistic")
        for d in DIRECTIONS:
            c = self.counts[d]
            per_query_ties = np.add.reduceat(c.equal, c.ptr[:-1]) if c.equal.size else c.equal
            bounds = {
                name: [opt[d][name], pes[d][name]]
                for name in METRICS
                if opt[d][name] != pes[d][name]
            }
            out[d] = {"queries_affected": int(np.count_nonzero(per_query_ties)), "bounds": bounds}
        return out


def compute_retrieval(dump: Dump, *, chunk_rows: int | None = None) -> RetrievalResult:
    """Exact rank counts of a dump in both directions (the expensive step, done once).

    Either format version: when every text has exactly one relevant clip (every version-1
    dump) both directions come from one pass of :func:`exact_rank_counts` (``chunk_rows``:
    captions per chunk); otherwise each direction from :func:`exact_relevance_counts`
    (``chunk_rows``: items per chunk). The counts are exact either way, so the metrics do not
    depend on the path (the tests check both on the same relevance)."""
    if chunk_rows is not None:
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise param_error("chunk_rows", "compute_retrieval", "an int >= 1", chunk_rows)
    t2a_single = dump.text_to_audio
    if t2a_single is None:
        t2a_single = dump.relevance.one_clip_per_text()
    if t2a_single is not None:  # one clip per caption: both directions from one pass
        t2a, a2t, stats = exact_rank_counts(
            dump.audio_embeds, dump.text_embeds, t2a_single, chunk_rows=chunk_rows
        )
    else:  # a caption with several relevant clips: each direction on its own
        rel = dump.relevance
        rel_t = rel.transpose()
        a2t, s_a = exact_relevance_counts(
            dump.audio_embeds, dump.text_embeds, rel.indptr, rel.indices, chunk_rows=chunk_rows
        )
        t2a, s_t = exact_relevance_counts(
            dump.text_embeds, dump.audio_embeds, rel_t.indptr, rel_t.indices, chunk_rows=chunk_rows
        )
        stats = ExactStats(
            comparisons=s_a.comparisons + s_t.comparisons,
            refined_float64=s_a.refined_float64 + s_t.refined_float64,
            exact=s_a.exact + s_t.exact,
        )
    return RetrievalResult(counts={"t2a": t2a, "a2t": a2t}, stats=stats)


class TieSummary(TypedDict):
    """Per direction: queries whose positions depend on the tie policy, and the bounds
    ``[optimistic, pessimistic]`` of every metric whose value depends on it."""

    queries_affected: int
    bounds: dict[str, list[float]]


class MetricsReport(TypedDict):
    """The ``audiorepro.metrics/1`` document (``audiorepro metrics --json``)."""

    schema: str
    definitions_version: int
    source: str
    sha256: str | None
    n_clips: int
    n_captions: int
    captions_per_clip: int | None
    multi_positive: bool
    #: Only for a relevance dump (format version 2: texts may be relevant to several clips;
    #: ``n_captions`` and ``captions_per_clip`` then count texts). Absent for version 1, whose
    #: reports are unchanged.
    format_version: NotRequired[int]
    tie_policy: TiePolicy
    #: direction (t2a, a2t) -> metric name -> value
    metrics: dict[str, dict[str, float]]
    ties: dict[str, TieSummary]


def metrics_report(
    dump: Dump, result: RetrievalResult, *, tie_policy: TiePolicy = "pessimistic"
) -> MetricsReport:
    """The ``audiorepro.metrics/1`` JSON document for one dump."""
    _check_tie_policy(tie_policy, "metrics_report")
    report: MetricsReport = {
        "schema": SCHEMA,
        "definitions_version": DEFINITIONS_VERSION,
        "source": dump.source,
        "sha256": dump.sha256,
        "n_clips": dump.n_clips,
        "n_captions": dump.n_captions,
        "captions_per_clip": dump.captions_per_clip,
        "multi_positive": dump.multi_positive,
        "tie_policy": tie_policy,
        "metrics": result.metrics(tie_policy),
        "ties": result.ties(),
    }
    if dump.format_version != 1:
        report["format_version"] = dump.format_version
    return report

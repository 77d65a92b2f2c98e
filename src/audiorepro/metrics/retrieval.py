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

Beside the two bounds, ``ndcg`` and ``ndcg@k`` also have a **tie-averaged** value
(:func:`ndcg_tie_averaged_per_query`, scikit-learn's ``ndcg_score`` after McSherry and
Najork: the mean over every order of tied items), reported in the ties summary.

Rounding rule
-------------
Each query's value is the float64 nearest to its exact rational value, and a metric is
``math.fsum(per-query values) / n_queries`` (one correctly rounded sum, one division). The
result therefore never depends on query order, chunking or threads, and an independent
implementation that follows the same rule (:mod:`audiorepro.reference`) agrees bit for bit.

The definitions are versioned: :data:`DEFINITIONS_VERSION` changes whenever any formula or
policy here changes. Version 1.1 (:data:`DEFINITIONS_MINOR`) only adds: any cutoff ``k``
for ``r@k``, ``recall@k``, ``map@k``, and ``precision@k``, ``mrr@k``, ``ndcg@k``, ``ndcg``,
``r_precision`` (:func:`metric_by_name`, :func:`metric_names`); the 1.0 report is unchanged.
"""

from __future__ import annotations

import copy
import decimal
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, NotRequired

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.core.errors import param_error
from audiorepro.formats.dump import Dump, EmptyPolicy, GainLevels
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
    #: Queries without a relevant item that every mean counts as 0 (policy ``zero``); they
    #: have no entry in ``ptr`` (policy ``skip`` leaves them out altogether: 0 here). The
    #: rank measures (``mean_rank``, ``median_rank``) have no value for them and ignore them.
    n_empty: int = 0
    #: Graded relevance: the gain (> 0) of the relevant item at each of :attr:`pos`; None for
    #: binary relevance (every gain 1). Only nDCG reads it. int64, or float64 (declared float
    #: gains: dyadic rationals, exact in longdouble and in decimals, as integers are).
    gains: npt.NDArray[Any] | None = None

    @classmethod
    def from_lists(cls, positions: Sequence[Sequence[int]], *, n_empty: int = 0) -> Ranking:
        """``n_empty``: see the attribute; ``positions`` are the queries with relevant items.

        >>> hit_rate_at_k(Ranking.from_lists([[1], [3]], n_empty=2), k=1)
        0.25
        """
        ptr = np.zeros(len(positions) + 1, np.int64)
        ptr[1:] = np.cumsum([len(p) for p in positions])
        pos = np.array([x for p in positions for x in sorted(p)], dtype=np.int64)
        return cls(ptr=ptr, pos=pos, n_empty=n_empty)

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


def _mean(values: npt.ArrayLike, n_empty: int = 0) -> float:
    """``fsum(values) / n_queries``; ``n_empty`` queries without a relevant item count as 0
    (policy ``zero``): they add nothing to the sum and one each to the count."""
    v: list[float] = np.asarray(values, dtype=np.float64).tolist()
    return math.fsum(v) / (len(v) + n_empty)


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


def precision_at_k_per_query(ranking: Ranking, *, k: int) -> FloatArray:
    """Per query ``|{i: pos_i <= k}| / k``; their mean is :func:`precision_at_k`.

    >>> precision_at_k_per_query(Ranking.from_lists([[1], [3, 4]]), k=4).tolist()
    [0.25, 0.5]
    """
    _check_k(k, "precision_at_k_per_query")
    # An integer count over an integer: one IEEE division, correctly rounded.
    return _per_query_count(ranking, ranking.pos <= k) / np.float64(k)


def reciprocal_rank_per_query(ranking: Ranking, *, k: int | None = None) -> FloatArray:
    """Per query ``1 / pos_1``, 0 when ``pos_1 > k``; their mean is :func:`mean_reciprocal_rank`
    (``k=None``) or :func:`mean_reciprocal_rank_at_k`.

    >>> reciprocal_rank_per_query(Ranking.from_lists([[2], [4, 5]]), k=3).tolist()
    [0.5, 0.0]
    """
    if k is not None:
        _check_k(k, "reciprocal_rank_per_query")
    first = ranking.first
    rr = 1.0 / first
    return rr if k is None else np.where(first <= k, rr, 0.0)


def r_precision_per_query(ranking: Ranking) -> FloatArray:
    """Per query ``|{i: pos_i <= |R|}| / |R|`` (precision at the number of relevant items).

    >>> r_precision_per_query(Ranking.from_lists([[1], [1, 3], [2, 3]])).tolist()
    [1.0, 0.5, 0.5]
    """
    limit = np.repeat(ranking.n_relevant, ranking.n_relevant)
    return _per_query_count(ranking, ranking.pos <= limit) / ranking.n_relevant


#: Significant digits of the decimal fallback of nDCG (far beyond float64's 17: the float64
#: nearest to the 40-digit value is the one nearest to the exact value, but for a value within
#: 1e-40 relative of a midpoint between two doubles, which no test has met).
_NDCG_DIGITS = 40


def _ndcg_decimal(pos: Sequence[int], n_rel: int, limit: int) -> float:
    """One query's nDCG from 40-digit decimal logarithms, rounded once to float64."""
    with decimal.localcontext() as ctx:
        ctx.prec = _NDCG_DIGITS
        ln2 = decimal.Decimal(2).ln()

        def discount(p: int) -> decimal.Decimal:
            return ln2 / decimal.Decimal(p + 1).ln()

        dcg = sum((discount(p) for p in pos if p <= limit), decimal.Decimal(0))
        ideal = sum((discount(i) for i in range(1, min(n_rel, limit) + 1)), decimal.Decimal(0))
        return float(dcg / ideal)


def _ndcg_graded_decimal(pos: Sequence[int], gains: Sequence[float], limit: int) -> float:
    """One graded query's nDCG from 40-digit decimal logarithms, rounded once to float64."""
    with decimal.localcontext() as ctx:
        ctx.prec = _NDCG_DIGITS
        ln2 = decimal.Decimal(2).ln()

        def discount(p: int) -> decimal.Decimal:
            return ln2 / decimal.Decimal(p + 1).ln()

        dcg = sum(
            (
                decimal.Decimal(g) * discount(p)
                for p, g in zip(pos, gains, strict=True)
                if p <= limit
            ),
            decimal.Decimal(0),
        )
        best = sorted(gains, reverse=True)[:limit]
        ideal = sum(
            (decimal.Decimal(g) * discount(i + 1) for i, g in enumerate(best)), decimal.Decimal(0)
        )
        return float(dcg / ideal)


def _ndcg_graded(ranking: Ranking, gains: npt.NDArray[Any], limit: int) -> FloatArray:
    """:func:`ndcg_per_query` with gains: longdouble with an error bound, else decimals."""
    ld = np.longdouble
    n_rel = ranking.n_relevant
    g = gains.astype(ld)
    inside = ranking.pos <= limit
    terms = np.where(inside, g / np.log2(ranking.pos.astype(ld) + 1), ld(0))
    dcg = np.add.reduceat(terms, ranking.ptr[:-1])
    query = np.repeat(np.arange(ranking.n_queries), n_rel)
    best = np.lexsort((-gains, query))  # each query's gains, descending
    rank_in = ranking._order_in_query()  # 1-based rank of the ideal order's entries
    ideal_terms = np.where(rank_in <= limit, g[best] / np.log2(rank_in.astype(ld) + 1), ld(0))
    ideal = np.add.reduceat(ideal_terms, ranking.ptr[:-1])
    value = dcg / ideal
    # As for binary gains (integer gains up to 2**53, and float64 gains, are exact in
    # longdouble, so each product has the same few-ulp error).
    err = ld(4) * (2 * n_rel + 6).astype(ld) * ld(np.finfo(ld).eps)
    lo = (value * (1 - err)).astype(np.float64)
    hi = (value * (1 + err)).astype(np.float64)
    out: FloatArray = np.asarray(lo, dtype=np.float64).copy()
    ptr = ranking.ptr.tolist()
    pos_all, gains_all = ranking.pos.tolist(), gains.tolist()
    for q in np.flatnonzero(lo != hi).tolist():
        a, b = ptr[q], ptr[q + 1]
        out[q] = _ndcg_graded_decimal(pos_all[a:b], gains_all[a:b], limit)
    return out


def ndcg_per_query(ranking: Ranking, *, k: int | None = None) -> FloatArray:
    """Per query ``DCG@k / IDCG@k`` with binary gains, correctly rounded to float64.

    ``DCG@k = sum_{i : pos_i <= k} 1 / log2(pos_i + 1)``, ``IDCG@k = sum_{i=1}^{min(|R|, k)}
    1 / log2(i + 1)``; ``k=None``: no cutoff. The values are irrational: each is computed in
    extended precision (``numpy.longdouble``) with a bound on its error, and where the bound
    does not decide the nearest float64, again with 40-digit decimal logarithms, so that the
    result is the float64 nearest to the exact value on every platform (a platform whose
    longdouble is float64 takes the decimal path throughout: slower, same numbers).

    >>> ndcg_per_query(Ranking.from_lists([[1], [3], [1, 3]])).tolist()
    [1.0, 0.5, 0.9197207891481877]
    >>> ndcg_per_query(Ranking.from_lists([[1, 3]]), k=2).tolist()
    [0.6131471927654584]

    Graded relevance (:attr:`Ranking.gains`, a dump's ``relevance_gains``): each term is
    multiplied by its gain, ``DCG@k = sum_{i : pos_i <= k} g_i / log2(pos_i + 1)``, and
    ``IDCG@k`` sums the query's gains in descending order at positions ``1..min(|R|, k)``
    (trec_eval's ``ndcg`` with linear gains, scikit-learn's ``ndcg_score``). Where relevant
    items of different gains tie, pessimistic puts the lower gains first, optimistic the
    higher (the two bound every order):

    >>> graded = Ranking(ptr=np.array([0, 2]), pos=np.array([1, 2]), gains=np.array([1, 3]))
    >>> ndcg_per_query(graded).tolist()  # (1 + 3/log2(3)) / (3 + 1/log2(3))
    [0.7967075809905066]
    """
    if k is not None:
        _check_k(k, "ndcg_per_query")
    limit = np.iinfo(np.int64).max if k is None else k
    ld = np.longdouble
    n_rel = ranking.n_relevant
    if ranking.pos.size == 0:
        return np.zeros(ranking.n_queries, dtype=np.float64)
    if ranking.gains is not None:
        return _ndcg_graded(ranking, ranking.gains, limit)
    inside = ranking.pos <= limit
    terms = np.where(inside, ld(1) / np.log2(ranking.pos.astype(ld) + 1), ld(0))
    dcg = np.add.reduceat(terms, ranking.ptr[:-1])
    m = np.minimum(n_rel, limit)
    ideal_table = np.cumsum(ld(1) / np.log2(np.arange(1, int(m.max()) + 1, dtype=ld) + 1))
    value = dcg / ideal_table[m - 1]
    # Every term has a relative error within a few ulp; sums of positive terms add one ulp
    # per addition; 4x margin for the logarithm's accuracy.
    err = ld(4) * (n_rel + m + 6).astype(ld) * ld(np.finfo(ld).eps)
    lo = (value * (1 - err)).astype(np.float64)
    hi = (value * (1 + err)).astype(np.float64)
    out: FloatArray = np.asarray(lo, dtype=np.float64).copy()
    ptr = ranking.ptr.tolist()
    pos_all = ranking.pos.tolist()
    for q in np.flatnonzero(lo != hi).tolist():
        out[q] = _ndcg_decimal(pos_all[ptr[q] : ptr[q + 1]], ptr[q + 1] - ptr[q], limit)
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
    return _mean(hit_at_k_per_query(ranking, k=k), ranking.n_empty)


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
    return _mean(recall_at_k_per_query(ranking, k=k), ranking.n_empty)


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
    return _mean(average_precision_per_query(ranking), ranking.n_empty)


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
    return _mean(average_precision_per_query(ranking, k=k), ranking.n_empty)


def mean_reciprocal_rank(ranking: Ranking) -> float:
    """``mrr``: mean reciprocal rank of each query's first relevant item.

    Formula: ``mean_q 1 / pos_q,1`` (pytrec_eval ``recip_rank``). Ties: the ranking's tie
    policy.

    >>> mean_reciprocal_rank(Ranking.from_lists([[1], [4, 5]]))
    0.625
    >>> mean_reciprocal_rank(ranking_from_scores([[0.2, 0.2]], [[0]], tie_policy="pessimistic"))
    0.5
    """
    return _mean(1.0 / ranking.first, ranking.n_empty)


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


def precision_at_k(ranking: Ranking, *, k: int) -> float:
    """``precision@k``: mean fraction of a query's top ``k`` that is relevant.

    Formula: ``mean_q |{i : pos_q,i <= k}| / k`` (pytrec_eval ``P_k``; a ranking shorter than
    ``k`` still divides by ``k``, as trec_eval does). Ties: by the ranking's tie policy
    (pessimistic is the lower bound, optimistic the upper).

    >>> precision_at_k(Ranking.from_lists([[1, 2, 7]]), k=5)
    0.4
    >>> scores, rel = [[0.9, 0.9, 0.2]], [[1]]  # relevant item 1 ties with item 0
    >>> precision_at_k(ranking_from_scores(scores, rel, tie_policy="optimistic"), k=1)
    1.0
    >>> precision_at_k(ranking_from_scores(scores, rel, tie_policy="pessimistic"), k=1)
    0.0
    """
    _check_k(k, "precision_at_k")
    return _mean(precision_at_k_per_query(ranking, k=k), ranking.n_empty)


def mean_reciprocal_rank_at_k(ranking: Ranking, *, k: int) -> float:
    """``mrr@k``: mean reciprocal rank of each query's first relevant item, 0 beyond ``k``.

    Formula: ``mean_q [pos_q,1 <= k] / pos_q,1`` (ranx ``mrr@k``, torchmetrics
    ``RetrievalMRR(top_k=k)``). Ties: the ranking's tie policy (pessimistic: lower bound).

    >>> mean_reciprocal_rank_at_k(Ranking.from_lists([[1], [4, 5]]), k=3)
    0.5
    >>> scores, rel = [[0.2, 0.2, 0.1]], [[0]]
    >>> mean_reciprocal_rank_at_k(ranking_from_scores(scores, rel, tie_policy="pessimistic"), k=1)
    0.0
    >>> mean_reciprocal_rank_at_k(ranking_from_scores(scores, rel, tie_policy="optimistic"), k=1)
    1.0
    """
    _check_k(k, "mean_reciprocal_rank_at_k")
    return _mean(reciprocal_rank_per_query(ranking, k=k), ranking.n_empty)


def ndcg_at_k(ranking: Ranking, *, k: int) -> float:
    """``ndcg@k``: mean normalized discounted cumulative gain in the top ``k``, binary gains.

    Formula: ``mean_q DCG@k_q / IDCG@k_q`` with ``DCG@k = sum_{i : pos_i <= k} 1/log2(pos_i+1)``
    and ``IDCG@k = sum_{i=1}^{min(|R|, k)} 1/log2(i+1)`` (pytrec_eval ``ndcg_cut_k``, ranx
    ``ndcg@k``); each query's value is the float64 nearest to the exact one
    (:func:`ndcg_per_query`). Ties: the ranking's tie policy; pessimistic and optimistic bound
    every order of tied items (scikit-learn's ``ndcg_score`` averages over them instead, a
    value between the two).

    >>> ndcg_at_k(Ranking.from_lists([[1, 3]]), k=10)  # (1 + 1/2) / (1 + 1/log2(3))
    0.9197207891481877
    >>> scores, rel = [[0.5, 0.5]], [[1]]
    >>> ndcg_at_k(ranking_from_scores(scores, rel, tie_policy="optimistic"), k=1)
    1.0
    >>> ndcg_at_k(ranking_from_scores(scores, rel, tie_policy="pessimistic"), k=2)
    0.6309297535714574
    """
    _check_k(k, "ndcg_at_k")
    return _mean(ndcg_per_query(ranking, k=k), ranking.n_empty)


def ndcg(ranking: Ranking) -> float:
    """``ndcg``: :func:`ndcg_at_k` without a cutoff (every relevant item counts).

    Formula: ``mean_q (sum_i 1/log2(pos_q,i + 1)) / (sum_{i=1}^{|R_q|} 1/log2(i + 1))``
    (pytrec_eval ``ndcg`` with binary relevance). Ties: the ranking's tie policy.

    >>> ndcg(Ranking.from_lists([[1], [3]]))  # (1 + 1/log2(4)) / 2
    0.75
    >>> ndcg(ranking_from_scores([[0.5, 0.5, 0.5]], [[0]], tie_policy="pessimistic"))
    0.5
    """
    return _mean(ndcg_per_query(ranking), ranking.n_empty)


def r_precision(ranking: Ranking) -> float:
    """``r_precision``: mean precision at rank ``|R_q|``, the number of the query's relevant items.

    Formula: ``mean_q |{i : pos_q,i <= |R_q|}| / |R_q|`` (pytrec_eval ``Rprec``); with one
    relevant item it is ``r@1``. Ties: the ranking's tie policy (pessimistic: lower bound).

    >>> r_precision(Ranking.from_lists([[1, 3], [1, 2]]))
    0.75
    >>> scores, rel = [[0.4, 0.4, 0.1]], [[0, 1]]  # both relevant items tie: no effect
    >>> r_precision(ranking_from_scores(scores, rel, tie_policy="pessimistic"))
    1.0
    """
    return _mean(r_precision_per_query(ranking), ranking.n_empty)


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


#: Definitions 1.1 (additive): the cutoff families and the uncut measures below, at any
#: cutoff. Every name and value of 1.0 (:data:`METRICS`) is unchanged, so
#: :data:`DEFINITIONS_VERSION` stays 1; a report that holds 1.1's measures says
#: ``definitions_minor: 1``.
DEFINITIONS_MINOR = 1
#: Metric families with a cutoff ``k``: ``<family>@<k>`` -> its function (all higher-better).
CUTOFF_FAMILIES: dict[str, Callable[..., float]] = {
    "r": hit_rate_at_k,
    "recall": recall_at_k,
    "precision": precision_at_k,
    "map": mean_average_precision_at_k,
    "mrr": mean_reciprocal_rank_at_k,
    "ndcg": ndcg_at_k,
    # pytrec_eval's and ranx's name for r@k: the same function, accepted as a published
    # value's name, never a column of its own (a report has r@k).
    "success": hit_rate_at_k,
}
#: Measures without a cutoff: name -> (function, higher is better).
UNCUT_METRICS: dict[str, tuple[Callable[..., float], bool]] = {
    "map": (mean_average_precision, True),
    "mrr": (mean_reciprocal_rank, True),
    "ndcg": (ndcg, True),
    "r_precision": (r_precision, True),
    "mean_rank": (mean_rank, False),
    "median_rank": (median_rank, False),
}
_CUTOFF_NAME = re.compile(r"^([a-z]+)@([1-9][0-9]{0,8})$")


def metric_by_name(name: str) -> Metric:
    """The metric a name denotes: a 1.0 name (:data:`METRICS`), ``<family>@<k>`` for a family
    of :data:`CUTOFF_FAMILIES` and any ``k >= 1``, or a name of :data:`UNCUT_METRICS`.

    >>> metric_by_name("ndcg@50").kwargs, metric_by_name("r_precision").higher_is_better
    ({'k': 50}, True)
    >>> metric_by_name("ndcg@0")
    Traceback (most recent call last):
    ...
    ValueError: unknown retrieval metric 'ndcg@0'; expected map, mrr, ndcg, r_precision, \
mean_rank, median_rank, or <family>@<k> with family in r, recall, precision, map, mrr, ndcg, \
success and k an int >= 1
    """
    if name in METRICS:
        return METRICS[name]
    if name in UNCUT_METRICS:
        func, higher = UNCUT_METRICS[name]
        return Metric(name, func, {}, higher)
    match = _CUTOFF_NAME.match(name)
    if match is not None and match.group(1) in CUTOFF_FAMILIES:
        return Metric(name, CUTOFF_FAMILIES[match.group(1)], {"k": int(match.group(2))}, True)
    raise ValueError(
        f"unknown retrieval metric {name!r}; expected {', '.join(UNCUT_METRICS)}, or "
        f"<family>@<k> with family in {', '.join(CUTOFF_FAMILIES)} and k an int >= 1"
    )


def is_metric_name(name: str) -> bool:
    """Whether ``name`` denotes a canonical retrieval metric (:func:`metric_by_name`)."""
    try:
        metric_by_name(name)
    except ValueError:
        return False
    return True


def cutoff_problem(cutoffs: object) -> str | None:
    """Why ``cutoffs`` is not a list of cutoffs (positive, unique ints in ascending order).

    >>> cutoff_problem([1, 5, 10, 50]) is None
    True
    >>> cutoff_problem([5, 1])
    'must be in ascending order, got [5, 1]'
    """
    if not isinstance(cutoffs, (list, tuple)) or not cutoffs:
        return f"must be a non-empty list of ints >= 1, got {cutoffs!r}"
    for k in cutoffs:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            return f"must hold ints >= 1 only, got {k!r}"
    if len(set(cutoffs)) != len(cutoffs):
        return f"must not repeat a cutoff, got {list(cutoffs)!r}"
    if list(cutoffs) != sorted(cutoffs):
        return f"must be in ascending order, got {list(cutoffs)!r}"
    return None


def metric_names(cutoffs: Sequence[int] | None = None) -> tuple[str, ...]:
    """The report's metric names: 1.0's (:data:`METRICS`) without cutoffs; with them, every
    cutoff family at each cutoff and the uncut measures (definitions 1.1).

    >>> metric_names([3])
    ('r@3', 'recall@3', 'precision@3', 'map', 'map@3', 'mrr', 'mrr@3', 'ndcg', 'ndcg@3', \
'r_precision', 'mean_rank', 'median_rank')
    """
    if cutoffs is None:
        return tuple(METRICS)
    problem = cutoff_problem(list(cutoffs))
    if problem is not None:
        raise param_error("cutoffs", "metric_names", "ascending unique ints >= 1", cutoffs)
    names = [f"{f}@{k}" for f in ("r", "recall", "precision") for k in cutoffs]
    for family in ("map", "mrr", "ndcg"):
        names += [family, *(f"{family}@{k}" for k in cutoffs)]
    return (*names, "r_precision", "mean_rank", "median_rank")


def all_metrics(ranking: Ranking, cutoffs: Sequence[int] | None = None) -> dict[str, float]:
    return {name: metric_by_name(name)(ranking) for name in metric_names(cutoffs)}


Cutoffs = tuple[int, ...] | None


@dataclass(frozen=True)
class Graded:
    """Graded relevance of one direction: the gain of each entry of its :class:`RankCounts`
    (aligned with ``greater``), and the vectors, for ordering tied relevant entries exactly."""

    gains: npt.NDArray[Any]
    queries: npt.NDArray[Any]
    items: npt.NDArray[Any]


def _exact_score(x: npt.NDArray[Any], y: npt.NDArray[Any]) -> Fraction:
    """The exact dot product of two stored vectors (every float is a dyadic rational)."""
    return sum(
        (Fraction(a) * Fraction(b) for a, b in zip(x.tolist(), y.tolist(), strict=True)),
        Fraction(0),
    )


def graded_positions(counts: RankCounts, graded: Graded, tie_policy: TiePolicy) -> Ranking:
    """:func:`positions_from_counts` with each position's gain. Relevant entries with the same
    number of non-relevant items before them hold consecutive positions; where their gains
    differ they are ordered by their exact scores, descending, and equal scores by gain
    (pessimistic: ascending, the worst order; optimistic: descending, the best).

    >>> rc = RankCounts(ptr=np.array([0, 2]), greater=np.array([0, 0]), equal=np.array([0, 0]),
    ...                 relevant=np.array([0, 1]))
    >>> g = Graded(np.array([1, 3]), np.array([[1.0]]), np.array([[2.0], [1.0]]))
    >>> graded_positions(rc, g, "pessimistic").gains.tolist()  # item 0 scores 2 > 1
    [1, 3]
    """
    _check_tie_policy(tie_policy, "graded_positions")
    before = counts.greater + (counts.equal if tie_policy == "pessimistic" else 0)
    n_rel = np.diff(counts.ptr)
    query = np.repeat(np.arange(n_rel.shape[0]), n_rel)
    order = np.lexsort((before, query))
    gains = graded.gains[order].copy()
    key_q, key_b = query[order], before[order]
    start = np.flatnonzero(np.r_[True, (key_q[1:] != key_q[:-1]) | (key_b[1:] != key_b[:-1])])
    stop = np.r_[start[1:], order.shape[0]]
    sign = 1 if tie_policy == "pessimistic" else -1
    assert counts.relevant is not None
    several = np.flatnonzero(stop - start > 1)  # one entry alone has its one order
    for a, b in zip(start[several].tolist(), stop[several].tolist(), strict=True):
        if bool(np.all(gains[a:b] == gains[a])):
            continue  # one entry, or equal gains: the order within does not matter
        q = int(key_q[a])
        entries = order[a:b].tolist()
        scored = sorted(
            (-_exact_score(graded.queries[q], graded.items[counts.relevant[e]]), sign * g, g)
            for e, g in zip(entries, gains[a:b].tolist(), strict=True)
        )
        gains[a:b] = [g for _, _, g in scored]
    ranking = positions_from_counts(counts, tie_policy=tie_policy)
    return Ranking(ptr=ranking.ptr, pos=ranking.pos, gains=gains)


def _is_ndcg(name: str) -> bool:
    return name == "ndcg" or name.startswith("ndcg@")


def _tie_groups(
    entries: list[tuple[int, int, float, Fraction]],
) -> list[tuple[int, list[float], int]]:
    """One query's tie groups in rank order, from its relevant entries ``(greater, equal,
    gain, exact score)``: ``(non-relevant items above, gains of its relevant items, equal)``.

    An entry with ``equal > 0`` ties exactly with every entry of the same ``greater`` and
    ``equal > 0`` (between two different scores lies a tied non-relevant item, which would
    change ``greater``), and lies below the entries of its ``greater`` with ``equal = 0``;
    those tie only with each other, by exact score."""
    groups: list[tuple[int, list[float], int]] = []
    for (above, tied), block in itertools.groupby(
        sorted(entries, key=lambda e: (e[0], e[1] > 0, -e[3])), key=lambda e: (e[0], e[1] > 0)
    ):
        members = list(block)
        if tied:
            groups.append((above, [e[2] for e in members], members[0][1]))
            continue
        for _, same in itertools.groupby(members, key=lambda e: e[3]):
            groups.append((above, [e[2] for e in same], 0))
    return groups


def _averaged_ndcg_query(groups: list[tuple[int, list[float], int]], limit: int) -> float:
    """One query's tie-averaged nDCG from its tie groups, 40-digit decimals, rounded once."""
    with decimal.localcontext() as ctx:
        ctx.prec = _NDCG_DIGITS
        ln2 = decimal.Decimal(2).ln()

        def discount(p: int) -> decimal.Decimal:
            return ln2 / decimal.Decimal(p + 1).ln()

        dcg, found = decimal.Decimal(0), 0
        for above, gains, equal in groups:
            start = above + found  # every item before the group: non-relevant and relevant
            size = len(gains) + equal
            if start < limit:
                total = sum(map(Fraction, gains), Fraction(0))  # exact for float gains too
                mean = decimal.Decimal(total.numerator) / total.denominator / size
                dcg += mean * sum(
                    discount(p) for p in range(start + 1, min(start + size, limit) + 1)
                )
            found += len(gains)
        best = sorted((g for _, gains, _ in groups for g in gains), reverse=True)[:limit]
        ideal = sum(
            (decimal.Decimal(g) * discount(i + 1) for i, g in enumerate(best)), decimal.Decimal(0)
        )
        return float(dcg / ideal)


def ndcg_tie_averaged_per_query(
    counts: RankCounts,
    graded: Graded | None = None,
    *,
    k: int | None = None,
) -> FloatArray:
    """Per query (those with a relevant item) the **tie-averaged** ``ndcg@k``: scikit-learn's
    ``ndcg_score`` (ties averaged, after McSherry and Najork), the mean of nDCG over every
    order of the items of equal score. Each group of equal scores that starts after ``s``
    items and holds ``n`` items gives each of its ranks its mean gain: ``DCG@k = sum_groups
    (sum of the group's gains / n) * sum_{p = s+1}^{min(s+n, k)} 1 / log2(p + 1)``, ``IDCG@k``
    as in :func:`ndcg_per_query`. It lies between the pessimistic and optimistic values, and
    is either where they agree; elsewhere it is computed in 40-digit decimals and rounded
    once to float64. ``graded``: the gains and vectors (None: binary, every gain 1).

    >>> from audiorepro.metrics._exact import RankCounts
    >>> rc = RankCounts(ptr=np.array([0, 1]), greater=np.array([0]), equal=np.array([1]))
    >>> ndcg_tie_averaged_per_query(rc).tolist()  # 1/2 * (1 + 1/log2(3))
    [0.8154648767857288]
    """
    if k is not None:
        _check_k(k, "ndcg_tie_averaged_per_query")
    limit = np.iinfo(np.int64).max if k is None else k
    rankings = [
        positions_from_counts(counts, tie_policy=p)
        if graded is None
        else graded_positions(counts, graded, p)
        for p in TIE_POLICIES
    ]
    keep = np.flatnonzero(np.diff(counts.ptr) > 0)
    pes, opt = (ndcg_per_query(_nonempty(r, keep), k=k) for r in rankings)
    out: FloatArray = pes.copy()
    ptr, greater, equal = counts.ptr.tolist(), counts.greater.tolist(), counts.equal.tolist()
    gains = [1] * len(greater) if graded is None else graded.gains.tolist()
    for i in np.flatnonzero(pes != opt).tolist():
        q = int(keep[i])
        entries = [
            (greater[e], equal[e], gains[e], _entry_score(counts, graded, q, e))
            for e in range(ptr[q], ptr[q + 1])
        ]
        out[i] = _averaged_ndcg_query(_tie_groups(entries), limit)
    return out


def _nonempty(ranking: Ranking, keep: npt.NDArray[np.int64]) -> Ranking:
    """``ranking`` without its queries that have no relevant item (``keep``: the others)."""
    ptr = np.concatenate([ranking.ptr[:1], ranking.ptr[1:][keep]])
    return Ranking(ptr=ptr, pos=ranking.pos, gains=ranking.gains)


def _entry_score(counts: RankCounts, graded: Graded | None, q: int, e: int) -> Fraction:
    """The exact score of entry ``e`` of query ``q`` (graded only: binary gains never need
    the order of relevant items among themselves; 0 then)."""
    if graded is None or counts.relevant is None:
        return Fraction(0)
    return _exact_score(graded.queries[q], graded.items[counts.relevant[e]])


@dataclass(frozen=True)
class RetrievalResult:
    """Exact counts for both directions of one dump, and everything derived from them."""

    counts: dict[str, RankCounts]
    stats: ExactStats
    #: The dump's policy for queries without a relevant item (None: it has none).
    empty_queries: EmptyPolicy | None = None
    #: Graded relevance, per direction (None: binary).
    graded: dict[str, Graded] | None = None
    _cache: dict[tuple[str, Cutoffs], dict[str, dict[str, float]]] = field(
        default_factory=dict, repr=False
    )

    def ranking(self, direction: str, tie_policy: TiePolicy = "pessimistic") -> Ranking:
        """The positions of the queries with relevant items; those without any are left out
        (policy ``skip``) or counted in :attr:`Ranking.n_empty` (policy ``zero``)."""
        if self.graded is None:
            full = positions_from_counts(self.counts[direction], tie_policy=tie_policy)
        else:
            full = graded_positions(self.counts[direction], self.graded[direction], tie_policy)
        n_empty = self.n_empty(direction)
        if not n_empty:
            return full
        assert self.empty_queries is not None, "a query without a relevant item needs a policy"
        ptr = np.concatenate([full.ptr[:1], full.ptr[1:][full.n_relevant > 0]])
        counted = n_empty if self.empty_queries == "zero" else 0
        return Ranking(ptr=ptr, pos=full.pos, n_empty=counted, gains=full.gains)

    def n_empty(self, direction: str) -> int:
        """The number of queries of ``direction`` without a relevant item."""
        return int(np.count_nonzero(np.diff(self.counts[direction].ptr) == 0))

    def metrics(
        self, tie_policy: TiePolicy = "pessimistic", cutoffs: Sequence[int] | None = None
    ) -> dict[str, dict[str, float]]:
        """Direction -> metric -> value: 1.0's metrics, or with ``cutoffs`` those of
        :func:`metric_names` (definitions 1.1)."""
        _check_tie_policy(tie_policy, "RetrievalResult.metrics")
        key = (tie_policy, None if cutoffs is None else tuple(cutoffs))
        if key not in self._cache:
            self._cache[key] = {
                d: all_metrics(self.ranking(d, tie_policy), key[1]) for d in DIRECTIONS
            }
        return copy.deepcopy(self._cache[key])

    def value(self, direction: str, name: str, tie_policy: TiePolicy = "pessimistic") -> float:
        """One metric by name (:func:`metric_by_name`), e.g. a published ``t2a/ndcg@50``."""
        _check_tie_policy(tie_policy, "RetrievalResult.value")
        return metric_by_name(name)(self.ranking(direction, tie_policy))

    def ties(self, cutoffs: Sequence[int] | None = None) -> dict[str, TieSummary]:
        """Per direction: queries whose positions depend on the tie policy, and the bounds
        ``[optimistic, pessimistic]`` of every metric whose value depends on it."""
        out: dict[str, TieSummary] = {}
        opt, pes = self.metrics("optimistic", cutoffs), self.metrics("pessimistic", cutoffs)
        for d in DIRECTIONS:
            c = self.counts[d]
            queries_tied = np.unique(np.repeat(np.arange(c.n_queries), np.diff(c.ptr))[c.equal > 0])
            bounds = {
                name: [opt[d][name], pes[d][name]]
                for name in metric_names(cutoffs)
                if opt[d][name] != pes[d][name]
            }
            out[d] = {"queries_affected": int(queries_tied.size), "bounds": bounds}
            averaged = {name: self.tie_averaged(d, name) for name in bounds if _is_ndcg(name)}
            if averaged:
                out[d]["tie_averaged"] = averaged
        return out

    def tie_averaged(self, direction: str, name: str) -> float:
        """The tie-averaged value of ``ndcg`` or ``ndcg@k`` (:func:`ndcg_tie_averaged_per_query`),
        a mean as the other metrics' (queries without a relevant item as :meth:`ranking`)."""
        metric = metric_by_name(name)
        if not _is_ndcg(name):
            raise param_error("name", "RetrievalResult.tie_averaged", "ndcg or ndcg@k", name)
        graded = None if self.graded is None else self.graded[direction]
        per_query = ndcg_tie_averaged_per_query(
            self.counts[direction], graded, k=metric.kwargs.get("k")
        )
        return _mean(per_query, self.ranking(direction).n_empty)


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
    counts = {"t2a": t2a, "a2t": a2t}
    graded = None if dump.relevance_gains is None else _graded(dump, counts)
    return RetrievalResult(
        counts=counts, stats=stats, empty_queries=dump.empty_queries, graded=graded
    )


def _graded(dump: Dump, counts: dict[str, RankCounts]) -> dict[str, Graded]:
    """Each direction's gains aligned with its counts' entries, looked up by (query, item)."""
    rel, gains = dump.relevance, dump.relevance_gains
    assert gains is not None
    clip, text = rel.clip_of_each_entry(), rel.indices
    n, m = dump.n_clips, dump.n_captions
    out: dict[str, Graded] = {}
    for d, keys, n_items, vecs in (
        ("a2t", clip * m + text, m, (dump.audio_embeds, dump.text_embeds)),
        ("t2a", text * n + clip, n, (dump.text_embeds, dump.audio_embeds)),
    ):
        c = counts[d]
        assert c.relevant is not None
        order = np.argsort(keys, kind="stable")
        entry_keys = np.repeat(np.arange(c.n_queries), np.diff(c.ptr)) * n_items + c.relevant
        found = order[np.searchsorted(keys[order], entry_keys)]
        out[d] = Graded(np.asarray(gains[found]), vecs[0], vecs[1])
    return out


class TieSummary(TypedDict):
    """Per direction: queries whose positions depend on the tie policy, and the bounds
    ``[optimistic, pessimistic]`` of every metric whose value depends on it."""

    queries_affected: int
    bounds: dict[str, list[float]]
    #: Only where ``ndcg`` or ``ndcg@k`` has bounds: its tie-averaged value (scikit-learn's
    #: ``ndcg_score``, the mean over every order of ties), between them.
    tie_averaged: NotRequired[dict[str, float]]


class EmptyQueries(TypedDict):
    """How queries without a relevant item entered the means, and how many each direction had."""

    #: ``skip``: left out of every mean; ``zero``: counted as 0 in every mean but the rank
    #: measures (``mean_rank``, ``median_rank``: over the queries with a relevant item).
    policy: EmptyPolicy
    t2a: int
    a2t: int


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
    #: Only when cutoffs were asked for (``--k``, a study's ``k``): the cutoffs, ascending;
    #: the metrics are then those of definitions 1.1 at these cutoffs.
    cutoffs: NotRequired[list[int]]
    #: Only with ``cutoffs``: the minor version of the definitions (1: version 1.1).
    definitions_minor: NotRequired[int]
    #: Only when a policy for queries without a relevant item was chosen (``--empty-queries``).
    empty_queries: NotRequired[EmptyQueries]
    #: Only for a dump with ``relevance_gains``: true (nDCG uses the gains, every other
    #: measure counts a gain > 0 as relevant).
    graded_relevance: NotRequired[bool]
    #: Only with ``graded_relevance``: the gains' kind and the relevance entries at each gain.
    gain_levels: NotRequired[GainLevels]
    #: direction (t2a, a2t) -> metric name -> value
    metrics: dict[str, dict[str, float]]
    ties: dict[str, TieSummary]


def metrics_report(
    dump: Dump,
    result: RetrievalResult,
    *,
    tie_policy: TiePolicy = "pessimistic",
    cutoffs: Sequence[int] | None = None,
) -> MetricsReport:
    """The ``audiorepro.metrics/1`` JSON document for one dump (with ``cutoffs``: the
    measures of :func:`metric_names` at those cutoffs, and the two keys that say so)."""
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
        "metrics": result.metrics(tie_policy, cutoffs),
        "ties": result.ties(cutoffs),
    }
    if cutoffs is not None:
        report["cutoffs"] = list(cutoffs)
        report["definitions_minor"] = DEFINITIONS_MINOR
    if dump.format_version != 1:
        report["format_version"] = dump.format_version
    levels = dump.gain_levels()
    if levels is not None:
        report["graded_relevance"] = True
        report["gain_levels"] = levels
    if result.empty_queries is not None:
        report["empty_queries"] = {
            "policy": result.empty_queries,
            "t2a": result.n_empty("t2a"),
            "a2t": result.n_empty("a2t"),
        }
    return report

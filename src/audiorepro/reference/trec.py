"""Reference trec_eval measures, written from the definitions alone (no code shared with
:mod:`audiorepro.metrics.trec`).

1. Per query, the retrieved documents are put in order by one comparison function: higher
   score first; among equal scores, the ``trec`` order compares docnos (greater first), the
   ``optimistic`` order puts the larger (gain, relevant) pair first and ``pessimistic`` the
   smaller, docnos deciding what remains. Then the first ``max_ret`` are kept.
2. Binary measures are computed from the 1-based positions of the relevant retrieved
   documents with exact fractions, rounded once to float64.
3. nDCG sums ``gain / log2(rank + 1)`` with ``math.fsum`` (exactly rounded), for the run and
   for the ideal list of every positive judged level.
4. ``average``: the trec order for every measure but nDCG, whose DCG is the mean of the DCG
   over every order of each group of equal scores: each rank of a group gets the group's mean
   gain (an exact fraction; the group taken whole, before ``max_ret``).
5. ``all``: counts are summed; every other value is ``math.fsum`` of the queries' values over
   the number of queries.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction

CUT_NAMES = ("P", "recall", "ndcg_cut", "map_cut", "success")
COUNT_NAMES = ("num_ret", "num_rel", "num_rel_ret")


def _ordered(scores: dict[str, float], judged: dict[str, int], level: int, order: str) -> list[str]:
    def gain(d: str) -> tuple[int, int]:
        v = judged.get(d, -1)
        return (v if v > 0 else 0, 1 if v >= level and v >= 0 else 0)

    def compare(a: str, b: str) -> int:
        if scores[a] != scores[b]:
            return -1 if scores[a] > scores[b] else 1
        if order in ("optimistic", "pessimistic") and gain(a) != gain(b):
            better = gain(a) > gain(b)
            return -1 if better == (order == "optimistic") else 1
        return -1 if a > b else (1 if a < b else 0)

    return sorted(scores, key=functools.cmp_to_key(compare))


def _dcg(gains: list[int] | list[Fraction] | list[Fraction | int]) -> float:
    return math.fsum(g / math.log2(i + 1) for i, g in enumerate(gains, start=1) if g > 0)


def _group_means(docs: list[str], scores: dict[str, float], gains: list[int]) -> list[Fraction]:
    """Each rank's mean gain over all ranked documents of its score (McSherry and Najork)."""
    by_score: dict[float, list[int]] = {}
    for d, g in zip(docs, gains, strict=True):
        by_score.setdefault(scores[d], []).append(g)
    return [Fraction(sum(by_score[scores[d]]), len(by_score[scores[d]])) for d in docs]


def query_values(
    scores: dict[str, float],
    judged: dict[str, int],
    cutoffs: dict[str, tuple[int, ...]],
    *,
    level: int = 1,
    max_ret: int | None = None,
    order: str = "trec",
) -> dict[str, float]:
    """Every measure of one query, named as trec_eval prints them (``P_5``, ``map``).

    >>> v = query_values({"a": 2.0, "b": 1.0, "c": 1.0}, {"a": 0, "c": 1, "d": 2}, {"P": (2,)})
    >>> v["map"], v["P_2"], v["Rprec"], round(v["ndcg"], 4)
    (0.25, 0.5, 0.5, 0.2398)
    """
    every = _ordered(scores, judged, level, order)
    docs = every[:max_ret]
    level_of = [judged.get(d, -1) for d in docs]
    hits = [i for i, v in enumerate(level_of, start=1) if v >= 0 and v >= level]
    big_r = sum(1 for v in judged.values() if v >= 0 and v >= level)
    gains: list[int] | list[Fraction] = [v if v > 0 else 0 for v in level_of]
    if order == "average":
        all_gains = [max(judged.get(d, 0), 0) for d in every]
        gains = _group_means(every, scores, all_gains)[: len(docs)]
    ideal = sorted((v for v in judged.values() if v > 0), reverse=True)

    def ap(k: int) -> float:
        found = [i for i in hits if i <= k]
        exact = sum((Fraction(n, i) for n, i in enumerate(found, start=1)), Fraction(0))
        return float(exact / big_r) if big_r else 0.0

    def nd(k: int | None) -> float:  # None: the whole run and the whole ideal list
        best = _dcg(ideal[:k])
        return _dcg(gains[:k]) / best if best > 0 else 0.0

    top = len(docs)
    out: dict[str, float] = {
        "num_ret": len(docs),
        "num_rel": big_r,
        "num_rel_ret": len(hits),
        "map": ap(top),
        "Rprec": float(Fraction(sum(1 for i in hits if i <= big_r), big_r)) if big_r else 0.0,
        "recip_rank": float(Fraction(1, hits[0])) if hits else 0.0,
        "ndcg": nd(None),
    }
    per_cut: dict[str, Callable[[int], float]] = {
        "P": lambda k: float(Fraction(sum(1 for i in hits if i <= k), k)),
        "recall": lambda k: (
            float(Fraction(sum(1 for i in hits if i <= k), big_r)) if big_r else 0.0
        ),
        "ndcg_cut": nd,
        "map_cut": ap,
        "success": lambda k: 1.0 if hits and hits[0] <= k else 0.0,
    }
    for name, ks in cutoffs.items():
        for k in ks:
            out[f"{name}_{k}"] = per_cut[name](k)
    return out


def reference_trec_eval(
    judged: dict[str, dict[str, int]],
    scores: dict[str, dict[str, float]],
    cutoffs: dict[str, tuple[int, ...]],
    *,
    level: int = 1,
    max_ret: int | None = None,
    complete: bool = False,
    order: str = "trec",
) -> dict[str, dict[str, float]]:
    """Per-query values and ``all`` (with ``num_q``) of every measure, over the queries of the
    qrels the run has (all of the qrels' queries when ``complete``).

    >>> out = reference_trec_eval({"1": {"a": 1}, "2": {"b": 1}}, {"1": {"a": 0.0}}, {},
    ...                           complete=True)
    >>> out["all"]["map"], out["all"]["num_q"], out["2"]["num_ret"]
    (0.5, 2, 0)
    """
    qids = sorted(q for q in judged if complete or q in scores)
    per_query = {
        q: query_values(
            scores.get(q, {}), judged[q], cutoffs, level=level, max_ret=max_ret, order=order
        )
        for q in qids
    }
    names = list(per_query[qids[0]]) if qids else []
    every: dict[str, float] = {"num_q": len(qids)}
    for name in names:
        values = [per_query[q][name] for q in qids]
        every[name] = sum(values) if name in COUNT_NAMES else math.fsum(values) / len(qids)
    if complete and "num_rel" in every:  # trec_eval's -c: every judgement > 0 of the qrels
        every["num_rel"] = sum(v > 0 for docs in judged.values() for v in docs.values())
    return {**per_query, "all": every}

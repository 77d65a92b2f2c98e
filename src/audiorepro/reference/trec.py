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


# ---- the other families of trec_eval 10 (all_trec), from their definitions ---------------
EPS = 0.00001


def _gains(
    ideal_levels: list[int], pairs: dict[int, float] | None
) -> tuple[dict[int, float], list[float]]:
    """The gain of each level (``pairs`` override ``gain = level``) and the ideal list: every
    judged document's gain, descending, cut at the first gain <= 0."""
    gain = {v: float(v) for v in set(ideal_levels)}
    gain.update(pairs or {})
    ideal = sorted((gain.get(v, 0.0) for v in ideal_levels), reverse=True)
    return gain, [g for g in ideal if g > 0]


def _disc(i: int) -> float:
    return math.log2(i + 1)  # rank i, 1-based


def _interp(rels: list[int], level: int, big_r: int, x: float) -> float:
    hits = [i for i, v in enumerate(rels, start=1) if v >= level]
    c = math.floor(x * big_r + 0.5)
    if c > len(hits):
        return 0.0
    first = hits[c - 1] if c >= 1 else 1
    found = [sum(1 for h in hits if h <= j) / j for j in range(first, len(rels) + 1)]
    return max(found) if found else 0.0


def _bpref(rels: list[int], judged: list[int], level: int, big_r: int) -> float:
    nonrel_total = sum(1 for v in judged if 0 <= v < level)
    total, above = 0.0, 0
    for v in rels:
        if v < 0:
            continue
        if v < level:
            above += 1
        else:
            total += 1.0 - (min(above, big_r) / min(nonrel_total, big_r) if above else 0.0)
    return total / big_r if big_r else total


def _infap(rels: list[int], level: int, big_r: int) -> float:
    total = 0.0
    rel = nonrel = pooled = 0
    for k, v in enumerate(rels, start=1):
        if v == -1:
            continue
        if v == -2:
            pooled += 1
        elif v < level:
            nonrel += 1
        else:
            if k == 1:
                total += 1.0
            else:
                judged_above = rel + nonrel + pooled
                total += 1 / k + (k - 1) / k * (judged_above / (k - 1)) * (
                    (rel + EPS) / (rel + nonrel + 2 * EPS)
                )
            rel += 1
    return total / big_r if big_r else total


def _g(gains: list[float], ideal: list[float]) -> float:
    total = s_res = cost = 0.0
    for i, g in enumerate(gains):
        s_res += g
        cost += max(ideal[i] if i < len(ideal) else 0.0, 1.0)
        if g != 0:
            total += g / math.log2(2 + cost - s_res)
    return total / math.fsum(ideal) if ideal else 0.0


def _ndcg_rel(gains: list[float], ideal: list[float]) -> float:
    if not ideal:
        return 0.0

    def at(i: int) -> float:  # nDCG of the first i ranks, the ideal cut at i
        return math.fsum(g / _disc(j) for j, g in enumerate(gains[:i], 1) if g != 0) / math.fsum(
            g / _disc(j) for j, g in enumerate(ideal[:i], 1)
        )

    points = [at(i) for i, g in enumerate(gains, 1) if g > 0]
    total = math.fsum(points) + (len(ideal) - len(points)) * at(max(len(gains), len(ideal)))
    return total / len(ideal) if total > 0 else 0.0


def _rndcg(gains: list[float], ideal: list[float], big_r: int) -> float:
    """Mean of nDCG at each rank where the ideal gain changes (the last: where the ranking
    ends, when it is longer than the ideal list)."""
    if big_r == 0:
        return 0.0

    def ratio(i: int, k: int) -> float:  # the first i results over the first k ideal gains
        best = math.fsum(g / _disc(j) for j, g in enumerate(ideal[:k], 1))
        found = math.fsum(g / _disc(j) for j, g in enumerate(gains[:i], 1) if g != 0)
        return found / best

    points = []
    extended = [*ideal, 0.0]
    for p in range(1, len(extended)):
        if extended[p] != extended[p - 1] and p <= len(gains):
            points.append(ratio(p, p))
        elif extended[p] != extended[p - 1]:
            points.append(ratio(len(gains), p))
    if len(gains) > len(ideal) + 1:
        points.append(ratio(len(gains), len(ideal)))
    return math.fsum(points) / len(points)


def all_trec_values(rels: list[int], judged: list[int], *, level: int = 1) -> dict[str, float]:
    """The families of ``-m all_trec`` not in :func:`query_values`, at trec_eval's default
    parameters, of one query: ``rels`` its levels in rank order (-1 not judged, -2 judged
    negative), ``judged`` every judged level of the query.

    >>> v = all_trec_values([1, 0, -1, 2], [1, 0, 2, 1, 0])
    >>> v["bpref"], v["set_P"], v["unj_5"], round(v["binG"], 4)
    (0.5, 0.5, 0.2, 0.5)
    """
    big_r = sum(1 for v in judged if v >= 0 and v >= level)
    n = len(rels)
    relret = sum(1 for v in rels if v >= level)
    _, ideal = _gains([v for v in judged if v >= 0], None)
    gains = [float(v) if v > 0 else 0.0 for v in rels]
    out: dict[str, float] = {}
    for x in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        out[f"iprec_at_recall_{x:3.2f}"] = _interp(rels, level, big_r, x)
    out["11pt_avg"] = math.fsum(out[k] for k in list(out)) / 11
    out["bpref"] = _bpref(rels, judged, level, big_r)
    out["infAP"] = _infap(rels, level, big_r)
    for x in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0):
        c = int(x * big_r + 0.9)
        hits = sum(1 for v in rels[:c] if v >= level)
        out[f"Rprec_mult_{x:3.2f}"] = hits / c if c else 0.0
    out["utility"] = relret - (n - relret)
    hits_at = [
        sum(1 for v in rels[:k] if v >= level) for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)
    ]
    for k, h in zip((5, 10, 15, 20, 30, 100, 200, 500, 1000), hits_at, strict=True):
        out[f"relative_P_{k}"] = h / min(k, big_r) if big_r else 0.0
    for k in (5, 10, 20):
        out[f"unj_{k}"] = sum(1 for v in rels[:k] if v < 0) / k
    seen = 0
    bing = 0.0
    for i, v in enumerate(rels, start=1):
        if v >= level:
            seen += 1
            bing += 1 / math.log2(2 + i - seen)
    out["binG"] = bing / big_r if seen else 0.0
    out["G"] = _g(gains, ideal)
    out["ndcg_rel"] = _ndcg_rel(gains, ideal)
    out["Rndcg"] = _rndcg(gains, ideal, big_r)
    out["set_P"] = relret / n if n else 0.0
    out["set_recall"] = relret / big_r if big_r else 0.0
    out["set_relative_P"] = relret / min(n, big_r) if n and big_r else 0.0
    out["set_map"] = relret * relret / (n * big_r) if n and big_r else 0.0
    p_set, r_set = (relret / n, relret / big_r) if relret else (0.0, 0.0)
    out["set_F"] = 2 * p_set * r_set / (p_set + r_set) if relret else 0.0
    out["num_nonrel_judged_ret"] = sum(1 for v in rels if 0 <= v < level)
    top = max([v for v in judged if v >= 0], default=0)
    scale = top if top > 1 else 1  # gains scaled into [0, 1] (levels from 0)
    out["rbp"] = 0.1 * math.fsum((v / scale if v > 0 else 0.0) * 0.9**i for i, v in enumerate(rels))
    unj = [i for i, v in enumerate(rels) if v < 0]
    out["rbp_resid"] = 0.9**n + 0.1 * math.fsum(0.9**i for i in unj) if unj else 0.0
    return out

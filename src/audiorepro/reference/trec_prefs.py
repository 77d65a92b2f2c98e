"""Reference preference and judgement-group measures, written from the definitions alone (no
code shared with :mod:`audiorepro.metrics.trec_prefs` or ``trec_groups``).

1. Ranking: score descending, then docno ascending (byte order), the first ``max_ret`` kept.
   Each judged document gets a number: the ranked ones by rank, then the others by docno.
2. A judgement group is a list of *preference instances* ``(a, b)``, ``a`` preferred:
   with one sub-group, every pair of its lines at different levels (a document listed twice
   is two lines); with several, the set of document pairs ordered inside some sub-group, made
   transitive by adding ``(a, c)`` for every ``(a, b)``, ``(b, c)`` until nothing changes.
3. An instance is counted by where ``a`` and ``b`` are: both ranked (fulfilled when ``a``
   ranks above ``b``), one ranked (fulfilled when it is ``a``), neither (never fulfilled).
4. The families are the ratios of these counts written out per family (see each one); sums
   over groups and pairs are exact fractions rounded once where trec_eval's are, too, exact
   (ratios of integers); the group means and pair means add floats in trec_eval's order.
5. ``*_avgjg`` (judgement groups): per group the plain definition of map, P at k and
   precision at int(x R + 0.9), averaged over the query's groups.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Line = tuple[str, str, str, float]  # jg, jsg, docno, level


def _ranked(scores: dict[str, float], max_ret: int | None) -> list[str]:
    docs = sorted(scores, key=lambda d: (-scores[d], d.encode("utf-8")))
    return docs if max_ret is None else docs[:max_ret]


def _instances(lines: list[Line]) -> list[tuple[str, str]]:
    """The preference instances of one group (point 2 of the module docstring)."""
    if len({jsg for _, jsg, _, _ in lines}) == 1:
        return [(a[2], b[2]) for a in lines for b in lines if a[3] > b[3]]
    pairs = {(a[2], b[2]) for a in lines for b in lines if a[1] == b[1] and a[3] > b[3]}
    while True:
        more = {(a, d) for a, b in pairs for c, d in pairs if b == c} - pairs
        if not more:
            break
        pairs |= more
    return sorted(p for p in pairs if p[0] != p[1])


def _group_levels(lines: list[Line]) -> dict[str, float]:
    """The level a group gives each document: with several sub-groups, the document's lowest
    level in the last sub-group (byte order) that lists it."""
    if len({jsg for _, jsg, _, _ in lines}) == 1:
        return {}
    out: dict[str, tuple[bytes, float]] = {}
    for _, jsg, doc, level in lines:
        key = (jsg.encode("utf-8"), -level)
        if doc not in out or key > (out[doc][0], -out[doc][1]):
            out[doc] = (jsg.encode("utf-8"), level)
    return {d: v for d, (_, v) in out.items()}


def reference_prefs(
    lines: Sequence[Line], scores: dict[str, float], *, max_ret: int | None = None
) -> dict[str, float]:
    """Every ``prefs_*`` value of one query.

    >>> v = reference_prefs([("u", "s", "a", 2.0), ("u", "s", "b", 1.0), ("u", "s", "c", 0.0)],
    ...                     {"b": 2.0, "a": 1.0})
    >>> v["prefs_simp"], v["prefs_num_prefs_poss"], v["prefs_simp_ret"]
    (0.6666666666666666, 3, 0.0)
    """
    ranked = [d for d in _ranked(scores, max_ret) if d in {x[2] for x in lines}]
    rest = sorted({x[2] for x in lines} - set(ranked), key=lambda d: d.encode("utf-8"))
    num = {d: i for i, d in enumerate(ranked + rest)}
    m = len(ranked)
    groups = sorted({x[0] for x in lines}, key=lambda g: g.encode("utf-8"))
    per_group = []
    pair_counts: dict[tuple[int, int], int] = {}
    for g in groups:
        mine = [x for x in lines if x[0] == g]
        inst = [(num[a], num[b]) for a, b in _instances(mine)]
        for p in inst:
            pair_counts[p] = pair_counts.get(p, 0) + 1
        per_group.append(_tally(inst, m, mine, num))
    out: dict[str, float] = {
        "prefs_num_prefs_poss": sum(t.poss for t in per_group),
        "prefs_num_prefs_ful": sum(t.ful for t in per_group),
        "prefs_num_prefs_ful_ret": sum(t.ful_r for t in per_group),
    }
    forms: dict[str, Callable[[_Tally], tuple[int, int]]] = {
        "": lambda t: (t.ful, t.poss),
        "_ret": lambda t: (t.ful_r, t.poss_r),
        "_imp": lambda t: (t.ful, t.poss_ri),
    }
    for suffix, counted in forms.items():
        both = [counted(t) for t in per_group]
        ful, poss = sum(x for x, _ in both), sum(y for _, y in both)
        out["prefs_simp" + suffix] = ful / poss if poss else 0.0
        out["prefs_avgjg" + suffix] = _group_mean([x / y if y else 0.0 for x, y in both])
        out["prefs_pair" + suffix] = _pair_mean(pair_counts, m, len(num), suffix)
    out["prefs_avgjg_Rnonrel"] = _group_mean([_rnonrel(t, m, False) for t in per_group])
    out["prefs_avgjg_Rnonrel_ret"] = _group_mean([_rnonrel(t, m, True) for t in per_group])
    return out


@dataclass(frozen=True)
class _Tally:
    """One group's instances, its (document, level) entries and their counts."""

    inst: list[tuple[int, int]]
    entries: list[tuple[int, float]]
    single: bool
    ful_r: int
    poss_r: int
    ful: int
    poss_ri: int
    poss: int
    big_r: int
    big_r_ret: int
    nonrel: list[int]


def _tally(inst: list[tuple[int, int]], m: int, mine: list[Line], num: dict[str, int]) -> _Tally:
    levels = _group_levels(mine)
    if levels:
        entries = [(num[d], v) for d, v in levels.items()]
        nonrel = [n for n, v in entries if v == 0.0]
    else:
        entries = [(num[d], v) for _, _, d, v in mine]
        nonrel = [n for n, v in entries if not v > 0]
    ful_r = sum(1 for a, b in inst if a < m and b < m and a < b)
    poss_r = sum(1 for a, b in inst if a < m and b < m)
    ful_i = sum(1 for a, b in inst if a < m <= b)
    poss_i = sum(1 for a, b in inst if (a < m) != (b < m))
    rel = [n for n, v in entries if v > 0]
    return _Tally(inst, entries, not levels, ful_r, poss_r, ful_r + ful_i, poss_r + poss_i,
                  len(inst), len(rel), sum(1 for n in rel if n < m), nonrel)  # fmt: skip


def _group_mean(ratios: list[float]) -> float:
    total = 0.0
    for r in ratios:
        total += r
    return total / len(ratios) if total > 0.0 else 0.0


def _pair_mean(counts: dict[tuple[int, int], int], m: int, n: int, suffix: str) -> float:
    """Mean over pairs i < j with a preference either way of counts[i, j] / both, pairs of
    two ranked documents first (then one ranked), row by row; ``""`` also counts the pairs of
    two unranked documents (as 0)."""
    shares: list[float] = []
    pairs = 0
    blocks = [[(i, j) for i in range(m) for j in range(i + 1, m)]]
    if suffix in ("", "_imp"):
        blocks.append([(i, j) for i in range(m) for j in range(m, n)])
    if suffix == "":
        blocks.append([(i, j) for i in range(m, n) for j in range(i + 1, n)])
    for block in blocks:
        for i, j in block:
            ij, ji = counts.get((i, j), 0), counts.get((j, i), 0)
            if ij or ji:
                pairs += 1
                if i < m:
                    shares.append(ij / (ij + ji))
    total = 0.0
    for s in shares:
        total += s
    return total / pairs if pairs else 0.0


def _rnonrel(t: _Tally, m: int, ranked: bool) -> float:
    """prefs_avgjg_Rnonrel's ratio of one group (``ranked``: the ``_ret`` form): with N <= R
    the group's counts plus R - N imagined non-relevant documents below every relevant one,
    else a recount with only the first R non-relevant documents (trec_eval's rules: with
    several sub-groups it keeps ``num_rel`` of them in both forms)."""
    nonrel_ret = sum(1 for n in t.nonrel if n < m)
    big_r, big_n = (t.big_r_ret, nonrel_ret) if ranked else (t.big_r, len(t.nonrel))
    if big_r >= big_n:
        ful = (t.ful_r if ranked else t.ful) + t.big_r_ret * (big_r - big_n)
        poss = (t.poss_r if ranked else t.poss) + t.big_r * (big_r - big_n)
        return ful / poss if poss else math.nan
    if t.single:
        return _rnonrel_single(t.entries, m, big_r, ranked)
    zeros = sorted(t.nonrel)
    candidates = [z for z in zeros if not ranked or z < m]
    cut = candidates[t.big_r] if len(candidates) > t.big_r else None
    dropped = {z for z in zeros if cut is not None and z >= cut}
    kept = [(a, b) for a, b in t.inst if a not in dropped and b not in dropped
            and (not ranked or (a < m and b < m))]  # fmt: skip
    ful = sum(1 for a, b in kept if a < m and a < b)
    return ful / len(kept) if kept else math.nan


def _rnonrel_single(entries: list[tuple[int, float]], m: int, keep: int, ranked: bool) -> float:
    """The one-sub-group recount: instances between classes other than the lowest, plus
    every line (any class, the lowest included) against the first ``keep`` lines of the
    lowest class; fulfilled when the first is ranked and above."""
    lowest = min(v for _, v in entries)
    if ranked:
        entries = [(n, v) for n, v in entries if n < m]
    first = sorted(n for n, v in entries if v == lowest)[:keep]
    ful = poss = 0
    for a, va in entries:
        for b, vb in entries:
            if va > vb and vb != lowest:
                ful, poss = ful + (a < m and a < b), poss + 1
        for b in first:
            ful, poss = ful + (a < m and a < b), poss + 1
    return ful / poss if poss else math.nan


def reference_avgjg(
    groups: dict[str, dict[str, int]],
    scores: dict[str, float],
    *,
    cutoffs: Sequence[int] = (5, 10),
    multiples: Sequence[float] = (0.5, 1.0, 2.0),
    level: int = 1,
) -> dict[str, float]:
    """map_avgjg, P_avgjg_k and Rprec_mult_avgjg_x of one query (ranked score descending,
    then docno descending, as for qrels).

    >>> reference_avgjg({"u": {"a": 1, "b": 0}, "v": {"b": 1}}, {"a": 2.0, "b": 1.0},
    ...                 cutoffs=(1,), multiples=())
    {'map_avgjg': 0.75, 'P_avgjg_1': 0.5}
    """
    docs = sorted(scores, key=lambda d: d.encode("utf-8"), reverse=True)
    docs.sort(key=lambda d: -scores[d])
    values: dict[str, list[float]] = {}
    for g in sorted(groups, key=lambda x: x.encode("utf-8")):
        judged = groups[g]
        rel = [1 if judged.get(d, -1) >= level and judged.get(d, -1) >= 0 else 0 for d in docs]
        big_r = sum(1 for v in judged.values() if v >= level and v >= 0)
        hits = [i for i, r in enumerate(rel, start=1) if r]
        ap = sum(k / i for k, i in enumerate(hits, start=1)) / big_r if hits else 0.0
        values.setdefault("map_avgjg", []).append(ap)
        for k in cutoffs:
            values.setdefault(f"P_avgjg_{k}", []).append(sum(rel[:k]) / k)
        for x in multiples:
            at = int(x * big_r + 0.9)
            p = (sum(rel[:at]) / at) if at else 0.0
            values.setdefault(f"Rprec_mult_avgjg_{x:3.2f}", []).append(p)
    out = {}
    for name, vs in values.items():
        total = 0.0
        for v in vs:
            total += v
        out[name] = total / len(vs) if len(vs) > 1 else total
    return out

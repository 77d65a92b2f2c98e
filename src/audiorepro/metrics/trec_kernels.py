"""Compiled kernels of :mod:`audiorepro.metrics.trec`: one query's ranked list and every
trec_eval measure of it, in one pass per query.

A query is its **ranked list** ``rels`` (the judged level of each retrieved document in rank
order; ``-1``: not in the qrels, ``-2``: in the qrels with a negative level, "in the pool but
unjudged"), ``counts[v]`` (judged documents at level ``v >= 0``, retrieved or not), ``level``
(trec_eval's ``-l``) and ``R`` (judged at ``>= level``). The formulas are in the docstrings of
:mod:`audiorepro.metrics.trec`'s measure table; each function here fills its values in
``out[off:]``. Sums run in rank order, as trec_eval's do, so the doubles are trec_eval's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from audiorepro.formats.trec_scan import compare

Array = npt.NDArray[Any]

NUM_RET, NUM_REL, NUM_REL_RET, MAP, GM_MAP, RPREC, BPREF, RECIP_RANK = 0, 1, 2, 3, 4, 5, 6, 7
IPREC, P, RELSTRING, RECALL, INFAP, GM_BPREF, RPREC_MULT, UTILITY = 8, 9, 10, 11, 12, 13, 14, 15
PT11, BING, G, DCG, IDEAL_DCG, NDCG, NDCG_REL, RNDCG = 16, 17, 18, 19, 20, 21, 22, 23
NDCG_CUT, MAP_CUT, RELATIVE_P, SUCCESS, SET_P, SET_RELATIVE_P = 24, 25, 26, 27, 28, 29
SET_RECALL, SET_MAP, SET_F, NUM_NONREL_JUDGED_RET, RBP, RBP_RESID, UNJ = 30, 31, 32, 33, 34, 35, 36
MIN_GEO_MEAN = 0.00001
INFAP_EPSILON = 0.00001
NONPOOL, UNJUDGED = -1, -2


@njit(cache=True, error_model="numpy")
def _lround(x: float) -> int:
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


@njit(cache=True, error_model="numpy")
def _ap(rels: Array, n: int, level: int, big_r: int) -> float:
    total, found = 0.0, 0
    for i in range(n):
        if rels[i] >= level:
            found += 1
            total += found / (i + 1.0)
    return total / big_r if found else 0.0


@njit(cache=True, error_model="numpy")
def _bpref(rels: Array, counts: Array, level: int, big_r: int) -> float:
    num_nonrel = 0
    for j in range(min(level, counts.size)):
        num_nonrel += counts[j]
    nonrel, total = 0, 0.0
    for r in rels:
        if r < 0:
            continue
        if r < level:
            nonrel += 1
        elif nonrel > 0:
            total += 1.0 - min(nonrel, big_r) / min(num_nonrel, big_r)
        else:
            total += 1.0
    return total / big_r if big_r else total


@njit(cache=True, error_model="numpy")
def _infap(rels: Array, level: int, big_r: int) -> float:
    nonrel, rel, unjudged, total = 0, 0, 0, 0.0
    for j in range(rels.size):
        r = rels[j]
        if r == NONPOOL:
            continue
        if r == UNJUDGED:
            unjudged += 1
            continue
        if 0 <= r < level:
            nonrel += 1
            continue
        rel += 1
        if j == 0:
            total += 1.0
        else:
            fj = float(j)
            total += 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((rel - 1 + nonrel + unjudged) / fj) * (
                ((rel - 1) + INFAP_EPSILON) / ((rel - 1 + nonrel) + 2 * INFAP_EPSILON)
            )
    return total / big_r if big_r else total


@njit(cache=True, error_model="numpy")
def _interpolated(rels: Array, level: int, big_r: int, relret: int, ps: Array, out: Array) -> None:
    """Interpolated precision at recall fractions ``ps`` (ascending) into ``out``."""
    k = ps.size
    cuts = np.empty(k, np.int64)
    for i in range(k):
        cuts[i] = _lround(ps[i] * big_r)
    cur = k - 1
    while cur >= 0 and cuts[cur] > relret:
        cur -= 1
    n = rels.size
    best = relret / float(n)
    so_far = relret
    i = n
    while i > 0 and so_far > 0:
        precis = so_far / float(i)
        if best < precis:
            best = precis
        if rels[i - 1] >= level:
            while cur >= 0 and so_far == cuts[cur]:
                out[cur] = best
                cur -= 1
            so_far -= 1
        i -= 1
    while cur >= 0:
        out[cur] = best
        cur -= 1


@njit(cache=True, error_model="numpy")
def _rprec_mult(rels: Array, level: int, big_r: int, relret: int, ps: Array, out: Array) -> None:
    k = ps.size
    cuts = np.empty(k, np.int64)
    for i in range(k):
        cuts[i] = int(ps[i] * big_r + 0.9)
    n = rels.size
    cur = k - 1
    while cur >= 0 and cuts[cur] > n:
        out[cur] = relret / float(cuts[cur])
        cur -= 1
    so_far = relret
    i = n
    while i > 0 and so_far > 0:
        precis = so_far / float(i)
        while cur >= 0 and i == cuts[cur]:
            out[cur] = precis
            cur -= 1
        if rels[i - 1] >= level:
            so_far -= 1
        i -= 1


@njit(cache=True, error_model="numpy")
def _at_cutoffs(rels: Array, level: int, big_r: int, kind: int, cuts: Array,
                out: Array) -> None:  # fmt: skip
    """P, recall, relative_P, success, map_cut and unj at integer cutoffs (ascending)."""
    hits, unj, ap, first = 0, 0, 0.0, 0
    c = 0
    n = rels.size
    for i in range(n + 1):
        while c < cuts.size and (i == cuts[c] or i == n):
            k = cuts[c]
            if kind == P:
                out[c] = hits / float(k)
            elif kind == RECALL:
                out[c] = hits / float(big_r) if big_r else 0.0
            elif kind == RELATIVE_P:
                out[c] = hits / float(k if k < big_r else big_r) if big_r else 0.0
            elif kind == SUCCESS:
                out[c] = 1.0 if first else 0.0
            elif kind == MAP_CUT:
                out[c] = ap / big_r if hits else 0.0
            else:
                out[c] = unj / float(k)
            c += 1
        if i == n or c == cuts.size:
            break
        r = rels[i]
        if r >= level:
            hits += 1
            first = 1
            ap += hits / (i + 1.0)
        elif r < 0:
            unj += 1


@njit(cache=True, error_model="numpy")
def _ndcg_cut(rels: Array, counts: Array, nlevels: int, cuts: Array,
              avg: Array, out: Array) -> None:  # fmt: skip
    total = 0.0
    c = 0
    n = rels.size
    for i in range(n):
        if c < cuts.size and i == cuts[c]:
            out[c] = total
            c += 1
            if c == cuts.size:
                break
        gain = avg[i] if avg.size else float(rels[i])
        if gain > 0:
            total += gain / math.log2(i + 2.0)
    while c < cuts.size:
        out[c] = total
        c += 1
    c = 0
    lvl = nlevels - 1
    count = 0
    ideal = 0.0
    i = 0
    while True:
        count += 1
        while lvl > 0 and count > counts[lvl]:
            lvl -= 1
            count = 1
        if lvl <= 0:
            break
        if i == cuts[c]:
            if ideal > 0.0:
                out[c] /= ideal
            c += 1
            if c == cuts.size:
                break
        ideal += lvl / math.log2(i + 2.0)
        i += 1
    while c < cuts.size:
        if ideal > 0.0:
            out[c] /= ideal
        c += 1


@njit(cache=True, error_model="numpy")
def _gain_table(pairs: Array, counts: Array, nlevels: int) -> tuple[Array, Array, Array]:
    """trec_eval's gain table: ``pairs`` rows ``(is_level, level, gain)`` given first, then
    every level ``0 .. nlevels-1`` not given (gain = level); the judged count of each level;
    sorted by gain ascending, gains compared as C truncates their difference to an int
    (a stable insertion sort)."""
    m = pairs.shape[0] + nlevels
    lv = np.empty(m, np.int64)
    gn = np.empty(m, np.float64)
    ct = np.zeros(m, np.int64)
    k = 0
    for i in range(pairs.shape[0]):
        if pairs[i, 0] == 1.0:
            lv[k], gn[k] = int(pairs[i, 1]), pairs[i, 2]
            k += 1
    for v in range(nlevels):
        j = 0
        while j < k and lv[j] != v:
            j += 1
        if j < k:
            ct[j] = counts[v]
        else:
            lv[k], gn[k], ct[k] = v, float(v), counts[v]
            k += 1
    for i in range(1, k):
        j = i
        while j > 0 and int(gn[j - 1] - gn[j]) > 0:
            lv[j - 1], lv[j] = lv[j], lv[j - 1]
            gn[j - 1], gn[j] = gn[j], gn[j - 1]
            ct[j - 1], ct[j] = ct[j], ct[j - 1]
            j -= 1
    return lv[:k], gn[:k], ct[:k]


@njit(cache=True, error_model="numpy")
def _gains_of(rels: Array, lv: Array, gn: Array) -> Array:
    """Each rank's gain: the first table entry of its level, 0 when none."""
    out = np.zeros(rels.size, np.float64)
    for i in range(rels.size):
        for j in range(lv.size):
            if lv[j] == rels[i]:
                out[i] = gn[j]
                break
    return out


@njit(cache=True, error_model="numpy")
def _advance(cur: int, at: int, gn: Array, ct: Array) -> tuple[int, int, float]:
    """One step down the ideal ranking: (entry, count within it, ideal gain)."""
    at += 1
    while cur >= 0 and at > ct[cur]:
        at = 1
        cur -= 1
    return cur, at, (gn[cur] if cur >= 0 else 0.0)


@njit(cache=True, error_model="numpy")
def _ndcg(g: Array, gn: Array, ct: Array) -> tuple[float, float]:
    """(DCG, ideal DCG) of the rank gains ``g``."""
    dcg = 0.0
    for i in range(g.size):
        if g[i] != 0:
            dcg += g[i] / math.log2(i + 2.0)
    cur = gn.size - 1
    ig = gn[cur] if cur >= 0 else 0.0
    at, ideal, i = 0, 0.0, 0
    while ig > 0.0:
        cur, at, ig = _advance(cur, at, gn, ct)
        if ig > 0.0:
            ideal += ig / math.log2(i + 2.0)
        i += 1
    return dcg, ideal


@njit(cache=True, error_model="numpy")
def _rndcg(g: Array, gn: Array, ct: Array, big_r: int) -> float:
    if big_r == 0:
        return 0.0
    n = g.size
    rdcg, idcg, total, changes = 0.0, 0.0, 0.0, 0
    cur = gn.size - 1
    ig = gn[cur] if cur >= 0 else 0.0
    old, at, i = ig, 0, 0
    while i < n and ig > 0.0:
        cur, at, ig = _advance(cur, at, gn, ct)
        if old != ig:
            if idcg > 0.0:
                total += rdcg / idcg
                changes += 1
            old = ig
        if g[i] != 0:
            rdcg += g[i] / math.log2(i + 2.0)
        if ig > 0.0:
            idcg += ig / math.log2(i + 2.0)
        i += 1
    if i < n:
        while i < n:
            if g[i] != 0:
                rdcg += g[i] / math.log2(i + 2.0)
            i += 1
        if idcg > 0.0:
            total += rdcg / idcg
            changes += 1
    while ig > 0.0:
        cur, at, ig = _advance(cur, at, gn, ct)
        if old != ig:
            if idcg > 0.0:
                total += rdcg / idcg
                changes += 1
            old = ig
        if ig > 0.0:
            idcg += ig / math.log2(i + 2.0)
        i += 1
    return total / changes


@njit(cache=True, error_model="numpy")
def _g_measure(g: Array, gn: Array, ct: Array) -> float:
    n = g.size
    rg, sr, si, sc = 0.0, 0.0, 0.0, 0.0
    cur = gn.size - 1
    ig = gn[cur] if cur >= 0 else 0.0
    at, i = 0, 0
    while i < n and ig > 0.0:
        sr += g[i]
        cur, at, ig = _advance(cur, at, gn, ct)
        if ig > 0.0:
            si += ig
        sc += ig if ig >= 1.0 else 1.0
        if g[i] != 0:
            rg += g[i] / math.log2(2 + sc - sr)
        i += 1
    while i < n:
        sr += g[i]
        sc += 1.0
        if g[i] != 0:
            rg += g[i] / math.log2(2 + sc - sr)
        i += 1
    while ig > 0.0:
        cur, at, ig = _advance(cur, at, gn, ct)
        if ig > 0.0:
            si += ig
    return rg / si if si > 0.0 else 0.0


@njit(cache=True, error_model="numpy")
def _ndcg_rel(g: Array, gn: Array, ct: Array) -> float:
    n = g.size
    rdcg, idcg, total, nrr, nr = 0.0, 0.0, 0.0, 0, 0
    cur = gn.size - 1
    ig = gn[cur] if cur >= 0 else 0.0
    at, i = 0, 0
    while i < n and ig > 0.0:
        if g[i] != 0:
            rdcg += g[i] / math.log2(i + 2.0)
        cur, at, ig = _advance(cur, at, gn, ct)
        if ig > 0.0:
            nr += 1
            idcg += ig / math.log2(i + 2.0)
        if g[i] > 0:
            total += rdcg / idcg
            nrr += 1
        i += 1
    while i < n:
        if g[i] != 0:
            rdcg += g[i] / math.log2(i + 2.0)
        if g[i] > 0:
            total += rdcg / idcg
            nrr += 1
        i += 1
    while ig > 0.0:
        cur, at, ig = _advance(cur, at, gn, ct)
        if ig > 0.0:
            nr += 1
            idcg += ig / math.log2(i + 2.0)
        i += 1
    total += float(nr - nrr) * rdcg / idcg
    return total / nr if total > 0.0 else 0.0


@njit(cache=True, error_model="numpy")
def _rbp(rels: Array, pairs: Array, counts: Array, nlevels: int,
         resid: bool) -> float:  # fmt: skip
    p = 0.9
    for i in range(pairs.shape[0]):
        if pairs[i, 0] == 2.0:
            p = pairs[i, 2]
    total, cur_p, unj = 0.0, 1.0, 0
    if resid:
        for r in rels:
            if r < 0:
                unj += 1
                total += cur_p
            cur_p = cur_p * p
        return cur_p + (1 - p) * total if unj else 0.0
    lv, gn, _ = _gain_table(pairs, counts, nlevels)
    if gn.size:
        lo, hi = gn.min(), gn.max()
        if lo < 0 or hi > 1:
            gn = (gn - lo) / (hi - lo)
    g = _gains_of(rels, lv, gn)
    for i in range(g.size):
        if g[i] != 0:
            total += g[i] * cur_p
        cur_p = cur_p * p
    return (1.0 - p) * total


@njit(cache=True, error_model="numpy")
def _relstring(rels: Array, length: int, row: Array) -> int:
    m = max(0, min(length, rels.size, row.size))
    for i in range(m):
        r = rels[i]
        if r > 9:
            row[i] = 62  # >
        elif r >= 0:
            row[i] = 48 + r
        elif r == NONPOOL:
            row[i] = 45  # -
        elif r == UNJUDGED:
            row[i] = 46  # .
        else:
            row[i] = 60  # <
    return m


@njit(cache=True, error_model="numpy")
def _set_measure(kind: int, n: int, big_r: int, relret: int, x: float) -> float:
    if kind == SET_P:
        return relret / float(n) if n else 0.0
    if kind == SET_RELATIVE_P:
        return relret / float(min(n, big_r)) if n and big_r else 0.0
    if kind == SET_RECALL:
        return relret / float(big_r) if big_r else 0.0
    if kind == SET_MAP:
        return (float(relret) * float(relret)) / (float(n) * float(big_r)) if n and big_r else 0.0
    if relret == 0:  # SET_F
        return 0.0
    prec, rec = relret / float(n), relret / float(big_r)
    return (x + 1.0) * prec * rec / (x * prec + rec)


@njit(cache=True, error_model="numpy")
def _scalar(kind: int, rels: Array, counts: Array, level: int, big_r: int,
            relret: int, ps: Array, ndocs: int) -> float:  # fmt: skip
    """The measures of one value and no ranked gains."""
    n = rels.size
    if kind == NUM_RET:
        return float(n)
    if kind == NUM_REL:
        return float(big_r)
    if kind == NUM_REL_RET:
        return float(relret)
    if kind == MAP or kind == GM_MAP:
        ap = _ap(rels, n, level, big_r)
        return ap if kind == MAP else math.log(max(ap, MIN_GEO_MEAN))
    if kind == RPREC:
        hits = 0
        for i in range(min(big_r, n)):
            hits += rels[i] >= level
        return hits / float(big_r) if big_r and n else 0.0
    if kind == BPREF or kind == GM_BPREF:
        b = _bpref(rels, counts, level, big_r)
        return b if kind == BPREF else math.log(max(b, MIN_GEO_MEAN))
    if kind == RECIP_RANK:
        for i in range(n):
            if rels[i] >= level:
                return 1.0 / (i + 1.0)
        return 0.0
    if kind == INFAP:
        return _infap(rels, level, big_r)
    if kind == UTILITY:
        value: float = ps[0] * relret + ps[1] * (n - relret) + ps[2] * (big_r - relret)
        return float(value + ps[3] * (ndocs + relret - n - big_r))
    if kind == BING:
        total, so_far = 0.0, 0
        for i in range(n):
            if rels[i] >= level:
                so_far += 1
                total += 1.0 / math.log2(float(3 + i - so_far))
        return total / big_r if so_far else 0.0
    if kind == NUM_NONREL_JUDGED_RET:
        judged = 0
        for r in rels:
            judged += r >= 0
        return float(judged - relret)
    return _set_measure(kind, n, big_r, relret, ps[0] if ps.size else 1.0)


@njit(cache=True, error_model="numpy")
def query_measures(rels: Array, counts: Array, nlevels: int, level: int,
                   big_r: int, plan: Array, params: Array, pairs: Array,
                   avg: Array, ndocs: int, out: Array,
                   relstr: Array) -> int:  # fmt: skip
    """Every planned measure of one query into ``out`` (plan rows: kind, first and last
    parameter, output offset); the relstring's length, its bytes in ``relstr``."""
    relret = 0
    for r in rels:
        relret += r >= level
    length = 0
    for m in range(plan.shape[0]):
        kind, lo, hi, off = plan[m, 0], plan[m, 1], plan[m, 2], plan[m, 3]
        ps = params[lo:hi]
        if kind in (P, RECALL, RELATIVE_P, SUCCESS, MAP_CUT, UNJ):
            cuts = ps.astype(np.int64)
            _at_cutoffs(rels, level, big_r, kind, cuts, out[off : off + cuts.size])
        elif kind == IPREC or kind == PT11:
            vals = np.zeros(ps.size)
            _interpolated(rels, level, big_r, relret, ps, vals)
            if kind == IPREC:
                out[off : off + ps.size] = vals
            else:
                total = 0.0
                for k in range(ps.size - 1, -1, -1):
                    total += vals[k]
                out[off] = total / ps.size
        elif kind == RPREC_MULT:
            out[off : off + ps.size] = 0.0
            _rprec_mult(rels, level, big_r, relret, ps, out[off : off + ps.size])
        elif kind == NDCG_CUT:
            _ndcg_cut(rels, counts, nlevels, ps.astype(np.int64), avg, out[off : off + hi - lo])
        elif kind == RELSTRING:
            length = _relstring(rels, int(ps[0]), relstr)
        elif kind == RBP or kind == RBP_RESID:
            out[off] = _rbp(rels, pairs[lo:hi], counts, nlevels, kind == RBP_RESID)
        elif kind in (G, DCG, IDEAL_DCG, NDCG, NDCG_REL, RNDCG):
            lv, gn, ct = _gain_table(pairs[lo:hi], counts, nlevels)
            g = avg if avg.size and hi == lo else _gains_of(rels, lv, gn)
            if kind == G:
                out[off] = _g_measure(g, gn, ct)
            elif kind == NDCG_REL:
                out[off] = _ndcg_rel(g, gn, ct)
            elif kind == RNDCG:
                out[off] = _rndcg(g, gn, ct, big_r)
            else:
                dcg, ideal = _ndcg(g, gn, ct)
                if kind == DCG:
                    out[off] = dcg
                elif kind == IDEAL_DCG:
                    out[off] = ideal
                else:
                    out[off] = dcg / ideal if ideal > 0.0 else 0.0
        else:
            out[off] = _scalar(kind, rels, counts, level, big_r, relret, ps, ndocs)
    return length


@njit(cache=True, error_model="numpy")
def rank_levels(rdata: Array, rstart: Array, rlen: Array, score: Array,
                recs: Array, qdata: Array, qstart: Array, qlen: Array,
                qrel: Array, judged: Array, level: int,
                order: int) -> tuple[Array, Array]:  # fmt: skip
    """One query's levels in rank order and, under the ``average`` order (3), each rank's
    mean gain over its group of equal scores. ``recs`` and ``judged``: the run's and the
    qrels' records of the query, each sorted by docno. Order 0 (trec): score descending, then
    docno descending; 1 (pessimistic) and 2 (optimistic) put, among equal scores, the
    smaller or larger (gain, relevant) first before the docno rule."""
    n = recs.size
    lev = np.empty(n, np.int64)
    j = 0
    for i in range(n):  # merge two docno-sorted lists
        a = recs[i]
        found = NONPOOL
        while j < judged.size:
            b = judged[j]
            c = compare(qdata, qstart[b], qlen[b], rdata, rstart[a], rlen[a])
            if c < 0:
                j += 1
                continue
            if c == 0:
                found = int(qrel[b]) if qrel[b] >= 0 else UNJUDGED
                j += 1
            break
        lev[n - 1 - i] = found  # docno descending
    neg = np.empty(n, np.float64)
    for i in range(n):
        neg[i] = -score[recs[n - 1 - i]]
    if order == 1 or order == 2:
        key = np.empty(n, np.int64)
        for i in range(n):
            key[i] = 2 * max(lev[i], 0) + (1 if lev[i] >= level and lev[i] >= 0 else 0)
            if order == 2:
                key[i] = -key[i]
        first = np.argsort(key, kind="mergesort")
        neg, lev = neg[first], lev[first]
    perm = np.argsort(neg, kind="mergesort")
    rels = lev[perm]
    avg = np.empty(0, np.float64)
    if order == 3:
        sorted_neg = neg[perm]
        avg = np.empty(n, np.float64)
        s = 0
        while s < n:
            e = s
            total = 0.0
            while e < n and sorted_neg[e] == sorted_neg[s]:
                total += max(rels[e], 0)
                e += 1
            avg[s:e] = total / (e - s)
            s = e
    return rels, avg


@njit(cache=True, error_model="numpy")
def evaluate_queries(rdata: Array, rstart: Array, rlen: Array,
                     rvalue: Array, rorder: Array, rfirst: Array,
                     rlast: Array, qdata: Array, qstart: Array,
                     qlen: Array, qvalue: Array, qorder: Array,
                     qfirst: Array, qlast: Array, run_of: Array,
                     qrels_of: Array, level: int, max_ret: int, judged_only: bool,
                     order: int, plan: Array, params: Array, pairs: Array,
                     ndocs: int, nvalues: int,
                     relmax: int) -> tuple[Array, Array, Array]:  # fmt: skip
    """Every planned value of every evaluated query ``k`` (its run query ``run_of[k]``, -1:
    absent, evaluated as trec_eval's ``-c`` does with one unjudged document; its qrels query
    ``qrels_of[k]``); ``max_ret`` < 0: no cut."""
    nq = run_of.size
    out = np.zeros((nq, nvalues), np.float64)
    relstr = np.zeros((nq, max(relmax, 1)), np.uint8)
    rel_len = np.zeros(nq, np.int64)
    qrel = np.empty(qvalue.size, np.int64)
    for i in range(qvalue.size):
        qrel[i] = int(qvalue[i])
    for k in range(nq):
        qi = qrels_of[k]
        judged = qorder[qfirst[qi] : qlast[qi]]
        top = -1
        for b in judged:
            top = max(top, qrel[b])
        counts = np.zeros(top + 1, np.int64)
        for b in judged:
            if qrel[b] >= 0:
                counts[qrel[b]] += 1
        nlevels = 0
        for v in range(top + 1):
            if counts[v]:
                nlevels = v + 1
        big_r = 0
        for v in range(nlevels):
            if v >= level:
                big_r += counts[v]
        ri = run_of[k]
        if ri >= 0:
            recs = rorder[rfirst[ri] : rlast[ri]]
            rels, avg = rank_levels(rdata, rstart, rlen, rvalue, recs, qdata, qstart, qlen,
                                    qrel, judged, level, order)  # fmt: skip
        else:
            rels = np.full(1, NONPOOL, np.int64)
            avg = np.zeros(1 if order == 3 else 0, np.float64)
        if 0 <= max_ret < rels.size:
            rels = rels[:max_ret]
            avg = avg[:max_ret] if avg.size else avg
        if judged_only:
            keep = rels >= 0
            rels = rels[keep]
            avg = avg[keep] if avg.size else avg
        rel_len[k] = query_measures(rels, counts, nlevels, level, big_r, plan, params, pairs,
                                    avg, ndocs, out[k], relstr[k])  # fmt: skip
        if ri < 0:  # trec_eval's clean-up after its stand-in document
            rel_len[k] = 0
            for m in range(plan.shape[0]):
                kind, off = plan[m, 0], plan[m, 3]
                if kind in (NUM_RET, UTILITY, RBP_RESID):
                    out[k, off] = 0.0
                elif kind == UNJ:
                    out[k, off : off + plan[m, 2] - plan[m, 1]] = 0.0
    return out, relstr, rel_len

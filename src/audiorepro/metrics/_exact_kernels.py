"""The compiled passes of :mod:`audiorepro.metrics._exact` (numba): imported when a rank
count is computed, so that what only declares or reads metrics (the profile registry, ``verify
OUT``, ``diff``) does not load numba's compiler (half a second at every start).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

# numba's OpenMP layer keeps its threads spinning after a parallel region, which steals the
# cores from the BLAS call that follows (measured here: 8.7 s instead of 6.8 s at 10,000 x 5).
# The workqueue layer parks them. It must be chosen before the first parallel launch.
if nb.config.THREADING_LAYER == "default":  # type: ignore[attr-defined]
    nb.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]

#: Width of the clip blocks that the kernel's threads own; fixed, so that the partition of the
#: work never depends on the thread count.
_BLOCK = 256


@nb.njit(cache=True, fastmath={"reassoc", "contract"})
def _dot64(x: Any, y: Any) -> float:  # pragma: no cover - compiled
    # Reassociation and FMA are allowed: the float64 error bound holds for any order.
    s = np.float64(0.0)
    for d in range(x.shape[0]):
        s += np.float64(x[d]) * np.float64(y[d])
    return float(s)


@nb.njit(cache=True)
def _pair_scores(T: Any, A: Any, t2a: Any) -> Any:  # pragma: no cover - compiled
    out = np.empty(T.shape[0], np.float64)
    for i in range(T.shape[0]):
        out[i] = _dot64(T[i], A[t2a[i]])
    return out


@nb.njit(inline="always")
def _refine(y: float, thr: float, band: float) -> int:  # pragma: no cover - compiled
    """1: above, 0: below, -1: undecided."""
    if y > thr + band:
        return 1
    if y >= thr - band:
        return -1
    return 0


# --- one direction under any relevance: the general pass, and the a2t half of the one pass --


@nb.njit(inline="always")
def _is_relevant(idx: Any, k0: int, k1: int, item: int) -> bool:  # pragma: no cover - compiled
    """Binary search of ``item`` among a query's relevant items ``idx[k0:k1]`` (ascending)."""
    lo = k0
    hi = k1
    while lo < hi:
        mid = (lo + hi) // 2
        if idx[mid] < item:
            lo = mid + 1
        else:
            hi = mid
    return lo < k1 and idx[lo] == item


@nb.njit(cache=True)
def _entry_scores(Q: Any, Items: Any, qk: Any, idx: Any) -> Any:  # pragma: no cover - compiled
    out = np.empty(idx.shape[0], np.float64)
    for k in range(idx.shape[0]):
        out[k] = _dot64(Q[qk[k]], Items[idx[k]])
    return out


@nb.njit(cache=True)
def _scan_rel(
    S: Any,
    q: int,
    k: int,
    c0: int,
    ctx: Any,
    gt: Any,
    collect: bool,
    out: Any,
    pos: Any,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Decide, one by one, the comparisons of query ``q``'s relevant entry ``k`` with the
    items of this chunk that fall in its stage-1 band (items ``c0 + b``, non-relevant only).
    Count mode adds float64 decisions to ``gt[k]``; collect mode records the undecided as
    rows ``(k, item)`` of ``out``. Returns (undecided, float64 refinements)."""
    Q, Items, ptr, idx, p64, nQ, nI, lo_s, hi_s, g64x2, eta64x2 = ctx
    amb = 0
    nref = 0
    k0 = ptr[q]
    k1 = ptr[q + 1]
    r = idx[k]
    lo = lo_s[k]
    hi = hi_s[k]
    for b in range(S.shape[1]):
        i = c0 + b
        x = S[q, b]
        if x >= lo and x <= hi and not _is_relevant(idx, k0, k1, i):
            nref += 1
            y = _dot64(Q[q], Items[i])
            d = _refine(y, p64[k], g64x2 * nQ[q] * (nI[i] + nI[r]) + eta64x2)
            if d == 1 and not collect:
                gt[k] += 1
            elif d == -1:
                amb += 1
                if collect:
                    out[pos[0], 0] = k
                    out[pos[0], 1] = i
                    pos[0] += 1
    return amb, nref


@nb.njit(inline="always")
def _query_row(
    S: Any, q: int, c0: int, ctx: Any, gt: Any, ink: Any, dummy: Any, pos: Any
) -> tuple[int, int]:  # pragma: no cover - compiled
    """One query row of a chunk ``S = queries @ items[c0:c0+B].T``, counted into ``gt`` (per
    relevant entry): vectorizable passes count the sure "above" decisions per entry and the
    elements in its band; the query's own relevant items in this chunk are taken out again;
    only a band that still holds elements is scanned one by one (:func:`_scan_rel`).
    Returns (undecided, float64 refinements). The general pass runs it for every query, the
    one pass for every clip (its a2t half)."""
    _Q, _I, ptr, idx, _p64, _nQ, _nI, lo_s, hi_s, _g, _e = ctx
    row = S[q]
    B = S.shape[1]
    c1 = c0 + B
    k0 = ptr[q]
    k1 = ptr[q + 1]
    for k in range(k0, k1):
        h = hi_s[k]
        lo = lo_s[k]
        cg = 0
        ce = 0
        for b in range(B):
            cg += row[b] > h
            ce += row[b] >= lo
        gt[k] += cg
        ink[k - k0] = ce - cg
    for ko in range(k0, k1):
        c = idx[ko]
        if c < c0 or c >= c1:
            continue
        x = row[c - c0]
        for k in range(k0, k1):
            g = x > hi_s[k]
            gt[k] -= g
            ink[k - k0] -= (x >= lo_s[k]) - g
    amb = 0
    nref = 0
    for k in range(k0, k1):
        if ink[k - k0] > 0:
            a, nr = _scan_rel(S, q, k, c0, ctx, gt, False, dummy, pos)
            amb += a
            nref += nr
    return amb, nref


@nb.njit(parallel=True, cache=True)
def _count_chunk_rel(
    S: Any, c0: int, ctx: Any, gt: Any, amb: Any, refined: Any
) -> None:  # pragma: no cover - compiled
    """Count one chunk ``S = queries @ items[c0:c0+B].T`` into ``gt`` (per relevant entry),
    query row by query row (:func:`_query_row`). A query's entries belong to one thread (no
    locks); the refinement counts are summed per block in a fixed order."""
    ptr = ctx[2]
    nq = S.shape[0]
    nblk = (nq + _BLOCK - 1) // _BLOCK
    kmax = 0
    for q in range(nq):
        kmax = max(kmax, ptr[q + 1] - ptr[q])
    inband_k = np.zeros((nblk, kmax), np.int64)
    part_ref = np.zeros(nblk, np.int64)
    dummy = np.zeros((0, 2), np.int64)
    pos = np.zeros(2, np.int64)
    for bi in nb.prange(nblk):
        nref = 0
        for q in range(bi * _BLOCK, min(nq, (bi + 1) * _BLOCK)):
            a, nr = _query_row(S, q, c0, ctx, gt, inband_k[bi], dummy, pos)
            amb[q] = a
            nref += nr
        part_ref[bi] = nref
    for bi in range(nblk):
        refined[0] += part_ref[bi]


# --- the one pass: t2a and a2t from one chunked product, one clip per caption ----------------


@nb.njit(cache=True)
def _scan_t2a(
    St: Any,
    j: int,
    c0: int,
    ctx: Any,
    t2a_part: Any,
    collect: bool,
    out: Any,
    pos: Any,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Decide, one by one, the t2a comparisons of row ``j`` that fall in the float32 band.

    The query is caption ``i = c0 + b``, the item clip ``j``, compared with the caption's own
    clip. Count mode adds the float64 decisions to ``t2a_part``; collect mode records the
    comparisons float64 cannot decide as rows ``(i, j)`` of ``out``.
    Returns (undecided, float64 refinements).
    """
    T, A, t2a, p64, nT, nA, lo_s, hi_s, g64x2, eta64x2 = ctx
    amb = 0
    nref = 0
    for b in range(St.shape[1]):
        i = c0 + b
        x = St[j, b]
        if x >= lo_s[i] and x <= hi_s[i] and t2a[i] != j:
            nref += 1
            y = _dot64(T[i], A[j])
            r = t2a[i]
            d = _refine(y, p64[i], g64x2 * nT[i] * (nA[j] + nA[r]) + eta64x2)
            if d == 1 and not collect:
                t2a_part[b] += 1
            elif d == -1:
                amb += 1
                if collect:
                    out[pos[0], 0] = i
                    out[pos[0], 1] = j
                    pos[0] += 1
    return amb, nref


@nb.njit(parallel=True, cache=True)
def _count_chunk(
    St: Any,
    c0: int,
    ctx: Any,
    actx: Any,
    t2a_gt: Any,
    a2t_gt: Any,
    amb_t2a: Any,
    amb_a2t: Any,
    refined: Any,
) -> None:  # pragma: no cover - compiled
    """Count one chunk ``St = audio @ text[c0:c0+B].T`` (clips x captions) into the totals.

    Per row (clip ``j``): a vectorizable pass counts the sure t2a "above" decisions and how
    many elements fall in a band; the relevant (caption, own clip) elements are taken out
    again; only a band that still holds elements is scanned one by one. The a2t half is the
    general pass's :func:`_query_row` (``actx``: clips as queries, their captions as relevant
    entries). Row ``j`` is owned by one thread, so a2t counts (per CSR entry of clip ``j``)
    need no locks; t2a counts (per caption) go to per-block partial rows, summed in a fixed
    order at the end.
    """
    lo_s, hi_s = ctx[6], ctx[7]
    clip_ptr, csr_caps = actx[2], actx[3]
    N, B = St.shape
    c1 = c0 + B
    nblk = (N + _BLOCK - 1) // _BLOCK
    kmax = 0
    for j in range(N):
        kmax = max(kmax, clip_ptr[j + 1] - clip_ptr[j])
    part = np.zeros((nblk, B), np.int64)
    part_ref = np.zeros(nblk, np.int64)
    inband_k = np.zeros((nblk, kmax), np.int64)
    dummy = np.zeros((0, 2), np.int64)
    pos = np.zeros(2, np.int64)
    lo_c = lo_s[c0:c1]
    hi_c = hi_s[c0:c1]
    for bi in nb.prange(nblk):
        p = part[bi]
        nref = 0
        for j in range(bi * _BLOCK, min(N, (bi + 1) * _BLOCK)):
            row = St[j]
            inband_t = 0
            for b in range(B):
                x = row[b]
                g = x > hi_c[b]
                p[b] += g
                inband_t += (x >= lo_c[b]) - g
            # Take out the relevant pairs: clip j's own captions that lie in this chunk.
            for ko in range(clip_ptr[j], clip_ptr[j + 1]):
                c = csr_caps[ko]
                if c < c0 or c >= c1:
                    continue
                x = row[c - c0]
                g = x > hi_c[c - c0]
                p[c - c0] -= g
                inband_t -= (x >= lo_c[c - c0]) - g
            amb_t = 0
            if inband_t > 0:
                amb_t, nr = _scan_t2a(St, j, c0, ctx, p, False, dummy, pos)
                nref += nr
            amb_a, nr = _query_row(St, j, c0, actx, a2t_gt, inband_k[bi], dummy, pos)
            amb_t2a[j] = amb_t
            amb_a2t[j] = amb_a
            nref += nr
        part_ref[bi] = nref
    for b in range(B):
        s = 0
        for bi in range(nblk):
            s += part[bi, b]
        t2a_gt[c0 + b] += s
    for bi in range(nblk):
        refined[0] += part_ref[bi]

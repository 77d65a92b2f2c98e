"""Exact, streaming rank counts for embedding retrieval.

For every (query, relevant item) pair the metrics need two integers: how many *non-relevant*
items score strictly above the relevant item, and how many score exactly the same. Everything
else (ranks under either tie policy, R@k, mAP, ...) follows from these counts.

Scores are the exact real-valued dot products of the stored vectors. They are decided in three
stages, so that the counts are the same on any machine, BLAS, thread count or chunk size:

1. **BLAS.** A chunk of captions times all clips (``text[rows] @ audio.T``) in the dump's
   precision. Any summation order, with or without FMA, obeys
   ``|fl(x.y) - x.y| <= gamma_D * |x| |y| + D * eta`` with ``gamma_D = D u / (1 - D u)``
   (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 3.5, plus an
   underflow term). A comparison whose computed gap is larger than the sum of both sides'
   bounds (doubled, to cover the rounding of the bounds themselves) is decided here.
   The threshold of each comparison (the score of the relevant pair) is computed in float64.
2. **float64.** The few comparisons inside the band are recomputed as float64 dot products of
   the stored values, with the float64 bound.
3. **Exact.** What is still undecided (in practice: exact ties, such as duplicated clips) is
   decided exactly: bitwise-equal vectors tie; otherwise the sign of ``x1.y1 - x2.y2`` is
   computed with ``math.fsum`` over float64 products, which are exact for float32 inputs, or
   with integer arithmetic for float64 inputs.

Memory is bounded by the chunk: the full similarity matrix is never materialized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

# numba's OpenMP layer keeps its threads spinning after a parallel region, which steals the
# cores from the BLAS call that follows (measured here: 8.7 s instead of 6.8 s at 10,000 x 5).
# The workqueue layer parks them. It must be chosen before the first parallel launch.
if nb.config.THREADING_LAYER == "default":  # type: ignore[attr-defined]
    nb.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]

#: Target number of float elements in one similarity chunk (64 MiB of float32).
DEFAULT_CHUNK_ELEMENTS = 1 << 24
#: Width of the clip blocks that the kernel's threads own; fixed, so that the partition of the
#: work never depends on the thread count.
_BLOCK = 256

#: Stage-1 bands are the rigorous bounds times this factor; the excess covers the rounding of
#: the float64 norms and of the bound arithmetic itself (relative errors near 1e-15).
_SAFETY = 1.0 + 2.0**-20

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class RankCounts:
    """Exact per-pair counts for one direction, in CSR form over queries.

    ``ptr[q]:ptr[q+1]`` indexes the relevant items of query ``q``; for each, ``greater`` counts
    the non-relevant items scored strictly above it and ``equal`` those scored the same.
    """

    ptr: IntArray
    greater: IntArray
    equal: IntArray
    #: Which non-relevant items tie exactly: rows ``(entry, item)``, ``entry`` indexing
    #: ``greater``/``equal``; sorted. Profiles that break ties by item name need them.
    tied: IntArray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    #: The relevant item of each entry (a clip for t2a, a caption for a2t), when known.
    relevant: IntArray | None = None

    @property
    def n_queries(self) -> int:
        return int(self.ptr.shape[0] - 1)


@dataclass(frozen=True)
class ExactStats:
    """How many comparisons each stage decided (for benchmarks and the curious)."""

    comparisons: int
    refined_float64: int
    exact: int


def _gamma(n: int, u: float) -> float:
    return n * u / (1.0 - n * u)


def _unit_roundoff(dtype: np.dtype[Any]) -> tuple[float, float]:
    """Unit roundoff and per-operation underflow bound of a float dtype."""
    if dtype == np.float32:
        return 2.0**-24, 2.0**-125
    return 2.0**-53, 2.0**-1021


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


def exact_dot_difference_sign(
    x1: npt.NDArray[Any], y1: npt.NDArray[Any], x2: npt.NDArray[Any], y2: npt.NDArray[Any]
) -> int:
    """The exact sign of ``x1.y1 - x2.y2`` for finite float vectors.

    >>> a = np.array([0.1, 0.2], dtype=np.float32)
    >>> exact_dot_difference_sign(a, a, a, a)
    0
    >>> exact_dot_difference_sign(a, a * 2, a, a)
    1
    """
    if np.array_equal(x1, x2) and np.array_equal(y1, y2):
        return 0
    if x1.dtype == np.float32 and y1.dtype == np.float32:
        # A product of two float32 values is exact in float64 (24 + 24 <= 53 significant bits,
        # exponents far from float64's limits), and fsum rounds the exact sum correctly, so
        # its sign is exact.
        terms = np.concatenate(
            [x1.astype(np.float64) * y1.astype(np.float64), -(x2.astype(np.float64) * y2)]
        )
        s = math.fsum(terms.tolist())
        return int(s > 0) - int(s < 0)
    return _exact_sign_int(x1, y1, x2, y2)


def _exact_sign_int(x1: Any, y1: Any, x2: Any, y2: Any) -> int:
    """Integer arithmetic: each float is ``m * 2**e`` with an integer ``m``."""

    def ints(v: Any) -> tuple[list[int], list[int]]:
        m, e = np.frexp(np.asarray(v, dtype=np.float64))
        return [int(x) for x in (m * 2.0**53).astype(np.int64)], [int(x) - 53 for x in e]

    terms: list[tuple[int, int]] = []
    for xs, ys, sign in ((x1, y1, 1), (x2, y2, -1)):
        mx, ex = ints(xs)
        my, ey = ints(ys)
        for a, b, c, e in zip(mx, my, ex, ey, strict=True):
            if a and b:
                terms.append((sign * a * b, c + e))
    if not terms:
        return 0
    emin = min(e for _, e in terms)
    total = sum(m << (e - emin) for m, e in terms)
    return int(total > 0) - int(total < 0)


def _pairs(rows: list[tuple[int, int]]) -> IntArray:
    out = np.array(sorted(rows), dtype=np.int64).reshape(-1, 2)
    return out


def _outward(lo: Any, hi: Any, dtype: np.dtype[Any]) -> tuple[Any, Any]:
    """Cast band edges to ``dtype``, rounding ``lo`` down and ``hi`` up."""
    lo_c = lo.astype(dtype)
    hi_c = hi.astype(dtype)
    lo_c = np.where(lo_c > lo, np.nextafter(lo_c, dtype.type(-np.inf)), lo_c).astype(dtype)
    hi_c = np.where(hi_c < hi, np.nextafter(hi_c, dtype.type(np.inf)), hi_c).astype(dtype)
    return lo_c, hi_c


def _norms(X: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Row norms in float64 with a relative allowance for their own rounding."""
    norms: npt.NDArray[np.float64] = np.sqrt(np.einsum("ij,ij->i", X, X, dtype=np.float64))
    return norms * (1 + 1e-12)


@dataclass
class _Entries:
    """One direction as the general pass counts it: the queries are the rows of each chunk,
    the items its columns, and query ``q``'s relevant items ``idx[ptr[q]:ptr[q+1]]`` are its
    entries. ``ctx`` is what the compiled passes read (order as :func:`_scan_rel` unpacks)."""

    ctx: tuple[Any, ...]
    qk: IntArray  #: the query of each entry
    gt: IntArray
    eq: IntArray
    amb: IntArray  #: per query: comparisons of this chunk float64 left undecided
    tied: list[tuple[int, int]] = field(default_factory=list)
    n_exact: int = 0

    @classmethod
    def build(
        cls, Q: Any, Items: Any, ptr: IntArray, idx: IntArray, p64: Any, norms: tuple[Any, Any]
    ) -> _Entries:
        """Stage-1 bands of every entry: the BLAS score of any item against this query, plus
        the float64 threshold's own error (both bounds doubled), rounded outward to the dtype
        of the BLAS result so that the vectorized comparisons stay rigorous."""
        nQ, nI = norms
        d = Q.shape[1]
        u, eta = _unit_roundoff(Q.dtype)
        u64, eta64 = _unit_roundoff(np.dtype(np.float64))
        g_fast, g64 = _gamma(d, u), _gamma(d, u64)
        qk = np.repeat(np.arange(Q.shape[0], dtype=np.int64), np.diff(ptr))
        max_i = float(nI.max())
        eta_fast, eta64x2 = 2 * d * eta, 2 * d * eta64
        band = _SAFETY * (g_fast * nQ[qk] * max_i + g64 * nQ[qk] * nI[idx]) + eta_fast + eta64x2
        lo_s, hi_s = _outward(p64 - band, p64 + band, Q.dtype)
        ctx = (Q, Items, ptr, idx, p64, nQ, nI, lo_s, hi_s, 2 * g64, eta64x2)
        n = idx.shape[0]
        zeros = (np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(Q.shape[0], np.int64))
        return cls(ctx, qk, *zeros)

    def settle(self, S: Any, c0: int) -> None:
        """Decide exactly what float64 left undecided in this chunk."""
        if not self.amb.any():
            return
        Q, Items, ptr, idx = self.ctx[:4]
        und = np.zeros((int(self.amb.sum()), 2), np.int64)
        pos = np.zeros(2, np.int64)
        none = np.zeros(0, np.int64)
        for q in np.flatnonzero(self.amb).tolist():
            for k in range(int(ptr[q]), int(ptr[q + 1])):
                _scan_rel(S, q, k, c0, self.ctx, none, True, und, pos)
        self.n_exact += len(und)
        for k, i in und.tolist():
            q = int(self.qk[k])
            s = exact_dot_difference_sign(Q[q], Items[i], Q[q], Items[idx[k]])
            self.gt[k] += s > 0
            self.eq[k] += s == 0
            if s == 0:
                self.tied.append((k, i))

    def counts(self) -> RankCounts:
        ptr, idx = self.ctx[2], self.ctx[3]
        return RankCounts(ptr.copy(), self.gt, self.eq, _pairs(self.tied), idx.copy())


def _chunks(n_rows: int, n_other: int, chunk_rows: int | None) -> range:
    if chunk_rows is None:
        chunk_rows = max(1, min(n_rows, DEFAULT_CHUNK_ELEMENTS // max(n_other, 1)))
    return range(0, n_rows, chunk_rows)


def _settle_t2a(
    St: Any, c0: int, ctx: tuple[Any, ...], amb: IntArray, counts: tuple[IntArray, IntArray]
) -> list[tuple[int, int]]:
    """Decide exactly the t2a comparisons float64 left undecided in this chunk (into
    ``counts``: greater, equal); returns the exact ties ``(caption, clip)``."""
    T, A, t2a = ctx[:3]
    gt, eq = counts
    und = np.zeros((int(amb.sum()), 2), np.int64)
    pos = np.zeros(2, np.int64)
    for j in np.flatnonzero(amb).tolist():
        _scan_t2a(St, j, c0, ctx, np.zeros(0, np.int64), True, und, pos)
    tied = []
    for i, j in und.tolist():
        s = exact_dot_difference_sign(T[i], A[j], T[i], A[t2a[i]])
        gt[i] += s > 0
        eq[i] += s == 0
        if s == 0:
            tied.append((i, j))
    return tied


def exact_rank_counts(
    audio: npt.NDArray[Any],
    text: npt.NDArray[Any],
    text_to_audio: IntArray,
    *,
    chunk_rows: int | None = None,
) -> tuple[RankCounts, RankCounts, ExactStats]:
    """Exact rank counts for text-to-audio and audio-to-text retrieval.

    t2a: query = caption ``i``, relevant item = clip ``text_to_audio[i]``.
    a2t: query = clip ``j``, relevant items = its captions (queries in clip order, relevant
    captions of a clip in caption-index order). Both from one pass over ``audio @ text.T``:
    the a2t half is the general pass (:class:`_Entries`, clips as queries), the t2a half
    counts per caption column.
    """
    A = np.ascontiguousarray(audio)
    T = np.ascontiguousarray(text)
    t2a = np.ascontiguousarray(text_to_audio, dtype=np.int64)
    n, d = A.shape
    m = T.shape[0]
    u, eta = _unit_roundoff(A.dtype)
    u64, eta64 = _unit_roundoff(np.dtype(np.float64))
    g_fast, g64 = _gamma(d, u), _gamma(d, u64)
    nA, nT = _norms(A), _norms(T)
    eta_fast, eta64x2 = 2 * d * eta, 2 * d * eta64
    p64 = _pair_scores(T, A, t2a)
    # t2a bands (doubled bounds) around each caption's threshold, rounded outward to the
    # dtype of the BLAS result so that the vectorized comparisons stay rigorous.
    err_pair = g64 * nT * nA[t2a]
    band_row = _SAFETY * (g_fast * nT * float(nA.max()) + err_pair) + eta_fast + eta64x2
    lo_s, hi_s = _outward(p64 - band_row, p64 + band_row, A.dtype)
    clip_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(t2a, minlength=n), out=clip_ptr[1:])
    csr_caps = np.argsort(t2a, kind="stable").astype(np.int64)  # CSR over clips
    a2t = _Entries.build(A, T, clip_ptr, csr_caps, p64[csr_caps], (nA, nT))
    ctx = (T, A, t2a, p64, nT, nA, lo_s, hi_s, 2 * g64, eta64x2)
    t2a_gt, t2a_eq = np.zeros(m, np.int64), np.zeros(m, np.int64)
    amb_t2a = np.zeros(n, np.int64)
    refined = np.zeros(1, np.int64)
    tied_t2a: list[tuple[int, int]] = []
    n_exact = 0
    chunks = _chunks(m, n, chunk_rows)
    # One reused output buffer: a fresh 64 MiB array per chunk costs more in page faults than
    # the comparisons themselves.
    flat = np.empty(n * min(chunks.step, m), dtype=A.dtype)
    for c0 in chunks:
        c1 = min(m, c0 + chunks.step)
        St = flat[: n * (c1 - c0)].reshape(n, c1 - c0)
        np.matmul(A, T[c0:c1].T, out=St)
        _count_chunk(St, c0, ctx, a2t.ctx, t2a_gt, a2t.gt, amb_t2a, a2t.amb, refined)
        if amb_t2a.any():
            ties = _settle_t2a(St, c0, ctx, amb_t2a, (t2a_gt, t2a_eq))
            n_exact += int(amb_t2a.sum())
            tied_t2a += ties
        a2t.settle(St, c0)
    t2a_counts = RankCounts(
        np.arange(m + 1, dtype=np.int64), t2a_gt, t2a_eq, _pairs(tied_t2a), t2a.copy()
    )
    per_clip = np.diff(clip_ptr)
    comparisons = m * (n - 1) + int(np.sum(per_clip * (m - per_clip)))
    stats = ExactStats(comparisons, int(refined[0]), n_exact + a2t.n_exact)
    return t2a_counts, a2t.counts(), stats


def exact_relevance_counts(
    queries: npt.NDArray[Any],
    items: npt.NDArray[Any],
    indptr: npt.ArrayLike,
    indices: npt.ArrayLike,
    *,
    chunk_rows: int | None = None,
) -> tuple[RankCounts, ExactStats]:
    """Exact rank counts of one direction under any relevance (format version 2).

    Query ``q`` (a row of ``queries``) has the relevant items
    ``indices[indptr[q]:indptr[q+1]]`` (rows of ``items``, ascending within a query, at least
    one per query). For each such entry: the non-relevant items scored strictly above it
    (``greater``) and exactly the same (``equal``), decided in the same three stages as
    :func:`exact_rank_counts` (BLAS band, float64, exact), whose a2t half is this pass. a2t
    is ``exact_relevance_counts(audio, text, relevance.indptr, relevance.indices)``, t2a the
    same with the transposed relevance and the roles swapped; both give the counts
    :func:`exact_rank_counts` gives when every text has one clip.

    Query 0 (``[1, 0]``) has the relevant items 1 and 2, query 1 (``[0, 1]``) item 0:

    >>> e = np.eye(2, dtype=np.float32)
    >>> rc, _ = exact_relevance_counts(e, e[[0, 1, 0]], [0, 2, 3], [1, 2, 0])
    >>> rc.greater.tolist(), rc.equal.tolist()  # item 0 above item 1; ties item 2 ...
    ([1, 0, 1], [0, 1, 1])
    """
    Q = np.ascontiguousarray(queries)
    Items = np.ascontiguousarray(items)
    ptr = np.ascontiguousarray(indptr, dtype=np.int64)
    idx = np.ascontiguousarray(indices, dtype=np.int64)
    nq, ni = Q.shape[0], Items.shape[0]
    qk = np.repeat(np.arange(nq, dtype=np.int64), np.diff(ptr))
    p64 = _entry_scores(Q, Items, qk, idx)
    side = _Entries.build(Q, Items, ptr, idx, p64, (_norms(Q), _norms(Items)))
    refined = np.zeros(1, np.int64)
    chunks = _chunks(ni, nq, chunk_rows)
    flat = np.empty(nq * min(chunks.step, ni), dtype=Q.dtype)
    for c0 in chunks:
        c1 = min(ni, c0 + chunks.step)
        S = flat[: nq * (c1 - c0)].reshape(nq, c1 - c0)
        np.matmul(Q, Items[c0:c1].T, out=S)
        _count_chunk_rel(S, c0, side.ctx, side.gt, side.amb, refined)
        side.settle(S, c0)
    n_rel = np.diff(ptr)
    comparisons = int(np.sum(n_rel * (ni - n_rel)))
    return side.counts(), ExactStats(comparisons, int(refined[0]), side.n_exact)

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

import numpy as np
import numpy.typing as npt

#: Target number of float elements in one similarity chunk (64 MiB of float32).
DEFAULT_CHUNK_ELEMENTS = 1 << 24

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


def _kernels() -> Any:
    """The compiled passes (C, loaded with ctypes), imported when a rank count is computed."""
    import audiorepro.metrics._exact_kernels as kernels

    return kernels


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
        for q in np.flatnonzero(self.amb).tolist():
            for k in range(int(ptr[q]), int(ptr[q + 1])):
                _kernels().collect_rel(S, q, k, c0, self.ctx, und, pos)
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
        _kernels().collect_t2a(St, j, c0, ctx, und, pos)
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
    p64 = _kernels().pair_scores(T, A, t2a)
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
        _kernels().count_chunk(St, c0, ctx, a2t.ctx, (t2a_gt, a2t.gt), (amb_t2a, a2t.amb), refined)
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
    p64 = _kernels().entry_scores(Q, Items, qk, idx)
    side = _Entries.build(Q, Items, ptr, idx, p64, (_norms(Q), _norms(Items)))
    refined = np.zeros(1, np.int64)
    chunks = _chunks(ni, nq, chunk_rows)
    flat = np.empty(nq * min(chunks.step, ni), dtype=Q.dtype)
    for c0 in chunks:
        c1 = min(ni, c0 + chunks.step)
        S = flat[: nq * (c1 - c0)].reshape(nq, c1 - c0)
        np.matmul(Q, Items[c0:c1].T, out=S)
        _kernels().count_chunk_rel(S, c0, side.ctx, side.gt, side.amb, refined)
        side.settle(S, c0)
    n_rel = np.diff(ptr)
    comparisons = int(np.sum(n_rel * (ni - n_rel)))
    return side.counts(), ExactStats(comparisons, int(refined[0]), side.n_exact)

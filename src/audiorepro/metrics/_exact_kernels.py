"""The compiled passes of :mod:`audiorepro.metrics._exact`: C (``metrics/_rankcount.c``)
compiled ahead of time by the package's build (``setup.py``) and loaded with ctypes, as
trec-eval's kernels are (:mod:`audiorepro.core.native`; docs/architecture.md, "Compiled
kernels"). Nothing is compiled when a rank count is computed and nothing is written: a fresh
install, container or Slurm array task answers at once (issue 48; they were numba kernels,
compiled on the first rank count of every fresh cache).

A direction's context (``ctx``, the tuple :class:`audiorepro.metrics._exact._Entries` builds:
``Q, Items, ptr, idx, p64, nQ, nI, lo_s, hi_s, g64x2, eta64x2``; the t2a half's has the
captions' clips ``t2a`` in place of ``ptr, idx``) is handed to C as one ``aex_ctx`` struct.
The chunk passes run on :func:`threads` threads over fixed blocks of rows: the thread count
changes no result.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.native import CompiledKernels, SignatureMap, pointer

#: The library's ``aex_abi()``: raised whenever a function's arguments change.
ABI = 1

_P = ctypes.c_void_p
_I = ctypes.c_int64
_SIGNATURES: SignatureMap = {"aex_abi": (_I, [])}
for _t in ("f32", "f64"):
    _SIGNATURES |= {
        f"aex_entry_scores_{_t}": (None, [_P, _P, _I, _P, _P, _I, _P]),
        f"aex_collect_rel_{_t}": (_I, [_P, _I, _I, _I, _I, _P, _P, _P]),
        f"aex_collect_t2a_{_t}": (_I, [_P, _I, _I, _I, _P, _P, _P]),
        f"aex_count_chunk_rel_{_t}": (_I, [_P, _I, _I, _I, _P, _P, _P, _P, _I]),
        f"aex_count_chunk_{_t}": (_I, [_P, _I, _I, _I, _P, _P, _P, _P, _P, _P, _P, _I]),
    }

KERNELS = CompiledKernels(
    Path(__file__).resolve().parent,
    "_rankcount",
    "rank-count kernels",
    ("aex_abi", ABI),
    _SIGNATURES,
)

_THREADS: int | None = None


def threads() -> int:
    """Threads of the chunk passes: :func:`set_threads`'s, else the CPUs this process may use."""
    return _THREADS if _THREADS is not None else max(1, len(os.sched_getaffinity(0)))


def set_threads(n: int | None) -> None:
    """Run the chunk passes on ``n`` threads (None: the CPUs this process may use)."""
    global _THREADS
    _THREADS = n


class _Ctx(ctypes.Structure):
    _fields_ = [
        ("Q", _P),
        ("Items", _P),
        ("d", _I),
        ("ptr", _P),
        ("idx", _P),
        ("p64", _P),
        ("nQ", _P),
        ("nI", _P),
        ("lo_s", _P),
        ("hi_s", _P),
        ("g64x2", ctypes.c_double),
        ("eta64x2", ctypes.c_double),
    ]


def _suffix(dtype: np.dtype[Any]) -> str:
    if dtype == np.float32:
        return "f32"
    if dtype == np.float64:
        return "f64"
    raise TypeError(f"embeddings of dtype {dtype}: float32 or float64 expected")


def _ctx(ctx: tuple[Any, ...], keep: list[Any]) -> tuple[_Ctx, str]:
    """The C struct of a direction's context (10 fields: the t2a half, no ``ptr``)."""
    if len(ctx) == 10:
        Q, Items, idx, p64, nQ, nI, lo_s, hi_s, g, eta = ctx
        ptr: Any = np.zeros(1, np.int64)
    else:
        Q, Items, ptr, idx, p64, nQ, nI, lo_s, hi_s, g, eta = ctx
    t = Q.dtype.type
    assert Items.dtype == Q.dtype == lo_s.dtype == hi_s.dtype
    fields = [
        pointer(Q, t, keep),
        pointer(Items, t, keep),
        int(Q.shape[1]),
        pointer(ptr, np.int64, keep),
        pointer(idx, np.int64, keep),
        *[pointer(a, np.float64, keep) for a in (p64, nQ, nI)],
        pointer(lo_s, t, keep),
        pointer(hi_s, t, keep),
        float(g),
        float(eta),
    ]
    struct = _Ctx(*fields)
    keep.append(struct)
    return struct, _suffix(Q.dtype)


def _out(array: npt.NDArray[Any], dtype: type[np.generic] = np.int64) -> int:
    """The address of an array the kernels write into (never a copy)."""
    if array.dtype != dtype or not array.flags.c_contiguous or not array.flags.writeable:
        raise ValueError(f"a kernel output must be a writeable C-contiguous {dtype} array")
    address: int = array.ctypes.data
    return address


def _chunk(S: npt.NDArray[Any], dtype: np.dtype[Any]) -> int:
    if S.dtype != dtype or not S.flags.c_contiguous:
        raise ValueError("a similarity chunk must be C-contiguous, of the embeddings' dtype")
    address: int = S.ctypes.data
    return address


def entry_scores(
    Q: npt.NDArray[Any], Items: npt.NDArray[Any], qk: npt.NDArray[Any], idx: npt.NDArray[Any]
) -> npt.NDArray[np.float64]:
    """``Q[qk[k]] . Items[idx[k]]`` in float64 for every ``k``, summed in index order."""
    keep: list[Any] = []
    t = Q.dtype.type
    out = np.empty(idx.shape[0], np.float64)
    getattr(KERNELS.library(), f"aex_entry_scores_{_suffix(Q.dtype)}")(
        pointer(Q, t, keep), pointer(Items.astype(Q.dtype, copy=False), t, keep),
        int(Q.shape[1]), pointer(qk, np.int64, keep), pointer(idx, np.int64, keep),
        int(idx.shape[0]), _out(out, np.float64),
    )  # fmt: skip
    return out


def pair_scores(
    T: npt.NDArray[Any], A: npt.NDArray[Any], t2a: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """``T[i] . A[t2a[i]]`` in float64 for every caption ``i``."""
    return entry_scores(T, A, np.arange(T.shape[0], dtype=np.int64), t2a)


def collect_rel(
    S: npt.NDArray[Any], q: int, k: int, c0: int, ctx: tuple[Any, ...], out: Any, pos: Any
) -> int:
    """Record, as rows ``(k, item)`` of ``out`` from ``pos[0]`` on, the comparisons of query
    ``q``'s entry ``k`` with this chunk's items that float64 cannot decide; their number."""
    keep: list[Any] = []
    struct, t = _ctx(ctx, keep)
    function = getattr(KERNELS.library(), f"aex_collect_rel_{t}")
    undecided: int = function(
        _chunk(S, ctx[0].dtype), S.shape[1], q, k, c0, ctypes.addressof(struct), _out(out),
        _out(pos),
    )  # fmt: skip
    return undecided


def collect_t2a(
    St: npt.NDArray[Any], j: int, c0: int, ctx: tuple[Any, ...], out: Any, pos: Any
) -> int:
    """Record, as rows ``(caption, j)`` of ``out``, the t2a comparisons of clip ``j`` in this
    chunk that float64 cannot decide; their number."""
    keep: list[Any] = []
    struct, t = _ctx(ctx, keep)
    function = getattr(KERNELS.library(), f"aex_collect_t2a_{t}")
    undecided: int = function(
        _chunk(St, ctx[0].dtype), St.shape[1], j, c0, ctypes.addressof(struct), _out(out),
        _out(pos),
    )  # fmt: skip
    return undecided


def _checked(status: int) -> None:
    if status != 0:
        raise MemoryError("the rank-count kernels ran out of memory")


def count_chunk_rel(
    S: npt.NDArray[Any], c0: int, ctx: tuple[Any, ...], gt: Any, amb: Any, refined: Any
) -> None:
    """Count one chunk ``S = queries @ items[c0:c0+B].T`` into ``gt`` (per relevant entry);
    ``amb[q]``: query ``q``'s comparisons float64 left undecided; ``refined[0]`` += the
    float64 refinements."""
    keep: list[Any] = []
    struct, t = _ctx(ctx, keep)
    function = getattr(KERNELS.library(), f"aex_count_chunk_rel_{t}")
    _checked(function(
        _chunk(S, ctx[0].dtype), S.shape[0], S.shape[1], c0, ctypes.addressof(struct),
        _out(gt), _out(amb), _out(refined), threads(),
    ))  # fmt: skip


def count_chunk(
    St: npt.NDArray[Any],
    c0: int,
    ctx: tuple[Any, ...],
    actx: tuple[Any, ...],
    gts: tuple[Any, Any],
    ambs: tuple[Any, Any],
    refined: Any,
) -> None:
    """Count one chunk ``St = audio @ text[c0:c0+B].T`` (clips x captions) into the t2a and
    a2t totals ``gts``; ``ambs``: per clip, the t2a and a2t comparisons float64 left
    undecided; ``refined[0]`` += the float64 refinements."""
    keep: list[Any] = []
    t2a, t = _ctx(ctx, keep)
    a2t, _ = _ctx(actx, keep)
    function = getattr(KERNELS.library(), f"aex_count_chunk_{t}")
    _checked(function(
        _chunk(St, ctx[0].dtype), St.shape[0], St.shape[1], c0, ctypes.addressof(t2a),
        ctypes.addressof(a2t), _out(gts[0]), _out(gts[1]), _out(ambs[0]), _out(ambs[1]),
        _out(refined), threads(),
    ))  # fmt: skip

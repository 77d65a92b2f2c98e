"""The byte scanner behind :mod:`audiorepro.formats.trec`: one compiled pass over a qrels or
run file that splits lines into fields and reads their numbers the way trec_eval does (C
compiled ahead of time, ``core/_trec.c``, loaded by :mod:`audiorepro.core.native`).

Numbers follow C's ``atol`` and ``atof`` as trec_eval calls them, restricted to ASCII: an
optional sign, then ASCII digits (``atof``: with an optional ``.`` and fraction, then an
optional exponent ``e``/``E`` with at least one digit); reading stops at the first byte that
does not fit, and a field without a leading number reads as 0. A score whose leading part is
``inf``, ``infinity`` or ``nan`` (any case), or whose value overflows a double, is refused
(audiorepro's rule: a score must be finite). Hexadecimal floats (``0x1p3``: 8, as glibc reads
it) are handed back to be read by :func:`audiorepro.formats.c_numbers.c_atof`. The value of
a decimal is the correctly rounded double:
significands of up to 15 digits with a power of ten up to 22 are exact in one
multiplication or division here; any other decimal is handed back to be read by Python's
``float`` (also correctly rounded, as glibc's ``strtod`` is).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.native import library, pointer

Array = npt.NDArray[Any]

#: Scanner error codes (see :func:`scan`).
ERR_FEW_FIELDS, ERR_MANY_FIELDS, ERR_NUL, ERR_LONG, ERR_NONFINITE = 1, 2, 3, 4, 5


def atol(data: Array, start: int, stop: int) -> int:
    """C ``atol`` on ``data[start:stop]`` (ASCII, saturating at 18 digits).

    >>> atol(np.frombuffer(b"-12x7", np.uint8), 0, 5), atol(np.frombuffer(b"x", np.uint8), 0, 1)
    (-12, 0)
    """
    keep: list[Any] = []
    return int(library().atr_atol(pointer(data, np.uint8, keep), start, stop))


def atof(data: Array, start: int, stop: int) -> tuple[float, int, int]:
    """C ``atof`` on ``data[start:stop]``: ``(value, status, end)``; status 0 = exact here,
    1 = read ``data[start:end]`` with Python's ``float``, 2 = not finite.

    >>> atof(np.frombuffer(b"-2.5e1x", np.uint8), 0, 7)
    (-25.0, 0, 6)
    """
    keep: list[Any] = []
    status, end = ctypes.c_int64(0), ctypes.c_int64(0)
    value = library().atr_atof(pointer(data, np.uint8, keep), start, stop,
                               ctypes.addressof(status), ctypes.addressof(end))  # fmt: skip
    return float(value), int(status.value), int(end.value)


def scan(data: Array, run: bool, max_line: int) -> tuple[Array, ...]:
    """Every judgement (qrels) or retrieved document (run) of ``data``.

    Returns ``(group, group_start, group_len, doc_start, doc_len, value, line, slow, info)``:
    per record its qid group (a new group each time the qid differs from the previous
    record's), the docno's span, its number (qrels: ``rel`` by ``atol``; run: ``score`` by
    :func:`atof`; where that is left to Python, the offset of the score), its line number and
    whether the number is left to Python; per group the
    qid's span; ``info`` = ``[records, groups, error code, error line, fields, tag start,
    tag length, non-ASCII seen]``.

    >>> out = scan(np.frombuffer(b"1 0 a 2\\n# x\\n1 0 b 0\\n", np.uint8), False, 100)
    >>> out[-1][:2].tolist(), out[5][:2].tolist()
    ([2, 1], [2.0, 0.0])
    """
    lib = library()
    keep: list[Any] = []
    address = pointer(data, np.uint8, keep)
    size = int(lib.atr_count_lines(address, data.size))
    out = (
        np.empty(size, np.int32),  # group
        np.empty(size, np.int64),  # group start
        np.empty(size, np.int32),  # group length
        np.empty(size, np.int64),  # doc start
        np.empty(size, np.int32),  # doc length
        np.empty(size, np.float64),  # value
        np.empty(size, np.int32),  # line
        np.zeros(size, np.uint8),  # slow
        np.zeros(8, np.int64),  # info
    )
    lib.atr_scan(address, data.size, int(run), max_line, *(a.ctypes.data for a in out))
    return out


def compare(a: Array, sa: int, la: int, b: Array, sb: int, lb: int) -> int:
    """C ``strcmp`` of ``a[sa:sa+la]`` and ``b[sb:sb+lb]`` (bytes unsigned; a prefix first).

    >>> x = np.frombuffer(b"abab", np.uint8)
    >>> compare(x, 0, 2, x, 2, 2), compare(x, 0, 1, x, 2, 2), compare(x, 1, 1, x, 0, 1)
    (0, -1, 1)
    """
    keep: list[Any] = []
    return int(library().atr_compare(pointer(a, np.uint8, keep), sa, la,
                                     pointer(b, np.uint8, keep), sb, lb))  # fmt: skip


def sort_by_docno(
    data: Array,
    dstart: Array,
    dlen: Array,
    order: Array,
    start: Array,
    stop: Array,
) -> int:
    """Sort each query's records ``order[start[i]:stop[i]]`` by docno (``strcmp``), in place,
    by a stable merge sort; return a record whose docno repeats one of its query, or -1.

    >>> data = np.frombuffer(b"cab", np.uint8)
    >>> order = np.arange(3)
    >>> span = np.arange(3, dtype=np.int64), np.ones(3, np.int32)
    >>> sort_by_docno(data, *span, order, np.array([0]), np.array([3])), order.tolist()
    (-1, [1, 2, 0])
    """
    if order.dtype != np.int64 or not order.flags.c_contiguous:
        raise TypeError("order must be a C-contiguous int64 array (it is sorted in place)")
    keep: list[Any] = []
    found = library().atr_sort_by_docno(
        pointer(data, np.uint8, keep),
        pointer(dstart, np.int64, keep),
        pointer(dlen, np.int32, keep),
        order.ctypes.data,
        order.size,
        pointer(start, np.int64, keep),
        pointer(stop, np.int64, keep),
        start.size,
    )
    if found == -2:
        raise MemoryError("trec-eval's docno sort")
    return int(found)

"""The byte scanner behind :mod:`audiorepro.formats.trec`: one compiled pass over a qrels or
run file that splits lines into fields and reads their numbers the way trec_eval does.

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

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

Array = npt.NDArray[Any]

#: Scanner error codes (see :func:`scan`).
ERR_FEW_FIELDS, ERR_MANY_FIELDS, ERR_NUL, ERR_LONG, ERR_NONFINITE = 1, 2, 3, 4, 5

_POW10 = np.array([10.0**i for i in range(23)])


@njit(cache=True, inline="always")
def _space(c: int) -> bool:
    return c == 32 or (9 <= c <= 13)


@njit(cache=True)
def atol(data: Array, start: int, stop: int) -> int:
    """C ``atol`` on ``data[start:stop]`` (ASCII, saturating at 18 digits).

    >>> atol(np.frombuffer(b"-12x7", np.uint8), 0, 5), atol(np.frombuffer(b"x", np.uint8), 0, 1)
    (-12, 0)
    """
    i = start
    sign = 1
    if i < stop and (data[i] == 45 or data[i] == 43):
        sign = -1 if data[i] == 45 else 1
        i += 1
    value = 0
    digits = 0
    while i < stop and 48 <= data[i] <= 57:
        if digits < 18:
            value = value * 10 + (data[i] - 48)
        digits += 1
        i += 1
    return sign * value


@njit(cache=True)
def atof(data: Array, start: int, stop: int) -> tuple[float, int, int]:
    """C ``atof`` on ``data[start:stop]``: ``(value, status, end)``; status 0 = exact here,
    1 = read ``data[start:end]`` with Python's ``float``, 2 = not finite.

    >>> atof(np.frombuffer(b"-2.5e1x", np.uint8), 0, 7)
    (-25.0, 0, 6)
    """
    i = start
    neg = False
    if i < stop and (data[i] == 45 or data[i] == 43):
        neg = data[i] == 45
        i += 1
    if i + 1 < stop and data[i] == 48 and (data[i + 1] | 32) == 120:  # 0x: a hex float
        return 0.0, 1, stop
    if i < stop and (data[i] | 32) in (105, 110):  # i, n: inf, infinity, nan
        if i + 2 < stop and (data[i + 1] | 32) in (110, 97) and (data[i + 2] | 32) in (102, 110):
            return 0.0, 2, stop
    mant = 0
    sig = 0
    exp10 = 0
    any_digit = False
    seen_dot = False
    while i < stop:
        c = data[i]
        if 48 <= c <= 57:
            any_digit = True
            if mant > 0 or c != 48:
                if sig < 19:
                    mant = mant * 10 + (c - 48)
                    sig += 1
                    if seen_dot:
                        exp10 -= 1
                else:
                    sig += 1
                    if not seen_dot:
                        exp10 += 1
            elif seen_dot:
                exp10 -= 1
        elif c == 46 and not seen_dot:
            seen_dot = True
        else:
            break
        i += 1
    if not any_digit:
        return 0.0, 0, start
    end = i
    if i < stop and (data[i] | 32) == 101:
        j = i + 1
        eneg = False
        if j < stop and (data[j] == 45 or data[j] == 43):
            eneg = data[j] == 45
            j += 1
        if j < stop and 48 <= data[j] <= 57:
            e = 0
            while j < stop and 48 <= data[j] <= 57:
                if e < 100000:
                    e = e * 10 + (data[j] - 48)
                j += 1
            exp10 += -e if eneg else e
            end = j
    if mant == 0:
        return (-0.0 if neg else 0.0), 0, end
    if sig <= 15 and -22 <= exp10 <= 22:
        value = float(mant)
        value = value * _POW10[exp10] if exp10 >= 0 else value / _POW10[-exp10]
        return (-value if neg else value), 0, end
    return 0.0, 1, end


@njit(cache=True)
def _count_lines(data: Array) -> int:
    n = 1
    for c in data:
        if c == 10:
            n += 1
    return n


@njit(cache=True)
def scan(data: Array, run: bool, max_line: int) -> tuple[Array, ...]:
    """Every judgement (qrels) or retrieved document (run) of ``data``.

    Returns ``(group, group_start, group_len, doc_start, doc_len, value, line, slow, info)``:
    per record its qid group (a new group each time the qid differs from the previous
    record's), the docno's span, its number (qrels: ``rel`` by ``atol``; run: ``score`` by
    :func:`atof`; where that is left to Python, the offset of the score), its line number and
    whether the number is left to Python; per group the
    qid's span; ``info`` = ``[records, groups, error code, error line, fields, tag start,
    tag length, non-ASCII seen]``.
    """
    size = _count_lines(data)
    group = np.empty(size, np.int32)
    gstart = np.empty(size, np.int64)
    glen = np.empty(size, np.int32)
    dstart = np.empty(size, np.int64)
    dlen = np.empty(size, np.int32)
    value = np.empty(size, np.float64)
    line = np.empty(size, np.int32)
    slow = np.zeros(size, np.uint8)
    info = np.zeros(8, np.int64)
    want = 6 if run else 4
    starts = np.empty(want + 1, np.int64)
    stops = np.empty(want + 1, np.int64)
    n = 0
    groups = 0
    number = 0
    pos = 0
    end = data.size
    nonascii = 0
    while pos < end:
        number += 1
        stop = pos
        while stop < end and data[stop] != 10:
            c = data[stop]
            if c == 0:
                info[2], info[3] = 3, number
                return group, gstart, glen, dstart, dlen, value, line, slow, info
            if c >= 128:
                nonascii = 1
            stop += 1
        if stop - pos > max_line:
            info[2], info[3] = 4, number
            return group, gstart, glen, dstart, dlen, value, line, slow, info
        fields = 0
        i = pos
        while i < stop:
            while i < stop and _space(data[i]):
                i += 1
            if i >= stop:
                break
            j = i
            while j < stop and not _space(data[j]):
                j += 1
            if fields <= want:
                starts[fields], stops[fields] = i, j
            fields += 1
            i = j
        next_pos = stop + 1
        if fields == 0 or data[starts[0]] == 35:
            pos = next_pos
            continue
        if fields < want or (not run and fields > want):
            info[2] = 1 if fields < want else 2
            info[3], info[4] = number, fields
            return group, gstart, glen, dstart, dlen, value, line, slow, info
        qs, ql = starts[0], stops[0] - starts[0]
        same = groups > 0 and glen[groups - 1] == ql
        if same:
            g0 = gstart[groups - 1]
            for k in range(ql):
                if data[g0 + k] != data[qs + k]:
                    same = False
                    break
        if not same:
            gstart[groups], glen[groups] = qs, ql
            groups += 1
        group[n] = groups - 1
        dstart[n], dlen[n] = starts[2], stops[2] - starts[2]
        line[n] = number
        if run:
            v, status, _ = atof(data, starts[4], stops[4])
            if status == 2:
                info[2], info[3] = 5, number
                return group, gstart, glen, dstart, dlen, value, line, slow, info
            if status == 1:  # Python reads it: keep where the score starts
                slow[n] = 1
                value[n] = float(starts[4])
            else:
                value[n] = v
            info[5], info[6] = starts[5], stops[5] - starts[5]
        else:
            value[n] = atol(data, starts[3], stops[3])
        n += 1
        pos = next_pos
    info[0], info[1], info[7] = n, groups, nonascii
    return group, gstart, glen, dstart, dlen, value, line, slow, info


@njit(cache=True, inline="always")
def compare(a: Array, sa: int, la: int, b: Array, sb: int, lb: int) -> int:
    """C ``strcmp`` of ``a[sa:sa+la]`` and ``b[sb:sb+lb]`` (bytes unsigned; a prefix first).

    >>> x = np.frombuffer(b"abab", np.uint8)
    >>> compare(x, 0, 2, x, 2, 2), compare(x, 0, 1, x, 2, 2), compare(x, 1, 1, x, 0, 1)
    (0, -1, 1)
    """
    m = la if la < lb else lb
    for k in range(m):
        ca, cb = a[sa + k], b[sb + k]
        if ca != cb:
            return -1 if ca < cb else 1
    if la == lb:
        return 0
    return -1 if la < lb else 1


@njit(cache=True)
def sort_by_docno(
    data: Array,
    dstart: Array,
    dlen: Array,
    order: Array,
    start: Array,
    stop: Array,
) -> int:
    """Sort each query's records ``order[start[i]:stop[i]]`` by docno (``strcmp``), in place,
    by a merge sort; return a record whose docno repeats one of its query, or -1."""
    tmp = np.empty(order.size, np.int64)
    for q in range(start.size):
        lo, hi = start[q], stop[q]
        width = 1
        while width < hi - lo:
            for left in range(lo, hi, 2 * width):
                mid = min(left + width, hi)
                right = min(left + 2 * width, hi)
                i, j, k = left, mid, left
                while i < mid and j < right:
                    a, b = order[i], order[j]
                    if compare(data, dstart[a], dlen[a], data, dstart[b], dlen[b]) <= 0:
                        tmp[k] = a
                        i += 1
                    else:
                        tmp[k] = b
                        j += 1
                    k += 1
                while i < mid:
                    tmp[k] = order[i]
                    i += 1
                    k += 1
                while j < right:
                    tmp[k] = order[j]
                    j += 1
                    k += 1
            for k in range(lo, hi):
                order[k] = tmp[k]
            width *= 2
        for k in range(lo + 1, hi):
            a, b = order[k - 1], order[k]
            if compare(data, dstart[a], dlen[a], data, dstart[b], dlen[b]) == 0:
                return int(b if b > a else a)
    return -1

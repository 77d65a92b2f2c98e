"""The qrels and run reader of ``audiorepro trec-eval``'s numpy-free path: the same compiled
scanner and docno sort as :func:`audiorepro.formats.trec.read_table`, over ``array`` buffers
instead of numpy arrays, so that a trec-eval run starts without numpy (on 100 queries its
import alone costs a third of trec_eval's whole run, and a third of the memory).

It reads well-formed files only. Anything :func:`~audiorepro.formats.trec.read_table` has more
to say about (a line with a wrong number of fields, a NUL byte, a non-ASCII byte, a score that
is not finite, a level out of range, a docno twice, a file with no record) raises
:class:`Unusual`: the caller then reads the files again with ``read_table``, which refuses
them with its own message or reads them (non-ASCII docnos) as before. The two readers give the
same table: the same bytes, spans, numbers and orders (tests compare them).
"""

from __future__ import annotations

import ctypes
import re
from array import array
from pathlib import Path
from typing import Any, NamedTuple

from audiorepro.core.hashing import check_regular_file
from audiorepro.core.native import library
from audiorepro.formats.c_numbers import c_atof

#: As :data:`audiorepro.formats.trec.MAX_LINE_BYTES` and ``MAX_LEVEL`` (tests check they agree).
MAX_LINE_BYTES = 1 << 16
MAX_LEVEL = 1_000_000
#: A field: the bytes up to the next white space (as formats.trec's).
_FIELD = re.compile(rb"[^ \t\n\v\f\r]*")


class Unusual(Exception):
    """The file needs :func:`audiorepro.formats.trec.read_table` (see the module)."""


class LightTable(NamedTuple):
    """:class:`audiorepro.formats.trec.TrecTable`'s fields as ``array`` buffers; ``levels``:
    a qrels' levels as int64 (what the kernels read), empty for a run."""

    data: bytearray
    doc_start: array[int]
    doc_len: array[int]
    value: array[float]
    levels: array[int]
    qids: list[str]
    start: array[int]
    stop: array[int]
    order: array[int]
    tag: str = ""


def address(buffer: bytearray | array[int] | array[float]) -> int:
    """The address of a buffer's first byte, for the ctypes calls (kept alive by the caller)."""
    if isinstance(buffer, bytearray):
        return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
    start: int = buffer.buffer_info()[0]
    return start


def _read_bytes(path: Path, what: str) -> bytearray:
    """The whole file in one buffer (one extra byte so that an empty file has an address)."""
    check_regular_file(path, what=what)
    try:
        with open(path, "rb") as f:
            data = bytearray(f.read())
    except OSError:
        raise Unusual from None  # read_table says what went wrong
    return data


def _scan(data: bytearray, run: bool) -> tuple[Any, ...]:
    """:func:`audiorepro.formats.trec_scan.scan`'s outputs, as arrays."""
    lib = library()
    size = len(data)
    data.append(10)  # an address for an empty file; not scanned (size excludes it)
    base = address(data)
    lines = int(lib.atr_count_lines(base, size))
    out = (
        array("i", bytes(4 * lines)),  # group
        array("q", bytes(8 * lines)),  # group start
        array("i", bytes(4 * lines)),  # group length
        array("q", bytes(8 * lines)),  # doc start
        array("i", bytes(4 * lines)),  # doc length
        array("d", bytes(8 * lines)),  # value
        array("i", bytes(4 * lines)),  # line
        array("B", bytes(lines)),  # slow
        array("q", bytes(64)),  # info
    )
    lib.atr_scan(base, size, int(run), MAX_LINE_BYTES, *(address(a) for a in out))
    return out


def _slow_scores(data: bytearray, value: array[float], slow: array[int], n: int) -> None:
    """The scores the scanner left to Python (formats.trec's ``_slow_scores``)."""
    raw = bytes(slow[:n])
    k = raw.find(1)
    while k >= 0:
        field = _FIELD.match(data, int(value[k]))
        assert field is not None
        number = c_atof(field.group(0).decode("latin-1"))
        if number - number != 0.0:  # not finite: read_table refuses it
            raise Unusual
        value[k] = number
        k = raw.find(1, k + 1)


def _queries(
    data: bytearray, group: array[int], gstart: array[int], glen: array[int], n: int, groups: int
) -> tuple[list[bytes], array[int], array[int], array[int]]:
    """The qids in byte order, and each one's records (``order[start[q]:stop[q]]``, file
    order): a qid whose lines are apart in the file has several groups."""
    spans = zip(gstart[:groups], glen[:groups], strict=True)
    names_of = [bytes(data[s : s + ln]) for s, ln in spans]
    unique = sorted(set(names_of))
    rank = {q: i for i, q in enumerate(unique)}
    rank_of = array("q", [rank[q] for q in names_of])
    start, stop = array("q", bytes(8 * len(unique))), array("q", bytes(8 * len(unique)))
    order = array("q", bytes(8 * n))
    status = library().atr_group_order(address(group), n, address(rank_of), len(unique),
                                       address(start), address(stop), address(order))  # fmt: skip
    if status:
        raise MemoryError("trec-eval's record order")
    return unique, start, stop, order


def read_light(path: Path, *, run: bool) -> LightTable:
    """A well-formed qrels (``run=False``) or run file as a :class:`LightTable`, or
    :class:`Unusual`.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "r.txt")
    ...     _ = open(p, "w").write("2 Q0 a 1 0.5 x\\n1 Q0 b 2 -1e-3 y\\n")
    ...     t = read_light(Path(p), run=True)
    >>> t.qids, t.value.tolist(), t.tag, t.order.tolist()
    (['1', '2'], [0.5, -0.001], 'y', [1, 0])
    """
    what = (
        "a TREC run (qid iter docno rank score tag)" if run else "TREC qrels (qid iter docno rel)"
    )
    data = _read_bytes(path, what)
    group, gstart, glen, dstart, dlen, value, line, slow, info = _scan(data, run)
    n, groups = info[0], info[1]
    if info[2] or info[7] or n == 0:  # an error, a non-ASCII byte (UTF-8 check), no record
        raise Unusual
    del line
    levels = array("q")
    if run:
        _slow_scores(data, value, slow, n)
    else:
        levels = array("q", bytes(8 * n))
        if library().atr_levels(address(value), n, float(MAX_LEVEL), address(levels)) >= 0:
            raise Unusual
    del slow
    unique, start, stop, order = _queries(data, group, gstart, glen, n, groups)
    del group, gstart, glen
    lib = library()
    twice = lib.atr_sort_by_docno(address(data), address(dstart), address(dlen), address(order),
                                  n, address(start), address(stop), len(unique))  # fmt: skip
    if twice == -2:
        raise MemoryError("trec-eval's docno sort")
    if twice >= 0:
        raise Unusual
    tag = data[info[5] : info[5] + info[6]].decode("ascii") if run else ""
    return LightTable(data, dstart, dlen, value, levels, [q.decode("ascii") for q in unique],
                      start, stop, order, tag)  # fmt: skip

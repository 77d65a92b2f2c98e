"""The qrels and run reader of ``audiorepro trec-eval``'s numpy-free path: the same compiled
scanner and docno sort as :func:`audiorepro.formats.trec.read_table`, over plain buffers
(fresh anonymous memory seen through a ``memoryview``, see :func:`zeros`) instead of numpy
arrays, so that a trec-eval run starts without numpy (on 100 queries its import alone costs a
third of trec_eval's whole run, and a third of the memory).

It reads well-formed files only. Anything :func:`~audiorepro.formats.trec.read_table` has more
to say about (a line with a wrong number of fields, a NUL byte, a non-ASCII byte, a score that
is not finite, a level out of range, a docno twice, a file with no record) raises
:class:`Unusual`: the caller then reads the files again with ``read_table``, which refuses
them with its own message or reads them (non-ASCII docnos) as before. The two readers give the
same table: the same bytes, spans, numbers and orders (tests compare them).
"""

from __future__ import annotations

import ctypes
import mmap
import os
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

    data: mmap.mmap
    doc_start: memoryview
    doc_len: memoryview
    value: memoryview
    levels: memoryview
    qids: list[str]
    start: memoryview
    stop: memoryview
    order: memoryview
    tag: str = ""


#: Bytes of each ``array`` type code the kernels read.
_SIZE = {"B": 1, "i": 4, "q": 8, "d": 8}


def zeros(code: str, n: int) -> Any:
    """``n`` zeros of type ``code`` in fresh anonymous memory: pages never written cost no
    memory (the per-line buffers are sized for every line; a run's per-group ones are mostly
    never written), and none is copied on the way (an ``array`` from ``bytes(n)`` writes each
    page). A ``memoryview`` of ``code``: typed Any, its items' type is the code's."""
    view: Any = memoryview(mmap.mmap(-1, max(n, 1) * _SIZE[code]))
    return view.cast(code)


def address(buffer: mmap.mmap | memoryview | array[int] | array[float]) -> int:
    """The address of a buffer's first byte, for the ctypes calls (kept alive by the caller)."""
    if isinstance(buffer, array):
        start: int = buffer.buffer_info()[0]
        return start
    size = buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)
    return ctypes.addressof((ctypes.c_char * size).from_buffer(buffer))


def _read_bytes(path: Path, what: str) -> mmap.mmap:
    """The whole file, read once into fresh memory (with one more byte: a file may be empty)."""
    check_regular_file(path, what=what)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = mmap.mmap(-1, size + 1)
            if f.readinto(data) != size or f.read(1):  # changed while read
                raise Unusual
    except OSError:
        raise Unusual from None  # read_table says what went wrong
    return data


def _scan(data: mmap.mmap, run: bool, groups_of: int) -> tuple[Any, ...]:
    """:func:`audiorepro.formats.trec_scan.scan`'s outputs (``groups_of`` 2: a record's group
    is its qid and the next field, ``-R qrels_jg``'s judgement group)."""
    lib = library()
    size = len(data) - 1
    base = address(data)
    lines = int(lib.atr_count_lines(base, size))
    out = (
        zeros("i", lines),  # group
        zeros("q", lines),  # group start
        zeros("i", lines),  # group length
        zeros("q", lines),  # doc start
        zeros("i", lines),  # doc length
        zeros("d", lines),  # value
        zeros("i", lines),  # line
        zeros("B", lines),  # slow
        zeros("q", 8),  # info
    )
    mode = int(run) | (2 if groups_of == 2 else 0)
    lib.atr_scan(base, size, mode, MAX_LINE_BYTES, *(address(a) for a in out))
    return out


def _slow_scores(data: mmap.mmap, value: Any, slow: memoryview, n: int) -> None:
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
    data: mmap.mmap,
    group: memoryview,
    gstart: memoryview,
    glen: memoryview,
    n: int,
    groups: int,
) -> tuple[list[bytes], memoryview, memoryview, memoryview]:
    """The keys (qids; ``-R qrels_jg``: qid and group, their fields joined by one blank) in
    byte order, and each one's records (``order[start[q]:stop[q]]``, file order): a key whose
    lines are apart in the file has several groups."""
    spans = zip(gstart[:groups], glen[:groups], strict=True)
    raw = [data[s : s + ln] for s, ln in spans]  # a group a line where groups interleave
    key = {r: b" ".join(r.split()) for r in set(raw)}  # the blanks between fields may differ
    unique = sorted(set(key.values()), key=bytes.split)  # (qid, group) order, not the bytes'
    rank = {q: i for i, q in enumerate(unique)}
    rank_of_raw = {r: rank[k] for r, k in key.items()}
    rank_of = array("q", map(rank_of_raw.__getitem__, raw))
    start, stop, order = zeros("q", len(unique)), zeros("q", len(unique)), zeros("q", n)
    status = library().atr_group_order(address(group), n, address(rank_of), len(unique),
                                       address(start), address(stop), address(order))  # fmt: skip
    if status:
        raise MemoryError("trec-eval's record order")
    return unique, start, stop, order


def read_light(path: Path, *, run: bool, groups_of: int = 1) -> LightTable:
    """A well-formed qrels (``run=False``) or run file as a :class:`LightTable`, or
    :class:`Unusual`. ``groups_of=2``: a qrels whose second field is a judgement group
    (``-R qrels_jg``), each (qid, group) a query of the table, named ``"qid group"``.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "r.txt")
    ...     _ = open(p, "w").write("2 Q0 a 1 0.5 x\\n1 Q0 b 2 -1e-3 y\\n")
    ...     t = read_light(Path(p), run=True)
    >>> t.qids, t.value[:2].tolist(), t.tag, t.order.tolist()  # value: a slot per line
    (['1', '2'], [0.5, -0.001], 'y', [1, 0])
    """
    what = (
        "a TREC run (qid iter docno rank score tag)" if run else "TREC qrels (qid iter docno rel)"
    )
    data = _read_bytes(path, what)
    group, gstart, glen, dstart, dlen, value, line, slow, info = _scan(data, run, groups_of)
    n, groups = info[0], info[1]
    if info[2] or info[7] or n == 0:  # an error, a non-ASCII byte (UTF-8 check), no record
        raise Unusual
    del line
    levels = zeros("q", 0)
    if run:
        _slow_scores(data, value, slow, n)
    else:
        levels = zeros("q", n)
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

"""TREC relevance judgements (qrels) and run files, as trec_eval reads them.

- **qrels**: one judgement a line, ``qid iter docno rel`` separated by blanks or tabs: ``iter``
  is ignored (conventionally ``0``), ``rel`` the relevance level read as C's ``atol`` does
  (a negative level means "in the pool but not judged", as in trec_eval).
- **run**: one retrieved document a line, ``qid iter docno rank score tag``: ``iter`` (``Q0``)
  and ``rank`` are ignored, as trec_eval does (it ranks by score, then docno); ``score`` is
  read as C's ``atof`` does and must be finite; ``tag`` names the run (trec_eval's ``runid``
  is the tag of the last line). Fields after the tag are ignored: trec_eval's format reserves
  them "for future expansion" (its own test run ``results.trunc`` has them); fewer than six
  fields is an error.

Numbers (:mod:`audiorepro.formats.trec_scan`): ASCII only, an optional sign and digits
(``atof``: a decimal with an optional exponent), reading stops at the first byte that does not
fit, and a field with no leading number is 0, exactly as trec_eval reads them (``0.5`` as a
level is 0, ``12abc`` is 12). Blanks are C's ``isspace`` bytes; lines end at ``\\n``.

Lines that are empty or whose first field starts with ``#`` are comments, in a run as
trec_eval 10 reads its test runs, and in qrels too, where trec_eval 10 quits on such a line
("Malformed line") or crashes on a trailing comment (a divergence listed in docs/retrieval.md:
the file's numbers are those of the same file without those lines). Everything else is
strict: a wrong number of fields, a score that is not finite, a docno judged or retrieved
twice for one query, a file with no line, a file that is not UTF-8 text (a NUL byte: a binary
file), or a line longer than :data:`MAX_LINE_BYTES` is one :class:`UserError` naming the
file, the line number and the field. ``-`` as a run path reads standard input (trec_eval's
convention).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file
from audiorepro.formats import trec_scan
from audiorepro.formats.c_numbers import c_atof

Array = npt.NDArray[Any]

#: The longest line read: real qrels and run lines are well under 200 bytes; a longer one is
#: a wrong file.
MAX_LINE_BYTES = 1 << 16

QRELS_FIELDS = ("qid", "iter", "docno", "rel")
RUN_FIELDS = ("qid", "iter", "docno", "rank", "score", "tag")
#: A field: the bytes up to the next white space (trec_eval splits lines on it).
_FIELD = re.compile(rb"[^ \t\n\v\f\r]*")


@dataclass(frozen=True)
class Qrels:
    """Judgements per query: ``judged[qid][docno]`` is the relevance level."""

    judged: dict[str, dict[str, int]]


@dataclass(frozen=True)
class Run:
    """Retrieved documents per query: ``scores[qid][docno]`` is the score; ``run_id`` is
    trec_eval's ``runid`` (the tag of the last line)."""

    run_id: str
    scores: dict[str, dict[str, float]]


@dataclass(frozen=True)
class TrecTable:
    """A qrels or run file as arrays: the file's bytes, per record the docno's span and its
    number (level or score) and line; ``qids`` sorted by bytes (trec_eval's ``strcmp``
    order); query ``i``'s records are ``order[start[i]:stop[i]]``, sorted by docno
    (``strcmp``)."""

    data: Array
    doc_start: Array
    doc_len: Array
    value: Array
    line: Array
    qids: list[str]
    start: Array
    stop: Array
    order: Array
    tag: str = ""


def _read_bytes(path: str | Path, what: str) -> tuple[str, Array]:
    if str(path) == "-":
        return "<stdin>", np.frombuffer(sys.stdin.buffer.read(), np.uint8)
    source = Path(path)
    check_regular_file(source, what=what)
    try:
        return str(source), np.fromfile(source, np.uint8)
    except OSError as exc:
        raise UserError(
            f"cannot be read ({exc.strerror}); expected {what}", source=source
        ) from None


def _scan_error(info: Array, source: str, what: str, names: tuple[str, ...]) -> None:
    code, number, fields = int(info[2]), int(info[3]), int(info[4])
    if code in (trec_scan.ERR_FEW_FIELDS, trec_scan.ERR_MANY_FIELDS):
        more = " or more" if names == RUN_FIELDS else ""
        raise UserError(
            f"line {number} has {fields} fields; expected {len(names)}{more} ({' '.join(names)})",
            source=source,
        )
    if code == trec_scan.ERR_NUL:
        raise UserError(
            f"line {number} holds a NUL byte; expected {what} (text, not a binary file)",
            source=source,
        )
    if code == trec_scan.ERR_LONG:
        raise UserError(
            f"line {number} is longer than {MAX_LINE_BYTES} bytes; expected {what} lines",
            source=source,
        )
    raise UserError(
        f"line {number}: field 'score' is not finite; expected a finite decimal number",
        source=source,
    )


def _check_utf8(data: Array, source: str, what: str) -> None:
    for number, raw in enumerate(data.tobytes().split(b"\n"), start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(
                f"line {number} is not UTF-8 text ({exc.reason}); expected {what}",
                source=source,
            ) from None


def _slow_scores(data: Array, value: Array, slow: Array, source: str) -> None:
    """Read with Python's ``float`` the scores the scanner left (see trec_scan)."""
    raw = data.tobytes() if slow.any() else b""
    for k in np.flatnonzero(slow):
        begin = int(value[k])
        field = _FIELD.match(raw, begin)
        assert field is not None
        text = field.group(0).decode("latin-1")  # atof reads ASCII; other bytes end it
        number = c_atof(text)
        if not np.isfinite(number):
            raise UserError(
                f"field 'score' {text[:40]!r} overflows; expected a finite decimal number",
                source=source,
            )
        value[k] = number


#: The largest relevance level read (either sign): the measures keep per-level counts, so a
#: level of 2**63 - 1 (400 digits, read by atol as LONG_MAX) would ask for exabytes; real
#: graded qrels use a handful of levels.
MAX_LEVEL = 1_000_000


def _bounded_levels(value: Array, line: Array, source: str) -> None:
    big = np.flatnonzero(np.abs(value) > MAX_LEVEL)
    if big.size:
        i = int(big[0])
        raise UserError(
            f"line {int(line[i])}: field 'rel' is {int(value[i])}; expected a relevance level "
            f"between -{MAX_LEVEL} and {MAX_LEVEL}",
            source=source,
        )


def read_table(path: str | Path, *, run: bool) -> TrecTable:
    """Read a qrels (``run=False``) or run file into a :class:`TrecTable`, or a
    :class:`UserError` (see the module docstring).

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "r.txt")
    ...     _ = open(p, "w").write("2 Q0 a 1 0.5 x\\n1 Q0 b 2 -1e-3 y\\n")
    ...     t = read_table(p, run=True)
    >>> t.qids, t.value.tolist(), t.tag
    (['1', '2'], [0.5, -0.001], 'y')
    """
    what = (
        "a TREC run (qid iter docno rank score tag)" if run else "TREC qrels (qid iter docno rel)"
    )
    names = RUN_FIELDS if run else QRELS_FIELDS
    source, data = _read_bytes(path, what)
    out = trec_scan.scan(data, run, MAX_LINE_BYTES)
    group, gstart, glen, dstart, dlen, value, line, slow, info = out
    if info[2]:
        _scan_error(info, source, what, names)
    n, groups = int(info[0]), int(info[1])
    if info[7]:
        _check_utf8(data, source, what)
    if n == 0:
        empty = "retrieved document" if run else "judgement"
        raise UserError(f"holds no {empty}; expected {what} lines", source=source)
    value = value[:n]
    if run:
        _slow_scores(data, value, slow[:n], source)
    else:
        _bounded_levels(value, line[:n], source)
    # No temporary the size of the file or of its records beyond what the table keeps: the
    # qids are copied one group (a run of lines of one qid) at a time, and the records are
    # counted per group (``group`` ascends), so memory stays near trec_eval's.
    spans = zip(gstart[:groups].tolist(), glen[:groups].tolist(), strict=True)
    names_of = [data[s : s + ln].tobytes() for s, ln in spans]
    unique = sorted(set(names_of))
    rank = {q: i for i, q in enumerate(unique)}
    group_q = np.array([rank[q] for q in names_of], np.int64)
    first = np.searchsorted(group[:n], np.arange(groups, dtype=np.int32))
    counts = np.zeros(len(unique), np.int64)
    np.add.at(counts, group_q, np.diff(np.append(first, n)))
    stop = np.cumsum(counts)
    start = stop - counts
    if groups == len(unique) and np.all(group_q == np.arange(groups)):
        order = np.arange(n, dtype=np.int64)
    else:
        order = np.argsort(group_q[group[:n]], kind="stable")
    twice = trec_scan.sort_by_docno(data, dstart, dlen, order, start, stop)
    if twice >= 0:
        docno = data[dstart[twice] : dstart[twice] + dlen[twice]].tobytes()
        qid = unique[int(group_q[group[twice]])]
        done = "retrieved" if run else "judged"
        raise UserError(
            f"line {int(line[twice])}: docno {docno.decode('utf-8')[:80]!r} is {done} twice "
            f"for qid {qid.decode('utf-8')[:80]!r}; expected one line per document and query",
            source=source,
        )
    tag = data[info[5] : info[5] + info[6]].tobytes().decode("utf-8") if run else ""
    return TrecTable(
        data=data,
        doc_start=dstart[:n],
        doc_len=dlen[:n],
        value=value,
        line=line[:n],
        qids=[q.decode("utf-8") for q in unique],
        start=start,
        stop=stop,
        order=order,
        tag=tag,
    )


def _as_dicts(table: TrecTable) -> dict[str, dict[str, float]]:
    raw = table.data.tobytes()
    out: dict[str, dict[str, float]] = {}
    for i, qid in enumerate(table.qids):
        records = range(int(table.start[i]), int(table.stop[i]))
        query: dict[str, float] = {}
        for r in records:
            k = int(table.order[r])
            s = int(table.doc_start[k])
            query[raw[s : s + int(table.doc_len[k])].decode("utf-8")] = float(table.value[k])
        out[qid] = query
    return out


def load_qrels(path: str | Path) -> Qrels:
    """Read a qrels file (see the module docstring) as dictionaries, or a :class:`UserError`.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "q.txt")
    ...     _ = open(p, "w").write("# judged\\n1 0 a 2\\n1 0 b 0\\n2 0 a -1\\n")
    ...     load_qrels(p).judged
    {'1': {'a': 2, 'b': 0}, '2': {'a': -1}}
    """
    table = read_table(path, run=False)
    judged = {q: {d: int(v) for d, v in docs.items()} for q, docs in _as_dicts(table).items()}
    return Qrels(judged)


def load_run(path: str | Path) -> Run:
    """Read a TREC run file (see the module docstring) as dictionaries, or a
    :class:`UserError`.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "r.txt")
    ...     _ = open(p, "w").write("1 Q0 a 1 0.5 bm25\\n1 Q0 b 2 -1e-3 bm25\\n")
    ...     load_run(p)
    Run(run_id='bm25', scores={'1': {'a': 0.5, 'b': -0.001}})
    """
    table = read_table(path, run=True)
    return Run(table.tag, _as_dicts(table))


def table_from_dicts(
    queries: dict[str, dict[str, float]] | dict[str, dict[str, int]], tag: str = ""
) -> TrecTable:
    """A :class:`TrecTable` of in-memory judgements or scores (docnos joined in one buffer).

    >>> table_from_dicts({"2": {"a": 1.0}, "1": {"bb": 0.5}}).qids
    ['1', '2']
    """
    qids = sorted(queries, key=lambda q: q.encode("utf-8"))
    docnos: list[str] = []
    values: list[float] | list[int] = []
    counts: list[int] = []
    for qid in qids:  # whole queries at a time: no Python step per docno beyond the joins
        judged = queries[qid]
        counts.append(len(judged))
        docnos.extend(judged)
        values.extend(judged.values())  # type: ignore[arg-type]
    text = "".join(docnos)
    if text.isascii():  # one byte per character: the lengths are the strings'
        raw = text.encode("ascii")
        lengths = np.fromiter(map(len, docnos), np.int32, len(docnos))
    else:
        encoded = [d.encode("utf-8") for d in docnos]
        raw = b"".join(encoded)
        lengths = np.fromiter(map(len, encoded), np.int32, len(encoded))
    data = np.frombuffer(raw or b" ", np.uint8)
    stop = np.cumsum(np.array(counts, np.int64))
    start = stop - np.array(counts, np.int64)
    doc_len = lengths
    doc_start = np.cumsum(lengths, dtype=np.int64) - lengths
    order = np.arange(len(values), dtype=np.int64)
    trec_scan.sort_by_docno(data, doc_start, doc_len, order, start, stop)
    return TrecTable(
        data=data,
        doc_start=doc_start,
        doc_len=doc_len,
        value=np.array(values, np.float64),  # each number as float() reads it
        line=np.arange(1, len(values) + 1, dtype=np.int32),
        qids=qids,
        start=start,
        stop=stop,
        order=order,
        tag=tag,
    )

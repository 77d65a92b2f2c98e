"""TREC relevance judgements (qrels) and run files, as trec_eval reads them.

- **qrels**: one judgement a line, ``qid iter docno rel`` separated by blanks or tabs: ``iter``
  is ignored (conventionally ``0``), ``rel`` an integer relevance level (a negative level means
  "in the pool but not judged", as in trec_eval: neither relevant nor counted).
- **run**: one retrieved document a line, ``qid iter docno rank score tag``: ``iter`` (``Q0``)
  and ``rank`` are ignored for ordering, as trec_eval does (it ranks by score, then docno), but
  ``rank`` must be an integer; ``score`` a finite decimal number; ``tag`` the run's name.
  Fields after the tag are ignored: trec_eval's format reserves them "for future expansion"
  (its own test run ``results.trunc`` has them); fewer than six fields is an error.

Lines that are empty or start with ``#`` are comments (trec_eval 10 reads its test files with
comments the same way). Everything else is strict: a wrong number of fields, a non-integer
level or rank, a score that is not a finite number (NaN has no place in an order), a docno
judged or retrieved twice for one query, a file with no line, a file that is not UTF-8 text
(a binary file), or a line longer than :data:`MAX_LINE_BYTES` (read in bounded pieces, never
whole) is one :class:`UserError` naming the file, the line number and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file

#: The longest line read: real qrels and run lines are well under 200 bytes; a longer one is
#: a wrong file, refused after reading at most this many bytes of it.
MAX_LINE_BYTES = 1 << 16

QRELS_FIELDS = ("qid", "iter", "docno", "rel")
RUN_FIELDS = ("qid", "iter", "docno", "rank", "score", "tag")


@dataclass(frozen=True)
class Qrels:
    """Judgements per query: ``judged[qid][docno]`` is the relevance level."""

    judged: dict[str, dict[str, int]]


@dataclass(frozen=True)
class Run:
    """Retrieved documents per query in file order: ``scores[qid][docno]`` is the score;
    ``run_id`` is the tag of the first line (trec_eval's ``runid``)."""

    run_id: str
    scores: dict[str, dict[str, float]]


def _lines(f: BinaryIO, source: Path, what: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-comment line, each line read in bounded pieces."""
    number = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise UserError(
                f"line {number} is longer than {MAX_LINE_BYTES} bytes; expected {what} lines",
                source=source,
            )
        if b"\0" in raw:
            raise UserError(
                f"line {number} holds a NUL byte; expected {what} (text, not a binary file)",
                source=source,
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(
                f"line {number} is not UTF-8 text ({exc.reason}); expected {what}",
                source=source,
            ) from None
        fields = text.split()
        if not fields or fields[0].startswith("#"):
            continue
        yield number, fields


def _fields(
    fields: list[str],
    names: tuple[str, ...],
    number: int,
    source: Path,
    example: str,
    *,
    more: bool = False,
) -> None:
    if len(fields) < len(names) or (len(fields) > len(names) and not more):
        raise UserError(
            f"line {number} has {len(fields)} fields; expected {len(names)}"
            f"{' or more' if more else ''} "
            f"({' '.join(names)}, e.g. '{example}')",
            source=source,
        )


#: The most digits of an integer field: a C ``long`` (trec_eval's ``atol``) holds every
#: integer of 18 digits; a longer one is refused rather than saturated.
MAX_INT_DIGITS = 18
_INT = re.compile(rf"[+-]?[0-9]{{1,{MAX_INT_DIGITS}}}")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NOT_FINITE = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def ascii_number(text: str, *, integer: bool) -> int | float | None:
    """A field read as a number in trec_eval's ASCII syntax, or None when it is not one:
    an optional sign and ASCII digits (at most :data:`MAX_INT_DIGITS`), or a decimal with an
    optional exponent. Python's ``int``/``float`` also take ``1_0`` (10) and other scripts'
    digits (Arabic-Indic ``١`` is 1), where trec_eval's ``atol``/``atof`` read 1 and 0:
    such a field is refused, never read as another number.

    >>> ascii_number("-12", integer=True), ascii_number("2.5e-1", integer=False)
    (-12, 0.25)
    >>> [ascii_number(t, integer=True) for t in ("1_0", "\u0661", "1" * 19, "0.5")]
    [None, None, None, None]
    """
    if integer:
        return int(text) if _INT.fullmatch(text) else None
    return float(text) if _DECIMAL.fullmatch(text) else None


def _integer(value: str, field: str, number: int, source: Path) -> int:
    read = ascii_number(value, integer=True)
    if read is None:
        raise UserError(
            f"line {number}: field '{field}' is {value[:40]!r}; expected an integer (ASCII "
            f"digits, at most {MAX_INT_DIGITS}, as trec_eval's atol reads them)",
            source=source,
        )
    return int(read)


def _score(value: str, number: int, source: Path) -> float:
    read = ascii_number(value, integer=False)
    score = math.nan if read is None else float(read)
    kind = "not finite" if read is not None or _NOT_FINITE.fullmatch(value) else "not a number"
    if not math.isfinite(score):
        raise UserError(
            f"line {number}: field 'score' is {value[:40]!r} ({kind}); expected a finite "
            "decimal number (ASCII, as trec_eval's atof reads it)",
            source=source,
        )
    return score


def _open(path: str | Path, what: str) -> tuple[Path, BinaryIO]:
    source = Path(path)
    check_regular_file(source, what=what)
    try:
        return source, open(source, "rb")  # closed by the caller's with
    except OSError as exc:
        raise UserError(
            f"cannot be read ({exc.strerror}); expected {what}", source=source
        ) from None


def load_qrels(path: str | Path) -> Qrels:
    """Read a qrels file (see the module docstring), or a :class:`UserError`.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "q.txt")
    ...     _ = open(p, "w").write("# judged\\n1 0 a 2\\n1 0 b 0\\n2 0 a -1\\n")
    ...     load_qrels(p).judged
    {'1': {'a': 2, 'b': 0}, '2': {'a': -1}}
    """
    what = "TREC qrels (qid iter docno rel)"
    source, f = _open(path, what)
    judged: dict[str, dict[str, int]] = {}
    with f:
        for number, fields in _lines(f, source, what):
            _fields(fields, QRELS_FIELDS, number, source, "301 0 FR940202-2-00150 1")
            qid, _, docno, rel = fields
            query = judged.setdefault(qid, {})
            if docno in query:
                raise UserError(
                    f"line {number}: docno {docno[:80]!r} is judged twice for qid "
                    f"{qid[:80]!r}; expected one judgement per document and query",
                    source=source,
                )
            query[docno] = _integer(rel, "rel", number, source)
    if not judged:
        raise UserError(f"holds no judgement; expected {what} lines", source=source)
    return Qrels(judged)


def load_run(path: str | Path) -> Run:
    """Read a TREC run file (see the module docstring), or a :class:`UserError`.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "r.txt")
    ...     _ = open(p, "w").write("1 Q0 a 1 0.5 bm25\\n1 Q0 b 2 -1e-3 bm25\\n")
    ...     load_run(p)
    Run(run_id='bm25', scores={'1': {'a': 0.5, 'b': -0.001}})
    """
    what = "a TREC run (qid iter docno rank score tag)"
    source, f = _open(path, what)
    scores: dict[str, dict[str, float]] = {}
    run_id: str | None = None
    with f:
        for number, fields in _lines(f, source, what):
            _fields(
                fields, RUN_FIELDS, number, source, "301 Q0 FR940202-2-00150 1 2.13 bm25", more=True
            )
            qid, _, docno, rank, score, tag = fields[:6]
            _integer(rank, "rank", number, source)
            query = scores.setdefault(qid, {})
            if docno in query:
                raise UserError(
                    f"line {number}: docno {docno[:80]!r} is retrieved twice for qid "
                    f"{qid[:80]!r}; expected each document at most once per query",
                    source=source,
                )
            query[docno] = _score(score, number, source)
            run_id = tag if run_id is None else run_id
    if run_id is None:
        raise UserError(f"holds no retrieved document; expected {what} lines", source=source)
    return Run(run_id, scores)

"""trec_eval's other judgement formats (``-R``): preferences and judgement groups.

- **prefs** (``-R prefs``): ``qid jg jsg docno level``: a judgement group ``jg`` (one user's
  information need) holds sub-groups ``jsg``; inside a sub-group every document is preferred
  to every document with a lower ``level`` (read as C's ``atof``; ``0`` means "not
  relevant"). See :mod:`audiorepro.metrics.trec_prefs` for what the preferences are.
- **qrels_prefs** (``-R qrels_prefs``): ordinary qrels lines ``qid jg docno level`` read as
  preferences: the second column (qrels' ``iter``, usually ``0``) is the judgement group, each
  group one sub-group, the level read by ``atof``.
- **qrels_jg** (``-R qrels_jg``): qrels lines ``qid jg docno level`` where the second column
  names a judgement group: each group is a qrels of its own (the level read by ``atol``; a
  docno judged twice in one group of one query is an error).

As in the qrels reader (:mod:`audiorepro.formats.trec`): fields are separated by C's
``isspace`` bytes, lines that are empty or start with ``#`` are comments (trec_eval 10 skips
a ``#`` line and stops on an empty one), and a line with another number of fields, a file with
no judgement or one that is not UTF-8 is one :class:`UserError` naming the file and the line.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, TypeVar

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file

#: As :data:`audiorepro.formats.trec.MAX_LEVEL` (the largest level read, either sign).
MAX_LEVEL = 1_000_000

T = TypeVar("T")

PREFS_FIELDS = ("qid", "jg", "jsg", "docno", "level")
QRELS_JG_FIELDS = ("qid", "jg", "docno", "level")


class PrefJudgement(NamedTuple):
    """One preference line of a query: judgement group, sub-group, docno and level."""

    jg: str
    jsg: str
    docno: str
    level: float


#: Characters ``str.split`` takes for white space that C's ``isspace`` (and ``bytes.split``)
#: does not: where a file has none of them, splitting its decoded text is splitting its bytes.
_NOT_C_SPACE = re.compile(
    "[\\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
)


def _text(path: str | Path, what: str) -> str:
    """The whole of ``path`` (``-``: standard input), decoded as strict UTF-8."""
    if str(path) == "-":
        data = sys.stdin.buffer.read()
    else:
        check_regular_file(Path(path), what=what)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise UserError(f"cannot be read ({exc.strerror}); expected {what}",
                            source=path) from None  # fmt: skip
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"is not UTF-8 text (byte {exc.start}); expected {what}",
                        source=path) from None  # fmt: skip


def _split(text: str) -> Callable[[str], list[str]]:
    """The field splitter for ``text``'s lines: ``str.split`` where it is C's (no white space
    beyond ASCII's), else through the bytes (split by ``isspace`` bytes, then decoded)."""
    if not _NOT_C_SPACE.search(text):
        return str.split
    return lambda line: [f.decode("utf-8") for f in line.encode("utf-8").split()]


def _checked(
    path: str | Path, names: tuple[str, ...], what: str
) -> Iterator[tuple[int, list[str]]]:
    """Each data line's (line number, fields), comments and empty lines left out; a line with
    another number of fields is an error. Texts that repeat (qids, groups, levels) are kept
    once (the docno, unique, is not looked up)."""
    text = _text(path, what)
    split = _split(text)
    seen: dict[str, str] = {}
    keep = seen.setdefault
    width = len(names)
    found = False
    for number, line in enumerate(text.split("\n"), 1):
        fields = split(line)
        if not fields or fields[0][0] == "#":
            continue
        found = True
        if len(fields) != width:
            raise UserError(
                f"line {number} has {len(fields)} fields; expected {width} ({' '.join(names)})",
                source=path,
            )
        head = fields[:-2]
        yield number, [*map(keep, head, head), fields[-2], keep(fields[-1], fields[-1])]
    if not found:
        raise UserError(f"holds no judgement; expected {what} lines", source=path)


def read_prefs(
    path: str | Path, *, qrels_form: bool = False, number: Callable[[str], float] = float
) -> dict[str, list[PrefJudgement]]:
    """The preference judgements of every query (``-R prefs``; ``qrels_form``: ``-R
    qrels_prefs``, each qrels ``iter`` a judgement group of one sub-group ``0``), qids in
    byte order, each query's lines in file order; ``number`` reads a level (trec-eval passes
    C's ``atof``, :func:`audiorepro.metrics.trec.c_atof`).

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "prefs")
    ...     _ = open(p, "w").write("# user 1\\nq1 u1 s1 a 3\\nq1 u1 s1 b 0.5\\n")
    ...     read_prefs(p)
    {'q1': [PrefJudgement(jg='u1', jsg='s1', docno='a', level=3.0), \
PrefJudgement(jg='u1', jsg='s1', docno='b', level=0.5)]}
    """
    level = _Memo(number)
    out: dict[str, list[PrefJudgement]] = {}
    if qrels_form:
        what = "TREC qrels read as preferences (qid jg docno level)"
        for _, f in _checked(path, QRELS_JG_FIELDS, what):
            out.setdefault(f[0], []).append(PrefJudgement(f[1], "0", f[2], level[f[3]]))
    else:
        what = "trec_eval preferences (qid jg jsg docno level)"
        for _, f in _checked(path, PREFS_FIELDS, what):
            out.setdefault(f[0], []).append(PrefJudgement(f[1], f[2], f[3], level[f[4]]))
    return {q: out[q] for q in sorted(out)}  # decoded UTF-8: code point order is byte order


class _Memo(dict[str, T]):
    """``number`` read once per distinct text (a judgement file repeats a few levels): a
    dictionary, so that a level seen before costs one lookup."""

    def __init__(self, number: Callable[[str], T]) -> None:
        super().__init__()
        self.number = number

    def __missing__(self, text: str) -> T:
        value = self[text] = self.number(text)
        return value


def read_qrels_jg(
    path: str | Path, *, number: Callable[[str], int] = int
) -> dict[str, dict[str, dict[str, int]]]:
    """Judgement groups (``-R qrels_jg``): ``{qid: {jg: {docno: level}}}``, qids and groups
    in byte order; ``number`` reads a level (trec-eval passes C's ``atol``), at most
    :data:`MAX_LEVEL` either side as in a qrels file.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "qrels")
    ...     _ = open(p, "w").write("1 b x 1\\n1 a x 0\\n1 a y 2\\n")
    ...     read_qrels_jg(p)
    {'1': {'a': {'x': 0, 'y': 2}, 'b': {'x': 1}}}
    """
    what = "TREC qrels with judgement groups (qid jg docno level)"
    levels = _Memo(number)
    groups: dict[str, dict[str, dict[str, int]]] = {}
    twice = None  # the first docno judged twice, reported once every line's fields are checked
    for line, (qid, jg, docno, text) in _checked(path, QRELS_JG_FIELDS, what):
        judged = groups.setdefault(qid, {}).setdefault(jg, {})
        if docno in judged and twice is None:
            twice = (line, qid, jg, docno)
        value = judged[docno] = levels[text]
        if abs(value) > MAX_LEVEL:  # per-level counts: 10**11 levels would ask for terabytes
            raise UserError(
                f"line {line}: field 'rel' is {value}; expected a relevance level between "
                f"-{MAX_LEVEL} and {MAX_LEVEL}",
                source=path,
            )
    if twice is not None:
        line, qid, jg, docno = twice
        raise UserError(
            f"line {line}: docno {docno[:80]!r} is judged twice for qid {qid[:80]!r} in "
            f"judgement group {jg[:80]!r}; expected one line per document, group and query",
            source=path,
        )

    return {q: {g: groups[q][g] for g in _byte_order(groups[q])} for q in _byte_order(groups)}


def _byte_order(
    keys: dict[str, dict[str, int]] | dict[str, dict[str, dict[str, int]]],
) -> list[str]:
    return sorted(keys)  # decoded UTF-8 (strict): code point order is byte order

"""Speaker-verification trial lists: which pairs of clips are compared, and whether the two
clips of each pair are of one speaker, in any of three published forms, read as they are.

The kit's CSV, with a header row and one trial per row::

    enrollment,test,target
    spk1_01.wav,spk1_02.wav,1
    spk1_01.wav,spk2_01.wav,0

VoxCeleb's lists (``veri_test2.txt``, ``list_test_all2.txt``, ``list_test_hard2.txt``): one
trial per line, the label first (``1`` one speaker, ``0`` not), fields split by white space::

    1 id10270/x6uYqmx31kE/00001.wav id10270/8jEAjG6SegY/00008.wav
    0 id10270/x6uYqmx31kE/00001.wav id10300/ize_eiCFEg0/00003.wav

NIST-style keys (SRE): ``model segment target|nontarget`` per line, split by white space::

    spk1_01.wav spk1_02.wav target
    spk1_01.wav spk2_01.wav nontarget

The form is told by the whole first line that is not empty (:func:`sniff_format`): a CSV
header; three fields with ``target``/``nontarget`` last (NIST, whatever the model id, ``0`` and
``1`` included) or else ``0``/``1`` first (VoxCeleb); every later line must be in the same
form. ``enrollment`` (a NIST model) and ``test`` name clips as a
dump's ``audio_ids`` keep them (VoxCeleb's relative paths, as written; a NIST model is one
clip). Refused, each as one line naming the file and the key (``row 7.test``, ``target``),
exit 2: a trial of a clip with itself, a pair listed twice (in either order, whatever the
labels), a clip the embeddings lack (:func:`check_clips`), a label outside the form's two, a
line of another form, and a list without both target and non-target trials (the equal error
rate has no value then). Empty lines are skipped.

>>> t = parse_trials("enrollment,test,target\\na.wav,b.wav,1\\na.wav,c.wav,0\\n", source="t.csv")
>>> t.enrollment, t.test, t.target.tolist(), t.format
(('a.wav', 'a.wav'), ('b.wav', 'c.wav'), [True, False], 'csv')
>>> t.clips()
('a.wav', 'b.wav', 'c.wav')
>>> v = parse_trials("1 id1/a/1.wav id1/b/2.wav\\n0 id1/a/1.wav id2/c/3.wav\\n", source="veri.txt")
>>> v.test, v.target.tolist(), v.format
(('id1/b/2.wav', 'id2/c/3.wav'), [True, False], 'voxceleb')
>>> n = parse_trials("m1 s1 target\\nm1 s2 nontarget\\n", source="key")
>>> n.enrollment, n.target.tolist(), n.format
(('m1', 'm1'), [True, False], 'nist')
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.io import read_text

COLUMNS = ("enrollment", "test", "target")
HEADER = ",".join(COLUMNS)
#: ``target`` values: 1 a target trial (one speaker), 0 a non-target trial.
TARGET_VALUES = {"1": True, "0": False}
#: Each form's labels, and what a message says it expects.
LABELS: dict[str, tuple[dict[str, bool], str]] = {
    "csv": (TARGET_VALUES, "1 (one speaker: a target trial) or 0 (a non-target trial)"),
    "voxceleb": (TARGET_VALUES, "1 (one speaker: a target trial) or 0 (a non-target trial)"),
    "nist": ({"target": True, "nontarget": False}, "target or nontarget"),
}
FORMATS = tuple(LABELS)
#: One form per line for messages.
EXPECTED_FORMS = (
    f"a CSV header {HEADER}, a VoxCeleb line '1 a.wav b.wav' or a NIST key line "
    "'model segment target|nontarget'"
)
#: One trial as read: its line number, enrollment, test and label as written.
Row = tuple[int, str, str, str]


@dataclass(frozen=True)
class Trials:
    """A trial list as read: the clips of each trial and whether it is a target trial."""

    enrollment: tuple[str, ...]
    test: tuple[str, ...]
    target: npt.NDArray[np.bool_]
    source: str
    #: The file row of each trial (for messages about a trial).
    rows: tuple[int, ...] = ()
    #: The form it was read in: ``csv``, ``voxceleb`` or ``nist``.
    format: str = "csv"

    def clips(self) -> tuple[str, ...]:
        """Every clip a trial names, sorted."""
        return tuple(sorted(set(self.enrollment) | set(self.test)))

    def indices(self, ids: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Each trial's two clips as row indices into ``ids`` (a dump's ``audio_ids``); a clip
        that ``ids`` lacks is one line (:func:`check_clips` says it first)."""
        check_clips(self, ids, within="the embeddings")
        at = {clip: i for i, clip in enumerate(ids)}
        i = np.fromiter((at[c] for c in self.enrollment), dtype=np.int64, count=len(self.test))
        j = np.fromiter((at[c] for c in self.test), dtype=np.int64, count=len(self.test))
        return i, j


def check_clips(trials: Trials, clips: Collection[str], *, within: str) -> None:
    """Every clip a trial names is one of ``clips`` (those of ``within``: an audio folder, a
    dump), or one line naming the trial list, the row and the clip."""
    known = set(clips)
    if known.issuperset(trials.enrollment) and known.issuperset(trials.test):
        return  # the common case at C speed; the loop below finds the row to name
    for n, row in enumerate(trials.rows or range(2, 2 + len(trials.test))):
        for column, names in (("enrollment", trials.enrollment), ("test", trials.test)):
            if names[n] not in known:
                raise UserError(
                    f"names clip {names[n]!r}, which is not among the {len(known)} clips of "
                    f"{within}; expected the file name of one of them",
                    source=trials.source,
                    key=f"row {row}.{column}",
                )


def sniff_format(text: str, *, source: str) -> str:
    """The form of a trial list (module docstring) from its first line that is not empty.

    >>> sniff_format("enrollment,test,target\\n", source="t"), sniff_format("0 a b\\n", source="t")
    ('csv', 'voxceleb')
    >>> sniff_format("1 seg1 target\\n", source="t")  # a NIST key whose first model is 1
    'nist'
    """
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if "," in line:  # a CSV header (its columns are checked next)
            return "csv"
        # The whole line's shape: a NIST key's last field is its label word, whatever its
        # model id (``0`` and ``1`` are ids SRE keys use); a VoxCeleb line's label is first
        # and its last field a clip. Deciding by the first field alone read such a key as a
        # VoxCeleb list with the label words as clip names.
        if len(fields) == 3 and fields[2] in LABELS["nist"][0]:
            return "nist"
        if len(fields) == 3 and fields[0] in TARGET_VALUES:
            return "voxceleb"
        raise UserError(f"is no trial list: its first line is {line[:80]!r}; expected "
                        + EXPECTED_FORMS, source=source, key="row 1")  # fmt: skip
    raise UserError(f"is empty; expected {EXPECTED_FORMS}", source=source)


def _csv_rows(text: str, source: str) -> list[Row]:
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise UserError(f"is not valid CSV ({exc})", source=source, key="line") from None
    first = next(n for n, row in enumerate(rows) if any(cell.strip() for cell in row))
    header = [h.strip() for h in rows[first]]
    for column in COLUMNS:
        if column not in header:
            raise UserError(
                f"lacks column {column!r}; expected a header {HEADER}", source=source, key="header"
            )
    if len(set(header)) != len(header):
        raise UserError("repeats a column name", source=source, key="header")
    at = [header.index(c) for c in COLUMNS]
    out: list[Row] = []
    for n, row in enumerate(rows[first + 1 :], start=first + 2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise UserError(
                f"has {len(row)} fields; expected {len(header)} as in the header",
                source=source,
                key=f"row {n}",
            )
        out.append((n, row[at[0]].strip(), row[at[1]].strip(), row[at[2]].strip()))
    return out


def _spaced_rows(text: str, source: str, form: str) -> list[Row]:
    """VoxCeleb (``label enrollment test``) or NIST (``model segment label``) lines."""
    out: list[Row] = []
    for n, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3 or "," in line:
            example = "'1 a.wav b.wav'" if form == "voxceleb" else "'model segment target'"
            raise UserError(
                f"has {len(fields)} fields; expected three as the first line ({form}: "
                f"{example})", source=source, key=f"row {n}",
            )  # fmt: skip
        label, a, b = fields if form == "voxceleb" else (fields[2], fields[0], fields[1])
        out.append((n, a, b, label))
    return out


def parse_trials(text: str, *, source: str) -> Trials:
    """A trial list (module docstring) from its text, in the form its first line shows."""
    text = text.removeprefix("\ufeff")
    form = sniff_format(text, source=source)
    rows = _csv_rows(text, source) if form == "csv" else _spaced_rows(text, source, form)
    labels, expected = LABELS[form]
    enrollment: list[str] = []
    test: list[str] = []
    target: list[bool] = []
    numbers: list[int] = []
    seen: dict[frozenset[str], int] = {}
    for n, a, b, flag in rows:
        for column, value in (("enrollment", a), ("test", b)):
            if not value:
                raise UserError("is empty; expected a clip's file name", source=source,
                                key=f"row {n}.{column}")  # fmt: skip
        if flag not in labels:
            raise UserError(
                f"is {flag!r}; expected {expected}", source=source, key=f"row {n}.target"
            )
        if a == b:
            raise UserError(
                f"compares clip {a!r} with itself; expected two different clips",
                source=source,
                key=f"row {n}.test",
            )
        pair = frozenset((a, b))
        if pair in seen:
            raise UserError(
                f"repeats the trial of row {seen[pair]} ({a!r} and {b!r}); expected each pair "
                "of clips once",
                source=source,
                key=f"row {n}",
            )
        seen[pair] = n
        enrollment.append(a)
        test.append(b)
        target.append(labels[flag])
        numbers.append(n)
    return _trials(enrollment, test, target, numbers, source, form)


def _trials(
    enrollment: list[str],
    test: list[str],
    target: list[bool],
    numbers: list[int],
    source: str,
    form: str,
) -> Trials:
    flags = np.asarray(target, dtype=bool)
    if not target:
        raise UserError("lists no trials", source=source)
    if flags.all() or not flags.any():
        only, other = ("target", "non-target") if flags.all() else ("non-target", "target")
        label = next(k for k, v in LABELS[form][0].items() if v == (other == "target"))
        raise UserError(
            f"has only {only} trials ({flags.size}); the equal error rate needs target and "
            f"non-target trials: expected at least one {other} trial (target = {label})",
            source=source,
            key="target",
        )
    return Trials(tuple(enrollment), tuple(test), flags, source, tuple(numbers), form)


def read_trials(path: str | Path) -> Trials:
    """A trial list file (module docstring), or one line naming it and what is wrong. A list
    read before (same path, size and modification time) is not parsed again: a study reads
    each list while its file is checked and again per cell, and a VoxCeleb-size list takes
    seconds to parse."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return parse_trials(
            read_text(path, what="a trial list", encoding="utf-8-sig"), source=str(path)
        )
    return _read_once(str(path), p.resolve(), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _read_once(source: str, path: Path, size: int, mtime_ns: int) -> Trials:
    trials = parse_trials(
        read_text(source, what="a trial list", encoding="utf-8-sig"), source=source
    )
    trials.target.setflags(write=False)  # shared by every later read
    return trials

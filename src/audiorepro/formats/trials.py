"""Speaker-verification trial lists: which pairs of clips are compared, and whether the two
clips of each pair are of one speaker.

A trial list is a CSV file with a header row, one trial per row::

    enrollment,test,target
    spk1_01.wav,spk1_02.wav,1
    spk1_01.wav,spk2_01.wav,0

``enrollment`` and ``test`` name clips (file names, as an audio folder lists them and a dump's
``audio_ids`` keep them); ``target`` is ``1`` when both are of one speaker (a target trial)
and ``0`` otherwise (VoxCeleb's ``1 a.wav b.wav`` lines are the same three fields). A trial
compares two different clips, and no pair is listed twice (in either order). The list needs
target and non-target trials: the equal error rate has no value without both. Every problem
is one line naming the file and the key (``row 7.test``, ``target``), exit 2.

>>> t = parse_trials("enrollment,test,target\\na.wav,b.wav,1\\na.wav,c.wav,0\\n", source="t.csv")
>>> t.enrollment, t.test, t.target.tolist()
(('a.wav', 'a.wav'), ('b.wav', 'c.wav'), [True, False])
>>> t.clips()
('a.wav', 'b.wav', 'c.wav')
"""

from __future__ import annotations

import csv
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


@dataclass(frozen=True)
class Trials:
    """A trial list as read: the clips of each trial and whether it is a target trial."""

    enrollment: tuple[str, ...]
    test: tuple[str, ...]
    target: npt.NDArray[np.bool_]
    source: str
    #: The file row of each trial (for messages about a trial).
    rows: tuple[int, ...] = ()

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
    for n, row in enumerate(trials.rows or range(2, 2 + len(trials.test))):
        for column, names in (("enrollment", trials.enrollment), ("test", trials.test)):
            if names[n] not in known:
                raise UserError(
                    f"names clip {names[n]!r}, which is not among the {len(known)} clips of "
                    f"{within}; expected the file name of one of them",
                    source=trials.source,
                    key=f"row {row}.{column}",
                )


def parse_trials(text: str, *, source: str) -> Trials:
    """A trial list (module docstring) from its text."""
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise UserError(f"is not valid CSV ({exc})", source=source, key="line") from None
    if not rows:
        raise UserError(f"is empty; expected a header {HEADER}", source=source)
    header = [h.strip() for h in rows[0]]
    for column in COLUMNS:
        if column not in header:
            raise UserError(
                f"lacks column {column!r}; expected a header {HEADER}", source=source, key="header"
            )
    if len(set(header)) != len(header):
        raise UserError("repeats a column name", source=source, key="header")
    at = {c: header.index(c) for c in COLUMNS}
    enrollment: list[str] = []
    test: list[str] = []
    target: list[bool] = []
    numbers: list[int] = []
    seen: dict[frozenset[str], int] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise UserError(
                f"has {len(row)} fields; expected {len(header)} as in the header",
                source=source,
                key=f"row {n}",
            )
        a, b, flag = (row[at[c]].strip() for c in COLUMNS)
        for column, value in (("enrollment", a), ("test", b)):
            if not value:
                raise UserError("is empty; expected a clip's file name", source=source,
                                key=f"row {n}.{column}")  # fmt: skip
        if flag not in TARGET_VALUES:
            raise UserError(
                f"is {flag!r}; expected 1 (one speaker: a target trial) or 0 (a non-target trial)",
                source=source,
                key=f"row {n}.target",
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
        target.append(TARGET_VALUES[flag])
        numbers.append(n)
    flags = np.asarray(target, dtype=bool)
    if not target:
        raise UserError("lists no trials", source=source)
    if flags.all() or not flags.any():
        only, other = ("target", "non-target") if flags.all() else ("non-target", "target")
        raise UserError(
            f"has only {only} trials ({flags.size}); the equal error rate needs target and "
            f"non-target trials: expected at least one {other} trial (target = "
            f"{0 if other == 'non-target' else 1})",
            source=source,
            key="target",
        )
    return Trials(tuple(enrollment), tuple(test), flags, source, tuple(numbers))


def read_trials(path: str | Path) -> Trials:
    """A trial list file (module docstring), or one line naming it and what is wrong."""
    return parse_trials(
        read_text(path, what="a trial list CSV", encoding="utf-8-sig"), source=str(path)
    )

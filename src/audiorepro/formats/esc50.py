"""ESC-50's metadata file (``meta/esc50.csv``): clips, folds and classes.

The file (karolpiczak/ESC-50, v2.0.0 layout) has a header row
``filename,fold,target,category,esc10,src_file,take`` and one row per clip: ``filename`` a
``.wav`` name in ``audio/``, ``fold`` 1..5 (the dataset's cross-validation folds; clips cut
from the same Freesound recording share a fold), ``target`` the class index 0..49 and
``category`` its name (``chirping_birds``). Only ``filename``, ``fold``, ``target`` and
``category`` are read; the other columns may be anything.

Classes are numbered by ``target`` and named by ``category`` with ``_`` read as a space, the
form laion-clap's zero-shot check uses (its ``ESC50_class_labels_indices_space.json``). Every
problem is one line naming the file, the row (``row 7``, the header is row 1) and the field.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from audiorepro.core.errors import UserError
from audiorepro.core.io import read_text

COLUMNS = ("filename", "fold", "target", "category")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.wav$")
_CATEGORY = re.compile(r"^[a-z0-9][a-z0-9_ ,()-]*$")
FOLDS = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Esc50Meta:
    """Clips in file order with fold and class index; class names indexed by target."""

    filenames: tuple[str, ...]
    folds: tuple[int, ...]
    targets: tuple[int, ...]
    classes: tuple[str, ...]

    def select(self, folds: tuple[int, ...]) -> Esc50Meta:
        """The clips of the given folds (file order kept), every class kept."""
        keep = [i for i, f in enumerate(self.folds) if f in folds]
        return Esc50Meta(
            filenames=tuple(self.filenames[i] for i in keep),
            folds=tuple(self.folds[i] for i in keep),
            targets=tuple(self.targets[i] for i in keep),
            classes=self.classes,
        )


def class_name(category: str) -> str:
    """laion-clap's class name: the category with ``_`` as a space.

    >>> class_name("chirping_birds")
    'chirping birds'
    """
    return category.replace("_", " ")


def parse_esc50_csv(text: str, *, source: str = "<esc50.csv>") -> Esc50Meta:
    """Parse ``meta/esc50.csv``.

    >>> m = parse_esc50_csv("filename,fold,target,category,esc10,src_file,take\\n"
    ...                     "1-100032-A-0.wav,1,0,dog,True,100032,A\\n"
    ...                     "2-1-A-1.wav,2,1,chirping_birds,False,1,A\\n")
    >>> m.filenames, m.folds, m.targets, m.classes
    (('1-100032-A-0.wav', '2-1-A-1.wav'), (1, 2), (0, 1), ('dog', 'chirping birds'))
    """
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        # A field beyond csv's size limit (one huge line), as for caption files.
        raise UserError(f"is not valid CSV ({exc})", source=source, key="line") from None
    if not rows:
        raise UserError("is empty (expected ESC-50's meta/esc50.csv)", source=source)
    header, col = _header(rows[0], source)
    names: list[str] = []
    folds: list[int] = []
    targets: list[int] = []
    category_of: dict[int, str] = {}
    seen: set[str] = set()
    for n, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        name, fold, target = _row(row, f"row {n}", len(header), col, source, seen, category_of)
        names.append(name)
        folds.append(fold)
        targets.append(target)
    if not names:
        raise UserError("lists no clips", source=source)
    n_classes = _check_classes(category_of, source)
    return Esc50Meta(
        filenames=tuple(names),
        folds=tuple(folds),
        targets=tuple(targets),
        classes=tuple(class_name(category_of[t]) for t in range(n_classes)),
    )


def _header(first: list[str], source: str) -> tuple[list[str], dict[str, int]]:
    """The header's names (every column of :data:`COLUMNS`, none twice) and each column's
    index."""
    header = [h.strip() for h in first]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise UserError(
            f"lacks column {missing[0]!r}; expected a header with {', '.join(COLUMNS)}",
            source=source,
            key="header",
        )
    if len(set(header)) != len(header):
        raise UserError("repeats a column name", source=source, key="header")
    return header, {c: header.index(c) for c in COLUMNS}


def _row(
    row: list[str],
    where: str,
    width: int,
    col: dict[str, int],
    source: str,
    seen: set[str],
    category_of: dict[int, str],
) -> tuple[str, int, int]:
    """One clip's row: (file name, fold, target); ``seen`` and ``category_of`` (the class
    names so far) grow with it, so that a repeated clip or a renamed class is refused."""
    if len(row) != width:
        raise UserError(
            f"has {len(row)} fields; expected {width} as in the header", source=source, key=where
        )
    name = row[col["filename"]].strip()
    if not _NAME.match(name):
        raise UserError(
            f"is {name!r}; expected a .wav file name (letters, digits, '.', '_', '-')",
            source=source,
            key=f"{where}.filename",
        )
    if name in seen:
        raise UserError(f"repeats clip {name!r}", source=source, key=f"{where}.filename")
    seen.add(name)
    fold_text = row[col["fold"]].strip()
    if fold_text not in {str(f) for f in FOLDS}:
        raise UserError(
            f"is {fold_text!r}; expected a fold 1..5", source=source, key=f"{where}.fold"
        )
    target_text = row[col["target"]].strip()
    if not target_text.isdigit() or not target_text.isascii() or int(target_text) > 9999:
        raise UserError(
            f"is {target_text!r}; expected a class index 0, 1, ...",
            source=source,
            key=f"{where}.target",
        )
    target = int(target_text)
    category = row[col["category"]].strip()
    if not _CATEGORY.match(category):
        raise UserError(
            f"is {category!r}; expected a class name (lower-case letters, digits, '_')",
            source=source,
            key=f"{where}.category",
        )
    if category_of.setdefault(target, category) != category:
        raise UserError(
            f"names class {target} {category!r}, an earlier row {category_of[target]!r}",
            source=source,
            key=f"{where}.category",
        )
    return name, int(fold_text), target


def _check_classes(category_of: dict[int, str], source: str) -> int:
    """The number of classes: targets 0..n-1 without gaps, each class name once."""
    n_classes = max(category_of) + 1
    gaps = [t for t in range(n_classes) if t not in category_of]
    if gaps:
        raise UserError(
            f"has no clip of class {gaps[0]} (targets must be 0..{n_classes - 1} without gaps)",
            source=source,
            key="target",
        )
    by_name: dict[str, int] = {}
    for t in range(n_classes):
        if by_name.setdefault(category_of[t], t) != t:
            raise UserError(
                f"names classes {by_name[category_of[t]]} and {t} both {category_of[t]!r}",
                source=source,
                key="category",
            )
    return n_classes


def read_esc50_csv(path: str | Path) -> Esc50Meta:
    return parse_esc50_csv(
        read_text(path, what="ESC-50's meta/esc50.csv", encoding="utf-8-sig"), source=str(path)
    )

"""What a linear probe reads: clip embeddings (``audio_embeds`` and ``audio_ids`` of any
dump) and clip labels with folds.

Labels come as a CSV file with a header row, one row per clip:

- ``file_name,label[,fold]``: ``file_name`` matches the dump's ``audio_ids``, ``label`` is
  any non-empty text (classes are the distinct labels in Python's string order, so class
  index 0 is the first; the fold column is named by ``--folds``, ``fold`` by default);
- or ESC-50's ``meta/esc50.csv`` (``filename,fold,target,category,...``): ``filename`` is the
  clip, ``target`` the class index and ``category`` its name, ``fold`` its own five folds.

Every clip of the dump needs a label and every labelled clip must be in the dump (a smaller
set gives other numbers); at least two classes. Every problem is one line naming the file
and the key (a row, a column, an array), exit 2.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.io import read_text
from audiorepro.formats.dump import read_npz
from audiorepro.formats.esc50 import parse_esc50_csv

ID_COLUMN = "file_name"
LABEL_COLUMN = "label"
DEFAULT_FOLD_COLUMN = "fold"


@dataclass(frozen=True)
class ClipEmbeddings:
    """A dump's clip embeddings (float64 copy of its ``audio_embeds``) and ids."""

    embeds: npt.NDArray[np.float64]
    ids: tuple[str, ...]
    dtype: str


@dataclass(frozen=True)
class Labels:
    """Clip -> class index and fold; the class names by index; the folds in order."""

    classes: tuple[str, ...]
    label_of: dict[str, int]
    fold_of: dict[str, str] | None
    folds: tuple[str, ...]


def read_clip_embeddings(path: str | Path) -> ClipEmbeddings:
    """``audio_embeds`` [N, D] (float32 or float64, finite) and ``audio_ids`` [N] (unique
    strings) of an ``.npz`` dump; other keys are not read."""
    name = str(path)
    arrays = read_npz(Path(path), what="an .npz dump")
    for key in ("audio_embeds", "audio_ids"):
        if key not in arrays:
            raise UserError(
                "is missing (a linear probe needs audio_embeds and audio_ids)", source=name, key=key
            )
    emb, ids = arrays["audio_embeds"], arrays["audio_ids"]
    if emb.dtype not in (np.float32, np.float64) or emb.ndim != 2 or 0 in emb.shape:
        raise UserError(
            f"has dtype {emb.dtype} and shape {emb.shape}; expected float32 or "
            "float64 [N, D] with N, D >= 1",
            source=name,
            key="audio_embeds",
        )
    if not bool(np.all(np.isfinite(emb))):
        raise UserError("has a non-finite value", source=name, key="audio_embeds")
    if ids.dtype.kind != "U" or ids.shape != (emb.shape[0],):
        raise UserError(
            f"has dtype {ids.dtype} and shape {ids.shape}; expected str [{emb.shape[0]}]",
            source=name,
            key="audio_ids",
        )
    listed = [str(v) for v in ids.tolist()]
    if len(set(listed)) != len(listed):
        twice = next(v for i, v in enumerate(listed) if v in listed[:i])
        raise UserError(f"repeats clip {twice!r}", source=name, key="audio_ids")
    return ClipEmbeddings(np.asarray(emb, dtype=np.float64), tuple(listed), str(emb.dtype))


#: A fold value read as an integer: ASCII digits with an optional minus (``str.isdigit`` also
#: takes ``²`` and other digits ``int`` refuses, and ``lstrip("-")`` took ``--3``).
_INTEGER = re.compile(r"-?[0-9]+")


def _fold_order(values: set[str]) -> tuple[str, ...]:
    """Folds numerically when every one is an ASCII integer (``-?[0-9]+``), else in string
    order; numerically equal folds (``3``, ``03``) in string order.

    >>> _fold_order({"10", "2", "1"}), _fold_order({"b", "a"})
    (('1', '2', '10'), ('a', 'b'))
    >>> _fold_order({"²", "1"}), _fold_order({"--3", "2"}), _fold_order({"03", "3", "-1"})
    (('1', '²'), ('--3', '2'), ('-1', '03', '3'))
    """
    if all(_INTEGER.fullmatch(v) for v in values):
        return tuple(sorted(values, key=lambda v: (int(v), v)))
    return tuple(sorted(values))


def parse_labels(text: str, *, source: str, fold_column: str | None) -> Labels:
    """A labels CSV (module docstring). ``fold_column``: the column of folds (None: no
    folds; ESC-50's metadata always has its ``fold``)."""
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise UserError(f"is not valid CSV ({exc})", source=source, key="line") from None
    if not rows:
        raise UserError(
            f"is empty; expected a header {ID_COLUMN},{LABEL_COLUMN}[,fold]", source=source
        )
    header = [h.strip() for h in rows[0]]
    if "filename" in header and "category" in header and ID_COLUMN not in header:
        return _esc50(text, source, fold_column)
    for col in (ID_COLUMN, LABEL_COLUMN):
        if col not in header:
            raise UserError(
                f"lacks column {col!r}; expected a header {ID_COLUMN},"
                f"{LABEL_COLUMN}[,fold] (or ESC-50's meta/esc50.csv)",
                source=source,
                key="header",
            )
    if len(set(header)) != len(header):
        raise UserError("repeats a column name", source=source, key="header")
    if fold_column is not None and fold_column not in header:
        raise UserError(
            f"has no fold column {fold_column!r} (columns: {', '.join(header)})",
            source=source,
            key=fold_column,
        )
    at = {c: header.index(c) for c in header}
    names: dict[str, str] = {}
    folds: dict[str, str] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise UserError(
                f"has {len(row)} fields; expected {len(header)} as in the header",
                source=source,
                key=f"row {n}",
            )
        clip, label = row[at[ID_COLUMN]].strip(), row[at[LABEL_COLUMN]].strip()
        for col, value in ((ID_COLUMN, clip), (LABEL_COLUMN, label)):
            if not value:
                raise UserError("is empty", source=source, key=f"row {n}.{col}")
        if clip in names:
            raise UserError(f"repeats clip {clip!r}", source=source, key=f"row {n}.{ID_COLUMN}")
        names[clip] = label
        if fold_column is not None:
            fold = row[at[fold_column]].strip()
            if not fold:
                raise UserError("is empty", source=source, key=f"row {n}.{fold_column}")
            folds[clip] = fold
    if not names:
        raise UserError("lists no clips", source=source)
    classes = tuple(sorted(set(names.values())))
    index = {c: i for i, c in enumerate(classes)}
    return Labels(
        classes=classes,
        label_of={clip: index[label] for clip, label in names.items()},
        fold_of=folds if fold_column is not None else None,
        folds=_fold_order(set(folds.values())) if fold_column is not None else (),
    )


def _esc50(text: str, source: str, fold_column: str | None) -> Labels:
    if fold_column not in (None, DEFAULT_FOLD_COLUMN):
        raise UserError(
            f"is ESC-50's metadata, whose folds are its column 'fold'; expected "
            f"no other fold column (got {fold_column!r})",
            source=source,
            key=fold_column,
        )
    meta = parse_esc50_csv(text, source=source)
    fold_of = {f: str(k) for f, k in zip(meta.filenames, meta.folds, strict=True)}
    return Labels(
        classes=meta.classes,
        label_of=dict(zip(meta.filenames, meta.targets, strict=True)),
        fold_of=fold_of,
        folds=_fold_order(set(fold_of.values())),
    )


def read_labels(path: str | Path, *, fold_column: str | None) -> Labels:
    # utf-8-sig: a CSV saved by Excel or Windows tools starts with a byte-order mark, which
    # would otherwise be part of the first column's name ("\ufefffile_name").
    return parse_labels(
        read_text(path, what="a labels CSV", encoding="utf-8-sig"),
        source=str(path),
        fold_column=fold_column,
    )


@dataclass(frozen=True)
class Aligned:
    """The dump's clips in dump order, with their class index and fold."""

    y: npt.NDArray[np.int64]
    folds: tuple[str, ...]  #: per clip ("" without folds)


def align(labels: Labels, clips: ClipEmbeddings, *, labels_source: str) -> Aligned:
    """Each dump clip's label and fold; a clip without a label, a labelled clip not in the
    dump, or fewer than two classes among the clips is one line naming the labels file."""
    missing = [c for c in clips.ids if c not in labels.label_of]
    if missing:
        raise UserError(
            f"has no row for {len(missing)} clip(s) of the dump (first: "
            f"{missing[0]!r}); every clip needs a label",
            source=labels_source,
            key=ID_COLUMN,
        )
    ids = set(clips.ids)
    extra = [c for c in labels.label_of if c not in ids]
    if extra:
        raise UserError(
            f"labels {len(extra)} clip(s) the dump does not have (first: "
            f"{extra[0]!r}); a smaller set gives other numbers",
            source=labels_source,
            key=ID_COLUMN,
        )
    y = np.array([labels.label_of[c] for c in clips.ids], dtype=np.int64)
    if np.unique(y).size < 2:
        raise UserError(
            f"gives the clips one class ({labels.classes[int(y[0])]!r}); a probe "
            "needs at least two",
            source=labels_source,
            key=LABEL_COLUMN,
        )
    folds = tuple(labels.fold_of[c] for c in clips.ids) if labels.fold_of else ("",) * len(y)
    return Aligned(y, folds)


def as_json_ready(value: Any) -> Any:
    """NumPy scalars as Python numbers (for JSON).

    >>> as_json_ready(np.float64(0.5)), as_json_ready([np.int64(2)])
    (0.5, [2])
    """
    if isinstance(value, list | tuple):
        return [as_json_ready(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value

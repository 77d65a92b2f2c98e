"""``--cells PATTERN`` and ``--device``: a run of part of a study, or on another device,
without editing it. Validated before any work (one line, exit 2); the study that results
carries its :class:`~audiorepro.specs.study.Selection`, which the bundle, the manifest and the
report record."""

from __future__ import annotations

import fnmatch
import re

from typing_extensions import TypedDict

from audiorepro.core.errors import UserError
from audiorepro.specs.study import DEVICE_PATTERN, Selectable, Selection, Study


def check_device(device: str) -> str:
    """``device`` when it is a device a run can use, else one line (before any model loads).

    >>> check_device("cuda:1")
    'cuda:1'
    >>> check_device("meta")
    Traceback (most recent call last):
    ...
    audiorepro.core.errors.UserError: '--device': is 'meta'; expected cpu, cuda or cuda:N
    """
    if not re.fullmatch(DEVICE_PATTERN, device):
        raise UserError(f"is {device!r}; expected cpu, cuda or cuda:N", key="--device")
    return device


def select(study: Study, *, cells: str | None, device: str | None) -> Study:
    """The part of ``study`` whose cell ids match the glob ``cells``, its models on
    ``device``; the study itself when neither is given. A pattern that matches no cell is one
    line listing the cells; a probe study (no cells, no models) takes neither."""
    if cells is None and device is None:
        return study
    if study.kind == "hear":
        raise UserError(
            "is a hear study; --cells and --device apply to retrieval and zero-shot studies "
            "so far (run a part of it as a study of those cells)",
            source=study.source,
        )
    if not isinstance(study, Selectable):
        raise UserError(
            "is a probe study: it has no cells and loads no model; --cells and --device apply "
            "to retrieval and zero-shot studies",
            source=study.source,
        )
    ids = tuple(c.id for c in study.cells)
    ran = tuple(i for i in ids if cells is None or fnmatch.fnmatchcase(i, cells))
    if not ran:
        raise UserError(
            f"matches no cell of {study.source}; expected a glob over its cells: {', '.join(ids)}",
            key="--cells",
        )
    return study.selected(Selection(cells=cells, device=device, ran=ran, of=ids))


class SelectionRecord(TypedDict):
    """A run of part of a study (``--cells``/``--device``) as its bundle records it."""

    cells: str | None
    device: str | None
    #: the ids of the cells that ran, and of every cell of the study
    ran: list[str]
    of: list[str]
    partial: bool


def selection_record(selection: Selection | None) -> SelectionRecord | None:
    """The selection as the bundle and the manifest record it (None: the whole study)."""
    if selection is None:
        return None
    return {
        "cells": selection.cells,
        "device": selection.device,
        "ran": list(selection.ran),
        "of": list(selection.of),
        "partial": selection.ran != selection.of,
    }

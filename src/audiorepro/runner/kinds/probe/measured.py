"""One saved measurements file as a probe study read it (:class:`Measurements`), apart from
the reading (:mod:`audiorepro.runner.kinds.probe.measurements`, its shapes' pydantic models):
a probe run's record between the stages holds it (``records.ProbeRun.documents``), and the
records are read (``diff``, ``verify OUT``, the JSON Schemas) without importing the reading."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audiorepro.formats.keypath import format_path

__all__ = ["Measurements"]


@dataclass(frozen=True)
class Measurements:
    """One saved file, read as it is."""

    #: the split's shape (what the tables read); None for a JSONL file, which has none
    shape: dict[str, Any] | None
    #: the whole parsed document (a JSONL file: the list of its lines)
    document: Any
    #: where the document holds what the shape does not know (keys and indexes)
    unknown: tuple[tuple[int | str, ...], ...]
    #: the file it was read from (named in every problem with a number of it)
    source: str = ""

    def unknown_paths(self) -> list[str]:
        """The unknown locations as key paths (:func:`audiorepro.formats.keypath.format_path`)."""
        return [format_path(self.document, where) or "(the whole file)" for where in self.unknown]

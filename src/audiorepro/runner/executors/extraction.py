"""What the executors ask of a study that extracts: its cells' extractions, as typed records.

A study kind that extracts (``StudyKind.extraction``) describes its cells once, as a
:class:`StudyExtraction`: for every cell, its cache key, whether the cache entry's meta
carries that key, how one shard of it is written (an array task) and how the shards are
joined into the cache entry. The executors (local ``--jobs``, Slurm arrays, ``slurm-template``,
``extract-part``) run any kind through these records: they never ask which kind a study is or
which family its models are (the encoder is behind :mod:`audiorepro.models.embedder`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from audiorepro.core.errors import UserError


@dataclass(frozen=True)
class CellExtraction:
    """One cell's extraction as every executor sees it."""

    cell: str
    #: The cell's cache key now (computed when asked: inputs, weights, code and settings).
    key: Callable[[], str]
    #: Whether the cache entry's meta carries the key (a zero-shot dump's does not: its bytes
    #: are the output folder's; its record alone names it).
    keyed_meta: bool
    #: Write shard ``(i, n)`` of the extraction to ``out``, its meta naming ``key``.
    write_part: Callable[[tuple[int, int], str, Path], None]
    #: Join the finished parts (in shard order) into the cache entry at ``dest``.
    merge: Callable[[list[Path], str, Path], None]


@dataclass(frozen=True)
class StudyExtraction:
    """A study's extractions: its name and file, its cells, and the folders its inputs are
    read from (bound read-only into a container)."""

    name: str
    source: Path
    cells: tuple[CellExtraction, ...]
    read_only: frozenset[Path]

    def cell(self, cell_id: str) -> CellExtraction:
        """The cell with this id, or one line: it is not a cell this study extracts."""
        for cell in self.cells:
            if cell.cell == cell_id:
                return cell
        raise UserError(f"{cell_id!r} is not a cell to extract", source=self.source, key="cell")

    def keys(self) -> dict[str, str]:
        """The cache key of every cell, by cell id."""
        return {c.cell: c.key() for c in self.cells}

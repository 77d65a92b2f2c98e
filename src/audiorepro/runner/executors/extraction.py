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
from audiorepro.models.embedder import require_text_spec
from audiorepro.models.preflight import preflight
from audiorepro.models.registry import load_registry, resolve_spec
from audiorepro.runner.cache import cached_dump, shared_store


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
    #: Whether the cache (``OUT/cache/dumps``) holds this key's entry intact; None: a dump
    #: with texts, checked by :func:`audiorepro.runner.cache.cached_dump` (an audio-only
    #: dump's kind says how its entry is checked).
    cached: Callable[[Path, str], bool] | None = None

    def in_cache(self, cache: Path, key: str) -> bool:
        """Whether the extraction cache ``cache`` holds the entry of ``key`` intact."""
        if self.cached is not None:
            return self.cached(cache, key)
        return cached_dump(cache, key, keyed_meta=self.keyed_meta) is not None


@dataclass(frozen=True)
class ModelUse:
    """A model a study builds: for a cell (None: an identity check), and what needs its text
    tower (None: audio is enough)."""

    cell: str | None
    model: str
    registry: Path | None
    needs_text: str | None


@dataclass(frozen=True)
class StudyExtraction:
    """A study's extractions: its name and file, its cells, the folders its inputs are read
    from (bound read-only into a container) and every model it builds."""

    name: str
    source: Path
    cells: tuple[CellExtraction, ...]
    read_only: frozenset[Path]
    models: tuple[ModelUse, ...] = ()

    def preflight(self, *, only: set[str] | None = None) -> None:
        """The checkpoint preflight (:mod:`audiorepro.models.preflight`) of every model the
        study builds, and the text tower of those whose work needs one, before any work: one
        line and exit 2 before the output folder gets anything. A spec that does not resolve
        here (an unknown name, a hub model not in the cache) is left to its cell, which
        records it. ``only``: just these cells, no identity check (``verify STUDY``). A bad
        ``AUDIOREPRO_EMBEDDING_CACHE`` is one line here too (not a failed cell)."""
        shared_store()
        for use in self.models:
            if only is not None and (use.cell is None or use.cell not in only):
                continue
            registries = [use.registry] if use.registry else []
            try:
                spec = resolve_spec(use.model, load_registry(registries))
            except UserError:
                continue
            preflight(spec)
            if use.needs_text is not None:
                require_text_spec(spec, needed_by=use.needs_text)

    def cell(self, cell_id: str) -> CellExtraction:
        """The cell with this id, or one line: it is not a cell this study extracts."""
        for cell in self.cells:
            if cell.cell == cell_id:
                return cell
        raise UserError(f"{cell_id!r} is not a cell to extract", source=self.source, key="cell")

    def keys(self) -> dict[str, str]:
        """The cache key of every cell, by cell id."""
        return {c.cell: c.key() for c in self.cells}

"""The local executor: extract a cell here, in this process, unless the cache has it; and a
retrieval study's extractions as the executors see them (:func:`retrieval_extraction`)."""

from __future__ import annotations

from pathlib import Path

from audiorepro.formats.dump import Dump, load_dump
from audiorepro.models.extract import merge
from audiorepro.runner.cache import (
    cache_dump_path,
    cached_dump,
    extract_cell,
    extract_key,
    record_entry,
)
from audiorepro.runner.executors.extraction import CellExtraction, StudyExtraction
from audiorepro.specs.study import Cell, RetrievalStudy


def extract_local(cell: Cell, cache: Path) -> Dump:
    """The cell's dump: from the cache, or extracted here into it."""
    key = extract_key(cell)
    cached = cached_dump(cache, key)
    if cached is not None:
        return cached
    path = cache_dump_path(cache, key)
    extract_cell(cell, path, key)
    record_entry(cache, key)
    return load_dump(path)


def _cell_extraction(cell: Cell) -> CellExtraction:
    def write_part(shard: tuple[int, int], key: str, out: Path) -> None:
        extract_cell(cell, out, key, shard)

    def merge_parts(parts: list[Path], key: str, dest: Path) -> None:
        merge(parts, dest)

    return CellExtraction(cell.id, lambda: extract_key(cell), True, write_part, merge_parts)


def retrieval_extraction(study: RetrievalStudy) -> StudyExtraction:
    """Every extraction cell of a retrieval study (a dump-only cell extracts nothing), with
    the folders of its clips, captions and registries."""
    cells = [c for c in study.cells if c.extract is not None]
    read_only = {study.source.parent.resolve()}
    for cell in cells:
        e = cell.extract
        assert e is not None
        read_only |= {e.audio.resolve(), e.captions.resolve().parent}
        if e.registry is not None:
            read_only.add(e.registry.resolve().parent)
    return StudyExtraction(
        study.name, study.source, tuple(map(_cell_extraction, cells)), frozenset(read_only)
    )

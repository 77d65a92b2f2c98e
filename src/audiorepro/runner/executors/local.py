"""The local executor: extract a cell here, in this process, unless the cache has it."""

from __future__ import annotations

from pathlib import Path

from audiorepro.formats.dump import Dump, load_dump
from audiorepro.runner.cache import (
    cache_dump_path,
    cached_dump,
    extract_cell,
    extract_key,
    record_entry,
)
from audiorepro.specs.study import Cell


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

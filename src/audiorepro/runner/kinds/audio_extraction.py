"""An extraction cell that needs audio only (speaker verification, linear probes): every clip of
an audio folder (or list file) embedded by any encoder, a text tower or not, into an audio-only
dump (``extract`` without captions) through the extraction cache, and its Slurm parts.

The kinds whose numbers come from clip embeddings alone extract this way, so that an
audio-only encoder (a HEAR module, a ``py:`` encoder without ``embed_text``, resemblyzer)
runs every path that needs no text: nothing here asks the encoder for a text tower.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from audiorepro.models.extract import merge
from audiorepro.runner.cache import (
    audio_only_key,
    cache_dump_path,
    cached_audio_dump,
    extract_audio_only,
    record_entry,
)
from audiorepro.runner.executors.extraction import CellExtraction, ModelUse
from audiorepro.specs.settings import Settings


@dataclass(frozen=True)
class AudioCell:
    """What an audio-only extraction cell embeds, with which model, how."""

    cell: str
    model: str
    registry: Path | None
    settings: Settings
    device: str
    audio: Path


def audio_cell_key(c: AudioCell) -> str:
    """The extraction cache's key of the cell: the model's part (weights, code, settings,
    device, threads) and every clip of its audio (:func:`.cache.audio_only_key`)."""
    return audio_only_key(c.model, c.registry, c.settings, c.device, c.audio)


def _write(c: AudioCell, out: Path, key: str, shard: tuple[int, int] | None) -> None:
    extract_audio_only(c.model, c.registry, c.settings, c.device, c.audio, out, key, shard)


def cached_audio_cell(c: AudioCell, cache: Path) -> Path:
    """The cell's audio-only dump in the extraction cache, extracted here first when the cache
    lacks it (or holds it damaged)."""
    key = audio_cell_key(c)
    if cached_audio_dump(cache, key) is None:
        _write(c, cache_dump_path(cache, key), key, None)
        record_entry(cache, key)
    return cache_dump_path(cache, key)


def audio_cell_extraction(c: AudioCell) -> CellExtraction:
    """The cell as the executors see it: an array task writes one shard of whole batches
    (``extract --shard``); the parts merge into the dump one process writes."""

    def write(shard: tuple[int, int], key: str, out: Path) -> None:
        _write(c, out, key, shard)

    def join(parts: list[Path], key: str, dest: Path) -> None:
        merge(parts, dest)

    def cached(cache: Path, key: str) -> bool:
        return cached_audio_dump(cache, key) is not None

    return CellExtraction(c.cell, lambda: audio_cell_key(c), True, write, join, cached)


def audio_read_only(cells: Iterable[AudioCell]) -> set[Path]:
    """The folders the cells read (their audio, their registries' folders)."""
    out: set[Path] = set()
    for c in cells:
        out.add(c.audio.resolve())
        if c.registry is not None:
            out.add(c.registry.resolve().parent)
    return out


def audio_models(cells: Iterable[AudioCell]) -> tuple[ModelUse, ...]:
    """The models the cells build, none of which needs a text tower."""
    return tuple(ModelUse(c.cell, c.model, c.registry, None) for c in cells)

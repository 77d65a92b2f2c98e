"""The extraction cache (``OUT/cache/dumps``): one dump per key over everything that decides
its bytes, shared by the local and Slurm executors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.threads import cpu_threads
from audiorepro.formats.captions import list_audio, read_captions
from audiorepro.formats.coverage import record_path
from audiorepro.formats.dump import Dump, load_dump
from audiorepro.models.extract import extract
from audiorepro.models.registry import load_registry, resolve_spec
from audiorepro.specs.study import Cell


def extract_key(cell: Cell) -> str:
    """A cache key over everything that decides an extraction's bytes."""
    assert cell.extract is not None
    e = cell.extract
    registries = [e.registry] if e.registry else []
    spec = resolve_spec(e.model, load_registry(registries))
    audio = list_audio(e.audio)
    caps = read_captions(e.captions)
    listing = [[name, sha256_file(audio[name])] for name in caps.clips if name in audio]
    key = {
        "model": e.model,
        "weights": spec.weights or {"location": spec.location},
        "revision": spec.revision,
        "settings": dict(sorted(e.settings.items())),
        "device": e.device,
        "cpu_threads": cpu_threads(),
        "captions": sha256_file(e.captions),
        "audio": listing,
    }
    record = record_path(e.captions)
    if record.is_file():  # a dataset prepared by fetch: its coverage record is in the dump
        key["dataset"] = sha256_file(record)
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def cache_dump_path(cache: Path, key: str) -> Path:
    """Where the extraction cache (``OUT/cache/dumps``) keeps the dump with this key."""
    return cache / f"{key[:32]}.npz"


def cached_dump(cache: Path, key: str) -> Dump | None:
    """The cached extraction with this key, or None (a damaged entry is never trusted)."""
    path = cache_dump_path(cache, key)
    if not path.is_file():
        return None
    try:
        dump = load_dump(path)
    except UserError:
        return None
    return dump if dump.meta.get("cache_key") == key else None


def extract_cell(cell: Cell, path: Path, key: str, shard: tuple[int, int] | None = None) -> None:
    """Extract a cell's dump (or one shard's part) to ``path``, recording the cache key."""
    assert cell.extract is not None
    e = cell.extract
    spec = resolve_spec(e.model, load_registry([e.registry] if e.registry else []))
    extract(
        spec,
        e.audio,
        e.captions,
        path,
        overrides=e.settings,
        device=e.device,
        shard=shard,
        extra_meta={"cache_key": key},
    )

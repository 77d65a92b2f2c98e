"""The extraction cache (``OUT/cache/dumps``): one dump per key over everything that decides
its bytes, shared by the local and Slurm executors and by retrieval and zero-shot cells
(:func:`audiorepro.runner.kinds.zeroshot.extraction.zeroshot_key`).

Keyed by content: the key covers the SHA-256 of every weight file of the model (a checkpoint
replaced at the same path gets a new key), the encoder's code (a user's module: the SHA-256
of its source and its version, so that changed code is never served the old code's
embeddings; CLAP: its library's version), the settings, the device, the thread count, the
captions and every audio file. Any encoder, asked the same way: the cache never asks which
family a model is. Checked by content: each entry ``<key>.npz`` has a record
``<key>.json`` with the key and the entry's own SHA-256, written after the entry; an entry
whose bytes no longer match its record (rewritten, truncated, half written) is extracted
again.

**One cache across output folders** (:func:`shared_store`): every entry recorded in an
output folder is also kept, under the same key and record, in a per-user store
(``$XDG_CACHE_HOME/audiorepro/embeddings``, else ``~/.cache/audiorepro/embeddings``); an
output folder that lacks an entry takes it from there, hard-linked (copied across file
systems), read-only, into ``OUT/cache/dumps``, so that the folder stays whole without the
store. A store entry is checked against its record (its SHA-256) on every use; a damaged one
is removed and extracted again. ``rm -rf`` of the store clears it;
``AUDIOREPRO_EMBEDDING_CACHE=off`` turns it off (each output folder keeps its own cache).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypedDict, TypeVar

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, json_dumps, read_json
from audiorepro.core.paths import user_cache
from audiorepro.core.threads import cpu_threads
from audiorepro.formats.audio_dump import AudioDump, load_audio_dump
from audiorepro.formats.captions import list_audio, read_captions
from audiorepro.formats.coverage import record_path
from audiorepro.formats.dump import Dump, load_dump
from audiorepro.models.embedder import spec_code, spec_weight_hashes
from audiorepro.models.extract import extract
from audiorepro.models.registry import ModelSpec, load_registry, resolve_spec
from audiorepro.specs.settings import ARCHITECTURE_KEYS, Settings
from audiorepro.specs.study import Cell


def weight_hashes(spec: ModelSpec) -> dict[str, str]:
    """SHA-256 of every file the model is loaded from, by name: the checkpoint file of a
    ``laion:`` spec, every file of a local Hugging Face folder. A hub model is pinned by its
    revision; a registry entry's recorded hashes are checked when it loads, and kept here.
    A user's encoder names its own weight files (:func:`spec_weight_hashes`)."""
    named = spec_weight_hashes(spec)
    if named is not None:
        return named
    hashes = dict(spec.weights)
    location = Path(spec.location)
    if location.is_file():
        hashes[location.name] = sha256_file(location)
    elif location.is_dir():
        for path in sorted(location.rglob("*")):
            if path.is_file():
                hashes[path.relative_to(location).as_posix()] = sha256_file(path)
    return hashes


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
        **model_key(e.model, spec, e.settings, e.device),
        "captions": sha256_file(e.captions),
        "audio": listing,
    }
    record = record_path(e.captions)
    if record.is_file():  # a dataset prepared by fetch: its coverage record is in the dump
        key["dataset"] = sha256_file(record)
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def audio_only_key(
    model: str, registry: Path | None, settings: Settings, device: str, audio: Path
) -> str:
    """The cache key of an audio-only extraction (``extract`` without captions) of every clip
    of ``audio`` (a folder or list file): the model's part (:func:`model_key`: weights, code,
    settings, device, threads) and every clip's name and SHA-256, in the extraction's order.
    For a kind whose cells embed audio only (speaker verification, probes over embeddings)."""
    spec, _ = model_spec(model, registry, settings)
    listing = [[name, sha256_file(path)] for name, path in list_audio(audio).items()]
    key = {"kind": "audio-only", **model_key(model, spec, settings, device), "audio": listing}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def extract_audio_only(
    model: str,
    registry: Path | None,
    settings: Settings,
    device: str,
    audio: Path,
    path: Path,
    key: str,
    shard: tuple[int, int] | None = None,
) -> None:
    """Write the audio-only dump (or one shard's part) of ``audio`` to ``path``, recording
    the cache key (:func:`audio_only_key`); :func:`cached_dump` does not read it (an
    audio-only dump is read with :func:`audiorepro.formats.audio_dump.load_audio_dump`)."""
    spec, overrides = model_spec(model, registry, settings)
    extract(
        spec,
        audio,
        None,
        path,
        overrides=overrides,
        device=device,
        shard=shard,
        extra_meta={"cache_key": key},
    )


def cache_dump_path(cache: Path, key: str) -> Path:
    """Where the extraction cache (``OUT/cache/dumps``) keeps the dump with this key."""
    return cache / f"{key[:32]}.npz"


def entry_record_path(cache: Path, key: str) -> Path:
    """The record of a cache entry: its key and its own SHA-256."""
    return cache / f"{key[:32]}.json"


def record_entry(cache: Path, key: str) -> None:
    """Write the record of the entry just written with this key (after the entry: an entry
    without its record is not trusted), and keep the entry in the per-user store."""
    record = {"cache_key": key, "sha256": sha256_file(cache_dump_path(cache, key))}
    atomic_write_bytes(entry_record_path(cache, key), json_dumps(record).encode())
    publish_entry(cache, key)


class Entry(Protocol):
    """What a cache entry read back gives: its file's SHA-256 and its meta (where a keyed
    entry names its key): a dump, an audio-only dump, a HEAR task's embeddings."""

    @property
    def sha256(self) -> str | None: ...

    @property
    def meta(self) -> Mapping[str, Any]: ...


EntryT = TypeVar("EntryT", bound=Entry)


def _entry_here(
    cache: Path, key: str, load: Callable[[Path], EntryT], keyed_meta: bool
) -> EntryT | None:
    path = cache_dump_path(cache, key)
    record_path = entry_record_path(cache, key)
    if not path.is_file() or not record_path.is_file():
        return None
    try:
        record = read_json(record_path, what="a cache record", max_bytes=1 << 20)
        if not isinstance(record, dict) or record.get("cache_key") != key:
            return None
        dump = load(path)
    except (UserError, OSError, ValueError, RecursionError):
        return None
    if dump.sha256 != record.get("sha256"):
        return None
    if keyed_meta and dump.meta.get("cache_key") != key:
        return None
    return dump


def cached_entry(
    cache: Path, key: str, load: Callable[[Path], EntryT], keyed_meta: bool = True
) -> EntryT | None:
    """The entry of ``key`` in ``cache``, checked (``load`` reads it; a file it refuses, one
    whose SHA-256 is not its record's, or whose meta names another key is no entry); taken
    from the per-user store first where ``cache`` lacks it (or holds it damaged); an intact
    one here is kept in the store too. Any entry type: dumps, audio-only dumps, HEAR task
    embeddings (:mod:`audiorepro.runner.kinds.hear.entry`)."""
    dump = _entry_here(cache, key, load, keyed_meta)
    if dump is None:
        if not take_shared(cache, key):
            return None
        dump = _entry_here(cache, key, load, keyed_meta)
    if dump is not None:
        publish_entry(cache, key, sha256=dump.sha256)
    return dump


def cached_dump(cache: Path, key: str, *, keyed_meta: bool = True) -> Dump | None:
    """The cached extraction with this key, or None: a missing, damaged or rewritten entry
    (bytes that differ from its record) is never trusted, and is extracted again.
    ``keyed_meta=False``: the dump's meta does not carry the key (a zero-shot dump, whose
    bytes are the output folder's); its record alone names it. Taken from the per-user store
    (:func:`shared_store`) where the output folder lacks it."""
    return cached_entry(cache, key, load_dump, keyed_meta)


def cached_audio_dump(cache: Path, key: str) -> AudioDump | None:
    """The cached audio-only extraction with this key, or None (missing, damaged, rewritten:
    extracted again), checked as :func:`cached_dump` checks a dump."""
    return cached_entry(cache, key, load_audio_dump, True)


# ------------------------------------------------------------------ the per-user store

#: The environment variable that turns the per-user store off (``off``); ``on`` or unset: on.
SHARED_CACHE_ENV = "AUDIOREPRO_EMBEDDING_CACHE"


def shared_store() -> Path | None:
    """The per-user store of extraction cache entries (module docstring), or None where
    ``AUDIOREPRO_EMBEDDING_CACHE=off``. Any other value than ``on``/``off`` is one line."""
    value = os.environ.get(SHARED_CACHE_ENV, "").strip().lower()
    if value == "off":
        return None
    if value not in ("", "on"):
        raise UserError(
            f"is {value!r}; expected on or off (the per-user embedding cache)",
            key=SHARED_CACHE_ENV,
        )
    return user_cache("embeddings")


def _place(source: Path, dest: Path) -> None:
    """``source`` at ``dest``, read-only: hard-linked, or copied where a link cannot be made
    (another file system), beside it first and renamed into place (never half there)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        os.unlink(tmp)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.chmod(tmp, 0o444)
        os.replace(tmp, dest)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _record_sha256(record_path: Path, key: str) -> str | None:
    try:
        record = read_json(record_path, what="a cache record", max_bytes=1 << 20)
    except (UserError, OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("cache_key") != key:
        return None
    sha = record.get("sha256")
    return sha if isinstance(sha, str) else None


def _drop(*paths: Path) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def take_shared(cache: Path, key: str) -> bool:
    """Put the store's entry of ``key`` into ``cache`` (entry, then its record), after
    checking its bytes against its record; False where the store is off, lacks it, or holds
    it damaged (then removed there: it is extracted again and stored anew)."""
    store = shared_store()
    if store is None or store.resolve() == cache.resolve():
        return False
    entry, record = cache_dump_path(store, key), entry_record_path(store, key)
    try:
        if not entry.is_file() or not record.is_file():
            return False
        # A link in the store is none of ours: linked into OUT it would stay a link to a file
        # outside (OUT no longer whole), and chmod would follow it. Removed (the link alone).
        if entry.is_symlink() or record.is_symlink():
            _drop(record, entry)
            return False
        if sha256_file(entry) != _record_sha256(record, key):
            _drop(record, entry)
            return False
        _drop(entry_record_path(cache, key))  # the damaged entry here, if any, is replaced
        _place(entry, cache_dump_path(cache, key))
        _place(record, entry_record_path(cache, key))
    except (OSError, UserError):  # a store that cannot be read is no store: the cell is
        # extracted (UserError: another process removed a damaged entry after is_file above)
        return False
    return True


def publish_entry(cache: Path, key: str, *, sha256: str | None = None) -> None:
    """Keep the checked entry of ``key`` in ``cache`` in the per-user store too (entry, then
    record), unless the store holds it already; a store that cannot be written is skipped."""
    store = shared_store()
    if store is None or store.resolve() == cache.resolve():
        return
    entry, record = cache_dump_path(cache, key), entry_record_path(cache, key)
    kept = entry_record_path(store, key)
    try:
        sha = sha256 if sha256 is not None else _record_sha256(record, key)
        if sha is not None and kept.is_file() and _record_sha256(kept, key) == sha:
            return
        _place(entry, cache_dump_path(store, key))
        _place(record, kept)
    except OSError:  # a store that cannot be written (a read-only home): OUT has its own
        return


class ModelKey(TypedDict):
    """The model's part of an extraction's cache key (:func:`model_key`)."""

    model: str
    weights: dict[str, str]  #: weight file -> SHA-256
    code: Mapping[str, object]  #: the encoder's code identity (hashed into the key as it is)
    location: str | None  #: a hub model's repository (None: a local file or folder)
    revision: str | None
    settings: Settings  #: sorted by key
    device: str
    cpu_threads: int


def model_key(model: str, spec: ModelSpec, settings: Settings, device: str) -> ModelKey:
    """The part of an extraction's cache key that names the model and how it ran: the
    SHA-256 of every weight file, where and at which revision, the settings, the device and
    the CPU thread count (retrieval and zero-shot keys alike)."""
    return {
        "model": model,
        "weights": weight_hashes(spec),
        "code": spec_code(spec),
        "location": spec.location if spec.is_hub else None,
        "revision": spec.revision,
        "settings": dict(sorted(settings.items())),
        "device": device,
        "cpu_threads": cpu_threads(),
    }


def model_spec(model: str, registry: Path | None, settings: Settings) -> tuple[ModelSpec, Settings]:
    """A cell's model, with the architecture its settings give (``enable_fusion`` for a
    ``laion:`` path spec), and its other (preprocessing) settings: retrieval and zero-shot
    cells alike."""
    spec = resolve_spec(model, load_registry([registry] if registry else []))
    # each architecture key's value has its field's type (parse_architecture checked it)
    arch: dict[str, Any] = {k: v for k, v in settings.items() if k in ARCHITECTURE_KEYS}
    rest = {k: v for k, v in settings.items() if k not in ARCHITECTURE_KEYS}
    if arch:
        spec = dataclasses.replace(
            spec, architecture=dataclasses.replace(spec.architecture, **arch)
        )
    return spec, rest


def cell_spec(cell: Cell) -> tuple[ModelSpec, Settings]:
    """A retrieval cell's model and preprocessing settings (:func:`model_spec`)."""
    assert cell.extract is not None
    return model_spec(cell.extract.model, cell.extract.registry, cell.extract.settings)


def extract_cell(cell: Cell, path: Path, key: str, shard: tuple[int, int] | None = None) -> None:
    """Extract a cell's dump (or one shard's part) to ``path``, recording the cache key."""
    assert cell.extract is not None
    e = cell.extract
    spec, overrides = cell_spec(cell)
    extract(
        spec,
        e.audio,
        e.captions,
        path,
        overrides=overrides,
        device=e.device,
        shard=shard,
        extra_meta={"cache_key": key},
    )

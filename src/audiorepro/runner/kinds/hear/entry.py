"""A HEAR cell's embeddings through the extraction cache (``OUT/cache/dumps``) and the
executors: one cache entry per (encoder, task), computed here or as Slurm array tasks.

**The entry** ``<key>.npz`` holds what the encoder gave for every clip of every split, named as
heareval's runner names its per-file outputs (:mod:`audiorepro.formats.hear_embeddings`)::

    <split>/<file>.embedding.npy    float32, (dim,) for a scene task, (frames, dim) for an event
    <split>/<file>.timestamps.npy   event tasks: the frames' timestamps (ms), float64
    entry_json.npy                  the entry's meta: its cache key, the task, the sample
                                    rate, the embedding type, the encoder's weights and code,
                                    the libraries' versions (as every extraction's meta)

(an .npz is a zip archive: ``unzip`` gives those files). The target labels and the split-level
files are the task's own (its files are in the key): ``OUT/<cell id>/`` gets heareval's whole
folder, written from the entry (:func:`~audiorepro.formats.hear_embeddings.write_embeddings`).

**The key** (:func:`hear_key`) is the model's part of every entry's key
(:func:`audiorepro.runner.cache.model_key`: weights' SHA-256, the encoder's code, device,
threads), the task's files (metadata, vocabulary, split label files) and every clip's SHA-256
at the encoder's sample rate, the embedding type (scene/event) and the sample rate. The entry is
written atomically with its record (its SHA-256) after it, kept in the per-user store as every
entry is (:func:`~audiorepro.runner.cache.record_entry`), and checked on every read
(:func:`~audiorepro.runner.cache.cached_entry`): a rewritten or truncated entry is never used; it
is said in one line and computed again.

**Parts** (``extract-part``, an array task of ``--executor slurm``): shard ``i/n`` embeds a
contiguous run of the task's clips (splits in metadata order, files in ``<split>.json``'s
order) into a part with the same members and a ``part_json``; the parts merge into the entry
a local run writes, byte for byte (one clip per encoder call either way).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file, sha256_file
from audiorepro.core.io import JsonValue, atomic_write_bytes, npz_bytes, parse_json
from audiorepro.formats.dump import read_npz
from audiorepro.formats.hear import (
    METADATA_FILE,
    VOCABULARY_FILE,
    HearTask,
    check_task_audio,
    read_task,
)
from audiorepro.models.extract import library_versions
from audiorepro.models.registry import load_registry, resolve_spec
from audiorepro.models.user_encoders import Loaded, load_user
from audiorepro.runner.cache import (
    cache_dump_path,
    cached_entry,
    entry_record_path,
    model_key,
    record_entry,
)
from audiorepro.runner.executors.extraction import CellExtraction, ModelUse, StudyExtraction
from audiorepro.runner.kinds.hear.frames import frame_batch, frame_source, heareval_batches
from audiorepro.runner.kinds.hear.spec import HearCell, HearStudy

__all__ = [
    "HEAR_ENTRY",
    "ClipHash",
    "HearEntry",
    "audio_sha256",
    "cached_embeddings",
    "check_clips",
    "hear_extraction",
    "hear_key",
    "load_model",
    "read_clip",
]

#: The ``kind`` of an entry's (and a part's) meta.
HEAR_ENTRY: Final = "audiorepro.hear-embeddings/1"
HEAR_PART: Final = "audiorepro.hear-embeddings-part/1"
_META: Final = "entry_json"
_PART: Final = "part_json"

Clip = tuple[str, str]  #: (split, file)
ClipHash = tuple[str, str, str]  #: (split, file, the SHA-256 of its bytes)
Batch = tuple[str, tuple[str, ...]]  #: (split, files): one encoder call
Arrays = dict[str, npt.NDArray[Any]]


def load_model(model: str) -> Loaded:
    """A cell's encoder (a HEAR module or a ``py:`` encoder), loaded once per process."""
    spec = resolve_spec(model, load_registry([]))
    if spec.format not in ("hear", "py"):
        raise UserError(
            "expected a HEAR module (hear:MODULE[:WEIGHTS]) or an encoder of your own "
            "(py:MODULE:FACTORY, or a registry entry of format hear or py)",
            key=model,
        )
    return load_user(spec, "cpu")


def read_clip(path: Path, rate: int) -> npt.NDArray[np.float32]:
    """A clip as heareval's AudioFileDataset reads it: soundfile, float32, at ``rate``."""
    import soundfile

    check_regular_file(path, what="a HEAR task's audio clip")
    try:
        audio, sr = soundfile.read(str(path), dtype=np.float32)
    except (RuntimeError, soundfile.LibsndfileError, TypeError, ValueError) as exc:
        raise UserError(f"cannot be decoded ({exc})", source=path) from None
    if sr != rate or audio.ndim != 1 or audio.size == 0:
        raise UserError(
            f"is {sr} Hz with shape {audio.shape}; expected mono audio at {rate} Hz",
            source=path,
        )
    return np.asarray(audio, dtype=np.float32)


def check_clips(task: HearTask, rate: int) -> tuple[ClipHash, ...]:
    """Every clip's header as :func:`read_clip` will want it (mono, ``rate``, not empty) and the
    SHA-256 of its bytes, in one read of each file: done when the study is loaded, so that a
    bad clip of a later cell is one line before any cell's embeddings are computed and written;
    the hashes are the cache key's (:func:`hear_key`) and the cell's ``audio_sha256``
    (:func:`audio_sha256`), so a computed cell reads each clip's bytes twice in all (here, and
    when :func:`read_clip` decodes it on a cache miss)."""
    return tuple(
        (split, name, _check_clip(task.audio_dir(rate, split) / name, rate))
        for split, name in _clips(task)
    )


def _check_clip(path: Path, rate: int) -> str:
    """One clip's header checked (:func:`check_clips`) and its bytes' SHA-256, from one open
    file: libsndfile reads the header through it, then the file is hashed from its start."""
    import soundfile

    check_regular_file(path, what="a HEAR task's audio clip")
    with open(path, "rb") as f:
        try:
            info = soundfile.info(f)
        except soundfile.LibsndfileError as exc:  # said as soundfile.info(path) says it
            reason = f"Error opening {str(path)!r}: {exc.error_string}"
            raise UserError(f"cannot be decoded ({reason})", source=path) from None
        except (RuntimeError, TypeError, ValueError) as exc:
            raise UserError(f"cannot be decoded ({exc})", source=path) from None
        if info.samplerate != rate or info.channels != 1 or info.frames == 0:
            raise UserError(
                f"is {info.samplerate} Hz with {info.channels} channel(s) and {info.frames} "
                f"samples; expected mono audio at {rate} Hz",
                source=path,
            )
        f.seek(0)
        return hashlib.file_digest(f, "sha256").hexdigest()


def audio_sha256(clips: Iterable[ClipHash]) -> str:
    """One SHA-256 over every clip a cell reads (:func:`check_clips`' hashes): a line
    ``<split>/<file> <SHA-256 of its bytes>`` per clip, splits in metadata order, files in split
    order. A clip changed in place moves the cell's numbers; diff must be able to name it as the
    cause.

    >>> audio_sha256([("test", "a.wav", "0" * 64)]) == hashlib.sha256(
    ...     f"test/a.wav {'0' * 64}\\n".encode()).hexdigest()
    True
    """
    lines = "".join(f"{split}/{name} {sha}\n" for split, name, sha in clips)
    return hashlib.sha256(lines.encode()).hexdigest()


def _clips(task: HearTask) -> list[Clip]:
    return [(split, name) for split in task.metadata.splits for name in task.files(split)]


def task_files(task: HearTask) -> dict[str, str]:
    """The SHA-256 of the task's own files: metadata, vocabulary and split label files."""
    names = [METADATA_FILE, VOCABULARY_FILE, *(f"{s}.json" for s in task.metadata.splits)]
    return {n: sha256_file(task.path / n) for n in names}


def hear_key(cell: HearCell, clips: tuple[ClipHash, ...] | None = None) -> str:
    """The cache key of a cell's embeddings (module docstring): the same on the submitting
    host and on the node that computes them, else the array task writes nothing. ``clips``:
    the hashes :func:`check_clips` gave when the study was loaded (its checks done there);
    None: checked and hashed here (an executor's key, before any array task is submitted)."""
    assert cell.task_path is not None
    task = read_task(cell.task_path)
    loaded = load_model(cell.model)
    rate = int(loaded.encoder.sample_rate)
    if clips is None:
        # what the key reads must be there (one line, before any array task is submitted)
        check_task_audio(task, rate)
        if task.metadata.embedding_type == "event":
            frame_source(loaded.encoder)
        clips = check_clips(task, rate)
    spec = resolve_spec(cell.model, load_registry([]))
    key = {
        "kind": HEAR_ENTRY,
        **model_key(cell.model, spec, {}, "cpu"),
        "task": {"files": task_files(task), "clips": [list(c) for c in clips]},
        "embedding_type": task.metadata.embedding_type,
        "sample_rate": rate,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


# --- computing ------------------------------------------------------------------------------


def _embed(loaded: Loaded, task: HearTask, rate: int, batches: Iterable[Batch]) -> Arrays:
    """The clips' embeddings (and timestamps), one encoder call per batch (:func:`_batches`),
    by member name."""
    encoder = loaded.encoder
    frames = frame_source(encoder) if task.metadata.embedding_type == "event" else None
    scene = getattr(encoder, "embed_batch", None) or encoder.embed_audio
    out: Arrays = {}
    for split, names in batches:
        clips = [read_clip(task.audio_dir(rate, split) / name, rate) for name in names]
        where = [f"{split}/{name}" for name in names]
        if frames is not None:
            for w, (emb, stamps) in zip(where, frame_batch(frames, clips, where), strict=True):
                out[f"{w}.timestamps"], out[f"{w}.embedding"] = stamps, emb
            continue
        rows = np.asarray(scene(clips))
        _check_rows(rows, len(names), where[0])
        for w, row in zip(where, rows, strict=True):
            out[f"{w}.embedding"] = np.ascontiguousarray(row, dtype=np.float32)
    return out


def _check_rows(rows: npt.NDArray[Any], n: int, first: str) -> None:
    """An encoder's answer for ``n`` clips (the first ``first``): ``n`` finite rows, else one
    line (the predictor would fail on them with a traceback, or score NaN)."""
    if rows.ndim != 2 or len(rows) != n:
        raise UserError(
            f"embedded {n} clip(s) from {first} as an array of shape {rows.shape}; expected "
            f"({n}, dim)",
            key="MODEL",
        )
    if not np.isfinite(rows).all():
        raise UserError(
            f"embeddings of {n} clip(s) from {first} hold NaN or infinite values; expected "
            "finite numbers",
            key="MODEL",
        )


def _batches(task: HearTask, rate: int, encoder: Any) -> list[Batch]:
    """The encoder calls of a cell: a HEAR module's in heareval's batches
    (:func:`~.frames.heareval_batches`: a module may depend on its batch), a ``py:`` encoder's
    one clip per call."""
    heareval = hasattr(encoder, "embed_batch")
    return [
        (split, names)
        for split in task.metadata.splits
        for names in (
            heareval_batches(task, split, rate)
            if heareval
            else [(name,) for name in task.files(split)]
        )
    ]


def _meta(cell: HearCell, task: HearTask, loaded: Loaded, key: str) -> dict[str, JsonValue]:
    return {
        "kind": HEAR_ENTRY,
        "cache_key": key,
        "model": cell.model,
        "weights_sha256": dict(sorted(loaded.hashes.items())),
        "code": json.loads(json.dumps(loaded.code, sort_keys=True)),
        "task": task.path.name,
        "task_files_sha256": dict(task_files(task)),
        "embedding_type": task.metadata.embedding_type,
        "sample_rate": int(loaded.encoder.sample_rate),
        "versions": cast(JsonValue, library_versions()),  # as every extraction's meta
    }


def _json(value: object) -> npt.NDArray[Any]:
    return np.asarray(json.dumps(value, sort_keys=True))


def _shard(batches: list[Batch], shard: tuple[int, int]) -> list[Batch]:
    """Shard ``i/n``: the ``i``-th of ``n`` contiguous runs of the encoder calls (some may be
    empty): a batch is never cut, so the parts hold the bytes one local run computes.

    >>> _shard([("t", ("a", "b")), ("t", ("c",)), ("v", ("d",))], (1, 2))
    [('v', ('d',))]
    """
    i, n = shard
    size = -(-len(batches) // n)
    return batches[i * size : (i + 1) * size]


def write_part(cell: HearCell, shard: tuple[int, int], key: str, out: Path) -> None:
    """An array task's part: shard ``shard`` of the cell's clips, its ``part_json`` naming the
    shard and (in its meta) the cache key."""
    assert cell.task_path is not None
    task, loaded = read_task(cell.task_path), load_model(cell.model)
    rate = int(loaded.encoder.sample_rate)
    arrays = _embed(loaded, task, rate, _shard(_batches(task, rate, loaded.encoder), shard))
    info = {"kind": HEAR_PART, "shard": list(shard), "meta": _meta(cell, task, loaded, key)}
    atomic_write_bytes(out, npz_bytes({**arrays, _PART: _json(info)}))


def merge_parts(cell: HearCell, parts: list[Path], key: str, dest: Path) -> None:
    """Join the finished parts (shard order) into the entry a local run writes: every part of
    this extraction (``key``), every clip of the task once."""
    assert cell.task_path is not None
    arrays: Arrays = {}
    meta: Any = None
    for path in parts:
        part = read_npz(path, what="a HEAR embeddings part written by extract-part")
        info = parse_json(str(part.pop(_PART, "")), source=path, key=_PART)
        if not isinstance(info, dict) or info.get("meta", {}).get("cache_key") != key:
            raise UserError("belongs to another extraction", source=path, key=_PART)
        meta = info["meta"]
        arrays.update(part)
    task = read_task(cell.task_path)
    want = {f"{s}/{n}.embedding" for s, n in _clips(task)}
    if want - set(arrays):
        missing = sorted(want - set(arrays))[0]
        raise UserError(f"no part holds {missing}", source=dest.parent, key=_PART)
    atomic_write_bytes(dest, _entry_bytes(arrays, meta))


def _entry_bytes(arrays: Arrays, meta: Any) -> bytes:
    """The entry's bytes: the clips' arrays and the meta, whichever executor computed them."""
    return npz_bytes({**arrays, _META: _json(meta)})


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class HearEntry:
    """A cell's embeddings as its cache entry holds them: split -> file -> array."""

    path: Path
    sha256: str
    meta: dict[str, Any]
    embeddings: dict[str, dict[str, npt.NDArray[np.float32]]]
    timestamps: dict[str, dict[str, npt.NDArray[np.float64]]] | None


def load_entry(path: Path) -> HearEntry:
    """Read an entry (:func:`~audiorepro.formats.dump.read_npz`: never unpickled; a member
    name that is no clip's is one line)."""
    sha = sha256_file(path)
    arrays = read_npz(path, what="a HEAR embeddings cache entry")
    meta = parse_json(str(arrays.pop(_META, "")), source=path, key=_META)
    if not isinstance(meta, dict) or meta.get("kind") != HEAR_ENTRY:
        raise UserError(f"expected an entry of kind {HEAR_ENTRY}", source=path, key=_META)
    emb: dict[str, dict[str, npt.NDArray[np.float32]]] = {}
    stamps: dict[str, dict[str, npt.NDArray[np.float64]]] = {}
    for member, array in arrays.items():
        split, _, rest = member.partition("/")
        name, dot, what = rest.rpartition(".")
        if not dot or what not in ("embedding", "timestamps"):
            raise UserError("is no clip's embedding or timestamps", source=path, key=member)
        table = emb if what == "embedding" else stamps
        table.setdefault(split, {})[name] = array
    event = meta.get("embedding_type") == "event"
    return HearEntry(path, sha, meta, emb, stamps if event else None)


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def cached_embeddings(cache: Path, key: str) -> HearEntry | None:
    """The entry of ``key``, checked (:func:`~audiorepro.runner.cache.cached_entry`), or None.
    An entry whose bytes are not its record's is said in one line (then computed again)."""
    entry = cached_entry(cache, key, load_entry)
    path, record = cache_dump_path(cache, key), entry_record_path(cache, key)
    if entry is None and path.is_file() and record.is_file():
        _say(f"{path}: cache entry does not match its record {record.name}; computed again")
    return entry


def cell_embeddings(cell: HearCell, cache: Path, clips: tuple[ClipHash, ...]) -> HearEntry:
    """The cell's embeddings: from the cache, or computed here into it (every clip, the
    bytes the merged parts of an array give); ``clips``: the load's :func:`check_clips`."""
    key = hear_key(cell, clips)
    entry = cached_embeddings(cache, key)
    if entry is not None:
        return entry
    assert cell.task_path is not None
    task, loaded = read_task(cell.task_path), load_model(cell.model)
    rate = int(loaded.encoder.sample_rate)
    arrays = _embed(loaded, task, rate, _batches(task, rate, loaded.encoder))
    dest = cache_dump_path(cache, key)
    atomic_write_bytes(dest, _entry_bytes(arrays, _meta(cell, task, loaded, key)))
    record_entry(cache, key)
    entry = cached_entry(cache, key, load_entry)
    if entry is None:  # written and recorded just now: only another writer could spoil it
        raise UserError("was changed while it was written", source=dest)
    return entry


# --- the executors' view --------------------------------------------------------------------


def _cell_extraction(cell: HearCell) -> CellExtraction:
    def cached(cache: Path, key: str) -> bool:
        return cached_embeddings(cache, key) is not None

    return CellExtraction(
        cell.id,
        partial(hear_key, cell),
        True,
        partial(write_part, cell),
        partial(merge_parts, cell),
        cached,
    )


def computed_cells(study: HearStudy) -> list[HearCell]:
    """The cells whose embeddings an encoder computes (not a submission's saved predictions or
    embeddings; a task found)."""
    return [
        c
        for c in study.cells
        if c.predictions is None and c.embeddings is None and c.task_path is not None
    ]


def hear_extraction(study: HearStudy) -> StudyExtraction | None:
    """The cells as the executors see them (local, Slurm arrays, ``extract-part``): one array
    task per (encoder, task) and shard; None when no cell runs an encoder."""
    cells = computed_cells(study)
    if not cells:
        return None
    read_only = {study.source.parent.resolve()}
    read_only |= {c.task_path.resolve() for c in cells if c.task_path is not None}
    return StudyExtraction(
        study.name,
        study.source,
        tuple(_cell_extraction(c) for c in cells),
        frozenset(read_only),
        tuple(ModelUse(c.id, c.model, None, None) for c in cells),
    )

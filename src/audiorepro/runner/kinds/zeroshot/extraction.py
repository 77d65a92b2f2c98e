"""The zero-shot kind's extraction (also the linear-probe kind's): a zero-shot study's inputs,
a cell's embeddings, its cache entry, and its Slurm parts, as the executors see them
(:func:`zeroshot_extraction`).

The local path (:func:`cached_cell`): a cell's dump is extracted once into the extraction
cache (``OUT/cache/dumps``, keyed by :func:`zeroshot_key`; the entry is the very dump the
output folder gets, its record carries the key). The Slurm path
(:mod:`audiorepro.runner.executors.slurm`): an array task writes one shard of a cell
(:func:`write_part`: whole batches of clips and of prompts, as ``extract --shard``) and the
driver joins the parts (:func:`merge_parts`) into the bytes a local run writes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Final, NotRequired

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import (
    JsonObject,
    JsonValue,
    atomic_write_bytes,
    npz_bytes,
    parse_json,
    read_json,
)
from audiorepro.formats.audio import audio_identity, check_audio
from audiorepro.formats.coverage import RECORD_NAME
from audiorepro.formats.dump import Dump, Embeddings, load_dump, make_dump, read_npz, save_dump
from audiorepro.formats.esc50 import Esc50Meta, read_esc50_csv
from audiorepro.models.embedder import load_embedder, require_text
from audiorepro.models.extract import library_versions, shard_range
from audiorepro.models.pipelines import configure_determinism
from audiorepro.models.registry import ModelSpec
from audiorepro.runner.cache import (
    cache_dump_path,
    cached_dump,
    model_key,
    model_spec,
    record_entry,
)
from audiorepro.runner.executors.extraction import CellExtraction, ModelUse, StudyExtraction
from audiorepro.runner.kinds.zeroshot.spec import ZeroshotStudy, prompt
from audiorepro.specs.settings import Settings
from audiorepro.specs.study import ZeroshotCell

DUMP_KIND: Final = "audiorepro.zeroshot-extraction/1"
#: An array task's part of a zero-shot cell (``extract-part``), merged by :func:`merge_parts`.
PART_KIND: Final = "audiorepro.zeroshot-part/1"


class MissingInputs(UserError):
    """The dataset (or some of its clips) is not here: ``reproduce`` stops (exit 2),
    ``verify`` reports the values NOT VERIFIED."""


class InputsRecord(TypedDict):
    """What a zero-shot study evaluates, as its bundle, cache key and dumps record it."""

    dataset: str
    metadata_file: str
    metadata_sha256: str
    folds: list[int]
    template: str
    classes: list[str]
    n_clips: int
    #: one hash over "name sha256" lines of every clip, in clip order (as extract does)
    audio_sha256: str
    #: ``fetch esc50``'s ``dataset.json`` beside the metadata, as it is (absent: none)
    prepared: NotRequired[JsonObject]


@dataclasses.dataclass
class ZeroshotInputs:
    """The evaluated clips (files, labels) and the class prompts."""

    meta: Esc50Meta
    paths: list[Path]
    labels: npt.NDArray[np.int64]
    prompts: list[str]
    record: InputsRecord


def study_inputs(study: ZeroshotStudy) -> ZeroshotInputs:
    """The clips of the study's folds, in the metadata's order, and one prompt per class."""
    ds = study.dataset
    for path, key in ((ds.metadata, "dataset.metadata"), (ds.audio, "dataset.audio")):
        if not path.exists():
            raise MissingInputs(
                f"{path} is not here (run `audiorepro fetch esc50` first)",
                source=study.source,
                key=key,
            )
    meta = read_esc50_csv(ds.metadata).select(ds.folds)
    if not meta.filenames:
        raise UserError(f"has no clip in folds {list(ds.folds)}", source=ds.metadata, key="fold")
    if not ds.audio.is_dir():
        raise UserError("is not a folder of audio clips", source=study.source, key="dataset.audio")
    paths = [ds.audio / name for name in meta.filenames]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise MissingInputs(
            f"lacks {len(missing)} of the {len(paths)} clips of folds {list(ds.folds)} "
            f"(first: {missing[0]}); a smaller set gives other numbers",
            source=ds.audio,
        )
    for path in paths:
        # Each clip from its header, before any model loads (as caption-file studies do):
        # an undecodable clip is bad input (exit 2), not a failed cell.
        check_audio(path)
    absent = sorted(set(range(len(meta.classes))) - set(meta.targets))
    if absent:
        # Every prompt must be relevant to a clip (the dump format), and a class that no clip
        # has would only compete: refuse rather than rank against a smaller class set.
        raise UserError(
            f"has no clip of class {meta.classes[absent[0]]!r} in folds {list(ds.folds)}; "
            "every class needs a clip in the selected folds",
            source=ds.metadata,
            key="fold",
        )
    prompts = [prompt(ds.template, c) for c in meta.classes]
    listing = "".join(f"{a['file']} {a['sha256']}\n" for a in map(audio_identity, paths))
    metadata_sha256 = sha256_file(ds.metadata)
    record: InputsRecord = {
        "dataset": ds.name,
        "metadata_file": ds.metadata.name,
        "metadata_sha256": metadata_sha256,
        "folds": list(ds.folds),
        "template": ds.template,
        "classes": list(meta.classes),
        "n_clips": len(paths),
        # One hash over "name sha256" lines of every clip, in clip order (as extract does).
        "audio_sha256": hashlib.sha256(listing.encode()).hexdigest(),
    }
    prepared = _prepared_record(ds.metadata, metadata_sha256)
    if prepared is not None:
        record["prepared"] = prepared
    return ZeroshotInputs(
        meta=meta,
        paths=paths,
        labels=np.asarray(meta.targets, dtype=np.int64),
        prompts=prompts,
        record=record,
    )


def _prepared_record(metadata: Path, metadata_sha256: str) -> JsonObject | None:
    """``fetch esc50``'s ``dataset.json`` beside the metadata (the pinned commit, the archive's
    hash, clips present) when it describes this metadata file; it travels with the dumps."""
    path = metadata.parent / RECORD_NAME
    if not path.is_file():
        return None
    record = read_json(path, what="a dataset record (dataset.json)")
    if not isinstance(record, dict) or record.get("metadata_sha256") != metadata_sha256:
        return None
    return record


def _cell_spec(cell: ZeroshotCell) -> tuple[ModelSpec, Settings]:
    """The cell's model with the architecture its settings give, and its other settings."""
    return model_spec(cell.model, cell.registry, cell.settings)


def zeroshot_key(cell: ZeroshotCell, inputs: ZeroshotInputs) -> str:
    """The extraction cache's key of a cell (:mod:`audiorepro.runner.cache`): the SHA-256 of
    every weight file, the settings, device and thread count, and the inputs' record (the
    metadata's hash, folds, template, classes, every clip's hash, fetch's record)."""
    spec, _ = _cell_spec(cell)
    key = {
        "kind": DUMP_KIND,
        **model_key(cell.model, spec, cell.settings, cell.device),
        "inputs": inputs.record,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Extraction:
    """A cell's embeddings (or one shard's rows of them) and the dump's meta."""

    audio: Embeddings
    text: Embeddings
    meta: dict[str, JsonValue]
    audio_range: tuple[int, int]
    text_range: tuple[int, int]


def extract_cell(
    cell: ZeroshotCell, inputs: ZeroshotInputs, shard: tuple[int, int] | None = None
) -> Extraction:
    """Audio embeddings per clip and text embeddings per class prompt, and the dump's meta;
    with ``shard``, a contiguous run of whole batches of each (as ``extract --shard``: every
    batch, and its seed, is the one an unsharded run embeds)."""
    spec, rest = _cell_spec(cell)
    determinism = configure_determinism(cell.device)
    embedder = load_embedder(spec, rest, cell.device)
    require_text(embedder, needed_by="zero-shot classification")
    size = embedder.settings.batch_size
    a0, a1 = shard_range(len(inputs.paths), size, shard)
    t0, t1 = shard_range(len(inputs.prompts), size, shard)
    empty = np.zeros((0, 0), np.float32)
    waveforms = [embedder.read_clip(p) for p in inputs.paths[a0:a1]]
    audio = embedder.embed_audio(waveforms, first_index=a0) if waveforms else empty
    text = embedder.embed_text(inputs.prompts[t0:t1]) if t1 > t0 else empty
    meta = {
        "kind": DUMP_KIND,
        **embedder.meta(),
        **embedder.embedding_meta(),
        "zeroshot": inputs.record,
        "determinism": determinism,
        "versions": library_versions(),
    }
    return Extraction(np.asarray(audio), np.asarray(text), meta, (a0, a1), (t0, t1))


def _write_cell_dump(path: Path, inputs: ZeroshotInputs, ex: Extraction) -> Dump:
    return write_relevance_dump(
        path,
        ex.audio,
        ex.text,
        inputs.labels,
        audio_ids=list(inputs.meta.filenames),
        captions=inputs.prompts,
        meta=ex.meta,
    )


def cached_cell(cell: ZeroshotCell, inputs: ZeroshotInputs, cache: Path) -> Path:
    """The cell's dump in the extraction cache (``OUT/cache/dumps``), extracted here first
    when the cache lacks it (or holds it damaged). The entry is the very dump the output
    folder gets: its record, not its meta, carries the key, so the dump's bytes are those of
    a run without a cache."""
    key = zeroshot_key(cell, inputs)
    if cached_dump(cache, key, keyed_meta=False) is None:
        _write_cell_dump(cache_dump_path(cache, key), inputs, extract_cell(cell, inputs))
        record_entry(cache, key)
    return cache_dump_path(cache, key)


def write_part(
    cell: ZeroshotCell, inputs: ZeroshotInputs, shard: tuple[int, int], key: str, out: Path
) -> None:
    """An array task's part of a zero-shot cell (``extract-part``): its rows of both
    embeddings and a ``part_json`` naming the shard and, in its meta, the cache key."""
    ex = extract_cell(cell, inputs, shard)
    part = {
        "kind": PART_KIND,
        "shard": list(shard),
        "audio_range": list(ex.audio_range),
        "text_range": list(ex.text_range),
        "meta": {**ex.meta, "cache_key": key},
    }
    arrays = {
        "audio_embeds": ex.audio,
        "text_embeds": ex.text,
        "part_json": np.asarray(json.dumps(part, sort_keys=True)),
    }
    atomic_write_bytes(out, npz_bytes(arrays))


def merge_parts(parts: list[Path], inputs: ZeroshotInputs, key: str, out: Path) -> None:
    """Join a zero-shot cell's finished parts (shard order) into the dump a local run writes:
    the rows must continue one another and every part must be of this extraction (``key``)."""
    loaded = []
    for path in parts:
        arrays = read_npz(path, what="a zero-shot dump part written by extract-part")
        info = parse_json(str(arrays["part_json"]), source=path, key="part_json")
        if not isinstance(info, dict) or info.get("meta", {}).get("cache_key") != key:
            raise UserError("belongs to another extraction", source=path, key="part_json")
        loaded.append((info, arrays))
    loaded.sort(key=lambda item: int(item[0]["shard"][0]))
    rows = {"audio": 0, "text": 0}
    for info, arrays in loaded:
        for kind in rows:
            start, stop = info[f"{kind}_range"]
            if start != rows[kind] or stop - start != len(arrays[f"{kind}_embeds"]):
                raise UserError(f"{kind} rows {start}..{stop} do not continue", key="part_json")
            rows[kind] = stop
    meta = {k: v for k, v in loaded[0][0]["meta"].items() if k != "cache_key"}

    def joined(kind: str) -> Embeddings:
        return np.concatenate([a[f"{kind}_embeds"] for _, a in loaded if a[f"{kind}_embeds"].size])

    ex = Extraction(joined("audio"), joined("text"), meta, (0, rows["audio"]), (0, rows["text"]))
    _write_cell_dump(out, inputs, ex)


def class_relevance(labels: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """CSR relevance over clips: clip ``i`` is relevant to text row ``labels[i]`` (its class
    prompt) only.

    >>> [a.tolist() for a in class_relevance(np.array([2, 0, 2]))]
    [[0, 1, 2, 3], [2, 0, 2]]
    """
    indptr = np.arange(labels.size + 1, dtype=np.int64)
    return indptr, labels.astype(np.int64)


def write_relevance_dump(
    path: Path,
    audio: Embeddings,
    text: Embeddings,
    labels: npt.NDArray[np.int64],
    *,
    audio_ids: list[str],
    captions: list[str],
    meta: dict[str, JsonValue],
) -> Dump:
    """Write the cell's dump with class relevance (format version 2: ``relevance_indptr``/
    ``relevance_indices`` instead of ``text_to_audio``), validated like every dump, and return
    it as read back."""
    indptr, indices = class_relevance(labels)
    dump = make_dump(
        audio,
        text,
        None,
        relevance_indptr=indptr,
        relevance_indices=indices,
        audio_ids=audio_ids,
        captions=captions,
        meta=meta,
    )
    save_dump(path, dump)
    return load_dump(path)


def zeroshot_extraction(study: ZeroshotStudy) -> StudyExtraction:
    """Every cell of a zero-shot study as the executors see it (its inputs read once, when a
    key is first asked), with the folders of its clips, metadata and registries."""
    inputs: list[ZeroshotInputs] = []

    def once() -> ZeroshotInputs:
        if not inputs:
            inputs.append(study_inputs(study))
        return inputs[0]

    def cell_extraction(cell: ZeroshotCell) -> CellExtraction:
        def write(shard: tuple[int, int], key: str, out: Path) -> None:
            write_part(cell, once(), shard, key, out)

        def merge(parts: list[Path], key: str, dest: Path) -> None:
            merge_parts(parts, once(), key, dest)

        return CellExtraction(cell.id, lambda: zeroshot_key(cell, once()), False, write, merge)

    ds = study.dataset
    read_only = {study.source.parent.resolve(), ds.audio.resolve(), ds.metadata.resolve().parent}
    read_only |= {c.registry.resolve().parent for c in study.cells if c.registry}
    cells = tuple(cell_extraction(c) for c in study.cells)
    models = tuple(
        ModelUse(c.id, c.model, c.registry, "zero-shot classification") for c in study.cells
    )
    return StudyExtraction(study.name, study.source, cells, frozenset(read_only), models)

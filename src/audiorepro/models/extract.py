"""``audiorepro extract`` and ``merge``: audio files + captions -> an embedding dump.

Any encoder (:mod:`audiorepro.models.embedder`): clips are decoded at the encoder's sample
rate. Without captions, the dump is audio-only (:mod:`audiorepro.formats.audio_dump`: the
clips of the folder or list file, in its order); with captions, the encoder needs a text
tower (else one line, before anything is written).

A dump's ``meta_json`` records everything that decides its numbers: the model (spec, revision,
SHA-256 of every weight file, architecture), the preprocessing settings, the decoder and
resampler, the inputs' hashes (caption file and every audio file), seed, device, dtype,
determinism settings and library versions, and the model's logit scale (used by the laion-clap
metric profile). No time, host or absolute path, so the same inputs give the same bytes.

Sharding (``--shard i/n``): clips are embedded in batches of ``batch_size``; part ``i`` takes a
contiguous run of whole batches of clips and, independently, of captions. Every batch is
therefore the same in a sharded run as in an unsharded one (same members, same seed), and
``merge`` gives a dump byte-identical to the unsharded one. A part (``.part.npz``) records the
inputs' identity; ``merge`` refuses parts of different runs, missing or repeated parts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, npz_bytes, parse_json
from audiorepro.formats.audio import audio_identity, check_audio
from audiorepro.formats.audio_dump import make_audio_dump, save_audio_dump
from audiorepro.formats.captions import Captions, list_audio, load_inputs
from audiorepro.formats.coverage import dataset_record
from audiorepro.formats.dump import make_dump, read_npz, save_dump
from audiorepro.models.embedder import Embedder, load_embedder, require_text
from audiorepro.models.pipelines import configure_determinism
from audiorepro.models.registry import ModelSpec
from audiorepro.specs.records import PartRecord
from audiorepro.specs.schema import validate

PART_KIND = "audiorepro.dump-part/1"
_SHARD = re.compile(r"^(\d+)/(\d+)$")
VERSIONED = (
    "numpy",
    "scipy",
    "soundfile",
    "torch",
    "torchaudio",
    "torchvision",
    "transformers",
    "laion_clap",
    "audiorepro",
)


def library_versions() -> dict[str, str | None]:
    """The versions of Python and of :data:`VERSIONED` (a new dict each call)."""
    return dict(_library_versions())


@functools.cache
def _library_versions() -> dict[str, str | None]:
    # Once per process: each metadata.version parses the distribution's METADATA file, 0.1 s
    # of CPU for these ten on every extraction (docs/benchmarks.md).
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"i/n"`` with ``0 <= i < n``.

    >>> parse_shard("1/4")
    (1, 4)
    """
    if text is None:
        return None
    m = _SHARD.match(text.strip())
    if not m or not int(m.group(1)) < int(m.group(2)):
        raise UserError(f"{text!r} is not i/n with 0 <= i < n (e.g. 0/4)", key="--shard")
    return int(m.group(1)), int(m.group(2))


def shard_range(n_items: int, batch_size: int, shard: tuple[int, int] | None) -> tuple[int, int]:
    """Item range ``[start, stop)`` of a shard: a contiguous run of whole batches.

    >>> [shard_range(10, 3, (i, 3)) for i in range(3)]
    [(0, 3), (3, 6), (6, 10)]
    """
    if shard is None:
        return 0, n_items
    i, n = shard
    batches = -(-n_items // batch_size)
    first, last = i * batches // n, (i + 1) * batches // n
    return min(first * batch_size, n_items), min(last * batch_size, n_items)


def _inputs(captions_path: Path, caps: Captions, paths: list[Path]) -> dict[str, Any]:
    listing = "".join(f"{a['file']} {a['sha256']}\n" for a in map(audio_identity, paths))
    # A dataset prepared by `fetch` (which clips of the published set are present) travels
    # with the dump; absent for a plain folder, so other dumps keep their bytes.
    record = dataset_record(captions_path)
    extra = {} if record is None else {"dataset": record}
    return {
        **extra,
        "captions_file": captions_path.name,
        "captions_sha256": sha256_file(captions_path),
        "captions_layout": caps.layout,
        "n_clips": len(caps.clips),
        "n_captions": len(caps.texts),
        # One hash over "name sha256" lines of every clip, in clip order.
        "audio_sha256": hashlib.sha256(listing.encode()).hexdigest(),
    }


def audio_inputs(audio: Path) -> tuple[list[Path], dict[str, Any]]:
    """The clips of an audio-only extraction (a folder in name order, a list file in its
    order), each checked from its header, and their record."""
    paths = list(list_audio(audio).values())
    for path in paths:
        check_audio(path)
    listing = "".join(f"{a['file']} {a['sha256']}\n" for a in map(audio_identity, paths))
    return paths, {
        "n_clips": len(paths),
        "audio_sha256": hashlib.sha256(listing.encode()).hexdigest(),
    }


def extract(
    spec: ModelSpec,
    audio: Path,
    captions_path: Path | None,
    out: Path,
    *,
    overrides: dict[str, Any] | None = None,
    device: str = "cpu",
    shard: tuple[int, int] | None = None,
    progress: bool = False,
    extra_meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Embed every clip and caption (no captions: an audio-only dump); write a dump (or a
    part with ``shard``). Returns meta."""

    # Every input is checked before the model loads: a bad caption file or clip is exit 2,
    # not a failure found halfway through an extraction.
    if captions_path is None:
        paths, inputs = audio_inputs(audio)
        caps = None
    else:
        checked = load_inputs(captions_path, audio)
        caps, paths = checked.captions, list(checked.paths)
        inputs = _inputs(captions_path, caps, paths)
    determinism = configure_determinism(device)
    embedder = load_embedder(spec, overrides, device)
    if caps is not None:
        require_text(embedder, needed_by="extract with --captions")
    size = embedder.settings.batch_size
    a0, a1 = shard_range(len(paths), size, shard)
    texts = [] if caps is None else list(caps.texts)
    t0, t1 = shard_range(len(texts), size, shard)
    waveforms = [embedder.read_clip(p) for p in paths[a0:a1]]
    empty = np.zeros((0, 0), np.float32)
    audio_embeds = (
        embedder.embed_audio(waveforms, first_index=a0, progress=progress) if waveforms else empty
    )
    text_embeds = embedder.embed_text(texts[t0:t1], progress=progress) if t1 > t0 else empty
    meta = {
        "kind": "audiorepro.extraction/1",
        **embedder.meta(),
        **embedder.embedding_meta(),
        "inputs": inputs,
        "determinism": determinism,
        "versions": library_versions(),
        **(extra_meta or {}),
    }
    if shard is None:
        _write_dump(out, caps, paths, audio_embeds, text_embeds, meta)
        return meta
    part = {
        "kind": PART_KIND,
        "shard": list(shard),
        "audio_range": [a0, a1],
        "text_range": [t0, t1],
        "meta": meta,
    }
    labels = {"audio_ids": np.asarray([p.name for p in paths], dtype=str)}
    arrays = {
        "audio_embeds": audio_embeds,
        **({} if caps is None else {"text_embeds": text_embeds}),
        "part_json": np.asarray(json.dumps(part, sort_keys=True)),
        **(labels if caps is None else _labels(caps)),
    }
    atomic_write_bytes(out, npz_bytes(arrays))
    return meta


def _write_dump(
    out: Path,
    caps: Captions | None,
    paths: list[Path],
    audio_embeds: Any,
    text_embeds: Any,
    meta: dict[str, Any],
) -> None:
    if caps is None:
        save_audio_dump(out, make_audio_dump(audio_embeds, [p.name for p in paths], meta))
        return
    dump = make_dump(
        audio_embeds,
        text_embeds,
        np.asarray(caps.clip_index, dtype=np.int64),
        audio_ids=list(caps.clips),
        captions=list(caps.texts),
        meta=meta,
    )
    save_dump(out, dump)


def embedding_meta(embedder: Embedder) -> dict[str, Any]:
    """What every dump records of how it was embedded: the model's logit scale (where it has
    one), the audio decoder, resampler, rate and channel mixing."""
    return embedder.embedding_meta()


def _labels(caps: Captions) -> dict[str, Any]:
    return {
        "text_to_audio": np.asarray(caps.clip_index, dtype=np.int64),
        "audio_ids": np.asarray(list(caps.clips), dtype=str),
        "captions": np.asarray(list(caps.texts), dtype=str),
    }


_PART_KEYS = ("audio_embeds", "text_embeds", "text_to_audio", "audio_ids", "captions")


def merge(parts: list[Path], out: Path) -> dict[str, Any]:
    """Join the parts of one sharded extraction into the dump an unsharded run writes."""
    if not parts:
        raise UserError("no parts given", key="PARTS")
    loaded = []
    for path in parts:
        arrays = read_npz(path, what="a dump part (.part.npz) written by extract --shard")
        if "part_json" not in arrays:
            raise UserError("is not a dump part (no part_json)", source=path, key="part_json")
        info = parse_json(str(arrays["part_json"]), source=path, key="part_json")
        if not isinstance(info, dict):
            raise UserError("is not a JSON object", source=path, key="part_json")
        validate(PartRecord, info, source=str(path), where=("part_json",))
        # An audio-only part (extract without --captions) has no text key at all.
        audio_only = not {"text_embeds", "text_to_audio", "captions"} & set(arrays)
        needed = ("audio_embeds", "audio_ids") if audio_only else _PART_KEYS
        for key in needed:
            if key not in arrays:
                raise UserError("is missing (required in a dump part)", source=path, key=key)
        if info.get("kind") != PART_KIND:
            raise UserError(
                f"kind is {info.get('kind')!r}, expected {PART_KIND!r}",
                source=path,
                key="part_json",
            )
        loaded.append((path, info, arrays))
    first_path, first, _ = loaded[0]
    n = first["shard"][1]
    for path, info, _ in loaded:
        if info["meta"] != first["meta"]:
            differ = sorted(
                k
                for k in set(info["meta"]) | set(first["meta"])
                if info["meta"].get(k) != first["meta"].get(k)
            )
            raise UserError(
                f"belongs to a different extraction than {first_path.name} "
                f"(differs in {', '.join(differ)})",
                source=path,
                key="part_json",
            )
        if info["shard"][1] != n:
            raise UserError(
                f"is shard {info['shard'][0]}/{info['shard'][1]}, others are of {n}", source=path
            )
    found = sorted(info["shard"][0] for _, info, _ in loaded)
    if found != list(range(n)):
        missing = sorted(set(range(n)) - set(found))
        repeated = sorted({i for i in found if found.count(i) > 1})
        raise UserError(f"parts of {n} shards: missing {missing}, repeated {repeated}", key="PARTS")
    loaded.sort(key=lambda item: item[1]["shard"][0])
    meta = first["meta"]
    audio_only = "text_embeds" not in loaded[0][2]
    label_keys = ("audio_ids",) if audio_only else ("text_to_audio", "audio_ids", "captions")
    labels = {key: loaded[0][2][key] for key in label_keys}
    expected = {"audio": 0, "text": 0}
    for path, info, arrays in loaded:
        for key in labels:
            if not np.array_equal(arrays[key], labels[key]):
                raise UserError(
                    f"lists other clips or captions than {first_path.name}", source=path, key=key
                )
        for kind in ("audio",) if audio_only else ("audio", "text"):
            start, stop = info[f"{kind}_range"]
            rows = arrays[f"{kind}_embeds"].shape[0] if arrays[f"{kind}_embeds"].size else 0
            if start != expected[kind] or stop - start != rows:
                raise UserError(
                    f"{kind} rows {start}..{stop} do not continue the previous part", source=path
                )
            expected[kind] = stop
    audio = [a["audio_embeds"] for _, _, a in loaded if a["audio_embeds"].size]
    if audio_only:
        ids = [str(x) for x in labels["audio_ids"]]
        save_audio_dump(out, make_audio_dump(np.concatenate(audio), ids, meta))
        return dict(meta)
    text = [a["text_embeds"] for _, _, a in loaded if a["text_embeds"].size]
    audio_embeds, text_embeds = np.concatenate(audio), np.concatenate(text)
    dump = make_dump(
        audio_embeds,
        text_embeds,
        labels["text_to_audio"],
        audio_ids=labels["audio_ids"],
        captions=labels["captions"],
        meta=meta,
    )
    save_dump(out, dump)
    return dict(meta)

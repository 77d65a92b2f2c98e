"""The audio-only dump (``.npz``): what an encoder without a text tower gives.

``extract`` without ``--captions`` writes it (any encoder; an audio-only encoder can write
nothing else). It holds no texts and no relevance, so retrieval and zero-shot metrics do not
take it (they refuse it in one line); probes, classification and verification measures over
audio embeddings do.

=====================  ==========================  =========================================
key                    dtype / shape               meaning
=====================  ==========================  =========================================
``audio_embeds``       float32 or float64 [N, D]   one row per clip, finite
``audio_ids``          str [N]                     clip identifiers (file names), distinct
``meta_json``          str scalar (optional)       JSON object: model, weights, code, inputs
=====================  ==========================  =========================================

Read with ``allow_pickle=False`` like every ``.npz`` (:func:`audiorepro.formats.dump.read_npz`).

>>> d = make_audio_dump(np.eye(2, dtype=np.float32), ["a.wav", "b.wav"], {"model": "m"})
>>> d.audio_ids, d.audio_embeds.shape
(('a.wav', 'b.wav'), (2, 2))
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, npz_bytes, parse_json
from audiorepro.formats.dump import FLOAT_DTYPES, read_npz

KEYS = ("audio_embeds", "audio_ids", "meta_json")


@dataclass(frozen=True)
class AudioDump:
    """An audio-only dump as read (or about to be written)."""

    audio_embeds: npt.NDArray[np.floating[Any]]
    audio_ids: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"
    sha256: str | None = None


def is_audio_only(arrays: dict[str, Any]) -> bool:
    """Are these a dump file's arrays of an audio-only dump (no texts, no relevance)?"""
    return "audio_embeds" in arrays and "text_embeds" not in arrays and set(arrays) <= set(KEYS)


def _validate(arrays: dict[str, Any], *, source: str, sha256: str | None) -> AudioDump:
    def fail(key: str | None, msg: str) -> UserError:
        return UserError(msg, source=source, key=key)

    unknown = sorted(set(arrays) - set(KEYS))
    if unknown:
        raise fail(unknown[0], f"is not a key of an audio-only dump ({', '.join(KEYS)})")
    for key in ("audio_embeds", "audio_ids"):
        if key not in arrays:
            raise fail(key, "is missing (required in an audio-only dump)")
    audio = np.asarray(arrays["audio_embeds"])
    if audio.dtype not in FLOAT_DTYPES or audio.ndim != 2 or 0 in audio.shape:
        raise fail("audio_embeds", f"is {audio.dtype} {audio.shape}; expected float [N>0, D>0]")
    if not bool(np.all(np.isfinite(audio))):
        raise fail("audio_embeds", "has a non-finite value")
    ids = np.asarray(arrays["audio_ids"])
    if ids.dtype.kind != "U" or ids.shape != (audio.shape[0],):
        raise fail("audio_ids", f"is {ids.dtype} {ids.shape}; expected str ({audio.shape[0]},)")
    names = tuple(str(x) for x in ids)
    if len(set(names)) != len(names):
        raise fail("audio_ids", "names a clip twice; expected distinct clip ids")
    meta: Any = {}
    if "meta_json" in arrays:
        meta = parse_json(str(arrays["meta_json"]), source=source, key="meta_json")
        if not isinstance(meta, dict):
            raise fail("meta_json", "is not a JSON object")
    audio = np.ascontiguousarray(audio)
    audio.setflags(write=False)
    return AudioDump(audio, names, meta, source, sha256)


def make_audio_dump(
    audio_embeds: npt.ArrayLike, audio_ids: list[str] | tuple[str, ...], meta: dict[str, Any]
) -> AudioDump:
    """Validate and build an :class:`AudioDump` (the same checks as for a file)."""
    arrays = {
        "audio_embeds": np.asarray(audio_embeds),
        "audio_ids": np.asarray(list(audio_ids), dtype=str),
        "meta_json": np.asarray(json.dumps(meta, sort_keys=True)),
    }
    return _validate(arrays, source="<memory>", sha256=None)


def save_audio_dump(path: str | Path, dump: AudioDump) -> None:
    """Write it atomically; the bytes depend only on its contents."""
    arrays = {
        "audio_embeds": np.asarray(dump.audio_embeds),
        "audio_ids": np.asarray(list(dump.audio_ids), dtype=str),
        "meta_json": np.asarray(json.dumps(dump.meta, sort_keys=True)),
    }
    atomic_write_bytes(path, npz_bytes(arrays))


def load_audio_dump(path: str | Path) -> AudioDump:
    """Read and validate an audio-only dump; any problem is one line naming file and key."""
    path = Path(path)
    arrays = read_npz(path, what="an audio-only .npz dump")
    return _validate(arrays, source=str(path), sha256=sha256_file(path))

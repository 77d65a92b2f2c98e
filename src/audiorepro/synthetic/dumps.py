"""The synthetic fixture dumps: seeded, normalized exactly, machine-independent bytes.

Each dump is synthetic: clip vectors from a seeded PCG64 generator, captions as noisy copies of
their clip, a few duplicated clips (exact ties), and in one dump coarsely quantized values
(many exact ties), and one dump with class relevance instead of captions (format version 2:
class prompts, each relevant to every clip of its class). Normalization uses math.fsum and
math.sqrt (correctly rounded) so that the bytes do not depend on the CPU's SIMD width or the
BLAS. ``tools/make_fixtures.py dumps`` writes
them to ``fixtures/dumps/`` (checked against ``SHA256SUMS``); the demo study builds them here.
"""

from __future__ import annotations

import hashlib
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.io import atomic_write_bytes, npz_bytes
from audiorepro.specs.published import load_published


def _normalize(rows: npt.NDArray[Any]) -> npt.NDArray[Any]:
    out = np.empty_like(rows, dtype=np.float64)
    for i, row in enumerate(rows.astype(np.float64)):
        norm = math.sqrt(math.fsum((row * row).tolist()))
        out[i] = row / norm if norm > 0 else row
    return out


def _dump(
    seed: int,
    n_clips: int,
    dim: int,
    captions: list[int],
    noise: float,
    n_duplicates: int,
    dtype: type,
    quantize: float | None = None,
    name: str = "",
) -> dict[str, npt.NDArray[Any]]:
    rng = np.random.Generator(np.random.PCG64(seed))
    audio = rng.standard_normal((n_clips, dim))
    if n_duplicates:
        src = rng.choice(n_clips, n_duplicates, replace=False)
        dst = rng.choice(np.setdiff1d(np.arange(n_clips), src), n_duplicates, replace=False)
        audio[dst] = audio[src]
    audio = _normalize(audio)
    t2a = np.repeat(np.arange(n_clips), captions)
    text = _normalize(audio[t2a] + noise * rng.standard_normal((t2a.shape[0], dim)))
    if quantize is not None:
        audio = np.round(audio / quantize) * quantize
        text = np.round(text / quantize) * quantize
    ids = np.array([f"clip_{i:04d}.wav" for i in range(n_clips)])
    caps = np.array([f"caption {k} of clip {j}" for k, j in enumerate(t2a)])
    meta = {
        "dataset": name,
        "model": "synthetic",
        "generator": "tools/make_fixtures.py",
        "seed": seed,
    }
    return {
        "audio_embeds": audio.astype(dtype),
        "text_embeds": text.astype(dtype),
        "text_to_audio": t2a.astype(np.int64),
        "audio_ids": ids,
        "captions": caps,
        "meta_json": np.asarray(json.dumps(meta, sort_keys=True)),
    }


def _class_dump(
    seed: int,
    n_classes: int,
    per_class: int,
    dim: int,
    noise: float,
    n_duplicates: int,
    two_labels: int,
    dtype: type,
    name: str = "",
) -> dict[str, npt.NDArray[Any]]:
    """A zero-shot-classification-shaped dump (format version 2): one text per class (a
    prompt), relevant to every clip of its class; the first ``two_labels`` clips also belong
    to a second class (multi-label, so a2t queries have two relevant texts), a few clips are
    duplicated into other classes and one prompt's vector stands for a second class too
    (exact ties between relevant and non-relevant items in both directions)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    centers = rng.standard_normal((n_classes, dim))
    n_clips = n_classes * per_class
    label = np.arange(n_clips) % n_classes
    second = (label + 3) % n_classes
    audio = centers[label] + noise * rng.standard_normal((n_clips, dim))
    audio[:two_labels] += centers[second[:two_labels]]
    if n_duplicates:
        src = rng.choice(n_clips, n_duplicates, replace=False)
        dst = rng.choice(np.setdiff1d(np.arange(n_clips), src), n_duplicates, replace=False)
        audio[dst] = audio[src]  # labels kept: equal vectors, different classes (ties)
    audio = _normalize(audio)
    prompts = _normalize(centers + 0.5 * noise * rng.standard_normal((n_classes, dim)))
    # Text n_classes repeats the class-0 prompt but stands for class 1: equal vectors,
    # different relevance (ties between a relevant and a non-relevant text).
    text = np.concatenate([prompts, prompts[:1]])
    text_class = np.concatenate([np.arange(n_classes), [1]])
    indptr = [0]
    indices: list[int] = []
    for j in range(n_clips):
        classes = {int(label[j])} | ({int(second[j])} if j < two_labels else set())
        indices += sorted(int(i) for i in np.flatnonzero(np.isin(text_class, sorted(classes))))
        indptr.append(len(indices))
    ids = np.array([f"clip_{i:04d}.wav" for i in range(n_clips)])
    caps = np.array([f"This is a sound of class {int(k)}." for k in text_class])
    meta = {
        "dataset": name,
        "model": "synthetic",
        "generator": "tools/make_fixtures.py",
        "seed": seed,
        "prompt_template": "This is a sound of {class}.",
    }
    return {
        "audio_embeds": audio.astype(dtype),
        "text_embeds": text.astype(dtype),
        "relevance_indptr": np.asarray(indptr, dtype=np.int64),
        "relevance_indices": np.asarray(indices, dtype=np.int64),
        "format_version": np.asarray(2, dtype=np.int64),
        "audio_ids": ids,
        "captions": caps,
        "meta_json": np.asarray(json.dumps(meta, sort_keys=True)),
    }


def fixtures() -> dict[str, dict[str, npt.NDArray[Any]]]:
    """Every fixture dump, by file name."""
    return {
        # AudioCaps-like: one caption per clip, two duplicated clips.
        "synthetic_1cap.npz": _dump(
            11, 60, 32, [1] * 60, 0.9, 2, np.float32, name="synthetic_1cap"
        ),
        # Clotho-like: five captions per clip, duplicated clips.
        "synthetic_5cap.npz": _dump(
            12, 40, 32, [5] * 40, 0.9, 2, np.float32, name="synthetic_5cap"
        ),
        # Varying captions per clip (1 to 4), float64.
        "synthetic_varcap_f64.npz": _dump(
            13,
            30,
            16,
            [1 + (i * 7) % 4 for i in range(30)],
            0.8,
            1,
            np.float64,
            name="synthetic_varcap_f64",
        ),
        # Coarsely quantized values: many exact ties among relevant and non-relevant items.
        "synthetic_ties.npz": _dump(
            14, 25, 8, [3] * 25, 0.7, 3, np.float32, quantize=0.25, name="synthetic_ties"
        ),
        # Class relevance (format version 2, zero-shot shaped): 8 class prompts and one more
        # for class 1 (the class-0 prompt's vector), each relevant to its class's clips; 5
        # clips in two classes; 3 clips duplicated into other classes.
        "synthetic_classes.npz": _class_dump(
            15, 8, 6, 16, 2.5, 3, 5, np.float32, name="synthetic_classes"
        ),
    }


def write_all(out: Path) -> dict[str, str]:
    hashes = {}
    for name, arrays in fixtures().items():
        data = npz_bytes(arrays)
        atomic_write_bytes(out / name, data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    return hashes


def golden_5cap() -> dict[str, float]:
    """The published values of the demo's synthetic/5cap cell (package data
    ``data/demo_published.toml``: golden/fixtures/synthetic_5cap.yml's headline metrics)."""
    with resources.as_file(resources.files("audiorepro") / "data" / "demo_published.toml") as path:
        (cell,) = load_published(path)
    return dict(cell.values)

#!/usr/bin/env python3
"""Regenerate the shipped fixture dumps in fixtures/dumps/ bit-identically.

Each dump is synthetic: clip vectors from a seeded PCG64 generator, captions as noisy copies of
their clip, a few duplicated clips (exact ties), and in one dump coarsely quantized values
(many exact ties). Normalization uses math.fsum and math.sqrt (correctly rounded) so that the
bytes do not depend on the CPU's SIMD width or the BLAS. Usage:

    python tools/make_fixtures.py [--out fixtures/dumps] [--check]

``--check`` regenerates into a temporary folder and compares with SHA256SUMS.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.io import atomic_write_bytes, npz_bytes  # noqa: E402


def _normalize(rows: np.ndarray) -> np.ndarray:
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
) -> dict[str, np.ndarray]:
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


def fixtures() -> dict[str, dict[str, np.ndarray]]:
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
    }


def write_all(out: Path) -> dict[str, str]:
    hashes = {}
    for name, arrays in fixtures().items():
        data = npz_bytes(arrays)
        atomic_write_bytes(out / name, data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    return hashes


def sums_text(hashes: dict[str, str]) -> str:
    return "".join(f"{h}  {n}\n" for n, h in sorted(hashes.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "dumps")
    ap.add_argument("--check", action="store_true", help="compare with the shipped SHA256SUMS")
    args = ap.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            text = sums_text(write_all(Path(tmp)))
        shipped = (args.out / "SHA256SUMS").read_text()
        if text != shipped:
            print("fixtures differ from SHA256SUMS:\n" + text, file=sys.stderr)
            return 1
        print("fixtures regenerate bit-identically")
        return 0
    hashes = write_all(args.out)
    atomic_write_bytes(args.out / "SHA256SUMS", sums_text(hashes).encode())
    print(sums_text(hashes), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

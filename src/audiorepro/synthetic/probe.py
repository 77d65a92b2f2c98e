"""A synthetic probe study: prediction files of a few runs, made reproducibly from seeds.

Three models in three families (a frozen CLAP with a linear head, the same with an MLP head, a
fine-tuned Whisper encoder), each with two prediction files: one for the "crema-like" corpus
(24 regression targets with some items not annotated, 6-class acted-emotion classification
with actors as groups, vocal-burst events on a 20 ms grid, speaker vectors) and one for the
"ravdess-like" corpus (8-class classification only). Better models get less noise, so the
tables have a story, but every number comes from the metric code. Only PCG64 draws and
arithmetic (no SIMD transcendental kernels) go into the values, so the bytes are the same on
every machine. ``tools/make_fixtures.py probe`` writes them; the demo study builds them too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.io import atomic_write_bytes, npz_bytes

#: (run id prefix, model label, family, noise level)
MODELS = (
    ("clap-linear", "CLAP (frozen) + linear", "frozen + linear", 0.9),
    ("clap-mlp", "CLAP (frozen) + MLP", "frozen + MLP", 0.7),
    ("whisper-ft", "Whisper-base (fine-tuned)", "fine-tuned", 0.45),
)
TARGETS = ("valence", "arousal", "dominance", *(f"emotion_{i:02d}" for i in range(1, 22)))
CORPORA = {"crema-like": 6, "ravdess-like": 8}
FRAME = 0.02  # seconds per frame


def _rng(*key: object) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little")
    return np.random.Generator(np.random.PCG64(seed))


def _regression(noise: float, name: str) -> dict[str, npt.NDArray[Any]]:
    truth_rng = _rng("truth", "regression")
    n, k = 120, len(TARGETS)
    true = truth_rng.standard_normal((n, k)) * 1.5 + 3.0
    missing = truth_rng.random((n, k)) < 0.1
    true[missing] = np.nan
    true[:, len(TARGETS) - 1] = np.nan  # one target nobody annotated: every metric undefined
    pred = true + _rng(name, "regression").standard_normal((n, k)) * noise * 1.5
    pred[:, len(TARGETS) - 1] = 3.0
    return {
        "reg_names": np.asarray(TARGETS),
        "reg_true": true,
        "reg_pred": np.where(np.isnan(pred), 3.0, pred),
        "reg_train_sd": np.full(k, 1.5),
        "reg_train_mean": np.full(k, 3.0),
    }


def _classification(noise: float, name: str, corpus: str) -> dict[str, npt.NDArray[Any]]:
    classes = CORPORA[corpus]
    truth_rng = _rng("truth", corpus)
    m, actors = 12 * classes, 10
    true = np.arange(m) % classes
    group = np.asarray([f"actor_{i % actors:02d}" for i in truth_rng.permutation(m)])
    rng = _rng(name, corpus)
    wrong = rng.random(m) < noise * 0.6
    pred = np.where(wrong, rng.integers(0, classes, m), true)
    return {
        "cls_names": np.asarray([f"class_{c}" for c in range(classes)]),
        "cls_true": true.astype(np.int64),
        "cls_pred": pred.astype(np.int64),
        "cls_group": group,
    }


def _events(noise: float, name: str) -> dict[str, npt.NDArray[Any]]:
    truth_rng, rng = _rng("truth", "events"), _rng(name, "events")
    clips, frames_per_clip = 20, 250  # 5 s clips on the 20 ms grid
    ref, ref_clip, ref_cls, pred, pred_clip, pred_cls, oracle = [], [], [], [], [], [], []
    frame_true = np.zeros(clips * frames_per_clip, dtype=np.int64)
    frame_prob = np.zeros(clips * frames_per_clip)
    for clip in range(clips):
        for slot in range(int(truth_rng.integers(1, 4))):
            start = round(slot * 1.6 + float(truth_rng.random()) * 0.6, 2)
            end = round(start + 0.3 + float(truth_rng.random()) * 0.6, 2)
            cls = int(truth_rng.integers(0, 3))
            ref.append((start, end))
            ref_clip.append(clip)
            ref_cls.append(cls)
            oracle.append(cls if rng.random() > noise * 0.5 else int(rng.integers(0, 3)))
            first, last = round(start / FRAME), round(end / FRAME)
            frame_true[clip * frames_per_clip + first : clip * frames_per_clip + last] = 1
            if rng.random() < 1.0 - noise * 0.3:  # detected, with timing error
                shift = float(rng.standard_normal()) * noise * 0.15
                pred.append((round(start + shift, 2), round(end + shift * 0.5, 2)))
                pred_clip.append(clip)
                pred_cls.append(cls if rng.random() > noise * 0.4 else int(rng.integers(0, 3)))
        if rng.random() < noise * 0.3:  # a false alarm
            pred.append((4.5, 4.8))
            pred_clip.append(clip)
            pred_cls.append(0)
    jitter = rng.random(frame_prob.shape) * noise * 0.8
    frame_prob = np.clip(np.where(frame_true == 1, 0.9 - jitter, 0.05 + jitter * 0.6), 0.0, 1.0)
    return {
        "ev_ref": np.asarray(ref, dtype=np.float64),
        "ev_ref_clip": np.asarray(ref_clip, dtype=np.int64),
        "ev_ref_class": np.asarray(ref_cls, dtype=np.int64),
        "ev_oracle_class": np.asarray(oracle, dtype=np.int64),
        "ev_pred": np.asarray(pred, dtype=np.float64).reshape(-1, 2),
        "ev_pred_clip": np.asarray(pred_clip, dtype=np.int64),
        "ev_pred_class": np.asarray(pred_cls, dtype=np.int64),
        "frame_true": frame_true,
        "frame_prob": frame_prob,
    }


def _vectors(noise: float, name: str) -> dict[str, npt.NDArray[Any]]:
    truth_rng, rng = _rng("truth", "speaker"), _rng(name, "speaker")
    ref = truth_rng.standard_normal((30, 16))
    pred = ref + rng.standard_normal((30, 16)) * noise
    valid = np.ones(30, dtype=bool)
    valid[[3, 17]] = False
    return {"spk_ref": ref, "spk_pred": pred, "spk_valid": valid}


def probe_fixtures() -> dict[str, dict[str, npt.NDArray[Any]]]:
    """Every prediction file, by file name."""
    files: dict[str, dict[str, npt.NDArray[Any]]] = {}
    for run, _, _, noise in MODELS:
        files[f"{run}__crema-like.npz"] = {
            **_regression(noise, run),
            **_classification(noise, run, "crema-like"),
            **_events(noise, run),
            **_vectors(noise, run),
        }
        files[f"{run}__ravdess-like.npz"] = _classification(noise, run, "ravdess-like")
    return files


def write_probe_fixtures(out: Path) -> dict[str, str]:
    """Write every prediction file into ``out``; returns name -> SHA-256."""
    hashes = {}
    for name, arrays in probe_fixtures().items():
        data = npz_bytes(arrays)
        atomic_write_bytes(Path(out) / name, data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    return hashes

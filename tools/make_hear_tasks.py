#!/usr/bin/env python3
"""Build small HEAR 2021 tasks, laid out as hearpreprocess publishes them, from espeak-ng speech
and synthetic sounds: the same output for the same espeak-ng release, byte for byte.

Three tasks, one of each kind heareval 2021.1.3 scores (about 3 MB at one sample rate)::

    words-v1-full/      scene, multiclass, trainvaltest: eight spoken words ("yes", "no",
                        "up", "down", "left", "right", "stop", "go") by the six espeak-ng
                        voices of tools/make_speech.py; train = voices 1-4, valid = 5, test = 6;
                        1.0 s clips; scored by top1_acc (speech_commands' protocol)
    mixtures-v1-full/   scene, multilabel, presplit_kfold (4 folds): 1.0 s mixtures of one to
                        three of "hum" (110 Hz and harmonics), "whistle" (a 2 kHz tone with
                        vibrato), "noise" (band-passed white noise) and "speech" (an espeak-ng
                        word); scored by mAP, d_prime and aucroc (FSD50K's)
    events-v1-full/     event, multilabel, trainvaltest: 4.0 s scenes of low background noise
                        with 1 to 4 events of "beep" (1 kHz), "chirp" (a 500-3000 Hz sweep) and
                        "word" (an espeak-ng word) at onsets on a 10 ms grid; scored by
                        event_onset_200ms_fms and segment_1s_er (DCASE 2016 task 2's)

Each task folder holds what hearpreprocess's FinalCombine writes: ``task_metadata.json``
(its task config with ``mode`` and ``splits`` added, ``json.dump(indent=True)``),
``labelvocabulary.csv`` (``idx,label``, labels sorted), ``<split>.json`` (file -> labels, or
file -> events ``{"label", "start", "end"}`` in milliseconds, files sorted) and the audio at
each sample rate under ``<rate>/<split>/<name>.wav`` (mono 16-bit PCM, written with Python's
``wave``). Clips are trimmed or padded to ``sample_duration`` as hearpreprocess does.

How a sound is made: espeak-ng as in tools/make_speech.py (22,050 Hz, cut to the speech);
synthetic sounds in float64 at 48 kHz from ``numpy.random.default_rng(SEED + clip number)``;
every clip resampled from its source rate by ``scipy.signal.resample_poly`` (the exact
reduced ratio, default Kaiser window), peak-normalised to 0.5 where louder, rounded half to
even to int16. Labels and events come from the same seeded generator, never from the audio.

Usage::

    python tools/make_hear_tasks.py OUT                      # OUT/<task>/ at 16 kHz
    python tools/make_hear_tasks.py OUT --sample-rate 16000 --sample-rate 48000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from math import gcd
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_speech import ESPEAK_RATE, VOICES, _speak, pcm_wav_bytes

SYNTH_RATE = 48_000
SEED = 46
WORDS = ("yes", "no", "up", "down", "left", "right", "stop", "go")
MIXTURE_LABELS = ("hum", "whistle", "noise", "speech")
EVENT_LABELS = ("beep", "chirp", "word")
Clip = tuple[np.ndarray, int]  # samples (float64), sample rate


def _resample(samples: np.ndarray, source: int, target: int) -> np.ndarray:
    from scipy.signal import resample_poly

    if source == target:
        return samples
    g = gcd(source, target)
    return resample_poly(samples, target // g, source // g)


def _fit(samples: np.ndarray, rate: int, seconds: float) -> np.ndarray:
    """Trim or zero-pad to ``seconds`` (hearpreprocess's trim_pad_wav)."""
    n = round(seconds * rate)
    return samples[:n] if len(samples) >= n else np.pad(samples, (0, n - len(samples)))


def _wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    peak = float(np.max(np.abs(samples))) if samples.size else 0.0
    return pcm_wav_bytes(samples * (0.5 / peak) if peak > 0.5 else samples, rate)


class Speech:
    """espeak-ng words, spoken once each (cached) in a temporary folder."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cache: dict[tuple[int, str], np.ndarray] = {}

    def word(self, voice: int, text: str) -> np.ndarray:
        """The word at 48 kHz, float64."""
        if (voice, text) not in self.cache:
            raw = _speak(VOICES[voice], text, self.tmp)
            self.cache[voice, text] = _resample(raw, ESPEAK_RATE, SYNTH_RATE)
        return self.cache[voice, text]


def _tone(freq: float, seconds: float, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(int(seconds * SYNTH_RATE)) / SYNTH_RATE
    phase = rng.uniform(0, 2 * np.pi)
    ramp = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)  # 10 ms fades: no clicks
    return 0.3 * np.sin(2 * np.pi * freq * t + phase) * ramp


def _hum(seconds: float, rng: np.random.Generator) -> np.ndarray:
    return sum(_tone(110.0 * k, seconds, rng) / k for k in (1, 2, 3))  # type: ignore[return-value]


def _whistle(seconds: float, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(int(seconds * SYNTH_RATE)) / SYNTH_RATE
    vibrato = 40.0 * np.sin(2 * np.pi * 5.0 * t)
    return 0.25 * np.sin(2 * np.pi * np.cumsum(2000.0 + vibrato) / SYNTH_RATE + rng.uniform(0, 6))


def _noise(seconds: float, rng: np.random.Generator) -> np.ndarray:
    from scipy.signal import butter, sosfilt

    sos = butter(4, (800.0, 4000.0), btype="bandpass", fs=SYNTH_RATE, output="sos")
    return 0.4 * sosfilt(sos, rng.standard_normal(int(seconds * SYNTH_RATE)))


def _chirp(seconds: float, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(int(seconds * SYNTH_RATE)) / SYNTH_RATE
    freq = 500.0 + 2500.0 * t / max(seconds, 1e-9)
    ramp = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)
    return 0.3 * np.sin(2 * np.pi * np.cumsum(freq) / SYNTH_RATE + rng.uniform(0, 6)) * ramp


def _place(scene: np.ndarray, sound: np.ndarray, start: int) -> None:
    end = min(len(scene), start + len(sound))
    scene[start:end] += sound[: end - start]


def words_task(speech: Speech) -> tuple[dict[str, dict[str, Clip]], dict[str, dict[str, object]]]:
    """Audio and labels per split of the spoken-words task."""
    audio: dict[str, dict[str, Clip]] = {"train": {}, "valid": {}, "test": {}}
    labels: dict[str, dict[str, object]] = {"train": {}, "valid": {}, "test": {}}
    for v in range(len(VOICES)):
        split = "train" if v < 4 else "valid" if v == 4 else "test"
        for word in WORDS:
            name = f"{VOICES[v].speaker}_{word}.wav"
            audio[split][name] = (speech.word(v, word), SYNTH_RATE)
            labels[split][name] = [word]
    return audio, labels


def mixtures_task(
    speech: Speech,
) -> tuple[dict[str, dict[str, Clip]], dict[str, dict[str, object]]]:
    """Audio and label sets per fold of the mixtures task (8 clips a fold)."""
    makers: dict[str, Callable[[np.random.Generator], np.ndarray]] = {
        "hum": lambda rng: _hum(1.0, rng),
        "whistle": lambda rng: _whistle(1.0, rng),
        "noise": lambda rng: _noise(1.0, rng),
        "speech": lambda rng: speech.word(int(rng.integers(len(VOICES))), str(rng.choice(WORDS))),
    }
    audio: dict[str, dict[str, Clip]] = {}
    labels: dict[str, dict[str, object]] = {}
    for i in range(32):
        rng = np.random.default_rng(SEED + 1000 + i)
        fold = f"fold{i % 4:02d}"
        count = int(rng.integers(1, 4))
        present = sorted(str(x) for x in rng.choice(MIXTURE_LABELS, size=count, replace=False))
        clip = np.zeros(SYNTH_RATE)
        for label in present:
            _place(clip, makers[label](rng), 0)
        name = f"mix{i:03d}.wav"
        audio.setdefault(fold, {})[name] = (clip, SYNTH_RATE)
        labels.setdefault(fold, {})[name] = present
    return audio, labels


def _event_scene(i: int, speech: Speech) -> tuple[np.ndarray, list[dict[str, object]]]:
    rng = np.random.default_rng(SEED + 2000 + i)
    scene = 0.01 * rng.standard_normal(4 * SYNTH_RATE)
    events: list[dict[str, object]] = []
    for _ in range(int(rng.integers(1, 5))):
        label = str(rng.choice(EVENT_LABELS))
        start_ms = float(10 * rng.integers(0, 330))  # onsets on a 10 ms grid, before 3.3 s
        if label == "word":
            sound = speech.word(int(rng.integers(len(VOICES))), str(rng.choice(WORDS)))
        else:
            seconds = float(rng.integers(15, 60)) / 100.0
            sound = _tone(1000.0, seconds, rng) if label == "beep" else _chirp(seconds, rng)
        start = int(start_ms * SYNTH_RATE / 1000)
        _place(scene, sound, start)
        end_ms = min(4000.0, start_ms + 1000.0 * len(sound) / SYNTH_RATE)
        events.append({"label": label, "start": start_ms, "end": round(end_ms, 3)})
    events.sort(key=lambda e: (e["start"], e["end"], e["label"]))  # type: ignore[return-value]
    return scene, events


def events_task(
    speech: Speech,
) -> tuple[dict[str, dict[str, Clip]], dict[str, dict[str, object]]]:
    """Audio and events per split of the events task (12/4/4 scenes)."""
    audio: dict[str, dict[str, Clip]] = {"train": {}, "valid": {}, "test": {}}
    labels: dict[str, dict[str, object]] = {"train": {}, "valid": {}, "test": {}}
    for i in range(20):
        split = "train" if i < 12 else "valid" if i < 16 else "test"
        scene, events = _event_scene(i, speech)
        name = f"scene{i:03d}.wav"
        audio[split][name] = (scene, SYNTH_RATE)
        labels[split][name] = events
    return audio, labels


def _config(name: str, embedding: str, prediction: str, split_mode: str, duration: float,
            evaluation: list[str], splits: list[str]) -> dict[str, object]:  # fmt: skip
    """The task config as hearpreprocess writes it (its runner adds mode and splits)."""
    config: dict[str, object] = {
        "task_name": name,
        "version": "v1",
        "embedding_type": embedding,
        "prediction_type": prediction,
        "split_mode": split_mode,
        "sample_duration": duration,
        "evaluation": evaluation,
        "download_urls": [],
        "default_mode": "full",
    }
    if split_mode == "trainvaltest":
        config["max_task_duration_by_split"] = {"train": None, "valid": None, "test": None}
    else:
        config["nfolds"] = len(splits)
        config["max_task_duration_by_fold"] = None
    config["mode"] = "full"
    config["splits"] = splits
    return config


TASKS = {
    "words": ("scene", "multiclass", "trainvaltest", 1.0, ["top1_acc"], words_task),
    "mixtures": (
        "scene", "multilabel", "presplit_kfold", 1.0, ["mAP", "d_prime", "aucroc"], mixtures_task
    ),
    "events": (
        "event", "multilabel", "trainvaltest", 4.0, ["event_onset_200ms_fms", "segment_1s_er"],
        events_task,
    ),
}  # fmt: skip


def write_task(out: Path, name: str, speech: Speech, sample_rates: tuple[int, ...]) -> Path:
    """Write one task folder ``out/<name>-v1-full/``; returns it."""
    embedding, prediction, split_mode, duration, evaluation, build = TASKS[name]
    audio, labels = build(speech)  # type: ignore[operator]
    splits = ["train", "valid", "test"] if split_mode == "trainvaltest" else sorted(audio)
    folder = out / f"{name}-v1-full"
    folder.mkdir(parents=True, exist_ok=True)
    config = _config(name, embedding, prediction, split_mode, duration, evaluation, splits)  # type: ignore[arg-type]
    (folder / "task_metadata.json").write_text(json.dumps(config, indent=True))
    vocab: set[str] = set()
    for split in splits:
        table = {n: labels[split][n] for n in sorted(labels[split])}
        for value in table.values():
            vocab |= {e["label"] if isinstance(e, dict) else e for e in value}  # type: ignore[attr-defined]
        (folder / f"{split}.json").write_text(json.dumps(table, indent=True))
        for rate in sample_rates:
            split_dir = folder / str(rate) / split
            split_dir.mkdir(parents=True, exist_ok=True)
            for clip_name, (samples, source) in sorted(audio[split].items()):
                fitted = _fit(_resample(samples, source, rate), rate, duration)
                (split_dir / clip_name).write_bytes(_wav_bytes(fitted, rate))
    rows = "".join(f"{i},{label}\n" for i, label in enumerate(sorted(vocab)))
    (folder / "labelvocabulary.csv").write_text("idx,label\n" + rows)
    return folder


def build(out: Path, sample_rates: tuple[int, ...] = (16_000,)) -> list[Path]:
    """Write every task under ``out``; returns the task folders."""
    with tempfile.TemporaryDirectory() as tmp:
        speech = Speech(Path(tmp))
        return [write_task(out, name, speech, sample_rates) for name in TASKS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the task folders into")
    parser.add_argument(
        "--sample-rate", type=int, action="append", help="audio rate (repeatable; default 16000)"
    )
    args = parser.parse_args(argv)
    import shutil

    if shutil.which("espeak-ng") is None:
        print("make_hear_tasks: espeak-ng is not on PATH (apt-get install espeak-ng)")
        return 2
    rates = tuple(sorted(set(args.sample_rate or [16_000])))
    for folder in build(args.out, rates):
        print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

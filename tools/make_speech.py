#!/usr/bin/env python3
"""Build the fixture speech set (``fixtures/speech/``) with espeak-ng, or check it.

Real speech for the tests of real speaker encoders (resemblyzer): six synthetic speakers, each
an espeak-ng voice with a variant, a speaking rate and a pitch (all pinned below), saying the
same eight sentences: 48 clips of 1.6 to 2.6 seconds (98 s in all), 16 kHz mono 16-bit PCM WAV.

How a clip is made, every step named so that it repeats byte for byte:

1. ``espeak-ng -v VOICE -s RATE -p PITCH -w raw.wav TEXT`` (22,050 Hz, 16-bit mono);
2. the samples as float64 (``int16 / 32768``), cut to the speech (from 0.1 s before the first
   sample louder than 2^-10 to 0.1 s after the last: espeak-ng pads with silence), resampled
   to 16 kHz by ``scipy.signal.resample_poly(x, 320, 441)`` (the exact ratio 16000/22050,
   its default Kaiser window), rounded half to even, clipped to int16;
3. written with Python's own ``wave`` module (a 44-byte header, no metadata), named
   ``SPEAKER_NN.wav``.

``speakers.csv`` lists each clip's speaker (``file_name,speaker``), ``trials.csv`` every
unordered pair of clips as a speaker-verification trial list (``enrollment,test,target``, the
pairs ``i < j`` in clip order, target 1 when both clips are of one voice:
:mod:`audiorepro.formats.trials`), and ``SHA256SUMS`` every file's SHA-256. The WAV files
are committed with their hashes, because espeak-ng's output is only known to repeat within one
release: ``espeak-ng.txt`` records the release that made them.

``--check`` verifies the committed files against ``SHA256SUMS``; then, where espeak-ng is on
PATH, regenerates the set in a temporary folder: with the recorded release the regeneration
must equal ``SHA256SUMS`` byte for byte, with another release it must at least repeat itself
(two regenerations byte-identical), and the script says that its output is not the committed
one. Exit 1 when a check fails, 2 when espeak-ng is needed and missing.

Usage::

    python tools/make_speech.py            # rewrite fixtures/speech/ (needs espeak-ng)
    python tools/make_speech.py --check    # verify the committed set (and regenerate it)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "speech"
SAMPLE_RATE = 16_000
ESPEAK_RATE = 22_050


class Voice(NamedTuple):
    speaker: str
    voice: str  # espeak-ng -v (language voice + variant)
    rate: int  # espeak-ng -s, words per minute
    pitch: int  # espeak-ng -p, 0-99


VOICES = (
    Voice("spk1", "en-us+m1", 175, 45),
    Voice("spk2", "en-gb+f2", 185, 60),
    Voice("spk3", "en-gb-scotland+m3", 170, 35),
    Voice("spk4", "en-029+f4", 180, 55),
    Voice("spk5", "en-us+m7", 190, 50),
    Voice("spk6", "en-gb-x-rp+f5", 175, 70),
)

TEXTS = (
    "A quiet river runs past the old mill.",
    "Bring the blue folder to the meeting.",
    "Seven small boats sailed into the harbor.",
    "She reads the morning news by the window.",
    "The train leaves the station at noon.",
    "Warm bread smells better than anything.",
    "He painted the fence a bright green.",
    "Our team finished the puzzle before dinner.",
)


def espeak_release() -> str | None:
    """``espeak-ng --version`` without its data path (``eSpeak NG text-to-speech: 1.51``)."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    return out.split("  Data at:")[0].strip()


def _speak(voice: Voice, text: str, tmp: Path) -> np.ndarray:
    raw = tmp / "raw.wav"
    cmd = ["espeak-ng", "-v", voice.voice, "-s", str(voice.rate), "-p", str(voice.pitch)]
    subprocess.run([*cmd, "-w", str(raw), text], check=True, capture_output=True)
    with wave.open(str(raw), "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (ESPEAK_RATE, 1, 2):
            raise SystemExit(f"make_speech: espeak-ng wrote an unexpected format for {voice}")
        frames = w.readframes(w.getnframes())
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float64) / 32768.0
    # espeak-ng pads each sentence with silence: keep 0.1 s of it either side of the speech.
    loud = np.flatnonzero(np.abs(samples) > 2**-10)
    margin = ESPEAK_RATE // 10
    return samples[max(0, loud[0] - margin) : loud[-1] + 1 + margin]


def pcm_wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """Float samples as a mono 16-bit PCM WAV (rounded half to even, clipped; Python's
    ``wave``: a 44-byte header, no metadata). tools/make_hear_tasks.py writes its clips so too."""
    pcm = np.clip(np.rint(samples * 32768.0), -32768, 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buffer.getvalue()


def _wav_bytes(samples: np.ndarray) -> bytes:
    from scipy.signal import resample_poly

    return pcm_wav_bytes(resample_poly(samples, 320, 441), SAMPLE_RATE)


def trials_text(clips: list[tuple[str, str]]) -> str:
    """Every unordered pair of ``(clip, speaker)`` s (``i < j``, in the order given) as a trial
    list; target 1 when both are of one speaker.

    >>> print(trials_text([("a.wav", "s1"), ("b.wav", "s1"), ("c.wav", "s2")]), end="")
    enrollment,test,target
    a.wav,b.wav,1
    a.wav,c.wav,0
    b.wav,c.wav,0
    """
    lines = ["enrollment,test,target\n"]
    for k, (a, speaker) in enumerate(clips):
        lines += [f"{a},{b},{int(speaker == other)}\n" for b, other in clips[k + 1 :]]
    return "".join(lines)


def build(out: Path) -> dict[str, str]:
    """Write every clip, ``speakers.csv`` and ``trials.csv`` into ``out``; returns name ->
    SHA-256."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    clips: list[tuple[str, str]] = []  # (file name, speaker)
    with tempfile.TemporaryDirectory() as tmp:
        for voice in VOICES:
            for i, text in enumerate(TEXTS, 1):
                name = f"{voice.speaker}_{i:02d}.wav"
                files[name] = _wav_bytes(_speak(voice, text, Path(tmp)))
                clips.append((name, voice.speaker))
    files["speakers.csv"] = (
        "file_name,speaker\n" + "".join(f"{n},{s}\n" for n, s in clips)
    ).encode()
    files["trials.csv"] = trials_text(clips).encode()
    for name, data in files.items():
        (out / name).write_bytes(data)
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def sums_text(sums: dict[str, str]) -> str:
    return "".join(f"{sums[name]}  {name}\n" for name in sorted(sums))


def read_sums(folder: Path) -> dict[str, str]:
    """``SHA256SUMS`` as name -> SHA-256."""
    pairs = (line.split("  ", 1) for line in (folder / "SHA256SUMS").read_text().splitlines())
    return {name: digest for digest, name in pairs}


def check_committed(folder: Path = OUT) -> list[str]:
    """Problems of the committed set: a file missing, changed or not listed in SHA256SUMS."""
    sums = read_sums(folder)
    problems = []
    for name, digest in sorted(sums.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{name}: SHA-256 differs from SHA256SUMS")
    listed = set(sums) | {"SHA256SUMS", "espeak-ng.txt"}
    problems += [f"{p.name}: not in SHA256SUMS" for p in folder.iterdir() if p.name not in listed]
    return problems


def check(folder: Path = OUT) -> int:
    problems = check_committed(folder)
    for p in problems:
        print(f"fixtures/speech/{p}", file=sys.stderr)
    if problems:
        return 1
    print(f"fixtures/speech: {len(read_sums(folder))} files agree with SHA256SUMS")
    release = espeak_release()
    if release is None:
        print("make_speech: espeak-ng is not on PATH; cannot regenerate", file=sys.stderr)
        return 2
    recorded = (folder / "espeak-ng.txt").read_text().strip()
    with tempfile.TemporaryDirectory() as tmp:
        first = build(Path(tmp) / "a")
        if release == recorded:
            if sums_text(first) != (folder / "SHA256SUMS").read_text():
                print(f"fixtures/speech differ from a regeneration with {release}", file=sys.stderr)
                return 1
            print(f"fixtures/speech regenerate byte-identically with {release}")
            return 0
        second = build(Path(tmp) / "b")
    if first != second:
        print(f"make_speech: two regenerations with {release} differ", file=sys.stderr)
        return 1
    differing = sum(first[n] != d for n, d in read_sums(folder).items())
    print(
        f"fixtures/speech were made by {recorded}; this is {release}, whose output repeats "
        f"itself but differs in {differing} of {len(first)} files (the committed files are used)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="verify the committed set")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    release = espeak_release()
    if release is None:
        print("make_speech: espeak-ng is not on PATH (apt-get install espeak-ng)", file=sys.stderr)
        return 2
    if OUT.exists():
        shutil.rmtree(OUT)
    sums = build(OUT)
    (OUT / "SHA256SUMS").write_text(sums_text(sums))
    (OUT / "espeak-ng.txt").write_text(release + "\n")
    print(f"wrote {len(sums)} files to {OUT.relative_to(ROOT)} with {release}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

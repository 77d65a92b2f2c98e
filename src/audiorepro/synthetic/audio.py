"""The synthetic fixture clips: tones, a chirp, noise, clicks, a stereo chord, one long clip.

Six short clips at several sample rates, written as 16-bit PCM WAV with the standard library's
:mod:`wave` module, and a Clotho-layout caption file with five captions per clip. Samples come
from :mod:`math` (one libm call per sample, not a SIMD numpy kernel whose last bit can depend on
the CPU) and PCG64 integers, rounded to int16, so the bytes do not depend on the machine.
``tools/make_fixtures.py audio`` writes them to ``fixtures/audio/`` (checked against
``SHA256SUMS`` by the tests); ``audiorepro identity`` synthesizes its default fixture from here.

``long_am_tone.wav`` (11 s) exercises cropping and fusion. The identity fixture leaves it out
(:data:`IDENTITY_CLIPS`): with every clip at most 10 s, as in AudioCaps, a batch has no "longer"
clip, which is when Hugging Face's extractor flags a random one.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

from audiorepro.core.io import atomic_write_bytes

TWO_PI = 2.0 * math.pi


def _tone(freq: float, amp: float = 0.5) -> Callable[[float], float]:
    return lambda t: amp * math.sin(TWO_PI * freq * t)


def _chirp(f0: float, f1: float, duration: float) -> Callable[[float], float]:
    rate = (f1 - f0) / duration
    return lambda t: 0.5 * math.sin(TWO_PI * (f0 * t + 0.5 * rate * t * t))


def _clicks(per_second: float, width: float) -> Callable[[float], float]:
    period = 1.0 / per_second
    return lambda t: 0.8 if (t % period) < width else 0.0


def _am_tone(freq: float, mod: float) -> Callable[[float], float]:
    return lambda t: 0.4 * (1.0 + 0.8 * math.sin(TWO_PI * mod * t)) * math.sin(TWO_PI * freq * t)


def _render(fn: Callable[[float], float], rate: int, seconds: float) -> list[int]:
    n = round(rate * seconds)
    return [max(-32767, min(32767, round(32767 * fn(i / rate)))) for i in range(n)]


def _noise(rate: int, seconds: float, seed: int) -> list[int]:
    rng = np.random.Generator(np.random.PCG64(seed))
    return [int(v) for v in rng.integers(-12000, 12001, size=round(rate * seconds))]


def _wav(channels: list[list[int]], rate: int) -> bytes:
    frames = np.array(channels, dtype="<i2").T.copy()  # (n, channels), little-endian
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(len(channels))
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames.tobytes())
    return buf.getvalue()


# name -> (rate, channels (each a list of int16 samples), five captions)
def _clips() -> dict[str, tuple[int, list[list[int]], list[str]]]:
    return {
        "tone_440.wav": (
            48_000,
            [_render(_tone(440.0), 48_000, 3.0)],
            [
                "a steady high pitched tone",
                "a pure beep that does not change",
                "one constant sine tone",
                "a flat electronic hum at a high pitch",
                "a test tone plays without stopping",
            ],
        ),
        "chirp_up.wav": (
            44_100,
            [_render(_chirp(200.0, 4000.0, 4.0), 44_100, 4.0)],
            [
                "a tone sweeps upward in pitch",
                "a rising whistle gets higher and higher",
                "a sound glides from low to high",
                "an ascending electronic sweep",
                "the pitch climbs steadily",
            ],
        ),
        "noise_burst.wav": (
            16_000,
            [_noise(16_000, 2.0, seed=7)],
            [
                "loud static noise",
                "a burst of white noise hisses",
                "rushing hiss like a detuned radio",
                "broadband noise with no tone",
                "harsh static crackles",
            ],
        ),
        "chord_stereo.wav": (
            48_000,
            [_render(_tone(261.63, 0.4), 48_000, 3.0), _render(_tone(329.63, 0.4), 48_000, 3.0)],
            [
                "two notes play together as a chord",
                "a soft harmonious chord is held",
                "two tones sound at once",
                "a calm sustained chord",
                "an organ like chord rings",
            ],
        ),
        "clicks.wav": (
            22_050,
            [_render(_clicks(4.0, 0.004), 22_050, 2.5)],
            [
                "a clock ticks quickly",
                "rapid regular clicking",
                "short sharp clicks repeat",
                "a metronome clicks four times a second",
                "a steady train of ticks",
            ],
        ),
        "long_am_tone.wav": (
            16_000,
            [_render(_am_tone(330.0, 3.0), 16_000, 11.0)],
            [
                "a wobbling tone pulses for a long time",
                "a tone swells and fades over and over",
                "a long warbling hum",
                "a pulsing siren like tone",
                "a tremolo tone keeps going",
            ],
        ),
    }


def _captions_csv(clips: dict[str, tuple[int, list[list[int]], list[str]]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["file_name"] + [f"caption_{i}" for i in range(1, 6)])
    for name, (_, _, captions) in clips.items():
        writer.writerow([name, *captions])
    return buf.getvalue().encode("utf-8")


def build(out: Path, names: tuple[str, ...] | None = None) -> dict[str, str]:
    """Write the clips (all, or ``names``) and ``captions.csv``; returns name -> SHA-256."""
    clips = _clips()
    if names is not None:
        clips = {name: clips[name] for name in names}
    files = {name: _wav(channels, rate) for name, (rate, channels, _) in clips.items()}
    files["captions.csv"] = _captions_csv(clips)
    sums = {}
    for name, data in files.items():
        atomic_write_bytes(out / name, data)
        sums[name] = hashlib.sha256(data).hexdigest()
    return sums


#: The clips of ``audiorepro identity``'s default fixture (all at most 10 s).
IDENTITY_CLIPS = (
    "tone_440.wav",
    "chirp_up.wav",
    "noise_burst.wav",
    "chord_stereo.wav",
    "clicks.wav",
)
IDENTITY_FIXTURE = "audiorepro-synthetic-5"

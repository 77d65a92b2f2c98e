"""Reading audio the same way every time: decode, mix to mono, resample to 48 kHz.

Every decision is named so that it can be recorded in a dump's ``meta_json``:

- decoding: :mod:`soundfile` (libsndfile: wav, flac, ogg, mp3 where libsndfile has it), read
  as float64;
- mono: the mean of the channels, in float64;
- resampling: :data:`RESAMPLER`, a polyphase FIR filter from :func:`scipy.signal.resample_poly`
  with its default Kaiser window; integer ratios only, so the result depends on nothing but the
  samples and the two rates;
- the result is float32, the dtype both CLAP pipelines take.

A clip that cannot be decoded, is empty, holds non-finite samples or is entirely silent is a
:class:`~audiorepro.core.errors.UserError` naming the file: a silent clip has no meaningful
embedding (both pipelines would embed padding), so it is refused rather than silently scored.
"""

from __future__ import annotations

import hashlib
from math import gcd
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError

#: The model sample rate of every CLAP checkpoint audiorepro knows.
SAMPLE_RATE = 48_000
#: The resampler's name as recorded in dumps.
RESAMPLER = "scipy.signal.resample_poly(window=('kaiser', 5.0))"
#: File name endings offered to the decoder when ``--audio`` is a folder.
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif")


def to_mono(samples: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Mix ``(frames,)`` or ``(frames, channels)`` samples down to one channel by the mean.

    >>> to_mono(np.array([[1.0, 0.0], [0.5, 0.5]]))
    array([0.5, 0.5])
    """
    if samples.ndim == 1:
        return samples
    return np.asarray(samples.mean(axis=1), dtype=np.float64)


def resample(
    samples: npt.NDArray[np.float64], rate: int, target: int = SAMPLE_RATE
) -> npt.NDArray[np.float64]:
    """Resample with a polyphase filter by the reduced integer ratio ``target/rate``.

    >>> resample(np.ones(4), 24_000, 48_000).shape
    (8,)
    """
    if rate == target:
        return samples
    # scipy.signal takes half a second to import: only a clip that needs resampling pays it,
    # not every command line start.
    from scipy.signal import resample_poly

    g = gcd(rate, target)
    out = resample_poly(samples, target // g, rate // g)
    return np.asarray(out, dtype=np.float64)


def read_audio(path: str | Path, target: int = SAMPLE_RATE) -> npt.NDArray[np.float32]:
    """Decode ``path`` to mono float32 at ``target`` Hz (see the module docstring)."""
    import soundfile

    path = Path(path)
    if not path.is_file():
        raise UserError("no such audio file", source=path)
    try:
        samples, rate = soundfile.read(str(path), dtype="float64", always_2d=False)
    except (RuntimeError, soundfile.LibsndfileError, TypeError, ValueError) as exc:
        raise UserError(
            f"cannot be decoded as audio ({exc}); expected a file libsndfile reads "
            f"({', '.join(AUDIO_SUFFIXES)})",
            source=path,
        ) from None
    samples = to_mono(np.asarray(samples, dtype=np.float64))
    if samples.size == 0:
        raise UserError("holds no audio frames (expected a non-empty clip)", source=path)
    if not np.all(np.isfinite(samples)):
        raise UserError("holds NaN or infinite samples", source=path)
    if not np.any(samples):
        raise UserError(
            "is silent (every sample is 0): a silent clip has no meaningful embedding",
            source=path,
        )
    return resample(samples, int(rate), target).astype(np.float32)


def audio_identity(path: str | Path) -> dict[str, Any]:
    """The identity of an input file as recorded in dumps: name, size and SHA-256."""
    path = Path(path)
    data = path.read_bytes()
    return {"file": path.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

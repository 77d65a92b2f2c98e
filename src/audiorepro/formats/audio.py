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

:func:`check_audio` refuses a bad clip before any model work, from its header (and, for float
samples, a streaming scan for NaN/inf): not a regular file (a FIFO, a folder, a symlink loop),
not decodable, no frames, more than :data:`MAX_CHANNELS` channels or :data:`MAX_SAMPLES`
samples (a clip is decoded whole, as float64: this bounds its memory), a sample rate outside
:data:`MIN_SAMPLE_RATE` to :data:`MAX_SAMPLE_RATE`, and for WAV files a
header that libsndfile would read leniently: a sample width other than 8/16/24/32-bit integer
or 32/64-bit float, or a data chunk declaring more bytes than the file holds (a truncated or
forged file, which libsndfile silently reads short); with ``scan``, a clip whose every sample
is 0 (streamed until the first block that is not).
"""

from __future__ import annotations

import struct
from math import gcd
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file, sha256_file

#: The model sample rate of every CLAP checkpoint audiorepro knows.
SAMPLE_RATE = 48_000
#: The resampler's name as recorded in dumps.
RESAMPLER = "scipy.signal.resample_poly(window=('kaiser', 5.0))"
#: File name endings offered to the decoder when ``--audio`` is a folder.
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif")
#: The most channels a clip may have (they are mixed to mono by the mean).
MAX_CHANNELS = 64
#: The most samples (frames x channels) a clip may hold: it is decoded whole as float64, so
#: this bounds one clip's memory at 512 MiB (23 minutes of 48 kHz mono, 11 of stereo;
#: evaluation clips are 10-30 s).
MAX_SAMPLES = 1 << 26
#: The sample rates a clip may declare, in Hz (both ends accepted): from below telephone
#: audio (8 kHz) to above the highest rate audio interfaces record (384 kHz). A clip is
#: resampled to :data:`SAMPLE_RATE` by the reduced ratio, whose polyphase filter grows with
#: the rate: a header claiming 2147483647 Hz asked :func:`resample` for a 320 GiB filter.
MIN_SAMPLE_RATE = 1_000
MAX_SAMPLE_RATE = 384_000
#: WAV sample widths libsndfile reads exactly, by format tag (1 integer PCM, 3 IEEE float).
_WAV_WIDTHS = {1: (8, 16, 24, 32), 3: (32, 64)}
_WAV_EXTENSIBLE = 0xFFFE


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


def _wav_problem(path: Path) -> str | None:
    """What libsndfile would read leniently in a RIFF/WAVE file's header, from its chunk
    headers alone: a sample width it rounds up, a data chunk longer than the file. None for
    another format, a header it reads as declared, or one it refuses itself."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        pos, fmt_seen = 12, False
        for _ in range(1000):  # a chunk list longer than this is not a clip
            f.seek(pos)
            chunk = f.read(8)
            if len(chunk) < 8:
                return None  # no data chunk: libsndfile names the problem
            name, length = chunk[:4], struct.unpack("<I", chunk[4:])[0]
            if name == b"fmt ":
                fmt = f.read(min(length, 40))
                if len(fmt) < 16:
                    return None  # libsndfile: "Malformed 'fmt ' chunk"
                tag, channels, _rate, _rate_bytes, align, bits = struct.unpack("<HHIIHH", fmt[:16])
                if tag == _WAV_EXTENSIBLE and len(fmt) >= 26:
                    tag = struct.unpack("<H", fmt[24:26])[0]
                if tag in _WAV_WIDTHS and bits not in _WAV_WIDTHS[tag]:
                    return (
                        f"declares {bits}-bit samples; expected "
                        f"{'/'.join(map(str, _WAV_WIDTHS[tag]))}-bit "
                        f"{'integer' if tag == 1 else 'float'} samples"
                    )
                if tag in _WAV_WIDTHS and align != channels * bits // 8:
                    return f"declares a block size of {align} bytes for {channels} x {bits} bits"
                fmt_seen = True
            elif name == b"data":
                if not fmt_seen:
                    return None
                held = size - pos - 8
                if length > held:
                    return (
                        f"declares {length} bytes of samples but holds {held} after the header "
                        "(a truncated or forged WAV file)"
                    )
                return None
            pos += 8 + length + (length & 1)
        return None


def check_audio(path: str | Path, *, scan: bool = True) -> None:
    """Refuse a clip that extraction could not use, before any model work (see the module
    docstring); reads the header, and (``scan``) streams float samples to look for NaN/inf."""
    import soundfile

    path = Path(path)
    check_regular_file(path, what="an audio file")
    problem = _wav_problem(path)
    if problem is not None:
        raise UserError(problem, source=path)
    try:
        info = soundfile.info(str(path))
    except (RuntimeError, soundfile.LibsndfileError, TypeError, ValueError) as exc:
        raise _undecodable(path, exc) from None
    if info.frames <= 0:
        raise UserError("holds no audio frames (expected a non-empty clip)", source=path)
    if not 1 <= info.channels <= MAX_CHANNELS:
        raise UserError(f"has {info.channels} channels; expected 1 to {MAX_CHANNELS}", source=path)
    if info.frames * info.channels > MAX_SAMPLES:
        raise UserError(
            f"declares {info.frames} frames x {info.channels} channels; expected at most "
            f"{MAX_SAMPLES} samples per clip (decoded whole, so larger clips are refused "
            "before reading)",
            source=path,
        )
    if not MIN_SAMPLE_RATE <= info.samplerate <= MAX_SAMPLE_RATE:
        raise UserError(
            f"declares a sample rate of {info.samplerate} Hz; expected {MIN_SAMPLE_RATE} to "
            f"{MAX_SAMPLE_RATE} Hz (refused from the header, before resampling to "
            f"{SAMPLE_RATE} Hz)",
            source=path,
        )
    if scan:
        _scan_samples(path, floating=info.subtype in ("FLOAT", "DOUBLE"))


def _scan_samples(path: Path, *, floating: bool) -> None:
    """Stream the samples in blocks: float samples are checked for NaN/inf to the end; a
    clip whose every sample is 0 is refused (read until the first block that is not silent,
    usually the first: an ordinary clip costs one block)."""
    import soundfile

    audible = False
    for block in soundfile.blocks(str(path), blocksize=1 << 16, dtype="float64"):
        if floating and not np.all(np.isfinite(block)):
            raise UserError("holds NaN or infinite samples", source=path)
        audible = audible or bool(np.any(block))
        if audible and not floating:
            return
    if not audible:
        raise UserError(
            "is silent (every sample is 0): a silent clip has no meaningful embedding",
            source=path,
        )


def _undecodable(path: Path, exc: Exception) -> UserError:
    return UserError(
        f"cannot be decoded as audio ({exc}); expected a file libsndfile reads "
        f"({', '.join(AUDIO_SUFFIXES)})",
        source=path,
    )


def read_audio(path: str | Path, target: int = SAMPLE_RATE) -> npt.NDArray[np.float32]:
    """Decode ``path`` to mono float32 at ``target`` Hz (see the module docstring)."""
    import soundfile

    path = Path(path)
    if not path.is_file():
        raise UserError("no such audio file", source=path)
    # Before decoding, from the header: a clip too large for memory is refused unread (the
    # decoded samples are checked for NaN below, so no separate scan).
    check_audio(path, scan=False)
    try:
        samples, rate = soundfile.read(str(path), dtype="float64", always_2d=False)
    except (RuntimeError, soundfile.LibsndfileError, TypeError, ValueError) as exc:
        raise _undecodable(path, exc) from None
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
    # Streamed: a clip is never read whole just to hash it.
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": sha256_file(path)}

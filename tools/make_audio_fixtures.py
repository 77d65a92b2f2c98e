#!/usr/bin/env python3
"""Regenerate the shipped fixture clips and captions in fixtures/audio/ bit-identically.

Six short synthetic clips (tones, a chirp, noise, clicks, a stereo chord and one clip longer
than ten seconds so that cropping and fusion are exercised) at several sample rates, written
as 16-bit PCM WAV with the standard library's :mod:`wave` module, and a Clotho-layout caption
file with five captions per clip. Samples come from :mod:`math` (one libm call per sample, not
a SIMD numpy kernel whose last bit can depend on the CPU) and PCG64 integers, then are rounded
to int16, so the bytes do not depend on the machine. Usage:

    python tools/make_audio_fixtures.py [--out fixtures/audio] [--check]

``--check`` regenerates into a temporary folder and compares with SHA256SUMS.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.fixture_audio import build  # noqa: E402
from audiorepro.io import regenerate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "fixtures" / "audio")
    parser.add_argument("--check", action="store_true", help="compare with SHA256SUMS")
    args = parser.parse_args(argv)
    return regenerate(build, args.out, check=args.check, label="fixture audio files")


if __name__ == "__main__":
    raise SystemExit(main())

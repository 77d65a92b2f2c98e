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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.fixture_dumps import write_all  # noqa: E402
from audiorepro.io import regenerate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "fixtures" / "dumps")
    parser.add_argument("--check", action="store_true", help="compare with SHA256SUMS")
    args = parser.parse_args(argv)
    return regenerate(write_all, args.out, check=args.check, label="fixture dumps")


if __name__ == "__main__":
    raise SystemExit(main())

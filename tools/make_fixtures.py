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
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.fixture_dumps import write_all  # noqa: E402
from audiorepro.io import atomic_write_bytes  # noqa: E402


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

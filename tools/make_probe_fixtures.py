#!/usr/bin/env python3
"""Regenerate the synthetic probe-study prediction files in fixtures/probe/ bit-identically.

Three models x two corpora (see ``audiorepro.fixture_probe``); the bundled demo study builds the
same files. Usage:

    python tools/make_probe_fixtures.py [--out fixtures/probe] [--check]

``--check`` regenerates into a temporary folder and compares with SHA256SUMS.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.fixture_probe import write_probe_fixtures  # noqa: E402
from audiorepro.io import regenerate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "fixtures" / "probe")
    parser.add_argument("--check", action="store_true", help="compare with SHA256SUMS")
    args = parser.parse_args(argv)
    label = "probe prediction files"
    return regenerate(write_probe_fixtures, args.out, check=args.check, label=label)


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Regenerate the shipped fixtures bit-identically, or check them against their SHA256SUMS.

Kinds (each in its own folder with a SHA256SUMS file; the generators live in the package, so
the demo study builds the very same bytes):

- ``dumps``: synthetic embedding dumps in ``fixtures/dumps/`` (``audiorepro.synthetic.dumps``);
- ``audio``: synthetic clips and captions in ``fixtures/audio/`` (``audiorepro.synthetic.audio``);
- ``probe``: synthetic probe-study prediction files and saved-measurement JSON files (with
  the failing study's tampered copy) in ``fixtures/probe/`` (``audiorepro.synthetic.probe``).

Usage::

    python tools/make_fixtures.py [dumps|audio|probe|all] [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.core.io import regenerate  # noqa: E402
from audiorepro.synthetic.audio import build as build_audio  # noqa: E402
from audiorepro.synthetic.dumps import write_all  # noqa: E402
from audiorepro.synthetic.probe import write_probe_fixtures  # noqa: E402

KINDS = {
    "dumps": (write_all, "fixture dumps"),
    "audio": (build_audio, "fixture audio files"),
    "probe": (write_probe_fixtures, "probe prediction and saved-measurement files"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", nargs="?", default="all", choices=[*KINDS, "all"])
    parser.add_argument("--check", action="store_true", help="compare with SHA256SUMS")
    args = parser.parse_args(argv)
    status = 0
    for kind in KINDS if args.kind == "all" else [args.kind]:
        build, label = KINDS[kind]
        status |= regenerate(build, ROOT / "fixtures" / kind, check=args.check, label=label)
    return status


if __name__ == "__main__":
    raise SystemExit(main())

"""The command line's entry point (``audiorepro``, ``python -m audiorepro``): a plain
``trec-eval`` command line runs without importing click (:mod:`.trec_fast`: trec-eval is called
in loops, and click with the command group is a third of its start-up on 100 queries); every
other goes through :func:`audiorepro.cli.app.main`, the click group, as before."""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit code."""
    from audiorepro.cli import trec_fast

    options = trec_fast.parse(sys.argv[1:] if argv is None else list(argv))
    if options is not None:
        return trec_fast.run(options)
    from audiorepro.cli.app import main as click_main

    return click_main(argv)


def group_attribute(name: str) -> Any:
    """``audiorepro.cli.cli`` (the click group), imported when it is asked for."""
    if name != "cli":
        raise AttributeError(f"module 'audiorepro.cli' has no attribute {name!r}")
    from audiorepro.cli.app import cli

    return cli

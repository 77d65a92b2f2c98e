"""The ``audiorepro`` command line: argument parsing and printing only.

:mod:`.app` holds the group and the entry point and knows every command by name and module;
a command's module, one per command group (:mod:`.study`, :mod:`.metrics`, :mod:`.extraction`,
:mod:`.diff`, :mod:`.evaluate`, ...), is imported when that command runs or its ``--help`` is
asked for, and imports its own work inside the command: ``audiorepro --help``, ``--version``
and a command's ``--help`` load none of the numeric stack. :mod:`.options` holds the options
several commands share.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point (``audiorepro``, ``python -m audiorepro``): a plain ``trec-eval`` command
    line runs without importing click (:mod:`.trec_fast`: trec-eval is called in loops and
    click is a third of its start-up); every other goes through :func:`.app.main`."""
    from audiorepro.cli import trec_fast

    options = trec_fast.parse(sys.argv[1:] if argv is None else list(argv))
    if options is not None:
        return trec_fast.run(options)
    from audiorepro.cli.app import main as click_main

    return click_main(argv)


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group, imported when asked for
        from audiorepro.cli.app import cli

        return cli
    raise AttributeError(name)

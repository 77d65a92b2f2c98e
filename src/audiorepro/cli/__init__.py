"""The ``audiorepro`` command line: argument parsing and printing only (:mod:`.commands`).

Commands that live in modules of their own register themselves on the group when imported
here (they import :mod:`.commands`, never the other way round).
"""

from __future__ import annotations

from audiorepro.cli import diff as _diff  # noqa: F401  (registers ``audiorepro diff``)
from audiorepro.cli import (  # noqa: F401  (register `evaluate`, `list`)
    evaluate,
    listing,
    sign,
)
from audiorepro.cli.commands import cli, main

__all__ = ["cli", "main"]

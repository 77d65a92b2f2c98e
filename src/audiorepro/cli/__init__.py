"""The ``audiorepro`` command line: argument parsing and printing only (:mod:`.commands`)."""

from __future__ import annotations

from audiorepro.cli import diff as _diff  # noqa: F401  (registers ``audiorepro diff``)
from audiorepro.cli import sign  # noqa: F401  (registers `audiorepro sign`)
from audiorepro.cli.commands import cli, main

__all__ = ["cli", "main"]

"""The ``audiorepro`` command line: argument parsing and printing only (:mod:`.commands`)."""

from __future__ import annotations

from audiorepro.cli import trec  # noqa: F401 (registers trec-eval)
from audiorepro.cli.commands import cli, main

__all__ = ["cli", "main"]

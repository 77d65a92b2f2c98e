"""The ``audiorepro`` command line: argument parsing and printing only.

:mod:`.app` holds the group and the entry point and knows every command by name and module;
a command's module (:mod:`.commands`, :mod:`.diff`, :mod:`.evaluate`, ...) is imported when that
command runs, so that ``audiorepro --help`` and ``--version`` load none of the numeric stack.
"""

from __future__ import annotations

from audiorepro.cli.app import cli, main

__all__ = ["cli", "main"]

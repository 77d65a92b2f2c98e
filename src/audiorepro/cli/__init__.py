"""The ``audiorepro`` command line: argument parsing and printing only (:mod:`.commands`).

Commands that live in modules of their own register themselves on the group when imported
here (they import :mod:`.commands`, never the other way round).
"""

from __future__ import annotations

# Each import registers its commands on the group: diff, evaluate, linear-probe, list, sign,
# trec-eval.
from audiorepro.cli import diff, evaluate, hear, linear_probe, listing, sign, trec  # noqa: F401
from audiorepro.cli import lock as lock_command  # noqa: F401 (registers `lock`)
from audiorepro.cli.commands import cli, main

__all__ = ["cli", "main"]

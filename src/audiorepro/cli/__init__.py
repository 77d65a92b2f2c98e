"""The ``audiorepro`` command line: argument parsing and printing only.

:mod:`.app` holds the group and the entry point and knows every command by name and module;
a command's module, one per command group (:mod:`.study`, :mod:`.metrics`, :mod:`.extraction`,
:mod:`.diff`, :mod:`.evaluate`, ...), is imported when that command runs or its ``--help`` is
asked for, and imports its own work inside the command: ``audiorepro --help``, ``--version``
and a command's ``--help`` load none of the numeric stack. :mod:`.options` holds the options
several commands share.
"""

from __future__ import annotations

from audiorepro.cli.entry import group_attribute, main

# typing is imported for the type checker only: it costs a megabyte of memory and 7 ms,
# and `audiorepro trec-eval` execs its native program from here (cli/entry.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["cli", "main"]


def __getattr__(name: str) -> Any:
    return group_attribute(name)  # ``cli``: the click group, imported when asked for

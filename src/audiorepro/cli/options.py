"""Options that several commands share, light to import (click and the standard library):
a command's module imports these and its own stack, never another command's module."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from audiorepro.core.io import check_output_file


class OutputFile(click.Path):
    """An output file option: a path that is not there or a regular file. A symbolic link,
    a FIFO, a device node or a folder is refused when the option is read, before any work
    (:func:`~audiorepro.core.io.check_output_file`): the write would replace it. One naming
    an input of its command is refused before the command runs (:mod:`audiorepro.cli.guard`)."""

    #: What :func:`audiorepro.cli.guard.check_outputs_apart` keeps apart from the inputs.
    is_output = True

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        check_output_file(Path(os.fsdecode(path)))
        return path


def json_option(help_text: str) -> Any:
    """The ``--json OUT`` option every command shares (written atomically, sorted keys)."""
    return click.option("--json", "json_out", type=OutputFile(), default=None, help=help_text)


registry_option = click.option(
    "--registry",
    "registries",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A checkpoint registry TOML adding to the bundled one (repeatable).",
)
device_option = click.option(
    "--device", default="cpu", show_default=True, help="torch device: cpu, cuda, cuda:1, ..."
)

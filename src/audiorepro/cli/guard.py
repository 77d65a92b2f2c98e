"""Every command's output files kept apart from its inputs, checked once for all commands.

A command's output file option (an :class:`~audiorepro.cli.options.OutputFile`: ``--json``,
``--html``, ``--out FILE``, ``--write-golden``) that names one of the command's own inputs
would replace the user's data with the output (``explain d.npz --json d.npz``), and one that
names a file inside a run's output folder the command reads (``verify OUT --json
OUT/verification.json``, or a new ``OUT/v.json``) would damage the run it certifies. Both
are refused before any work, one line naming the option, exit 2; so are two output options
naming one file (the second write would replace the first). :class:`GuardedCommand` is the
class of every command of the group (``LazyGroup.command_class``), so a new command is
guarded without a call of its own.

Light to import (click and the standard library): the group loads it for ``--help``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from audiorepro.core.errors import UserError

#: A file every run's output folder holds (a folder holding one is a run the command reads).
RUN_MARKER = "manifest.json"


def _paths(value: Any) -> Iterator[Path]:
    if value is None:
        return
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _paths(item)
    elif isinstance(value, (str, bytes, os.PathLike)):
        yield Path(os.fsdecode(value))


def _option(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return (param.human_readable_name or str(param.name)).upper()


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _inside_run(out: Path, folder: Path) -> bool:
    """``out`` lies inside ``folder``, a run's output folder (a new file there is one the run
    did not write: ``verify OUT`` would then fail, ``diff`` not compare it)."""
    try:
        if not (folder.is_dir() and (folder / RUN_MARKER).is_file()):
            return False
        return out.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a loop of links, a folder gone: nothing to keep apart
        return False


def check_outputs_apart(values: Mapping[str, Any], params: Sequence[click.Parameter]) -> None:
    """Refuse an output file option naming an input of the command (the same file, or a path
    inside a run's output folder it reads) or another output option's file.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> dump = folder / "d.npz"
    >>> _ = dump.write_bytes(b"x")
    >>> from audiorepro.cli.options import OutputFile
    >>> params = [click.Argument(["dump"], type=click.Path()),
    ...           click.Option(["--json", "json_out"], type=OutputFile())]
    >>> check_outputs_apart({"dump": dump, "json_out": folder / "new.json"}, params)
    >>> try:
    ...     check_outputs_apart({"dump": dump, "json_out": dump}, params)
    ... except UserError as exc:
    ...     print(str(exc).replace(str(folder), "F").split(";")[0])
    F/d.npz: key '--json': is the input DUMP (F/d.npz)
    """
    outputs: list[tuple[click.Parameter, Path]] = []
    inputs: list[tuple[click.Parameter, Path]] = []
    for param in params:
        if param.name is None or not isinstance(param.type, (click.Path, click.File)):
            continue
        side = outputs if getattr(param.type, "is_output", False) else inputs
        side.extend((param, path) for path in _paths(values.get(param.name)))
    for n, (param, out) in enumerate(outputs):
        for other, given in inputs:
            if _same(out, given):
                why = f"is the input {_option(other)} ({given})", "would replace the input"
            elif _inside_run(out, given):
                why = (
                    f"is inside the run folder {_option(other)} ({given})",
                    "would replace or add a file the run did not write, and the folder would "
                    "no longer verify",
                )
            else:
                continue
            raise UserError(
                f"{why[0]}; expected another path (the output {why[1]})",
                source=str(out),
                key=_option(param),
            )
        for other, earlier in outputs[:n]:
            if out == earlier or _same(out, earlier):
                raise UserError(
                    f"is also {_option(other)}; expected another path for each output (the "
                    "second would replace the first)",
                    source=str(out),
                    key=_option(param),
                )


class GuardedCommand(click.Command):
    """A command whose output file options are checked apart from its inputs before it runs
    (:func:`check_outputs_apart`)."""

    def invoke(self, ctx: click.Context) -> Any:
        check_outputs_apart(ctx.params, self.params)
        return super().invoke(ctx)

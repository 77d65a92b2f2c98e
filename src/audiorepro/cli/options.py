"""Options that several commands share, light to import (click and the standard library):
a command's module imports these and nothing of its own stack at its top, so that its
``--help`` loads no numeric stack (tests/test_cli_startup.py); what an option needs to check
a value (a device, a study's Slurm settings, a model spec) is imported when it is checked.

The choices that ``--help`` prints (tie policies, empty-query policies, the built-in metric
profiles) are named here, as their modules declare them (tests/test_cli_startup.py checks
they are equal), so that printing them imports no metric.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from audiorepro.models.registry import ModelSpec
    from audiorepro.runner.executors.slurm import SlurmOptions

#: :data:`audiorepro.metrics.retrieval.TIE_POLICIES`, for ``--tie-policy``'s help.
TIE_POLICIES = ("pessimistic", "optimistic")
#: :data:`audiorepro.formats.dump.EMPTY_POLICIES`, for ``--empty-queries``' help.
EMPTY_POLICIES = ("skip", "zero")
#: :data:`audiorepro.runner.hear.PREDICTORS`: what ``hear --predictor`` takes (the first is
#: the default).
HEAR_PREDICTORS = ("linear-v1", "hear-mlp-v1")
#: :data:`audiorepro.runner.kinds.probe.published.SCHEMA`: the ``schema`` line by which
#: ``verify --golden`` tells published probe values from retrieval ones without importing the
#: probe kind (its package loads the report stack: most of a second).
PROBE_PUBLISHED_SCHEMA = "audiorepro.probe-published/1"
#: :data:`audiorepro.checks.catalog.WHAT`: what ``list`` lists.
LIST_WHAT = ("checkpoints", "datasets", "profiles", "studies")
#: The built-in profiles of :mod:`audiorepro.metrics.profiles` (name, dump kind, hint), in
#: registration order: what ``metrics --profile`` and ``evaluate --profile`` list in their help.
BUILT_IN_PROFILES: tuple[tuple[str, str, str], ...] = (
    ("canonical", "retrieval", ""),
    ("laion-clap", "retrieval", ""),
    ("trec", "retrieval", ""),
    ("dcase", "retrieval", ""),
    (
        "laion-clap-zeroshot",
        "zeroshot",
        "a dump with one relevant text, the class prompt, per clip",
    ),
)


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
        from audiorepro.core.io import check_output_file  # numpy: not for --help

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


def _device_flag(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--device`` checked as it is parsed: before any study loads or any model is built."""
    if value is None:  # click calls back for an option not given too
        return None
    from audiorepro.specs.selection import check_device

    return check_device(value)


cells_option = click.option(
    "--cells",
    metavar="PATTERN",
    default=None,
    help="Run only the cells whose id matches this glob (e.g. 'laion/*/clotho5'); recorded.",
)
study_device_option = click.option(
    "--device",
    "run_device",
    metavar="cpu|cuda|cuda:N",
    default=None,
    callback=_device_flag,
    help="Run every model of the study on this device instead of the study's; recorded.",
)


def slurm_options(func: Any) -> Any:
    """The scheduler options shared by ``reproduce --executor slurm`` and ``slurm-template``."""
    options = [
        click.option(
            "--shards", type=click.IntRange(min=1), default=1, show_default=True,
            help="Array tasks per cell (extract --shard i/n).",
        ),
        click.option("--partition", default=None, help="Slurm partition."),
        click.option("--account", default=None, help="Slurm account (project to charge)."),
        click.option(
            "--time", "time_min", type=click.IntRange(min=1), default=60, show_default=True,
            help="Time limit per task, minutes.",
        ),
        click.option("--gpus-per-task", type=click.IntRange(min=0), default=None),
        click.option("--cpus-per-task", type=click.IntRange(min=1), default=None),
        click.option("--mem", default=None, help="Memory per node, e.g. 32G."),
        click.option(
            "--array-parallelism", type=click.IntRange(min=1), default=64, show_default=True,
            help="Array tasks running at once.",
        ),
        click.option(
            "--container", type=click.Path(path_type=Path, dir_okay=False), default=None,
            help="Run each task as `apptainer exec --nv --containall --cleanenv ... SIF`.",
        ),
        click.option(
            "--bind", "binds", multiple=True, metavar="SRC[:DST[:ro]]",
            help="More apptainer binds (the study's inputs are bound read-only already).",
        ),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def executor_options(where: str) -> Any:
    """``--executor local|slurm`` (``where``: what runs where), the scheduler options
    (:func:`slurm_options`), ``--slurm-folder`` and ``--wait-timeout``: the options of every
    command that may run its extraction as Slurm arrays (``reproduce``, ``hear``)."""

    def decorate(func: Any) -> Any:
        func = click.option(
            "--wait-timeout",
            type=click.FloatRange(min=0),
            default=None,
            help="Seconds to wait for the array tasks (default: --time plus ten minutes).",
        )(func)
        func = click.option(
            "--slurm-folder",
            type=click.Path(path_type=Path, file_okay=False),
            default=None,
            help="submitit's job files and logs (default: OUT/slurm).",
        )(func)
        func = slurm_options(func)
        return click.option(
            "--executor", type=click.Choice(["local", "slurm"]), default="local",
            show_default=True, help=where,
        )(func)  # fmt: skip

    return decorate


def slurm_settings(kw: dict[str, Any], **extra: Any) -> SlurmOptions:
    """The :func:`slurm_options` a command was given, as the Slurm executor takes them."""
    from audiorepro.runner.executors.slurm import SlurmOptions

    names = ("shards", "partition", "account", "time_min", "gpus_per_task", "cpus_per_task",
             "mem", "array_parallelism", "container", "binds")  # fmt: skip
    return SlurmOptions(**{n: kw[n] for n in names}, **extra)


#: ``--set`` keys that choose a CLAP architecture rather than a preprocessing setting.
ARCH_KEYS = ("enable_fusion", "amodel", "tmodel")


def model_spec(
    name: str, registries: tuple[Path, ...], items: tuple[str, ...], option: str
) -> tuple[ModelSpec, dict[str, Any]]:
    """Resolve a model spec (``extract --model``, ``identity --a/--b``) and split its
    KEY=VALUE items into architecture and preprocessing settings."""
    from audiorepro.core.errors import UserError
    from audiorepro.models.preflight import preflight
    from audiorepro.models.registry import (
        USER_FORMATS,
        load_registry,
        resolve_spec,
        with_architecture,
    )
    from audiorepro.specs.settings import parse_overrides

    spec = resolve_spec(name, load_registry(registries))
    preflight(spec)  # a corrupt checkpoint: one line before any model is built
    arch_items = tuple(i for i in items if i.partition("=")[0].strip() in ARCH_KEYS)
    if arch_items and spec.format in USER_FORMATS:
        raise UserError(
            f"is a CLAP architecture setting; a {spec.format} encoder takes only seed and "
            "batch_size",
            source=option,
            key=arch_items[0].partition("=")[0].strip(),
        )
    spec = with_architecture(spec, arch_items, source=option)
    rest = tuple(i for i in items if i not in arch_items)
    return spec, parse_overrides(rest, source=option)

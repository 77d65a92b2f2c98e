"""``fetch``, ``selfcheck`` and ``tiny-models``: an installation's checkpoints and datasets,
its own check, and the tiny models that let every command be tried offline (each command's
stack is imported when it runs, never for its ``--help``)."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import registry_option


@cli.command("tiny-models")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), required=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--fusion/--no-fusion", default=True, show_default=True, help="Fused (aff_2d) or unfused."
)
def tiny_models(out: Path, seed: int, fusion: bool) -> None:
    """Write one random tiny CLAP model in both formats, a local hub cache and DIR/registry.toml.

    The registry names them tiny-hf and tiny-laion, so every command can be tried offline.
    """
    from audiorepro.models.tiny import build_tiny_models

    path = build_tiny_models(out, seed=seed, fusion=fusion)
    click.echo(f"wrote tiny-hf and tiny-laion (seed {seed}); registry: {path}")


@cli.command()
@click.option(
    "--lock",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Compare the installed packages with this lock (default: $AUDIOREPRO_LOCK).",
)
@click.option(
    "--strict-environment",
    is_flag=True,
    help="Fail when an installed version differs from the lock (the image's own check).",
)
def selfcheck(lock: Path | None, strict_environment: bool) -> None:
    """Check this installation: golden values, harness vs reference, tiny-model identity, and
    the installed packages against the lock. Under a minute on a CPU, offline.
    """
    from audiorepro.checks.selfcheck import run_selfcheck
    from audiorepro.core.errors import EXIT_CHECK_FAILED

    checks = run_selfcheck(lock, strict_environment=strict_environment)
    for check in checks:
        click.echo(check.line())
    failed = [c.name for c in checks if c.passed is False]
    click.echo(f"selfcheck: {'FAILED (' + ', '.join(failed) + ')' if failed else 'passed'}")
    if failed:
        raise SystemExit(EXIT_CHECK_FAILED)


@cli.command()
@click.argument("names", nargs=-1, required=True)
@registry_option
@click.option(
    "--cache",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Hugging Face hub cache folder (what HF_HUB_CACHE names; default: the standard one).",
)
@click.option(
    "--mirror", default=None, help="Replace the scheme and host of dataset URLs with this URL."
)
@click.option(
    "--data",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("data"),
    show_default=True,
    help="Where datasets are downloaded and prepared (DATA/<name>/).",
)
@click.option(
    "--audio",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="audiocaps-test: the folder of the clips you have.",
)
@click.option(
    "--caption-selection",
    default="all",
    show_default=True,
    help="audiocaps-test: all, first-id (one per clip: the lowest audiocap_id, the published "
    "protocol's count) or ids:FILE (the audiocap_id values to keep, one per line).",
)
def fetch(
    names: tuple[str, ...],
    registries: tuple[Path, ...],
    cache: Path | None,
    mirror: str | None,
    data: Path,
    audio: Path | None,
    caption_selection: str,
) -> None:
    """Download checkpoints (at their pinned hub commit) and datasets, and check every file's
    hash before reporting success; the only command that downloads."""
    from audiorepro.fetch import run_fetch

    code = run_fetch(names, registries, cache, mirror, data, audio, click.echo, caption_selection)
    if code:
        raise SystemExit(code)

"""``audiorepro hear MODEL --tasks-dir DIR``: a HEAR 2021 module over HEAR task folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import HEAR_PREDICTORS as PREDICTORS
from audiorepro.cli.options import executor_options, slurm_settings


@cli.command("hear")
@click.argument("model")
@click.option(
    "--tasks-dir",
    type=click.Path(path_type=Path),
    required=True,
    help="A folder of HEAR task folders (DIR/<task>/task_metadata.json, as HEAR unpacks).",
)
@click.option(
    "--task",
    "tasks",
    multiple=True,
    help="A task's folder name or task_name (repeatable; default: every task in --tasks-dir).",
)
@click.option(
    "--predictor",
    type=click.Choice(PREDICTORS),
    default=PREDICTORS[0],
    show_default=True,
    help="The downstream predictor trained on the embeddings.",
)
@click.option(
    "--embeddings",
    type=click.Path(path_type=Path),
    default=None,
    help="heareval's embeddings of a submission (E/<module>/, holding <task folder>/ as "
    "heareval's embedding runner writes them): the predictor runs on them and MODEL only "
    "names the submission (nothing is loaded).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Where each task's embeddings (heareval's layout) and test.predicted-scores.json go.",
)
@executor_options(
    "Where the embeddings are computed: here, or one Slurm array task per task (submitit)."
)
def hear(
    model: str,
    tasks_dir: Path,
    tasks: tuple[str, ...],
    predictor: str,
    embeddings: Path | None,
    out: Path,
    executor: str,
    slurm_folder: Path | None,
    wait_timeout: float | None,
    **slurm_kw: Any,
) -> None:
    """MODEL (hear:MODULE[:WEIGHTS], py:MODULE:FACTORY or a registry entry) over HEAR
    tasks: embeddings by the module's own get_scene_embeddings (get_timestamp_embeddings for
    event tasks; a py: encoder's embed_audio and embed_frames) through the extraction cache,
    the predictor on heareval's splits, heareval's scores (docs/hear.md). With --executor
    slurm, each task's embeddings are an array task; a failed task is named (exit 1) and a
    rerun submits only what is missing."""
    from audiorepro.core.errors import EXIT_CHECK_FAILED
    from audiorepro.runner.hear import SlurmFailed, format_results, run_hear

    slurm = None
    if executor == "slurm":
        slurm = slurm_settings(slurm_kw, folder=slurm_folder, wait_timeout_s=wait_timeout)
    try:
        results = run_hear(model, tasks_dir, tasks, predictor, out, slurm, embeddings=embeddings)
    except SlurmFailed as failed:
        click.echo(f"hear: FAILED ({len(failed.failures)} array task(s)):")
        for line in failed.failures:
            click.echo(f"  {line}")
        click.echo("  rerun the same command to submit only the missing parts")
        raise SystemExit(EXIT_CHECK_FAILED) from None
    for line in format_results(results):
        click.echo(line)

"""``audiorepro hear MODEL --tasks-dir DIR``: a HEAR 2021 module over HEAR task folders."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import HEAR_PREDICTORS as PREDICTORS


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
def hear(
    model: str,
    tasks_dir: Path,
    tasks: tuple[str, ...],
    predictor: str,
    embeddings: Path | None,
    out: Path,
) -> None:
    """MODEL (hear:MODULE[:WEIGHTS], py:MODULE:FACTORY or a registry entry) over HEAR
    tasks: embeddings by the module's own get_scene_embeddings (get_timestamp_embeddings for
    event tasks; a py: encoder's embed_audio and embed_frames), the predictor on heareval's
    splits, heareval's scores (docs/hear.md)."""
    from audiorepro.runner.hear import format_results, run_hear

    results = run_hear(model, tasks_dir, tasks, predictor, out, embeddings=embeddings)
    for line in format_results(results):
        click.echo(line)

"""``extract-part`` and ``slurm-template``: a study's extraction as Slurm array tasks, for
``reproduce --executor slurm`` and for users who submit by hand (the executor is imported when
a command runs, never for its ``--help``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import OutputFile, slurm_options, slurm_settings

if TYPE_CHECKING:
    from audiorepro.runner.executors.extraction import StudyExtraction


def _extractable_study(path: Path) -> StudyExtraction:
    """The cells a study's kind extracts, as the executors see them (a kind that extracts
    nothing, a probe study: one line)."""
    from audiorepro.core.errors import UserError
    from audiorepro.runner.study import study_extraction
    from audiorepro.specs.study import load_study

    study = load_study(path)
    extraction = study_extraction(study)
    if extraction is None:
        raise UserError(
            f"is a {study.kind} study, whose kind extracts nothing; only a study with cells "
            "to extract runs in parts",
            source=path,
        )
    return extraction


@cli.command("extract-part")
@click.argument("study_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--cell", "cell_id", required=True, help="The cell's id in the study.")
@click.option("--shard", required=True, help="i/n: which part of the cell's extraction.")
@click.option("--key", required=True, help="The cache key the submitter computed.")
@click.option("--out", type=OutputFile(), required=True)
def extract_part_cmd(study_file: Path, cell_id: str, shard: str, key: str, out: Path) -> None:
    """One array task of `reproduce --executor slurm` (and of `slurm-template` scripts): a
    shard of a cell's extraction, written atomically with a SHA-256 record."""
    from audiorepro.models.extract import parse_shard
    from audiorepro.runner.executors.slurm import extract_part

    parsed = parse_shard(shard)
    assert parsed is not None
    extract_part(_extractable_study(study_file), cell_id, parsed, key, out)
    click.echo(f"wrote {out}")


@cli.command("slurm-template")
@click.argument("study_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The study's output folder (default: reproduce-<study name>).",
)
@slurm_options
def slurm_template(study_file: Path, out: Path | None, **slurm_kw: Any) -> None:
    """Print an sbatch array script that extracts what STUDY still needs, for users who
    submit by hand; then `reproduce STUDY --out OUT --executor slurm` merges and reports."""
    from audiorepro.core.errors import UserError
    from audiorepro.runner.executors.slurm import sbatch_script

    extraction = _extractable_study(study_file)
    extraction.preflight()  # a corrupt checkpoint: one line, not a script that fails on nodes
    target = out or Path(f"reproduce-{extraction.name}")
    if target.exists() and not target.is_dir():  # a FIFO, a device: no folder to run into
        raise UserError("is not a folder; expected an output folder (--out)", source=target)
    click.echo(sbatch_script(extraction, target, slurm_settings(slurm_kw)), nl=False)

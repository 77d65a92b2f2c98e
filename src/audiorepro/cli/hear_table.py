"""``audiorepro hear-table OUT ... --out DIR``: one table across encoders from HEAR runs."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.app import cli


@cli.command("hear-table")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="The folder for hear.csv/.md/.tex (encoders x tasks), runs.csv/.md/.tex and hear.html.",
)
def hear_table(runs: tuple[Path, ...], out: Path) -> None:
    """One table across encoders from HEAR runs (output folders of `audiorepro hear` or of
    hear studies): encoders x tasks, each number linked to its run (folder, bundle SHA-256)
    with the module's weights' SHA-256 and embedding size (docs/hear.md).

    Each run's files are checked against its manifest first; one encoder and task in two runs
    is refused.
    """
    from audiorepro.runner.hear_table import write_hear_table

    tables = write_hear_table(list(runs), out)
    main = tables["hear"]
    click.echo(
        f"wrote {out}/hear.csv, .md, .tex ({len(main.rows)} encoder(s) x "
        f"{len(main.columns)} task(s)), {out}/runs.csv, .md, .tex and {out}/hear.html"
    )

"""``audiorepro diff A B``: why did a number move (:mod:`audiorepro.checks.diff`)."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.checks.diff_report import run_diff
from audiorepro.cli.commands import OutputFile, cli


@cli.command(name="diff")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option(
    "--json",
    "json_out",
    type=OutputFile(),
    default=None,
    help="Write the comparison (schema audiorepro.diff/1) to this file.",
)
@click.option(
    "--html",
    "html_out",
    type=OutputFile(),
    default=None,
    help="Write one self-contained HTML page of the comparison.",
)
@click.option("--strict", is_flag=True, help="Count tier-b moves within tolerance as changes.")
def diff(a: Path, b: Path, json_out: Path | None, html_out: Path | None, strict: bool) -> None:
    """Compare two runs (output folders of reproduce, or their bundle.json.gz): every number
    equal or moved, the cause of each move from the runs' records, and a verdict.

    Exit 0 when every number is identical or within its tier, 1 when any changed, 2 on bad
    input.
    """
    code = run_diff(a, b, strict=strict, json_out=json_out, html_out=html_out, say=click.echo)
    if code:
        raise SystemExit(code)

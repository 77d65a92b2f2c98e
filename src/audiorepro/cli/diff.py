"""``audiorepro diff A B``: why did a number move (:mod:`audiorepro.checks.diff`)."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import OutputFile


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
@click.option(
    "--key",
    "keys",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A trusted Ed25519 public key that must have signed each folder (repeatable).",
)
@click.option(
    "--trusted-keys",
    type=click.Path(path_type=Path),
    default=None,
    help="A file of trusted public keys, one per line (ssh-ed25519 lines or PEM blocks).",
)
def diff(
    a: Path,
    b: Path,
    json_out: Path | None,
    html_out: Path | None,
    strict: bool,
    keys: tuple[Path, ...],
    trusted_keys: Path | None,
) -> None:
    """Compare two runs (output folders of reproduce, or their bundle.json.gz): every number
    equal or moved, the cause of each move from the runs' records, and a verdict.

    Each folder is first checked against its manifest (and, with --key or --trusted-keys,
    its signature): a folder that fails is the verdict, naming its first failing file, and
    nothing is compared. Exit 0 when every number is identical or within its tier, 1 when
    any changed or a folder fails its check, 2 on bad input.
    """
    from audiorepro.checks.diff_report import run_diff
    from audiorepro.runner.kinds import diff_kinds  # each kind imported when a bundle names it
    from audiorepro.runner.output.folder import folder_problem, trusted_keys_of

    trusted = trusted_keys_of(keys, trusted_keys)
    code = run_diff(
        a, b, strict=strict, json_out=json_out, html_out=html_out, say=click.echo,
        check=lambda folder: folder_problem(folder, trusted), kinds=diff_kinds(),
    )  # fmt: skip
    if code:
        raise SystemExit(code)

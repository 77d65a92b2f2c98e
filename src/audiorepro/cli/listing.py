"""``audiorepro list``: what can be evaluated here, with its pins and state."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import LIST_WHAT, json_option, registry_option

if TYPE_CHECKING:
    from audiorepro.checks.catalog import CatalogEntry


def _table(rows: list[CatalogEntry]) -> str:
    """Aligned columns: name, what it is, pins, state (a column with nothing in it is left out)."""
    columns = [
        [r.name for r in rows],
        [r.description for r in rows],
        [r.pins for r in rows],
        [r.state for r in rows],
    ]
    columns = [c for c in columns if any(c)]
    widths = [max(len(v) for v in c) for c in columns[:-1]]
    lines = []
    for i in range(len(rows)):
        cells = [c[i].ljust(w) for c, w in zip(columns[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, columns[-1][i]]).rstrip())
    return "\n".join(lines)


@cli.command("list")
@click.argument("what", required=False, type=click.Choice(LIST_WHAT), metavar="[WHAT]")
@registry_option
@click.option(
    "--cache",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="checkpoints: the hub cache to look in (default: HF_HUB_CACHE, else the standard one).",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("data"),
    show_default=True,
    help="datasets: where `fetch --data` prepares them.",
)
@click.option(
    "--studies",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("studies"),
    show_default=True,
    help="studies: the folder of study files to list beside the bundled demo.",
)
@json_option("Write the entries as JSON here.")
def list_cmd(
    what: str | None,
    registries: tuple[Path, ...],
    cache: Path | None,
    data: Path,
    studies: Path,
    json_out: Path | None,
) -> None:
    """List the registered checkpoints, datasets, profiles or studies (WHAT; all four without
    it), with their pins and whether they are here (and the command that fetches what is not)."""
    from audiorepro.checks.catalog import catalog
    from audiorepro.core.io import atomic_write_bytes, json_dumps

    kinds = LIST_WHAT if what is None else (what,)
    found = {
        k: catalog(k, registries=registries, cache=cache, data=data, studies=studies) for k in kinds
    }
    for k, rows in found.items():
        if what is None:
            click.echo(f"{k}:")
        click.echo(_table(rows))
    if json_out is not None:
        if what is None:
            doc: dict[str, object] = {
                "schema": "audiorepro.list/1",
                "entries": {k: [r.to_dict() for r in rows] for k, rows in found.items()},
            }
        else:
            doc = {
                "schema": "audiorepro.list/1",
                "what": what,
                "entries": [r.to_dict() for r in found[what]],
            }
        atomic_write_bytes(json_out, json_dumps(doc).encode())

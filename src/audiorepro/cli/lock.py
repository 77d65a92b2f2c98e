"""``audiorepro lock STUDY``: pin the SHA-256 of every saved file a probe study reads."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.core.errors import UserError


@cli.command()
@click.argument("study", type=click.Path(path_type=Path))
def lock(study: Path) -> None:
    """Write the lock file STUDY names (its `lock` key): every saved file the probe study
    reads (its runs' measurement and config files, the tree's study.json, the gates' job
    records) with its SHA-256. Later `reproduce` and `verify --golden` refuse the study (exit
    2) when any of them changed (`verify STUDY` does not check it). Exit 0 when written; 2 for
    bad input."""
    from audiorepro.core.io import atomic_write_bytes, json_dumps
    from audiorepro.runner.kinds.probe.spec import LOCK_SCHEMA, ProbeStudy, pinned_files
    from audiorepro.specs.study import load_study

    loaded = load_study(study, strict=False)  # the files as they are now, not as locked
    if not isinstance(loaded, ProbeStudy) or loaded.lock is None:
        raise UserError("has no 'lock' key; expected a probe study naming its lock file",
                        source=study)  # fmt: skip
    files = pinned_files(loaded)
    atomic_write_bytes(loaded.lock, json_dumps({"schema": LOCK_SCHEMA, "files": files}).encode())
    click.echo(f"locked {loaded.lock}: {len(files)} files")

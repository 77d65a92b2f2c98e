"""``audiorepro sign OUT --key PRIVATE_KEY``: a signed attestation of an output folder
(:mod:`audiorepro.runner.output.attest`)."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.core.errors import UserError


@cli.command()
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Ed25519 private key: PEM (openssl genpkey -algorithm ed25519) or OpenSSH "
    "(ssh-keygen -t ed25519), not encrypted.",
)
def sign(out: Path, key_path: Path) -> None:
    """Sign the output folder OUT of `reproduce`: write OUT/attestation.intoto.json, an
    in-toto statement of every file of the run with its SHA-256 and the run's record, in a
    DSSE envelope signed with KEY. The folder must match its manifest.json. `verify OUT --key
    PUBLIC_KEY` checks it. Exit 0 when written; 2 for bad input."""
    from audiorepro.runner.output.attest import sign_folder
    from audiorepro.runner.output.keys import load_signing_key
    from audiorepro.runner.output.publish import ATTESTATION

    key = load_signing_key(key_path)  # a bad key: one line before OUT is read
    if not out.is_dir():
        raise UserError("is not a folder; expected the output folder of reproduce", source=out)
    if not (out / "manifest.json").exists():
        raise UserError("has no manifest.json; expected the output folder of reproduce",
                        source=out)  # fmt: skip
    statement = sign_folder(out, key)
    click.echo(f"signed {out / ATTESTATION}: {len(statement['subject'])} files, key {key.keyid}")

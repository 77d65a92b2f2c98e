"""File hashing: one SHA-256 for every file the project reads, writes or records."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from audiorepro.core.errors import UserError

#: What a study, published-values file or registry says for a SHA-256 (or revision) not yet
#: known: such an entry can be reported, never reproduced or loaded, until someone records the
#: value of a verified download.
PLACEHOLDER = "to be filled on first verified download"


def check_regular_file(path: str | Path, *, what: str) -> None:
    """Refuse, before opening it, a path that is not a regular file: opening a FIFO blocks
    forever, a folder or a device is not what a user meant (a UserError naming it)."""
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        raise UserError(f"no such file (expected {what})", source=path) from None
    except OSError as exc:
        raise UserError(f"cannot be read ({exc.strerror}); expected {what}", source=path) from None
    if not stat.S_ISREG(mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "not a regular file"
        )
        raise UserError(f"is {kind}; expected {what}", source=path)


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, as 64 lowercase hex digits (read in 1 MiB blocks).
    A path that is not a regular file is refused before it is opened."""
    check_regular_file(path, what="a regular file")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

"""File hashing: one SHA-256 for every file the project reads, writes or records."""

from __future__ import annotations

import hashlib
from pathlib import Path

#: What a study, published-values file or registry says for a SHA-256 (or revision) not yet
#: known: such an entry can be reported, never reproduced or loaded, until someone records the
#: value of a verified download.
PLACEHOLDER = "to be filled on first verified download"


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, as 64 lowercase hex digits (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

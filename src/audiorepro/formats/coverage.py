"""Which clips of a published evaluation set a prepared dataset has (``dataset.json``).

``audiorepro fetch`` writes ``dataset.json`` (schema ``audiorepro.dataset/1``) beside the
captions file it prepares: clips expected, present and missing, extra files, the SHA-256 of
the sorted present-clip list, the source files' hashes and the captions file's SHA-256.
``extract`` copies it into the dump's ``meta_json`` (``inputs.dataset``) when it sits beside
the captions file it reads and describes that file, so "957 of 975" travels with the dump.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import parse_json, read_text

RECORD_SCHEMA = "audiorepro.dataset/1"
RECORD_NAME = "dataset.json"


def present_digest(clips: list[str]) -> str:
    """SHA-256 of the sorted present-clip list, one name per line.

    >>> present_digest(["b", "a"]) == hashlib.sha256(b"a\\nb\\n").hexdigest()
    True
    """
    return hashlib.sha256("".join(f"{c}\n" for c in sorted(clips)).encode()).hexdigest()


def record_path(captions: Path) -> Path:
    return captions.parent / RECORD_NAME


def dataset_record(captions: Path) -> dict[str, Any] | None:
    """The ``dataset.json`` beside ``captions`` when it describes that file; else None."""
    path = record_path(captions)
    if not path.is_file():
        return None
    text = read_text(path, what="a dataset record (dataset.json)")
    record = parse_json(text, source=path)
    if not isinstance(record, dict) or record.get("schema") != RECORD_SCHEMA:
        return None
    per_clip = record.get("captions_per_clip")
    if per_clip is not None and (
        not isinstance(per_clip, int) or isinstance(per_clip, bool) or per_clip < 1
    ):
        raise UserError(
            f"is {per_clip!r}; expected a whole number >= 1", source=path, key="captions_per_clip"
        )
    if record.get("captions_sha256") != sha256_file(captions):
        raise UserError(
            f"describes another captions file than {captions.name} (captions_sha256 differs): "
            "rerun `audiorepro fetch` to prepare the dataset again",
            source=path,
            key="captions_sha256",
        )
    return record

"""A cheap look at a checkpoint's files before any model is built (the checkpoint preflight).

Building a CLAP model takes seconds; a corrupt checkpoint used to be found only then, after
``reproduce`` had started its outputs. :func:`preflight` reads what each file of a spec
must be, without loading a tensor, and refuses the first problem in one line (a
:class:`~audiorepro.core.errors.UserError`, exit 2):

- every file: a regular file (not a folder, a FIFO, a symlink loop), not empty;
- a pickled file (``.pt``, ``.bin``, ...): if it is a zip archive (``torch.save``'s format),
  its central directory is whole; then :func:`~audiorepro.models.safeload.load_weights_only`
  (memory-mapped, never unpickling code);
- a ``.safetensors`` file: the 8-byte header length fits in the file, the header is a JSON
  object, and every tensor's ``data_offsets`` lie within the file (the tensors are not read);
- a Hugging Face folder: ``config.json`` is there and is a JSON object.

What is not here (a hub model not in the cache, a missing path) is left to the loader, which
says so where the file is used (``verify STUDY`` reports such a value as not verified); but
inside an apptainer container a hub cache that is not there at all is a set-up error, one line
naming the bind and the variable to add
(:func:`~audiorepro.models.offline.require_hub_cache_in_container`).
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file
from audiorepro.core.io import parse_json
from audiorepro.models.offline import require_hub_cache_in_container
from audiorepro.models.registry import ModelSpec, _laion_from_hub_cache
from audiorepro.models.safeload import PICKLED, load_weights_only

#: safetensors refuses headers above 100 MB itself; a larger declared length is damage.
MAX_HEADER = 100 << 20


def check_safetensors(path: Path) -> None:
    """The header of a ``.safetensors`` file is whole and its offsets lie within the file."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise UserError(
                f"is {size} bytes; expected a safetensors file (an 8-byte header length first)",
                source=path,
            )
        (length,) = struct.unpack("<Q", head)
        if length > min(MAX_HEADER, size - 8):
            raise UserError(
                f"declares a safetensors header of {length} bytes in a file of {size} bytes; "
                "expected a header within the file (truncated or not safetensors)",
                source=path,
            )
        raw = f.read(length)
    try:
        header: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        header = None
    if not isinstance(header, dict):
        raise UserError("has a safetensors header that is not a JSON object", source=path)
    data = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            raise UserError(
                f"tensor {name!r} has no valid data_offsets; expected [begin, end] in bytes",
                source=path,
            )
        if offsets[1] > data:
            raise UserError(
                f"tensor {name!r} ends at byte {offsets[1]} of a data section of {data} bytes: "
                "the file is truncated (expected every tensor within the file)",
                source=path,
            )


def check_pickled_file(path: Path) -> None:
    """A pickled weight file: a whole zip archive (when it is one), then weights only."""
    with open(path, "rb") as f:
        magic = f.read(4)
    # torch.save writes a zip archive whose central directory is at the end: a cut file
    # keeps its first member header, so the magic says "zip" while zipfile finds no directory.
    if magic == b"PK\x03\x04" and not zipfile.is_zipfile(path):
        raise UserError(
            "is a zip archive whose central directory is missing or cut (truncated download?); "
            "expected a whole torch.save checkpoint",
            source=path,
        )
    if magic[:1] != b"\x80" and not magic.startswith(b"PK"):
        # Neither torch.save's zip archive nor a pickle (whose first opcode is PROTO, 0x80).
        raise UserError(
            "is neither a zip archive nor a pickle; expected a torch.save checkpoint",
            source=path,
        )
    load_weights_only(path)


def check_weight_file(path: Path, *, what: str = "a checkpoint file") -> None:
    """File type, size, then the check of its format (pickled or safetensors)."""
    check_regular_file(path, what=what)
    if path.stat().st_size == 0:
        raise UserError(f"is empty; expected {what}", source=path)
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        check_safetensors(path)
    elif suffix in PICKLED:
        check_pickled_file(path)


def check_hf_folder(folder: Path) -> None:
    """A Hugging Face model folder: ``config.json`` (a JSON object), and every weight file."""
    config = folder / "config.json"
    if not os.path.lexists(config):
        raise UserError("has no config.json; expected a Hugging Face model folder", source=folder)
    check_regular_file(config, what="a Hugging Face config.json")
    try:
        parsed: Any = parse_json(config.read_bytes().decode("utf-8"), source=config)
    except UnicodeDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise UserError("is not a JSON object; expected a Hugging Face config.json", source=config)
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() == ".safetensors" or path.suffix.lower() in PICKLED:
            check_weight_file(path, what="a weight file")


def preflight(spec: ModelSpec) -> None:
    """Check the local files of ``spec`` before its model is built (see the module). A
    user's encoder: its spec was checked when parsed; a HEAR module's weights file here."""
    if spec.format == "py":
        return
    if spec.format == "hear":
        if spec.hear_weights is not None:
            check_weight_file(Path(spec.hear_weights), what="a HEAR model's weights file")
        return
    if spec.is_hub or spec.support or (spec.format == "laion" and spec.hub_repo is not None):
        require_hub_cache_in_container(spec.name, spec.hub_cache)
    if spec.format == "laion":
        path = Path(spec.location)
        if not os.path.lexists(path) and spec.hub_repo is not None:
            path = _laion_from_hub_cache(spec) or path
        if os.path.lexists(path):
            check_weight_file(path, what="a laion-clap checkpoint file")
        return
    folder = Path(spec.location)
    if spec.is_hub or not os.path.lexists(folder):
        return  # pinned by its revision; a snapshot not in the cache is said where it loads
    if not folder.is_dir():
        check_regular_file(folder, what="a Hugging Face model folder")  # a loop, a FIFO
        raise UserError("is a file; expected a Hugging Face model folder", source=folder)
    check_hf_folder(folder)

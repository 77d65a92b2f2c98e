"""Pickled weight files (``pytorch_model.bin``, ``.pt``) are read without running code.

Hugging Face's CLAP repositories publish ``pytorch_model.bin`` only (no safetensors on their
pinned revisions), and laion-clap's checkpoints are ``.pt``: both are pickles. A pickle can run
any code when it is unpickled, so audiorepro opens such a file with
``torch.load(weights_only=True)`` first, which only rebuilds tensors and plain containers and
refuses everything else, before a library loads it (transformers then loads it with
``weights_only=True`` itself; laion-clap is forced to by the pipeline). A file refused here is
a :class:`~audiorepro.errors.UserError`: one line, exit 2, and its payload never runs.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError

#: Suffixes of files that torch pickles (safetensors files hold no code and need no check).
PICKLED = (".bin", ".pt", ".pth", ".ckpt")


def load_weights_only(path: str | Path) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU; a refused file is a UserError.

    Zip-format files are memory-mapped, so checking a 600 MB file reads what it needs only.
    """
    import torch

    path = Path(path)
    mmap = zipfile.is_zipfile(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, AttributeError) as exc:
        # torch's message opens with how to bypass the check; name what it refused instead.
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        why = [ln for ln in lines if "Unpickler error" in ln or "Unsupported global" in ln]
        first = (why or lines or [type(exc).__name__])[0]
        raise UserError(
            "refused: not a plain tensor file (torch.load with weights_only=True rejects it; "
            f"audiorepro never unpickles code): {first}",
            source=path,
        ) from None


def check_pickled(paths: dict[str, Path]) -> None:
    """Open every pickled file of ``paths`` with :func:`load_weights_only` (then drop it)."""
    for path in paths.values():
        if path.suffix.lower() in PICKLED:
            load_weights_only(path)

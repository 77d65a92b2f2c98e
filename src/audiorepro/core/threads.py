"""The CPU thread count for embedding, read once from the environment."""

from __future__ import annotations

import os
import re

from audiorepro.core.errors import UserError


def cpu_threads() -> int:
    """torch's CPU thread count for embedding: ``AUDIOREPRO_CPU_THREADS``, default 1."""
    value = os.environ.get("AUDIOREPRO_CPU_THREADS", "1")
    # ASCII digits only: str.isdigit() also takes '²', which int() then refuses.
    if not re.fullmatch(r"[0-9]{1,6}", value) or int(value) < 1:
        raise UserError(
            f"is {value!r}; expected an integer >= 1 in ASCII digits (at most 6)",
            key="AUDIOREPRO_CPU_THREADS",
        )
    return int(value)


#: cuBLAS's workspace setting for deterministic GEMMs, set (unless the user set one) before a
#: model loads; the manifest records the value in force on every run, a model loaded or not.
CUBLAS_WORKSPACE_DEFAULT = ":4096:8"


def cublas_workspace_config() -> str:
    """The ``CUBLAS_WORKSPACE_CONFIG`` a run uses: the environment's, else the default."""
    return os.environ.get("CUBLAS_WORKSPACE_CONFIG") or CUBLAS_WORKSPACE_DEFAULT

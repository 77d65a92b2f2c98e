"""The CPU thread count for embedding, read once from the environment."""

from __future__ import annotations

import os

from audiorepro.core.errors import UserError


def cpu_threads() -> int:
    """torch's CPU thread count for embedding: ``AUDIOREPRO_CPU_THREADS``, default 1."""
    value = os.environ.get("AUDIOREPRO_CPU_THREADS", "1")
    if not value.isdigit() or int(value) < 1:
        raise UserError(f"is {value!r}; expected an integer >= 1", key="AUDIOREPRO_CPU_THREADS")
    return int(value)

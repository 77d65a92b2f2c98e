"""Metric families of audiorepro; each module is a set of pure functions with its definitions.

The retrieval names below are re-exported lazily (on first access): importing one family
(``audiorepro.metrics.trec`` for ``trec-eval``) must not load another's stack (retrieval's
numba kernels).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from audiorepro.metrics.retrieval import (
        METRICS,
        Ranking,
        compute_retrieval,
        hit_rate_at_k,
        mean_average_precision,
        mean_average_precision_at_k,
        mean_rank,
        mean_reciprocal_rank,
        median_rank,
        recall_at_k,
    )

__all__ = [
    "METRICS",
    "Ranking",
    "compute_retrieval",
    "hit_rate_at_k",
    "mean_average_precision",
    "mean_average_precision_at_k",
    "mean_rank",
    "mean_reciprocal_rank",
    "median_rank",
    "recall_at_k",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("audiorepro.metrics.retrieval"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

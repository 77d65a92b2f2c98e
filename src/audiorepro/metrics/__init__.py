"""Metric families of audiorepro; each module is a set of pure functions with its definitions:
retrieval (exact rank counts, the canonical metrics, bootstrap intervals) and the peers'
profiles of it (one registry), zero-shot classification, trec_eval's measures, the probe
report (regression, classification, events, human agreement, speaker vectors), the linear-v1
and ridge-v1 probes, speaker verification (each toolkit's EER and DCF, score normalization,
speaker bootstrap) and HEAR 2021's scores."""

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
    """The retrieval names above, imported on first use: importing one metric family (the
    profile registry, trec_eval's measures) does not load retrieval's compiled kernels."""
    if name in __all__:
        return getattr(importlib.import_module("audiorepro.metrics.retrieval"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Metric families of audiorepro; each module is a set of pure functions with its definitions."""

from __future__ import annotations

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

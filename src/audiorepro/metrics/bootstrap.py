"""Seeded bootstrap intervals over queries for retrieval metrics, single and paired.

Resamples draw query indices with replacement from a PCG64 generator seeded by ``seed``, so
an interval is the same on every run and machine. The statistic of a resample is the mean of
the per-query values (the median for ``median_rank``). Interval: the ``(1 - level)/2`` and
``(1 + level)/2`` quantiles of the resampled statistics (numpy's linear interpolation).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import param_error
from audiorepro.metrics.retrieval import (
    METRICS,
    Ranking,
    average_precision_per_query,
    hit_at_k_per_query,
    recall_at_k_per_query,
)

FloatArray = npt.NDArray[np.float64]
DEFAULT_RESAMPLES = 1000


def per_query_values(ranking: Ranking, metric: str) -> FloatArray:
    """Each query's value of a canonical metric; their mean (median) is the metric.

    >>> per_query_values(Ranking.from_lists([[1], [4]]), "mrr").tolist()
    [1.0, 0.25]
    >>> per_query_values(Ranking.from_lists([[1], [4]], n_empty=1), "mrr").tolist()
    [1.0, 0.25, 0.0]
    """
    if metric not in METRICS:
        raise param_error("metric", "per_query_values", "a canonical metric name", metric)
    kwargs = METRICS[metric].kwargs
    table: dict[str, Callable[[], FloatArray]] = {
        "r": lambda: hit_at_k_per_query(ranking, **kwargs),
        "recall": lambda: recall_at_k_per_query(ranking, **kwargs),
        "map": lambda: average_precision_per_query(ranking, **kwargs),
        "mrr": lambda: 1.0 / ranking.first,
        "mean_rank": lambda: ranking.first.astype(np.float64),
        "median_rank": lambda: ranking.first.astype(np.float64),
    }
    values = np.asarray(table[metric.split("@")[0]](), dtype=np.float64)
    if metric in ("mean_rank", "median_rank"):  # no value for a query without a relevant item
        return values
    # Policy zero: each query without a relevant item is one more query, valued 0.
    return np.concatenate([values, np.zeros(ranking.n_empty)]) if ranking.n_empty else values


def _statistic(metric: str) -> Callable[[FloatArray], FloatArray]:
    if metric == "median_rank":
        return lambda v: np.asarray(np.median(v, axis=-1), dtype=np.float64)
    return lambda v: np.asarray(np.mean(v, axis=-1), dtype=np.float64)


def percentile_interval(stats: npt.ArrayLike, level: float) -> tuple[float, float]:
    """The central ``level`` interval of resampled statistics (numpy's linear quantiles).

    >>> percentile_interval([0.0, 1.0, 2.0, 3.0, 4.0], 0.5)
    (1.0, 3.0)
    """
    lo, hi = np.quantile(np.asarray(stats, dtype=np.float64), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _indices(n: int, n_resamples: int, seed: int) -> npt.NDArray[np.int64]:
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.integers(0, n, size=(n_resamples, n), dtype=np.int64)


def bootstrap_interval(
    ranking: Ranking,
    metric: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of a metric over resampled queries.

    >>> lo, hi = bootstrap_interval(Ranking.from_lists([[1], [2], [1], [5]]), "r@1")
    >>> 0.0 <= lo <= 0.5 <= hi <= 1.0
    True
    """
    values = per_query_values(ranking, metric)
    stats = _statistic(metric)(values[_indices(values.size, n_resamples, seed)])
    return percentile_interval(stats, level)


def paired_bootstrap(
    a: Ranking,
    b: Ranking,
    metric: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, float]:
    """Difference ``metric(a) - metric(b)`` of two models on the same queries, with a paired
    interval (both resampled with the same query indices) and the fraction of resamples in
    which the difference is <= 0.

    >>> good = Ranking.from_lists([[1]] * 8 + [[3]] * 2)
    >>> bad = Ranking.from_lists([[2]] * 8 + [[3]] * 2)
    >>> out = paired_bootstrap(good, bad, "r@1")
    >>> out["difference"], out["low"] > 0
    (0.8, True)
    """
    if a.n_queries != b.n_queries:
        raise param_error(
            "b", "paired_bootstrap", f"a ranking of {a.n_queries} queries", b.n_queries
        )
    va, vb = per_query_values(a, metric), per_query_values(b, metric)
    stat = _statistic(metric)
    idx = _indices(va.size, n_resamples, seed)
    diffs = stat(va[idx]) - stat(vb[idx])
    lo, hi = percentile_interval(diffs, level)
    return {
        "difference": float(stat(va) - stat(vb)),
        "low": float(lo),
        "high": float(hi),
        "fraction_not_better": float(np.mean(diffs <= 0)),
    }

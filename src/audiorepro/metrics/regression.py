"""Regression metrics for probe studies (definitions version 1).

Every function takes 1-D float arrays ``pred`` and ``true`` of one target, where ``NaN`` in
``true`` means "not annotated": such pairs are masked, never counted as 0. A value that does not
exist is ``None`` (undefined), never 0: no valid pair for the errors; fewer than 3 valid pairs
or a constant side for the correlations. There are no ties to break except in Spearman's
ranks (averaged).

Rounding rule: per-pair differences (and squares, ``d * d``) in float64, sums with ``math.fsum``
(correctly rounded, so independent of the order of the items), then one division.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from audiorepro.metrics.probe_records import RegressionReport

FloatArray = npt.NDArray[np.float64]
MIN_PAIRS_CORRELATION = 3


def valid_pairs(pred: npt.ArrayLike, true: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """The pairs whose reference is annotated (not NaN).

    >>> p, t = valid_pairs([1.0, 2.0, 3.0], [1.0, float("nan"), 2.0])
    >>> p.tolist(), t.tolist()
    ([1.0, 3.0], [1.0, 2.0])
    """
    p = np.asarray(pred, dtype=np.float64)
    t = np.asarray(true, dtype=np.float64)
    keep = ~np.isnan(t)
    return p[keep], t[keep]


def mean_absolute_error(pred: npt.ArrayLike, true: npt.ArrayLike) -> float | None:
    """MAE: ``mean |pred - true|`` over annotated pairs; lower is better; None without pairs.

    Formula: ``fsum(|p_i - t_i|) / n``. Ties: none to break.

    >>> mean_absolute_error([1.0, 2.0, 5.0], [1.0, float("nan"), 3.0])
    1.0
    >>> mean_absolute_error([1.0], [float("nan")]) is None
    True
    """
    p, t = valid_pairs(pred, true)
    if p.size == 0:
        return None
    return math.fsum(np.abs(p - t).tolist()) / p.size


def normalized_mean_absolute_error(
    pred: npt.ArrayLike, true: npt.ArrayLike, *, train_sd: float
) -> float | None:
    """Normalized MAE: ``MAE / train_sd``, the frozen training-set SD of the target.

    Formula: ``MAE / sd``; lower is better; None when the MAE is undefined or ``sd`` is not a
    positive number. Ties: none to break.

    >>> normalized_mean_absolute_error([1.0, 3.0], [2.0, 2.0], train_sd=2.0)
    0.5
    """
    mae = mean_absolute_error(pred, true)
    if mae is None or not (math.isfinite(train_sd) and train_sd > 0):
        return None
    return mae / train_sd


def root_mean_squared_error(pred: npt.ArrayLike, true: npt.ArrayLike) -> float | None:
    """RMSE: root mean squared error over annotated pairs; lower is better.

    Formula: ``sqrt(fsum(d_i * d_i) / n)`` with ``d_i = p_i - t_i``; None without pairs.
    Ties: none to break.

    >>> root_mean_squared_error([0.0, 0.0], [3.0, 4.0])
    3.5355339059327378
    """
    p, t = valid_pairs(pred, true)
    if p.size == 0:
        return None
    d = p - t
    return math.sqrt(math.fsum((d * d).tolist()) / p.size)


def _pearson(x: FloatArray, y: FloatArray) -> float | None:
    if x.size < MIN_PAIRS_CORRELATION:
        return None
    mx = math.fsum(x.tolist()) / x.size
    my = math.fsum(y.tolist()) / y.size
    dx, dy = x - mx, y - my
    sxx = math.fsum((dx * dx).tolist())
    syy = math.fsum((dy * dy).tolist())
    if sxx == 0.0 or syy == 0.0 or bool(np.all(x == x[0])) or bool(np.all(y == y[0])):
        return None
    r = math.fsum((dx * dy).tolist()) / math.sqrt(sxx * syy)
    return max(-1.0, min(1.0, r))


def pearson_r(pred: npt.ArrayLike, true: npt.ArrayLike) -> float | None:
    """Pearson correlation over annotated pairs; higher is better.

    Formula: ``sum(dx dy) / sqrt(sum(dx^2) sum(dy^2))`` with ``dx = x - mean(x)``. None with
    fewer than 3 pairs or a constant side. Ties: none to break.

    >>> pearson_r([1.0, 2.0, 3.0], [2.0, 4.0, 6.5])
    0.9979487157886733
    >>> pearson_r([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
    True
    """
    p, t = valid_pairs(pred, true)
    return _pearson(p, t)


def average_ranks(values: npt.ArrayLike) -> FloatArray:
    """1-based ranks with ties given the mean of the ranks they span.

    >>> average_ranks([10.0, 20.0, 10.0]).tolist()
    [1.5, 3.0, 1.5]
    """
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    ranks = np.empty(v.size, dtype=np.float64)
    sorted_v = v[order]
    start = 0
    while start < v.size:
        stop = start + 1
        while stop < v.size and sorted_v[stop] == sorted_v[start]:
            stop += 1
        ranks[order[start:stop]] = (start + 1 + stop) / 2.0
        start = stop
    return ranks


def spearman_rho(pred: npt.ArrayLike, true: npt.ArrayLike) -> float | None:
    """Spearman's rho: Pearson correlation of the average ranks; higher is better.

    Formula: ``pearson(rank(p), rank(t))`` over annotated pairs. Ties: tied values share the
    mean of their ranks. None with fewer than 3 pairs or a constant side.

    >>> spearman_rho([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 20.0, 40.0])
    0.9486832980505138
    """
    p, t = valid_pairs(pred, true)
    if p.size < MIN_PAIRS_CORRELATION:
        return None
    return _pearson(average_ranks(p), average_ranks(t))


def regression_report(
    pred: npt.ArrayLike, true: npt.ArrayLike, *, train_sd: float
) -> RegressionReport:
    """Every regression metric of one target (``None`` where undefined)."""
    p, _ = valid_pairs(pred, true)
    return {
        "n": int(p.size),
        "mae": mean_absolute_error(pred, true),
        "normalized_mae": normalized_mean_absolute_error(pred, true, train_sd=train_sd),
        "rmse": root_mean_squared_error(pred, true),
        "pearson": pearson_r(pred, true),
        "spearman": spearman_rho(pred, true),
    }

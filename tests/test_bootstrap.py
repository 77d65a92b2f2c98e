"""Bootstrap intervals: per-query values reproduce each metric; intervals are seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.formats.dump import load_dump
from audiorepro.metrics.bootstrap import bootstrap_interval, paired_bootstrap, per_query_values
from audiorepro.metrics.retrieval import METRICS, RetrievalResult, compute_retrieval
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def result() -> RetrievalResult:
    return compute_retrieval(load_dump(FIXTURES / "dumps" / "synthetic_5cap.npz"))


@pytest.mark.parametrize("metric", list(METRICS))
@pytest.mark.parametrize("direction", ["t2a", "a2t"])
def test_per_query_values_give_the_metric(
    result: RetrievalResult, metric: str, direction: str
) -> None:
    ranking = result.ranking(direction)
    values = per_query_values(ranking, metric)
    expected = result.metrics()[direction][metric]
    if metric == "median_rank":
        assert float(np.median(values)) == expected
    else:
        assert math.fsum(values.tolist()) / values.size == expected


def test_intervals_are_seeded_and_bracket_the_estimate(result: RetrievalResult) -> None:
    ranking = result.ranking("t2a")
    a = bootstrap_interval(ranking, "r@5", seed=3)
    assert a == bootstrap_interval(ranking, "r@5", seed=3)
    assert a != bootstrap_interval(ranking, "r@5", seed=4)
    estimate = result.metrics()["t2a"]["r@5"]
    assert a[0] < estimate < a[1]
    wide = bootstrap_interval(ranking, "r@5", seed=3, level=0.99)
    assert wide[0] <= a[0] and a[1] <= wide[1]


def test_paired_bootstrap_of_a_model_with_itself_is_zero(result: RetrievalResult) -> None:
    r = result.ranking("a2t")
    out = paired_bootstrap(r, r, "map")
    assert out["difference"] == out["low"] == out["high"] == 0.0
    assert out["fraction_not_better"] == 1.0


def test_paired_bootstrap_needs_the_same_queries(result: RetrievalResult) -> None:
    with pytest.raises(UserError, match="'b' parameter of paired_bootstrap"):
        paired_bootstrap(result.ranking("t2a"), result.ranking("a2t"), "r@1")
    with pytest.raises(UserError, match="'metric' parameter"):
        per_query_values(result.ranking("t2a"), "R@1")

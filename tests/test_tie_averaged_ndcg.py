"""Tie-averaged nDCG of dumps (issue 29, item 1): scikit-learn's ``ndcg_score`` with ties
averaged (McSherry and Najork), reported beside the tie bounds of ``ndcg`` and ``ndcg@k``;
the harness equals its reference twin bit for bit and scikit-learn to rounding, and lies
between the bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audiorepro.formats.dump import make_dump
from audiorepro.metrics.retrieval import compute_retrieval, metric_names
from audiorepro.reference import reference_retrieval_metrics
from tests.strategies import relevance_dumps

CUTOFFS = (1, 2, 5)
NDCG = [n for n in metric_names(CUTOFFS) if n.partition("@")[0] == "ndcg"]


@st.composite
def graded_or_binary(draw: Any) -> dict[str, Any]:
    """Relevance dumps (many exact ties) with gains 0..3 (at least one positive) or binary."""
    d = dict(draw(relevance_dumps()))
    if draw(st.booleans()):
        nnz = len(d["relevance_indices"])
        gains = np.array(draw(st.lists(st.integers(0, 3), min_size=nnz, max_size=nnz)), np.int64)
        gains[draw(st.integers(0, nnz - 1))] = draw(st.integers(1, 3))
        d["relevance_gains"] = gains
    return d


@settings(max_examples=60, deadline=None)
@given(graded_or_binary(), st.sampled_from(["skip", "zero"]))
def test_tie_averaged_harness_equals_reference_within_the_bounds(
    d: dict[str, Any], policy: str
) -> None:
    result = compute_retrieval(make_dump(**d, empty_queries=policy))
    ref = reference_retrieval_metrics(
        d["audio_embeds"],
        d["text_embeds"],
        relevance_indptr=d["relevance_indptr"],
        relevance_indices=d["relevance_indices"],
        relevance_gains=d.get("relevance_gains"),
        tie_policy="average",
        cutoffs=CUTOFFS,
        empty_queries=policy,
    )
    pes, opt = result.metrics("pessimistic", CUTOFFS), result.metrics("optimistic", CUTOFFS)
    ties = result.ties(CUTOFFS)
    for direction in ("t2a", "a2t"):
        for name in NDCG:
            value = result.tie_averaged(direction, name)
            assert value == ref[direction][name], (direction, name)
            assert pes[direction][name] <= value <= opt[direction][name], (direction, name)
        # reported beside the bounds exactly where the bounds differ
        bounded = {n for n in ties[direction]["bounds"] if n in NDCG}
        averaged = ties[direction].get("tie_averaged", {})
        assert set(averaged) == bounded
        for name, value in averaged.items():
            assert value == result.tie_averaged(direction, name)


@st.composite
def grid_matrices(draw: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(audio, text, gains[clip, text]) on a grid of quarters: float64 dot products exact, so
    scikit-learn's float ties are the exact ties."""
    n, m, dim = draw(st.integers(1, 6)), draw(st.integers(2, 7)), draw(st.integers(1, 3))
    grid = st.integers(-2, 2).map(lambda v: v / 4)
    audio = np.array(draw(st.lists(st.lists(grid, min_size=dim, max_size=dim), min_size=n,
                                   max_size=n)))  # fmt: skip
    text = np.array(draw(st.lists(st.lists(grid, min_size=dim, max_size=dim), min_size=m,
                                  max_size=m)))  # fmt: skip
    flat = draw(st.lists(st.integers(0, 3), min_size=n * m, max_size=n * m))
    gains = np.array(flat, np.int64).reshape(n, m)
    gains[draw(st.integers(0, n - 1)), draw(st.integers(0, m - 1))] = draw(st.integers(1, 3))
    return audio, text, gains


@settings(max_examples=60, deadline=None)
@given(grid_matrices())
def test_tie_averaged_agrees_with_scikit_learn(case: tuple) -> None:
    """a2t: each clip ranks every text; scikit-learn's mean over the clips with a positive gain
    (policy ``skip``), at each cutoff and uncut."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    audio, text, gains = case
    rows, cols = np.nonzero(gains)
    indptr = np.searchsorted(rows, np.arange(audio.shape[0] + 1))
    dump = make_dump(
        audio,
        text,
        relevance_indptr=indptr,
        relevance_indices=cols,
        relevance_gains=gains[rows, cols],
        empty_queries="skip",
    )
    result = compute_retrieval(dump)
    scores = audio @ text.T
    keep = gains.sum(axis=1) > 0
    for name in NDCG:
        k = int(name.partition("@")[2]) if "@" in name else None
        theirs = sklearn_metrics.ndcg_score(gains[keep], scores[keep], k=k)
        assert result.tie_averaged("a2t", name) == pytest.approx(theirs, abs=1e-12), name


def test_a_binary_tie_averages_the_gain_over_the_tied_ranks() -> None:
    """Clip 0's only text ties one other text at ranks 1-2: each rank holds gain 1/2, so its
    nDCG is (1 + 1/log2(3)) / 2 and its nDCG@1 1/2 (bounds 0 and 1); clip 1 finds its text
    first (1): the means are between the bounds."""
    e = np.eye(2)
    dump = make_dump(e, e[[0, 0, 1]], relevance_indptr=[0, 1, 2], relevance_indices=[0, 2],
                     empty_queries="skip")  # fmt: skip
    result = compute_retrieval(dump)
    ties = result.ties((1,))["a2t"]
    assert ties["bounds"]["ndcg@1"] == [1.0, 0.5]
    assert ties["tie_averaged"] == {
        "ndcg": pytest.approx(((1 + 1 / np.log2(3)) / 2 + 1) / 2, abs=1e-15),
        "ndcg@1": 0.75,
    }

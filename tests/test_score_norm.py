"""Score normalization (issue 47 item 4, the functions): z-, t-, s- and adaptive s-norm over a
cohort, by hand, against the twin, and their relations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.metrics import verification_norm as norm
from audiorepro.metrics.verification import trial_scores
from audiorepro.reference import verification as twin

EMB = [[1.0, 0.0], [0.6, 0.8]]
COHORT = [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]


def test_by_hand() -> None:
    """Clip 0's cohort cosines are (1, 0, -1): mean 0, sd sqrt(2/3); clip 1's are (0.6, 0.8,
    -0.6): mean 4/15, sd sqrt(((1/3)^2 + (8/15)^2 + (13/15)^2) / 3); top 2: (1, 0) and
    (0.8, 0.6): means 1/2 and 7/10, sds 1/2 and 1/10."""
    s = [0.6]
    sd0, mu1 = math.sqrt(2 / 3), 4 / 15
    sd1 = math.sqrt(((0.6 - mu1) ** 2 + (0.8 - mu1) ** 2 + (-0.6 - mu1) ** 2) / 3)
    z, t = 0.6 / sd0, (0.6 - mu1) / sd1
    expected = {"z-norm": z, "t-norm": t, "s-norm": (z + t) / 2}
    for method, value in expected.items():
        got = norm.normalize_scores(s, [0], [1], EMB, COHORT, method=method)  # type: ignore[arg-type]
        assert got[0] == pytest.approx(value, rel=1e-14)
    as_norm = norm.normalize_scores(s, [0], [1], EMB, COHORT, method="as-norm", top_n=2)
    assert as_norm[0] == pytest.approx(((0.6 - 0.5) / 0.5 + (0.6 - 0.7) / 0.1) / 2, rel=1e-12)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="as-norm needs top_n"):
        norm.normalize_scores([0.6], [0], [1], EMB, COHORT, method="as-norm")
    with pytest.raises(ValueError, match="as-norm needs top_n"):
        norm.normalize_scores([0.6], [0], [1], EMB, COHORT, method="s-norm", top_n=3)
    with pytest.raises(ValueError, match="all equal"):
        norm.normalize_scores([0.6], [0], [1], EMB, [[1.0, 0.0]], method="z-norm")


_case = st.tuples(st.integers(2, 6), st.integers(2, 8), st.integers(1, 4), st.integers(0, 999))


@given(_case)
def test_equal_to_the_twin_and_related(case: tuple[int, int, int, int]) -> None:
    n_clips, n_cohort, dims, seed = case
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n_clips, dims + 1))
    cohort = rng.normal(size=(n_cohort, dims + 1))
    i, j = np.triu_indices(n_clips, k=1)
    scores = trial_scores(emb, i, j)
    got = {}
    for method in norm.METHODS:
        top = 2 if method == "as-norm" else None
        ours = norm.normalize_scores(scores, i, j, emb, cohort, method=method, top_n=top)
        theirs = twin.normalize_scores(scores, i, j, emb, cohort, method=method, top_n=top)
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)
        got[method] = ours
    np.testing.assert_allclose(got["s-norm"], (got["z-norm"] + got["t-norm"]) / 2, atol=1e-12)
    whole = norm.normalize_scores(scores, i, j, emb, cohort, method="as-norm", top_n=n_cohort)
    np.testing.assert_allclose(whole, got["s-norm"], atol=1e-9)  # the whole cohort: s-norm

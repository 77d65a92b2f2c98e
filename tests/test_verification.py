"""The speaker-verification measures: hand-computed EERs, the reference twin, sklearn's ROC."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.metrics import verification as fast
from audiorepro.reference import verification as slow

EER: dict[str, Callable[..., float | None]] = {
    "metrics": fast.equal_error_rate,
    "reference": slow.equal_error_rate,
}

#: (scores, is_target, EER by hand); comments give the operating points (F, M) walked.
HAND = [
    # (0,1) (0,1/2) (1/2,1/2): the third point is on F = M
    ([0.9, 0.8, 0.7, 0.6], [True, False, True, False], 0.5),
    # perfect separation: (0,1) (0,0)
    ([0.9, 0.1], [True, False], 0.0),
    # every target below every non-target: (0,1) (1,1) (1,0), crossing at 1
    ([0.1, 0.9], [True, False], 1.0),
    # a tie of one target and one non-target: (0,1) (1,0), the diagonal's midpoint
    ([0.5, 0.5], [True, False], 0.5),
    # (0,1) (0,2/3) (0,1/3) (1/2,1/3): M stays 1/3 while F passes it
    ([0.9, 0.8, 0.4, 0.3, 0.2], [True, True, False, True, False], 1 / 3),
    # a tie of two targets and one non-target after a target: (0,1) (0,2/3) (1,0); on the
    # last segment F = x and M = 2/3 - 2/3 x meet at x = 2/5
    ([0.9, 0.5, 0.5, 0.5], [True, True, True, False], 0.4),
    # the same trials in another order: ties do not depend on the order given
    ([0.5, 0.5, 0.9, 0.5], [True, False, True, True], 0.4),
]


@pytest.mark.parametrize("impl", EER, ids=str)
@pytest.mark.parametrize(("scores", "target", "expected"), HAND)
def test_hand_computed(impl: str, scores: list[float], target: list[bool], expected: float) -> None:
    assert EER[impl](scores, target) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("impl", EER, ids=str)
def test_no_target_or_no_nontarget_has_no_eer(impl: str) -> None:
    assert EER[impl]([0.1, 0.2], [True, True]) is None
    assert EER[impl]([0.1, 0.2], [False, False]) is None


def test_bad_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        fast.equal_error_rate([0.1, float("nan")], [True, False])
    with pytest.raises(ValueError, match="target flags"):
        fast.equal_error_rate([0.1, 0.2], [True])
    with pytest.raises(ValueError, match="zero"):
        fast.speaker_trials([[0.0, 0.0], [1.0, 0.0]], ["a", "b"])


def _sklearn_eer(scores: list[float], target: list[bool]) -> float:
    """The usual recipe: sklearn's ROC, then the root of ``1 - FPR - TPR(FPR)``."""
    from scipy.interpolate import interp1d
    from scipy.optimize import brentq
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(target, scores, drop_intermediate=False)
    return float(brentq(lambda x: 1.0 - x - interp1d(fpr, tpr)(x), 0.0, 1.0, xtol=1e-14))


# Scores from a few levels, so that ties between targets and non-targets are common.
_trials = st.integers(2, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 6).map(lambda v: v / 6), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


@given(_trials)
def test_metric_equals_reference_and_sklearn(trials: tuple[list[float], list[bool]]) -> None:
    scores, target = trials
    got = fast.equal_error_rate(scores, target)
    assert got == slow.equal_error_rate(scores, target)  # both exact, rounded once
    if got is None:
        assert all(target) or not any(target)
        return
    assert 0.0 <= got <= 1.0
    assert got == pytest.approx(_sklearn_eer(scores, target), abs=1e-9)


@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=30))
def test_continuous_scores_against_sklearn(scores: list[float]) -> None:
    target = [i % 2 == 0 for i in range(len(scores))]
    assert fast.equal_error_rate(scores, target) == pytest.approx(
        _sklearn_eer(scores, target), abs=1e-9
    )


def test_trials_equal_reference() -> None:
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(7, 5))
    speakers = ["a", "b", "a", "c", "b", "c", "a"]
    scores, target = fast.speaker_trials(emb, speakers)
    ref_scores, ref_target = slow.speaker_trials(emb, speakers)
    assert target.tolist() == ref_target and len(scores) == 21
    np.testing.assert_allclose(scores, ref_scores, rtol=0, atol=1e-15)


def test_a_trial_list_is_scored_as_the_pairs_are() -> None:
    """``trial_scores`` over given pairs: the twin's cosines, and bit for bit the scores that
    ``speaker_trials`` gives the same pairs (a trial list of every pair has its EER)."""
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(6, 4)).astype(np.float32)
    enrollment, test = [0, 5, 2, 3], [1, 0, 4, 2]
    scores = fast.trial_scores(emb, enrollment, test)
    np.testing.assert_allclose(scores, slow.trial_scores(emb, enrollment, test), rtol=0, atol=1e-15)
    i, j = np.triu_indices(6, k=1)
    pairs, _ = fast.speaker_trials(emb, ["a"] * 6)
    assert fast.trial_scores(emb, i, j).tobytes() == pairs.tobytes()
    assert fast.trial_scores(emb, j, i).tobytes() == pairs.tobytes()  # the cosine is symmetric


def test_a_trial_outside_the_embeddings_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the 2 embeddings"):
        fast.trial_scores([[1.0, 0.0], [0.0, 1.0]], [0], [2])
    with pytest.raises(ValueError, match="zero"):
        fast.trial_scores([[0.0, 0.0], [0.0, 1.0]], [0], [1])

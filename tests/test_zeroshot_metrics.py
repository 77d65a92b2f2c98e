"""Zero-shot classification metrics against hand-computed cases and the independent reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.core.errors import UserError
from audiorepro.metrics import zeroshot as zs
from audiorepro.reference.zeroshot import reference_class_ranks, reference_zeroshot_metrics

IMPLEMENTATIONS = {
    "harness": lambda a, t, y, tie: zs.compute_zeroshot(a, t, y, tie_policy=tie),
    "reference": reference_zeroshot_metrics,
}


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
def test_hand_computed_case_with_a_tie(impl: str) -> None:
    # Clip 2 ties its own class (1) with class 0; clip 3 is closest to class 2, labelled 0.
    a = np.array([[2, 0, 0], [0, 3, 0], [1, 1, 0], [0, 0, 1]], dtype=np.float32)
    t = np.eye(3, dtype=np.float32)
    y = [0, 1, 1, 0]
    pess = IMPLEMENTATIONS[impl](a, t, y, "pessimistic")
    assert pess["accuracy"] == 0.5  # clips 0 and 1; the tie of clip 2 is a miss
    assert pess["per_class_recall"] == {"0": 0.5, "1": 0.5}
    assert pess["balanced_accuracy"] == 0.5
    assert pess["top5_accuracy"] == 1.0
    opt = IMPLEMENTATIONS[impl](a, t, y, "optimistic")
    assert opt["accuracy"] == 0.75
    assert opt["per_class_recall"] == {"0": 0.5, "1": 1.0}
    assert opt["balanced_accuracy"] == 0.75


def test_balanced_accuracy_differs_from_accuracy_on_unbalanced_classes() -> None:
    ranks = [1, 1, 1, 2]
    labels = [0, 0, 0, 1]
    assert zs.accuracy(ranks) == 0.75
    assert zs.balanced_accuracy(ranks, labels, n_classes=2) == 0.5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: zs.top_k_accuracy([1], k=0), "The 'k' parameter of top_k_accuracy"),
        (lambda: zs.accuracy([0, 1]), "The 'ranks' parameter of accuracy"),
        (lambda: zs.accuracy([]), "The 'ranks' parameter of accuracy"),
        (
            lambda: zs.per_class_recall([1, 1], [0, 3], n_classes=3),
            "The 'labels' parameter of per_class_recall",
        ),
        (
            lambda: zs.balanced_accuracy([1], [0], n_classes=0),
            "The 'n_classes' parameter of per_class_recall",
        ),
        (
            lambda: zs.class_ranks(np.eye(2), np.eye(2), [0, 1], tie_policy="random"),  # type: ignore[arg-type]
            "The 'tie_policy' parameter of class_ranks",
        ),
    ],
)
def test_bad_arguments_name_the_parameter(call: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        call()  # type: ignore[operator]


@st.composite
def zeroshot_case(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[int], str]:
    n = draw(st.integers(1, 12))
    c = draw(st.integers(1, 7))
    d = draw(st.integers(1, 4))
    # Few distinct values: many exact ties between classes, duplicated prompts and clips.
    values = st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 3.0e-8, 1.0 + 2.0**-20])
    a = np.array(draw(st.lists(values, min_size=n * d, max_size=n * d)), dtype=np.float32)
    t = np.array(draw(st.lists(values, min_size=c * d, max_size=c * d)), dtype=np.float32)
    labels = draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n))
    tie = draw(st.sampled_from(["pessimistic", "optimistic"]))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return a.reshape(n, d).astype(dtype), t.reshape(c, d).astype(dtype), labels, tie


@given(zeroshot_case())
def test_harness_equals_reference(case: tuple[np.ndarray, np.ndarray, list[int], str]) -> None:
    a, t, y, tie = case
    assert zs.class_ranks(a, t, y, tie_policy=tie).tolist() == reference_class_ranks(a, t, y, tie)  # type: ignore[arg-type]
    assert zs.compute_zeroshot(a, t, y, tie_policy=tie) == reference_zeroshot_metrics(a, t, y, tie)  # type: ignore[arg-type]


@given(zeroshot_case())
def test_optimistic_never_below_pessimistic(
    case: tuple[np.ndarray, np.ndarray, list[int], str],
) -> None:
    a, t, y, _ = case
    opt = zs.compute_zeroshot(a, t, y, tie_policy="optimistic")
    pess = zs.compute_zeroshot(a, t, y, tie_policy="pessimistic")
    for m in zs.METRICS:
        assert opt[m] >= pess[m]


def test_near_ties_below_float64_resolution_are_decided_exactly() -> None:
    # s_0 = 1 + 2**-60 and s_1 = 1: float64 rounds both to 1, the exact decision separates them.
    a = np.array([[1.0, 2.0**-30]], dtype=np.float64)
    t = np.array([[1.0, 2.0**-30], [1.0, 0.0]], dtype=np.float64)
    assert float((a @ t.T)[0, 0]) == float((a @ t.T)[0, 1])
    assert zs.class_ranks(a, t, [0]).tolist() == [1] == reference_class_ranks(a, t, [0])
    assert zs.class_ranks(a, t, [1], tie_policy="optimistic").tolist() == [2]
    assert reference_class_ranks(a, t, [1], "optimistic") == [2]


def test_metric_values_are_the_canonical_metrics_in_order() -> None:
    e = np.eye(3, dtype=np.float32)
    out = zs.compute_zeroshot(e, e, [0, 1, 1])
    assert tuple(zs.metric_values(out)) == zs.METRICS
    assert zs.metric_values(out) == {m: out[m] for m in zs.METRICS}  # type: ignore[literal-required]

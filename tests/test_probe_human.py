"""Human-benchmark metrics: hand-computed cases, the reference under hypothesis, bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.core.errors import UserError
from audiorepro.metrics import probe_human as hb
from audiorepro.reference import probe as ref

# Few distinct scores, so that ties are common; few prompts and clips, so that groups repeat.
items = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, -3.0]),
        st.integers(0, 1),
        st.sampled_from("pqr"),
        st.sampled_from("abcdefgh"),
    ),
    min_size=0,
    max_size=24,
)


def _cols(rows: list[Any]) -> tuple[Any, Any, Any, Any]:
    s = np.array([r[0] for r in rows], dtype=float)
    y = np.array([r[1] for r in rows], dtype=int)
    g = np.array([r[2] for r in rows], dtype=object)
    c = np.array([r[3] for r in rows], dtype=object)
    return s, y, g, c


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (
        a is not None and b is not None and a == pytest.approx(b, abs=1e-12)
    )


@given(items)
def test_oracle_matches_reference(rows: list[Any]) -> None:
    s, y, g, _ = _cols(rows)
    assert _same(hb.oracle_balanced_accuracy(s, y), ref.oracle_balanced_accuracy(s, y))
    assert _same(
        hb.oracle_balanced_accuracy_per_prompt(s, y, g),
        ref.oracle_balanced_accuracy_per_prompt(s, y, g),
    )


@given(items)
def test_prompt_spearman_matches_reference(rows: list[Any]) -> None:
    s, y, g, _ = _cols(rows)
    assert _same(hb.mean_prompt_spearman(s, y, g), ref.mean_prompt_spearman(s, y, g))


@given(items, st.integers(2, 5))
def test_heldout_threshold_matches_reference(rows: list[Any], folds: int) -> None:
    s, y, _, c = _cols(rows)
    assert _same(
        hb.heldout_threshold_balanced_accuracy(s, y, c, folds=folds),
        ref.heldout_threshold_balanced_accuracy(list(s), list(y), list(c), folds=folds),
    )


@given(items)
def test_oracle_is_at_least_half(rows: list[Any]) -> None:
    """The oracle picks its threshold on the very labels it scores: it is never below 0.5."""
    s, y, _, _ = _cols(rows)
    oracle = hb.oracle_balanced_accuracy(s, y)
    assert oracle is None or 0.5 <= oracle <= 1.0


def test_hand_computed() -> None:
    # Perfectly separated prompt p; prompt q reversed (best is the all-one-side 0.5).
    s = [0.1, 0.2, 0.8, 0.9, 0.9, 0.8, 0.2, 0.1]
    y = [0, 0, 1, 1, 0, 0, 1, 1]
    g = ["p"] * 4 + ["q"] * 4
    assert hb.oracle_balanced_accuracy_per_prompt(s, y, g) == 0.75
    assert hb.per_prompt_spearman(s, y, g) == pytest.approx({"p": 0.8944271909999159,
                                                             "q": -0.8944271909999159})  # fmt: skip
    assert hb.mean_prompt_spearman(s, y, g) == pytest.approx(0.0, abs=1e-15)
    # Overall, one threshold: scores 0.8 and 0.9 hold 2 positives and 2 negatives each way.
    assert hb.oracle_balanced_accuracy(s, y) == 0.5


def test_clip_folds_keep_a_clip_together() -> None:
    folds = hb.clip_folds(["x", "y", "x", "z", "y", "w", "v", "u"])
    assert folds[0] == folds[2] and folds[1] == folds[4]
    assert sorted(set(folds.tolist())) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: hb.oracle_balanced_accuracy([0.1, 0.2], [0, 2]), "binary labels"),
        (lambda: hb.oracle_balanced_accuracy([0.1, float("nan")], [0, 1]), "finite"),
        (lambda: hb.oracle_balanced_accuracy([0.1], [0, 1]), "as long as scores"),
        (lambda: hb.clip_folds(["a"], folds=1), "an int >= 2"),
    ],
)
def test_bad_arguments(call: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        call()

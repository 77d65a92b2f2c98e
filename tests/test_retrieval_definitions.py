"""Hand-computed cases, run against both the harness and the independent reference.

As in scikit-learn's ``test_label_ranking_avp``, every case is parametrized over both
implementations, so a definition error in either one fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from audiorepro.formats.dump import make_dump
from audiorepro.metrics.retrieval import compute_retrieval
from audiorepro.reference import reference_retrieval_metrics

Impl = Callable[[Any, Any, Any, str], dict[str, dict[str, float]]]


def harness(a: Any, t: Any, t2a: Any, tie_policy: str) -> dict[str, dict[str, float]]:
    return compute_retrieval(make_dump(a, t, t2a), chunk_rows=2).metrics(tie_policy)  # type: ignore[arg-type]


def reference(a: Any, t: Any, t2a: Any, tie_policy: str) -> dict[str, dict[str, float]]:
    return reference_retrieval_metrics(a, t, t2a, tie_policy=tie_policy)


IMPLS = pytest.mark.parametrize("impl", [harness, reference], ids=["harness", "reference"])
F32 = np.float32


@IMPLS
def test_single_clip_everything_rank_one(impl: Impl) -> None:
    a = np.array([[1.0, 0.0]], F32)
    t = np.array([[0.3, 0.1], [-1.0, 0.0]], F32)
    m = impl(a, t, [0, 0], "pessimistic")
    assert m["t2a"]["r@1"] == 1.0 and m["t2a"]["mean_rank"] == 1.0
    # a2t: the only clip's two captions are at positions 1 and 2: AP = (1/1 + 2/2) / 2.
    assert m["a2t"]["map"] == 1.0 and m["a2t"]["recall@1"] == 0.5


@IMPLS
def test_all_equal_scores_bounds(impl: Impl) -> None:
    # Every score is 0: each query's relevant items go first (optimistic) or last (pessimistic).
    a = np.zeros((4, 3), F32)
    t = np.ones((4, 3), F32)
    t2a = [0, 1, 2, 3]
    opt, pes = impl(a, t, t2a, "optimistic"), impl(a, t, t2a, "pessimistic")
    for d in ("t2a", "a2t"):
        assert opt[d]["r@1"] == 1.0 and opt[d]["mean_rank"] == 1.0
        assert pes[d]["r@1"] == 0.0 and pes[d]["mean_rank"] == 4.0
        assert pes[d]["mrr"] == 0.25 and pes[d]["median_rank"] == 4.0
        assert pes[d]["r@5"] == 1.0


@IMPLS
def test_tie_between_relevant_and_non_relevant(impl: Impl) -> None:
    # Clips 0 and 1 are identical: caption 0's clip ties with clip 1.
    a = np.array([[1, 0], [1, 0], [0, 1]], F32)
    t = np.array([[1, 0], [0, 1], [0, 1]], F32)
    t2a = [0, 1, 2]
    pes, opt = impl(a, t, t2a, "pessimistic"), impl(a, t, t2a, "optimistic")
    # t2a: caption 0 -> clip 0 ties with clip 1 (rank 1 or 2); caption 1 -> clip 1 scores 0,
    # below clip 2 (score 1) and tied with clip 0: rank 2 or 3; caption 2 -> clip 2, rank 1.
    assert opt["t2a"]["mean_rank"] == (1 + 2 + 1) / 3
    assert pes["t2a"]["mean_rank"] == (2 + 3 + 1) / 3
    assert opt["t2a"]["r@1"] == 2 / 3 and pes["t2a"]["r@1"] == 1 / 3


@IMPLS
def test_ties_among_relevant_items_do_not_matter(impl: Impl) -> None:
    # Clip 0 has two identical captions; a non-relevant caption scores below them.
    a = np.array([[1, 0], [0, 1]], F32)
    t = np.array([[1, 0], [1, 0], [0, 1]], F32)
    t2a = [0, 0, 1]
    for policy in ("optimistic", "pessimistic"):
        m = impl(a, t, t2a, policy)
        assert m["a2t"]["map"] == 1.0
        assert m["a2t"]["recall@1"] == (0.5 + 1.0) / 2


@IMPLS
def test_negative_scores(impl: Impl) -> None:
    # All scores negative; ranking by value, not by magnitude (no score <= 0 filtering).
    a = np.array([[-1, 0], [-2, 0], [-3, 0]], F32)
    t = np.array([[1, 0], [1, 0], [1, 0]], F32)
    m = impl(a, t, [0, 1, 2], "pessimistic")
    # Caption 2's clip 2 scores -3: last of three.
    assert m["t2a"]["mean_rank"] == 2.0
    assert m["t2a"]["r@1"] == 1 / 3
    assert m["t2a"]["mrr"] == (1 + 1 / 2 + 1 / 3) / 3


@IMPLS
def test_variable_captions_per_clip(impl: Impl) -> None:
    # Clip 0: captions 0, 1, 2; clip 1: caption 3. Scores for a2t query clip 0:
    # captions 0 (0.9), 3 (0.8), 1 (0.5), 2 (0.1) -> relevant positions 1, 3, 4.
    a = np.array([[1, 0], [0, 1]], F32)
    t = np.array([[0.9, 0], [0.5, 0], [0.1, 0], [0.8, 0.5]], F32)
    m = impl(a, t, [0, 0, 0, 1], "pessimistic")
    ap0 = (1 / 1 + 2 / 3 + 3 / 4) / 3
    # Clip 1 scores: caption 3 (0.5), others 0: position 1.
    assert m["a2t"]["map"] == pytest.approx((ap0 + 1.0) / 2, rel=1e-15)
    assert m["a2t"]["recall@1"] == (1 / 3 + 1) / 2
    assert m["a2t"]["r@1"] == 1.0
    assert m["a2t"]["median_rank"] == 1.0
    # map@10 equals map here (all relevant within the top 10).
    assert m["a2t"]["map@10"] == m["a2t"]["map"]


@IMPLS
def test_map_at_10_truncates_but_divides_by_all_relevant(impl: Impl) -> None:
    # 12 clips; caption of clip 0 ranks it 12th (every other clip scores higher).
    n = 12
    a = np.zeros((n, 2), F32)
    a[:, 0] = np.arange(n, dtype=F32)[::-1] * -1  # clip 0 scores 0, others negative...
    a[0, 0] = -100.0
    t = np.tile(np.array([[1.0, 0.0]], F32), (n, 1))
    m = impl(a, t, list(range(n)), "pessimistic")
    # caption 0: clip 0 is last (position 12): map@10 contribution 0, map contribution 1/12.
    per_query_map = []
    scores = a[:, 0]
    for q in range(n):
        pos = 1 + int(np.sum(scores > scores[q]))
        per_query_map.append(1 / pos)
    assert m["t2a"]["map"] == pytest.approx(sum(per_query_map) / n, rel=1e-15)
    assert m["t2a"]["map@10"] < m["t2a"]["map"]


@IMPLS
def test_median_rank_can_end_in_half(impl: Impl) -> None:
    a = np.array([[1, 0], [0, 1]], F32)
    t = np.array([[1, 0], [1, 0]], F32)  # caption 1 ranks its clip second
    m = impl(a, t, [0, 1], "pessimistic")
    assert m["t2a"]["median_rank"] == 1.5


def test_harness_equals_reference_bitwise_on_fixtures(fixture_dumps: list[Any]) -> None:
    from audiorepro.formats.dump import load_dump

    for path in fixture_dumps:
        d = load_dump(path)
        res = compute_retrieval(d)
        with np.load(path) as z:  # the relevance as the file gives it (either version)
            rel = {k: z[k] for k in ("relevance_indptr", "relevance_indices") if k in z.files}
        for policy in ("pessimistic", "optimistic"):
            ref = reference_retrieval_metrics(
                d.audio_embeds, d.text_embeds, d.text_to_audio, tie_policy=policy, **rel
            )
            assert res.metrics(policy) == ref, (path.name, policy)  # type: ignore[arg-type]

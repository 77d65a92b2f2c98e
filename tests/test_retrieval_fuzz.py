"""Hypothesis: harness == reference, and invariances (permutations, chunk size, threads)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.formats.dump import make_dump
from audiorepro.metrics import _exact_kernels as kernels
from audiorepro.metrics.retrieval import (
    Ranking,
    _ndcg_decimal,
    compute_retrieval,
    metric_by_name,
    ndcg_per_query,
)
from audiorepro.reference import reference_retrieval_metrics
from tests.strategies import dumps, relevance_dumps


def _harness(d: dict[str, Any], chunk_rows: int | None = None) -> Any:
    return compute_retrieval(make_dump(**d), chunk_rows=chunk_rows)


@given(dumps(), st.sampled_from(["pessimistic", "optimistic"]), st.integers(1, 7))
def test_harness_equals_reference(d: dict[str, Any], policy: str, chunk_rows: int) -> None:
    got = _harness(d, chunk_rows).metrics(policy)
    want = reference_retrieval_metrics(
        d["audio_embeds"], d["text_embeds"], d["text_to_audio"], tie_policy=policy
    )
    for direction in want:
        for name, value in want[direction].items():
            # The rounding rule makes both bit-identical; 1e-12 is the floor.
            assert abs(got[direction][name] - value) <= 1e-12, (direction, name)
            assert got[direction][name] == value, (direction, name)


@given(dumps(), st.randoms(use_true_random=False))
def test_permuting_clips_and_captions_changes_nothing(d: dict[str, Any], rnd: Any) -> None:
    n, m = len(d["audio_embeds"]), len(d["text_embeds"])
    clip_perm = list(range(n))
    cap_perm = list(range(m))
    rnd.shuffle(clip_perm)
    rnd.shuffle(cap_perm)
    inverse = np.argsort(clip_perm)
    permuted = {
        "audio_embeds": d["audio_embeds"][clip_perm],
        "text_embeds": d["text_embeds"][cap_perm],
        "text_to_audio": inverse[d["text_to_audio"][cap_perm]],
    }
    a, b = _harness(d), _harness(permuted)
    for policy in ("pessimistic", "optimistic"):
        assert a.metrics(policy) == b.metrics(policy)
    assert a.ties() == b.ties()


@given(dumps(), st.integers(1, 5))
def test_chunk_size_changes_nothing(d: dict[str, Any], chunk_rows: int) -> None:
    a, b = _harness(d), _harness(d, chunk_rows)
    for direction in ("t2a", "a2t"):
        assert np.array_equal(a.counts[direction].greater, b.counts[direction].greater)
        assert np.array_equal(a.counts[direction].equal, b.counts[direction].equal)


def test_thread_count_changes_nothing() -> None:
    rng = np.random.default_rng(5)
    audio = rng.standard_normal((700, 24)).astype(np.float32)
    audio[10] = audio[20]
    t2a = np.repeat(np.arange(700), 3)
    text = (audio[t2a] + rng.standard_normal((2100, 24)).astype(np.float32)).astype(np.float32)
    d = make_dump(audio, text, t2a)
    try:
        kernels.set_threads(1)
        one = compute_retrieval(d, chunk_rows=333)
        kernels.set_threads(4)
        many = compute_retrieval(d, chunk_rows=1000)
    finally:
        kernels.set_threads(None)
    assert one.metrics() == many.metrics()
    assert one.ties() == many.ties()
    assert one.stats.exact > 0  # the duplicated clip forced exact decisions


# --- definitions 1.1: any cutoff, precision, mrr@k, nDCG, R-precision -----------------------

CUTOFFS = st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True).map(sorted)


@given(dumps(), st.sampled_from(["pessimistic", "optimistic"]), CUTOFFS)
def test_harness_equals_reference_at_any_cutoff(
    d: dict[str, Any], policy: str, cutoffs: list[int]
) -> None:
    got = _harness(d).metrics(policy, cutoffs)  # type: ignore[arg-type]
    want = reference_retrieval_metrics(
        d["audio_embeds"], d["text_embeds"], d["text_to_audio"], tie_policy=policy,
        cutoffs=cutoffs,
    )  # fmt: skip
    assert list(got["t2a"]) == list(want["t2a"])  # the same names, in report order
    assert got == want  # bit-identical, nDCG included (both correctly rounded)


@given(relevance_dumps(), st.sampled_from(["pessimistic", "optimistic"]), CUTOFFS)
def test_harness_equals_reference_at_any_cutoff_under_general_relevance(
    d: dict[str, Any], policy: str, cutoffs: list[int]
) -> None:
    got = compute_retrieval(make_dump(**d)).metrics(policy, cutoffs)  # type: ignore[arg-type]
    want = reference_retrieval_metrics(
        d["audio_embeds"], d["text_embeds"], relevance_indptr=d["relevance_indptr"],
        relevance_indices=d["relevance_indices"], tie_policy=policy, cutoffs=cutoffs,
    )  # fmt: skip
    assert got == want


@given(relevance_dumps(), CUTOFFS)
def test_pessimistic_and_optimistic_bound_every_new_measure(
    d: dict[str, Any], cutoffs: list[int]
) -> None:
    r = compute_retrieval(make_dump(**d))
    pes, opt = r.metrics("pessimistic", cutoffs), r.metrics("optimistic", cutoffs)
    for direction in pes:
        for name, low in pes[direction].items():
            if metric_by_name(name).higher_is_better:
                assert low <= opt[direction][name], (direction, name)
            else:
                assert low >= opt[direction][name], (direction, name)


@given(dumps(), CUTOFFS)
def test_the_cutoff_report_keeps_every_1_0_value(d: dict[str, Any], cutoffs: list[int]) -> None:
    r = _harness(d)
    old, new = r.metrics(), r.metrics("pessimistic", cutoffs)
    for direction in old:
        for name, value in old[direction].items():
            if name in new[direction]:
                assert new[direction][name] == value, (direction, name)


@given(
    st.lists(
        st.lists(st.integers(1, 400), min_size=1, max_size=12, unique=True),
        min_size=1,
        max_size=6,
    ),
    st.one_of(st.none(), st.integers(1, 30)),
)
def test_ndcg_fast_path_equals_its_decimal_path(positions: list[list[int]], k: int | None) -> None:
    ranking = Ranking.from_lists(positions)
    limit = 10**12 if k is None else k
    fast = ndcg_per_query(ranking, k=k).tolist()
    slow = [_ndcg_decimal(sorted(p), len(p), limit) for p in positions]
    assert fast == slow

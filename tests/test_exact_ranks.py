"""The exact stages: near-ties that float32 and float64 cannot order are ordered exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from audiorepro.formats.dump import make_dump
from audiorepro.metrics._exact import exact_dot_difference_sign
from audiorepro.metrics.retrieval import compute_retrieval


def test_exact_sign_float32() -> None:
    x = np.array([1.0, 2.0**-24, -1.0], np.float32)
    a = np.array([1.0, 1.0, 1.0], np.float32)
    b = np.array([1.0, 0.0, 1.0], np.float32)
    # x.a = 2**-24 > 0 = x.b, although 1 + 2**-24 - 1 is 0 in float32 left to right.
    assert exact_dot_difference_sign(x, a, x, b) == 1
    assert exact_dot_difference_sign(x, b, x, a) == -1
    assert exact_dot_difference_sign(x, a, x, a.copy()) == 0


def test_exact_sign_float64_beyond_double_precision() -> None:
    x = np.array([1.0, 2.0**-40])
    a = np.array([1.0, 2.0**-40])
    b = np.array([1.0, 0.0])
    # x.a = 1 + 2**-80 exactly, x.b = 1. Both products are exact and 1 + 2**-80 rounds to 1
    # in float64 whatever the kernel does with two terms (either order, with or without FMA),
    # so float64 cannot tell them apart; the exact stage can.
    assert float(x @ a) == float(x @ b) == 1.0
    assert math.fsum([1.0, 2.0**-80]) == 1.0
    assert exact_dot_difference_sign(x, a, x, b) == 1
    assert exact_dot_difference_sign(x, b, x, a) == -1


def test_exact_sign_distinct_vectors_equal_products() -> None:
    x = np.array([2.0, 1.0], np.float32)
    assert (
        exact_dot_difference_sign(x, np.array([1, 0], np.float32), x, np.array([0, 2], np.float32))
        == 0
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_near_tie_below_blas_resolution_is_ordered(dtype: type) -> None:
    # Caption 0's clip 0 beats clip 1 by one unit in the last place of a long dot product.
    d = 256
    rng = np.random.default_rng(0)
    base = rng.standard_normal(d).astype(dtype)
    clip0 = base.copy()
    clip1 = base.copy()
    idx = int(np.argmax(np.abs(base)))
    clip1[idx] = np.nextafter(clip1[idx], dtype(0))  # |clip1[idx]| slightly smaller
    text = np.stack([base, -base])  # caption 1 only gives clip 1 a caption
    audio = np.stack([clip0, clip1])
    res = compute_retrieval(make_dump(audio, text, np.array([0, 1])))
    # Caption 0: clip 0 strictly above clip 1 in exact arithmetic, no tie.
    assert res.counts["t2a"].greater[0] == 0 and res.counts["t2a"].equal[0] == 0
    swapped = compute_retrieval(make_dump(audio, text, np.array([1, 0])))
    # Caption 0 now belongs to clip 1, which scores below clip 0: one item above.
    assert swapped.counts["t2a"].greater[0] == 1 and swapped.counts["t2a"].equal[0] == 0


def test_duplicated_clips_tie_exactly() -> None:
    rng = np.random.default_rng(1)
    audio = rng.standard_normal((50, 64)).astype(np.float32)
    audio[7] = audio[3]
    t2a = np.arange(50)
    text = audio.copy()
    res = compute_retrieval(make_dump(audio, text, t2a), chunk_rows=16)
    # Captions 3 and 7 each tie with the other's clip (and with nothing else).
    assert res.counts["t2a"].equal.tolist().count(1) == 2
    assert res.ties()["t2a"]["queries_affected"] == 2
    assert res.stats.exact >= 2

"""Speaker-level bootstrap intervals of the EER and minDCF (bootstrap definitions version 1).

Trials of one speaker are not independent (every trial of a clip shares its embedding), so
the interval resamples speakers, not trials. Definition: the speakers ``S`` are every speaker
a trial names, sorted by name (``|S| = n``). Resample ``b = 1 .. B`` draws ``n`` speakers
with replacement, ``numpy.random.default_rng(seed).integers(0, n, size=n)`` (one generator for
all ``B`` draws, in order), and gives speaker ``s`` its multiplicity ``m_s`` (how often it was
drawn). Each trial of enrollment speaker ``a`` and test speaker ``b`` then counts
``w = m_a * m_b`` times (a target trial ``m_a ** 2``; a trial with an undrawn speaker not at
all): the trials whose both sides' speakers were drawn, once per pair of drawn copies. The
measure ``theta_b`` is the definition's value over those weighted trials (``eer``,
``min_dcf_p0.01``, ``min_dcf_p0.05`` as :mod:`audiorepro.metrics.verification` defines
them). A resample without target or without non-target trials has no value and is skipped
(counted). The interval at ``level`` is numpy's linear-interpolated quantiles
(``numpy.quantile``, method ``linear``) of the values at ``(1 - level) / 2`` and
``1 - (1 - level) / 2``. Deterministic for a given seed; the twin is
:func:`audiorepro.reference.verification.speaker_bootstrap`.

>>> r = speaker_bootstrap([0.9, 0.2, 0.8, 0.1], [True, False, True, False],
...                       ["A", "A", "B", "B"], ["A", "B", "B", "A"], resamples=20, seed=0)
>>> r.n_speakers, r.values["eer"].size + r.skipped
(2, 20)
>>> r.intervals["eer"]
(0.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from audiorepro.metrics.verification import eer_of_points, min_dcf_of_points, operating_points

#: The version of the definition above; a change of any value is a new version.
BOOTSTRAP_VERSION = 1
#: The measures an interval is given for, by their definition names.
MEASURES = ("eer", "min_dcf_p0.01", "min_dcf_p0.05")


@dataclass(frozen=True)
class Bootstrap:
    """Every resample's value per measure (skipped ones left out) and the intervals."""

    n_speakers: int
    skipped: int  #: resamples without both target and non-target trials
    values: dict[str, npt.NDArray[np.float64]]
    intervals: dict[str, tuple[float, float] | None]  #: None: every resample skipped


def _measures(
    scores: npt.NDArray[np.float64], target: npt.NDArray[np.bool_], w: npt.NDArray[np.int64]
) -> tuple[float, float, float] | None:
    keep = w > 0
    op = operating_points(np.repeat(scores[keep], w[keep]), np.repeat(target[keep], w[keep]))
    eer = eer_of_points(op)
    if eer is None:
        return None
    low, high = min_dcf_of_points(op, 0.01), min_dcf_of_points(op, 0.05)
    assert low is not None and high is not None
    return eer, low, high


def speaker_bootstrap(
    scores: npt.ArrayLike,
    is_target: npt.ArrayLike,
    enrollment_speakers: Sequence[str],
    test_speakers: Sequence[str],
    *,
    resamples: int,
    seed: int,
    level: float = 0.95,
) -> Bootstrap:
    """The speaker-level bootstrap of the module docstring."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    t = np.asarray(is_target, dtype=bool).ravel()
    if not s.size == t.size == len(enrollment_speakers) == len(test_speakers):
        raise ValueError("one target flag and two speakers per score")
    if resamples < 1 or not 0.0 < level < 1.0:
        raise ValueError("expected resamples >= 1 and 0 < level < 1")
    names, codes = np.unique(
        np.asarray([*enrollment_speakers, *test_speakers], dtype=str), return_inverse=True
    )
    a, b = codes[: s.size], codes[s.size :]
    n = names.size
    rng = np.random.default_rng(seed)
    got: list[tuple[float, float, float]] = []
    for _ in range(resamples):
        m = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.int64)
        value = _measures(s, t, m[a] * m[b])
        if value is not None:
            got.append(value)
    values = {k: np.asarray([v[i] for v in got], dtype=np.float64) for i, k in enumerate(MEASURES)}
    q = ((1.0 - level) / 2.0, 1.0 - (1.0 - level) / 2.0)
    intervals: dict[str, tuple[float, float] | None] = {
        k: (None if not got else (float(np.quantile(v, q[0])), float(np.quantile(v, q[1]))))
        for k, v in values.items()
    }
    return Bootstrap(int(n), resamples - len(got), values, intervals)

"""Reference speaker-verification measures, written from the definitions alone (slow on purpose).

Cosines with ``math.fsum`` over plain Python floats; the equal error rate by counting, for
every distinct score, the trials it accepts (quadratic), and by walking the segments between
the operating points in exact fractions until one meets ``F = M``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any


def speaker_trials(embeddings: Any, speakers: Sequence[str]) -> tuple[list[float], list[bool]]:
    """Every pair ``i < j`` in row-major order: the cosine of the unit vectors, same speaker."""
    rows = [[float(x) for x in row] for row in embeddings]
    units = []
    for row in rows:
        norm = math.sqrt(math.fsum(x * x for x in row))
        units.append([x / norm for x in row])
    scores, targets = [], []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            scores.append(math.fsum(a * b for a, b in zip(units[i], units[j], strict=True)))
            targets.append(speakers[i] == speakers[j])
    return scores, targets


def trial_scores(embeddings: Any, enrollment: Iterable[Any], test: Iterable[Any]) -> list[float]:
    """Each trial's cosine: rows ``enrollment[k]`` and ``test[k]`` as unit vectors, dotted."""
    rows = [[float(x) for x in row] for row in embeddings]
    units = []
    for row in rows:
        norm = math.sqrt(math.fsum(x * x for x in row))
        units.append([x / norm for x in row])
    return [
        math.fsum(a * b for a, b in zip(units[int(i)], units[int(j)], strict=True))
        for i, j in zip(enrollment, test, strict=True)
    ]


def equal_error_rate(scores: Any, is_target: Any) -> float | None:
    """The crossing of the operating-point curve with ``F = M`` (see the metric's definition)."""
    trials = [(float(s), bool(t)) for s, t in zip(scores, is_target, strict=True)]
    n_target = sum(1 for _, t in trials if t)
    n_nontarget = len(trials) - n_target
    if n_target == 0 or n_nontarget == 0:
        return None
    points = [(Fraction(0), Fraction(1))]  # (false acceptance rate, miss rate), nothing accepted
    for threshold in sorted({s for s, _ in trials}, reverse=True):
        accepted_non = sum(1 for s, t in trials if not t and s >= threshold)
        rejected_tar = sum(1 for s, t in trials if t and s < threshold)
        points.append((Fraction(accepted_non, n_nontarget), Fraction(rejected_tar, n_target)))
    for (f0, m0), (f1, m1) in itertools.pairwise(points):
        if m0 == f0:
            return float(f0)
        if m1 <= f1:  # the segment from (f0, m0) to (f1, m1) crosses F = M
            # F + x (f1 - f0) = M + x (m1 - m0), 0 < x <= 1
            x = (m0 - f0) / ((m0 - f0) - (m1 - f1))
            return float(f0 + x * (f1 - f0))
    raise AssertionError("the last operating point accepts every trial, so M = 0 <= F")

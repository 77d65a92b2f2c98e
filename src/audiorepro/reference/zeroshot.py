"""Reference zero-shot classification metrics: exact integer scores, a full sort per clip.

Written from the definitions only (no code shared with :mod:`audiorepro.metrics`):

1. Every stored float is ``n / 2**s``; scaling all values by one common power of two makes
   every dot product an exact integer (times one common positive factor).
2. Per clip, the class prompts are sorted by (descending score, tie class, class index), where
   the tie class puts the clip's own class first among equal scores (optimistic) or last
   (pessimistic); its 1-based position is the clip's class rank.
3. Accuracy, top-5 accuracy and per-class recall are exact fractions rounded once to
   float64; balanced accuracy is ``math.fsum`` of the rounded recalls over the classes that
   have clips, divided by their number.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np


def _integer_rows(*arrays: Any) -> list[list[list[int]]]:
    ratios = [
        [[float(v).as_integer_ratio() for v in row] for row in np.asarray(a).tolist()]
        for a in arrays
    ]
    denom = max((d for a in ratios for row in a for _, d in row), default=1)
    return [[[n * (denom // d) for n, d in row] for row in a] for a in ratios]


def reference_class_ranks(
    audio: Any, prompts: Any, labels: Any, tie_policy: str = "pessimistic"
) -> list[int]:
    """1-based position of each clip's own class among all prompts, from exact scores."""
    A, T = _integer_rows(audio, prompts)
    ranks = []
    own_first = tie_policy == "optimistic"
    for row, label in zip(A, [int(v) for v in np.asarray(labels).tolist()], strict=True):
        scores = [sum(x * y for x, y in zip(row, t, strict=True)) for t in T]

        def key(c: int, label: int = label, scores: list[int] = scores) -> tuple[int, int, int]:
            is_own = c == label
            return (-scores[c], 0 if is_own == own_first else 1, c)

        ordered = sorted(range(len(T)), key=key)
        ranks.append(ordered.index(label) + 1)
    return ranks


def reference_zeroshot_metrics(
    audio: Any, prompts: Any, labels: Any, tie_policy: str = "pessimistic"
) -> dict[str, Any]:
    """``accuracy``, ``top5_accuracy``, ``balanced_accuracy`` and ``per_class_recall``."""
    ranks = reference_class_ranks(audio, prompts, labels, tie_policy)
    y = [int(v) for v in np.asarray(labels).tolist()]
    n = len(ranks)
    classes = sorted(set(y))
    recall = {
        c: float(
            Fraction(
                sum(1 for r, lab in zip(ranks, y, strict=True) if lab == c and r == 1),
                sum(1 for lab in y if lab == c),
            )
        )
        for c in classes
    }
    return {
        "accuracy": float(Fraction(sum(1 for r in ranks if r == 1), n)),
        "top5_accuracy": float(Fraction(sum(1 for r in ranks if r <= 5), n)),
        "balanced_accuracy": math.fsum(recall.values()) / len(recall),
        "per_class_recall": {str(c): v for c, v in recall.items()},
    }

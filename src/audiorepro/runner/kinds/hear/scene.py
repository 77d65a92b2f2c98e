"""A HEAR scene task's scores per data split, shared by the ``hear`` kind's predictors
(``linear-v1`` in :mod:`audiorepro.runner.kinds.hear`, ``hear-mlp-v1`` in
:mod:`.mlp`): heareval's score names
to the kit's functions (:mod:`audiorepro.metrics.hear`) and to their twins
(:mod:`audiorepro.reference.hear`), and one split's class scores and targets scored by them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.metrics import hear as scores
from audiorepro.reference import hear as twin

__all__ = ["SCENE_SCORES", "TWIN_SCORES", "FoldPrediction", "Score", "fold_scores"]

Score = Callable[[Any, Any], float]
SCENE_SCORES: dict[str, Score] = {
    "top1_acc": scores.top1_accuracy_score,
    "pitch_acc": scores.top1_accuracy_score,
    "chroma_acc": scores.chroma_accuracy_score,
    "mAP": scores.mean_average_precision_score,
    "d_prime": scores.d_prime_score,
    "aucroc": scores.aucroc_score,
}
TWIN_SCORES: dict[str, Score] = {
    "top1_acc": twin.top1_accuracy,
    "pitch_acc": twin.top1_accuracy,
    "chroma_acc": twin.chroma_accuracy,
    "mAP": twin.mean_average_precision,
    "d_prime": twin.d_prime,
    "aucroc": twin.aucroc,
}


@dataclass(frozen=True)
class FoldPrediction:
    """One data split's class scores and 0/1 targets (rows of files, vocabulary order)."""

    valid: npt.NDArray[np.float64]
    valid_targets: npt.NDArray[np.float64]
    test: npt.NDArray[np.float64]
    test_targets: npt.NDArray[np.float64]


def fold_scores(
    names: tuple[str, ...], fold: FoldPrediction, table: Mapping[str, Score] = SCENE_SCORES
) -> tuple[dict[str, float], float]:
    """The test scores and the validation score (the first score) of one data split."""
    test = {name: table[name](fold.test, fold.test_targets) for name in names}
    return test, table[names[0]](fold.valid, fold.valid_targets)

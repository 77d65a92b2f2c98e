"""Classification metrics for probe studies (definitions version 1).

Inputs are integer class indices ``true`` and ``pred`` in ``[0, n_classes)``. A class "occurs"
when it appears in ``true`` or ``pred``. Undefined values are ``None``, never 0. No ties:
predictions are given as classes. Means over classes are exact fractions rounded once.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from audiorepro.metrics.bootstrap import percentile_interval
from audiorepro.metrics.probe_records import ClassificationReport

IntArray = npt.NDArray[np.int64]


def confusion_matrix(true: npt.ArrayLike, pred: npt.ArrayLike, *, n_classes: int) -> IntArray:
    """``C[i, j]`` = number of items of true class ``i`` predicted as ``j``.

    Formula: counts. Ties: none.

    >>> confusion_matrix([0, 1, 1], [0, 0, 1], n_classes=2).tolist()
    [[1, 0], [1, 1]]
    """
    t = np.asarray(true, dtype=np.int64)
    p = np.asarray(pred, dtype=np.int64)
    c = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(c, (t, p), 1)
    return c


def accuracy(true: npt.ArrayLike, pred: npt.ArrayLike) -> float | None:
    """Fraction of items predicted correctly; None without items.

    Formula: ``mean [pred_i == true_i]``. Ties: none.

    >>> accuracy([0, 1, 1, 2], [0, 1, 0, 2])
    0.75
    """
    t = np.asarray(true)
    if t.size == 0:
        return None
    return int(np.count_nonzero(t == np.asarray(pred))) / t.size


def per_class_recall(c: IntArray) -> list[float | None]:
    """Recall of each class from a confusion matrix.

    Formula: ``C[k, k] / sum_j C[k, j]``; None for a class absent from the references.
    Ties: none.

    >>> per_class_recall(confusion_matrix([0, 1, 1], [0, 0, 1], n_classes=3))
    [1.0, 0.5, None]
    """
    support = c.sum(axis=1)
    return [int(c[k, k]) / int(support[k]) if support[k] else None for k in range(c.shape[0])]


def per_class_precision(c: IntArray) -> list[float | None]:
    """Precision of each class from a confusion matrix.

    Formula: ``C[k, k] / sum_i C[i, k]``; None for a class never predicted. Ties: none.

    >>> per_class_precision(confusion_matrix([0, 1, 1], [0, 0, 1], n_classes=3))
    [0.5, 1.0, None]
    """
    predicted = c.sum(axis=0)
    return [int(c[k, k]) / int(predicted[k]) if predicted[k] else None for k in range(c.shape[0])]


def balanced_accuracy(true: npt.ArrayLike, pred: npt.ArrayLike, *, n_classes: int) -> float | None:
    """Mean recall over the classes present in ``true`` (scikit-learn's definition).

    Formula: ``mean_{k in true} C[k, k] / support_k``. Ties: none. None without items.

    >>> balanced_accuracy([0, 0, 0, 1], [0, 0, 0, 0], n_classes=2)
    0.5
    """
    c = confusion_matrix(true, pred, n_classes=n_classes)
    support = c.sum(axis=1)
    # Exact fractions, one rounding: the result does not depend on the order of the classes.
    recalls = [Fraction(int(c[k, k]), int(support[k])) for k in range(n_classes) if support[k]]
    return float(sum(recalls, Fraction(0)) / len(recalls)) if recalls else None


def macro_f1(true: npt.ArrayLike, pred: npt.ArrayLike, *, n_classes: int) -> float | None:
    """Unweighted mean F1 over the classes that occur in ``true`` or ``pred``.

    Formula: ``F1_k = 2 C[k, k] / (support_k + predicted_k)`` (0 when the class is predicted
    and never right, or present and never found), averaged over occurring classes (as
    scikit-learn's ``f1_score(average="macro")`` with ``zero_division=0``). Ties: none.

    >>> macro_f1([0, 0, 1, 1], [0, 1, 1, 1], n_classes=3)
    0.7333333333333333
    """
    c = confusion_matrix(true, pred, n_classes=n_classes)
    support, predicted = c.sum(axis=1), c.sum(axis=0)
    f1 = [
        Fraction(2 * int(c[k, k]), int(support[k] + predicted[k]))
        for k in range(n_classes)
        if support[k] + predicted[k] > 0
    ]
    return float(sum(f1, Fraction(0)) / len(f1)) if f1 else None


def group_bootstrap_accuracy_ci(
    true: npt.ArrayLike,
    pred: npt.ArrayLike,
    groups: npt.ArrayLike,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of accuracy, resampling whole groups (e.g. actors).

    Formula: each resample draws as many groups as there are, with replacement, from a seeded
    PCG64 generator, and pools their items; its accuracy is correct / items. Ties: none (the
    quantiles interpolate linearly). Interval: the ``(1 - level)/2`` and ``(1 + level)/2``
    quantiles (numpy's linear interpolation) of the resampled accuracies. None without items.

    >>> groups = ["a", "a", "b", "b"]
    >>> group_bootstrap_accuracy_ci([0, 1, 1, 0], [0, 1, 0, 0], groups, n_resamples=200)
    (0.5, 1.0)
    """
    t, p = np.asarray(true), np.asarray(pred)
    g = np.asarray(groups)
    if t.size == 0:
        return None
    names = sorted(set(g.tolist()))
    correct = np.array([int(np.count_nonzero((t == p)[g == name])) for name in names])
    counts = np.array([int(np.count_nonzero(g == name)) for name in names])
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = rng.integers(0, len(names), size=(n_resamples, len(names)))
    acc = correct[draws].sum(axis=1) / counts[draws].sum(axis=1)
    return percentile_interval(acc, level)


def classification_report(
    true: npt.ArrayLike,
    pred: npt.ArrayLike,
    *,
    class_names: list[str],
    groups: npt.ArrayLike | None = None,
) -> ClassificationReport:
    """Every classification metric of ``pred`` against ``true`` (see the functions above)."""
    n_classes = len(class_names)
    c = confusion_matrix(true, pred, n_classes=n_classes)
    out: ClassificationReport = {
        "n": int(np.asarray(true).size),
        "accuracy": accuracy(true, pred),
        "balanced_accuracy": balanced_accuracy(true, pred, n_classes=n_classes),
        "macro_f1": macro_f1(true, pred, n_classes=n_classes),
        "per_class": {
            name: {"recall": r, "precision": pr}
            for name, r, pr in zip(
                class_names, per_class_recall(c), per_class_precision(c), strict=True
            )
        },
        "confusion_matrix": c.tolist(),
    }
    if groups is not None:
        ci = group_bootstrap_accuracy_ci(true, pred, groups)
        out["accuracy_ci95_group_bootstrap"] = None if ci is None else list(ci)
    return out

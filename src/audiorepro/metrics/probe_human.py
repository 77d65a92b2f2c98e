"""Human-benchmark metrics of a probe: how a model's scores agree with human labels per prompt.

A human benchmark is items (a clip answering a prompt, e.g. "does this voice sound happy?")
with a model score and a human label. The metrics:

- :func:`per_prompt_spearman` and :func:`mean_prompt_spearman`: rank agreement within each
  prompt, and its equal-weight mean over prompts;
- :func:`oracle_balanced_accuracy`: balanced accuracy at the best threshold chosen on the
  evaluated labels themselves (an optimistic separability statistic), overall or per prompt
  (:func:`oracle_balanced_accuracy_per_prompt`);
- :func:`heldout_threshold_balanced_accuracy`: the threshold chosen on other clips, in
  clip-grouped folds, so that no clip is scored with a threshold fitted on it.

Thresholds: an item is predicted positive when its score is >= the threshold. Candidate
thresholds are the distinct scores and +inf (everything negative), so items with tied scores are
always on the same side. Balanced accuracy is ``(TP/P + TN/N) / 2``; it is undefined (None) when
either class is absent. Named label cuts ("at least two raters") are separate calls on the
selected items, reported as separate rows.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import param_error
from audiorepro.metrics.probe_records import HumanCutReport
from audiorepro.metrics.regression import spearman_rho

FOLDS = 5


def _arrays(
    scores: npt.ArrayLike, labels: npt.ArrayLike, func: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.shape != y.shape or s.ndim != 1:
        raise param_error("labels", func, "a 1-D array as long as scores", y.shape)
    if not np.all(np.isfinite(s)):
        raise param_error("scores", func, "finite numbers", "a NaN or inf")
    if not np.all((y == 0) | (y == 1)):
        raise param_error("labels", func, "binary labels (0 or 1)", sorted(set(y.tolist()))[:3])
    return s, y.astype(bool)


def _best_threshold(s: npt.NDArray[np.float64], y: npt.NDArray[np.bool_]) -> tuple[float, int]:
    """(threshold, 2*P*N*BA) maximizing balanced accuracy; ties: the lowest such threshold."""
    p, n = int(y.sum()), int((~y).sum())
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    tp = np.cumsum(y_sorted)
    fp = np.cumsum(~y_sorted)
    # Evaluate only after the last item of each group of equal scores (ties stay together).
    last = np.r_[s_sorted[1:] != s_sorted[:-1], True]
    thresholds = np.r_[np.inf, s_sorted[last]]
    # 2*P*N*BA = TP*N + TN*P, an integer: maximizers are compared exactly.
    crit = np.r_[n * p, tp[last] * n + (n - fp[last]) * p]
    best = int(crit.max())
    # The lowest threshold among the maximizers: the last one in descending order.
    k = int(np.flatnonzero(crit == best)[-1])
    return float(thresholds[k]), best


def oracle_balanced_accuracy(scores: npt.ArrayLike, labels: npt.ArrayLike) -> float | None:
    """Balanced accuracy at the best threshold, chosen on these same labels; higher is better.

    Formula: ``max_t (TP(t)/P + TN(t)/N) / 2`` with positive = score >= t over the distinct
    scores and +inf. Ties: tied scores fall on the same side of every threshold. None when a
    class is absent. Optimistic by construction (>= 0.5 always).

    >>> oracle_balanced_accuracy([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    >>> oracle_balanced_accuracy([0.5, 0.5], [0, 1])
    0.5
    >>> oracle_balanced_accuracy([0.2, 0.3], [1, 1]) is None
    True
    """
    s, y = _arrays(scores, labels, "oracle_balanced_accuracy")
    p, n = int(y.sum()), int((~y).sum())
    if p == 0 or n == 0:
        return None
    _, crit = _best_threshold(s, y)
    return crit / (2 * p * n)


def _by_prompt(prompts: npt.ArrayLike, size: int, func: str) -> list[npt.NDArray[np.intp]]:
    g = np.asarray(prompts)
    if g.shape != (size,):
        raise param_error("prompts", func, "a 1-D array as long as scores", g.shape)
    # First-appearance order of prompts: deterministic, and the order a reader gave.
    _, first, inverse = np.unique(g, return_index=True, return_inverse=True)
    return [np.flatnonzero(inverse == k) for k in np.argsort(first, kind="stable")]


def oracle_balanced_accuracy_per_prompt(
    scores: npt.ArrayLike, labels: npt.ArrayLike, prompts: npt.ArrayLike
) -> float | None:
    """The mean over prompts of each prompt's :func:`oracle_balanced_accuracy`.

    Formula: ``(1/|Q|) sum_{q in Q} oracle_ba(items of q)``, Q = prompts with both classes
    (equal weight per prompt). Ties: as in :func:`oracle_balanced_accuracy`. None when no
    prompt has both classes.

    >>> oracle_balanced_accuracy_per_prompt([1, 2, 3, 1, 2, 2], [0, 1, 1, 1, 0, 1],
    ...                                     ["a", "a", "a", "b", "b", "b"])
    0.75
    """
    s, y = _arrays(scores, labels, "oracle_balanced_accuracy_per_prompt")
    values = [
        oracle_balanced_accuracy(s[i], y[i])
        for i in _by_prompt(prompts, s.size, "oracle_balanced_accuracy_per_prompt")
    ]
    defined = [v for v in values if v is not None]
    return math.fsum(defined) / len(defined) if defined else None


def per_prompt_spearman(
    scores: npt.ArrayLike, labels: npt.ArrayLike, prompts: npt.ArrayLike
) -> dict[str, float | None]:
    """Spearman's rho between scores and human labels within each prompt (first-seen order).

    Formula: per prompt, ``pearson(rank(scores), rank(labels))``. Ties: average ranks. None for
    a prompt with fewer than 3 items or a constant side. Labels may be graded.

    >>> per_prompt_spearman([1, 2, 3, 3, 2, 1], [1, 2, 3, 1, 2, 3], ["a"] * 3 + ["b"] * 3)
    {'a': 1.0, 'b': -1.0}
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    g = np.asarray(prompts)
    return {
        str(g[i[0]]): spearman_rho(s[i], y[i]) for i in _by_prompt(g, s.size, "per_prompt_spearman")
    }


def mean_prompt_spearman(
    scores: npt.ArrayLike, labels: npt.ArrayLike, prompts: npt.ArrayLike
) -> float | None:
    """The equal-weight mean of :func:`per_prompt_spearman` over prompts where it is defined.

    Formula: ``(1/|Q|) sum_{q in Q} rho_q``, Q = prompts with a defined rho. Ties: average
    ranks within a prompt. None when no prompt has a defined rho.

    >>> mean_prompt_spearman([1, 2, 3, 3, 2, 1, 5], [1, 2, 3, 1, 2, 4, 5], list("aaabbbc"))
    0.0
    """
    rhos = [v for v in per_prompt_spearman(scores, labels, prompts).values() if v is not None]
    return math.fsum(rhos) / len(rhos) if rhos else None


def clip_folds(clips: npt.ArrayLike, folds: int = FOLDS) -> npt.NDArray[np.intp]:
    """Each item's fold: clips sorted by id, the i-th distinct clip in fold ``i % folds``.

    All items of a clip share a fold; the assignment depends only on the clip ids.

    >>> clip_folds(["c", "a", "b", "a"], folds=2).tolist()
    [0, 0, 1, 0]
    """
    if not isinstance(folds, int) or folds < 2:
        raise param_error("folds", "clip_folds", "an int >= 2", folds)
    _, inverse = np.unique(np.asarray(clips), return_inverse=True)
    return np.asarray(inverse.reshape(-1) % folds, dtype=np.intp)


def heldout_threshold_balanced_accuracy(
    scores: npt.ArrayLike, labels: npt.ArrayLike, clips: npt.ArrayLike, *, folds: int = FOLDS
) -> float | None:
    """Balanced accuracy of a threshold chosen on held-out clips, in clip-grouped folds.

    Formula: for each fold k (:func:`clip_folds`), t_k = the threshold maximizing balanced
    accuracy on the items outside fold k; each item of fold k is predicted positive when its
    score >= t_k; the result is the balanced accuracy of all these out-of-fold predictions
    pooled. Ties: tied scores share a side; among maximizing thresholds the lowest is taken.
    A fold whose training items lack a class gets no threshold and its items are left out.
    None when the predicted items lack a class.

    Clips a, c form fold 0 and b, d fold 1; fold 1's threshold, fitted on a and c, is 0.9,
    so d (0.8) is missed:

    >>> heldout_threshold_balanced_accuracy([0.1, 0.2, 0.9, 0.8], [0, 0, 1, 1],
    ...                                     ["a", "b", "c", "d"], folds=2)
    0.75
    """
    func = "heldout_threshold_balanced_accuracy"
    s, y = _arrays(scores, labels, func)
    fold = clip_folds(clips, folds)
    if fold.shape != s.shape:
        raise param_error("clips", func, "a 1-D array as long as scores", fold.shape)
    pred = np.zeros(s.size, dtype=bool)
    used = np.zeros(s.size, dtype=bool)
    for k in range(folds):
        test = fold == k
        train_s, train_y = s[~test], y[~test]
        if not test.any() or train_y.all() or not train_y.any():
            continue
        t, _ = _best_threshold(train_s, train_y)
        pred[test] = s[test] >= t
        used[test] = True
    yy, pp = y[used], pred[used]
    p, n = int(yy.sum()), int((~yy).sum())
    if p == 0 or n == 0:
        return None
    tp, tn = int((yy & pp).sum()), int((~yy & ~pp).sum())
    return (tp * n + tn * p) / (2 * p * n)


def human_benchmark_report(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    prompts: npt.ArrayLike,
    clips: npt.ArrayLike,
    *,
    dimensions: npt.ArrayLike | None = None,
) -> HumanCutReport:
    """Every human-benchmark number of one label cut (the fields of a saved cut).

    ``per_prompt``: per prompt (first-seen order) its items ``n``, :func:`per_prompt_spearman`
    and :func:`oracle_balanced_accuracy` on its items. With ``dimensions`` (the dimension of
    each item's prompt), ``per_dimension``: per dimension (first-seen order) its items, prompts,
    and :func:`mean_prompt_spearman` and :func:`oracle_balanced_accuracy_per_prompt` over its
    prompts alone.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    g = np.asarray(prompts)
    rhos = per_prompt_spearman(s, y, g)
    out: HumanCutReport = {
        "n": int(y.size),
        "prompts": len(set(g.tolist())),
        "positive_rate": float(y.mean()) if y.size else None,
        "mean_prompt_spearman": mean_prompt_spearman(s, y, g),
        "balanced_accuracy_oracle_per_prompt": oracle_balanced_accuracy_per_prompt(s, y, g),
        "balanced_accuracy_oracle_overall": oracle_balanced_accuracy(s, y),
        "balanced_accuracy_5fold_clip_grouped": heldout_threshold_balanced_accuracy(s, y, clips),
        "per_prompt": {
            str(g[i[0]]): {
                "n": int(i.size),
                "spearman": rhos[str(g[i[0]])],
                "balanced_accuracy_oracle": oracle_balanced_accuracy(s[i], y[i]),
            }
            for i in _by_prompt(g, s.size, "human_benchmark_report")
        },
    }
    if dimensions is not None:
        d = np.asarray(dimensions)
        out["per_dimension"] = {
            str(d[i[0]]): {
                "n": int(i.size),
                "prompts": len(set(g[i].tolist())),
                "mean_prompt_spearman": mean_prompt_spearman(s[i], y[i], g[i]),
                "balanced_accuracy_oracle_per_prompt": oracle_balanced_accuracy_per_prompt(
                    s[i], y[i], g[i]
                ),
            }
            for i in _by_prompt(d, s.size, "human_benchmark_report")
        }
    return out

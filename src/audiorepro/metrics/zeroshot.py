"""Zero-shot classification metrics: clips ranked against one text prompt per class.

Setting
-------
``N`` clips, ``C`` classes, one prompt per class (``"This is a sound of dog"``), the label of
each clip (its class index). The score of clip ``i`` and class ``c`` is the dot product of the
stored vectors (no re-normalization), as in :mod:`.retrieval`. Every metric here is a
function of the **class ranks**: the 1-based position of a clip's own class among all ``C``
prompts in descending score. That is exactly the a2t position of a dump whose relevance makes
each clip relevant to its class prompt, so ``accuracy`` is a2t ``r@1`` and ``top_k_accuracy``
a2t ``r@k`` of such a dump.

Ties
----
The same two policies as :mod:`.retrieval`: ``pessimistic`` (the default) puts the clip's
class after every other class tied with it (a tie is never a correct guess),
``optimistic`` before them. Rank decisions are exact (:func:`class_ranks`): float64 scores
decide every comparison outside their rigorous error band, and the few inside it are decided
by :func:`audiorepro.metrics._exact.exact_dot_difference_sign`, so ranks do not depend on the
machine, the BLAS or the thread count.

Rounding rule
-------------
As in :mod:`.retrieval`: each per-item value (per clip, or per class for the class-averaged
metrics) is the float64 nearest to its exact rational value, and a mean is
``math.fsum(values) / n``.

The ``laion-clap`` zero-shot profile (:func:`laion_clap_zeroshot`) computes what laion-clap's
README check (the published ESC-50 numbers) computes, with the same torch operations.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.core.errors import UserError, param_error
from audiorepro.metrics._exact import exact_dot_difference_sign
from audiorepro.metrics.retrieval import TIE_POLICIES, TiePolicy

#: Version of the zero-shot definitions here; changes whenever a formula or policy changes.
DEFINITIONS_VERSION = 1
#: The canonical zero-shot metrics, all higher-is-better.
METRICS = ("accuracy", "top5_accuracy", "balanced_accuracy")
#: laion-clap's names for its zero-shot check (README "Zeroshot Classification with ESC50").
LAION_CLAP_METRICS = ("mean_rank", "median_rank", "R@1", "R@5", "R@10", "mAP@10")
HIGHER_IS_BETTER = {
    "accuracy": True,
    "top5_accuracy": True,
    "balanced_accuracy": True,
    "mean_rank": False,
    "median_rank": False,
    "R@1": True,
    "R@5": True,
    "R@10": True,
    "mAP@10": True,
}

IntArray = npt.NDArray[np.int64]


def _as_ranks(ranks: npt.ArrayLike, func: str) -> IntArray:
    r = np.asarray(ranks)
    if r.ndim != 1 or r.size == 0 or r.dtype.kind not in "iu" or int(r.min()) < 1:
        raise param_error("ranks", func, "a non-empty 1-D array of integer ranks >= 1", ranks)
    return r.astype(np.int64)


def _as_labels(labels: npt.ArrayLike, n: int, n_classes: int, func: str) -> IntArray:
    lab = np.asarray(labels)
    if (
        lab.shape != (n,)
        or lab.dtype.kind not in "iu"
        or (n and (int(lab.min()) < 0 or int(lab.max()) >= n_classes))
    ):
        raise param_error("labels", func, f"{n} integer class indices in [0, {n_classes})", labels)
    return lab.astype(np.int64)


def _check_n_classes(n_classes: object, func: str) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise param_error("n_classes", func, "an int >= 1", n_classes)
    return int(n_classes)


def _fraction_mean(hits: int, n: int) -> float:
    # An integer count over an integer: one IEEE division, the float64 nearest the exact value.
    return hits / n


def class_ranks(
    audio: npt.ArrayLike,
    prompts: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    tie_policy: TiePolicy = "pessimistic",
) -> IntArray:
    """The 1-based rank of each clip's own class prompt among all prompts, decided exactly.

    ``rank_i = 1 + |{c != y_i : s_ic > s_iy}|`` (optimistic) or
    ``1 + |{c != y_i : s_ic >= s_iy}|`` (pessimistic), with ``s_ic = a_i . t_c`` the exact
    dot product of the stored vectors.

    >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    >>> t = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    >>> class_ranks(a, t, [0, 0, 1]).tolist()
    [1, 2, 2]
    >>> class_ranks(a, t, [0, 0, 1], tie_policy="optimistic").tolist()
    [1, 2, 1]
    """
    if tie_policy not in TIE_POLICIES:
        raise param_error("tie_policy", "class_ranks", "'pessimistic' or 'optimistic'", tie_policy)
    A = np.asarray(audio)
    T = np.asarray(prompts)
    if A.ndim != 2 or T.ndim != 2 or A.shape[1] != T.shape[1] or A.dtype != T.dtype:
        raise param_error(
            "audio", "class_ranks", "[N, D] and prompts [C, D] of one float dtype", A.shape
        )
    y = _as_labels(labels, A.shape[0], T.shape[0], "class_ranks")
    if A.shape[0] == 0:
        return np.zeros(0, np.int64)
    A64, T64 = A.astype(np.float64), T.astype(np.float64)
    S = A64 @ T64.T
    # A rigorous bound on |fl(a.t) - a.t| for any summation order, FMA or not: gamma_D |a||t|,
    # doubled for the float64 norms themselves; comparisons outside both bands are decided.
    d = A.shape[1]
    u = 2.0**-53
    gamma = 2.0 * d * u / (1.0 - d * u)
    band = gamma * np.outer(np.linalg.norm(A64, axis=1), np.linalg.norm(T64, axis=1))
    rows = np.arange(A.shape[0])
    own = S[rows, y][:, None]
    own_band = band[rows, y][:, None]
    diff = S - own
    sure_above = diff > band + own_band
    undecided = ~sure_above & (diff >= -(band + own_band))
    undecided[rows, y] = False
    ranks: IntArray = (1 + sure_above.sum(axis=1)).astype(np.int64)
    strict = tie_policy == "optimistic"
    for i, c in zip(*np.nonzero(undecided), strict=True):
        sign = exact_dot_difference_sign(A[i], T[c], A[i], T[y[i]])
        if sign > 0 or (sign == 0 and not strict):
            ranks[i] += 1
    return ranks


def accuracy(ranks: npt.ArrayLike) -> float:
    """Top-1 accuracy: the fraction of clips whose own class prompt scores first.

    Formula: ``mean_i [rank_i = 1]``. Ties: by the policy that made the ranks (pessimistic: a
    tie with another class is a miss).

    >>> accuracy([1, 2, 1, 1])
    0.75
    """
    r = _as_ranks(ranks, "accuracy")
    return _fraction_mean(int((r == 1).sum()), r.size)


def top_k_accuracy(ranks: npt.ArrayLike, *, k: int) -> float:
    """Top-k accuracy: the fraction of clips whose own class is among the ``k`` best prompts.

    Formula: ``mean_i [rank_i <= k]``. Ties: by the policy that made the ranks.

    >>> top_k_accuracy([1, 5, 6, 2], k=5)
    0.75
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise param_error("k", "top_k_accuracy", "an int >= 1", k)
    r = _as_ranks(ranks, "top_k_accuracy")
    return _fraction_mean(int((r <= k).sum()), r.size)


def per_class_recall(
    ranks: npt.ArrayLike, labels: npt.ArrayLike, *, n_classes: int
) -> dict[int, float]:
    """Recall of each class that has clips: the fraction of its clips classified correctly.

    Formula: ``recall_c = |{i : y_i = c, rank_i = 1}| / |{i : y_i = c}|``, for every class
    ``c`` with at least one clip (a class without clips has no recall and is left out, never
    counted as 0). Ties: by the policy that made the ranks.

    >>> per_class_recall([1, 2, 1, 1], [0, 0, 1, 2], n_classes=4)
    {0: 0.5, 1: 1.0, 2: 1.0}
    """
    n = _check_n_classes(n_classes, "per_class_recall")
    r = _as_ranks(ranks, "per_class_recall")
    y = _as_labels(labels, r.size, n, "per_class_recall")
    total = np.bincount(y, minlength=n)
    hits = np.bincount(y[r == 1], minlength=n)
    return {c: _fraction_mean(int(hits[c]), int(total[c])) for c in np.flatnonzero(total).tolist()}


def balanced_accuracy(ranks: npt.ArrayLike, labels: npt.ArrayLike, *, n_classes: int) -> float:
    """Balanced accuracy: the mean of :func:`per_class_recall` over the classes with clips.

    Formula: ``(1/|C+|) sum_{c in C+} recall_c`` with ``C+`` the classes that have clips; each
    recall rounded once to float64, summed with ``math.fsum``. Equal to :func:`accuracy` when
    every class has the same number of clips (up to that rounding). Ties: by the policy that
    made the ranks.

    >>> balanced_accuracy([1, 2, 1, 1], [0, 0, 1, 2], n_classes=4)
    0.8333333333333334
    """
    recalls = per_class_recall(ranks, labels, n_classes=n_classes)
    return math.fsum(recalls.values()) / len(recalls)


class ZeroshotMetrics(TypedDict):
    """Every canonical zero-shot metric of one set of clips (:func:`compute_zeroshot`)."""

    accuracy: float
    top5_accuracy: float
    balanced_accuracy: float
    per_class_recall: dict[str, float]  #: class index (a string) -> recall


def compute_zeroshot(
    audio: npt.ArrayLike,
    prompts: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    tie_policy: TiePolicy = "pessimistic",
) -> ZeroshotMetrics:
    """Every canonical zero-shot metric of one set of clips: ``accuracy``, ``top5_accuracy``,
    ``balanced_accuracy`` and ``per_class_recall`` (class index as a string -> recall).

    >>> a = np.eye(3, dtype=np.float32)
    >>> out = compute_zeroshot(a, a, [0, 1, 1])
    >>> out["accuracy"], out["balanced_accuracy"], out["per_class_recall"]
    (0.6666666666666666, 0.75, {'0': 1.0, '1': 0.5})
    """
    T = np.asarray(prompts)
    ranks = class_ranks(audio, T, labels, tie_policy=tie_policy)
    n = T.shape[0]
    recalls = per_class_recall(ranks, labels, n_classes=n)
    return {
        "accuracy": accuracy(ranks),
        "top5_accuracy": top_k_accuracy(ranks, k=5),
        "balanced_accuracy": balanced_accuracy(ranks, labels, n_classes=n),
        "per_class_recall": {str(c): v for c, v in recalls.items()},
    }


def metric_values(metrics: ZeroshotMetrics) -> dict[str, float]:
    """The :data:`METRICS` of a result by name, in that order (no per-class recall).

    >>> e = np.eye(2, dtype=np.float32)
    >>> metric_values(compute_zeroshot(e, e, [0, 1]))
    {'accuracy': 1.0, 'top5_accuracy': 1.0, 'balanced_accuracy': 1.0}
    """
    return {
        "accuracy": metrics["accuracy"],
        "top5_accuracy": metrics["top5_accuracy"],
        "balanced_accuracy": metrics["balanced_accuracy"],
    }


# --- the laion-clap zero-shot profile ---------------------------------------------------------


def laion_clap_zeroshot(
    audio: npt.ArrayLike, prompts: npt.ArrayLike, labels: npt.ArrayLike, *, logit_scale: float = 1.0
) -> dict[str, float]:
    """What laion-clap's ESC-50 zero-shot check computes, with the same torch operations.

    Its README's check (and ``evaluate_zeroshot`` in ``laion_clap/evaluate/
    eval_zeroshot_classification.py``, which also multiplies by the logit scale) ranks the
    prompts of each clip with ``torch.argsort(scores, descending=True)`` on float32
    ``audio @ prompts.T`` (so ties fall as that sort puts them, on that torch build), takes the
    0-based position ``p`` of the clip's class, and reports ``mean_rank = mean(p) + 1``,
    ``median_rank = floor(median(p)) + 1`` (not the median of the ranks: for an even count it
    rounds a half down), ``R@k = mean(p < k)`` and ``mAP@10 = mean(1/(p+1) if p < 10 else 0)``
    (with one relevant prompt per clip, the reciprocal rank cut at 10), as numpy float64.

    >>> a = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    >>> out = laion_clap_zeroshot(a, a, [0, 0])
    >>> out["R@1"], out["mean_rank"], out["median_rank"], out["mAP@10"]
    (0.5, 1.5, 1.0, 0.75)
    """
    try:
        import torch
    except ImportError:  # pragma: no cover - the models extra installs torch
        raise UserError(
            "the laion-clap zero-shot profile needs torch (pip install 'audiorepro[models]')"
        ) from None
    # Copies: a dump's arrays are read-only, and torch wants writable memory.
    A = torch.from_numpy(np.array(audio, dtype=np.float32, order="C", copy=True))
    T = torch.from_numpy(np.array(prompts, dtype=np.float32, order="C", copy=True))
    y = np.array(labels, dtype=np.int64, copy=True)
    with torch.no_grad():
        ground_truth = torch.from_numpy(y).view(-1, 1)
        # evaluate_zeroshot's order: (scale * audio) @ prompts.T; the README's has no scale.
        if logit_scale != 1.0:
            A = torch.tensor(logit_scale, dtype=torch.float32) * A
        logits = A @ T.t()
        ranking = torch.argsort(logits, descending=True)
        preds = torch.where(ranking == ground_truth)[1].cpu().numpy()
    out = {
        "mean_rank": float(preds.mean() + 1),
        "median_rank": float(np.floor(np.median(preds)) + 1),
    }
    for k in (1, 5, 10):
        out[f"R@{k}"] = float(np.mean(preds < k))
    out["mAP@10"] = float(np.mean(np.where(preds < 10, 1 / (preds + 1), 0.0)))
    return out

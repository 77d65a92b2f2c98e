"""Speaker verification: trials from embeddings, and the measures of their scores
(definitions version 1).

A *trial* compares two clips; it is a *target* trial when both are of the same speaker and a
*non-target* trial otherwise. :func:`speaker_trials` makes every unordered pair of clips a
trial, scored by the cosine of their embeddings (:func:`trial_scores` scores the pairs of a
given trial list the same way). Over scores and target flags: the operating points
(:func:`operating_points`, the DET curve), the equal error rate as the ROC crossing
(:func:`equal_error_rate`) and as the crossing of the ROC convex hull (:func:`eer_rocch`,
BOSARIS), the normalized detection cost (:func:`min_dcf`, :func:`act_dcf`) and the
log-likelihood-ratio cost (:func:`cllr`, :func:`min_cllr`). Every one sorts the trials once
and counts (O(n log n) in trials, O(n) memory). The toolkits' own definitions are in
:mod:`audiorepro.metrics.verification_toolkits`; the independent twin of both is
:mod:`audiorepro.reference.verification`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFINITIONS_VERSION",
    "OperatingPoints",
    "act_dcf",
    "cllr",
    "eer_rocch",
    "equal_error_rate",
    "min_cllr",
    "min_dcf",
    "min_dcf_point",
    "operating_points",
    "speaker_trials",
    "trial_scores",
]

#: The version of the definitions below; a change of any value is a new version.
DEFINITIONS_VERSION = 1


def speaker_trials(
    embeddings: npt.ArrayLike, speakers: Sequence[str]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Every unordered pair ``i < j`` of clips as a trial: ``(scores, is_target)``.

    Formula: ``score_ij = <e_i, e_j> / (|e_i| |e_j|)`` in float64 (each embedding divided by
    its norm first, then the dot products); ``is_target_ij = speaker_i == speaker_j``. Pairs
    are in row-major order of ``(i, j)``. A zero embedding has no cosine: an error.

    >>> scores, target = speaker_trials([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]], ["a", "a", "b"])
    >>> scores.tolist(), target.tolist()
    ([1.0, 0.0, 0.0], [True, False, False])
    """
    e = np.asarray(embeddings, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] != len(speakers):
        raise ValueError(f"expected one embedding row per speaker label, got shape {e.shape}")
    i, j = np.triu_indices(len(speakers), k=1)
    labels = np.asarray(speakers, dtype=str)
    return trial_scores(e, i, j), labels[i] == labels[j]


def unit_rows(e: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row of ``e`` (float64, [n, d]) divided by its norm; a zero or non-finite row is an
    error. A finite row whose norm overflows (|x| > 1e154) or underflows float64 is scaled by
    its largest ``|value|`` first (its direction does not change); only such rows are, so
    every other row keeps its bits. Shared by the trial scores and the cohort of a score
    normalization.

    >>> unit_rows(np.array([[3e200, 4e200], [0.0, 2.0]])).tolist()
    [[0.6, 0.8], [0.0, 1.0]]
    """
    if not np.all(np.isfinite(e)):
        raise ValueError("an embedding is zero or not finite")
    with np.errstate(over="ignore", under="ignore"):
        norms = np.linalg.norm(e, axis=1)
    odd = ~np.isfinite(norms) | ((norms == 0) & np.any(e != 0, axis=1))
    if np.any(odd):
        e = e.copy()
        e[odd] /= np.abs(e[odd]).max(axis=1, keepdims=True)
        norms = np.linalg.norm(e, axis=1)
    if not np.all(norms > 0):
        raise ValueError("an embedding is zero or not finite")
    unit: npt.NDArray[np.float64] = e / norms[:, None]
    return unit


def trial_scores(
    embeddings: npt.ArrayLike, enrollment: npt.ArrayLike, test: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """The score of each trial ``k``: the cosine of rows ``enrollment[k]`` and ``test[k]``.

    Formula: ``score_k = <e_a, e_b> / (|e_a| |e_b|)`` with ``a = enrollment[k]``,
    ``b = test[k]``, in float64 (each embedding divided by its norm first, then the dot
    products: the scores :func:`speaker_trials` gives its pairs). A zero or non-finite
    embedding that a trial uses has no cosine: an error (rows no trial uses are not read);
    so is an index outside the rows. A finite row whose norm overflows or underflows float64
    is scaled by its largest ``|value|`` first (the cosine does not change).

    >>> trial_scores([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]], [0, 1], [1, 2]).tolist()
    [1.0, 0.0]
    """
    e = np.asarray(embeddings, dtype=np.float64)
    i = np.asarray(enrollment, dtype=np.int64).ravel()
    j = np.asarray(test, dtype=np.int64).ravel()
    if e.ndim != 2 or i.shape != j.shape:
        raise ValueError(f"expected [n, d] embeddings and one test per enrollment, got {e.shape}")
    if i.size and (min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= e.shape[0]):
        raise ValueError(f"a trial names a row outside the {e.shape[0]} embeddings")
    used, at = np.unique(np.concatenate([i, j]), return_inverse=True)
    e, i, j = e[used], at[: i.size], at[i.size :]
    unit = unit_rows(e)
    scores = np.empty(i.size, dtype=np.float64)
    # in blocks of trials: the gathered rows of a million trials would be gigabytes; each
    # trial's dot product is the same d-term sum whatever the block
    for k in range(0, i.size, _SCORE_BLOCK):
        at = slice(k, k + _SCORE_BLOCK)
        scores[at] = np.einsum("nd,nd->n", unit[i[at]], unit[j[at]])
    return scores


#: Trials scored at once by :func:`trial_scores` (bounds its memory: block x d x 16 bytes).
_SCORE_BLOCK = 1 << 14


def checked_trials(
    scores: npt.ArrayLike, is_target: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Scores as float64 and target flags as bool, one each per trial, every score finite
    (a ValueError otherwise)."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    t = np.asarray(is_target, dtype=bool).ravel()
    if s.shape != t.shape:
        raise ValueError(f"{s.size} scores but {t.size} target flags")
    if not np.all(np.isfinite(s)):
        raise ValueError("a score is NaN or infinite")
    return s, t


@dataclass(frozen=True)
class OperatingPoints:
    """The operating points of a trial list, from accepting nothing to accepting everything.

    Point ``k`` (``1 <= k <= K``) accepts the trials with ``score >= thresholds[k - 1]``
    (``thresholds`` are the distinct scores, highest first); point 0 accepts nothing. The DET
    curve is ``(false_alarms / n_nontarget, misses / n_target)`` over the points.
    """

    thresholds: npt.NDArray[np.float64]
    false_alarms: npt.NDArray[np.int64]  #: non-target trials accepted at each point (K + 1)
    misses: npt.NDArray[np.int64]  #: target trials rejected at each point (K + 1)
    n_target: int
    n_nontarget: int


def operating_points(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> OperatingPoints:
    """Every operating point of the trials: one sort, then cumulative counts.

    Ties: trials with equal scores are accepted together (one point per distinct score).

    >>> op = operating_points([0.9, 0.5, 0.5, 0.1], [True, True, False, False])
    >>> op.thresholds.tolist(), op.false_alarms.tolist(), op.misses.tolist()
    ([0.9, 0.5, 0.1], [0, 0, 1, 2], [2, 1, 0, 0])
    """
    s, t = checked_trials(scores, is_target)
    order = np.argsort(s)[::-1]  # highest first; the order within a tie does not matter
    ranked = s[order]
    ends = np.flatnonzero(np.r_[ranked[1:] != ranked[:-1], True])  # last trial of each score
    hits = np.cumsum(t[order], dtype=np.int64)[ends]
    n_target = int(hits[-1]) if hits.size else 0
    fa = ends.astype(np.int64) + 1 - hits
    zero = np.zeros(1, dtype=np.int64)
    return OperatingPoints(
        ranked[ends], np.concatenate((zero, fa)), n_target - np.concatenate((zero, hits)),
        n_target, s.size - n_target,
    )  # fmt: skip


def _crossing(fa: npt.NDArray[np.int64], miss: npt.NDArray[np.int64], n_t: int, n_n: int) -> float:
    """Where the polyline through the points ``(fa / n_n, miss / n_t)`` (F rising, M
    falling) meets ``F = M``, as one exact fraction rounded once to float64."""
    d = miss * n_n - fa * n_t  # (M - F) * n_t * n_n
    k = int(np.argmax(d <= 0))
    if d[k] == 0:
        return float(Fraction(int(fa[k]), n_n))
    d0, d1, fa0, fa1 = int(d[k - 1]), int(d[k]), int(fa[k - 1]), int(fa[k])
    return float(Fraction(fa0 * -d1 + d0 * fa1, n_n * (d0 - d1)))


def equal_error_rate(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The equal error rate of verification trials as the ROC crossing (``eer``); lower is
    better, in ``[0, 1]``.

    A threshold ``t`` accepts the trials with ``score >= t``. Over the distinct scores
    ``u_1 > ... > u_K`` the operating points are ``(F_k, M_k)``: ``F_k`` the fraction of
    non-target trials accepted at ``t = u_k`` (false acceptances), ``M_k`` the fraction of
    target trials rejected (misses), with ``(F_0, M_0) = (0, 1)`` (nothing accepted). ``F``
    rises and ``M`` falls with ``k``; consecutive points are joined by straight segments, and
    the EER is the ``F`` (= ``M``) where that curve meets ``F = M``: with ``k`` the first
    index where ``M_k <= F_k``, ``D = M - F``, ``lambda = D_{k-1} / (D_{k-1} - D_k)``,
    ``EER = F_{k-1} + lambda (F_k - F_{k-1})``. It is computed from the integer counts as one
    fraction and rounded once to float64.

    Ties: trials with equal scores are accepted together (one operating point per distinct
    score), so a tie between target and non-target trials is the straight segment between the
    points on either side of it, which is the mean over every order of the tied trials.
    This is the crossing of the ROC curve that ``sklearn.metrics.roc_curve`` draws with the
    line ``FNR = FPR``. None without a target or without a non-target trial.

    >>> equal_error_rate([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    0.5
    >>> equal_error_rate([0.9, 0.1], [True, False]), equal_error_rate([0.5, 0.5], [True, False])
    (0.0, 0.5)
    >>> equal_error_rate([0.9, 0.8, 0.4, 0.3, 0.2], [True, True, False, True, False])
    0.3333333333333333
    """
    return eer_of_points(operating_points(scores, is_target))


def eer_of_points(op: OperatingPoints) -> float | None:
    """:func:`equal_error_rate` of trials whose operating points are ``op``."""
    if op.n_target == 0 or op.n_nontarget == 0:
        return None
    return _crossing(op.false_alarms, op.misses, op.n_target, op.n_nontarget)


#: Vectorized passes of :func:`hull_points` before it finishes with one stack walk.
_HULL_PASSES = 24


def hull_points(op: OperatingPoints) -> npt.NDArray[np.int64]:
    """The indices of the operating points on the ROC convex hull (lower-left, in ``(F, M)``),
    from nothing accepted to everything accepted; collinear points are left out.

    Each pass drops every point that is no strict left turn between its neighbours (each such
    point lies on or above a chord of the set, so on no hull); a chain with only left turns is
    the hull. Most points go in the first passes; the rest is one stack walk.

    >>> hull_points(operating_points([4, 3, 2, 1], [True, False, True, False])).tolist()
    [0, 1, 3, 4]
    """
    idx = np.arange(op.false_alarms.size)
    x, y = op.false_alarms, op.misses
    for _ in range(_HULL_PASSES):
        if idx.size <= 2:
            return idx
        a, b = x[idx], y[idx]
        turn = (a[1:-1] - a[:-2]) * (b[2:] - b[1:-1]) - (b[1:-1] - b[:-2]) * (a[2:] - a[1:-1])
        keep = np.concatenate(([True], turn > 0, [True]))
        if keep.all():
            return idx
        idx = idx[keep]
    stack: list[int] = []
    for i in idx.tolist():
        while len(stack) >= 2:
            p, q = stack[-2], stack[-1]
            if (x[q] - x[p]) * (y[i] - y[q]) - (y[q] - y[p]) * (x[i] - x[q]) > 0:
                break
            stack.pop()
        stack.append(i)
    return np.asarray(stack, dtype=np.int64)


def eer_rocch(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The equal error rate as the crossing of the ROC convex hull (``eer_rocch``: BOSARIS'
    ``rocch`` + ``rocch2eer``); lower is better, in ``[0, 1]``.

    Formula: the operating points ``(F_k, M_k)`` of :func:`equal_error_rate`; their lower
    convex hull (the ROCCH: the points a mixture of two thresholds reaches, equivalently the
    pool-adjacent-violators bins of the sorted labels); the EER is where the hull meets
    ``F = M`` (one exact fraction, rounded once). It is at most the ROC crossing.

    Ties: trials with equal scores are accepted together (BOSARIS sorts a tie's targets before
    its non-targets, and PAV pools them: the same point).

    >>> eer_rocch([4, 3, 2, 1], [True, False, True, False])  # the ROC crossing is 0.5
    0.25
    >>> eer_rocch([0.9, 0.1], [True, False]), eer_rocch([0.5, 0.5], [True, False])
    (0.0, 0.5)
    """
    op = operating_points(scores, is_target)
    return eer_rocch_of_points(op, hull_points(op))


def eer_rocch_of_points(op: OperatingPoints, hull: npt.NDArray[np.int64]) -> float | None:
    """:func:`eer_rocch` of trials whose operating points are ``op`` (hull ``hull``)."""
    if op.n_target == 0 or op.n_nontarget == 0:
        return None
    return _crossing(op.false_alarms[hull], op.misses[hull], op.n_target, op.n_nontarget)


def _check_costs(p_target: float, c_miss: float, c_fa: float) -> None:
    if not 0.0 < p_target < 1.0:
        raise ValueError(f"p_target must be in (0, 1); got {p_target!r}")
    if not (c_miss > 0.0 and c_fa > 0.0 and math.isfinite(c_miss) and math.isfinite(c_fa)):
        raise ValueError(f"c_miss and c_fa must be finite and > 0; got {c_miss!r}, {c_fa!r}")


def min_dcf(
    scores: npt.ArrayLike,
    is_target: npt.ArrayLike,
    *,
    p_target: float,
    c_miss: float = 1.0,
    c_fa: float = 1.0,
) -> float | None:
    """The minimum normalized detection cost (NIST SRE; ``min_dcf_p0.01`` with ``p_target =
    0.01``, VoxSRC's ``min_dcf_p0.05``); lower is better, in ``[0, 1]``.

    Formula: over every operating point ``k`` of :func:`equal_error_rate` (nothing accepted,
    each distinct score, everything accepted), ``C_k = c_miss p_target M_k + c_fa (1 -
    p_target) F_k``; ``minDCF = min_k C_k / C_default`` with ``C_default = min(c_miss
    p_target, c_fa (1 - p_target))`` (the cost of always deciding the same way), float64.

    Ties: trials with equal scores are accepted together. None without a target or a
    non-target trial.

    >>> min_dcf([0.9, 0.8, 0.7, 0.6], [True, False, True, False], p_target=0.5)
    0.5
    >>> min_dcf([0.9, 0.8, 0.7, 0.6], [True, True, False, False], p_target=0.01)
    0.0
    """
    _check_costs(p_target, c_miss, c_fa)
    return min_dcf_of_points(operating_points(scores, is_target), p_target, c_miss, c_fa)


def min_dcf_of_points(
    op: OperatingPoints, p_target: float, c_miss: float = 1.0, c_fa: float = 1.0
) -> float | None:
    """:func:`min_dcf` of trials whose operating points are ``op``."""
    if op.n_target == 0 or op.n_nontarget == 0:
        return None
    p_miss = op.misses / op.n_target
    p_fa = op.false_alarms / op.n_nontarget
    cost = c_miss * p_target * p_miss + c_fa * (1.0 - p_target) * p_fa
    return float(cost.min() / min(c_miss * p_target, c_fa * (1.0 - p_target)))


def min_dcf_point(
    op: OperatingPoints, p_target: float, c_miss: float = 1.0, c_fa: float = 1.0
) -> tuple[float, float] | None:
    """The operating point where :func:`min_dcf` is reached, as ``(false-alarm rate, miss
    rate)``: the first (fewest accepted) of equal least costs; None without both classes.

    >>> min_dcf_point(operating_points([0.9, 0.8, 0.7, 0.6], [True, True, False, False]), 0.01)
    (0.0, 0.0)
    """
    if op.n_target == 0 or op.n_nontarget == 0:
        return None
    p_miss = op.misses / op.n_target
    p_fa = op.false_alarms / op.n_nontarget
    k = int(np.argmin(c_miss * p_target * p_miss + c_fa * (1.0 - p_target) * p_fa))
    return float(p_fa[k]), float(p_miss[k])


def bayes_threshold(p_target: float, c_miss: float = 1.0, c_fa: float = 1.0) -> float:
    """The log-likelihood ratio at which the Bayes decision changes: ``log(c_fa (1 -
    p_target) / (c_miss p_target))`` (minus the prior log odds).

    >>> round(bayes_threshold(0.01), 6)
    4.59512
    """
    _check_costs(p_target, c_miss, c_fa)
    return math.log(c_fa * (1.0 - p_target)) - math.log(c_miss * p_target)


def act_dcf(
    llrs: npt.ArrayLike,
    is_target: npt.ArrayLike,
    *,
    p_target: float,
    c_miss: float = 1.0,
    c_fa: float = 1.0,
) -> float | None:
    """The actual normalized detection cost of scores read as log-likelihood ratios
    (``act_dcf_p0.01``); lower is better, ``>= 0`` (above 1: worse than always deciding the
    same way).

    Formula: the Bayes decisions accept a trial when ``llr >= theta`` with ``theta =``
    :func:`bayes_threshold`; ``actDCF = (c_miss p_target M + c_fa (1 - p_target) F) /
    C_default`` with ``M``, ``F`` the miss and false-alarm rates of those decisions and
    ``C_default`` as in :func:`min_dcf`, float64. It measures calibration: it equals the
    minDCF only where the threshold is the best one.

    Ties: a score equal to ``theta`` is accepted. None without a target or a non-target trial.

    >>> act_dcf([5.0, -5.0, 4.0, -6.0], [True, False, False, False], p_target=0.01)
    0.0
    >>> round(act_dcf([1.0, -5.0], [True, False], p_target=0.01), 6)  # target 1.0 < 4.595
    1.0
    """
    theta = bayes_threshold(p_target, c_miss, c_fa)
    s, t = checked_trials(llrs, is_target)
    n_t, n_n = int(t.sum()), int((~t).sum())
    if n_t == 0 or n_n == 0:
        return None
    accepted = s >= theta
    p_miss = int((t & ~accepted).sum()) / n_t
    p_fa = int((~t & accepted).sum()) / n_n
    cost = c_miss * p_target * p_miss + c_fa * (1.0 - p_target) * p_fa
    return cost / min(c_miss * p_target, c_fa * (1.0 - p_target))


def cllr(llrs: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The log-likelihood-ratio cost of scores read as natural-log likelihood ratios
    (``cllr``, Brümmer); lower is better, ``>= 0`` (1 for scores that are all 0).

    Formula: ``Cllr = (1 / (2 N_t)) sum_tar log2(1 + exp(-llr)) + (1 / (2 N_n)) sum_non
    log2(1 + exp(llr))``, float64 (``logaddexp``, so no overflow). No ties matter (each
    trial counts alone). None without a target or a non-target trial.

    >>> cllr([0.0, 0.0], [True, False])
    1.0
    >>> round(cllr([2.0, -2.0], [True, False]), 6)  # log2(1 + exp(-2))
    0.183118
    """
    s, t = checked_trials(llrs, is_target)
    n_t, n_n = int(t.sum()), int((~t).sum())
    if n_t == 0 or n_n == 0:
        return None
    tar = float(np.logaddexp(0.0, -s[t]).sum()) / n_t
    non = float(np.logaddexp(0.0, s[~t]).sum()) / n_n
    return (tar + non) / (2.0 * math.log(2.0))


def min_cllr(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The least ``Cllr`` any monotone recalibration of the scores reaches (``min_cllr``,
    BOSARIS ``min_cllr`` without its ``1e-6`` score term); lower is better, in ``[0, 1]``.

    Formula: the pool-adjacent-violators (PAV) fit of the labels over the sorted scores, whose
    bins are the segments of the ROC convex hull (:func:`hull_points`); a bin with ``a``
    targets and ``b`` non-targets gets the LLR ``log((a / b) (N_n / N_t))`` (its posterior
    odds less the prior odds of the trial list), so ``minCllr = (1 / (2 N_t)) sum_bins a
    log2(1 + (b / a)(N_t / N_n)) + (1 / (2 N_n)) sum_bins b log2(1 + (a / b)(N_n / N_t))``
    (a bin without targets or non-targets costs nothing), float64.

    Ties: trials with equal scores fall in one bin. None without a target or a non-target
    trial.

    >>> min_cllr([0.9, 0.1], [True, False]), min_cllr([0.5, 0.5], [True, False])
    (0.0, 1.0)
    """
    op = operating_points(scores, is_target)
    return min_cllr_of_points(op, hull_points(op))


def min_cllr_of_points(op: OperatingPoints, hull: npt.NDArray[np.int64]) -> float | None:
    """:func:`min_cllr` of trials whose operating points are ``op`` (hull ``hull``)."""
    n_t, n_n = op.n_target, op.n_nontarget
    if n_t == 0 or n_n == 0:
        return None
    h = hull
    a = -np.diff(op.misses[h]).astype(np.float64)  # targets in each bin
    b = np.diff(op.false_alarms[h]).astype(np.float64)  # non-targets in each bin
    both = (a > 0) & (b > 0)
    a, b = a[both], b[both]
    tar = float((a * np.log1p((b / a) * (n_t / n_n))).sum()) / n_t
    non = float((b * np.log1p((a / b) * (n_n / n_t))).sum()) / n_n
    return (tar + non) / (2.0 * math.log(2.0))

"""Speaker verification: trials from embeddings, and the equal error rate (definitions version 1).

A *trial* compares two clips; it is a *target* trial when both are of the same speaker and a
*non-target* trial otherwise. :func:`speaker_trials` makes every unordered pair of clips a
trial, scored by the cosine of their embeddings (:func:`trial_scores` scores the pairs of a
given trial list the same way); :func:`equal_error_rate` turns scores and target flags into
the EER. The independent twin is :mod:`audiorepro.reference.verification`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = ["DEFINITIONS_VERSION", "equal_error_rate", "speaker_trials", "trial_scores"]

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


def trial_scores(
    embeddings: npt.ArrayLike, enrollment: npt.ArrayLike, test: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """The score of each trial ``k``: the cosine of rows ``enrollment[k]`` and ``test[k]``.

    Formula: ``score_k = <e_a, e_b> / (|e_a| |e_b|)`` with ``a = enrollment[k]``,
    ``b = test[k]``, in float64 (each embedding divided by its norm first, then the dot
    products: the scores :func:`speaker_trials` gives its pairs). A zero or non-finite
    embedding has no cosine: an error; so is an index outside the rows.

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
    norms = np.linalg.norm(e, axis=1)
    if not np.all(norms > 0) or not np.all(np.isfinite(e)):
        raise ValueError("an embedding is zero or not finite")
    unit = e / norms[:, None]
    scores: npt.NDArray[np.float64] = np.einsum("nd,nd->n", unit[i], unit[j])
    return scores


def equal_error_rate(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The equal error rate of verification trials; lower is better, in ``[0, 1]``.

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
    s = np.asarray(scores, dtype=np.float64).ravel()
    t = np.asarray(is_target, dtype=bool).ravel()
    if s.shape != t.shape:
        raise ValueError(f"{s.size} scores but {t.size} target flags")
    if not np.all(np.isfinite(s)):
        raise ValueError("a score is NaN or infinite")
    n_target, n_nontarget = int(t.sum()), int((~t).sum())
    if n_target == 0 or n_nontarget == 0:
        return None
    # Distinct scores, highest first; counts of target and non-target trials at each.
    distinct, group = np.unique(-s, return_inverse=True)
    targets = np.bincount(group, weights=t, minlength=distinct.size).astype(np.int64)
    nontargets = np.bincount(group, minlength=distinct.size).astype(np.int64) - targets
    fa = np.concatenate(([0], np.cumsum(nontargets)))  # non-targets accepted at each point
    miss = n_target - np.concatenate(([0], np.cumsum(targets)))  # targets rejected
    d = miss * n_nontarget - fa * n_target  # (M - F) * n_target * n_nontarget
    k = int(np.argmax(d <= 0))
    if d[k] == 0:
        return float(Fraction(int(fa[k]), n_nontarget))
    d0, d1, fa0, fa1 = int(d[k - 1]), int(d[k]), int(fa[k - 1]), int(fa[k])
    return float(Fraction(fa0 * -d1 + d0 * fa1, n_nontarget * (d0 - d1)))

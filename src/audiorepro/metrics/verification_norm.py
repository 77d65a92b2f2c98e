"""Score normalization of speaker-verification trials over a cohort (normalization
definitions version 1): z-norm, t-norm, s-norm and adaptive s-norm, as published systems use
them (Matějka et al., "Analysis of score normalization in multilingual speaker recognition",
2017; WeSpeaker's ``score_norm.py``).

Every clip's *cohort scores* are the cosines of its embedding with each cohort embedding
(float64, unit vectors as :func:`audiorepro.metrics.verification.trial_scores`); a clip's
statistics are their mean ``mu`` and population standard deviation ``sigma`` (``ddof = 0``),
over every cohort clip or, for the adaptive form, over its ``top_n`` highest cohort scores.
For a trial ``(e, t)`` with score ``s``::

    z-norm   (s - mu_e) / sigma_e
    t-norm   (s - mu_t) / sigma_t
    s-norm   ((s - mu_e) / sigma_e + (s - mu_t) / sigma_t) / 2
    as-norm  s-norm with each side's statistics over its top_n cohort scores

A cohort clip that is the trial's own clip is not left out (the cohort is meant to be disjoint
from the trials, as VoxCeleb2's training speakers are from VoxCeleb1's test). The independent
twin is :func:`audiorepro.reference.verification.normalize_scores`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from audiorepro.metrics.verification import unit_rows

__all__ = ["METHODS", "NORMALIZATION_VERSION", "cohort_stats", "normalize_scores"]

#: The version of the normalization definitions; a change of any value is a new version.
NORMALIZATION_VERSION = 1
Method = Literal["z-norm", "t-norm", "s-norm", "as-norm"]
METHODS: tuple[Method, ...] = ("z-norm", "t-norm", "s-norm", "as-norm")


def _unit(e: npt.ArrayLike, what: str) -> npt.NDArray[np.float64]:
    a = np.asarray(e, dtype=np.float64)
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(f"expected {what} as [n, d] with n, d >= 1, got shape {a.shape}")
    try:
        return unit_rows(a)  # a row over 1e154 keeps its cosine (it was 0 with every clip)
    except ValueError:
        raise ValueError(f"an embedding of the {what} is zero or not finite") from None


def cohort_stats(
    embeddings: npt.ArrayLike, cohort: npt.ArrayLike, *, top_n: int | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each clip's mean and population standard deviation of its cosines with the cohort
    (over its ``top_n`` highest when given), float64; clips in chunks, so memory stays at
    chunk x cohort.

    >>> mu, sigma = cohort_stats([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> mu.tolist(), round(float(sigma[0]), 6)
    ([0.0], 0.816497)
    >>> cohort_stats([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], top_n=2)[0].tolist()
    [0.5]
    """
    e, c = _unit(embeddings, "embeddings"), _unit(cohort, "cohort")
    if e.shape[1] != c.shape[1]:
        raise ValueError(f"embeddings of {e.shape[1]} dims but a cohort of {c.shape[1]}")
    if top_n is not None and not 1 <= top_n:
        raise ValueError(f"top_n must be an int >= 1; got {top_n!r}")
    k = c.shape[0] if top_n is None else min(top_n, c.shape[0])
    mu = np.empty(e.shape[0])
    sigma = np.empty(e.shape[0])
    step = max(1, 2**22 // max(1, c.shape[0]))
    for start in range(0, e.shape[0], step):
        scores = e[start : start + step] @ c.T
        if k < c.shape[0]:
            scores = -np.sort(-scores, axis=1)[:, :k]  # the k highest, any order within a tie
        mu[start : start + step] = scores.mean(axis=1)
        sigma[start : start + step] = scores.std(axis=1)
    return mu, sigma


def normalize_scores(
    scores: npt.ArrayLike,
    enrollment: npt.ArrayLike,
    test: npt.ArrayLike,
    embeddings: npt.ArrayLike,
    cohort: npt.ArrayLike,
    *,
    method: Method,
    top_n: int | None = None,
) -> npt.NDArray[np.float64]:
    """Trial scores normalized by ``method`` (module docstring) over the cohort embeddings;
    ``enrollment[k]`` and ``test[k]`` are the rows of trial ``k``'s clips in ``embeddings``.
    ``as-norm`` needs ``top_n``; the others take none. A clip whose cohort scores are all
    equal (``sigma = 0``) has no normalized score: a ValueError.

    >>> emb = [[1.0, 0.0], [0.6, 0.8]]
    >>> cohort = [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]
    >>> z = normalize_scores([0.6], [0], [1], emb, cohort, method="z-norm")
    >>> round(float(z[0]), 6)  # (0.6 - 0) / 0.816497
    0.734847
    """
    if (method == "as-norm") != (top_n is not None):
        raise ValueError("as-norm needs top_n, and only as-norm takes it")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    s = np.asarray(scores, dtype=np.float64).ravel()
    i = np.asarray(enrollment, dtype=np.int64).ravel()
    j = np.asarray(test, dtype=np.int64).ravel()
    if not s.shape == i.shape == j.shape:
        raise ValueError("one enrollment and one test row per score")
    mu, sigma = cohort_stats(embeddings, cohort, top_n=top_n)
    used = np.unique(np.concatenate((i, j)))
    if np.any(sigma[used] == 0):
        raise ValueError("a clip's cohort scores are all equal: no standard deviation")
    z: npt.NDArray[np.float64] = (s - mu[i]) / sigma[i]
    t: npt.NDArray[np.float64] = (s - mu[j]) / sigma[j]
    if method == "z-norm":
        return z
    if method == "t-norm":
        return t
    out: npt.NDArray[np.float64] = (z + t) / 2
    return out

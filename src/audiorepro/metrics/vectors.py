"""Speaker-vector agreement (definitions version 1)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def mean_cosine(pred: npt.ArrayLike, ref: npt.ArrayLike, valid: npt.ArrayLike) -> float | None:
    """Mean cosine similarity between predicted and reference vectors over valid items.

    Formula: ``mean_{i valid} <p_i, r_i> / (|p_i| |r_i|)`` (sums with ``math.fsum``); higher
    is better. None without a valid item; an item with a zero vector is an error of the input,
    not a cosine of 0, so it must be marked invalid. Ties: none.

    >>> mean_cosine([[1.0, 0.0], [0.0, 2.0]], [[1.0, 0.0], [1.0, 0.0]], [True, True])
    0.5
    >>> mean_cosine([[1.0, 0.0]], [[1.0, 0.0]], [False]) is None
    True
    """
    p = np.asarray(pred, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    keep = np.asarray(valid, dtype=bool)
    if not keep.any():
        return None
    cosines = []
    for a, b in zip(p[keep], r[keep], strict=True):
        na = math.sqrt(math.fsum((a * a).tolist()))
        nb = math.sqrt(math.fsum((b * b).tolist()))
        if na == 0.0 or nb == 0.0:
            raise ValueError("a valid item has a zero vector")
        cosines.append(math.fsum((a * b).tolist()) / (na * nb))
    return math.fsum(cosines) / len(cosines)

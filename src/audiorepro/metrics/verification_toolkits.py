"""Speaker-verification measures as each toolkit computes them, and the registry of every
verification definition by the name ``explain --trials`` and docs/metrics.md use.

Each function gives the value the toolkit's own code gives on the same scores (its version is
in :data:`DEFINITIONS`), in O(n log n): one sort, cumulative counts, and the toolkit's own
float arithmetic where it has one (speechbrain's rates are float32, Kaldi reads float32
scores). The canonical definitions are in :mod:`audiorepro.metrics.verification`; the
independent twin of all of them is :mod:`audiorepro.reference.verification`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.metrics.verification import (
    OperatingPoints,
    act_dcf,
    checked_trials,
    cllr,
    eer_of_points,
    eer_rocch_of_points,
    hull_points,
    min_cllr_of_points,
    min_dcf_of_points,
    operating_points,
)

__all__ = [
    "DEFINITIONS",
    "SharedTrials",
    "VerificationDefinition",
    "compute_definitions",
    "eer_kaldi",
    "eer_pyannote",
    "eer_speechbrain",
    "min_dcf_speechbrain",
]


class SharedTrials:
    """Scores and target flags with what several definitions share, computed once from one
    sort: the operating points, the ROC hull, speechbrain's rates, the sorted classes.

    Scores stay float32 when given float32 (a torch float32 tensor's numbers, which
    speechbrain compares in float32) and are float64 otherwise.
    """

    def __init__(self, scores: npt.ArrayLike, is_target: npt.ArrayLike) -> None:
        given = np.asarray(scores)
        s, t = checked_trials(scores, is_target)
        self.dtype: type[np.floating[Any]] = np.float32 if given.dtype == np.float32 else np.float64
        self.scores = s.astype(self.dtype)
        self.target = t
        self.both = bool(t.any() and not t.all())

    @cached_property
    def points(self) -> OperatingPoints:
        return operating_points(self.scores, self.target)

    @cached_property
    def hull(self) -> npt.NDArray[np.int64]:
        return hull_points(self.points)

    @cached_property
    def speechbrain(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """speechbrain's thresholds (every distinct score and the midpoint of each neighbouring
        pair, in the scores' dtype, ascending) and its float32 rates there: ``FRR = #(target
        <= t) / N_t`` and ``FAR = #(non-target > t) / N_n``.

        Read off the operating points: at the distinct score ``u_i`` (highest first) ``#(target
        <= u_i)`` is the misses of point ``i`` and ``#(non-target > u_i)`` its false alarms; a
        midpoint counts as the score it rounds to, or as the lower one when strictly between.
        """
        op = self.points
        u = op.thresholds.astype(self.dtype)  # exact: the scores' own values
        miss, fa = op.misses[:-1], op.false_alarms[:-1]
        mids = (u[1:] + u[:-1]) / 2
        at = np.arange(1, u.size) - (mids == u[:-1])  # the point whose counts a midpoint has
        order = np.empty(2 * u.size - 1, dtype=np.int64)
        order[0::2], order[1::2] = np.arange(u.size), at
        order = order[::-1]  # ascending thresholds
        frr = miss[order].astype(np.float32) / np.float32(op.n_target)
        far = fa[order].astype(np.float32) / np.float32(op.n_nontarget)
        return frr, far

    @cached_property
    def by_class_f32(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Target and non-target scores as float32, each ascending (Kaldi's ``BaseFloat``):
        the distinct scores repeated by their counts (rounding to float32 keeps the order)."""
        op = self.points
        u = op.thresholds[::-1].astype(np.float32)
        tar = np.repeat(u, -np.diff(op.misses)[::-1])
        non = np.repeat(u, np.diff(op.false_alarms)[::-1])
        return tar, non


def eer_speechbrain(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The EER as speechbrain 1.1.2's ``speechbrain.utils.metric_stats.EER`` computes it
    (``eer_speechbrain``); lower is better, in ``[0, 1]``.

    Formula: thresholds ``t`` are the distinct scores and the midpoints between neighbouring
    ones, ascending; at each, ``FRR = #(target <= t) / N_t`` and ``FAR = #(non-target > t) /
    N_n`` in float32; the first threshold with the least ``|FAR - FRR|`` (float32, compared
    with the best so far in float64, as speechbrain's loop does) gives ``EER = (FAR + FRR) /
    2`` in float64. Scores are compared in their dtype (float32 when given float32).

    Ties: a trial whose score equals ``t`` is rejected; equal distances keep the lower
    threshold. The accept-everything point is never among the thresholds. None without a
    target or a non-target trial.

    >>> eer_speechbrain([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    0.5
    >>> eer_speechbrain([0.5, 0.5, 0.9, 0.1], [True, False, True, False])
    0.25
    """
    shared = SharedTrials(scores, is_target)
    return _eer_speechbrain(*shared.speechbrain) if shared.both else None


def _eer_speechbrain(frr: npt.NDArray[np.float32], far: npt.NDArray[np.float32]) -> float:
    d32 = np.abs(far - frr)  # float32, as ``(FAR - FRR).abs()``
    # |FAR - FRR| falls, then rises, over ascending thresholds, so speechbrain's loop settles
    # among the thresholds at the two least float32 distances: walk only those, exactly.
    least = d32.min()
    above = d32[d32 > least]
    window = np.flatnonzero(d32 <= (above.min() if above.size else least))
    best = int(window[0])
    for i in window[1:].tolist():
        if float(d32[i]) < abs(float(far[best]) - float(frr[best])):
            best = i
    return (float(far[best]) + float(frr[best])) / 2


def min_dcf_speechbrain(
    scores: npt.ArrayLike,
    is_target: npt.ArrayLike,
    *,
    p_target: float = 0.01,
    c_miss: float = 1.0,
    c_fa: float = 1.0,
) -> float | None:
    """The minimum detection cost as speechbrain 1.1.2's ``metric_stats.minDCF`` computes it
    (``min_dcf_speechbrain_p0.01``): NOT normalized; lower is better.

    Formula: over speechbrain's thresholds (:func:`eer_speechbrain`), ``C = c_miss FRR
    p_target + c_fa FAR (1 - p_target)`` in float32; the least ``C``. Divide by
    ``min(c_miss p_target, c_fa (1 - p_target))`` for the normalized minDCF (:func:`min_dcf`
    of :mod:`~audiorepro.metrics.verification`, which also has the accept-everything point).

    Ties: as :func:`eer_speechbrain` (a score equal to the threshold is rejected). None
    without a target or a non-target trial.

    >>> min_dcf_speechbrain([0.9, 0.8, 0.7, 0.6], [True, True, False, False])
    0.0
    >>> round(min_dcf_speechbrain([0.9, 0.8, 0.7, 0.6], [True, False, True, False]), 6)
    0.005
    """
    shared = SharedTrials(scores, is_target)
    if not shared.both:
        return None
    return _min_dcf_speechbrain(*shared.speechbrain, p_target, c_miss, c_fa)


def _min_dcf_speechbrain(
    frr: npt.NDArray[np.float32],
    far: npt.NDArray[np.float32],
    p_target: float,
    c_miss: float = 1.0,
    c_fa: float = 1.0,
) -> float:
    f32 = np.float32
    cost = f32(c_miss) * frr * f32(p_target) + f32(c_fa) * far * f32(1 - p_target)
    return float(cost.min())


def eer_pyannote(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The EER as pyannote.metrics 4.2's ``binary_classification.det_curve`` computes it
    (``eer_pyannote``); lower is better, in ``[0, 1]``.

    Formula: scikit-learn's ``roc_curve`` (default ``drop_intermediate=True``: a point whose
    second differences of false and true positives are both 0 is dropped, then ``(0, 0)`` is
    put first); ``FNR = 1 - TPR``; ``i`` the first point with ``FPR > FNR``; ``EER = 0.25
    (FPR_{i-1} + FPR_i + FNR_{i-1} + FNR_i)``: the mean of the two points around the
    crossing, float64 in that order.

    Ties: trials with equal scores are accepted together. None without a target or a
    non-target trial.

    >>> eer_pyannote([0.9, 0.8, 0.7, 0.6], [True, False, True, False])  # (0,.5) and (.5,.5)
    0.375
    >>> eer_pyannote([4, 3, 2, 1, 0], [True, True, False, True, False])
    0.2916666666666667
    """
    return _eer_pyannote(operating_points(scores, is_target))


def _eer_pyannote(op: OperatingPoints) -> float | None:
    if op.n_target == 0 or op.n_nontarget == 0:
        return None
    fps = op.false_alarms[1:].astype(np.float64)
    tps = (op.n_target - op.misses[1:]).astype(np.float64)
    if fps.size > 2:
        corner = (np.diff(fps, 2) != 0) | (np.diff(tps, 2) != 0)
        keep = np.flatnonzero(np.concatenate(([True], corner, [True])))
        fps, tps = fps[keep], tps[keep]
    fps, tps = np.concatenate(([0.0], fps)), np.concatenate(([0.0], tps))
    fpr = fps / fps[-1]
    fnr = 1 - tps / tps[-1]
    i = int(np.flatnonzero(fpr > fnr)[0])
    return float(0.25 * (fpr[i - 1] + fpr[i] + fnr[i - 1] + fnr[i]))


def eer_kaldi(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> float | None:
    """The EER as Kaldi's ``compute-eer`` (``src/ivectorbin/compute-eer.cc``, ``ComputeEer``)
    computes it (``eer_kaldi``); lower is better, in ``[0, 1)``.

    Formula: scores as float32 (Kaldi's ``BaseFloat``), each class sorted ascending; for
    ``p = 0, 1, ..., N_t - 2`` the non-target position ``q = max(0, N_n - 1 - floor(N_n p /
    N_t))``, stopping at the first ``p`` with ``non[q] < tar[p]`` (else ``p = N_t - 1``);
    ``EER = p / N_t`` as float32. It is a rank count, not an interpolation: it moves in steps
    of ``1 / N_t``.

    Ties: a tie between ``non[q]`` and ``tar[p]`` does not stop the walk. None without a
    target or a non-target trial. (``compute-eer`` prints ``100 EER`` to 4 significant
    digits.)

    >>> eer_kaldi([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    0.5
    >>> eer_kaldi([0.9, 0.1], [True, False])
    0.0
    """
    return _eer_kaldi(SharedTrials(scores, is_target))


def _eer_kaldi(shared: SharedTrials) -> float | None:
    if not shared.both:
        return None
    tar, non = shared.by_class_f32
    n_t, n_n = tar.size, non.size
    p = np.arange(n_t - 1, dtype=np.int64)
    q = np.maximum(n_n - 1 - np.floor((n_n * p).astype(np.float64) / n_t).astype(np.int64), 0)
    stops = np.flatnonzero(non[q] < tar[p])
    position = int(stops[0]) if stops.size else n_t - 1
    return float(np.float32(position / n_t))


@dataclass(frozen=True)
class VerificationDefinition:
    """One verification measure under one definition: its name (``explain``'s JSON key), whose
    definition it is, its version and its value over shared trials."""

    name: str
    measure: str  #: EER, minDCF, actDCF, Cllr, minCllr
    follows: str  #: whose definition (toolkit and version, or the standard)
    version: int  #: bumped when the value of this definition changes
    compute: Callable[[SharedTrials], float | None]
    calibrated: bool = False  #: reads scores as log-likelihood ratios


def _sb_dcf(p: float) -> Callable[[SharedTrials], float | None]:
    def compute(t: SharedTrials) -> float | None:
        return _min_dcf_speechbrain(*t.speechbrain, p) if t.both else None

    return compute


def _sb_eer(t: SharedTrials) -> float | None:
    return _eer_speechbrain(*t.speechbrain) if t.both else None


#: Every verification definition, in the order ``explain --trials`` shows them.
DEFINITIONS: tuple[VerificationDefinition, ...] = (
    VerificationDefinition("eer", "EER", "ROC crossing (scikit-learn roc_curve)", 1,
                           lambda t: eer_of_points(t.points)),
    VerificationDefinition("eer_rocch", "EER", "ROC convex hull (BOSARIS rocch2eer)", 1,
                           lambda t: eer_rocch_of_points(t.points, t.hull)),
    VerificationDefinition("eer_pyannote", "EER", "pyannote.metrics 4.2 det_curve", 1,
                           lambda t: _eer_pyannote(t.points)),
    VerificationDefinition("eer_speechbrain", "EER", "speechbrain 1.1.2 EER", 1, _sb_eer),
    VerificationDefinition("eer_kaldi", "EER", "Kaldi compute-eer", 1,
                           _eer_kaldi),
    VerificationDefinition("min_dcf_p0.01", "minDCF", "NIST SRE (p=0.01, normalized)", 1,
                           lambda t: min_dcf_of_points(t.points, 0.01)),
    VerificationDefinition("min_dcf_p0.05", "minDCF", "VoxSRC (p=0.05, normalized)", 1,
                           lambda t: min_dcf_of_points(t.points, 0.05)),
    VerificationDefinition("min_dcf_speechbrain_p0.01", "minDCF",
                           "speechbrain 1.1.2 minDCF (p=0.01, not normalized)", 1, _sb_dcf(0.01)),
    VerificationDefinition("min_dcf_speechbrain_p0.05", "minDCF",
                           "speechbrain 1.1.2 minDCF (p=0.05, not normalized)", 1, _sb_dcf(0.05)),
    VerificationDefinition("act_dcf_p0.01", "actDCF", "NIST SRE (p=0.01, normalized)", 1,
                           lambda t: act_dcf(t.scores, t.target, p_target=0.01), calibrated=True),
    VerificationDefinition("act_dcf_p0.05", "actDCF", "VoxSRC (p=0.05, normalized)", 1,
                           lambda t: act_dcf(t.scores, t.target, p_target=0.05), calibrated=True),
    VerificationDefinition("cllr", "Cllr", "BOSARIS cllr", 1,
                           lambda t: cllr(t.scores, t.target), calibrated=True),
    VerificationDefinition("min_cllr", "minCllr", "BOSARIS min_cllr (PAV)", 1,
                           lambda t: min_cllr_of_points(t.points, t.hull)),
)  # fmt: skip


def compute_definitions(scores: npt.ArrayLike, is_target: npt.ArrayLike) -> dict[str, float | None]:
    """Every definition of :data:`DEFINITIONS` over the same trials (one sort shared): name ->
    value.

    >>> values = compute_definitions([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    >>> values["eer"], values["eer_rocch"], values["eer_kaldi"]
    (0.5, 0.25, 0.5)
    """
    shared = SharedTrials(scores, is_target)
    return {d.name: d.compute(shared) for d in DEFINITIONS}

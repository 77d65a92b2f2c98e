"""HEAR 2021's scores as heareval 2021.1.3's ``score.py`` computes them (definitions version 1).

Scene scores take ``predictions`` (rows of class scores: softmax or sigmoid outputs) and
``targets`` (rows of 0/1, one-hot for multiclass tasks), both shaped (files, classes), in
vocabulary order. Event scores take, per file name, the predicted and the reference events
(:class:`~audiorepro.formats.hear.HearEvent`, milliseconds) and are computed as sed_eval 0.2.1
computes them for heareval: only the files of ``predicted`` are scored (heareval loops over
its predictions), times are converted with ``ms / 1000.0``, and overall counts are summed over
files before the ratios (micro averages). Undefined values are NaN, as heareval reports them:
the kit's tables show NaN as heareval's ``test.predicted-scores.json`` holds it.

Each score here equals heareval's own score class to 1e-12 on the same input
(tests/test_hear_scores.py, against heareval in ``tox -e hear``); the twins in
:mod:`audiorepro.reference.hear` are written from these definitions alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching
from scipy.special import ndtri
from scipy.stats import rankdata

from audiorepro.formats.hear import HearEvent

__all__ = [
    "HEAR_SCORE_DIRECTIONS",
    "EventScores",
    "aucroc_score",
    "chroma_accuracy_score",
    "d_prime_score",
    "event_onset_fms",
    "event_onset_offset_fms",
    "mean_average_precision_score",
    "segment_error_rate",
    "top1_accuracy_score",
]

FloatArray = npt.NDArray[np.float64]
Events = Mapping[str, Sequence[HearEvent]]
#: sed_eval's guard in its rate denominators (``numpy.spacing(1)``).
SED_EPS = float(np.spacing(1))
#: heareval's score names -> higher is better (segment_1s_er is an error rate).
HEAR_SCORE_DIRECTIONS = {
    "top1_acc": True,
    "pitch_acc": True,
    "chroma_acc": True,
    "mAP": True,
    "d_prime": True,
    "aucroc": True,
    "event_onset_200ms_fms": True,
    "event_onset_50ms_fms": True,
    "event_onset_offset_50ms_20perc_fms": True,
    "segment_1s_er": False,
}


def _rows(predictions: npt.ArrayLike, targets: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    p = np.asarray(predictions)
    t = np.asarray(targets)
    if p.ndim != 2 or t.shape != p.shape or p.shape[0] == 0:
        raise ValueError(
            f"expected predictions and targets of one shape (files, classes), got {p.shape} "
            f"and {t.shape}"
        )
    return p, t


def top1_accuracy_score(predictions: npt.ArrayLike, targets: npt.ArrayLike) -> float:
    """heareval's ``top1_acc`` (and ``pitch_acc``, the same score under another name).

    Formula: ``mean_i [argmax(prediction_i) == argmax(target_i)]``.
    Ties: ``argmax`` takes the first (lowest) index among equal maxima, in both rows.

    >>> top1_accuracy_score([[0.2, 0.8], [0.5, 0.5]], [[0, 1], [0, 1]])
    0.5
    """
    p, t = _rows(predictions, targets)
    correct = int(np.sum(np.argmax(p, axis=1) == np.argmax(t, axis=1)))
    return correct / p.shape[0]


def chroma_accuracy_score(predictions: npt.ArrayLike, targets: npt.ArrayLike) -> float:
    """heareval's ``chroma_acc``: pitch classes compared modulo 12 (octave errors forgiven).

    Formula: ``mean_i [argmax(prediction_i) mod 12 == argmax(target_i) mod 12]``.
    Ties: the first maximal index, as :func:`top1_accuracy_score`.

    >>> p = np.zeros((1, 24)); p[0, 14] = 1.0
    >>> t = np.zeros((1, 24)); t[0, 2] = 1.0
    >>> chroma_accuracy_score(p, t)
    1.0
    """
    p, t = _rows(predictions, targets)
    same = np.argmax(p, axis=1) % 12 == np.argmax(t, axis=1) % 12
    return int(np.sum(same)) / p.shape[0]


def _average_precision(scores: FloatArray, truth: FloatArray) -> float:
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], truth[order]
    ends = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # last row of each tie group
    tps = np.cumsum(y)[ends]
    positives = tps[-1]
    if positives == 0:
        return 0.0  # scikit-learn's value for a class without positives (it warns)
    precision = tps / (ends + 1)
    recall_steps = np.diff(np.r_[0.0, tps]) / positives
    return float(np.sum(recall_steps * precision))


def mean_average_precision_score(predictions: npt.ArrayLike, targets: npt.ArrayLike) -> float:
    """heareval's ``mAP``: scikit-learn's macro ``average_precision_score``.

    Formula: for each class, ``AP = sum_k (R_k - R_{k-1}) * P_k`` over the distinct scores in
    decreasing order (``P_k``, ``R_k``: precision and recall of the rows scoring at least the
    k-th score; ``R_0 = 0``); a class without positives has AP 0; mAP is the mean over classes.
    Ties: rows with equal scores form one threshold (precision after the whole group).

    >>> mean_average_precision_score([[0.9, 0.1], [0.2, 0.3], [0.5, 0.5]],
    ...                              [[1, 0], [1, 0], [0, 1]])
    0.9166666666666666
    """
    p, t = _rows(predictions, targets)
    aps = [_average_precision(p[:, c], t[:, c].astype(np.float64)) for c in range(p.shape[1])]
    return float(np.average(aps))


def _auc(scores: FloatArray, truth: FloatArray) -> float:
    """Area under the ROC curve: the Mann-Whitney statistic with ties as halves."""
    ranks = rankdata(scores)  # average ranks: a tie between classes counts one half
    pos = truth == 1
    n_pos = int(np.sum(pos))
    n_neg = len(truth) - n_pos
    return float((np.sum(ranks[pos]) - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _class_aucs(p: FloatArray, t: FloatArray) -> list[float] | None:
    """Each class's AUC, or None where scikit-learn raises (a class column of one value)."""
    aucs = []
    for c in range(p.shape[1]):
        column = t[:, c]
        if len(np.unique(column)) != 2:
            return None
        aucs.append(_auc(p[:, c].astype(np.float64), column))
    return aucs


def aucroc_score(predictions: npt.ArrayLike, targets: npt.ArrayLike) -> float:
    """heareval's ``aucroc``: scikit-learn's macro ``roc_auc_score``.

    Formula: for each class, ``AUC = (sum of positives' ranks - n+(n+ + 1)/2) / (n+ n-)``
    (the probability that a positive outscores a negative); the mean over classes. NaN when
    any class has no positive or no negative row (scikit-learn raises; heareval returns NaN).
    Ties: a positive and a negative with equal scores count one half (average ranks).

    >>> aucroc_score([[0.9, 0.1], [0.2, 0.3], [0.5, 0.5]], [[1, 0], [1, 0], [0, 1]])
    0.75
    """
    p, t = _rows(predictions, targets)
    aucs = _class_aucs(p, t)
    return math.nan if aucs is None else float(np.average(aucs))


def d_prime_score(predictions: npt.ArrayLike, targets: npt.ArrayLike) -> float:
    """heareval's ``d_prime``: each class's AUC as a d' of equal-variance Gaussians, averaged.

    Formula: ``d'_c = sqrt(2) * Phi^-1(AUC_c)`` (``Phi^-1``: the standard normal quantile,
    scipy's ``ndtri``: AUC 1 gives +inf), ``mean_c d'_c``; NaN where :func:`aucroc_score` is.
    Ties: as :func:`aucroc_score`.

    >>> d_prime_score([[0.9, 0.2], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]],
    ...               [[1, 0], [0, 1], [0, 1], [1, 0]])  # AUC 3/4 for both classes
    0.9538725524089398
    """
    p, t = _rows(predictions, targets)
    aucs = _class_aucs(p, t)
    if aucs is None:
        return math.nan
    return float(np.mean(ndtri(np.asarray(aucs)) * np.sqrt(2.0)))


@dataclass(frozen=True)
class EventScores:
    """sed_eval's overall event-based scores (NaN where a denominator is 0)."""

    f_measure: float
    precision: float
    recall: float


def _offset_hit(r: HearEvent, e: HearEvent, collar: float, share: float | None) -> bool:
    """sed_eval's ``validate_offset`` (always true when offsets are not evaluated)."""
    if share is None:
        return True
    length = r.end / 1000.0 - r.start / 1000.0
    return math.fabs(r.end / 1000.0 - e.end / 1000.0) <= max(collar, share * length)


def _matched(
    ref: Sequence[HearEvent], est: Sequence[HearEvent], collar: float, share: float | None = None
) -> int:
    """The largest number of one-to-one pairs with equal labels and onsets within ``collar``
    seconds (and, where ``share`` is given, offsets within ``max(collar, share * reference
    length)``), sed_eval's 'optimal' matching; any maximum matching has this size."""
    if not ref or not est:
        return 0
    hits = np.array(
        [
            [r.label == e.label and math.fabs(r.start / 1000.0 - e.start / 1000.0) <= collar
             and _offset_hit(r, e, collar, share) for e in est]
            for r in ref
        ]
    )  # fmt: skip
    if not hits.any():
        return 0
    match = maximum_bipartite_matching(csr_matrix(hits.astype(np.int8)), perm_type="column")
    return int(np.sum(match >= 0))


def _event_fms(
    predicted: Events, reference: Events, collar: float, share: float | None
) -> EventScores:
    tp = n_ref = n_sys = 0
    for name, est in predicted.items():
        ref = reference.get(name, ())
        n_ref += len(ref)
        n_sys += len(est)
        tp += _matched(ref, est, collar, share)
    precision = math.nan if n_sys == 0 else float(tp / float(n_sys))
    recall = math.nan if n_ref == 0 else float(tp / float(n_ref))
    if precision == 0 and recall == 0:
        return EventScores(0.0, precision, recall)
    return EventScores(float(2.0 * precision * recall / (precision + recall)), precision, recall)


def event_onset_fms(predicted: Events, reference: Events, *, collar: float = 0.2) -> EventScores:
    """heareval's ``event_onset_200ms_fms`` (``collar=0.05``: ``event_onset_50ms_fms``):
    sed_eval's event-based F-measure on onsets only.

    Formula: over the files of ``predicted``, ``TP`` = the size of a maximum one-to-one
    matching of reference and predicted events with equal labels and
    ``|onset_ref - onset_pred| <= collar`` (seconds); ``P = TP / N_pred``,
    ``R = TP / N_ref`` (NaN when the count is 0), ``F = 2 P R / (P + R)`` (0 when both are 0).
    Ties: none (the matching's size is unique); a collar boundary counts as a hit.

    >>> ev = lambda label, start, end: HearEvent(label, start, end)
    >>> event_onset_fms({"a.wav": [ev("dog", 300.0, 900.0), ev("dog", 2000.0, 2100.0)]},
    ...                 {"a.wav": [ev("dog", 100.0, 500.0)]})
    EventScores(f_measure=0.6666666666666666, precision=0.5, recall=1.0)
    """
    return _event_fms(predicted, reference, collar, None)


def event_onset_offset_fms(
    predicted: Events, reference: Events, *, collar: float = 0.05, share: float = 0.2
) -> EventScores:
    """heareval's ``event_onset_offset_50ms_20perc_fms`` (maestro's second score): sed_eval's
    event-based F-measure on onsets and offsets (``t_collar=0.05``,
    ``percentage_of_length=0.2``).

    Formula: as :func:`event_onset_fms`, with a pair a hit when its labels are equal,
    ``|onset_ref - onset_pred| <= collar`` and ``|offset_ref - offset_pred| <=
    max(collar, share * (offset_ref - onset_ref))`` (seconds, ``ms / 1000.0`` each);
    ``TP`` = the size of a maximum one-to-one matching of hits; ``P = TP / N_pred``,
    ``R = TP / N_ref`` (NaN when the count is 0), ``F = 2 P R / (P + R)`` (0 when both are 0).
    Higher is better.
    Ties: none (the matching's size is unique); both boundaries count as hits.

    >>> ev = lambda label, start, end: HearEvent(label, start, end)
    >>> event_onset_offset_fms({"a.wav": [ev("dog", 120.0, 1150.0), ev("dog", 2000.0, 2100.0)]},
    ...                        {"a.wav": [ev("dog", 100.0, 1100.0), ev("dog", 2010.0, 2500.0)]})
    EventScores(f_measure=0.5, precision=0.5, recall=0.5)

    (The first pair's offsets differ by 50 ms, within ``max(0.05, 0.2 * 1.0)`` s; the second's
    by 400 ms, beyond ``max(0.05, 0.2 * 0.49)``: its onset alone would be a hit.)
    """
    return _event_fms(predicted, reference, collar, share)


def _roll(events: Sequence[HearEvent], labels: Sequence[str], n: int, res: float) -> FloatArray:
    roll = np.zeros((n, len(labels)))
    for e in events:
        if e.label not in labels:
            raise ValueError(f"event label {e.label!r} is not in the task's vocabulary")
        onset = math.floor(e.start / 1000.0 * 1 / res)
        offset = math.ceil(e.end / 1000.0 * 1 / res)
        roll[onset:offset, labels.index(e.label)] = 1
    return roll


def segment_error_rate(
    predicted: Events, reference: Events, labels: Sequence[str], *, resolution: float = 1.0
) -> float:
    """heareval's ``segment_1s_er``: sed_eval's segment-based error rate (lower is better).

    Formula: each file of ``predicted`` is cut into ``ceil(max offset / resolution)``
    segments (the largest offset of its reference and predicted events, in seconds); an event
    marks its class active in segments ``floor(onset/res)`` to ``ceil(offset/res) - 1``. Per
    segment, with ``N_ref``/``N_sys`` active classes and ``TP`` active in both:
    ``S = min(N_ref, N_sys) - TP``, ``D = max(0, N_ref - N_sys)``, ``I = max(0, N_sys - N_ref)``;
    summed over segments and files, ``ER = S/(N+e) + D/(N+e) + I/(N+e)`` with ``N`` the summed
    ``N_ref`` and ``e`` = numpy.spacing(1), as sed_eval adds it.
    Ties: none.

    >>> ev = lambda label, start, end: HearEvent(label, start, end)
    >>> segment_error_rate({"a.wav": [ev("dog", 250.0, 1900.0)]},
    ...                    {"a.wav": [ev("dog", 100.0, 500.0)]}, ["cat", "dog"])
    0.9999999999999998

    (One insertion over one reference activity: ``1 / (1 + e)``, sed_eval's guard showing.)
    """
    s = d = i = n_total = 0.0
    for name, est in predicted.items():
        ref = reference.get(name, ())
        max_offset = max([e.end / 1000.0 for e in (*ref, *est)], default=0)
        n = math.ceil(max_offset * 1 / float(resolution))
        ref_roll = _roll(ref, labels, n, resolution)
        est_roll = _roll(est, labels, n, resolution)
        n_ref = ref_roll.sum(axis=1)
        n_sys = est_roll.sum(axis=1)
        tp = (ref_roll + est_roll > 1).sum(axis=1)
        s += float(np.sum(np.minimum(n_ref, n_sys) - tp))
        d += float(np.sum(np.maximum(0, n_ref - n_sys)))
        i += float(np.sum(np.maximum(0, n_sys - n_ref)))
        n_total += float(np.sum(n_ref))
    return float(s / (n_total + SED_EPS) + d / (n_total + SED_EPS) + i / (n_total + SED_EPS))

"""Event detection metrics for vocal-burst studies (definitions version 1).

Events are intervals ``[start, end)`` in seconds with ``end > start``, each in one clip.
Undefined values are ``None``, never 0.

Matching (at an IoU threshold ``tau``): within each clip, one-to-one pairs of a reference and a
predicted event whose IoU is at least ``tau``, chosen to maximize first the number of matched
pairs and then their total IoU (solved exactly with ``scipy.optimize.linear_sum_assignment``
on weights ``W + IoU`` for allowed pairs, ``W`` larger than any possible total IoU). Ties
between equally good matchings change no count; for start/end errors the solver's choice
stands, which is deterministic for the same input.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.metrics.probe_records import EventsReport

FloatArray = npt.NDArray[np.float64]
IOU_THRESHOLDS = (0.1, 0.3, 0.5)
FRAME_THRESHOLD = 0.5


def iou_matrix(ref: npt.ArrayLike, pred: npt.ArrayLike) -> FloatArray:
    """Intersection over union of every (reference, predicted) interval pair.

    Formula: ``|A & B| / |A | B|`` for intervals. Ties: none.

    >>> iou_matrix([[0.0, 2.0]], [[1.0, 3.0], [5.0, 6.0]]).tolist()
    [[0.3333333333333333, 0.0]]
    """
    r = np.asarray(ref, dtype=np.float64).reshape(-1, 2)
    p = np.asarray(pred, dtype=np.float64).reshape(-1, 2)
    inter = np.clip(
        np.minimum(r[:, None, 1], p[None, :, 1]) - np.maximum(r[:, None, 0], p[None, :, 0]),
        0.0,
        None,
    )
    union = (r[:, None, 1] - r[:, None, 0]) + (p[None, :, 1] - p[None, :, 0]) - inter
    return np.asarray(inter / union, dtype=np.float64)


def match_events(
    ref: npt.ArrayLike, pred: npt.ArrayLike, *, threshold: float
) -> list[tuple[int, int]]:
    """Optimal one-to-one matching of one clip's events at an IoU threshold.

    Maximizes the number of pairs with ``IoU >= threshold``, then their total IoU.
    Returns ``(reference index, predicted index)`` pairs sorted by reference index.

    >>> match_events([[0, 2], [3, 4]], [[0, 1.5], [0.1, 2], [3, 4.2]], threshold=0.5)
    [(0, 1), (1, 2)]
    """
    iou = iou_matrix(ref, pred)
    if iou.size == 0:
        return []
    allowed = iou >= threshold
    big = float(min(iou.shape) + 1)
    weight = np.where(allowed, big + iou, 0.0)
    # Imported here: scipy.optimize costs half a second, and every report (diff's too)
    # imports this module through the renderer without matching any event.
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(weight, maximize=True)
    return sorted((int(r), int(c)) for r, c in zip(rows, cols, strict=True) if allowed[r, c])


def frame_f1(
    true: npt.ArrayLike, prob: npt.ArrayLike, *, threshold: float = FRAME_THRESHOLD
) -> float | None:
    """Frame-level F1 with frames ``prob >= threshold`` predicted positive.

    Formula: ``2 TP / (2 TP + FP + FN)``; None when there is no positive frame on either side.
    Ties: a probability equal to the threshold counts as positive.

    >>> frame_f1([1, 1, 0, 0], [0.5, 0.2, 0.7, 0.1])
    0.5
    """
    t = np.asarray(true).astype(bool)
    p = np.asarray(prob, dtype=np.float64) >= threshold
    tp = int(np.count_nonzero(t & p))
    denominator = 2 * tp + int(np.count_nonzero(~t & p)) + int(np.count_nonzero(t & ~p))
    return 2 * tp / denominator if denominator else None


def decode_events(
    prob: npt.ArrayLike, *, hop_s: float, threshold: float = FRAME_THRESHOLD
) -> FloatArray:
    """Intervals from frame probabilities: maximal runs of frames with ``prob >= threshold``.

    Frame ``i`` covers ``[i hop, (i + 1) hop)``. Returns ``[E, 2]`` start/end seconds.

    >>> decode_events([0.1, 0.6, 0.9, 0.2, 0.5], hop_s=0.02).tolist()
    [[0.02, 0.06], [0.08, 0.1]]
    """
    on = np.asarray(prob, dtype=np.float64) >= threshold
    edges = np.diff(np.concatenate([[0], on.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return np.asarray(np.stack([starts * hop_s, ends * hop_s], axis=1), dtype=np.float64).reshape(
        -1, 2
    )


def event_scores(
    ref: npt.ArrayLike,
    ref_clip: npt.ArrayLike,
    pred: npt.ArrayLike,
    pred_clip: npt.ArrayLike,
) -> EventsReport:
    """Precision, recall and F1 at each IoU threshold, and start/end MAE of the 0.1 matches.

    Formula: ``precision = matched / predicted``, ``recall = matched / reference``,
    ``f1 = 2 matched / (predicted + reference)``, each None when its denominator is 0;
    start/end MAE = mean absolute boundary difference over the matches at IoU >= 0.1.
    Ties: counts never depend on which of several equally good matchings is taken; the
    boundary errors use the solver's choice (deterministic for the same input).

    >>> s = event_scores([[0, 1], [2, 3]], [0, 0], [[0.1, 1], [5, 6]], [0, 0])
    >>> s["iou"]["0.5"], s["start_mae_s"]
    ({'matched': 1, 'precision': 0.5, 'recall': 0.5, 'f1': 0.5}, 0.1)
    """
    r = np.asarray(ref, dtype=np.float64).reshape(-1, 2)
    p = np.asarray(pred, dtype=np.float64).reshape(-1, 2)
    rc = np.asarray(ref_clip, dtype=np.int64)
    pc = np.asarray(pred_clip, dtype=np.int64)
    clips = sorted(set(rc.tolist()) | set(pc.tolist()))
    out: EventsReport = {"iou": {}, "start_mae_s": None, "end_mae_s": None}
    for tau in IOU_THRESHOLDS:
        matched = 0
        starts: list[float] = []
        ends: list[float] = []
        for clip in clips:
            ri, pi = np.flatnonzero(rc == clip), np.flatnonzero(pc == clip)
            for a, b in match_events(r[ri], p[pi], threshold=tau):
                matched += 1
                starts.append(abs(r[ri[a], 0] - p[pi[b], 0]))
                ends.append(abs(r[ri[a], 1] - p[pi[b], 1]))
        n_pred, n_ref = len(p), len(r)
        out["iou"][str(tau)] = {
            "matched": matched,
            "precision": matched / n_pred if n_pred else None,
            "recall": matched / n_ref if n_ref else None,
            "f1": 2 * matched / (n_pred + n_ref) if n_pred + n_ref else None,
        }
        if tau == IOU_THRESHOLDS[0]:
            out["start_mae_s"] = math.fsum(starts) / len(starts) if starts else None
            out["end_mae_s"] = math.fsum(ends) / len(ends) if ends else None
    return out


def span_class_accuracy(ref_class: npt.ArrayLike, predicted_class: npt.ArrayLike) -> float | None:
    """Class accuracy over spans; None without spans.

    Formula: ``mean [predicted_i == reference_i]``. Oracle-span accuracy: the classifier is
    given the reference spans. Detected-span accuracy: the classes of predicted events matched
    (IoU >= 0.1) to reference events. Ties: none.

    >>> span_class_accuracy([0, 1, 2], [0, 1, 1])
    0.6666666666666666
    """
    r = np.asarray(ref_class, dtype=np.int64)
    if r.size == 0:
        return None
    return int(np.count_nonzero(r == np.asarray(predicted_class, dtype=np.int64))) / r.size


class SpanSupport(TypedDict):
    support: int
    accuracy: float


def span_class_support(
    ref_class: npt.ArrayLike, predicted_class: npt.ArrayLike
) -> dict[int, SpanSupport]:
    """Per reference class: its support and the span class accuracy within it (its recall).

    Formula: for each class c among the reference classes, ``support_c = |{i: ref_i = c}|``
    and ``accuracy_c = |{i: ref_i = c, predicted_i = c}| / support_c``; classes in ascending
    index order, only those with support > 0 (a class never referenced has no accuracy).
    Ties: none (no ranking). The support-weighted mean of ``accuracy_c`` is
    :func:`span_class_accuracy`.

    >>> span_class_support([2, 0, 2, 2], [2, 1, 0, 2])
    {0: {'support': 1, 'accuracy': 0.0}, 2: {'support': 3, 'accuracy': 0.6666666666666666}}
    """
    r = np.asarray(ref_class, dtype=np.int64)
    p = np.asarray(predicted_class, dtype=np.int64)
    out: dict[int, SpanSupport] = {}
    for c in sorted(set(r.tolist())):
        mine = r == c
        support = int(np.count_nonzero(mine))
        out[int(c)] = {
            "support": support,
            "accuracy": int(np.count_nonzero(mine & (p == c))) / support,
        }
    return out


def detected_span_class_accuracy(
    ref: npt.ArrayLike,
    ref_clip: npt.ArrayLike,
    ref_class: npt.ArrayLike,
    pred: npt.ArrayLike,
    pred_clip: npt.ArrayLike,
    pred_class: npt.ArrayLike,
) -> float | None:
    """Class accuracy of predicted events over their matches at IoU >= 0.1.

    Formula: ``span_class_accuracy`` of the matched (reference, predicted) class pairs; None
    without a match. Ties: as in :func:`event_scores`.

    >>> detected_span_class_accuracy([[0, 1], [2, 3]], [0, 0], [1, 2],
    ...                              [[0, 1], [2, 3], [7, 8]], [0, 0, 0], [1, 0, 2])
    0.5
    """
    r = np.asarray(ref, dtype=np.float64).reshape(-1, 2)
    p = np.asarray(pred, dtype=np.float64).reshape(-1, 2)
    rc, pc = np.asarray(ref_clip, dtype=np.int64), np.asarray(pred_clip, dtype=np.int64)
    rk, pk = np.asarray(ref_class, dtype=np.int64), np.asarray(pred_class, dtype=np.int64)
    truth: list[int] = []
    guess: list[int] = []
    for clip in sorted(set(rc.tolist()) | set(pc.tolist())):
        ri, pi = np.flatnonzero(rc == clip), np.flatnonzero(pc == clip)
        for a, b in match_events(r[ri], p[pi], threshold=IOU_THRESHOLDS[0]):
            truth.append(int(rk[ri[a]]))
            guess.append(int(pk[pi[b]]))
    return span_class_accuracy(truth, guess)

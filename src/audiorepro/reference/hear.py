"""Reference HEAR scores, written from the definitions in docs/hear.md alone (slow on purpose).

Plain Python lists and loops, sharing nothing with :mod:`audiorepro.metrics.hear`: average
precision by counting, per positive, the rows that score at least as high; AUC by comparing
every positive with every negative; the normal quantile from :class:`statistics.NormalDist`;
event matching by augmenting paths (Kuhn's algorithm); segments by testing each one against
each event's interval. Events are ``(label, start_ms, end_ms)`` tuples per file name.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

Event = tuple[str, float, float]


def _first_max(row: list[float]) -> int:
    best = 0
    for j, value in enumerate(row):
        if value > row[best]:
            best = j
    return best


def _lists(predictions: Any, targets: Any) -> tuple[list[list[float]], list[list[float]]]:
    return [[float(x) for x in r] for r in predictions], [[float(x) for x in r] for r in targets]


def top1_accuracy(predictions: Any, targets: Any) -> float:
    p, t = _lists(predictions, targets)
    correct = sum(_first_max(a) == _first_max(b) for a, b in zip(p, t, strict=True))
    return correct / len(t)


def chroma_accuracy(predictions: Any, targets: Any) -> float:
    p, t = _lists(predictions, targets)
    correct = sum(_first_max(a) % 12 == _first_max(b) % 12 for a, b in zip(p, t, strict=True))
    return correct / len(t)


def _average_precision(scores: list[float], truth: list[float]) -> float:
    """Mean over positives of the precision of the rows scoring at least the positive's score
    (a tie group is one threshold); 0 without positives."""
    positives = [s for s, y in zip(scores, truth, strict=True) if y == 1]
    if not positives:
        return 0.0
    total = 0.0
    for s in positives:
        at_least = [y for x, y in zip(scores, truth, strict=True) if x >= s]
        total += sum(1 for y in at_least if y == 1) / len(at_least)
    return total / len(positives)


def mean_average_precision(predictions: Any, targets: Any) -> float:
    p, t = _lists(predictions, targets)
    columns = range(len(p[0]))
    aps = [_average_precision([r[c] for r in p], [r[c] for r in t]) for c in columns]
    return sum(aps) / len(aps)


def _auc(scores: list[float], truth: list[float]) -> float | None:
    """P(positive outscores negative) + P(tie)/2, or None without both classes."""
    pos = [s for s, y in zip(scores, truth, strict=True) if y == 1]
    neg = [s for s, y in zip(scores, truth, strict=True) if y != 1]
    if not pos or not neg:
        return None
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def _aucs(predictions: Any, targets: Any) -> list[float] | None:
    p, t = _lists(predictions, targets)
    out = []
    for c in range(len(p[0])):
        value = _auc([r[c] for r in p], [r[c] for r in t])
        if value is None:
            return None
        out.append(value)
    return out


def aucroc(predictions: Any, targets: Any) -> float:
    aucs = _aucs(predictions, targets)
    return math.nan if aucs is None else sum(aucs) / len(aucs)


def d_prime(predictions: Any, targets: Any) -> float:
    aucs = _aucs(predictions, targets)
    if aucs is None:
        return math.nan
    values = []
    for a in aucs:
        if a >= 1.0:
            values.append(math.inf)
        elif a <= 0.0:
            values.append(-math.inf)
        else:
            values.append(NormalDist().inv_cdf(a) * math.sqrt(2.0))
    return sum(values) / len(values)


def _augment(r: int, adj: list[list[int]], owner: dict[int, int], seen: set[int]) -> bool:
    for e in adj[r]:
        if e in seen:
            continue
        seen.add(e)
        if e not in owner or _augment(owner[e], adj, owner, seen):
            owner[e] = r
            return True
    return False


def _matched_onsets(ref: list[Event], est: list[Event], collar: float) -> int:
    """Kuhn's maximum matching of equal-label pairs whose onsets are within ``collar`` s."""
    adj = []
    for r in ref:
        near = [i for i, e in enumerate(est) if abs(r[1] / 1000.0 - e[1] / 1000.0) <= collar]
        adj.append([i for i in near if est[i][0] == r[0]])
    owner: dict[int, int] = {}
    return sum(_augment(r, adj, owner, set()) for r in range(len(ref)))


def event_onset_f(
    predicted: dict[str, list[Event]], reference: dict[str, list[Event]], collar: float = 0.2
) -> tuple[float, float, float]:
    """(F, precision, recall) over the files of ``predicted``."""
    tp = n_ref = n_sys = 0
    for name, est in predicted.items():
        ref = reference.get(name, [])
        tp += _matched_onsets(ref, est, collar)
        n_ref += len(ref)
        n_sys += len(est)
    precision = tp / n_sys if n_sys else math.nan
    recall = tp / n_ref if n_ref else math.nan
    if precision == 0 and recall == 0:
        return 0.0, precision, recall
    return 2 * precision * recall / (precision + recall), precision, recall


def _both_ends_hit(r: Event, e: Event, collar: float, length_share: float) -> bool:
    """Same label, onsets within ``collar`` s and offsets within the larger of ``collar`` and
    ``length_share`` of the reference event's length (s)."""
    if r[0] != e[0] or abs(r[1] / 1000.0 - e[1] / 1000.0) > collar:
        return False
    allowed = max(collar, length_share * (r[2] / 1000.0 - r[1] / 1000.0))
    return abs(r[2] / 1000.0 - e[2] / 1000.0) <= allowed


def event_onset_offset_f(
    predicted: dict[str, list[Event]],
    reference: dict[str, list[Event]],
    collar: float = 0.05,
    length_share: float = 0.2,
) -> tuple[float, float, float]:
    """(F, precision, recall) over the files of ``predicted``, a hit needing both ends."""
    hits = total_ref = total_est = 0
    for name, est in predicted.items():
        ref = reference.get(name, [])
        adj = [[i for i, e in enumerate(est) if _both_ends_hit(r, e, collar, length_share)]
               for r in ref]  # fmt: skip
        owner: dict[int, int] = {}
        hits += sum(_augment(r, adj, owner, set()) for r in range(len(ref)))
        total_ref += len(ref)
        total_est += len(est)
    p = hits / total_est if total_est else math.nan
    r_ = hits / total_ref if total_ref else math.nan
    if p == 0 and r_ == 0:
        return 0.0, p, r_
    return 2 * p * r_ / (p + r_), p, r_


def _active(events: list[Event], label: str, k: int, res: float) -> bool:
    """Whether segment ``k`` (``[k res, (k+1) res)`` s) is in an event of ``label``: segments
    from ``floor(onset/res)`` up to but excluding ``ceil(offset/res)``."""
    return any(
        e[0] == label and math.floor(e[1] / 1000.0 / res) <= k < math.ceil(e[2] / 1000.0 / res)
        for e in events
    )


def segment_error_rate(
    predicted: dict[str, list[Event]],
    reference: dict[str, list[Event]],
    labels: list[str],
    resolution: float = 1.0,
) -> float:
    subs = dels = ins = n = 0
    for name, est in predicted.items():
        ref = reference.get(name, [])
        end = max([e[2] / 1000.0 for e in ref + est], default=0.0)
        for k in range(math.ceil(end / resolution)):
            a = {x for x in labels if _active(ref, x, k, resolution)}
            b = {x for x in labels if _active(est, x, k, resolution)}
            subs += min(len(a), len(b)) - len(a & b)
            dels += max(0, len(a) - len(b))
            ins += max(0, len(b) - len(a))
            n += len(a)
    eps = math.ulp(1.0)  # the guard sed_eval adds to every denominator
    return subs / (n + eps) + dels / (n + eps) + ins / (n + eps)

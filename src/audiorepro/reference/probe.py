"""Reference probe metrics, written from the definitions alone (slow on purpose).

Regression with exact fractions where the definition is a mean, naive O(n^2) average ranks;
classification by counting in plain loops; event matching by exhaustive search over all
one-to-one matchings (memoized over the set of used predictions), so it proves what the fast
solver finds.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache
from typing import Any


def _pairs(pred: Any, true: Any) -> list[tuple[float, float]]:
    return [
        (float(p), float(t)) for p, t in zip(pred, true, strict=True) if not math.isnan(float(t))
    ]


def mae(pred: Any, true: Any) -> float | None:
    pairs = _pairs(pred, true)
    if not pairs:
        return None
    # The definitions' rounding rule: each difference in float64, the sum rounded once, then
    # one division.
    total = float(sum((Fraction(abs(p - t)) for p, t in pairs), Fraction(0)))
    return total / len(pairs)


def rmse(pred: Any, true: Any) -> float | None:
    pairs = _pairs(pred, true)
    if not pairs:
        return None
    # d * d, not d ** 2: Python's float power is not always the correctly rounded square.
    total = float(sum((Fraction((p - t) * (p - t)) for p, t in pairs), Fraction(0)))
    return math.sqrt(total / len(pairs))


def _corr(xs: list[float], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 3 or len(set(xs)) == 1 or len(set(ys)) == 1:
        return None
    fx = [Fraction(x) for x in xs]
    fy = [Fraction(y) for y in ys]
    mx, my = sum(fx) / n, sum(fy) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(fx, fy, strict=True))
    sxx = sum((a - mx) ** 2 for a in fx)
    syy = sum((b - my) ** 2 for b in fy)
    return max(-1.0, min(1.0, float(sxy) / math.sqrt(float(sxx) * float(syy))))


def pearson(pred: Any, true: Any) -> float | None:
    pairs = _pairs(pred, true)
    return _corr([p for p, _ in pairs], [t for _, t in pairs])


def _ranks(values: list[float]) -> list[float]:
    return [
        sum(1 for w in values if w < v) + (sum(1 for w in values if w == v) + 1) / 2 for v in values
    ]


def spearman(pred: Any, true: Any) -> float | None:
    pairs = _pairs(pred, true)
    if len(pairs) < 3:
        return None
    return _corr(_ranks([p for p, _ in pairs]), _ranks([t for _, t in pairs]))


def classification(true: Any, pred: Any, n_classes: int) -> dict[str, float | None]:
    t = [int(x) for x in true]
    p = [int(x) for x in pred]
    if not t:
        return {"accuracy": None, "balanced_accuracy": None, "macro_f1": None}
    acc = sum(1 for a, b in zip(t, p, strict=True) if a == b) / len(t)
    recalls, f1s = [], []
    for k in range(n_classes):
        tp = sum(1 for a, b in zip(t, p, strict=True) if a == k and b == k)
        support = t.count(k)
        predicted = p.count(k)
        if support:
            recalls.append(Fraction(tp, support))
        if support + predicted:
            f1s.append(Fraction(2 * tp, support + predicted))
    return {
        "accuracy": acc,
        "balanced_accuracy": float(sum(recalls) / len(recalls)) if recalls else None,
        "macro_f1": float(sum(f1s) / len(f1s)) if f1s else None,
    }


def iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / ((a[1] - a[0]) + (b[1] - b[0]) - inter)


def best_matchings(
    ref: list[tuple[float, float]], pred: list[tuple[float, float]], threshold: float
) -> tuple[int, float, int]:
    """Exhaustive search: (most pairs, their largest total IoU, how many matchings reach both)."""

    @cache
    def go(i: int, used: int) -> tuple[int, float, int]:
        if i == len(ref):
            return (0, 0.0, 1)
        best = go(i + 1, used)  # reference i unmatched
        for j in range(len(pred)):
            if used >> j & 1:
                continue
            v = iou(ref[i], pred[j])
            if v < threshold:
                continue
            c, s, n = go(i + 1, used | (1 << j))
            cand = (c + 1, s + v, n)
            if cand[0] > best[0] or (cand[0] == best[0] and cand[1] > best[1] + 1e-12):
                best = cand
            elif cand[0] == best[0] and abs(cand[1] - best[1]) <= 1e-12:
                best = (best[0], max(best[1], cand[1]), best[2] + n)
        return best

    return go(0, 0)


def event_counts(
    ref: Any, ref_clip: Any, pred: Any, pred_clip: Any, threshold: float
) -> dict[str, float | int | None]:
    matched = 0
    for clip in sorted(set(int(c) for c in ref_clip) | set(int(c) for c in pred_clip)):
        r = [
            (float(a), float(b)) for (a, b), c in zip(ref, ref_clip, strict=True) if int(c) == clip
        ]
        p = [
            (float(a), float(b))
            for (a, b), c in zip(pred, pred_clip, strict=True)
            if int(c) == clip
        ]
        matched += best_matchings(r, p, threshold)[0]
    n_ref, n_pred = len(ref), len(pred)
    return {
        "matched": matched,
        "precision": matched / n_pred if n_pred else None,
        "recall": matched / n_ref if n_ref else None,
        "f1": 2 * matched / (n_pred + n_ref) if n_pred + n_ref else None,
    }


def span_class_support(ref_class: Any, predicted_class: Any) -> dict[int, tuple[int, float]]:
    """Per referenced class: (support, accuracy as an exact fraction), counted one by one."""
    counts: dict[int, list[int]] = {}
    for r, p in zip(ref_class, predicted_class, strict=True):
        hit = counts.setdefault(int(r), [0, 0])
        hit[0] += 1
        hit[1] += int(r) == int(p)
    return {c: (n, float(Fraction(k, n))) for c, (n, k) in sorted(counts.items())}


def frame_f1(true: Any, prob: Any) -> float | None:
    tp = fp = fn = 0
    for t, p in zip(true, prob, strict=True):
        on = float(p) >= 0.5
        tp += bool(t) and on
        fp += (not t) and on
        fn += bool(t) and not on
    return 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None


def mean_cosine(pred: Any, ref: Any, valid: Any) -> float | None:
    values = []
    for a, b, ok in zip(pred, ref, valid, strict=True):
        if not ok:
            continue
        dot = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b, strict=True))
        na = sum(Fraction(float(x)) ** 2 for x in a)
        nb = sum(Fraction(float(y)) ** 2 for y in b)
        values.append(float(dot) / math.sqrt(float(na) * float(nb)))
    return math.fsum(values) / len(values) if values else None


# --- human benchmarks: every threshold tried, balanced accuracy as an exact fraction ---------


def _balanced(pairs: list[tuple[float, bool]], threshold: float) -> Fraction | None:
    pos = [s for s, y in pairs if y]
    neg = [s for s, y in pairs if not y]
    if not pos or not neg:
        return None
    tpr = Fraction(sum(1 for s in pos if s >= threshold), len(pos))
    tnr = Fraction(sum(1 for s in neg if s < threshold), len(neg))
    return (tpr + tnr) / 2


def _best(pairs: list[tuple[float, bool]]) -> tuple[float, Fraction] | None:
    """The lowest threshold (distinct scores and +inf) with the highest balanced accuracy."""
    best: tuple[float, Fraction] | None = None
    for t in sorted({s for s, _ in pairs} | {math.inf}):
        ba = _balanced(pairs, t)
        if ba is None:
            return None
        if best is None or ba > best[1]:
            best = (t, ba)
    return best


def oracle_balanced_accuracy(scores: Any, labels: Any) -> float | None:
    found = _best([(float(s), bool(y)) for s, y in zip(scores, labels, strict=True)])
    return None if found is None else float(found[1])


def _groups(keys: Any) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return out


def oracle_balanced_accuracy_per_prompt(scores: Any, labels: Any, prompts: Any) -> float | None:
    values = []
    for idx in _groups(list(prompts)).values():
        found = _best([(float(scores[i]), bool(labels[i])) for i in idx])
        if found is not None:
            values.append(found[1])
    return float(sum(values, Fraction(0)) / len(values)) if values else None


def mean_prompt_spearman(scores: Any, labels: Any, prompts: Any) -> float | None:
    rhos = []
    for idx in _groups(list(prompts)).values():
        rho = spearman([scores[i] for i in idx], [labels[i] for i in idx])
        if rho is not None:
            rhos.append(rho)
    return math.fsum(rhos) / len(rhos) if rhos else None


def heldout_threshold_balanced_accuracy(
    scores: Any, labels: Any, clips: Any, folds: int = 5
) -> float | None:
    ids = sorted(set(clips))
    fold_of = {c: ids.index(c) % folds for c in ids}
    predicted: list[tuple[bool, bool]] = []  # (label, prediction)
    for k in range(folds):
        train = [
            (float(s), bool(y))
            for s, y, c in zip(scores, labels, clips, strict=True)
            if fold_of[c] != k
        ]
        found = _best(train)
        if found is None:
            continue
        for s, y, c in zip(scores, labels, clips, strict=True):
            if fold_of[c] == k:
                predicted.append((bool(y), float(s) >= found[0]))
    pos = [p for y, p in predicted if y]
    neg = [p for y, p in predicted if not y]
    if not pos or not neg:
        return None
    return float((Fraction(sum(pos), len(pos)) + Fraction(sum(not p for p in neg), len(neg))) / 2)

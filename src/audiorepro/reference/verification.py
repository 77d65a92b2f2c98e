"""Reference speaker-verification measures, written from the definitions alone (slow on purpose).

Cosines with ``math.fsum`` over plain Python floats. Every measure over scores sorts the
trials once as Python tuples and walks them in plain Python (O(n log n), no numpy): the
operating points in exact fractions; the ROC convex hull as BOSARIS computes it (pool
adjacent violators over the labels sorted by score, then ``rocch2eer``'s line through each
segment); the toolkits' measures by their own loops, float32 emulated by rounding each result
through ``struct``.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np  # the bootstrap's draw is numpy's generator, as its definition names it


def _unit(row: Any) -> list[float]:
    """``row / |row|``. Where the squares overflow or underflow a float (so the norm is inf,
    or 0 for a row that is not zero), ``row / max|x|`` first: the same direction."""
    r = [float(x) for x in row]
    norm = math.sqrt(math.fsum(x * x for x in r))
    if (norm == math.inf or norm == 0.0) and any(r):
        big = max(abs(x) for x in r)
        r = [x / big for x in r]
        norm = math.sqrt(math.fsum(x * x for x in r))
    return [x / norm for x in r]


def speaker_trials(embeddings: Any, speakers: Sequence[str]) -> tuple[list[float], list[bool]]:
    """Every pair ``i < j`` in row-major order: the cosine of the unit vectors, same speaker."""
    rows = [[float(x) for x in row] for row in embeddings]
    units = [_unit(row) for row in rows]
    scores, targets = [], []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            scores.append(math.fsum(a * b for a, b in zip(units[i], units[j], strict=True)))
            targets.append(speakers[i] == speakers[j])
    return scores, targets


def trial_scores(embeddings: Any, enrollment: Iterable[Any], test: Iterable[Any]) -> list[float]:
    """Each trial's cosine: rows ``enrollment[k]`` and ``test[k]`` as unit vectors, dotted."""
    units = [_unit(row) for row in embeddings]
    return [
        math.fsum(a * b for a, b in zip(units[int(i)], units[int(j)], strict=True))
        for i, j in zip(enrollment, test, strict=True)
    ]


def _split(scores: Any, is_target: Any) -> tuple[list[float], list[bool]]:
    s = [float(x) for x in scores]
    t = [bool(x) for x in is_target]
    if len(s) != len(t):
        raise ValueError("one target flag per score")
    return s, t


def _points(scores: Any, is_target: Any) -> tuple[list[tuple[int, int]], int, int]:
    """``[(non-targets accepted, targets rejected)]`` from nothing accepted, each distinct
    score (highest first) accepting everything at or above it, and the class sizes."""
    s, t = _split(scores, is_target)
    n_target = sum(t)
    n_non = len(t) - n_target
    points = [(0, n_target)]
    fa, miss = 0, n_target
    for _, group in itertools.groupby(sorted(zip(s, t, strict=True), reverse=True),
                                      key=lambda st: st[0]):  # fmt: skip
        for _, tar in group:
            if tar:
                miss -= 1
            else:
                fa += 1
        points.append((fa, miss))
    return points, n_target, n_non


def equal_error_rate(scores: Any, is_target: Any) -> float | None:
    """The crossing of the operating-point curve with ``F = M`` (see the metric's definition)."""
    counts, n_target, n_nontarget = _points(scores, is_target)
    if n_target == 0 or n_nontarget == 0:
        return None
    points = [(Fraction(fa, n_nontarget), Fraction(miss, n_target)) for fa, miss in counts]
    for (f0, m0), (f1, m1) in itertools.pairwise(points):
        if m0 == f0:
            return float(f0)
        if m1 <= f1:  # the segment from (f0, m0) to (f1, m1) crosses F = M
            # F + x (f1 - f0) = M + x (m1 - m0), 0 < x <= 1
            x = (m0 - f0) / ((m0 - f0) - (m1 - f1))
            return float(f0 + x * (f1 - f0))
    raise AssertionError("the last operating point accepts every trial, so M = 0 <= F")


# --- BOSARIS: pool adjacent violators, rocch, rocch2eer, opt_loglr, cllr ---------------------


def _pav_bins(scores: Any, is_target: Any) -> tuple[list[tuple[int, int]], int, int]:
    """BOSARIS ``rocch``'s bins: the labels sorted by score ascending (targets before
    non-targets within a tie, as MATLAB's stable sort of ``[tar, non]`` leaves them), pooled
    by pool-adjacent-violators into a non-decreasing fit: ``[(targets, non-targets)]``."""
    s, t = _split(scores, is_target)
    tar = [x for x, y in zip(s, t, strict=True) if y]
    non = [x for x, y in zip(s, t, strict=True) if not y]
    ordered = sorted([(x, 0) for x in tar] + [(x, 1) for x in non])  # targets first in a tie
    blocks: list[list[int]] = []  # [targets, non-targets] per block
    for _, label in ordered:
        blocks.append([1 - label, label])
        # merge while the last block's rate of targets is not above the one before it
        while len(blocks) > 1 and (
            Fraction(blocks[-1][0], sum(blocks[-1])) <= Fraction(blocks[-2][0], sum(blocks[-2]))
        ):
            a, b = blocks.pop()
            blocks[-1][0] += a
            blocks[-1][1] += b
    return [(a, b) for a, b in blocks], len(tar), len(non)


def eer_rocch(scores: Any, is_target: Any) -> float | None:
    """BOSARIS ``rocch`` (miss and false-alarm rates at the PAV bins' edges) and
    ``rocch2eer`` (each segment's line meets ``F = M`` at ``1 / sum(XY \\ [1; 1])``; a
    horizontal or vertical segment gives 0; the EER is the largest), in exact fractions."""
    bins, n_t, n_n = _pav_bins(scores, is_target)
    if n_t == 0 or n_n == 0:
        return None
    pmiss, pfa = [Fraction(0)], [Fraction(1)]  # threshold leftmost: accept everything
    miss, fa = 0, n_n
    for a, b in bins:
        miss += a
        fa -= b
        pmiss.append(Fraction(miss, n_t))
        pfa.append(Fraction(fa, n_n))
    eer = Fraction(0)
    for i in range(len(pfa) - 1):
        x1, x2, y1, y2 = pfa[i], pfa[i + 1], pmiss[i], pmiss[i + 1]
        if x1 == x2 or y1 == y2:
            continue
        det = x1 * y2 - y1 * x2  # [x1 y1; x2 y2] [a; b] = [1; 1]
        eer = max(eer, det / ((y2 - y1) + (x1 - x2)))
    return float(eer)


def _softplus(x: float) -> float:
    """``log(1 + exp(x))`` without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def cllr(llrs: Any, is_target: Any) -> float | None:
    """BOSARIS ``cllr``: the mean of ``-log2 sigmoid(llr)`` over targets and of ``-log2
    sigmoid(-llr)`` over non-targets, averaged."""
    s, t = _split(llrs, is_target)
    tar = [x for x, y in zip(s, t, strict=True) if y]
    non = [x for x, y in zip(s, t, strict=True) if not y]
    if not tar or not non:
        return None
    c_tar = math.fsum(_softplus(-x) for x in tar) / len(tar)
    c_non = math.fsum(_softplus(x) for x in non) / len(non)
    return (c_tar + c_non) / 2 / math.log(2)


def min_cllr(scores: Any, is_target: Any) -> float | None:
    """BOSARIS ``min_cllr`` (``opt_loglr``: each PAV bin's posterior log odds less the prior
    log odds ``log(N_t / N_n)``, then ``cllr``), without the ``1e-6 * score`` term BOSARIS adds
    to break ties; a bin of one class has an infinite LLR, which costs its trials nothing."""
    bins, n_t, n_n = _pav_bins(scores, is_target)
    if n_t == 0 or n_n == 0:
        return None
    c_tar, c_non = [], []
    for a, b in bins:
        if a == 0 or b == 0:
            continue
        llr = math.log(a / b) - math.log(n_t / n_n)
        c_tar.append(a * _softplus(-llr))
        c_non.append(b * _softplus(llr))
    return (math.fsum(c_tar) / n_t + math.fsum(c_non) / n_n) / 2 / math.log(2)


# --- detection costs -----------------------------------------------------------------------


def min_dcf(
    scores: Any, is_target: Any, *, p_target: float, c_miss: float = 1.0, c_fa: float = 1.0
) -> float | None:
    """The least normalized cost over every operating point, in exact fractions."""
    counts, n_t, n_n = _points(scores, is_target)
    if n_t == 0 or n_n == 0:
        return None
    p, cm, cf = Fraction(p_target), Fraction(c_miss), Fraction(c_fa)
    best = min(cm * p * Fraction(miss, n_t) + cf * (1 - p) * Fraction(fa, n_n)
               for fa, miss in counts)  # fmt: skip
    return float(best / min(cm * p, cf * (1 - p)))


def act_dcf(
    llrs: Any, is_target: Any, *, p_target: float, c_miss: float = 1.0, c_fa: float = 1.0
) -> float | None:
    """The normalized cost of accepting ``llr >= log(c_fa (1 - p) / (c_miss p))``."""
    s, t = _split(llrs, is_target)
    n_t = sum(t)
    n_n = len(t) - n_t
    if n_t == 0 or n_n == 0:
        return None
    theta = math.log(c_fa * (1 - p_target)) - math.log(c_miss * p_target)
    misses = sum(1 for x, y in zip(s, t, strict=True) if y and not x >= theta)
    fas = sum(1 for x, y in zip(s, t, strict=True) if not y and x >= theta)
    cost = c_miss * p_target * (misses / n_t) + c_fa * (1 - p_target) * (fas / n_n)
    return cost / min(c_miss * p_target, c_fa * (1 - p_target))


# --- the toolkits' own loops ---------------------------------------------------------------


def _f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (one float32 operation on float32 operands is the
    float64 result rounded so)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _is_f32(scores: Any) -> bool:
    return str(getattr(scores, "dtype", "")) == "float32"


def _speechbrain_walk(scores: Any, is_target: Any) -> list[tuple[float, float]] | None:
    """speechbrain's ``(FRR, FAR)`` at each of its thresholds, ascending: the distinct scores
    and the midpoints between neighbours; ``FRR = #(tar <= t) / N_t``, ``FAR = #(non > t) /
    N_n``, float32."""
    f32 = _is_f32(scores)
    s, t = _split(scores, is_target)
    if f32:
        s = [_f32(x) for x in s]
    tar = sorted(x for x, y in zip(s, t, strict=True) if y)
    non = sorted(x for x, y in zip(s, t, strict=True) if not y)
    if not tar or not non:
        return None
    u = sorted(set(s))
    mids = [(_f32(_f32(a + b) / 2) if f32 else (a + b) / 2) for a, b in itertools.pairwise(u)]
    rates = []
    i = j = 0
    for thr in sorted(u + mids):
        while i < len(tar) and tar[i] <= thr:
            i += 1
        while j < len(non) and non[j] <= thr:
            j += 1
        rates.append((_f32(_f32(i) / _f32(len(tar))), _f32(_f32(len(non) - j) / _f32(len(non)))))
    return rates


def eer_speechbrain(scores: Any, is_target: Any) -> float | None:
    """speechbrain's ``EER`` loop: keep the first threshold whose float32 ``|FAR - FRR|`` is
    below the best so far (compared in float64); ``(FAR + FRR) / 2``."""
    rates = _speechbrain_walk(scores, is_target)
    if rates is None:
        return None
    best_frr, best_far = rates[0]
    for frr, far in rates[1:]:
        if _f32(abs(_f32(far - frr))) < abs(best_far - best_frr):
            best_frr, best_far = frr, far
    return (best_far + best_frr) / 2


def min_dcf_speechbrain(
    scores: Any, is_target: Any, *, p_target: float = 0.01, c_miss: float = 1.0, c_fa: float = 1.0
) -> float | None:
    """speechbrain's ``minDCF``: the least float32 ``c_miss FRR p + c_fa FAR (1 - p)`` over
    its thresholds, not normalized."""
    rates = _speechbrain_walk(scores, is_target)
    if rates is None:
        return None
    cm, cf, p, q = _f32(c_miss), _f32(c_fa), _f32(p_target), _f32(1 - p_target)
    return min(_f32(_f32(_f32(cm * frr) * p) + _f32(_f32(cf * far) * q)) for frr, far in rates)


def eer_pyannote(scores: Any, is_target: Any) -> float | None:
    """pyannote.metrics' ``det_curve``: scikit-learn's ROC points (a point between two others
    where neither count bends is dropped; ``(0, 0)`` first), then the mean of the points on
    either side of the first ``FPR > FNR``."""
    counts, n_t, n_n = _points(scores, is_target)
    if n_t == 0 or n_n == 0:
        return None
    pts = [(float(fa), float(n_t - miss)) for fa, miss in counts[1:]]  # (fps, tps)
    if len(pts) > 2:
        kept = [pts[0]]
        for a, b, c in zip(pts, pts[1:], pts[2:], strict=False):
            if (c[0] - b[0]) - (b[0] - a[0]) != 0 or (c[1] - b[1]) - (b[1] - a[1]) != 0:
                kept.append(b)
        pts = [*kept, pts[-1]]
    pts = [(0.0, 0.0), *pts]
    fpr = [fp / pts[-1][0] for fp, _ in pts]
    fnr = [1 - tp / pts[-1][1] for _, tp in pts]
    i = next(k for k in range(len(pts)) if fpr[k] > fnr[k])
    return 0.25 * (fpr[i - 1] + fpr[i] + fnr[i - 1] + fnr[i])


def eer_kaldi(scores: Any, is_target: Any) -> float | None:
    """Kaldi's ``ComputeEer`` loop over float32 scores, as written in ``compute-eer.cc``."""
    s, t = _split(scores, is_target)
    tar = sorted(_f32(x) for x, y in zip(s, t, strict=True) if y)
    non = sorted(_f32(x) for x, y in zip(s, t, strict=True) if not y)
    if not tar or not non:
        return None
    position = 0
    while position + 1 < len(tar):
        nontarget_n = int(len(non) * position * 1.0 / len(tar))
        nontarget_position = max(len(non) - 1 - nontarget_n, 0)
        if non[nontarget_position] < tar[position]:
            break
        position += 1
    return _f32(position * 1.0 / len(tar))


# --- score normalization --------------------------------------------------------------------


def _stats(row: list[float], cohort: list[list[float]], top_n: int | None) -> tuple[float, float]:
    """The mean and population standard deviation of a unit row's cosines with the cohort's
    unit rows (its ``top_n`` highest when given)."""
    scores = sorted((math.fsum(a * b for a, b in zip(row, c, strict=True)) for c in cohort),
                    reverse=True)  # fmt: skip
    if top_n is not None:
        scores = scores[:top_n]
    mean = math.fsum(scores) / len(scores)
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / len(scores))


def normalize_scores(
    scores: Any, enrollment: Any, test: Any, embeddings: Any, cohort: Any, *, method: str,
    top_n: int | None = None,
) -> list[float]:  # fmt: skip
    """z-, t-, s- and adaptive s-norm from the definitions: each side's score less its cohort
    mean, over its cohort standard deviation; s-norm the mean of both sides."""

    e, c = [_unit(row) for row in embeddings], [_unit(row) for row in cohort]
    memo: dict[int, tuple[float, float]] = {}
    result = []
    for s, a, b in zip(scores, enrollment, test, strict=True):
        for k in (int(a), int(b)):
            if k not in memo:
                memo[k] = _stats(e[k], c, top_n)
        (mu_e, sd_e), (mu_t, sd_t) = memo[int(a)], memo[int(b)]
        z, t = (float(s) - mu_e) / sd_e, (float(s) - mu_t) / sd_t
        result.append({"z-norm": z, "t-norm": t}.get(method, (z + t) / 2))
    return result


def speaker_bootstrap(
    scores: Any,
    is_target: Any,
    enrollment_speakers: Sequence[str],
    test_speakers: Sequence[str],
    *,
    resamples: int,
    seed: int,
    level: float = 0.95,
) -> dict[str, tuple[float, float] | None]:
    """The speaker-level bootstrap intervals (docs/metrics.md): each resample draws the
    sorted speakers with replacement from ``numpy.random.default_rng(seed).integers``; each
    trial repeated ``m_enrollment * m_test`` times; the EER and minDCF of the repeated trials
    (exact fractions); the quantiles linearly interpolated between order statistics."""
    s, t = _split(scores, is_target)
    speakers = sorted(set(enrollment_speakers) | set(test_speakers))
    at = {name: k for k, name in enumerate(speakers)}
    rng = np.random.default_rng(seed)
    got: dict[str, list[float]] = {"eer": [], "min_dcf_p0.01": [], "min_dcf_p0.05": []}
    for _ in range(resamples):
        drawn = [int(x) for x in rng.integers(0, len(speakers), size=len(speakers))]
        m = [drawn.count(k) for k in range(len(speakers))]
        rs: list[float] = []
        rt: list[bool] = []
        for x, y, e, v in zip(s, t, enrollment_speakers, test_speakers, strict=True):
            w = m[at[e]] * m[at[v]]
            rs += [x] * w
            rt += [y] * w
        eer = equal_error_rate(rs, rt)
        if eer is None:
            continue
        got["eer"].append(eer)
        for p in (0.01, 0.05):
            value = min_dcf(rs, rt, p_target=p)
            assert value is not None
            got[f"min_dcf_p{p}"].append(value)

    def quantile(values: list[float], q: float) -> float:
        v = sorted(values)
        h = (len(v) - 1) * q
        lo = math.floor(h)
        return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])

    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    return {k: (quantile(v, lo_q), quantile(v, hi_q)) if v else None for k, v in got.items()}

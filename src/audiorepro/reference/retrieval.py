"""Reference retrieval metrics: exact integer scores, a full sort per query, exact means.

Written from the definitions only:

1. Every stored float is ``n / 2**s`` for integers ``n`` and ``s``; scaling all values of the
   dump by one common power of two turns them into integers, so every dot product is an exact
   integer (times one common positive factor) and every comparison of scores is exact.
2. Per query, all items are sorted by (descending score, tie class, item index), where the tie
   class puts relevant items first (optimistic) or last (pessimistic) among equal scores.
   A query may have any number of relevant items, in either direction (a caption relevant to
   several clips comes with general relevance, format version 2).
3. ``tie_policy="average"`` gives only the nDCG measures, tie-averaged: each rank of a group
   of equal scores (relevant or not) holds the group's mean gain, an exact fraction (the mean
   of DCG over every order of the group).
4. Metrics are computed per query from the 1-based positions of the relevant items, exactly
   with ``fractions.Fraction``; each query's value is rounded once to float64, and the metric
   is ``math.fsum`` of those values divided by the number of queries (the rounding rule of the
   definitions).
"""

from __future__ import annotations

import decimal
import math
import statistics
from fractions import Fraction
from typing import Any

import numpy as np

METRIC_NAMES = (
    "r@1",
    "r@5",
    "r@10",
    "recall@1",
    "recall@5",
    "recall@10",
    "map",
    "map@10",
    "mrr",
    "mean_rank",
    "median_rank",
)


def _to_scaled_ints(*arrays: Any) -> list[list[list[int]]]:
    """All values as integers over one common power-of-two denominator."""
    ratios = [
        [[float(v).as_integer_ratio() for v in row] for row in np.asarray(a).tolist()]
        for a in arrays
    ]
    denom = max((d for a in ratios for row in a for _, d in row), default=1)
    return [[[n * (denom // d) for n, d in row] for row in a] for a in ratios]


def _ordered(
    scores: list[int], gain: dict[int, Fraction], tie_policy: str
) -> list[tuple[int, Fraction]]:
    """(position, gain) of each relevant item (``gain``: item -> gain > 0), ascending. Among
    equal scores: optimistic puts relevant items first and higher gains first (the best
    order), pessimistic relevant items last and lower gains first (the worst)."""
    optimistic = tie_policy == "optimistic"

    def key(j: int) -> tuple[int, int, Fraction, int]:
        g = gain.get(j, Fraction(0))
        tie_class = 0 if (g > 0) == optimistic else 1
        return (-scores[j], tie_class, -g if optimistic else g, j)

    ordered = sorted(range(len(scores)), key=key)
    return [(p + 1, gain[j]) for p, j in enumerate(ordered) if j in gain]


def _cut(name: str) -> int | None:
    return int(name.partition("@")[2]) if "@" in name else None


def _is_ndcg_name(name: str) -> bool:
    return name.partition("@")[0] == "ndcg"


def _cutoff_names(cutoffs: tuple[int, ...] | None) -> tuple[str, ...]:
    """The names reported: version 1.0's, or with cutoffs version 1.1's, in report order."""
    if cutoffs is None:
        return METRIC_NAMES
    names = [f"{f}@{k}" for f in ("r", "recall", "precision") for k in cutoffs]
    for family in ("map", "mrr", "ndcg"):
        names.append(family)
        names.extend(f"{family}@{k}" for k in cutoffs)
    return (*names, "r_precision", "mean_rank", "median_rank")


def _dec(value: Fraction) -> decimal.Decimal:
    """A gain (an exact fraction: integer or float64) as a decimal of the context's precision."""
    return decimal.Decimal(value.numerator) / value.denominator


def _ndcg(pos: list[int], k: int | None, gains: list[Fraction] | None = None) -> float:
    """nDCG from 50-digit decimal logarithms, rounded once (the definitions ask for the
    float64 nearest to the exact value); ``gains``: each position's gain (binary: all 1)."""
    g = [Fraction(1)] * len(pos) if gains is None else gains
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        log2 = decimal.Decimal(2).ln()

        def gain_at(rank: int) -> decimal.Decimal:
            return 1 / ((rank + 1) * decimal.Decimal(1)).ln() * log2

        depth = len(pos) if k is None else min(k, len(pos))
        dcg = decimal.Decimal(0)
        for p, gp in zip(pos, g, strict=True):
            if k is None or p <= k:
                dcg += _dec(gp) * gain_at(p)
        ideal = decimal.Decimal(0)
        for rank, gp in zip(range(1, depth + 1), sorted(g, reverse=True), strict=False):
            ideal += _dec(gp) * gain_at(rank)
        return float(dcg / ideal)


def _averaged_ndcg(scores: list[int], gain: dict[int, Fraction], k: int | None) -> float:
    """Tie-averaged nDCG of one query from its exact scores (``gain``: item -> gain > 0)."""
    by_score: dict[int, list[Fraction]] = {}
    for j, s in enumerate(scores):
        by_score.setdefault(s, []).append(gain.get(j, Fraction(0)))
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        log2 = decimal.Decimal(2).ln()
        dcg, rank = decimal.Decimal(0), 0
        for s in sorted(by_score, reverse=True):
            group = by_score[s]
            mean = sum(group, Fraction(0)) / len(group)
            for _ in group:
                rank += 1
                if k is None or rank <= k:
                    dcg += (
                        mean.numerator
                        * log2
                        / ((rank + 1) * decimal.Decimal(1)).ln()
                        / mean.denominator
                    )
        best = sorted(gain.values(), reverse=True)[:k]
        ideal = sum(
            (_dec(g) * log2 / decimal.Decimal(r + 1).ln() for r, g in enumerate(best, start=1)),
            decimal.Decimal(0),
        )
        return float(dcg / ideal)


def _query_metrics(
    pos: list[int], names: tuple[str, ...], gains: list[Fraction] | None = None
) -> dict[str, Fraction | float]:
    n_rel = len(pos)
    first = pos[0]
    out: dict[str, Fraction | float] = {}
    for name in names:
        family, _, cut = name.partition("@")
        k = int(cut) if cut else None
        within = [p for p in pos if k is None or p <= k]
        if family == "r":
            out[name] = Fraction(1 if first <= (k or 0) else 0)
        elif family == "recall":
            out[name] = Fraction(len(within), n_rel)
        elif family == "precision":
            out[name] = Fraction(len(within), k or 1)
        elif family == "map":
            out[name] = (
                sum((Fraction(i + 1, p) for i, p in enumerate(pos) if p in within), Fraction(0))
                / n_rel
            )
        elif family == "mrr":
            out[name] = Fraction(1, first) if k is None or first <= k else Fraction(0)
        elif family == "ndcg":
            out[name] = _ndcg(pos, k, gains)
        elif family == "r_precision":
            out[name] = Fraction(sum(1 for p in pos if p <= n_rel), n_rel)
        elif family == "mean_rank":
            out[name] = Fraction(first)
    return out


def _direction(
    query_vecs: list[list[int]],
    item_vecs: list[list[int]],
    relevant: list[dict[int, Fraction]],
    tie_policy: str,
    names: tuple[str, ...],
    empty_queries: str | None,
    graded: bool,
) -> dict[str, float]:
    """A query without a relevant item is refused (no policy), left out (``skip``), or every
    measure's value for it is 0 (``zero``) but the rank measures', which have none."""
    items = np.array(item_vecs, dtype=object)
    per_query: list[dict[str, Fraction | float]] = []
    firsts = []
    zeros = 0
    for q, vec in enumerate(query_vecs):
        if not relevant[q]:
            if empty_queries is None:
                raise ValueError(f"query {q} has no relevant item and no policy was given")
            zeros += empty_queries == "zero"
            continue
        scores = [int(s) for s in items.dot(np.array(vec, dtype=object))]
        if tie_policy == "average":
            per_query.append(
                {n: _averaged_ndcg(scores, relevant[q], _cut(n)) for n in names if _is_ndcg_name(n)}
            )
            continue
        ordered = _ordered(scores, relevant[q], tie_policy)
        pos = [p for p, _ in ordered]
        per_query.append(_query_metrics(pos, names, [g for _, g in ordered] if graded else None))
        firsts.append(pos[0])
    if not per_query:
        raise ValueError("no query has a relevant item")
    if tie_policy == "average":
        return {
            n: math.fsum(float(m[n]) for m in per_query) / (len(per_query) + zeros)
            for n in per_query[0]
        }
    result = {}
    for name in per_query[0]:
        # The zero-valued queries add nothing to the sum; the rank measure has no value there.
        n = len(per_query) + (0 if name == "mean_rank" else zeros)
        result[name] = math.fsum(float(m[name]) for m in per_query) / n
    result["median_rank"] = float(statistics.median(firsts))
    return {name: result[name] for name in names}


def reference_retrieval_metrics(
    audio_embeds: Any,
    text_embeds: Any,
    text_to_audio: Any = None,
    *,
    relevance_indptr: Any = None,
    relevance_indices: Any = None,
    relevance_gains: Any = None,
    tie_policy: str = "pessimistic",
    cutoffs: Any = None,
    empty_queries: str | None = None,
) -> dict[str, dict[str, float]]:
    """All canonical retrieval metrics for both directions, computed naively and exactly.

    The relevance is ``text_to_audio`` (caption ``i`` describes clip ``text_to_audio[i]``) or,
    instead, a CSR over clips: the texts relevant to clip ``j`` are
    ``relevance_indices[relevance_indptr[j]:relevance_indptr[j+1]]``. Either becomes the set of
    relevant (clip, text) pairs, and each query's relevant set is read off it.

    >>> a = [[1.0, 0.0], [0.0, 1.0]]
    >>> t = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    >>> m = reference_retrieval_metrics(a, t, [0, 1, 1])  # caption 1 ties for clip 0
    >>> m["t2a"]["r@1"], m["a2t"]["map"]  # a2t AP: clip 0 1/2, clip 1 (1/1 + 2/3)/2
    (0.6666666666666666, 0.6666666666666667)
    >>> reference_retrieval_metrics(a, t, [0, 1, 1], tie_policy="optimistic")["a2t"]["map"]
    1.0

    Text 1 relevant to both clips (t2a AP of text 1: clip 0 at 1, clip 1 at 2: 1):

    >>> m = reference_retrieval_metrics(a, t, relevance_indptr=[0, 2, 4],
    ...                                 relevance_indices=[0, 1, 1, 2])
    >>> m["t2a"]["map"], m["t2a"]["mean_rank"]
    (1.0, 1.0)

    With ``cutoffs`` (definitions 1.1), every cutoff measure at each cutoff, and nDCG and
    R-precision (a2t, pessimistic: clip 0's caption at position 2, clip 1's at 1 and 3):

    >>> m = reference_retrieval_metrics(a, t, [0, 1, 1], cutoffs=[1, 2])
    >>> m["a2t"]["precision@2"], m["a2t"]["ndcg@1"], m["a2t"]["r_precision"], m["a2t"]["mrr@1"]
    (0.5, 0.5, 0.25, 0.5)

    A query without a relevant item needs ``empty_queries``: ``skip`` leaves it out of every
    mean, ``zero`` counts it as 0 in every mean but ``mean_rank``'s and ``median_rank``'s
    (clip 1 has no text here; clip 0 finds its text first):

    >>> m = reference_retrieval_metrics(a, t[:1], [0], empty_queries="zero")
    >>> m["a2t"]["r@1"], m["a2t"]["mean_rank"]
    (0.5, 1.0)
    >>> reference_retrieval_metrics(a, t[:1], [0], empty_queries="skip")["a2t"]["r@1"]
    1.0

    ``tie_policy="average"`` (with ``cutoffs``): the tie-averaged nDCG measures only (clip 0's
    caption ties caption 1 at ranks 1-2: mean gain 1/2 at each):

    >>> reference_retrieval_metrics(a, t, [0, 1, 1], cutoffs=[1], tie_policy="average")["a2t"]
    {'ndcg': 0.8876626356799113, 'ndcg@1': 0.75}
    """
    if empty_queries not in (None, "skip", "zero"):
        raise ValueError(f"empty_queries must be None, 'skip' or 'zero', got {empty_queries!r}")
    names = _cutoff_names(None if cutoffs is None else tuple(int(k) for k in cutoffs))
    if tie_policy not in ("pessimistic", "optimistic", "average"):
        raise ValueError(
            f"tie_policy must be 'pessimistic', 'optimistic' or 'average', got {tie_policy!r}"
        )
    csr = relevance_indptr is not None or relevance_indices is not None
    if csr == (text_to_audio is not None):
        raise ValueError("give either text_to_audio or relevance_indptr and relevance_indices")
    audio, text = _to_scaled_ints(audio_embeds, text_embeds)
    pairs: dict[tuple[int, int], Fraction] = {}  # (clip, text) -> gain (integer or float)
    if csr:
        ptr = [int(x) for x in np.asarray(relevance_indptr).tolist()]
        idx = [int(x) for x in np.asarray(relevance_indices).tolist()]
        given = None if relevance_gains is None else np.asarray(relevance_gains).tolist()
        for j in range(len(audio)):
            for e in range(ptr[j], ptr[j + 1]):
                pairs[(j, idx[e])] = Fraction(1 if given is None else given[e])
    else:
        pairs.update(
            ((int(j), i), Fraction(1)) for i, j in enumerate(np.asarray(text_to_audio).tolist())
        )
    captions_of: list[dict[int, Fraction]] = [{} for _ in audio]
    clips_of: list[dict[int, Fraction]] = [{} for _ in text]
    for (j, i), g in pairs.items():
        if g > 0:  # a gain of 0 is judged not relevant
            captions_of[j][i] = g
            clips_of[i][j] = g
    graded = relevance_gains is not None
    return {
        "t2a": _direction(text, audio, clips_of, tie_policy, names, empty_queries, graded),
        "a2t": _direction(audio, text, captions_of, tie_policy, names, empty_queries, graded),
    }

"""trec_eval's measures over TREC runs and qrels, with its conventions, and their tie bounds.

One query is evaluated from its **ranked list**: the judged level of every retrieved document in
rank order (``-1`` for a document the qrels do not judge, which is never relevant and has no
gain), the number ``R`` of its relevant documents (judged level ``>= level``, retrieved or
not: an unretrieved relevant document counts as never found) and the **ideal gains** (every
positive judged level, descending) for nDCG. Binary measures use ``rel >= level``; nDCG uses
the judged level itself as the gain, whatever ``level`` is (trec_eval does the same).

Order (:func:`rank_query`): trec_eval's rule is score descending, then docno descending
(byte order); the run file's ``rank`` column is ignored. ``max_ret`` (trec_eval's ``-M``)
keeps the first documents of that order. Tie bounds replace the docno rule among equal scores
by "higher gain first, then relevant first" (``optimistic``: every measure here is then at its
highest over all orders of the tied documents) or the reverse (``pessimistic``: its lowest);
docno descending still orders what remains tied. The bounds are taken before ``max_ret``, so a
tie that straddles the cut counts at its best and worst.

The ``average`` order keeps trec_eval's order and gives nDCG the **tie-averaged** value
(scikit-learn's ``ndcg_score``, after McSherry and Najork): every retrieved document of a
group of equal scores gets the mean gain of its group, so the value is the mean of nDCG over
every order of the tied documents, between the two bounds. The mean is over the whole group
before ``max_ret``, so a group that straddles the cut counts its mean gain at the kept ranks.
The binary measures read the trec order under it (only nDCG has a tie-averaged value here).

A query whose judgements are all negative has no relevant document and no gain: every measure
is 0 (trec_eval leaves that case undefined: it reuses the previous query's count of levels).

Floating-point sums run in rank order (and in query order for means), as trec_eval's do, so
every value is the same double as trec_eval's (checked against pytrec_eval, which compiles
trec_eval's code). The definitions are written from trec_eval's documentation and its test
outputs; no code is taken from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from audiorepro.core.errors import UserError
from audiorepro.formats.trec import Qrels, Run

Order = Literal["trec", "optimistic", "pessimistic", "average"]
ORDERS: tuple[Order, ...] = ("trec", "optimistic", "pessimistic", "average")
#: trec_eval's default cutoffs.
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
SUCCESS_CUTOFFS = (1, 5, 10)


@dataclass(frozen=True)
class Ranked:
    """One query's ranked list: levels in rank order, ``R`` and the ideal gains; under the
    ``average`` order also each rank's tie-averaged gain (the mean gain of its tie group)."""

    rels: tuple[int, ...]
    num_rel: int
    ideal: tuple[int, ...]
    level: int = 1
    averaged: tuple[float, ...] | None = None


def rank_query(
    scores: dict[str, float],
    judged: dict[str, int],
    *,
    level: int = 1,
    max_ret: int | None = None,
    order: Order = "trec",
) -> Ranked:
    """The ranked list of one query (see the module docstring for the order and tie bounds).

    >>> judged = {"a": 1, "b": 0, "c": 2}
    >>> rank_query({"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}, judged).rels
    (-1, 0, 1, 2)
    >>> rank_query({"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}, judged, order="optimistic").rels
    (1, -1, 0, 2)
    >>> rank_query({"a": 1.0, "b": 1.0}, judged, max_ret=1, order="pessimistic")
    Ranked(rels=(0,), num_rel=2, ideal=(2, 1), level=1, averaged=None)
    >>> rank_query({"a": 1.0, "b": 1.0, "c": 0.5}, judged, max_ret=1, order="average").averaged
    (0.5,)
    """
    levels = {d: judged.get(d, -1) for d in scores}
    docs = sorted(scores, reverse=True)  # docno descending: the last tie-break
    if order in ("optimistic", "pessimistic"):
        sign = -1 if order == "optimistic" else 1
        docs.sort(key=lambda d: (sign * max(levels[d], 0), sign * (levels[d] >= level)))
    docs.sort(key=lambda d: -scores[d])  # stable: ties keep the order above
    averaged = _tie_averaged_gains(docs, scores, levels) if order == "average" else None
    if max_ret is not None:
        docs = docs[:max_ret]
    judged_levels = [v for v in judged.values() if v >= 0]
    return Ranked(
        rels=tuple(levels[d] if levels[d] >= 0 else -1 for d in docs),
        num_rel=sum(v >= level for v in judged_levels),
        ideal=tuple(sorted((v for v in judged_levels if v > 0), reverse=True)),
        level=level,
        averaged=None if averaged is None else tuple(averaged[: len(docs)]),
    )


def _tie_averaged_gains(
    docs: list[str], scores: dict[str, float], levels: dict[str, int]
) -> list[float]:
    """Each ranked document's mean gain over its group of equal scores (in rank order)."""
    out: list[float] = []
    start = 0
    while start < len(docs):
        stop = start
        while stop < len(docs) and scores[docs[stop]] == scores[docs[start]]:
            stop += 1
        total = sum(max(levels[d], 0) for d in docs[start:stop])
        out += [total / (stop - start)] * (stop - start)
        start = stop
    return out


def _relevant(q: Ranked) -> list[bool]:
    return [r >= q.level for r in q.rels]


def num_rel_ret(q: Ranked) -> int:
    """Relevant documents retrieved: ``|{i : rel_i >= level}|``. Ties matter only through
    ``max_ret`` (which tied documents make the cut).

    >>> num_rel_ret(Ranked((1, -1, 0, 2), num_rel=3, ideal=(2, 1, 1)))
    2
    """
    return sum(_relevant(q))


def average_precision(q: Ranked) -> float:
    """``map``: ``sum_{i relevant} P@i / R``, 0 when ``R = 0``; unretrieved relevant documents
    add 0. Tie policy: the order of :func:`rank_query` (docno, or a bound).

    >>> average_precision(Ranked((1, 0, 1), num_rel=3, ideal=(1, 1, 1)))  # (1 + 2/3) / 3
    0.5555555555555555
    """
    total, found = 0.0, 0
    for i, rel in enumerate(_relevant(q)):
        if rel:
            found += 1
            total += found / (i + 1)
    return total / q.num_rel if found else 0.0


def average_precision_at(q: Ranked, k: int) -> float:
    """``map_cut_k``: ``sum_{i <= k relevant} P@i / R`` (divided by all of ``R``, not
    ``min(k, R)``), 0 when ``R = 0``. Tie policy: as :func:`average_precision`.

    >>> average_precision_at(Ranked((0, 1, 1), num_rel=2, ideal=(1, 1)), 2)  # (1/2) / 2
    0.25
    """
    return average_precision(Ranked(q.rels[:k], q.num_rel, q.ideal, q.level))


def r_precision(q: Ranked) -> float:
    """``Rprec``: relevant documents among the first ``R`` retrieved, over ``R``; 0 when
    ``R = 0`` or nothing is retrieved. Tie policy: as :func:`average_precision`.

    >>> r_precision(Ranked((1, 0, 1), num_rel=2, ideal=(1, 1)))
    0.5
    """
    if min(q.num_rel, len(q.rels)) == 0:
        return 0.0
    return sum(_relevant(q)[: q.num_rel]) / q.num_rel


def reciprocal_rank(q: Ranked) -> float:
    """``recip_rank``: ``1 / i`` for the first relevant rank ``i``, 0 if none is retrieved.
    Tie policy: as :func:`average_precision`.

    >>> reciprocal_rank(Ranked((0, -1, 3), num_rel=1, ideal=(3,)))
    0.3333333333333333
    """
    for i, rel in enumerate(_relevant(q)):
        if rel:
            return 1.0 / (i + 1)
    return 0.0


def precision_at(q: Ranked, k: int) -> float:
    """``P_k``: relevant documents among the first ``k`` over ``k`` (over ``k`` even when fewer
    are retrieved). Tie policy: as :func:`average_precision`.

    >>> precision_at(Ranked((1, 0), num_rel=4, ideal=(1, 1, 1, 1)), 5)
    0.2
    """
    return sum(_relevant(q)[:k]) / k


def recall_at(q: Ranked, k: int) -> float:
    """``recall_k``: relevant documents among the first ``k`` over ``R``; 0 when ``R = 0``.
    Tie policy: as :func:`average_precision`.

    >>> recall_at(Ranked((1, 0, 1), num_rel=4, ideal=(1, 1, 1, 1)), 2)
    0.25
    """
    return sum(_relevant(q)[:k]) / q.num_rel if q.num_rel else 0.0


def success_at(q: Ranked, k: int) -> float:
    """``success_k``: 1 if a relevant document is among the first ``k``, else 0. Tie policy:
    as :func:`average_precision`.

    >>> success_at(Ranked((0, 2), num_rel=1, ideal=(2,)), 1), success_at(Ranked((0, 2), 1, (2,)), 2)
    (0.0, 1.0)
    """
    return 1.0 if any(_relevant(q)[:k]) else 0.0


def _dcg(gains: Sequence[float]) -> float:
    total = 0.0
    for i, gain in enumerate(gains):
        if gain > 0:
            total += gain / math.log2(i + 2)
    return total


def ndcg(q: Ranked) -> float:
    """``ndcg``: ``DCG / IDCG`` with ``DCG = sum_i g_i / log2(i + 1)`` over every retrieved rank
    ``i`` (gain ``g_i`` = the judged level when positive, else 0) and ``IDCG`` the same sum over
    the ideal gains (all positive judged levels, descending, retrieved or not); 0 when
    ``IDCG = 0``. Tie policy: as :func:`average_precision`; the optimistic bound puts higher
    gains first among equal scores. Under the ``average`` order (:attr:`Ranked.averaged`)
    ``g_i`` is the mean gain of rank ``i``'s tie group: ``DCG = sum_groups mean(g) *
    sum_{i in group} 1 / log2(i + 1)``, the mean over every order of the ties.

    >>> # (1/log2(4) + 2/log2(5)) / (2/log2(2) + 1/log2(3))
    >>> round(ndcg(Ranked((-1, 0, 1, 2), num_rel=2, ideal=(2, 1), level=1)), 4)
    0.5174
    >>> # a gain 1 tied with a gain 0 at ranks 1-2: (1/2) * (1 + 1/log2(3)) / 1
    >>> round(ndcg(Ranked((0, 1), num_rel=1, ideal=(1,), averaged=(0.5, 0.5))), 4)
    0.8155
    """
    ideal = _dcg(q.ideal)
    gains = q.rels if q.averaged is None else q.averaged
    return _dcg(gains) / ideal if ideal > 0 else 0.0


def ndcg_at(q: Ranked, k: int) -> float:
    """``ndcg_cut_k``: :func:`ndcg` with both sums cut after rank ``k``. Tie policy: as
    :func:`ndcg` (the ``average`` order: tie-averaged gains, a group cut at ``k`` keeping its
    mean gain at the ranks within).

    >>> ndcg_at(Ranked((0, 2, 1), num_rel=2, ideal=(2, 1)), 1), ndcg_at(Ranked((2,), 1, (2,)), 3)
    (0.0, 1.0)
    >>> ndcg_at(Ranked((0, 2), num_rel=1, ideal=(2,), averaged=(1.0, 1.0)), 1)
    0.5
    """
    ideal = _dcg(q.ideal[:k])
    gains = q.rels if q.averaged is None else q.averaged
    return _dcg(gains[:k]) / ideal if ideal > 0 else 0.0


QueryValue = Callable[[Ranked], float]
CutValue = Callable[[Ranked, int], float]


@dataclass(frozen=True)
class TrecMeasure:
    """A trec_eval measure: its name, default cutoffs (``()``: it takes none), whether its
    value is a count (printed as an integer, summed in ``all``) and how one query is valued."""

    name: str
    value: QueryValue | CutValue | None
    cutoffs: tuple[int, ...] = ()
    count: bool = False


#: The supported measures in trec_eval's printing order (``runid`` and ``num_q`` are printed
#: only for ``all``; their values come from the run and the number of queries).
MEASURES: tuple[TrecMeasure, ...] = (
    TrecMeasure("runid", None),
    TrecMeasure("num_q", None, count=True),
    TrecMeasure("num_ret", lambda q: len(q.rels), count=True),
    TrecMeasure("num_rel", lambda q: q.num_rel, count=True),
    TrecMeasure("num_rel_ret", num_rel_ret, count=True),
    TrecMeasure("map", average_precision),
    TrecMeasure("Rprec", r_precision),
    TrecMeasure("recip_rank", reciprocal_rank),
    TrecMeasure("P", precision_at, CUTOFFS),
    TrecMeasure("recall", recall_at, CUTOFFS),
    TrecMeasure("ndcg", ndcg),
    TrecMeasure("ndcg_cut", ndcg_at, CUTOFFS),
    TrecMeasure("map_cut", average_precision_at, CUTOFFS),
    TrecMeasure("success", success_at, SUCCESS_CUTOFFS),
)
BY_NAME = {m.name: m for m in MEASURES}
#: trec_eval's default set (``-m official``), as far as it is supported here.
OFFICIAL = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec",
            "recip_rank", "P")  # fmt: skip


def parse_measures(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``-m`` values to measures and cutoffs: ``NAME``, ``NAME.k1,k2`` (positive integer
    cutoffs; repeated names join their cutoffs), ``official`` or ``all_trec`` (every supported
    measure). No value means ``official``.

    >>> parse_measures(["map", "P.10,5", "P.5"])
    {'map': (), 'P': (5, 10)}
    >>> parse_measures([])["P"]
    (5, 10, 15, 20, 30, 100, 200, 500, 1000)
    """
    chosen: dict[str, set[int]] = {}
    for spec in specs or ["official"]:
        name, dot, params = spec.partition(".")
        if dot and name in ("official", "all_trec"):
            raise UserError(
                f"{spec!r}: the measure set {name!r} takes no cutoffs; expected {name}, or "
                "cutoffs on one measure (e.g. P.5,10)",
                key="-m",
            )
        names = {"official": OFFICIAL, "all_trec": tuple(BY_NAME)}.get(name, (name,))
        for one in names:
            _add_measure(chosen, one, params if dot else None, spec)
    return {m.name: tuple(sorted(chosen[m.name])) for m in MEASURES if m.name in chosen}


def _add_measure(chosen: dict[str, set[int]], name: str, params: str | None, spec: str) -> None:
    measure = BY_NAME.get(name)
    if measure is None:
        raise UserError(
            f"unknown measure {spec!r}; expected one of official, all_trec, " + ", ".join(BY_NAME),
            key="-m",
        )
    if params is None:
        chosen.setdefault(name, set()).update(measure.cutoffs)
        return
    if not measure.cutoffs or name != spec.partition(".")[0]:
        raise UserError(f"measure {spec!r} takes no cutoffs; expected {name}", key="-m")
    for text in params.split(","):
        if not (text.isascii() and text.isdigit() and int(text) >= 1):
            raise UserError(
                f"cutoff {text!r} of {spec!r} is not an integer >= 1; expected e.g. {name}.5,10",
                key="-m",
            )
        chosen.setdefault(name, set()).add(int(text))


@dataclass
class Evaluation:
    """Values per query (sorted by qid) and for ``all``, keyed by the printed measure name."""

    run_id: str
    queries: dict[str, dict[str, float]] = field(default_factory=dict)
    all: dict[str, float] = field(default_factory=dict)
    counts: frozenset[str] = frozenset()


def _query_values(q: Ranked, measures: dict[str, tuple[int, ...]]) -> dict[str, float]:
    values: dict[str, float] = {}
    for name, cutoffs in measures.items():
        value = BY_NAME[name].value
        if value is None:
            continue
        if cutoffs:
            for k in cutoffs:
                values[f"{name}_{k}"] = value(q, k)  # type: ignore[call-arg]
        else:
            values[name] = value(q)  # type: ignore[call-arg]
    return values


def evaluate(
    qrels: Qrels,
    run: Run,
    *,
    measures: dict[str, tuple[int, ...]],
    level: int = 1,
    max_ret: int | None = None,
    complete: bool = False,
    order: Order = "trec",
) -> Evaluation:
    """trec_eval's evaluation: every query of the qrels that the run retrieved for (with
    ``complete``, trec_eval's ``-c``, every query of the qrels, an absent one as an empty
    ranking), in qid order; queries of the run without judgements are ignored. ``all`` is the
    sum of a count and the mean of any other measure over those queries.

    >>> qrels = Qrels({"1": {"a": 1, "b": 0}, "2": {"c": 1}})
    >>> run = Run("r", {"1": {"a": 0.1, "b": 0.9}, "3": {"x": 1.0}})
    >>> evaluate(qrels, run, measures={"num_q": (), "map": ()}).all
    {'map': 0.5, 'num_q': 1}
    >>> evaluate(qrels, run, measures={"num_q": (), "map": ()}, complete=True).all
    {'map': 0.25, 'num_q': 2}
    """
    qids = sorted(q for q in qrels.judged if complete or q in run.scores)
    if not qids:
        raise UserError(
            "no query of the run has judgements in the qrels; expected files of the same "
            "queries (or -c to average over the qrels' queries)"
        )
    result = Evaluation(run.run_id, counts=frozenset(m.name for m in MEASURES if m.count))
    for qid in qids:
        ranked = rank_query(
            run.scores.get(qid, {}), qrels.judged[qid], level=level, max_ret=max_ret, order=order
        )
        result.queries[qid] = _query_values(ranked, measures)
    names = list(result.queries[qids[0]])
    for name in names:
        total: float = 0 if name in result.counts else 0.0
        for qid in qids:
            total += result.queries[qid][name]
        result.all[name] = total if name in result.counts else total / len(qids)
    if "num_q" in measures:
        result.all["num_q"] = len(qids)
    return result

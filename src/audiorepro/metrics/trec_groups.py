"""trec_eval's judgement-group measures (``-R qrels_jg``): ``map_avgjg``, ``P_avgjg`` and
``Rprec_mult_avgjg``.

Under ``-R qrels_jg`` the second qrels column names a judgement group (one user's
judgements): each group of a query is a qrels of its own. A ``*_avgjg`` measure is the qrels
measure without the suffix (:mod:`audiorepro.metrics.trec`: ``map``, ``P`` at its cutoffs,
``Rprec_mult`` at its multiples of R), computed against each group of the query, the run
ranked as for qrels (score descending, then docno descending; ``-M``, ``-J`` and ``-l`` as
there), summed over the query's groups in group (byte) order and divided by their number
when there are several. ``all`` is the mean over the queries. The other qrels measures do
not read judgement groups (trec_eval stops on them: "Can't calculate measure"); here they are
refused before anything is read (:func:`audiorepro.metrics.trec.check_judgements`).
Tie bounds are not defined for these measures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.formats.trec import Qrels, TrecTable
from audiorepro.metrics.trec import Chosen, Evaluation, evaluate, to_zscores
from audiorepro.metrics.trec_measures import GROUP_FAMILIES as GROUP_FAMILIES
from audiorepro.metrics.trec_measures import group_plan, group_queries

Array = npt.NDArray[Any]


def evaluate_groups(
    groups: dict[str, dict[str, dict[str, int]]],
    run: TrecTable,
    *,
    measures: dict[str, Chosen],
    level: int = 1,
    max_ret: int | None = None,
    complete: bool = False,
    judged_only: bool = False,
    only_query: str | None = None,
    zscores: dict[tuple[str, str], tuple[float, float]] | None = None,
) -> Evaluation:
    """The ``*_avgjg`` values of every query of ``groups`` (``{qid: {jg: {docno:
    level}}}``) the run retrieved for (``complete``: every one), in qid order.

    map_avgjg: per group, sum over relevant ranks i of (relevant in 1..i)/i over the group's
    R; P_avgjg_k: relevant in the first k over k; Rprec_mult_avgjg_x: precision at
    int(x R + 0.9) documents; each summed over the query's groups, over their number.

    >>> from audiorepro.formats.trec import table_from_dicts
    >>> from audiorepro.metrics.trec import parse_measures
    >>> groups = {"1": {"u": {"a": 1, "b": 0}, "v": {"b": 1}}}
    >>> run = table_from_dicts({"1": {"a": 2.0, "b": 1.0}}, "r")
    >>> ev = evaluate_groups(groups, run, measures=parse_measures(["map_avgjg", "P_avgjg.1"]))
    >>> ev.queries["1"]  # u: map 1, P_1 1; v: map 1/2, P_1 0
    {'map_avgjg': 0.75, 'P_avgjg_1': 0.5}
    """
    qids = group_queries(list(groups), run.qids, complete, only_query)
    names, owners, plain = group_plan(measures)
    values = _group_means(groups, run, qids, plain, names, level, max_ret, complete, judged_only)
    if zscores is not None:
        to_zscores(values, qids, names, zscores)
    summary = []
    for j, owner in enumerate(owners):
        total = float(np.cumsum(values[:, j])[-1])
        summary.append(float(len(qids)) if owner == "num_q" else total / len(qids))
    return Evaluation(run.tag, qids, names, owners, values, summary, counts=frozenset({"num_q"}))


def _group_means(
    groups: dict[str, dict[str, dict[str, int]]],
    run: TrecTable,
    qids: list[str],
    plain: dict[str, Chosen],
    names: list[str],
    level: int,
    max_ret: int | None,
    complete: bool,
    judged_only: bool,
) -> Array:
    """Per query, the qrels measures of each group summed in group order, over the number
    of groups when more than one."""
    row = {q: i for i, q in enumerate(qids)}
    values = np.zeros((len(qids), len(names)))
    seen = np.zeros(len(qids), np.int64)
    every = sorted({g for q in qids for g in groups[q]}, key=lambda g: g.encode("utf-8"))
    for g in every:
        judged = {q: groups[q][g] for q in qids if g in groups[q]}
        if not plain:
            continue
        ev = evaluate(Qrels(judged), run, measures=plain, level=level, max_ret=max_ret,
                      complete=complete, judged_only=judged_only)  # fmt: skip
        columns = [names.index(n) for n in ev.names]
        for i, q in enumerate(ev.qids):
            values[row[q], columns] += ev.values[i]
            seen[row[q]] += 1
    several = seen > 1
    values[several] /= seen[several, None]
    return values

"""trec_eval's measures over TREC runs and qrels, with its conventions, and their tie bounds.

One query is evaluated from its **ranked list**: the judged level of every retrieved document
in rank order (``-1``: not in the qrels, "not in the pool"; ``-2``: in the qrels with a
negative level, "in the pool, unjudged"), the judged counts per level ``>= 0`` (retrieved or
not) and ``R``, the number judged at ``>= level`` (``-l``). Binary measures count a rank as
relevant when its level ``>= level``; gain measures use the level as the gain unless ``-m
NAME.level=gain,...`` gives others (trec_eval's ``setup_gains``). Every measure family of
trec_eval 10 that reads qrels and a TREC run is here: :data:`MEASURES` gives each one's
formula (``doc``) in trec_eval's printing order; the kernels are in
:mod:`audiorepro.metrics.trec_kernels`.

Order: score descending, then docno descending (byte order); the run's ``rank`` column is
ignored. ``max_ret`` (``-M``) keeps the first documents of that order, then ``judged_only``
(``-J``) drops the documents not judged (level < 0). **Tie bounds** replace the docno rule
among equal scores by "higher gain first, then relevant first" (``optimistic``) or the reverse
(``pessimistic``); docno descending still orders what remains tied; both are taken before
``max_ret``. For every measure that grows when a relevant or higher-gain document moves up
(the precision, recall, AP, reciprocal-rank, interpolated-precision, bpref, success, nDCG,
ndcg_rel, Rndcg, binG and rbp families) the two orders give its lowest and highest value over
every order of the ties (checked against every permutation on generated queries). ``G``,
``unj``, ``rbp_resid``, ``infAP``, ``num_nonrel_judged_ret`` (through ``-M``) and
``relstring`` do not: their bound columns are their values under the two orders, not bounds.
Set measures and counts ignore order (but for
which tied documents ``-M`` keeps). The ``average`` order gives nDCG (``ndcg``,
``ndcg_cut``) the tie-averaged value: each rank holds the mean level of its group of equal
scores (the mean of nDCG over every order of the ties, McSherry and Najork).

Queries: every qrels query the run retrieves for (``complete``, ``-c``: every qrels query, one
the run lacks evaluated as trec_eval does, with one unjudged stand-in document, then
``num_ret``, ``utility``, ``unj``, ``rbp_resid`` and ``relstring`` cleared). Differences from
trec_eval 10, kept on purpose: a qrels query the run does not retrieve for is skipped without
``-c`` (trec_eval 10 exits with "result qid not found in qrels"); a query whose judgements are
all negative has no levels (trec_eval reuses the previous query's count of levels); gains
tied after C's truncation of their difference are sorted stably.

Floating-point sums run in rank order (and in query order for means), as trec_eval's do, so
every value is the same double as trec_eval's. The definitions are written from trec_eval's
documentation and sources read as a specification; no code is taken from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.formats.c_numbers import c_atof as c_atof
from audiorepro.formats.c_numbers import c_atol as c_atol
from audiorepro.formats.trec import Qrels, Run, TrecTable, table_from_dicts
from audiorepro.metrics import trec_kernels as tk

# The measure table, -m parsing and the evaluation record live in a module without numpy (the
# numpy-free trec-eval path reads them too); their names stay importable from here.
from audiorepro.metrics.trec_measures import ALL_PREFS as ALL_PREFS
from audiorepro.metrics.trec_measures import BY_NAME as BY_NAME
from audiorepro.metrics.trec_measures import CUTOFFS as CUTOFFS
from audiorepro.metrics.trec_measures import FORMATS as FORMATS
from audiorepro.metrics.trec_measures import MEASURES as MEASURES
from audiorepro.metrics.trec_measures import NICKNAMES as NICKNAMES
from audiorepro.metrics.trec_measures import OFFICIAL as OFFICIAL
from audiorepro.metrics.trec_measures import ORDER_CODE as ORDER_CODE
from audiorepro.metrics.trec_measures import ORDERS as ORDERS
from audiorepro.metrics.trec_measures import PREFS as PREFS
from audiorepro.metrics.trec_measures import R_MULTIPLES as R_MULTIPLES
from audiorepro.metrics.trec_measures import RECALL_POINTS as RECALL_POINTS
from audiorepro.metrics.trec_measures import SUCCESS_CUTOFFS as SUCCESS_CUTOFFS
from audiorepro.metrics.trec_measures import Chosen as Chosen
from audiorepro.metrics.trec_measures import Evaluation as Evaluation
from audiorepro.metrics.trec_measures import Order as Order
from audiorepro.metrics.trec_measures import Params as Params
from audiorepro.metrics.trec_measures import TrecMeasure as TrecMeasure
from audiorepro.metrics.trec_measures import _num, pairing, plan_of, summary_of
from audiorepro.metrics.trec_measures import check_judgements as check_judgements
from audiorepro.metrics.trec_measures import parse_measures as parse_measures

Array = npt.NDArray[Any]


def _plan(
    chosen: dict[str, Chosen],
) -> tuple[Array, Array, Array, list[str], list[str]]:
    plan = plan_of(chosen)
    return (
        np.array(plan.rows, np.int64).reshape(-1, 4),
        np.array(plan.params, np.float64),
        np.array(plan.pairs, np.float64).reshape(-1, 3),
        plan.names,
        plan.owners,
    )


def _table(data: Qrels | Run | TrecTable) -> TrecTable:
    if isinstance(data, Qrels):
        return table_from_dicts(data.judged)
    if isinstance(data, Run):
        return table_from_dicts(data.scores, data.run_id)
    return data


def _pairing(
    qrels: TrecTable, run: TrecTable, complete: bool, only: str | None
) -> tuple[Array, Array, list[str]]:
    run_of, qrels_of, qids = pairing(qrels.qids, run.qids, complete, only)
    return np.array(run_of, np.int64), np.array(qrels_of, np.int64), qids


def evaluate(
    qrels: Qrels | TrecTable,
    run: Run | TrecTable,
    *,
    measures: dict[str, Chosen],
    level: int = 1,
    max_ret: int | None = None,
    complete: bool = False,
    order: Order = "trec",
    judged_only: bool = False,
    num_docs: int = 0,
    only_query: str | None = None,
    zscores: dict[tuple[str, str], tuple[float, float]] | None = None,
) -> Evaluation:
    """trec_eval's evaluation: every query of the qrels that the run retrieved for (with
    ``complete``, every query of the qrels), in qid (byte) order; queries of the run without
    judgements are ignored. ``all`` is the sum of a count, the geometric mean of ``gm_*`` and
    the mean of any other value over those queries (``zscores``: trec_eval's ``-Z``, each
    query's value replaced by ``(value - mean) / sd`` before).

    >>> qrels = Qrels({"1": {"a": 1, "b": 0}, "2": {"c": 1}})
    >>> run = Run("r", {"1": {"a": 0.1, "b": 0.9}, "3": {"x": 1.0}})
    >>> evaluate(qrels, run, measures=parse_measures(["num_q", "map"])).all
    {'num_q': 1, 'map': 0.5}
    >>> evaluate(qrels, run, measures=parse_measures(["num_q", "map"]), complete=True).all
    {'num_q': 2, 'map': 0.25}
    """
    qt, rt = _table(qrels), _table(run)
    run_of, qrels_of, qids = _pairing(qt, rt, complete, only_query)
    plan, params, pairs, names, owners = _plan(measures)
    relmax = int(measures["relstring"].values[0]) if "relstring" in measures else 0
    values, relstr, rel_len = tk.evaluate_queries(
        rt.data,
        rt.doc_start,
        rt.doc_len,
        rt.value,
        rt.order,
        rt.start,
        rt.stop,
        qt.data,
        qt.doc_start,
        qt.doc_len,
        qt.value,
        qt.order,
        qt.start,
        qt.stop,
        run_of,
        qrels_of,
        level,
        -1 if max_ret is None else max_ret,
        judged_only,
        ORDER_CODE[order],
        plan,
        params,
        pairs,
        num_docs,
        len(names),
        max(relmax, 0),
    )
    counts = frozenset(m.name for m in MEASURES if m.count)
    if zscores is not None:
        to_zscores(values, qids, names, zscores)
    summary = _summary(values, owners, qt if complete else None)
    relstrings = [bytes(relstr[i, : rel_len[i]]).decode("ascii") for i in range(len(qids))]
    return Evaluation(rt.tag, qids, names, owners, values, summary, relstrings, counts)


MISSING_ZSCORE = -1000000.0


def to_zscores(
    values: Array,
    qids: list[str],
    names: list[str],
    table: dict[tuple[str, str], tuple[float, float]],
) -> None:
    """trec_eval's ``-Z``, in place: each value ``(value - mean) / sd`` from ``table``
    (``-1000000`` where the table has no line for it, or ``sd`` is 0 and the value differs)."""
    known = {q for q, _ in table}
    for i, q in enumerate(qids):
        for j, name in enumerate(names):
            stat = table.get((q, name)) if q in known else None
            if stat is None:
                values[i, j] = MISSING_ZSCORE
            elif stat[1]:
                values[i, j] = (values[i, j] - stat[0]) / stat[1]
            else:
                values[i, j] = 0.0 if values[i, j] == stat[0] else MISSING_ZSCORE


def _summary(values: Array, owners: list[str], complete: TrecTable | None) -> list[float]:
    n = values.shape[0]
    relevant = None if complete is None else int(np.count_nonzero(complete.value > 0))
    # cumsum adds in query order, one value after the other, as trec_eval does
    return summary_of(n, owners, lambda j: float(np.cumsum(values[:, j])[-1]), relevant)


def rank_query(
    scores: dict[str, float],
    judged: dict[str, int],
    *,
    level: int = 1,
    max_ret: int | None = None,
    order: Order = "trec",
) -> tuple[int, ...]:
    """One query's levels in rank order (``-1``: not judged, ``-2``: judged negative), as
    :func:`evaluate` ranks them (see the module docstring for the order and tie bounds).

    >>> judged = {"a": 1, "b": 0, "c": 2}
    >>> rank_query({"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}, judged)
    (-1, 0, 1, 2)
    >>> rank_query({"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}, judged, order="optimistic")
    (1, -1, 0, 2)
    """
    run, qrels = table_from_dicts({"q": scores}), table_from_dicts({"q": judged})
    qrel = qrels.value.astype(np.int64)
    rels, _ = tk.rank_levels(
        run.data,
        run.doc_start,
        run.doc_len,
        run.value,
        run.order,
        qrels.data,
        qrels.doc_start,
        qrels.doc_len,
        qrel,
        qrels.order,
        level,
        ORDER_CODE[order],
    )
    return tuple(int(r) for r in rels[:max_ret])


def one_query(
    spec: str, rels: Sequence[int], judged: Sequence[int], *, level: int = 1, num_docs: int = 0
) -> dict[str, float | str]:
    """The values of one ``-m`` spec for one query given as its ranked levels ``rels`` (-1:
    not judged, -2: judged negative) and every judged level ``judged`` of the query (retrieved
    or not): each family's worked example. Ranks: 1 relevant (level 2), 2 not relevant, 3 not
    judged, 4 relevant (level 1); judged: those three plus an unretrieved level 3, so R = 3.

    >>> one_query("map", [2, 0, -1, 1], [2, 0, 1, 3])  # (1/1 + 2/4) / 3
    {'map': 0.5}

    Each family's own example is in its docstring, :func:`family_docstring` (run as doctests
    through ``__test__``).
    """
    scores = {f"d{i:06d}": float(len(rels) - i) for i in range(len(rels))}
    qrels = {d: v for d, v in zip(scores, rels, strict=True) if v != -1}
    qrels = {d: (-1 if v == -2 else v) for d, v in qrels.items()}
    found = [v for v in rels if v != -1]
    rest = list(judged)
    for v in found:
        rest.remove(-1 if v == -2 else v)
    qrels.update({f"u{i}": v for i, v in enumerate(rest)})
    chosen = parse_measures([spec])
    out = evaluate(Qrels({"q": qrels}), Run("r", {"q": scores}), measures=chosen, level=level,
                   num_docs=num_docs)  # fmt: skip
    values: dict[str, float | str] = {}
    for j, name in enumerate(out.names):
        if out.measure_of[j] == "relstring":
            values[name] = f"'{out.relstrings[0]}'"
        elif BY_NAME[out.measure_of[j]].geometric:
            values[name] = float(out.values[0, j])
        else:
            values[name] = _num(out.values[0, j], name in out.counts)
    return values


#: The worked query of the families' examples: ranks 1 relevant (level 2), 2 not relevant,
#: 3 not judged, 4 relevant (level 1); judged: those three plus an unretrieved level 3 (R = 3).
EXAMPLE_SETUP = ">>> r, j = [2, 0, -1, 1], [2, 0, 1, 3]\n"

#: Each qrels family's doctest on the worked query (:data:`EXAMPLE_SETUP`).
EXAMPLES: dict[str, str] = {
    "runid": ">>> run = Run('bm25', {'1': {'a': 1.0}})\n"
    ">>> evaluate(Qrels({'1': {'a': 1}}), run, measures=parse_measures(['runid'])).run_id\n"
    "'bm25'\n",
    "num_q": ">>> run = Run('r', {'1': {'a': 1.0}, '2': {'b': 1.0}, '3': {'c': 1.0}})\n"
    ">>> qrels = Qrels({'1': {'a': 1}, '2': {'c': 1}})  # query 3 has no judgements\n"
    ">>> evaluate(qrels, run, measures=parse_measures(['num_q'])).all  # all line only\n"
    "{'num_q': 2}\n",
    "num_ret": ">>> one_query('num_ret', r, j)\n{'num_ret': 4}\n",
    "num_rel": ">>> one_query('num_rel', r, j), one_query('num_rel', r, j, level=2)\n"
    "({'num_rel': 3}, {'num_rel': 2})\n",
    "num_rel_ret": ">>> one_query('num_rel_ret', r, j)\n{'num_rel_ret': 2}\n",
    "map": ">>> one_query('map', r, j)  # (1/1 + 2/4) / 3\n{'map': 0.5}\n",
    "gm_map": ">>> one_query('gm_map', r, j)  # log(0.5); all: exp of the mean\n"
    "{'gm_map': -0.6931471805599453}\n",
    "Rprec": ">>> one_query('Rprec', r, j)  # 1 relevant in the first 3\n"
    "{'Rprec': 0.3333333333333333}\n",
    "bpref": ">>> one_query('bpref', r, j)  # rank 1: 1; rank 4: 1 - min(1, 3)/min(1, 3)\n"
    "{'bpref': 0.3333333333333333}\n",
    "recip_rank": ">>> one_query('recip_rank', r, j)\n{'recip_rank': 1.0}\n",
    "iprec_at_recall": ">>> one_query('iprec_at_recall.0,.5,1', r, j)  # max P at/after round(xR)\n"
    "{'iprec_at_recall_0.00': 1.0, 'iprec_at_recall_0.50': 0.5, 'iprec_at_recall_1.00': 0.0}\n",
    "P": ">>> one_query('P.2,4', r, j)\n{'P_2': 0.5, 'P_4': 0.5}\n",
    "relstring": ">>> one_query('relstring', r, j)\n{'relstring': \"'20-1'\"}\n",
    "recall": ">>> one_query('recall.4', r, j)\n{'recall_4': 0.6666666666666666}\n",
    "infAP": ">>> one_query('infAP', r, j)  # (1 + 1/4 + 3/4 * 2/3 * (1 + e)/(1 + 1 + 2e)) / 3\n"
    "{'infAP': 0.5}\n",
    "gm_bpref": ">>> one_query('gm_bpref', r, j)  # log(1/3)\n{'gm_bpref': -1.0986122886681098}\n",
    "Rprec_mult": ">>> one_query('Rprec_mult.1', r, j)\n{'Rprec_mult_1.00': 0.3333333333333333}\n",
    "utility": ">>> one_query('utility.1,-1,0,0', r, j)  # 2 - 2\n{'utility_1,-1,0,0': 0.0}\n",
    "11pt_avg": ">>> one_query('11pt_avg.0,.5', r, j)  # (1 + 0.5) / 2\n{'11pt_avg_0,.5': 0.75}\n",
    "binG": ">>> one_query('binG', r, j)  # (1 + 1/2) / 3\n{'binG': 0.5}\n",
    "G": ">>> one_query('G', r, j)\n{'G': 0.2747853857295761}\n",
    "dcg": ">>> one_query('dcg', r, j)  # 2 + 1/log2 5\n{'dcg': 2.430676558073393}\n",
    "ideal_dcg": ">>> one_query('ideal_dcg', r, j)  # 3 + 2/log2 3 + 1/log2 4\n"
    "{'ideal_dcg': 4.7618595071429155}\n",
    "ndcg": ">>> one_query('ndcg', r, j)  # (2 + 1/log2 5) / (3 + 2/log2 3 + 1/log2 4)\n"
    "{'ndcg': 0.5104469282277887}\n"
    ">>> one_query('ndcg.1=5', r, j)  # (2 + 5/log2 5) / (5 + 3/log2 3 + 2/log2 4)\n"
    "{'ndcg_1=5': 0.5262249698012391}\n",
    "ndcg_rel": ">>> one_query('ndcg_rel', r, j)\n{'ndcg_rel': 0.5625201743740814}\n",
    "Rndcg": ">>> one_query('Rndcg', r, j)\n{'Rndcg': 0.5186497947324504}\n",
    "ndcg_cut": ">>> one_query('ndcg_cut.1', r, j)  # 2 / 3\n{'ndcg_cut_1': 0.6666666666666666}\n",
    "map_cut": ">>> one_query('map_cut.2', r, j)  # 1/1 over R = 3\n"
    "{'map_cut_2': 0.3333333333333333}\n",
    "relative_P": ">>> one_query('relative_P.2', r, j)  # 1 / min(2, 3)\n{'relative_P_2': 0.5}\n",
    "success": ">>> one_query('success.1', r, j)\n{'success_1': 1.0}\n",
    "set_P": ">>> one_query('set_P', r, j)\n{'set_P': 0.5}\n",
    "set_relative_P": ">>> one_query('set_relative_P', r, j)  # 2 / min(4, 3)\n"
    "{'set_relative_P': 0.6666666666666666}\n",
    "set_recall": ">>> one_query('set_recall', r, j)\n{'set_recall': 0.6666666666666666}\n",
    "set_map": ">>> one_query('set_map', r, j)  # 2^2 / (4 3)\n{'set_map': 0.3333333333333333}\n",
    "set_F": ">>> one_query('set_F', r, j)  # 2 (1/2)(2/3) / (1/2 + 2/3)\n"
    "{'set_F': 0.5714285714285715}\n",
    "num_nonrel_judged_ret": ">>> one_query('num_nonrel_judged_ret', r, j)\n"
    "{'num_nonrel_judged_ret': 1}\n",
    "rbp": ">>> one_query('rbp', r, j)  # 0.1 (2/3 + 1/3 0.9^3), gains scaled by 1/3\n"
    "{'rbp': 0.09096666666666664}\n",
    "rbp_resid": ">>> one_query('rbp_resid', r, j)  # 0.9^4 + 0.1 0.9^2\n"
    "{'rbp_resid': 0.7371000000000001}\n",
    "unj": ">>> one_query('unj.2,4', r, j)\n{'unj_2': 0.0, 'unj_4': 0.25}\n",
}

#: Families whose ``--tie-bounds`` columns are not bounds (their values under the two orders).
NOT_BOUNDED = frozenset({"G", "unj", "rbp_resid", "infAP", "num_nonrel_judged_ret", "relstring"})
#: Families that do not depend on the order of the ranked documents (but for ``-M``).
ORDER_FREE = frozenset({"runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility",
                        "ideal_dcg", "set_P", "set_relative_P", "set_recall", "set_map",
                        "set_F"})  # fmt: skip


def family_docstring(measure: TrecMeasure) -> str:
    """A qrels family's docstring: its formula, its tie rule and its doctest (a preference
    or judgement-group family's are its function's, in ``trec_prefs`` and ``trec_groups``).

    >>> print(family_docstring(BY_NAME["P"]).splitlines()[0])
    P: relevant in the first k, over k.
    """
    order = "ranked by score descending, then docno descending (trec_eval's order)"
    if measure.name in ORDER_FREE:
        tie = "independent of the order of ties (but for which tied documents -M keeps)"
    elif measure.name in NOT_BOUNDED:
        tie = order + "; --tie-bounds gives its values under the two orders, not bounds"
    else:
        tie = order + "; --tie-bounds gives its exact lowest and highest value over ties"
    if measure.name in ("ndcg", "ndcg_cut"):
        tie += ", and its tie-averaged value (each rank the mean gain of its tie group)"
    example = EXAMPLES.get(measure.name, "")
    return f"{measure.name}: {measure.doc}.\n\nTie rule: {tie}.\n\n{EXAMPLE_SETUP}{example}"


#: One doctest per qrels family (``pytest --doctest-modules`` runs each under its name).
__test__ = {m.name: family_docstring(m) for m in MEASURES if m.judgements == "qrels"}

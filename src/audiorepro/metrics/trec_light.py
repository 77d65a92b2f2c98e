"""trec_eval's evaluation of ``-R qrels`` without numpy: :func:`audiorepro.metrics.trec.evaluate`
over the tables of :mod:`audiorepro.formats.trec_light`, through the same compiled kernel
(``atr_evaluate``) with the same plan, so every value is the same double; the ``all`` values
are summed in query order, one value after the other, as numpy's ``cumsum`` there does.
``audiorepro trec-eval`` takes this path unless it needs what only the numpy one does (``-Z``,
the other judgement formats, an unusual file: see ``cli/trec_work.py``); tests compare the two
on every recorded case.
"""

from __future__ import annotations

from array import array

from audiorepro.core.native import library
from audiorepro.formats.trec_light import LightTable, address
from audiorepro.metrics.trec_measures import (
    BY_NAME,
    ORDER_CODE,
    Chosen,
    Evaluation,
    Order,
    group_plan,
    group_queries,
    pairing,
    plan_of,
    summary_of,
)


class Grid:
    """Row-major per-query values: ``grid[q, j]``, as a 2-D numpy array is indexed."""

    def __init__(self, values: array[float], width: int) -> None:
        self.values, self.width = values, width

    def __getitem__(self, key: tuple[int, int]) -> float:
        return self.values[key[0] * self.width + key[1]]

    def column_total(self, j: int) -> float:
        """Column ``j`` summed in row order from its first value (numpy's ``cumsum``)."""
        column = self.values[j :: self.width]
        total = column[0]
        for v in column[1:]:
            total += v
        return total


def _doubles(values: list[float]) -> array[float]:
    return array("d", values or [0.0])  # never an empty buffer: the kernel gets an address


def _int64s(values: list[int]) -> array[int]:
    return array("q", values or [0])


def evaluate_light(
    qt: LightTable,
    rt: LightTable,
    *,
    measures: dict[str, Chosen],
    level: int,
    max_ret: int | None,
    complete: bool,
    order: Order,
    judged_only: bool,
    num_docs: int,
    only_query: str | None,
) -> Evaluation:
    """:func:`audiorepro.metrics.trec.evaluate` (no ``zscores``) of a qrels and a run table."""
    run_of, qrels_of, qids = pairing(qt.qids, rt.qids, complete, only_query)
    grid, relstrings = _kernel(qt, rt, run_of, qrels_of, measures, level, max_ret, judged_only,
                               order, num_docs)  # fmt: skip
    plan = plan_of(measures)
    relevant = sum(1 for v in qt.levels if v > 0) if complete else None
    summary = summary_of(len(qids), plan.owners, grid.column_total, relevant)
    counts = frozenset(m.name for m in BY_NAME.values() if m.count)
    return Evaluation(rt.tag, qids, plan.names, plan.owners, grid, summary, relstrings, counts)


def _kernel(
    qt: LightTable,
    rt: LightTable,
    run_of: list[int],
    qrels_of: list[int],
    measures: dict[str, Chosen],
    level: int,
    max_ret: int | None,
    judged_only: bool,
    order: Order,
    num_docs: int,
) -> tuple[Grid, list[str]]:
    """``atr_evaluate`` of the qrels queries ``qrels_of`` each against its run query
    (``run_of``; -1: none, ``-c``): the planned values, and each one's relstring."""
    plan = plan_of(measures)
    nq, width = len(run_of), len(plan.names)
    relmax = int(measures["relstring"].values[0]) if "relstring" in measures else 0
    relsize = max(relmax, 1)
    out = array("d", bytes(8 * max(nq * width, 1)))
    relstr, rel_len = array("B", bytes(nq * relsize)), array("q", bytes(8 * nq))
    inputs = (_int64s(run_of), _int64s(qrels_of), _int64s(plan.rows), _doubles(plan.params),
              _doubles(plan.pairs))  # fmt: skip
    a = address
    status = library().atr_evaluate(
        a(rt.data), a(rt.doc_start), a(rt.doc_len), a(rt.value), a(rt.order), a(rt.start),
        a(rt.stop), a(qt.data), a(qt.doc_start), a(qt.doc_len), a(qt.levels), a(qt.order),
        a(qt.start), a(qt.stop), a(inputs[0]), a(inputs[1]), nq, level,
        -1 if max_ret is None else max_ret, int(judged_only), ORDER_CODE[order], a(inputs[2]),
        len(plan.rows) // 4, a(inputs[3]), len(plan.params), a(inputs[4]),
        len(plan.pairs) // 3, num_docs, width, a(out), a(relstr), relsize, a(rel_len),
    )  # fmt: skip
    if status:
        raise MemoryError("trec-eval's evaluation")
    relstrings = [
        relstr[i * relsize : i * relsize + rel_len[i]].tobytes().decode("ascii") for i in range(nq)
    ]
    return Grid(out, width), relstrings


def evaluate_groups_light(
    qt: LightTable,
    rt: LightTable,
    *,
    measures: dict[str, Chosen],
    level: int,
    max_ret: int | None,
    complete: bool,
    judged_only: bool,
    only_query: str | None,
) -> Evaluation:
    """:func:`audiorepro.metrics.trec_groups.evaluate_groups` (no ``zscores``) of a table of
    judgement groups (``read_light(..., groups_of=2)``: each query ``"qid group"``) and a run:
    every (qid, group) evaluated as a qrels query at once, then each query's values summed in
    group order from 0 and divided by its number of groups when several, as there."""
    keys = [k.split(" ", 1) for k in qt.qids]  # in (qid, group) order
    in_run = {q: i for i, q in enumerate(rt.qids)}
    qids = group_queries(list(dict.fromkeys(k[0] for k in keys)), rt.qids, complete, only_query)
    names, owners, plain = group_plan(measures)
    row = {q: i for i, q in enumerate(qids)}
    items = [k for k, (q, _) in enumerate(keys) if q in row]
    run_of = [in_run.get(keys[k][0], -1) for k in items]
    grid, _ = _kernel(qt, rt, run_of, items, plain, level, max_ret, judged_only, "trec", 0)
    width, columns = len(names), [names.index(n) for n in plan_of(plain).names]
    values = array("d", bytes(8 * len(qids) * width))
    seen = [0] * len(qids)
    for i, k in enumerate(items):
        r = row[keys[k][0]]
        seen[r] += 1
        for j, col in enumerate(columns):
            values[r * width + col] += grid[i, j]
    for r, count in enumerate(seen):
        if count > 1:
            for col in columns:
                values[r * width + col] /= count
    out = Grid(values, width)
    summary = [float(len(qids)) if owner == "num_q" else out.column_total(j) / len(qids)
               for j, owner in enumerate(owners)]  # fmt: skip
    return Evaluation(rt.tag, qids, names, owners, out, summary, counts=frozenset({"num_q"}))

"""trec_eval's evaluation of ``-R qrels`` without numpy: :func:`audiorepro.metrics.trec.evaluate`
over the tables of :mod:`audiorepro.formats.trec_light`, through the same compiled kernel
(``atr_evaluate``) with the same plan, so every value is the same double; the ``all`` values
are summed in query order, one value after the other, as numpy's ``cumsum`` there does.
``audiorepro trec-eval`` takes this path unless it needs what only the numpy one does (``-Z``,
the other judgement formats, an unusual file: see ``cli/trec_work.py``); tests compare the two
on every recorded case. :func:`evaluate_prefs_light`: ``-R prefs`` and ``qrels_prefs`` by the
compiled preference measures (``core/_trec_prefs.c``), which read the judgements themselves.
"""

from __future__ import annotations

import ctypes
from array import array

from audiorepro.core.native import AtrEval, AtrMeasures, AtrOptions, AtrTable, library
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


#: ``atr_prefs_evaluate``'s statuses (``core/_trec.h``).
ATR_OK, ATR_FALLBACK = 0, 1


def _texts(texts: list[str]) -> ctypes.Array[ctypes.c_char_p]:
    return (ctypes.c_char_p * max(len(texts), 1))(*[t.encode() for t in texts])


def _prefs_records(
    rt: LightTable, measures: dict[str, Chosen], keep: list[object]
) -> tuple[AtrTable, AtrMeasures]:
    """The run and the chosen measures as ``core/_trec.h``'s records (buffers kept alive in
    ``keep`` until the call returns)."""
    plan = plan_of(measures)
    qids, names, owners = _texts(rt.qids), _texts(plan.names), _texts(plan.owners)
    count = array("B", [int(BY_NAME[o].count) for o in plan.owners] or [0])
    keep.extend([qids, names, owners, count])
    table = AtrTable(
        address(rt.data), len(rt.data), len(rt.value), address(rt.doc_start),
        address(rt.doc_len), address(rt.value), None, len(rt.qids), qids, address(rt.start),
        address(rt.stop), address(rt.order), rt.tag.encode(),
    )  # fmt: skip
    chosen = AtrMeasures(len(plan.names), names, owners, address(count), None, 0, None, 0, None,
                         0, None, 0)  # fmt: skip
    return table, chosen


def evaluate_prefs_light(
    judgements: str,
    rt: LightTable,
    *,
    qrels_form: bool,
    measures: dict[str, Chosen],
    max_ret: int | None,
    complete: bool,
    only_query: str | None,
) -> Evaluation | None:
    """:func:`audiorepro.metrics.trec_prefs.evaluate_prefs` (no ``zscores``) of the judgements
    file ``judgements`` (``qrels_form``: ``-R qrels_prefs``) against a run, by
    ``atr_prefs_evaluate``; None where the C leaves the input to the Python path (it refuses
    it with its message, or reads what the C does not)."""
    keep: list[object] = []
    table, chosen = _prefs_records(rt, measures, keep)
    options = AtrOptions(0, int(complete), 0, 0, -1 if max_ret is None else max_ret, 1, 0,
                         None if only_query is None else only_query.encode())  # fmt: skip
    out = AtrEval()
    lib = library()
    status = lib.atr_prefs_evaluate(ctypes.addressof(table), judgements.encode(),
                                    int(qrels_form), ctypes.addressof(chosen),
                                    ctypes.addressof(options), ctypes.addressof(out))  # fmt: skip
    if status == ATR_FALLBACK:
        return None
    if status != ATR_OK:
        raise MemoryError("trec-eval's preference measures")
    try:
        width, nq = out.ncolumns, out.nq
        qids = [out.qids[k].decode("ascii") for k in range(nq)]
        values = array("d", ctypes.string_at(out.values, 8 * nq * width))
        summary = list(array("d", ctypes.string_at(out.summary, 8 * width)))
    finally:
        lib.atr_prefs_free(ctypes.addressof(out))
    plan = plan_of(measures)
    counts = frozenset(o for o in plan.owners if BY_NAME[o].count)
    return Evaluation(rt.tag, qids, plan.names, plan.owners, Grid(values, width), summary,
                      counts=counts)  # fmt: skip

"""Compiled kernels of :mod:`audiorepro.metrics.trec`: one query's ranked list and every
trec_eval measure of it, in one pass per query (C compiled ahead of time by the package's
build, ``core/_trec.c``, loaded by :mod:`audiorepro.core.native`; nothing is compiled at run
time).

A query is its **ranked list** ``rels`` (the judged level of each retrieved document in rank
order; ``-1``: not in the qrels, ``-2``: in the qrels with a negative level, "in the pool but
unjudged"), ``counts[v]`` (judged documents at level ``v >= 0``, retrieved or not), ``level``
(trec_eval's ``-l``) and ``R`` (judged at ``>= level``). The formulas are in the docstrings of
:mod:`audiorepro.metrics.trec`'s measure table; each function here fills its values in
``out[off:]``. Sums run in rank order, as trec_eval's do, with the same C operations in the
same order, so the doubles are trec_eval's. The measure codes the plan rows name are in
:mod:`audiorepro.metrics.trec_measures` (read without numpy).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.native import library, pointer

Array = npt.NDArray[Any]


def rank_levels(rdata: Array, rstart: Array, rlen: Array, score: Array,
                recs: Array, qdata: Array, qstart: Array, qlen: Array,
                qrel: Array, judged: Array, level: int,
                order: int) -> tuple[Array, Array]:  # fmt: skip
    """One query's levels in rank order and, under the ``average`` order (3), each rank's
    mean gain over its group of equal scores. ``recs`` and ``judged``: the run's and the
    qrels' records of the query, each sorted by docno. Order 0 (trec): score descending, then
    docno descending; 1 (pessimistic) and 2 (optimistic) put, among equal scores, the
    smaller or larger (gain, relevant) first before the docno rule.

    >>> run = np.frombuffer(b"abc", np.uint8)
    >>> span = np.arange(3, dtype=np.int64), np.ones(3, np.int32)
    >>> rels, _ = rank_levels(run, *span, np.array([1.0, 2.0, 1.0]), np.arange(3), run, *span,
    ...                       np.array([1, 0, 2]), np.arange(3), 1, 0)
    >>> rels.tolist()  # b (score 2), then c before a (docno descending)
    [0, 2, 1]
    """
    n = recs.size
    rels = np.empty(n, np.int64)
    avg = np.empty(n if order == 3 else 0, np.float64)
    keep: list[Any] = []
    status = library().atr_rank_levels(
        pointer(rdata, np.uint8, keep), pointer(rstart, np.int64, keep),
        pointer(rlen, np.int32, keep), pointer(score, np.float64, keep),
        pointer(recs, np.int64, keep), n, pointer(qdata, np.uint8, keep),
        pointer(qstart, np.int64, keep), pointer(qlen, np.int32, keep),
        pointer(qrel, np.int64, keep), pointer(judged, np.int64, keep), judged.size, level,
        order, rels.ctypes.data, avg.ctypes.data if n and order == 3 else 0,
    )  # fmt: skip
    if status:
        raise MemoryError("trec-eval's ranking")
    return rels, avg


def evaluate_queries(rdata: Array, rstart: Array, rlen: Array,
                     rvalue: Array, rorder: Array, rfirst: Array,
                     rlast: Array, qdata: Array, qstart: Array,
                     qlen: Array, qvalue: Array, qorder: Array,
                     qfirst: Array, qlast: Array, run_of: Array,
                     qrels_of: Array, level: int, max_ret: int, judged_only: bool,
                     order: int, plan: Array, params: Array, pairs: Array,
                     ndocs: int, nvalues: int,
                     relmax: int) -> tuple[Array, Array, Array]:  # fmt: skip
    """Every planned value of every evaluated query ``k`` (its run query ``run_of[k]``, -1:
    absent, evaluated as trec_eval's ``-c`` does with one unjudged document; its qrels query
    ``qrels_of[k]``); ``max_ret`` < 0: no cut. Plan rows: kind, first and last parameter,
    output offset (``pairs``: rows of three)."""
    nq = run_of.size
    out = np.zeros((nq, nvalues), np.float64)
    relsize = max(relmax, 1)
    relstr = np.zeros((nq, relsize), np.uint8)
    rel_len = np.zeros(nq, np.int64)
    keep: list[Any] = []
    p = pointer
    status = library().atr_evaluate(
        p(rdata, np.uint8, keep), p(rstart, np.int64, keep), p(rlen, np.int32, keep),
        p(rvalue, np.float64, keep), p(rorder, np.int64, keep), p(rfirst, np.int64, keep),
        p(rlast, np.int64, keep), p(qdata, np.uint8, keep), p(qstart, np.int64, keep),
        p(qlen, np.int32, keep), p(qvalue.astype(np.int64), np.int64, keep),
        p(qorder, np.int64, keep), p(qfirst, np.int64, keep), p(qlast, np.int64, keep),
        p(run_of, np.int64, keep), p(qrels_of, np.int64, keep), nq, level, max_ret,
        int(judged_only), order, p(plan, np.int64, keep), plan.shape[0],
        p(params, np.float64, keep), params.size, p(pairs, np.float64, keep),
        pairs.shape[0], ndocs, nvalues, out.ctypes.data, relstr.ctypes.data, relsize,
        rel_len.ctypes.data,
    )  # fmt: skip
    if status:
        raise MemoryError("trec-eval's evaluation")
    return out, relstr, rel_len

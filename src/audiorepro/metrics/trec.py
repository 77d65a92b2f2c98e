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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.formats.c_numbers import c_atof as c_atof
from audiorepro.formats.c_numbers import c_atol as c_atol
from audiorepro.formats.trec import Qrels, Run, TrecTable, table_from_dicts
from audiorepro.metrics import trec_kernels as tk

Array = npt.NDArray[Any]

Order = Literal["trec", "optimistic", "pessimistic", "average"]
ORDERS: tuple[Order, ...] = ("trec", "optimistic", "pessimistic", "average")
ORDER_CODE = {"trec": 0, "pessimistic": 1, "optimistic": 2, "average": 3}
#: trec_eval's default cutoffs.
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
SUCCESS_CUTOFFS = (1, 5, 10)
RECALL_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
Params = Literal["none", "cut", "fraction", "values", "pairs"]


@dataclass(frozen=True)
class TrecMeasure:
    """A trec_eval measure: name, kernel code, parameter kind (``cut``: integer cutoffs,
    one value each, ``NAME_k``; ``fraction``: real cutoffs, ``NAME_%3.2f``; ``values``: real
    parameters of one value; ``pairs``: ``level=gain`` or ``p=persistence``), defaults,
    whether it is a count (printed as an integer; ``all`` is the sum), geometric (``all`` is
    the geometric mean, no per-query line) and its formula."""

    name: str
    kind: int
    params: Params = "none"
    defaults: tuple[float, ...] = ()
    count: bool = False
    geometric: bool = False
    doc: str = ""
    judgements: str = "qrels"


def _m(
    name: str,
    kind: int,
    doc: str,
    params: Params = "none",
    defaults: Sequence[float] = (),
    judgements: str = "qrels",
    **flags: bool,
) -> TrecMeasure:
    return TrecMeasure(name, kind, params, tuple(defaults), doc=doc, judgements=judgements,
                       **flags)  # fmt: skip


#: The judgement formats (``-R``) and the measures each one feeds (``runid`` and ``num_q``
#: read none).
FORMATS = ("qrels", "prefs", "qrels_prefs", "qrels_jg")
PREFS = "prefs"  # the judgements of a preference measure: -R prefs or -R qrels_prefs


def _pref(name: str, doc: str, count: bool = False) -> TrecMeasure:
    """A preference measure (:mod:`audiorepro.metrics.trec_prefs` computes it)."""
    return _m(name, -3, doc, judgements=PREFS, count=count)


#: Every measure in trec_eval's printing order (``runid`` and ``num_q`` print on ``all`` only).
MEASURES: tuple[TrecMeasure, ...] = (
    _m("runid", -1, "the tag of the run's last line"),
    _m("num_q", -2, "queries evaluated", count=True),
    _m("num_ret", tk.NUM_RET, "n: documents ranked", count=True),
    _m("num_rel", tk.NUM_REL, "R: judged >= level (-c: all line, every qrels rel > 0)", count=True),
    _m("num_rel_ret", tk.NUM_REL_RET, "relevant ranked", count=True),
    _m("map", tk.MAP, "sum over relevant ranks i of (relevant in 1..i)/i, over R; 0 if none"),
    _m("gm_map", tk.GM_MAP, "map per query as log(max(map, 1e-5)); all: exp(mean)", geometric=True),
    _m("Rprec", tk.RPREC, "relevant in the first R, over R"),
    _m(
        "bpref",
        tk.BPREF,
        "sum over relevant judged ranks of 1 - min(nonrel above, R) / "
        "min(judged nonrel, R) (1 when none above), over R",
    ),
    _m("recip_rank", tk.RECIP_RANK, "1 / the first relevant rank"),
    _m(
        "iprec_at_recall",
        tk.IPREC,
        "max precision at or after the rank where round(x R) relevant are found",
        "fraction",
        RECALL_POINTS,
    ),
    _m("P", tk.P, "relevant in the first k, over k", "cut", CUTOFFS),
    _m(
        "relstring",
        tk.RELSTRING,
        "levels of the first N ranks ('-' not judged, '.' negative, '>' above 9), per query only",
        "values",
        (10.0,),
    ),
    _m("recall", tk.RECALL, "relevant in the first k, over R", "cut", CUTOFFS),
    _m("infAP", tk.INFAP, "inferred AP (Yilmaz and Aslam) from sampled judgements"),
    _m("gm_bpref", tk.GM_BPREF, "bpref as log(max(bpref, 1e-5)); all: exp(mean)", geometric=True),
    _m(
        "Rprec_mult",
        tk.RPREC_MULT,
        "precision at int(x R + 0.9) documents",
        "fraction",
        R_MULTIPLES,
    ),
    _m(
        "utility",
        tk.UTILITY,
        "p1 relret + p2 (n - relret) + p3 (R - relret) + p4 (N + relret - n - R)",
        "values",
        (1.0, -1.0, 0.0, 0.0),
    ),
    _m(
        "11pt_avg",
        tk.PT11,
        "mean of iprec_at_recall over the given points",
        "values",
        RECALL_POINTS,
    ),
    _m("binG", tk.BING, "sum over relevant ranks i of 1/log2(i + 2 - relevant so far), over R"),
    _m(
        "G",
        tk.G,
        "gain over log2(2 + ideal cost so far - gain so far), over the ideal gain",
        "pairs",
    ),
    _m("dcg", tk.DCG, "sum of gain_i / log2(i + 1)", "pairs"),
    _m("ideal_dcg", tk.IDEAL_DCG, "dcg of the gains sorted descending", "pairs"),
    _m("ndcg", tk.NDCG, "dcg / ideal_dcg", "pairs"),
    _m(
        "ndcg_rel", tk.NDCG_REL, "mean of ndcg at each relevant rank (unfound: at the end)", "pairs"
    ),
    _m("Rndcg", tk.RNDCG, "mean of ndcg where the ideal gain changes", "pairs"),
    _m("ndcg_cut", tk.NDCG_CUT, "ndcg of the first k ranks, levels as gains", "cut", CUTOFFS),
    _m("map_cut", tk.MAP_CUT, "map of the first k ranks (still over R)", "cut", CUTOFFS),
    _m("relative_P", tk.RELATIVE_P, "relevant in the first k, over min(k, R)", "cut", CUTOFFS),
    _m("success", tk.SUCCESS, "1 if a relevant rank is in the first k", "cut", SUCCESS_CUTOFFS),
    _m("set_P", tk.SET_P, "relret / n"),
    _m("set_relative_P", tk.SET_RELATIVE_P, "relret / min(n, R)"),
    _m("set_recall", tk.SET_RECALL, "relret / R"),
    _m("set_map", tk.SET_MAP, "relret^2 / (n R)"),
    _m("set_F", tk.SET_F, "(x + 1) P R / (x P + R), P = relret/n, R = relret/R", "values", (1.0,)),
    _m(
        "num_nonrel_judged_ret",
        tk.NUM_NONREL_JUDGED_RET,
        "judged, not relevant, ranked",
        count=True,
    ),
    _pref("prefs_num_prefs_poss", "possible preferences, ranked or not", count=True),
    _pref("prefs_num_prefs_ful", "fulfilled preferences, implied ones included", count=True),
    _pref("prefs_num_prefs_ful_ret", "fulfilled preferences, both ranked", count=True),
    _pref("prefs_simp", "fulfilled / possible preferences, pooled over judgement groups"),
    _pref("prefs_pair", "mean over preferred pairs of the share of their preferences fulfilled"),
    _pref("prefs_avgjg", "mean over judgement groups of fulfilled / possible"),
    _pref("prefs_avgjg_Rnonrel", "prefs_avgjg with each group's non-relevant counted as R"),
    _pref("prefs_simp_ret", "prefs_simp over ranked pairs only"),
    _pref("prefs_pair_ret", "prefs_pair over ranked pairs only"),
    _pref("prefs_avgjg_ret", "prefs_avgjg over ranked pairs only"),
    _pref("prefs_avgjg_Rnonrel_ret", "prefs_avgjg_Rnonrel over ranked documents only"),
    _pref("prefs_simp_imp", "prefs_simp without pairs of two unranked documents"),
    _pref("prefs_pair_imp", "prefs_pair without pairs of two unranked documents"),
    _pref("prefs_avgjg_imp", "prefs_avgjg without pairs of two unranked documents"),
    _m(
        "map_avgjg",
        -4,
        "map of each judgement group, averaged over the groups",
        judgements="qrels_jg",
    ),
    _m(
        "P_avgjg",
        -4,
        "P of each judgement group, averaged over the groups",
        "cut",
        CUTOFFS,
        judgements="qrels_jg",
    ),
    _m(
        "Rprec_mult_avgjg",
        -4,
        "Rprec_mult of each judgement group, averaged over the groups",
        "fraction",
        R_MULTIPLES,
        judgements="qrels_jg",
    ),
    _m("rbp", tk.RBP, "(1 - p) sum gain_i p^(i-1), gains scaled into [0, 1] (p=0.9)", "pairs"),
    _m("rbp_resid", tk.RBP_RESID, "p^n + (1 - p) sum over unjudged ranks of p^(i-1)", "pairs"),
    _m("unj", tk.UNJ, "unjudged in the first k, over k", "cut", (5, 10, 20)),
)
BY_NAME = {m.name: m for m in MEASURES}
#: trec_eval's ``all_prefs`` set, in its printing order.
ALL_PREFS = ("runid", "num_q", *(m.name for m in MEASURES if m.judgements == PREFS))
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": (
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "map",
        "gm_map",
        "Rprec",
        "bpref",
        "recip_rank",
        "iprec_at_recall",
        "P",
    ),
    "all_trec": (
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "map",
        "gm_map",
        "Rprec",
        "bpref",
        "recip_rank",
        "iprec_at_recall",
        "P",
        "relstring",
        "recall",
        "unj",
        "rbp",
        "rbp_resid",
        "infAP",
        "gm_bpref",
        "utility",
        "11pt_avg",
        "ndcg",
        "relative_P",
        "Rprec_mult",
        "success",
        "map_cut",
        "ndcg_cut",
        "ndcg_rel",
        "Rndcg",
        "binG",
        "G",
        "set_P",
        "set_recall",
        "set_relative_P",
        "set_map",
        "set_F",
        "num_nonrel_judged_ret",
    ),
    "set": (
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "utility",
        "set_P",
        "set_recall",
        "set_relative_P",
        "set_map",
        "set_F",
    ),
    "all_prefs": ALL_PREFS,
    # trec_eval's official preference set: the first three counts and ratios
    "prefs": ALL_PREFS[:8],
    "qrels_jg": ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"),
}
OFFICIAL = NICKNAMES["official"]


def check_judgements(measures: dict[str, Chosen], rel_format: str) -> None:
    """Each chosen measure must read the judgement format ``rel_format`` (``-R``): ``qrels``
    measures need ``-R qrels``, preference measures ``-R prefs`` or ``qrels_prefs`` and the
    ``*_avgjg`` measures ``-R qrels_jg`` (trec_eval stops with "Can't calculate measure").

    >>> check_judgements(parse_measures(["prefs"]), "qrels_prefs")
    >>> check_judgements(parse_measures(["map"]), "prefs")
    Traceback (most recent call last):
    audiorepro.core.errors.UserError: '-m': measure 'map' reads -R qrels judgements; got -R prefs
    """
    if rel_format not in FORMATS:
        raise UserError(f"judgement format {rel_format!r} is not read here; expected one of "
                        + ", ".join(FORMATS), key="-R")  # fmt: skip
    wanted = PREFS if rel_format == "qrels_prefs" else rel_format
    for name, c in measures.items():
        needs = c.measure.judgements
        if name not in ("runid", "num_q") and needs != wanted:
            shown = "prefs or -R qrels_prefs" if needs == PREFS else needs
            raise UserError(
                f"measure {name!r} reads -R {shown} judgements; got -R {rel_format}", key="-m"
            )


@dataclass(frozen=True)
class Chosen:
    """A measure to compute: its parameters (cutoffs ascending; pairs as ``(is_level or 2
    for p, level, value)`` rows) and the names of its values in printing order."""

    measure: TrecMeasure
    values: tuple[float, ...]
    pairs: tuple[tuple[float, float, float], ...]
    names: tuple[str, ...]


def _parameters(measure: TrecMeasure, text: str | None, spec: str) -> Chosen:
    name = measure.name
    if measure.params == "none" or (text is None and measure.params == "pairs"):
        return Chosen(measure, (), (), (name,))
    if text is None:
        values = measure.defaults
        text_out = None
    else:
        pieces = text.split(",")
        if measure.params == "pairs":
            return _pairs(measure, text, pieces, spec)
        values = tuple(float(c_atol(p)) if measure.params == "cut" else c_atof(p) for p in pieces)
        text_out = text
    if measure.params in ("cut", "fraction"):
        values = tuple(sorted(values))
        if measure.params == "cut" and values[0] <= 0:
            raise UserError(f"{spec!r}: a cutoff is not positive; expected cutoffs >= 1", key="-m")
        if len(set(values)) < len(values):
            raise UserError(f"{spec!r}: duplicate cutoffs; expected each once", key="-m")
        if measure.params == "cut":
            return Chosen(measure, values, (), tuple(f"{name}_{int(v)}" for v in values))
        width = len(name) + 9
        return Chosen(measure, values, (), tuple(f"{name}_{v:3.2f}"[:width] for v in values))
    if name == "utility" and len(values) != 4:
        raise UserError(
            f"{spec!r}: utility takes 4 coefficients; expected utility.1,-1,0,0", key="-m"
        )
    label = name if text_out is None else f"{name}_{text_out}"
    return Chosen(measure, values, (), (label,))


def _pairs(measure: TrecMeasure, text: str, pieces: list[str], spec: str) -> Chosen:
    rows: list[tuple[float, float, float]] = []
    for piece in pieces:
        key, eq, value = piece.partition("=")
        if not eq or "=" in value:
            raise UserError(
                f"{spec!r}: malformed pair parameters; expected {measure.name}.1=3,2=9 "
                "(level=gain) or rbp.p=0.95",
                key="-m",
            )
        body = key[1:] if key[:1] in "+-" else key
        if body and body.isascii() and body.isdigit():
            rows.append((1.0, float(c_atol(key)), c_atof(value)))
        elif key == "p":
            rows.append((2.0, 0.0, c_atof(value)))
        else:
            rows.append((0.0, 0.0, c_atof(value)))
    return Chosen(measure, (), tuple(rows), (f"{measure.name}_{text}",))


def parse_measures(specs: Sequence[str]) -> dict[str, Chosen]:
    """``-m`` values as trec_eval reads them: ``NAME`` or a nickname (``official``,
    ``all_trec``, ``set``) marks measures; ``NAME.params`` also records parameters, and a
    measure takes the **first** parameters given for its name, wherever it was marked (so
    ``-m all_trec -m P.5`` prints ``P_5`` alone). Integer cutoffs are read by ``atol``
    (``ndcg_cut.23.4`` is 23), sorted, and must be positive and distinct. No ``-m``:
    ``official``.

    >>> list(parse_measures(["map", "P.10,5", "P.7"])["P"].names)
    ['P_5', 'P_10']
    >>> parse_measures([])["iprec_at_recall"].names[:2]
    ('iprec_at_recall_0.00', 'iprec_at_recall_0.10')
    """
    marked: set[str] = set()
    first: dict[str, str] = {}
    for spec in specs or ["official"]:
        name, dot, params = spec.partition(".")
        if dot and name in NICKNAMES:  # a set takes no parameters (trec_eval names no member)
            raise UserError(
                f"{name!r} is a set of measures and takes no parameters (got {spec!r}); "
                f"expected {name} alone, or a measure of it with its own, e.g. P.5",
                key="-m",
            )
        if dot:
            if not params:
                raise UserError(f"{spec!r}: empty parameters; expected e.g. P.5,10", key="-m")
            first.setdefault(name, params)
        names = NICKNAMES.get(name, (name,))
        for one in names:
            if one not in BY_NAME:
                raise UserError(
                    f"unknown measure {spec!r}; expected {', '.join(NICKNAMES)} or one of "
                    + ", ".join(BY_NAME),
                    key="-m",
                )
            marked.add(one)
    return {
        m.name: _parameters(m, first.get(m.name), f"{m.name}.{first.get(m.name)}")
        for m in MEASURES
        if m.name in marked
    }


@dataclass
class Evaluation:
    """Values per query (``values[q, j]``: query ``qids[q]``, value ``names[j]``) and for
    ``all``, the relstring of each query, and which values are counts or geometric."""

    run_id: str
    qids: list[str]
    names: list[str]
    measure_of: list[str]
    values: Array
    summary: list[float]
    relstrings: list[str] = field(default_factory=list)
    counts: frozenset[str] = frozenset()

    @cached_property
    def queries(self) -> dict[str, dict[str, float]]:
        """``{qid: {name: value}}`` (no ``num_q``, ``gm_*`` or ``relstring``)."""
        per = [j for j, m in enumerate(self.measure_of) if _per_query(m)]
        return {
            q: {self.names[j]: _num(self.values[i, j], self.names[j] in self.counts) for j in per}
            for i, q in enumerate(self.qids)
        }

    @cached_property
    def all(self) -> dict[str, float]:
        """``{name: value}`` of the ``all`` line (no ``relstring``)."""
        return {
            n: _num(v, n in self.counts)
            for n, m, v in zip(self.names, self.measure_of, self.summary, strict=True)
            if m != "relstring"
        }


def _per_query(measure: str) -> bool:
    return measure not in ("num_q", "gm_map", "gm_bpref", "relstring", "runid")


def _num(value: float, count: bool) -> float:
    return int(value) if count else float(value)


def _plan(
    chosen: dict[str, Chosen],
) -> tuple[Array, Array, Array, list[str], list[str]]:
    rows: list[list[int]] = []
    params: list[float] = []
    pairs: list[tuple[float, float, float]] = []
    names: list[str] = []
    owners: list[str] = []
    for c in chosen.values():
        kind = c.measure.kind
        if kind < 0:
            names.append(c.measure.name)
            owners.append(c.measure.name)
            continue
        if c.measure.params == "pairs":
            rows.append([kind, len(pairs), len(pairs) + len(c.pairs), len(names)])
            pairs.extend(c.pairs)
        else:
            rows.append([kind, len(params), len(params) + len(c.values), len(names)])
            params.extend(c.values)
        names.extend(c.names)
        owners.extend([c.measure.name] * len(c.names))
    plan = np.array(rows, np.int64).reshape(-1, 4)
    pair_array = np.array(pairs, np.float64).reshape(-1, 3)
    return plan, np.array(params, np.float64), pair_array, names, owners


def _table(data: Qrels | Run | TrecTable) -> TrecTable:
    if isinstance(data, Qrels):
        return table_from_dicts(data.judged)
    if isinstance(data, Run):
        return table_from_dicts(data.scores, data.run_id)
    return data


def _pairing(
    qrels: TrecTable, run: TrecTable, complete: bool, only: str | None
) -> tuple[Array, Array, list[str]]:
    in_run = {q: i for i, q in enumerate(run.qids)}
    run_of, qrels_of, qids = [], [], []
    for i, q in enumerate(qrels.qids):
        if (only is not None and q != only) or (q not in in_run and not complete):
            continue
        run_of.append(in_run.get(q, -1))
        qrels_of.append(i)
        qids.append(q)
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
    if not qids:
        raise UserError(
            "no query of the run has judgements in the qrels; expected files of the same "
            "queries (or -c to average over the qrels' queries)"
        )
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
    out: list[float] = []
    for j, owner in enumerate(owners):
        column = values[:, j]
        total = float(np.cumsum(column)[-1]) if n else 0.0
        measure = BY_NAME[owner]
        if owner == "num_q":
            out.append(float(n))
        elif owner == "num_rel" and complete is not None:
            out.append(float(np.count_nonzero(complete.value > 0)))
        elif measure.count or owner in ("runid", "relstring"):
            out.append(total)
        elif measure.geometric:
            out.append(math.exp(total / n))
        else:
            out.append(total / n)
    return out


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

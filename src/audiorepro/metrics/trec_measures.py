"""trec_eval's measure table, ``-m`` parsing and the evaluation record, with no numeric
stack: :mod:`audiorepro.metrics.trec` (the evaluation) and the numpy-free path of ``audiorepro
trec-eval`` (:mod:`audiorepro.metrics.trec_light`) share them, so that a trec-eval run imports
no numpy (its start-up is a third of trec_eval's whole run on 100 queries). The measures'
conventions are in :mod:`audiorepro.metrics.trec`'s docstring."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any, Literal, NamedTuple

from audiorepro.core.errors import UserError
from audiorepro.formats.c_numbers import c_atof, c_atol

# Records are NamedTuples and a plain class, not dataclasses: importing dataclasses (and inspect
# with it) costs about 15 ms, a seventh of trec_eval's whole run on 100 queries.

#: The kernels' measure codes (``core/_trec.c``'s enum, in its order).
NUM_RET, NUM_REL, NUM_REL_RET, MAP, GM_MAP, RPREC, BPREF, RECIP_RANK = 0, 1, 2, 3, 4, 5, 6, 7
IPREC, P, RELSTRING, RECALL, INFAP, GM_BPREF, RPREC_MULT, UTILITY = 8, 9, 10, 11, 12, 13, 14, 15
PT11, BING, G, DCG, IDEAL_DCG, NDCG, NDCG_REL, RNDCG = 16, 17, 18, 19, 20, 21, 22, 23
NDCG_CUT, MAP_CUT, RELATIVE_P, SUCCESS, SET_P, SET_RELATIVE_P = 24, 25, 26, 27, 28, 29
SET_RECALL, SET_MAP, SET_F, NUM_NONREL_JUDGED_RET, RBP, RBP_RESID, UNJ = 30, 31, 32, 33, 34, 35, 36

Order = Literal["trec", "optimistic", "pessimistic", "average"]
ORDERS: tuple[Order, ...] = ("trec", "optimistic", "pessimistic", "average")
ORDER_CODE = {"trec": 0, "pessimistic": 1, "optimistic": 2, "average": 3}
#: trec_eval's default cutoffs.
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
SUCCESS_CUTOFFS = (1, 5, 10)
RECALL_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
Params = Literal["none", "cut", "fraction", "values", "pairs"]


class TrecMeasure:
    """A trec_eval measure: name, kernel code, parameter kind (``cut``: integer cutoffs,
    one value each, ``NAME_k``; ``fraction``: real cutoffs, ``NAME_%3.2f``; ``values``: real
    parameters of one value; ``pairs``: ``level=gain`` or ``p=persistence``), defaults,
    whether it is a count (printed as an integer; ``all`` is the sum), geometric (``all`` is
    the geometric mean, no per-query line) and its formula."""

    __slots__ = ("count", "defaults", "doc", "geometric", "judgements", "kind", "name", "params")

    def __init__(
        self,
        name: str,
        kind: int,
        params: Params = "none",
        defaults: tuple[float, ...] = (),
        count: bool = False,
        geometric: bool = False,
        doc: str = "",
        judgements: str = "qrels",
    ) -> None:
        self.name, self.kind, self.params, self.defaults = name, kind, params, defaults
        self.count, self.geometric, self.doc, self.judgements = count, geometric, doc, judgements

    def __repr__(self) -> str:
        return f"TrecMeasure({self.name!r})"


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


#: Each judgement-group family (-R qrels_jg) and the qrels measure it averages.
GROUP_FAMILIES = {"map_avgjg": "map", "P_avgjg": "P", "Rprec_mult_avgjg": "Rprec_mult"}

#: Every measure in trec_eval's printing order (``runid`` and ``num_q`` print on ``all`` only).
MEASURES: tuple[TrecMeasure, ...] = (
    _m("runid", -1, "the tag of the run's last line"),
    _m("num_q", -2, "queries evaluated", count=True),
    _m("num_ret", NUM_RET, "n: documents ranked", count=True),
    _m("num_rel", NUM_REL, "R: judged >= level (-c: all line, every qrels rel > 0)", count=True),
    _m("num_rel_ret", NUM_REL_RET, "relevant ranked", count=True),
    _m("map", MAP, "sum over relevant ranks i of (relevant in 1..i)/i, over R; 0 if none"),
    _m("gm_map", GM_MAP, "map per query as log(max(map, 1e-5)); all: exp(mean)", geometric=True),
    _m("Rprec", RPREC, "relevant in the first R, over R"),
    _m(
        "bpref",
        BPREF,
        "sum over relevant judged ranks of 1 - min(nonrel above, R) / "
        "min(judged nonrel, R) (1 when none above), over R",
    ),
    _m("recip_rank", RECIP_RANK, "1 / the first relevant rank"),
    _m(
        "iprec_at_recall",
        IPREC,
        "max precision at or after the rank where round(x R) relevant are found",
        "fraction",
        RECALL_POINTS,
    ),
    _m("P", P, "relevant in the first k, over k", "cut", CUTOFFS),
    _m(
        "relstring",
        RELSTRING,
        "levels of the first N ranks ('-' not judged, '.' negative, '>' above 9), per query only",
        "values",
        (10.0,),
    ),
    _m("recall", RECALL, "relevant in the first k, over R", "cut", CUTOFFS),
    _m("infAP", INFAP, "inferred AP (Yilmaz and Aslam) from sampled judgements"),
    _m("gm_bpref", GM_BPREF, "bpref as log(max(bpref, 1e-5)); all: exp(mean)", geometric=True),
    _m(
        "Rprec_mult",
        RPREC_MULT,
        "precision at int(x R + 0.9) documents",
        "fraction",
        R_MULTIPLES,
    ),
    _m(
        "utility",
        UTILITY,
        "p1 relret + p2 (n - relret) + p3 (R - relret) + p4 (N + relret - n - R)",
        "values",
        (1.0, -1.0, 0.0, 0.0),
    ),
    _m(
        "11pt_avg",
        PT11,
        "mean of iprec_at_recall over the given points",
        "values",
        RECALL_POINTS,
    ),
    _m("binG", BING, "sum over relevant ranks i of 1/log2(i + 2 - relevant so far), over R"),
    _m(
        "G",
        G,
        "gain over log2(2 + ideal cost so far - gain so far), over the ideal gain",
        "pairs",
    ),
    _m("dcg", DCG, "sum of gain_i / log2(i + 1)", "pairs"),
    _m("ideal_dcg", IDEAL_DCG, "dcg of the gains sorted descending", "pairs"),
    _m("ndcg", NDCG, "dcg / ideal_dcg", "pairs"),
    _m("ndcg_rel", NDCG_REL, "mean of ndcg at each relevant rank (unfound: at the end)", "pairs"),
    _m("Rndcg", RNDCG, "mean of ndcg where the ideal gain changes", "pairs"),
    _m("ndcg_cut", NDCG_CUT, "ndcg of the first k ranks, levels as gains", "cut", CUTOFFS),
    _m("map_cut", MAP_CUT, "map of the first k ranks (still over R)", "cut", CUTOFFS),
    _m("relative_P", RELATIVE_P, "relevant in the first k, over min(k, R)", "cut", CUTOFFS),
    _m("success", SUCCESS, "1 if a relevant rank is in the first k", "cut", SUCCESS_CUTOFFS),
    _m("set_P", SET_P, "relret / n"),
    _m("set_relative_P", SET_RELATIVE_P, "relret / min(n, R)"),
    _m("set_recall", SET_RECALL, "relret / R"),
    _m("set_map", SET_MAP, "relret^2 / (n R)"),
    _m("set_F", SET_F, "(x + 1) P R / (x P + R), P = relret/n, R = relret/R", "values", (1.0,)),
    _m(
        "num_nonrel_judged_ret",
        NUM_NONREL_JUDGED_RET,
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
    _m("rbp", RBP, "(1 - p) sum gain_i p^(i-1), gains scaled into [0, 1] (p=0.9)", "pairs"),
    _m("rbp_resid", RBP_RESID, "p^n + (1 - p) sum over unjudged ranks of p^(i-1)", "pairs"),
    _m("unj", UNJ, "unjudged in the first k, over k", "cut", (5, 10, 20)),
)
BY_NAME = {m.name: m for m in MEASURES}
#: trec_eval's ``all_prefs`` set, in its printing order.
ALL_PREFS = ("runid", "num_q", *(m.name for m in MEASURES if m.judgements == PREFS))
#: trec_eval's ``official`` set (its default without ``-m``), in its printing order.
_OFFICIAL = (
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
)
NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": _OFFICIAL,
    "all_trec": (
        *_OFFICIAL,
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


class Chosen(NamedTuple):
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


class Evaluation:
    """Values per query (``values[q, j]``: query ``qids[q]``, value ``names[j]``) and for
    ``all``, the relstring of each query, and which values are counts or geometric."""

    def __init__(
        self,
        run_id: str,
        qids: list[str],
        names: list[str],
        measure_of: list[str],
        values: Any,  # values[q, j]: a 2-D numpy array, or trec_light's Grid
        summary: list[float],
        relstrings: list[str] | None = None,
        counts: frozenset[str] = frozenset(),
    ) -> None:
        self.run_id, self.qids, self.names, self.measure_of = run_id, qids, names, measure_of
        self.values, self.summary = values, summary
        self.relstrings = [] if relstrings is None else relstrings
        self.counts = counts

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


class Plan(NamedTuple):
    """The kernels' plan of the chosen measures: rows of (kind, first and last parameter,
    first output column), flattened; the parameters; the ``pairs`` parameters, three a row;
    each output column's name and measure."""

    rows: list[int]
    params: list[float]
    pairs: list[float]
    names: list[str]
    owners: list[str]


def plan_of(chosen: dict[str, Chosen]) -> Plan:
    """The :class:`Plan` of ``chosen`` (``runid`` and ``num_q`` have a column and no row).

    >>> plan = plan_of(parse_measures(["num_q", "P.5,10"]))
    >>> plan.rows, plan.params, plan.names
    ([9, 0, 2, 1], [5.0, 10.0], ['num_q', 'P_5', 'P_10'])
    """
    plan = Plan([], [], [], [], [])
    for c in chosen.values():
        kind = c.measure.kind
        if kind < 0:
            plan.names.append(c.measure.name)
            plan.owners.append(c.measure.name)
            continue
        if c.measure.params == "pairs":
            count = len(plan.pairs) // 3
            plan.rows.extend([kind, count, count + len(c.pairs), len(plan.names)])
            plan.pairs.extend(x for row in c.pairs for x in row)
        else:
            count = len(plan.params)
            plan.rows.extend([kind, count, count + len(c.values), len(plan.names)])
            plan.params.extend(c.values)
        plan.names.extend(c.names)
        plan.owners.extend([c.measure.name] * len(c.names))
    return plan


def summary_of(
    n: int, owners: list[str], total: Callable[[int], float], relevant: int | None
) -> list[float]:
    """The ``all`` values over ``n`` queries: ``total(j)`` is column ``j`` summed in query
    order; ``relevant`` (``-c``), the qrels' judgements with a level above 0, is ``num_rel``.
    A count's ``all`` is its sum, a ``gm_*`` value's ``exp`` of the mean (its per-query values
    are logarithms), any other value's the mean.

    >>> summary_of(2, ["num_q", "map", "gm_map"], [0.0, 1.5, -2.0].__getitem__, None)
    [2.0, 0.75, 0.36787944117144233]
    """
    out: list[float] = []
    for j, owner in enumerate(owners):
        sum_j = total(j) if n else 0.0
        measure = BY_NAME[owner]
        if owner == "num_q":
            out.append(float(n))
        elif owner == "num_rel" and relevant is not None:
            out.append(float(relevant))
        elif measure.count or owner in ("runid", "relstring"):
            out.append(sum_j)
        elif measure.geometric:
            out.append(math.exp(sum_j / n))
        else:
            out.append(sum_j / n)
    return out


def pairing(
    qrels_qids: list[str], run_qids: list[str], complete: bool, only: str | None
) -> tuple[list[int], list[int], list[str]]:
    """The evaluated queries in qid order (each qrels query the run has; ``complete``: each
    qrels query; ``only``: that one alone): per query its run query (-1: absent) and qrels
    query, and the qids. None is a :class:`UserError`.

    >>> pairing(["1", "2"], ["2", "3"], False, None), pairing(["1", "2"], ["2"], True, None)
    (([0], [1], ['2']), ([-1, 0], [0, 1], ['1', '2']))
    """
    in_run = {q: i for i, q in enumerate(run_qids)}
    run_of, qrels_of, qids = [], [], []
    for i, q in enumerate(qrels_qids):
        if (only is not None and q != only) or (q not in in_run and not complete):
            continue
        run_of.append(in_run.get(q, -1))
        qrels_of.append(i)
        qids.append(q)
    if not qids:
        raise UserError(
            "no query of the run has judgements in the qrels; expected files of the same "
            "queries (or -c to average over the qrels' queries)"
        )
    return run_of, qrels_of, qids


def group_queries(
    qids: list[str], run_qids: list[str], complete: bool, only: str | None
) -> list[str]:
    """The queries of judgement groups (``-R qrels_jg``) evaluated: each of ``qids`` the run
    has (``complete``: each one; ``only``: that one alone), in their order; none is a
    :class:`UserError`.

    >>> group_queries(["1", "2"], ["2"], False, None), group_queries(["1"], [], True, None)
    (['2'], ['1'])
    """
    in_run = set(run_qids)
    chosen = [q for q in qids
              if (only is None or q == only) and (complete or q in in_run)]  # fmt: skip
    if not chosen:
        raise UserError(
            "no query of the run has judgements in the judgement groups; expected files of "
            "the same queries (or -c to average over the judgements' queries)"
        )
    return chosen


def group_plan(measures: dict[str, Chosen]) -> tuple[list[str], list[str], dict[str, Chosen]]:
    """The output columns of ``-R qrels_jg`` measures (names and owners) and the plain qrels
    measures each ``*_avgjg`` family averages, under the family's value names.

    >>> names, owners, plain = group_plan(parse_measures(["num_q", "P_avgjg.5"]))
    >>> names, owners, plain["P_avgjg"].measure.name
    (['num_q', 'P_avgjg_5'], ['num_q', 'P_avgjg'], 'P')
    """
    names: list[str] = []
    owners: list[str] = []
    plain: dict[str, Chosen] = {}
    for name, c in measures.items():
        names.extend(c.names)
        owners.extend([name] * len(c.names))
        if name in GROUP_FAMILIES:
            plain[name] = Chosen(BY_NAME[GROUP_FAMILIES[name]], c.values, c.pairs, c.names)
    return names, owners, plain

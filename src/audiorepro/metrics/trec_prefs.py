"""trec_eval's preference measures (``-R prefs``, ``-R qrels_prefs``): the ``prefs_*`` families.

**Preferences.** A query's judgements come in judgement groups (JG: one user's information
need), each of sub-groups (JSG). Inside a sub-group, a document is preferred to every document
of a lower level. A group of one sub-group keeps its levels as equivalence classes (every
line counts, a document listed twice counts twice; a document at two levels of the group is an
error); a group of several sub-groups is a set of pairs closed under transitivity (``a > b``
in one sub-group and ``b > c`` in another give ``a > c``; a pair both ways is an error, as is
a document at level 0 in one sub-group and above 0 in another). Level 0 means not relevant:
a group's ``R`` is its documents above 0, ``N`` those at or below 0.

**Order (tie rule).** The run is ranked by score descending, then docno **ascending** (byte
order: trec_eval's preference code breaks ties the other way round from its qrels measures);
``-M`` keeps the first documents; the run's ``rank`` column is ignored. A preference ``a > b``
is

- *retrieved* when both are ranked, *fulfilled* when ``a`` ranks above ``b``;
- *implied* when exactly one is ranked, fulfilled when that one is ``a``;
- *not occurring* when neither is: possible, never fulfilled.

Per group: ``ful_ret``, ``poss_ret``, ``ful_imp``, ``poss_imp`` and ``notoccur`` count these.
``counts[i, j]`` is the number of groups preferring judged document ``i`` to ``j``
(documents numbered by rank, the unranked ones after them in docno order).

``all``: the ``prefs_num_prefs_*`` counts are summed, every other value is the mean over the
queries. The definitions are written from trec_eval's sources (``form_prefs_counts.c``,
``m_prefs_*.c``) read as a specification, its quirks kept (they are named in the families'
docstrings); no code is taken from it.

**One implementation.** The groups, their counts and every family's value are computed by
``core/_trec_prefs.c`` (``atr_prefs_query`` for :func:`query_prefs`; ``atr_prefs_evaluate``,
the same code, for ``audiorepro trec-eval`` and the native program), with the operations of
the definitions below in their order: each function here documents its family and returns the
C's value. The refusals (a document at two levels, level 0 and above, cyclic preferences) are
worded here from what the C reports.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby

import numpy as np

from audiorepro.core.errors import UserError
from audiorepro.core.native import library
from audiorepro.formats.trec import Run, TrecTable
from audiorepro.formats.trec_prefs import PrefJudgement
from audiorepro.metrics.trec import Chosen, Evaluation, to_zscores

#: trec_eval's stand-in document of a query the run lacks (``-c``).
STAND_IN = "ceci_nest_pas_un_docno"


@dataclass(frozen=True)
class Group:
    """One judgement group's counts (see the module docstring): its preferences fulfilled and
    possible among ranked documents, implied and not occurring, and its relevant (level above
    0) and non-relevant documents, all and ranked."""

    ful_ret: int
    poss_ret: int
    ful_imp: int
    poss_imp: int
    notoccur: int
    num_rel: int
    num_rel_ret: int
    num_nonrel: int
    num_nonrel_ret: int


@dataclass(frozen=True)
class QueryPrefs:
    """A query's preferences against a ranking: its groups, the number of judged documents,
    how many of them are ranked (numbered first), every family's value (``values``, in
    :data:`PREFS_FAMILIES`' order) and ``pair_sums``.

    ``pair_sums``, for the ``prefs_pair`` families: the numbers of document pairs i < j with
    a preference either way, both ranked, one ranked (i ranked, j not) and neither; and the
    sums of their shares ``counts[i, j] / (counts[i, j] + counts[j, i])``, pairs taken row by
    row, the ranked ones first, in one running sum: the ranked pairs' sum, then the ranked and
    implied ones' (``atr_pair_sums`` in ``core/_trec.c``).

    >>> q = query_prefs(judgements("u s a 1; u s b 0; v s a 0; v s b 1"), ["a", "b"])
    >>> q.pair_sums
    ((1, 0, 0), (0.5, 0.5))
    """

    groups: tuple[Group, ...]
    num_judged: int
    num_judged_ret: int
    values: tuple[float, ...]
    pair_sums: tuple[tuple[int, int, int], tuple[float, float]]


#: The families in trec_eval's printing order (``core/_trec_prefs.c``'s, :data:`PREFS_FAMILIES`'):
#: ``QueryPrefs.values`` holds their values in this order.
FAMILY_ORDER = (
    "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp",
    "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
    "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp",
    "prefs_avgjg_imp",
)  # fmt: skip


def _value(q: QueryPrefs, family: str) -> float:
    """The C's value of ``family`` for the query."""
    return q.values[FAMILY_ORDER.index(family)]


def judgements(text: str) -> list[PrefJudgement]:
    """``jg jsg docno level`` items separated by ``;``: a short way to write examples.

    >>> judgements("u s a 2; u s b 0")[1]
    PrefJudgement(jg='u', jsg='s', docno='b', level=0.0)
    """
    rows = [item.split() for item in text.split(";") if item.strip()]
    return [PrefJudgement(r[0], r[1], r[2], float(r[3])) for r in rows]


def ranking(scores: dict[str, float], max_ret: int | None = None) -> list[str]:
    """The preference measures' order: score descending, then docno ascending (byte order),
    the first ``max_ret`` kept.

    >>> ranking({"b": 1.0, "a": 1.0, "c": 2.0})
    ['c', 'a', 'b']
    """
    # Strings decoded from UTF-8 compare as their bytes do (code point order).
    ordered = sorted(scores, key=lambda d: (-scores[d], d))
    return ordered[:max_ret]


def table_ranking(run: TrecTable, index: int | None, max_ret: int | None = None) -> list[str]:
    """:func:`ranking` of the query ``run.qids[index]`` of a run read as a table (its records
    of a query are already in docno order: a stable sort by score descending keeps docno
    ascending among ties); ``None``, a query the run lacks: trec_eval's stand-in document.

    >>> from audiorepro.formats.trec import table_from_dicts
    >>> run = table_from_dicts({"1": {"b": 1.0, "a": 1.0, "c": 2.0}})
    >>> table_ranking(run, 0), table_ranking(run, None)
    (['c', 'a', 'b'], ['ceci_nest_pas_un_docno'])
    """
    if index is None:
        return [STAND_IN][:max_ret]
    recs = run.order[run.start[index] : run.stop[index]]
    top = recs[np.argsort(-run.value[recs], kind="stable")][:max_ret]
    if not top.size:
        return []
    # The docnos gathered into one buffer, each followed by a newline (a docno holds no white
    # space), decoded and split once: no Python step per document.
    lens = run.doc_len[top].astype(np.int64) + 1
    ends = np.cumsum(lens)
    offset = np.repeat(run.doc_start[top] - (ends - lens), lens)
    where = np.minimum(np.arange(int(ends[-1]), dtype=np.int64) + offset, run.data.size - 1)
    joined = run.data[where]
    joined[ends - 1] = ord("\n")
    text: str = joined.tobytes().decode("utf-8")
    return text.split("\n")[:-1]


def query_prefs(lines: Sequence[PrefJudgement], ranked: Sequence[str], qid: str = "") -> QueryPrefs:
    """A query's judgement groups and their counts against the ranked docnos ``ranked``
    (compiled: ``atr_prefs_query`` in ``core/_trec_prefs.c``). Documents are numbered by
    rank, the unranked judged ones after them in docno order; lines are taken by group,
    sub-group, level descending and number.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> q.num_judged, q.num_judged_ret, [(g.ful_ret, g.poss_ret, g.ful_imp, g.poss_imp)
    ...                                  for g in q.groups]
    (3, 2, [(0, 1, 2, 2)])
    """
    judged = {line.docno for line in lines}
    ranked_judged = [d for d in ranked if d in judged]
    seen = set(ranked_judged)
    rest = sorted(d for d in judged if d not in seen)  # code point order: byte order
    number = {d: i for i, d in enumerate(ranked_judged + rest)}
    n, m, nl = len(number), len(ranked_judged), len(lines)
    # groups and sub-groups as codes in the order of their names (the C sorts by them)
    jg_code = {g: i for i, g in enumerate(sorted({x.jg for x in lines}))}
    jsg_code = {g: i for i, g in enumerate(sorted({x.jsg for x in lines}))}
    jg = array("q", [jg_code[x.jg] for x in lines] or [0])
    jsg = array("q", [jsg_code[x.jsg] for x in lines] or [0])
    ids = array("q", [number[x.docno] for x in lines] or [0])
    level = array("d", [x.level for x in lines] or [0.0])
    values, tallies = array("d", bytes(8 * len(FAMILY_ORDER))), array("q", bytes(72 * nl + 8))
    sizes, sums, error = array("q", bytes(24)), array("d", bytes(16)), array("q", bytes(32))
    ng = library().atr_prefs_query(*(a.buffer_info()[0] for a in (jg, jsg, ids, level)), nl, n,
                                   m, *(a.buffer_info()[0] for a in (values, tallies, sizes,
                                                                     sums, error)))  # fmt: skip
    if ng == -2:
        raise MemoryError("trec-eval's preference groups")
    if ng < 0:
        _refuse(lines, list(error), number, qid)
    groups = tuple(Group(*tallies[9 * g : 9 * g + 9]) for g in range(ng))
    pair_sums = ((sizes[0], sizes[1], sizes[2]), (sums[0], sums[1]))
    return QueryPrefs(groups, n, m, tuple(values), pair_sums)


def _refuse(
    lines: Sequence[PrefJudgement], error: list[int], number: dict[str, int], qid: str
) -> None:
    """The error of a query's groups, as the C reports it: its kind, the group's code, then
    a line (level 0 and above) or two document numbers (each preferred to the other)."""
    kind, jg = error[0], sorted({x.jg for x in lines})[error[1]]
    where = f"query {qid!r}, judgement group {jg!r}"
    if kind == 1:  # a document at two levels of a group of one sub-group
        group = sorted((x for x in lines if x.jg == jg), key=lambda x: (-x.level, number[x.docno]))
        members = [sorted(number[x.docno] for x in items)
                   for _, items in groupby(group, key=lambda x: x.level)]  # fmt: skip
        _two_levels(members, number, where)
    if kind == 2:
        raise UserError(f"{where}: document {lines[error[2]].docno!r} is at level 0 and above "
                        "0; expected one of the two in a group", key="-R")  # fmt: skip
    doc = {k: d for d, k in number.items()}
    raise UserError(
        f"{where}: documents {doc[error[2]]!r} and {doc[error[3]]!r} are each preferred to the "
        "other; expected consistent preferences in a group",
        key="-R",
    )


def _two_levels(members: list[list[int]], number: dict[str, int], where: str) -> None:
    """The error for a document in two classes of one sub-group: the first found taking the
    classes in order (level descending), each against the later ones, the smallest number."""
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            twice = sorted(set(a) & set(b))
            if twice:
                doc = next(d for d, k in number.items() if k == twice[0])
                raise UserError(f"{where}: document {doc!r} has two levels in one sub-group; "
                                "expected one level per document", key="-R")  # fmt: skip


def prefs_num_prefs_poss(q: QueryPrefs) -> float:
    """Possible preferences: sum over groups of ``poss_ret + poss_imp + notoccur`` (every
    preference, ranked or not). A count: ``all`` is the sum. Tie rule: independent of the
    order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_num_prefs_poss(q)  # a>b, a>c, b>c
    3.0
    """
    return _value(q, "prefs_num_prefs_poss")


def prefs_num_prefs_ful(q: QueryPrefs) -> float:
    """Fulfilled preferences, implied ones included: sum over groups of ``ful_ret +
    ful_imp``. A count. Tie rule: the module's order (docno ascending among equal scores).

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_num_prefs_ful(q)  # a>c and b>c implied (c not ranked); a>b failed
    2.0
    """
    return _value(q, "prefs_num_prefs_ful")


def prefs_num_prefs_ful_ret(q: QueryPrefs) -> float:
    """Fulfilled preferences between two ranked documents: sum over groups of ``ful_ret``. A
    count. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["a", "b"])
    >>> prefs_num_prefs_ful_ret(q)
    1.0
    """
    return _value(q, "prefs_num_prefs_ful_ret")


def prefs_simp(q: QueryPrefs) -> float:
    """Fulfilled over possible preferences, pooled over groups: sum(``ful_ret + ful_imp``) /
    sum(``poss_ret + poss_imp + notoccur``); 0 when none is possible. A pair judged by two
    groups counts twice. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_simp(q)  # 2 of 3
    0.6666666666666666
    """
    return _value(q, "prefs_simp")


def prefs_simp_ret(q: QueryPrefs) -> float:
    """:func:`prefs_simp` among ranked pairs only: sum(``ful_ret``) / sum(``poss_ret``); 0
    when no preference has both documents ranked. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_simp_ret(q)  # a>b only, failed
    0.0
    """
    return _value(q, "prefs_simp_ret")


def prefs_simp_imp(q: QueryPrefs) -> float:
    """:func:`prefs_simp` without the preferences of two unranked documents: sum(``ful_ret
    + ful_imp``) / sum(``poss_ret + poss_imp``); 0 when none. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0; u s d 0"), ["a"])
    >>> prefs_simp_imp(q)  # a>b, a>c, a>d fulfilled by implication; b>c, b>d left out
    1.0
    """
    return _value(q, "prefs_simp_imp")


def prefs_pair(q: QueryPrefs) -> float:
    """Mean over judged document pairs with a preference of the share of their preferences
    fulfilled: a pair preferred ``a > b`` by 3 groups and ``b > a`` by 2, ``a`` ranked above
    ``b``, scores 3/5; implied preferences count, a pair of two unranked documents scores 0.
    Equals :func:`prefs_simp` when no pair is judged by two groups. Tie rule: the module's
    order.

    >>> lines = judgements("u s a 1; u s b 0; v s a 0; v s b 1; w s a 1; w s c 0")
    >>> prefs_pair(query_prefs(lines, ["a", "b", "c"]))  # (a, b): 1/2; (a, c): 1
    0.75
    """
    return _value(q, "prefs_pair")


def prefs_pair_ret(q: QueryPrefs) -> float:
    """:func:`prefs_pair` over pairs of two ranked documents only. Tie rule: the module's
    order.

    >>> lines = judgements("u s a 1; u s b 0; v s a 0; v s b 1; w s a 1; w s c 0")
    >>> prefs_pair_ret(query_prefs(lines, ["a", "b"]))  # (a, b) only: 1/2
    0.5
    """
    return _value(q, "prefs_pair_ret")


def prefs_pair_imp(q: QueryPrefs) -> float:
    """:func:`prefs_pair` without the pairs of two unranked documents. Tie rule: the
    module's order.

    >>> lines = judgements("u s a 1; u s b 0; u s c 0")
    >>> prefs_pair(query_prefs(lines, [])), prefs_pair_imp(query_prefs(lines, ["c"]))
    (0.0, 0.0)
    """
    return _value(q, "prefs_pair_imp")


def prefs_avgjg(q: QueryPrefs) -> float:
    """Mean over groups of fulfilled over possible preferences: sum over groups of
    ``(ful_ret + ful_imp) / (poss_ret + poss_imp + notoccur)``, over the number of groups;
    0 unless that sum is above 0. Every user counts the same, however many preferences they
    gave. Tie rule: the module's order.

    >>> lines = judgements("u s a 1; u s b 0; v s c 2; v s d 1; v s e 0")
    >>> prefs_avgjg(query_prefs(lines, ["a", "d", "e"]))  # u: 1 of 1; v: d>e of 3
    0.6666666666666666
    """
    return _value(q, "prefs_avgjg")


def prefs_avgjg_ret(q: QueryPrefs) -> float:
    """:func:`prefs_avgjg` among ranked pairs: groups' ``ful_ret / poss_ret`` (a group with
    none contributes 0 but is counted), over the number of groups. Tie rule: the module's
    order.

    >>> lines = judgements("u s a 1; u s b 0; v s c 2; v s d 1; v s e 0")
    >>> prefs_avgjg_ret(query_prefs(lines, ["a", "d", "e"]))  # u: none, counts 0; v: 1 of 1
    0.5
    """
    return _value(q, "prefs_avgjg_ret")


def prefs_avgjg_imp(q: QueryPrefs) -> float:
    """:func:`prefs_avgjg` without the preferences of two unranked documents: groups'
    ``(ful_ret + ful_imp) / (poss_ret + poss_imp)``. Tie rule: the module's order.

    >>> lines = judgements("u s a 1; u s b 0; v s c 2; v s d 1; v s e 0")
    >>> prefs_avgjg_imp(query_prefs(lines, ["a", "d", "e"]))  # u: 1 of 1; v: d>e of 3
    0.6666666666666666
    """
    return _value(q, "prefs_avgjg_imp")


def prefs_avgjg_Rnonrel(q: QueryPrefs) -> float:
    """:func:`prefs_avgjg` with each group's non-relevant documents (level 0) counted as
    ``R`` (its relevant ones, level above 0), akin to bpref. With ``N <= R``: ``ful + num_rel_ret
    (R - N)`` over ``poss + R (R - N)`` (all counts with implied and not-occurring ones). With
    ``N > R`` the group is recounted with only its first ``R`` non-relevant documents (by
    document number). trec_eval's recount, kept: for a group of one sub-group it also pairs
    every document of its lowest class with those first ``R`` of them (fulfilled when it
    ranks above); a group whose count is 0/0 makes the query's value 0. Not kept: when that
    lowest class (negative levels) holds fewer than ``R`` documents, trec_eval reads past its
    end (undefined); here the class is taken whole. Tie rule: the module's order.

    >>> lines = judgements("u s a 1; u s b 0; u s c 0; u s d 0")
    >>> # R = 1 < N = 3: kept b, the first non-relevant; a > b, and b, c, d against b
    >>> prefs_avgjg_Rnonrel(query_prefs(lines, ["b", "a", "c"]))  # 0 of 4
    0.0
    >>> prefs_avgjg_Rnonrel(query_prefs(lines, ["a", "b", "c"]))  # a > b: 1 of 4
    0.25
    """
    return _value(q, "prefs_avgjg_Rnonrel")


def prefs_avgjg_Rnonrel_ret(q: QueryPrefs) -> float:
    """:func:`prefs_avgjg_Rnonrel` among ranked documents: ``R`` and ``N`` are the group's
    ranked relevant and non-relevant documents; with ``N <= R``: ``ful_ret + num_rel_ret (R
    - N)`` over ``poss_ret + num_rel (R - N)`` (trec_eval's ``num_rel`` there, kept); else a
    recount among ranked documents with the first ``R`` ranked non-relevant ones (a group of
    several sub-groups cuts after ``num_rel`` of them, trec_eval's rule, kept). Tie rule: the
    module's order.

    >>> lines = judgements("u s a 1; u s b 0; u s c 0; u s d 0")
    >>> prefs_avgjg_Rnonrel_ret(query_prefs(lines, ["a", "b", "c"]))  # a > b; b, c vs b
    0.3333333333333333
    """
    return _value(q, "prefs_avgjg_Rnonrel_ret")


#: The preference families in trec_eval's printing order: name -> (function, is a count).
PREFS_FAMILIES: dict[str, tuple[Callable[[QueryPrefs], float], bool]] = {
    "prefs_num_prefs_poss": (prefs_num_prefs_poss, True),
    "prefs_num_prefs_ful": (prefs_num_prefs_ful, True),
    "prefs_num_prefs_ful_ret": (prefs_num_prefs_ful_ret, True),
    "prefs_simp": (prefs_simp, False),
    "prefs_pair": (prefs_pair, False),
    "prefs_avgjg": (prefs_avgjg, False),
    "prefs_avgjg_Rnonrel": (prefs_avgjg_Rnonrel, False),
    "prefs_simp_ret": (prefs_simp_ret, False),
    "prefs_pair_ret": (prefs_pair_ret, False),
    "prefs_avgjg_ret": (prefs_avgjg_ret, False),
    "prefs_avgjg_Rnonrel_ret": (prefs_avgjg_Rnonrel_ret, False),
    "prefs_simp_imp": (prefs_simp_imp, False),
    "prefs_pair_imp": (prefs_pair_imp, False),
    "prefs_avgjg_imp": (prefs_avgjg_imp, False),
}


def evaluate_prefs(
    prefs: dict[str, list[PrefJudgement]],
    run: Run | TrecTable,
    *,
    measures: dict[str, Chosen],
    max_ret: int | None = None,
    complete: bool = False,
    only_query: str | None = None,
    zscores: dict[tuple[str, str], tuple[float, float]] | None = None,
) -> Evaluation:
    """trec_eval's evaluation under ``-R prefs`` or ``-R qrels_prefs``: every query of the
    preferences the run retrieved for (``complete``: every one, a query the run lacks ranked
    as trec_eval's one stand-in document), in qid (byte) order; ``all`` sums the counts and
    averages the rest over those queries.

    >>> from audiorepro.metrics.trec import parse_measures
    >>> prefs = {"1": judgements("u s a 2; u s b 1"), "2": judgements("u s c 1; u s d 0")}
    >>> run = Run("r", {"1": {"a": 0.2, "b": 0.9}, "2": {"c": 1.0}})
    >>> evaluate_prefs(prefs, run, measures=parse_measures(["prefs"])).all
    {'runid': 0.0, 'num_q': 2, 'prefs_num_prefs_poss': 2, 'prefs_num_prefs_ful': 1, \
'prefs_num_prefs_ful_ret': 0, 'prefs_simp': 0.5, 'prefs_pair': 0.5, 'prefs_avgjg': 0.5}
    """
    in_run = run.scores if isinstance(run, Run) else set(run.qids)
    qids = [
        q for q in prefs
        if (only_query is None or q == only_query) and (complete or q in in_run)
    ]  # fmt: skip
    if not qids:
        raise UserError(
            "no query of the run has preferences in the judgements; expected files of the "
            "same queries (or -c to average over the judgements' queries)"
        )
    names = list(measures)
    values = np.zeros((len(qids), len(names)))
    where = {q: i for i, q in enumerate(run.qids)} if isinstance(run, TrecTable) else {}
    for i, qid in enumerate(qids):
        if isinstance(run, Run):
            ranked = ranking(run.scores.get(qid, {STAND_IN: 1.0}), max_ret)
        else:  # one query's docnos at a time
            ranked = table_ranking(run, where.get(qid), max_ret)
        q = query_prefs(prefs[qid], ranked, qid)
        for j, name in enumerate(names):
            if name in PREFS_FAMILIES:
                values[i, j] = PREFS_FAMILIES[name][0](q)
    if zscores is not None:
        to_zscores(values, qids, names, zscores)
    counts = frozenset(n for n, (_, count) in PREFS_FAMILIES.items() if count) | {"num_q"}
    summary = []
    for j, name in enumerate(names):
        total = float(np.cumsum(values[:, j])[-1])
        if name == "num_q":
            summary.append(float(len(qids)))
        else:
            summary.append(total if name in counts else total / len(qids))
    run_id = run.run_id if isinstance(run, Run) else run.tag
    return Evaluation(run_id, qids, names, names, values, summary, counts=counts)

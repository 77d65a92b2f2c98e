"""The numpy implementation of the preference measures as it was before core/_trec_prefs.c
(main e6e5653, metrics/trec_prefs.py, kept verbatim below this note): the oracle that
tests/test_trec_prefs_native.py compares the C with, so that moving the Python path onto the C
cannot make the comparison vacuous. Not imported by the package."""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import groupby
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.native import library
from audiorepro.formats.trec import Run, TrecTable
from audiorepro.formats.trec_prefs import PrefJudgement
from audiorepro.metrics.trec import Chosen, Evaluation, to_zscores

Array = npt.NDArray[Any]

#: trec_eval's stand-in document of a query the run lacks (``-c``).
STAND_IN = "ceci_nest_pas_un_docno"


@dataclass(frozen=True)
class Group:
    """One judgement group: its equivalence classes (``classes``: level and judged-document
    numbers, ascending, levels descending) or, with several sub-groups, its closed preference
    matrix ``prefers`` and each document's level (``levels``, -1 where the group has none),
    and its counts (see the module docstring)."""

    classes: tuple[tuple[float, Array], ...]
    prefers: Array | None
    levels: Array | None
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
    how many of them are ranked (numbered first), and ``counts`` (groups preferring i to j)."""

    groups: tuple[Group, ...]
    num_judged: int
    num_judged_ret: int
    counts: Array

    @cached_property
    def pair_sums(self) -> tuple[tuple[int, int, int], tuple[float, float]]:
        """For the ``prefs_pair`` families: the numbers of document pairs i < j with a
        preference either way, both ranked, one ranked (i ranked, j not) and neither; and the
        sums of their shares ``counts[i, j] / (counts[i, j] + counts[j, i])``, pairs taken row
        by row, the ranked ones first, in one running sum: the ranked pairs' sum, then the
        ranked and implied ones' (compiled: ``atr_pair_sums`` in ``core/_trec.c``).

        >>> q = query_prefs(judgements("u s a 1; u s b 0; v s a 0; v s b 1"), ["a", "b"])
        >>> q.pair_sums
        ((1, 0, 0), (0.5, 0.5))
        """
        counts = np.ascontiguousarray(self.counts, np.int64)
        sums, sizes = np.zeros(2), np.zeros(3, np.int64)
        library().atr_pair_sums(counts.ctypes.data, counts.shape[0], self.num_judged_ret,
                                sums.ctypes.data, sizes.ctypes.data)  # fmt: skip
        ranked, implied, unranked = (int(x) for x in sizes.tolist())
        return (ranked, implied, unranked), (float(sums[0]), float(sums[1]))


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
    """A query's judgement groups and their counts against the ranked docnos ``ranked``.

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
    n, m = len(number), len(ranked_judged)
    counts = np.zeros((n, n), np.int64)
    rows = sorted(lines, key=lambda x: (x.jg, x.jsg, -x.level, number[x.docno]))
    groups = []
    for jg, members in groupby(rows, key=lambda x: x.jg):
        group = list(members)
        where = f"query {qid!r}, judgement group {jg!r}"
        if len({x.jsg for x in group}) > 1:
            groups.append(_matrix_group(group, number, m, counts, where))
        else:
            groups.append(_class_group(group, number, m, counts, where))
    return QueryPrefs(tuple(groups), n, m, counts)


def _class_group(
    group: list[PrefJudgement], number: dict[str, int], m: int, counts: Array, where: str
) -> Group:
    """A group of one sub-group: its levels as classes (lines sorted by level descending)."""
    members = [sorted(number[x.docno] for x in items)
               for _, items in groupby(group, key=lambda x: x.level)]  # fmt: skip
    levels = [level for level, _ in groupby(group, key=lambda x: x.level)]
    if len(set().union(*members)) < sum(len(set(ids)) for ids in members):
        _two_levels(members, number, where)
    classes = tuple((v, np.array(ids, np.int64)) for v, ids in zip(levels, members, strict=True))
    # Per pair of classes (a above b): counts[i, j] += 1 for each i of a and j of b, and the
    # five tallies (compiled: ``atr_class_pair`` in ``core/_trec.c``).
    tally = np.zeros(5, np.int64)
    lib, n = library(), counts.shape[0]
    for i, (_, a) in enumerate(classes):
        for _, b in classes[i + 1 :]:
            lib.atr_class_pair(counts.ctypes.data, n, m, a.ctypes.data, a.size,
                               b.ctypes.data, b.size, tally.ctypes.data)  # fmt: skip
    names = ("ful_ret", "poss_ret", "ful_imp", "poss_imp", "notoccur")
    tallies = dict(zip(names, (int(x) for x in tally.tolist()), strict=True))
    rel = [c for c in classes if c[0] > 0.0]
    nonrel = [c for c in classes if not c[0] > 0.0]
    return Group(
        classes, None, None, **tallies,
        num_rel=sum(c.size for _, c in rel),
        num_rel_ret=sum(int(np.count_nonzero(c < m)) for _, c in rel),
        num_nonrel=sum(c.size for _, c in nonrel),
        num_nonrel_ret=sum(int(np.count_nonzero(c < m)) for _, c in nonrel),
    )  # fmt: skip


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


def _matrix_group(
    group: list[PrefJudgement], number: dict[str, int], m: int, counts: Array, where: str
) -> Group:
    """A group of several sub-groups: the transitive closure of its sub-groups' pairs."""
    n = counts.shape[0]
    prefers = np.zeros((n, n), bool)
    levels = np.full(n, -1.0)
    for _, members in groupby(group, key=lambda x: x.jsg):
        sub = list(members)
        for x in sub:
            k, old = number[x.docno], levels[number[x.docno]]
            if (old > 0.0 and x.level == 0.0) or (old == 0.0 and x.level > 0.0):
                raise UserError(f"{where}: document {x.docno!r} is at level 0 and above 0; "
                                "expected one of the two in a group", key="-R")  # fmt: skip
            levels[k] = x.level
        ids = np.array([number[x.docno] for x in sub], np.int64)
        lv = np.array([x.level for x in sub])
        above, below = np.nonzero(lv[:, None] > lv[None, :])
        prefers[ids[above], ids[below]] = True
    np.fill_diagonal(prefers, True)
    for k in range(n):
        prefers |= np.outer(prefers[:, k], prefers[k, :])
    np.fill_diagonal(prefers, False)
    both = np.argwhere(prefers & prefers.T)
    if both.size:
        doc = {k: d for d, k in number.items()}
        a, b = int(both[0][0]), int(both[0][1])
        raise UserError(
            f"{where}: documents {doc[a]!r} and {doc[b]!r} are each preferred to the other; "
            "expected consistent preferences in a group",
            key="-R",
        )
    counts += prefers
    ret = prefers[:m, :m]
    ful_imp = int(np.count_nonzero(prefers[:m, m:]))
    return Group(
        (), prefers, levels,
        ful_ret=int(np.count_nonzero(np.triu(ret, 1))),
        poss_ret=int(np.count_nonzero(ret)),
        ful_imp=ful_imp,
        poss_imp=ful_imp + int(np.count_nonzero(prefers[m:, :m])),
        notoccur=int(np.count_nonzero(prefers[m:, m:])),
        num_rel=int(np.count_nonzero(levels > 0.0)),
        num_rel_ret=int(np.count_nonzero(levels[:m] > 0.0)),
        num_nonrel=int(np.count_nonzero(levels == 0.0)),
        num_nonrel_ret=int(np.count_nonzero(levels[:m] == 0.0)),
    )  # fmt: skip


def _ratio(ful: int, poss: int) -> float:
    """C's ``(double) ful / (double) poss``: 0/0 is NaN."""
    return ful / poss if poss else math.nan


def _mean_of_groups(q: QueryPrefs, ratio: Callable[[Group], float]) -> float:
    """trec_eval's group average: the sum of the groups' ratios over the number of groups,
    0 unless that sum is above 0 (a NaN ratio makes it 0)."""
    total = 0.0
    for g in q.groups:
        total += ratio(g)
    return total / len(q.groups) if total > 0.0 else 0.0


def prefs_num_prefs_poss(q: QueryPrefs) -> float:
    """Possible preferences: sum over groups of ``poss_ret + poss_imp + notoccur`` (every
    preference, ranked or not). A count: ``all`` is the sum. Tie rule: independent of the
    order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_num_prefs_poss(q)  # a>b, a>c, b>c
    3.0
    """
    return float(sum(g.poss_ret + g.poss_imp + g.notoccur for g in q.groups))


def prefs_num_prefs_ful(q: QueryPrefs) -> float:
    """Fulfilled preferences, implied ones included: sum over groups of ``ful_ret +
    ful_imp``. A count. Tie rule: the module's order (docno ascending among equal scores).

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_num_prefs_ful(q)  # a>c and b>c implied (c not ranked); a>b failed
    2.0
    """
    return float(sum(g.ful_ret + g.ful_imp for g in q.groups))


def prefs_num_prefs_ful_ret(q: QueryPrefs) -> float:
    """Fulfilled preferences between two ranked documents: sum over groups of ``ful_ret``. A
    count. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["a", "b"])
    >>> prefs_num_prefs_ful_ret(q)
    1.0
    """
    return float(sum(g.ful_ret for g in q.groups))


def prefs_simp(q: QueryPrefs) -> float:
    """Fulfilled over possible preferences, pooled over groups: sum(``ful_ret + ful_imp``) /
    sum(``poss_ret + poss_imp + notoccur``); 0 when none is possible. A pair judged by two
    groups counts twice. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_simp(q)  # 2 of 3
    0.6666666666666666
    """
    ful = sum(g.ful_ret + g.ful_imp for g in q.groups)
    poss = sum(g.poss_ret + g.poss_imp + g.notoccur for g in q.groups)
    return ful / poss if poss else 0.0


def prefs_simp_ret(q: QueryPrefs) -> float:
    """:func:`prefs_simp` among ranked pairs only: sum(``ful_ret``) / sum(``poss_ret``); 0
    when no preference has both documents ranked. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0"), ["b", "a"])
    >>> prefs_simp_ret(q)  # a>b only, failed
    0.0
    """
    ful = sum(g.ful_ret for g in q.groups)
    poss = sum(g.poss_ret for g in q.groups)
    return ful / poss if poss else 0.0


def prefs_simp_imp(q: QueryPrefs) -> float:
    """:func:`prefs_simp` without the preferences of two unranked documents: sum(``ful_ret
    + ful_imp``) / sum(``poss_ret + poss_imp``); 0 when none. Tie rule: the module's order.

    >>> q = query_prefs(judgements("u s a 2; u s b 1; u s c 0; u s d 0"), ["a"])
    >>> prefs_simp_imp(q)  # a>b, a>c, a>d fulfilled by implication; b>c, b>d left out
    1.0
    """
    ful = sum(g.ful_ret + g.ful_imp for g in q.groups)
    poss = sum(g.poss_ret + g.poss_imp for g in q.groups)
    return ful / poss if poss else 0.0


def _pair_ratios(q: QueryPrefs, blocks: str) -> float:
    """Mean over document pairs with a preference (either way, any group) of the share of
    the pair's preferences that the ranking fulfils; ``blocks``: ``r`` both ranked, ``i`` one
    ranked, ``n`` neither (counted, contributing 0). Sums run row by row, ranked pairs first."""
    (ranked, implied, unranked), (ranked_sum, both_sum) = q.pair_sums
    pairs = ranked + (implied if "i" in blocks else 0) + (unranked if "n" in blocks else 0)
    if not pairs:
        return 0.0
    return (both_sum if "i" in blocks else ranked_sum) / pairs


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
    return _pair_ratios(q, "rin")


def prefs_pair_ret(q: QueryPrefs) -> float:
    """:func:`prefs_pair` over pairs of two ranked documents only. Tie rule: the module's
    order.

    >>> lines = judgements("u s a 1; u s b 0; v s a 0; v s b 1; w s a 1; w s c 0")
    >>> prefs_pair_ret(query_prefs(lines, ["a", "b"]))  # (a, b) only: 1/2
    0.5
    """
    return _pair_ratios(q, "r")


def prefs_pair_imp(q: QueryPrefs) -> float:
    """:func:`prefs_pair` without the pairs of two unranked documents. Tie rule: the
    module's order.

    >>> lines = judgements("u s a 1; u s b 0; u s c 0")
    >>> prefs_pair(query_prefs(lines, [])), prefs_pair_imp(query_prefs(lines, ["c"]))
    (0.0, 0.0)
    """
    return _pair_ratios(q, "ri")


def prefs_avgjg(q: QueryPrefs) -> float:
    """Mean over groups of fulfilled over possible preferences: sum over groups of
    ``(ful_ret + ful_imp) / (poss_ret + poss_imp + notoccur)``, over the number of groups;
    0 unless that sum is above 0. Every user counts the same, however many preferences they
    gave. Tie rule: the module's order.

    >>> lines = judgements("u s a 1; u s b 0; v s c 2; v s d 1; v s e 0")
    >>> prefs_avgjg(query_prefs(lines, ["a", "d", "e"]))  # u: 1 of 1; v: d>e of 3
    0.6666666666666666
    """

    def one(g: Group) -> float:
        poss = g.poss_ret + g.poss_imp + g.notoccur
        return (g.ful_ret + g.ful_imp) / poss if poss else 0.0

    return _mean_of_groups(q, one)


def prefs_avgjg_ret(q: QueryPrefs) -> float:
    """:func:`prefs_avgjg` among ranked pairs: groups' ``ful_ret / poss_ret`` (a group with
    none contributes 0 but is counted), over the number of groups. Tie rule: the module's
    order.

    >>> lines = judgements("u s a 1; u s b 0; v s c 2; v s d 1; v s e 0")
    >>> prefs_avgjg_ret(query_prefs(lines, ["a", "d", "e"]))  # u: none, counts 0; v: 1 of 1
    0.5
    """
    return _mean_of_groups(q, lambda g: g.ful_ret / g.poss_ret if g.poss_ret else 0.0)


def prefs_avgjg_imp(q: QueryPrefs) -> float:
    """:func:`prefs_avgjg` without the preferences of two unranked documents: groups'
    ``(ful_ret + ful_imp) / (poss_ret + poss_imp)``. Tie rule: the module's order.

    >>> lines = judgements("u s a 1; u s b 0; v s c 2; v s d 1; v s e 0")
    >>> prefs_avgjg_imp(query_prefs(lines, ["a", "d", "e"]))  # u: 1 of 1; v: d>e of 3
    0.6666666666666666
    """

    def one(g: Group) -> float:
        poss = g.poss_ret + g.poss_imp
        return (g.ful_ret + g.ful_imp) / poss if poss else 0.0

    return _mean_of_groups(q, one)


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

    def one(g: Group) -> float:
        big_r, big_n = g.num_rel, g.num_nonrel
        if big_r >= big_n:
            ful = g.ful_ret + g.ful_imp + g.num_rel_ret * (big_r - big_n)
            poss = g.poss_ret + g.poss_imp + g.notoccur + g.num_rel * (big_r - big_n)
            return _ratio(ful, poss)
        return _ratio(*_recount(g, q.num_judged_ret, g.num_rel, ranked_only=False))

    return _mean_of_groups(q, one)


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

    def one(g: Group) -> float:
        big_r, big_n = g.num_rel_ret, g.num_nonrel_ret
        if big_r >= big_n:
            ful = g.ful_ret + g.num_rel_ret * (big_r - big_n)
            poss = g.poss_ret + g.num_rel * (big_r - big_n)
            return _ratio(ful, poss)
        keep = g.num_rel_ret if g.prefers is None else g.num_rel
        return _ratio(*_recount(g, q.num_judged_ret, keep, ranked_only=True))

    return _mean_of_groups(q, one)


def _recount(g: Group, m: int, keep: int, *, ranked_only: bool) -> tuple[int, int]:
    """(fulfilled, possible) of a group whose non-relevant documents beyond the first
    ``keep`` are left out (``ranked_only``: among ranked documents only)."""
    if g.prefers is None:
        return _recount_classes(g, m, keep, ranked_only=ranked_only)
    assert g.levels is not None
    limit = m if ranked_only else g.levels.size
    zero = np.flatnonzero(g.levels[:limit] == 0.0)
    first_out = int(zero[keep]) if zero.size > keep else limit
    ids = np.arange(g.levels.size)
    kept = ~((ids >= first_out) & (g.levels == 0.0))
    if ranked_only:
        kept &= ids < m
    a = g.prefers & kept[:, None] & kept[None, :]
    ful = int(np.count_nonzero(np.triu(a[:m, :m], 1))) + int(np.count_nonzero(a[:m, m:]))
    return ful, int(np.count_nonzero(a))


def _recount_classes(g: Group, m: int, keep: int, *, ranked_only: bool) -> tuple[int, int]:
    def cut(a: Array) -> Array:
        return a[a < m] if ranked_only else a

    last = cut(g.classes[-1][1][:keep])
    classes = [cut(c) for _, c in g.classes]
    ful = poss = 0
    for i, a in enumerate(classes):
        a_ret = a[a < m]
        for b in [*classes[i + 1 : -1], last]:
            won = int((b.size - np.searchsorted(b, a_ret, side="right")).sum())
            ful += won
            poss += a.size * b.size - won
    return ful, poss + ful


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

"""trec_eval's measures (:mod:`audiorepro.metrics.trec`): the reader of TREC files, the
independent reference, tie bounds over every order of tied documents, and trec_eval itself
(pytrec_eval compiles trec_eval's C code) as the oracle on generated runs.

pytrec_eval has no ``-M`` and no ``-c``: the oracle gets ``-M`` as the run cut to its first
``M`` documents in trec_eval's order (score descending, docno descending; pytrec_eval then
orders the kept documents itself), and ``-c`` as a query absent from the run given one
retrieved document that nobody judged (which changes no measure but ``num_ret``, set to 0).
pytrec_eval hands trec_eval its scores as float32, so generated scores are float32 values
(the same order in float32 and in the doubles that trec_eval and audiorepro read).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from audiorepro.core.errors import UserError
from audiorepro.formats.trec import Qrels, Run, load_qrels, load_run
from audiorepro.metrics.trec import (
    CUTOFFS,
    ORDERS,
    evaluate,
    parse_measures,
    rank_query,
)
from audiorepro.reference.trec import all_trec_values, query_values, reference_trec_eval
from tests.strategies import trec_pairs

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = (1, 2, 3, 5, 10)
CUT_NAMES = ("P", "recall", "ndcg_cut", "map_cut", "success")
ALL = parse_measures(
    ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "recip_rank", "ndcg"]
    + [f"{name}.{','.join(map(str, KS))}" for name in CUT_NAMES]
)
TREC_MEASURES = {"num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "recip_rank", "ndcg"} | {
    f"{name}.{','.join(map(str, KS))}" for name in ("P", "recall", "ndcg_cut", "map_cut", "success")
}
OPTIONS = st.fixed_dictionaries(
    {
        "level": st.sampled_from([1, 2, 3]),
        "max_ret": st.sampled_from([None, 1, 2, 3, 5]),
        "complete": st.booleans(),
    }
)


def _cut(scores: dict[str, float], max_ret: int | None) -> dict[str, float]:
    by_docno = sorted(scores, key=str.encode, reverse=True)  # greater docno (bytes) first
    kept = sorted(by_docno, key=lambda d: -scores[d])[:max_ret]
    return {d: scores[d] for d in kept}


def _oracle(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    *,
    level: int,
    max_ret: int | None,
    complete: bool,
) -> dict[str, dict[str, float]]:
    qids = sorted(q for q in qrels if complete or q in run)
    given_run = {q: _cut(run[q], max_ret) if q in run else {"~unjudged": 0.0} for q in qids}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=level)
    out = evaluator.evaluate(given_run)
    for q in qids:
        if q not in run:
            out[q]["num_ret"] = 0.0
    return {q: out[q] for q in qids}


@settings(max_examples=200, deadline=None)
@given(trec_pairs(), OPTIONS)
def test_trec_eval_itself_agrees_on_every_query(pair: tuple, options: dict) -> None:
    qrels, run = pair
    theirs = _oracle(qrels, run, **options)
    ours = evaluate(Qrels(qrels), Run("r", run), measures=ALL, **options)
    assert list(ours.queries) == list(theirs)
    for qid, values in ours.queries.items():
        assert set(values) == set(theirs[qid]), qid
        for name, value in values.items():
            # Same sums in the same order: the same double, not merely a close one.
            assert value == theirs[qid][name], (qid, name, value, theirs[qid][name])
    for name, value in ours.all.items():
        if name == "num_q":
            assert value == len(theirs)
            continue
        if name == "num_rel" and options["complete"]:
            # trec_eval's -c: the all line counts every judgement > 0 of the qrels (not -l)
            assert value == sum(v > 0 for docs in qrels.values() for v in docs.values())
            continue
        total = 0.0
        for qid in theirs:
            total += theirs[qid][name]
        expected = total if name in ours.counts else total / len(theirs)
        assert value == expected, name


@settings(max_examples=100, deadline=None)
@given(trec_pairs(), OPTIONS, st.sampled_from(ORDERS))
def test_the_reference_agrees_in_every_order(pair: tuple, options: dict, order: str) -> None:
    qrels, run = pair
    cutoffs = {name: KS for name in CUT_NAMES}
    ours = evaluate(Qrels(qrels), Run("r", run), measures=ALL, order=order, **options)  # type: ignore[arg-type]
    ref = reference_trec_eval(qrels, run, cutoffs, order=order, **options)
    for qid, values in [*ours.queries.items(), ("all", ours.all)]:
        for name, value in values.items():
            assert value == pytest.approx(ref[qid][name], abs=1e-12), (qid, name)


def _every_order(scores: dict[str, float]) -> list[dict[str, float]]:
    """Every order of the tied documents, as distinct scores that keep the untied order."""
    groups = [
        [d for d in scores if scores[d] == s] for s in sorted(set(scores.values()), reverse=True)
    ]
    orders = []
    for choice in itertools.product(*(itertools.permutations(g) for g in groups)):
        flat = [d for group in choice for d in group]
        orders.append({d: float(len(flat) - i) for i, d in enumerate(flat)})
    return orders


@settings(max_examples=30, deadline=None)
@given(trec_pairs(max_queries=1, max_docs=6), OPTIONS)
def test_tie_bounds_are_the_extremes_over_every_order_of_ties(pair: tuple, options: dict) -> None:
    qrels, run = pair
    (qid,) = qrels
    assume(qid in run and len(set(run[qid].values())) < len(run[qid]))  # some tie
    cutoffs = {name: KS for name in CUT_NAMES}
    kwargs = {"level": options["level"], "max_ret": options["max_ret"]}
    every = [query_values(s, qrels[qid], cutoffs, **kwargs) for s in _every_order(run[qid])]
    for order, pick in (("optimistic", max), ("pessimistic", min)):
        ours = evaluate(
            Qrels(qrels),
            Run("r", run),
            measures=ALL,
            order=order,
            **kwargs,  # type: ignore[arg-type]
        )
        for name, value in ours.queries[qid].items():
            extreme = pick(v[name] for v in every)
            assert value == pytest.approx(extreme, abs=1e-12), (order, name)


def test_ties_go_to_the_greater_docno_by_bytes() -> None:
    ranked = rank_query({"d10": 1.0, "d9": 1.0, "D3": 1.0, "e": 2.0}, {"d9": 1})
    assert ranked == (-1, 1, -1, -1)  # e, then d9 > d10 > D3 (uppercase sorts first)


def test_parse_measures_follows_trec_eval_s_rules() -> None:
    assert parse_measures(["all_trec"])["ndcg_cut"].values == CUTOFFS
    assert parse_measures(["success.20,2"])["success"].names == ("success_2", "success_20")
    # the first parameters given for a measure are kept, wherever it was marked
    assert parse_measures(["all_trec", "P.5"])["P"].names == ("P_5",)
    assert parse_measures(["P.5", "P.10"])["P"].names == ("P_5",)
    # atol reads cutoffs: 23.4 is 23
    assert parse_measures(["ndcg_cut.23.4"])["ndcg_cut"].names == ("ndcg_cut_23",)
    assert parse_measures(["ndcg.1=3,2=9"])["ndcg"].names == ("ndcg_1=3,2=9",)
    assert parse_measures(["map.5"])["map"].names == ("map",)  # parameters ignored
    for bad, expected in [
        ("bogus", "unknown measure 'bogus'"),
        ("P.0", "not positive"),
        ("P.5,5", "duplicate cutoffs"),
        ("P.", "empty parameters"),
        ("ndcg.1=3,2", "malformed pair"),
        ("utility.1,2", "4 coefficients"),
    ]:
        with pytest.raises(UserError, match=expected):
            parse_measures([bad])


def test_no_common_query_is_one_error() -> None:
    with pytest.raises(UserError, match="no query of the run has judgements"):
        evaluate(Qrels({"1": {"a": 1}}), Run("r", {"2": {"a": 1.0}}), measures=ALL)


def test_the_reader_ignores_comments_and_trailing_run_fields(
    tmp_path: Path,
) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("# a comment\n\n1 0 b 1\n1\t0\ta\t-1\n")
    assert load_qrels(qrels).judged == {"1": {"b": 1, "a": -1}}
    run = tmp_path / "run"
    run.write_text("1 Q0 b 1 2.5 tagA reserved\n1 Q0 a 2 1e2 tagB\n")
    assert load_run(run) == Run("tagB", {"1": {"b": 2.5, "a": 100.0}})  # the last line's tag


def test_a_query_judged_only_negatively_scores_zero() -> None:
    out = evaluate(Qrels({"1": {"a": -1}}), Run("r", {"1": {"a": 1.0}}), measures=ALL)
    assert out.queries["1"]["num_rel"] == 0 and out.queries["1"]["num_ret"] == 1
    assert all(v == 0 for k, v in out.queries["1"].items() if k != "num_ret")


NDCG_NAMES = ("ndcg", *(f"ndcg_cut_{k}" for k in KS))


@settings(max_examples=30, deadline=None)
@given(trec_pairs(max_queries=1, max_docs=6), OPTIONS)
def test_tie_averaged_ndcg_is_the_mean_over_every_order_within_the_bounds(
    pair: tuple, options: dict
) -> None:
    """McSherry and Najork's value is the mean of nDCG over every order of the tied documents
    (all orders equally likely), so it lies between the pessimistic and optimistic bounds."""
    qrels, run = pair
    (qid,) = qrels
    assume(qid in run)
    cutoffs = {"ndcg_cut": KS}
    kwargs = {"level": options["level"], "max_ret": options["max_ret"]}
    every = [query_values(s, qrels[qid], cutoffs, **kwargs) for s in _every_order(run[qid])]
    values = {
        order: evaluate(Qrels(qrels), Run("r", run), measures=ALL, order=order, **kwargs).queries[  # type: ignore[arg-type]
            qid
        ]
        for order in ("average", "pessimistic", "optimistic")
    }
    for name in NDCG_NAMES:
        mean = math.fsum(v[name] for v in every) / len(every)
        assert values["average"][name] == pytest.approx(mean, abs=1e-12), name
        assert values["pessimistic"][name] - 1e-12 <= values["average"][name]
        assert values["average"][name] <= values["optimistic"][name] + 1e-12


GRADED_TIES = st.lists(
    st.tuples(st.integers(0, 3), st.integers(-2, 2).map(lambda v: v / 2)), min_size=2, max_size=9
).filter(lambda docs: any(g > 0 for g, _ in docs))


@settings(max_examples=60, deadline=None)
@given(GRADED_TIES)
def test_tie_averaged_ndcg_agrees_with_scikit_learn(docs: list[tuple[int, float]]) -> None:
    """scikit-learn's ``ndcg_score`` (ties averaged by default) on graded levels with many
    score ties, every document judged and retrieved (so both have the same ideal list)."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    qrels = {"q": {f"d{i}": g for i, (g, _) in enumerate(docs)}}
    run = {"q": {f"d{i}": s for i, (_, s) in enumerate(docs)}}
    y_true, y_score = [[g for g, _ in docs]], [[s for _, s in docs]]
    ours = evaluate(Qrels(qrels), Run("r", run), measures=ALL, order="average").queries["q"]
    assert ours["ndcg"] == pytest.approx(sklearn_metrics.ndcg_score(y_true, y_score), abs=1e-12)
    for k in KS:
        theirs = sklearn_metrics.ndcg_score(y_true, y_score, k=k)
        assert ours[f"ndcg_cut_{k}"] == pytest.approx(theirs, abs=1e-12), k


ALL_TREC = parse_measures(["all_trec"])


@settings(max_examples=150, deadline=None)
@given(trec_pairs(), st.sampled_from([1, 2, 3]))
def test_the_reference_agrees_on_every_other_all_trec_family(pair: tuple, level: int) -> None:
    """bpref, infAP, iprec_at_recall, 11pt_avg, Rprec_mult, utility, relative_P, unj, binG, G,
    ndcg_rel, Rndcg, the set measures, num_nonrel_judged_ret, rbp and rbp_resid against
    :func:`all_trec_values`, written from their definitions."""
    qrels, run = pair
    assume(all(any(v >= 0 for v in docs.values()) for docs in qrels.values()))
    ours = evaluate(Qrels(qrels), Run("r", run), measures=ALL_TREC, level=level)
    for qid, values in ours.queries.items():
        rels = list(rank_query(run[qid], qrels[qid], level=level))
        ref = all_trec_values(rels, list(qrels[qid].values()), level=level)
        for name, expected in ref.items():
            assert values[name] == pytest.approx(expected, abs=1e-9), (qid, name)


NOT_BOUNDED = ("G", "unj_", "rbp_resid", "infAP", "num_nonrel_judged_ret")


@settings(max_examples=40, deadline=None)
@given(trec_pairs(max_queries=1, max_docs=6), OPTIONS)
def test_tie_bounds_of_every_other_family_are_the_extremes(pair: tuple, options: dict) -> None:
    """The bounds of the all_trec families that grow when a relevant or higher-gain document
    moves up are the extremes over every order of the ties (docs/retrieval.md names the
    others, whose columns are not bounds)."""
    qrels, run = pair
    (qid,) = qrels
    assume(qid in run and len(set(run[qid].values())) < len(run[qid]))
    kwargs = {"level": options["level"], "max_ret": options["max_ret"]}
    every = [
        evaluate(Qrels(qrels), Run("r", {qid: s}), measures=ALL_TREC, **kwargs).queries[qid]  # type: ignore[arg-type]
        for s in _every_order(run[qid])
    ]
    for order, pick in (("optimistic", max), ("pessimistic", min)):
        ours = evaluate(Qrels(qrels), Run("r", run), measures=ALL_TREC, order=order, **kwargs)  # type: ignore[arg-type]
        for name, value in ours.queries[qid].items():
            if not name.startswith(NOT_BOUNDED):
                extreme = pick(v[name] for v in every)
                assert value == pytest.approx(extreme, abs=1e-12), (order, name)

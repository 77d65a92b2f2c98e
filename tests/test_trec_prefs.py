"""trec_eval's preference (``-R prefs``, ``qrels_prefs``) and judgement-group (``-R qrels_jg``)
measures: the fast code against its reference twin on generated judgements, hand-checked
cases, and bad input as one line (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.trec import Run, table_from_dicts
from audiorepro.formats.trec_prefs import PrefJudgement
from audiorepro.metrics.trec import parse_measures
from audiorepro.metrics.trec_groups import evaluate_groups
from audiorepro.metrics.trec_prefs import (
    PREFS_FAMILIES,
    evaluate_prefs,
    judgements,
    query_prefs,
    ranking,
)
from audiorepro.reference.trec_prefs import reference_avgjg, reference_prefs
from tests.test_hostile import _one_line

DOCS = [f"d{i}" for i in range(7)]


@st.composite
def consistent_prefs(draw: st.DrawFn) -> tuple[list[PrefJudgement], dict[str, float]]:
    """Judgement groups drawn from one hidden level per document and group (so that no group
    contradicts itself), each of one or more sub-groups, and a run with tied scores."""
    lines: list[PrefJudgement] = []
    for g in range(draw(st.integers(1, 3))):
        hidden = {d: draw(st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.0])) for d in DOCS}
        for s in range(draw(st.integers(1, 3))):
            docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=5))
            lines += [PrefJudgement(f"g{g}", f"s{s}", d, hidden[d]) for d in docs]
    ranked = draw(st.lists(st.sampled_from([*DOCS, "x"]), unique=True, max_size=7))
    scores = {d: float(draw(st.integers(0, 2))) for d in ranked}
    return lines, scores


@settings(max_examples=300, deadline=None)
@given(consistent_prefs(), st.sampled_from([None, 2, 4]))
def test_every_prefs_family_equals_its_reference(
    case: tuple[list[PrefJudgement], dict[str, float]], max_ret: int | None
) -> None:
    lines, scores = case
    try:
        q = query_prefs(lines, ranking(scores, max_ret))
    except UserError:  # a document at two levels of one single-sub-group group
        return
    ref = reference_prefs([tuple(x) for x in lines], scores, max_ret=max_ret)  # type: ignore[misc]
    for name, (family, _) in PREFS_FAMILIES.items():
        assert family(q) == pytest.approx(ref[name], abs=1e-12, nan_ok=True), name


def test_the_ranking_breaks_ties_by_docno_ascending() -> None:
    # trec_eval's preference code: score descending, then docno ascending (qrels measures:
    # docno descending); a > b is fulfilled only when a comes first.
    q = query_prefs(judgements("u s a 1; u s b 0"), ranking({"b": 1.0, "a": 1.0}))
    assert (q.groups[0].ful_ret, q.groups[0].poss_ret) == (1, 1)


def test_sub_groups_are_closed_under_transitivity() -> None:
    # a > b in one sub-group, b > c in another: a > c too (3 preferences), all fulfilled.
    q = query_prefs(judgements("u s1 a 2; u s1 b 1; u s2 b 2; u s2 c 1"), ["a", "b", "c"])
    assert (q.groups[0].ful_ret, q.groups[0].poss_ret) == (3, 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("u s1 a 2; u s1 b 1; u s2 b 2; u s2 a 1", "each preferred to the other"),
        ("u s1 a 2; u s1 b 0; u s2 b 1; u s2 c 0", "level 0 and above 0"),
        ("u s a 2; u s a 1", "two levels in one sub-group"),
    ],
)
def test_inconsistent_groups_are_refused(text: str, expected: str) -> None:
    with pytest.raises(UserError, match=expected):
        query_prefs(judgements(text), ["a"], "q1")


def test_complete_ranks_trec_eval_s_stand_in_for_a_missing_query() -> None:
    prefs = {"1": judgements("u s a 1; u s b 0"), "2": judgements("u s c 1; u s d 0")}
    run = Run("r", {"1": {"a": 1.0, "b": 0.5}})
    chosen = parse_measures(["num_q", "prefs_simp", "prefs_num_prefs_poss"])
    ev = evaluate_prefs(prefs, run, measures=chosen, complete=True)
    assert ev.queries["2"] == {"prefs_simp": 0.0, "prefs_num_prefs_poss": 1}
    assert ev.all == {"num_q": 2, "prefs_simp": 0.5, "prefs_num_prefs_poss": 2}


@st.composite
def judgement_groups(draw: st.DrawFn) -> tuple[dict[str, dict[str, int]], dict[str, float]]:
    groups = {
        f"g{g}": draw(st.dictionaries(st.sampled_from(DOCS), st.integers(-1, 2), min_size=1))
        for g in range(draw(st.integers(1, 3)))
    }
    ranked = draw(st.lists(st.sampled_from([*DOCS, "x"]), unique=True, min_size=1))
    return groups, {d: float(draw(st.integers(0, 2))) for d in ranked}


@settings(max_examples=200, deadline=None)
@given(judgement_groups(), st.sampled_from([1, 2]))
def test_the_avgjg_families_equal_their_reference(
    case: tuple[dict[str, dict[str, int]], dict[str, float]], level: int
) -> None:
    groups, scores = case
    chosen = parse_measures(["map_avgjg", "P_avgjg.1,3,10", "Rprec_mult_avgjg.0.5,1,2"])
    ev = evaluate_groups({"q": groups}, table_from_dicts({"q": scores}, "r"), measures=chosen,
                         level=level)  # fmt: skip
    ref = reference_avgjg(groups, scores, cutoffs=(1, 3, 10), multiples=(0.5, 1.0, 2.0),
                          level=level)  # fmt: skip
    assert ev.queries["q"] == pytest.approx(ref, abs=1e-12)


PREFS = "q1 u s a 2\nq1 u s b 0\n"
RUN = "q1 Q0 a 1 0.5 r\nq1 Q0 b 2 0.9 r\n"


@pytest.mark.parametrize(
    ("rel_format", "judged", "expected"),
    [
        ("prefs", "q1 u s a 2\nq1 u b 0\n", ["line 2 has 4 fields", "expected 5"]),
        ("prefs", "# nothing\n", ["no judgement"]),
        ("qrels_prefs", "q1 u s a 2\n", ["line 1 has 5 fields", "expected 4"]),
        ("qrels_jg", "q1 u a 1\nq1 u a 0\n", ["line 2", "'a'", "judged twice"]),
        ("prefs", b"q1 u s \xff 1\n", ["not UTF-8"]),
    ],
)
def test_a_malformed_judgement_file_is_one_line(
    tmp_path: Path,
    rel_format: str,
    judged: str | bytes,
    expected: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad, run = tmp_path / "bad-judgements", tmp_path / "run"
    bad.write_bytes(judged.encode() if isinstance(judged, str) else judged)
    run.write_text(RUN)
    measure = "qrels_jg" if rel_format == "qrels_jg" else "all_prefs"
    code = main(["trec-eval", "-R", rel_format, "-m", measure, str(bad), str(run)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == ""
    _one_line(captured.err, bad.name, *expected)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["-R", "prefs", "-m", "map"], "measure 'map' reads -R qrels"),
        (["-R", "qrels_jg", "-m", "prefs"], "reads -R prefs or -R qrels_prefs"),
        (["-R", "prefs", "-m", "prefs", "--tie-bounds"], "tie bounds are not defined"),
        (["-R", "xml"], "judgement format 'xml'"),
    ],
)
def test_a_measure_of_another_format_is_one_line(
    tmp_path: Path, options: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefs, run = tmp_path / "prefs", tmp_path / "run"
    prefs.write_text(PREFS)
    run.write_text(RUN)
    assert main(["trec-eval", *options, str(prefs), str(run)]) == 2
    _one_line(capsys.readouterr().err, expected)


def test_the_command_prints_trec_eval_s_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefs, run = tmp_path / "prefs", tmp_path / "run"
    prefs.write_text(PREFS)
    run.write_text(RUN)
    assert main(["trec-eval", "-R", "prefs", "-m", "prefs_simp", str(prefs), str(run)]) == 0
    assert capsys.readouterr().out == "prefs_simp            \tall\t0.0000\n"


def test_every_family_has_a_formula_a_tie_rule_and_a_doctest() -> None:
    from audiorepro.metrics import trec, trec_groups

    for m in trec.MEASURES:
        if m.judgements == "qrels":
            text = trec.family_docstring(m)
        elif m.judgements == "prefs":
            text = PREFS_FAMILIES[m.name][0].__doc__ or ""
        else:
            text = (trec_groups.__doc__ or "") + (trec_groups.evaluate_groups.__doc__ or "")
        assert m.doc, m.name
        assert "Tie rule" in text or "ranked as for qrels" in text, m.name
        assert ">>> " in text, m.name


@pytest.mark.parametrize("space", ["\x1c", "\x85", "\xa0", "\u2003", "\u3000"])
def test_judgement_fields_split_on_c_whitespace_only(tmp_path: Path, space: str) -> None:
    """A character Python's ``str.split`` takes for white space but C's ``isspace`` does not
    stays inside its field, as in trec_eval (the decoded-text fast path must not split it)."""
    from audiorepro.formats.trec_prefs import read_prefs, read_qrels_jg

    prefs = tmp_path / "prefs"
    prefs.write_text(f"q1 u s a{space}b 2\nq1 u s c 0\n", encoding="utf-8")
    assert [j.docno for j in read_prefs(prefs)["q1"]] == [f"a{space}b", "c"]
    jg = tmp_path / "qrels_jg"
    jg.write_text(f"q1 u{space}v a 1\n", encoding="utf-8")
    assert read_qrels_jg(jg) == {"q1": {f"u{space}v": {"a": 1}}}
    broken = tmp_path / "broken"
    broken.write_text("q1 u s a\t2\x0bx\n", encoding="utf-8")  # \v is C white space: 6 fields
    with pytest.raises(UserError, match="line 1 has 6 fields"):
        read_prefs(broken)

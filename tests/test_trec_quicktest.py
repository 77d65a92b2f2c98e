"""``audiorepro trec-eval`` reproduces trec_eval's own quicktest (its Makefile's commands on its
test files, vendored in ``fixtures/trec`` with PROVENANCE.md): every line of its quicktest
target, each expected output file whole, byte for byte, with the same flags (the preference and
judgement-group cases, ``-R prefs``/``qrels_prefs``/``qrels_jg``, included)."""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path

import pytest

from audiorepro.cli import main

TREC = Path(__file__).resolve().parent.parent / "fixtures" / "trec"

#: The quicktest target of trec_eval's Makefile at the pinned commit (PROVENANCE.md), its 15
#: command lines verbatim: ``./trec_eval OPTIONS QRELS RUN | diff - EXPECTED``.
QUICKTEST = """
./trec_eval test/qrels.test test/results.test | diff - test/out.test
./trec_eval test/qrels.test.with-comments test/results.test | diff - test/out.test
./trec_eval test/qrels.comment.test test/results.comment.test | diff - test/out.comment.test
./trec_eval -m all_trec test/qrels.test test/results.test | diff - test/out.test.a
./trec_eval -m all_trec -q test/qrels.test test/results.test | diff - test/out.test.aq
./trec_eval -m all_trec -q -c test/qrels.test test/results.trunc | diff - test/out.test.aqc
./trec_eval -m all_trec -q -c -M100 test/qrels.test test/results.trunc | diff - test/out.test.aqcM
./trec_eval -m all_trec -mrelstring.20 -q -l2 test/qrels.rel_level test/results.test | diff - test/out.test.aql
./trec_eval -m all_prefs -q -R prefs test/prefs.test test/prefs.results.test | diff - test/out.test.prefs
./trec_eval -m all_prefs -q -R prefs test/prefs.comment.test test/prefs.results.test | diff - test/out.test.prefs
./trec_eval -m all_prefs -q -R qrels_prefs test/qrels.test test/results.test | diff - test/out.test.qrels_prefs
./trec_eval -m qrels_jg -q -R qrels_jg  test/qrels.123 test/results.test | diff - test/out.test.qrels_jg
./trec_eval -m qrels_jg -q -R qrels_jg  test/qrels.comments.123 test/results.test | diff - test/out.test.qrels_jg
./trec_eval -q -miprec_at_recall..10,.20,.25,.75,.50 -m P.5,7,3 -m recall.20,2000 -m Rprec_mult.5.0,0.2,0.35 -mutility.2,-1,0,0 -m 11pt_avg..25,.5,.75 -mndcg.1=3,2=9,4=4.5 -mndcg_cut.10,20,23.4 -msuccess.2,5,20 test/qrels.test test/results.test | diff - test/out.test.meas_params
./trec_eval -q -m all_trec -Z test/zscores_file test/qrels.test test/results.test | diff - test/out.test.aqZ
"""  # noqa: E501 (the Makefile's lines, whole)


def _case(line: str) -> tuple[str, list[str]]:
    """(expected output, trec-eval arguments) of one quicktest line, the ``test/`` files
    taken from fixtures/trec."""
    command, _, check = line.partition(" | ")
    argv = shlex.split(command)
    assert argv[0] == "./trec_eval" and check.startswith("diff - test/"), line
    files = [str(TREC / a.removeprefix("test/")) if a.startswith("test/") else a
             for a in argv[1:]]  # fmt: skip
    return check.removeprefix("diff - test/"), files


CASES = [_case(line) for line in QUICKTEST.strip().splitlines()]


def test_every_quicktest_line_is_a_case() -> None:
    assert len(CASES) == 15
    assert {expected for expected, _ in CASES} == {
        p.name for p in TREC.iterdir() if p.name.startswith("out.")
    }


def test_the_vendored_files_are_trec_eval_s() -> None:
    sums = (TREC / "SHA256SUMS").read_text().split("\n")
    listed = [line.split() for line in sums if line]
    assert len(listed) == 25
    for digest, name in listed:
        assert hashlib.sha256((TREC / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize(("expected", "argv"), CASES)
def test_trec_eval_quicktest_outputs_are_reproduced_whole(
    expected: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["trec-eval", *argv])
    out = capsys.readouterr().out
    assert code == 0
    assert out.encode() == (TREC / expected).read_bytes()


def test_the_run_is_read_from_standard_input_with_a_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import sys

    data = (TREC / "results.test").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["trec-eval", str(TREC / "qrels.test"), "-"]) == 0
    assert capsys.readouterr().out == (TREC / "out.test").read_text()


def test_tie_bounds_add_a_pessimistic_and_an_optimistic_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 a 1\n1 0 b 0\n1 0 c 2\n")
    run = tmp_path / "run"
    run.write_text("1 Q0 a 1 0.5 r\n1 Q0 b 2 0.5 r\n1 Q0 c 3 0.1 r\n1 Q0 d 4 0.1 r\n")
    assert main(["trec-eval", "--tie-bounds", "-m", "map", "-m", "P.1", str(qrels), str(run)]) == 0
    # trec order b, a (docno), d, c; pessimistic b, a, d, c; optimistic a, b, c, d.
    assert capsys.readouterr().out.splitlines() == [
        "measure               \tquery\ttrec\tpessimistic\toptimistic",
        "map                   \tall\t0.5000\t0.5000\t0.8333",
        "P_1                   \tall\t0.0000\t0.0000\t1.0000",
    ]
    # nDCG adds its tie-averaged value: ranks 1-2 each hold the mean gain 1/2, ranks 3-4 the
    # mean gain 1 (of 2 and 0): (1/2 (1 + 1/log2 3) + 1/log2 4 + 1/log2 5) / (2 + 1/log2 3);
    # the bounds: (1/log2 3 + 2/log2 5) / (2 + 1/log2 3) and (1 + 2/log2 4) / (2 + 1/log2 3).
    assert main(["trec-eval", "--tie-bounds", "-m", "ndcg", str(qrels), str(run)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "measure               \tquery\ttrec\tpessimistic\toptimistic\ttie-averaged (ndcg)",
        "ndcg                  \tall\t0.5672\t0.5672\t0.7602\t0.6637",
    ]


def _readme_commands() -> list[list[str]]:
    text = (TREC.parent.parent / "docs" / "retrieval.md").read_text()
    section = text.split("## TREC runs: `trec-eval`", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_commands_run_as_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(TREC.parent.parent)
    commands = _readme_commands()
    assert len(commands) == 3
    outputs = []
    for argv in commands:
        assert argv[0] == "audiorepro"
        assert main(argv[1:]) == 0, argv
        outputs.append(capsys.readouterr().out.splitlines())
    for out, name in zip(outputs[:2], ["out.test", "out.test.aqcM"], strict=True):
        assert out == (TREC / name).read_text().splitlines()
    assert outputs[2][0].split("\t")[1:] == ["query", "trec", "pessimistic", "optimistic",
                                             "tie-averaged (ndcg)"]  # fmt: skip
    for line in outputs[2][1:]:  # nDCG's lines add the tie-averaged value
        assert len(line.split("\t")) == (6 if line.startswith("ndcg") else 5), line

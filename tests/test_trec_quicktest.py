"""``audiorepro trec-eval`` reproduces trec_eval's own quicktest (its Makefile's commands on its
test files, vendored in ``fixtures/trec`` with PROVENANCE.md): each expected output file whole,
byte for byte, with the same flags (the preference and judgement-group cases, which need
``-R prefs``/``qrels_prefs``/``qrels_jg``, are not run: see PROVENANCE.md)."""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path

import pytest

from audiorepro.cli import main

TREC = Path(__file__).resolve().parent.parent / "fixtures" / "trec"

#: (expected output, qrels, run, options): the quicktest target of trec_eval's Makefile.
CASES = [
    ("out.test", "qrels.test", "results.test", []),
    ("out.test", "qrels.test.with-comments", "results.test", []),
    ("out.comment.test", "qrels.comment.test", "results.comment.test", []),
    ("out.test.a", "qrels.test", "results.test", ["-m", "all_trec"]),
    ("out.test.aq", "qrels.test", "results.test", ["-m", "all_trec", "-q"]),
    ("out.test.aqc", "qrels.test", "results.trunc", ["-m", "all_trec", "-q", "-c"]),
    ("out.test.aqcM", "qrels.test", "results.trunc", ["-m", "all_trec", "-q", "-c", "-M100"]),
    (
        "out.test.aql",
        "qrels.rel_level",
        "results.test",
        ["-m", "all_trec", "-mrelstring.20", "-q", "-l2"],
    ),
    (
        "out.test.meas_params",
        "qrels.test",
        "results.test",
        [
            "-q", "-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m",
            "recall.20,2000", "-m", "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m",
            "11pt_avg..25,.5,.75", "-mndcg.1=3,2=9,4=4.5", "-mndcg_cut.10,20,23.4",
            "-msuccess.2,5,20",
        ],
    ),
    ("out.test.aqZ", "qrels.test", "results.test", ["-q", "-m", "all_trec", "-Z", "zscores_file"]),
]  # fmt: skip


def test_the_vendored_files_are_trec_eval_s() -> None:
    sums = (TREC / "SHA256SUMS").read_text().split("\n")
    listed = [line.split() for line in sums if line]
    assert len(listed) == 17
    for digest, name in listed:
        assert hashlib.sha256((TREC / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize(("expected", "qrels", "run", "options"), CASES)
def test_trec_eval_quicktest_outputs_are_reproduced_whole(
    expected: str, qrels: str, run: str, options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    options = [str(TREC / o) if o == "zscores_file" else o for o in options]
    code = main(["trec-eval", *options, str(TREC / qrels), str(TREC / run)])
    out = capsys.readouterr().out
    assert code == 0
    assert out == (TREC / expected).read_text()


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

"""Hostile TREC files for ``audiorepro trec-eval``: each is one line on stderr naming the file
and what was expected, exit 2, nothing on stdout (reusing test_hostile's one-line check)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.formats.trec import MAX_LINE_BYTES
from tests.test_hostile import _one_line

QRELS = "1 0 a 1\n1 0 b 0\n"
RUN = "1 Q0 a 1 0.9 r\n1 Q0 b 2 0.1 r\n"


def _write(text: str | bytes) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path

    return make


def _huge_line(path: Path) -> Path:
    with open(path, "wb") as f:  # 100 MB on one line, written in pieces
        f.write(b"1 Q0 a 1 0.5 ")
        for _ in range(100):
            f.write(b"x" * (1 << 20))
        f.write(b"\n")
    return path


#: (which file is bad, how it is made, what the one line must say)
CASES = {
    "run-5-fields": ("run", _write("1 Q0 a 1 0.9\n"), ["line 1 has 5 fields", "expected 6"]),
    "run-score-nan": ("run", _write(RUN + "1 Q0 c 3 NaN r\n"), ["line 3", "'score'", "finite"]),
    "run-score-inf": ("run", _write("1 Q0 c 3 -inf r\n"), ["line 1", "'score'", "finite"]),
    "run-duplicate-docno": ("run", _write(RUN + "1 Q0 a 3 0.5 r\n"), ["line 3", "'a'", "twice"]),
    "run-empty": ("run", _write(""), ["no retrieved document"]),
    "run-only-comments": ("run", _write("# nothing\n\n"), ["no retrieved document"]),
    "run-binary": (
        "run",
        _write(b"\x93NUMPY\x01\x00v\x00{'descr': '<f4'}\x00\xff\xfe"),
        ["line 1"],
    ),
    "run-not-utf8": ("run", _write(b"1 Q0 \xff 1 0.5 r\n"), ["line 1", "UTF-8"]),
    "run-100mb-line": ("run", _huge_line, ["line 1", f"longer than {MAX_LINE_BYTES} bytes"]),
    "run-folder": ("run", lambda p: (p.mkdir(), p)[1], ["folder"]),
    "run-missing": ("run", lambda p: p, ["no such file"]),
    "qrels-3-fields": ("qrels", _write("1 0 a\n"), ["line 1 has 3 fields", "expected 4"]),
    "qrels-5-fields": ("qrels", _write("1 0 a 1 extra\n"), ["line 1 has 5 fields"]),
    "qrels-duplicate": ("qrels", _write(QRELS + "1 0 b 2\n"), ["line 3", "'b'", "judged twice"]),
    "qrels-empty": ("qrels", _write(""), ["no judgement"]),
    "qrels-binary": ("qrels", _write(bytes(range(256))), ["line 1"]),
    "no-common-query": ("run", _write("2 Q0 a 1 0.5 r\n"), ["no query of the run"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_trec_file_is_one_line(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    which, make, expected = CASES[case]
    files = {
        "qrels": _write(QRELS)(tmp_path / "qrels.txt"),
        "run": _write(RUN)(tmp_path / "run.txt"),
    }
    files[which].unlink()
    bad = make(tmp_path / f"bad-{which}")
    files[which] = bad
    code = main(["trec-eval", str(files["qrels"]), str(files["run"])])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == ""
    names = [] if case == "no-common-query" else [bad.name]
    _one_line(captured.err, *names, *expected)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["-m", "prefs_simp"], "measure 'prefs_simp' reads -R prefs"),
        (["-m", "bogus_measure"], "unknown measure 'bogus_measure'"),
        (["-m", "P.0"], "not positive"),
        (["-m", "P.5,5"], "duplicate cutoffs"),
        (["-M", "0"], "-M"),
        (["-R", "prefs"], "-R"),
        (["-T", "xml"], "-T"),
    ],
)
def test_bad_options_are_one_line(
    tmp_path: Path, options: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _write(QRELS)(tmp_path / "q"), _write(RUN)(tmp_path / "r")
    assert main(["trec-eval", *options, str(qrels), str(run)]) == 2
    _one_line(capsys.readouterr().err, expected)


def test_the_valid_base_files_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = _write(QRELS)(tmp_path / "q"), _write(RUN)(tmp_path / "r")
    assert main(["trec-eval", "-m", "map", str(qrels), str(run)]) == 0
    assert capsys.readouterr().out == "map                   \tall\t1.0000\n"


def test_numbers_are_read_as_trec_eval_s_atol_and_atof(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """trec_eval reads a level with atol and a score with atof: the leading number, 0 when
    there is none; the rank is not read. ``0.5`` as a level is 0, ``high`` as a score 0."""
    qrels = _write("1 0 a 0.5\n1 0 b 2x\n1 0 c +1\n")(tmp_path / "q")
    run = _write("1 Q0 a first high r\n1 Q0 b 2 0.1e1junk r\n1 Q0 c 3 .5 r\n")(tmp_path / "r")
    assert main(["trec-eval", "-q", "-m", "relstring", "-m", "num_rel", str(qrels), str(run)]) == 0
    # scores a: 0, b: 1.0, c: 0.5 -> order b, c, a; levels b: 2, c: 1, a: 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "num_rel               \t1\t2",
        "relstring             \t1\t'210'",
    ]


def test_scores_are_the_correctly_rounded_doubles(tmp_path: Path) -> None:
    """Short decimals are read by the scanner, long ones by Python's float: both the double
    nearest the decimal, as glibc's strtod gives trec_eval."""
    import random

    from audiorepro.formats.trec import read_table

    rng = random.Random(7)
    texts = [repr(rng.uniform(-1e3, 1e3)) for _ in range(300)]
    texts += [f"{rng.random():.{rng.randint(1, 25)}f}" for _ in range(300)]
    texts += [f"{rng.randint(1, 99)}e{rng.randint(-40, 40)}" for _ in range(100)]
    texts += ["-0", "+.5", "7.", "1e400x"[:4], "00012.50e+1"]
    run = tmp_path / "r"
    run.write_text("".join(f"1 Q0 d{i} 1 {t} r\n" for i, t in enumerate(texts)))
    table = read_table(run, run=True)
    by_line = dict(zip(table.line.tolist(), table.value.tolist(), strict=True))
    for i, text in enumerate(texts, start=1):
        assert by_line[i] == float(text), text

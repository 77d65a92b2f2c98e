"""``audiorepro trec-eval``'s two paths give the same bytes: the numpy-free one
(``formats/trec_light.py``, ``metrics/trec_light.py``: what a ``-R qrels`` run takes) and the
numpy one (``read_table`` and ``metrics.trec.evaluate``: ``-Z``, the other judgement formats,
unusual files), on every recorded case (trec_eval's quicktest and the seeded recordings), and
a run on the light path imports no numpy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main, trec_work
from audiorepro.formats import trec as trec_format
from audiorepro.formats import trec_light
from tests.test_trec_eval_binary import RECORD, SEEDED
from tests.test_trec_quicktest import CASES

#: Every recorded ``-R qrels`` and ``-R qrels_jg`` case: (name, trec-eval arguments).
LIGHT_CASES = [(expected, argv) for expected, argv in CASES
               if "-R" not in argv or "qrels_jg" in argv] + [
    (path, [*argv[:-2], str(SEEDED / path.split("/")[0] / argv[-2]),
            str(SEEDED / path.split("/")[0] / argv[-1])])
    for path, _, argv in RECORD if "-R" not in argv or "qrels_jg" in argv
]  # fmt: skip


def _both(argv: list[str], monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> tuple[str, str, list[bool]]:  # fmt: skip
    """The output of each path, and whether the light one evaluated (per call)."""
    taken: list[bool] = []
    for name in ("_light_evaluations", "_light_groups"):
        light = getattr(trec_work, name)

        def spy(*args: Any, light: Any = light, **kwargs: Any) -> Any:
            result = light(*args, **kwargs)
            taken.append(result is not None)
            return result

        monkeypatch.setattr(trec_work, name, spy)
    assert main(["trec-eval", *argv]) == 0
    fast = capsys.readouterr().out
    monkeypatch.setattr(trec_work, "LIGHT", False)
    assert main(["trec-eval", *argv]) == 0
    slow = capsys.readouterr().out
    return fast, slow, taken


def test_every_recorded_case_of_the_light_formats_is_counted() -> None:
    # quicktest lines without -R and with -R qrels_jg; the seeded qrels and qrels_jg lists
    assert len(LIGHT_CASES) == 10 + 2 + 12 * 12 + 12 * 3


@pytest.mark.parametrize(("name", "argv"), LIGHT_CASES, ids=[c[0] for c in LIGHT_CASES])
def test_both_paths_print_the_same_bytes(
    name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    fast, slow, taken = _both(argv, monkeypatch, capsys)
    assert fast == slow
    assert taken == ([] if "-Z" in argv else [True])  # -Z alone takes the numpy path


@pytest.mark.parametrize("options", [["--tie-bounds", "-m", "all_trec"], ["-q", "-D", "1.3"]])
def test_tie_bounds_and_one_query_agree(
    options: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [str(SEEDED / "runs-04" / "qrels"), str(SEEDED / "runs-04" / "run")]
    qids = trec_format.read_table(files[0], run=False).qids
    if "-D" in options:
        options = ["-q", "-D", f"1.{qids[1]}"]
    fast, slow, taken = _both([*options, *files], monkeypatch, capsys)
    assert fast == slow and taken == [True] and fast


def _unusual_files(tmp: Path) -> dict[str, tuple[str, str]]:
    """Files the light reader leaves to read_table: (qrels, run) texts."""
    qrels, run = "1 0 a 1\n1 0 b 0\n2 0 c 2\n", "1 Q0 a 1 0.5 r\n1 Q0 b 2 0.25 r\n2 Q0 c 1 1 r\n"
    return {
        "five fields": (qrels, run + "2 Q0 d 2 1\n"),
        "a docno twice": (qrels, run + "1 Q0 a 3 0.1 r\n"),
        "non-ASCII docno": (qrels + "2 0 \u00e9t\u00e9 1\n", run + "2 Q0 \u00e9t\u00e9 2 3 r\n"),
        "a level out of range": (qrels + "2 0 z 1000001\n", run),
        "a score overflowing": (qrels, run + "2 Q0 d 2 1e999 r\n"),
        "an empty run": (qrels, "# nothing\n"),
        "17-digit scores": (qrels, run + "2 Q0 d 2 0.12345678901234567 r\n2 Q0 e 3 0x1p-2 r\n"),
    }


@pytest.mark.parametrize("case", sorted(_unusual_files(Path())))
def test_unusual_files_take_the_numpy_path_with_its_message(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = _unusual_files(tmp_path)[case]
    (tmp_path / "q").write_text(qrels)
    (tmp_path / "r").write_text(run)
    argv = ["trec-eval", "-q", "-m", "all_trec", str(tmp_path / "q"), str(tmp_path / "r")]
    first = main(argv), capsys.readouterr()
    monkeypatch.setattr(trec_work, "LIGHT", False)
    second = main(argv), capsys.readouterr()
    assert first == second
    # The 17-digit and hexadecimal scores are read by the light path itself (c_atof).
    assert (first[0] == 0) == (case in ("non-ASCII docno", "17-digit scores"))


@pytest.mark.parametrize("run", [False, True])
@pytest.mark.parametrize("folder", ["runs-00", "runs-07"])
def test_the_two_readers_give_the_same_table(folder: str, run: bool) -> None:
    path = SEEDED / folder / ("run" if run else "qrels")
    light, table = trec_light.read_light(path, run=run), trec_format.read_table(path, run=run)
    assert light.qids == table.qids and light.tag == table.tag
    assert bytes(light.data[: table.data.size]) == table.data.tobytes()
    n = table.value.size
    for mine, theirs in [(light.doc_start, table.doc_start), (light.doc_len, table.doc_len),
                         (light.value, table.value), (light.start, table.start),
                         (light.stop, table.stop), (light.order, table.order)]:  # fmt: skip
        assert np.array_equal(np.asarray(mine)[: len(theirs)], theirs)
        assert len(theirs) in (n, len(table.qids))
    if not run:
        assert np.array_equal(np.asarray(light.levels), table.value.astype(np.int64))


def test_the_light_reader_s_limits_are_read_table_s() -> None:
    assert trec_light.MAX_LINE_BYTES == trec_format.MAX_LINE_BYTES
    assert trec_light.MAX_LEVEL == trec_format.MAX_LEVEL


_PROBE = (
    "import json, sys\n"
    "from audiorepro.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


@pytest.mark.parametrize("options", [["-q", "-m", "all_trec"], ["-m", "map", "-m", "ndcg_cut.10"]])
def test_a_qrels_run_imports_no_numpy(options: list[str]) -> None:
    """The whole trec-eval run, in a fresh process, without numpy (nor any other numeric
    stack); the same output as the recorded one."""
    folder = SEEDED / "runs-02"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "trec-eval", *options, str(folder / "qrels"),
         str(folder / "run")],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert done.stdout.count("\n") > 1
    heavy = ("numpy", "numba", "scipy", "click", "dataclasses")
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []


#: Every recorded command line (all judgement formats) and a few more trec_eval users write.
COMMAND_LINES = [argv for _, argv in CASES] + [argv for _, _, argv in RECORD] + [
    ["-q", "-M5", "-l", "2", "-N", "100", "-J", "-n", "-D", "1.q7", "-T", "trec_results", "q",
     "r"],
    ["--tie-bounds", "-mmap", "q", "-m", "P.5", "r", "-l0", "-M", "07"],
]  # fmt: skip


@pytest.mark.parametrize("argv", COMMAND_LINES)
def test_the_click_free_start_reads_what_click_reads(argv: list[str]) -> None:
    """:mod:`audiorepro.cli.trec_fast` gives trec_work the values click gives it."""
    from audiorepro.cli import trec_fast
    from audiorepro.cli.trec import trec_eval_command

    mine = trec_fast.parse(["trec-eval", *argv])
    assert mine is not None, argv
    assert mine == trec_eval_command.make_context("trec-eval", list(argv)).params


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["-h"], ["-qc", "q", "r"], ["q", "-"], ["-M", "0", "q", "r"],
     ["-l", "-1", "q", "r"], ["-l", "x", "q", "r"], ["-N", "1_0", "q", "r"], ["q"],
     ["q", "r", "x"], ["--", "q", "r"],
     ["-x", "q", "r"], ["--tie", "q", "r"], ["-m"], ["q", "r", "-m"], ["-m", "", "q", "r"]],
)  # fmt: skip
def test_anything_else_goes_through_click(argv: list[str]) -> None:
    from audiorepro.cli import trec_fast

    assert trec_fast.parse(["trec-eval", *argv]) is None
    assert trec_fast.parse(["trec_eval", "q", "r"]) is None


def test_both_starts_answer_a_bad_file_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from audiorepro.cli.app import main as click_main

    (tmp_path / "q").write_text("1 0 a 1\n")
    argv = ["trec-eval", str(tmp_path / "q"), str(tmp_path / "missing")]
    answers = []
    for entry in (main, click_main):
        code = entry(argv)
        answers.append((code, capsys.readouterr()))
    assert answers[0] == answers[1] and answers[0][0] == 2
    assert "missing" in answers[0][1].err


@pytest.mark.parametrize(
    ("case", "judgements"),
    [
        ("groups apart, control-byte qids", "1\x01 u a 1\n1 v b 1\n1 u b 0\n10 u a 2\n1 u c 1\n"),
        ("a docno twice in one group", "1 u a 1\n1 v a 0\n1 u a 2\n"),
        ("tab-separated", "1\tu\ta\t1\n1 u  b 1\n1\tv c 2\n"),
    ],
)
def test_judgement_groups_agree_on_both_paths(
    case: str, judgements: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Each (qid, group) of the light reader is a query keyed by its two fields: groups in
    (qid, group) order whatever bytes the qids hold, lines of a group apart in the file
    gathered, a docno judged twice in one group refused with read_qrels_jg's message."""
    (tmp_path / "jg").write_text(judgements)
    (tmp_path / "r").write_text("1 Q0 a 1 2 r\n1 Q0 b 2 1 r\n1\x01 Q0 a 1 1 r\n10 Q0 c 1 1 r\n")
    argv = ["trec-eval", "-q", "-c", "-R", "qrels_jg", "-m", "qrels_jg", str(tmp_path / "jg"),
            str(tmp_path / "r")]  # fmt: skip
    first = main(argv), capsys.readouterr()
    monkeypatch.setattr(trec_work, "LIGHT", False)
    assert (main(argv), capsys.readouterr()) == first
    assert first[0] == (2 if "twice" in case else 0)

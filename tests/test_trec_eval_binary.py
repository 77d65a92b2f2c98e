"""``audiorepro trec-eval`` against trec_eval itself on seeded files: whole outputs equal under
every option both accept, for qrels (``-m all_trec`` and measures with parameters) and for the
three other judgement formats (``-R prefs``, ``-R qrels_prefs``, ``-R qrels_jg``).

Two comparisons, each on the same seeded inputs (``tools/record_trec_eval.py`` writes them):

- **recorded, on every run (CI included)**: trec_eval's whole outputs, recorded once with a
  binary built by its default ``make`` from the commit named in ``fixtures/trec/PROVENANCE.md``,
  are committed in ``fixtures/trec/seeded/`` with the exact command and a SHA-256 of each
  (``RECORD``; ``PROVENANCE.md`` there says how they were made). The inputs must be the bytes
  the seeds write, and each output the bytes its hash names, before audiorepro's output is
  compared with it.
- **live, where ``$TREC_EVAL_SRC`` (a checkout of usnistgov/trec_eval at that commit; gcc and
  make needed) or ``$TREC_EVAL`` (a built binary) is set**: the binary is built from that
  source, and both its outputs on the seeded inputs and a re-recording of the whole fixture
  folder must equal the committed ones. Without either these tests skip, saying why; CI sets
  neither.

The source is not carried here (no trec_eval code is copied into audiorepro).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from audiorepro.cli import main
from tests.conftest import ROOT

SEEDED = ROOT / "fixtures" / "trec" / "seeded"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "record_trec_eval", ROOT / "tools" / "record_trec_eval.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
RECORD = TOOL.read_record(SEEDED)


def test_the_record_is_whole_and_its_inputs_are_the_seeds() -> None:
    """Every seed and option list is recorded (12 seeds x 12 qrels option lists + 12 x 7
    option lists of the other formats), each file its SHA256SUMS hash, each output its
    RECORD hash, each input the bytes the seeds write."""
    assert len(RECORD) == 12 * (12 + 7)
    assert TOOL.check_committed(SEEDED) == []


def test_the_tools_check_command_as_written() -> None:
    """``python tools/record_trec_eval.py --check`` (its docstring's line, PROVENANCE.md)."""
    import sys

    done = subprocess.run(
        [sys.executable, "tools/record_trec_eval.py", "--check"], cwd=ROOT, capture_output=True,
        text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(": 228 recorded outputs agree\n")


def test_a_changed_input_output_or_stray_file_is_named(tmp_path: Path) -> None:
    copy = tmp_path / "seeded"
    shutil.copytree(SEEDED, copy)
    (copy / "runs-03" / "out.01").write_bytes(b"runid \tall\tother\n")
    (copy / "prefs-05" / "prefs").write_text("p0 u0 s0 d1 1\n")
    (copy / "runs-00" / "stray").write_text("x\n")
    assert TOOL.check_committed(copy) == [
        "prefs-05/prefs: SHA-256 differs from SHA256SUMS",
        "runs-03/out.01: SHA-256 differs from SHA256SUMS",
        "runs-00/stray: not in SHA256SUMS",
        "prefs-05/prefs: the seeds write other bytes",
    ]


def _compare(folder: str, capsys: pytest.CaptureFixture[str]) -> None:
    """RECORD's commands of one folder through ``audiorepro trec-eval``: the same options, the
    judgements and the run (its last two arguments) taken from that folder."""
    for path, digest, argv in _rows(folder):
        expected = (SEEDED / path).read_bytes()
        assert hashlib.sha256(expected).hexdigest() == digest, path
        *options, judged, run = argv
        files = [str(SEEDED / folder / judged), str(SEEDED / folder / run)]
        assert main(["trec-eval", *options, *files]) == 0, path
        assert capsys.readouterr().out.encode() == expected, (path, argv)


def _rows(folder: str) -> list[tuple[str, str, list[str]]]:
    return [row for row in RECORD if row[0].startswith(folder + "/")]


@pytest.mark.parametrize("seed", range(12))
def test_whole_outputs_equal_trec_eval_s_recorded_outputs(
    seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = f"runs-{seed:02d}"
    assert len(_rows(folder)) == len(TOOL.OPTIONS)
    _compare(folder, capsys)


@pytest.mark.parametrize("seed", range(12))
def test_preference_and_group_outputs_equal_trec_eval_s_recorded_outputs(
    seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = f"prefs-{seed:02d}"
    assert len(_rows(folder)) == len(TOOL.PREFS_OPTIONS)
    _compare(folder, capsys)


def _binary(tmp: Path) -> Path:
    given = os.environ.get("TREC_EVAL")
    if given:
        return Path(given)
    source = os.environ.get("TREC_EVAL_SRC")
    if not source:
        pytest.skip(
            "the live comparison needs $TREC_EVAL (a binary) or $TREC_EVAL_SRC (its source); "
            "the tests named *_recorded_outputs compare the recorded ones"
        )
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("$TREC_EVAL_SRC is set but gcc or make is missing")
    build = tmp / "trec_eval_src"
    shutil.copytree(source, build, ignore=shutil.ignore_patterns(".git", "trec_eval"))
    subprocess.run(["make"], cwd=build, check=True, capture_output=True)
    return build / "trec_eval"


@pytest.fixture(scope="module")
def trec_eval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _binary(tmp_path_factory.mktemp("trec_eval"))


def test_trec_eval_built_from_source_records_the_committed_outputs(
    trec_eval: Path, tmp_path: Path
) -> None:
    """The live binary re-records the whole folder: the same RECORD, the same bytes."""
    TOOL.record(trec_eval, tmp_path)
    assert (tmp_path / "RECORD").read_text() == (SEEDED / "RECORD").read_text()
    assert (tmp_path / "SHA256SUMS").read_text() == (SEEDED / "SHA256SUMS").read_text()


@pytest.mark.parametrize("seed", range(12))
def test_whole_outputs_equal_trec_eval_s(
    seed: int, trec_eval: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    TOOL.write_runs(tmp_path, seed)
    for options in TOOL.OPTIONS:
        argv = [*options, str(tmp_path / "qrels"), str(tmp_path / "run")]
        theirs = subprocess.run([str(trec_eval), *argv], capture_output=True, check=True)
        assert main(["trec-eval", *argv]) == 0
        assert capsys.readouterr().out == theirs.stdout.decode(), options


@pytest.mark.parametrize("seed", range(12))
def test_preference_and_group_outputs_equal_trec_eval_s(
    seed: int, trec_eval: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    TOOL.write_prefs(tmp_path, seed)
    for options in TOOL.PREFS_OPTIONS:
        argv = [*options, str(tmp_path / TOOL.judgements(options)), str(tmp_path / "run")]
        theirs = subprocess.run([str(trec_eval), *argv], capture_output=True, check=True)
        assert main(["trec-eval", *argv]) == 0
        assert capsys.readouterr().out == theirs.stdout.decode(), options

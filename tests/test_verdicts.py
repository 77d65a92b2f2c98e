"""Verdicts that say what happened (issue 23): NOT VERIFIED (exit 1), never FAIL, when no
value could be checked; one line per cell and reason, with a count; each missing input names
the command that gets it; a passing ``verify OUT`` says what it checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audiorepro.cli import main
from tests.conftest import ROOT
from tests.test_outputs_folder import _reproduce, _rewrite_record, _study


def test_published_values_without_dumps_are_not_verified_with_the_commands_to_make_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = ROOT / "golden" / "published" / "clap_retrieval.toml"
    assert main(["verify", "--golden", str(golden), "--dumps", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "NOT VERIFIED  0 passed, 0 failed, 32 not verified"
    assert len(lines) == 5 and len(set(lines)) == 5  # one line per cell, not 32
    for line in lines[:-1]:
        assert line.startswith("NOT VERIFIED") and " 8 values (" in line, line
        assert "audiorepro extract --model laion/clap-htsat-" in line, line
    assert (
        sum("audiorepro fetch laion/clap-htsat-fused clotho-eval --data DATA," in x for x in lines)
        == 1
    )
    assert (
        sum("fetch laion/clap-htsat-unfused audiocaps-test --data DATA --audio" in x for x in lines)
        == 1
    )


def test_the_clap_study_without_its_data_names_the_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    study = ROOT / "studies" / "clap_retrieval.toml"
    if (study.parent / "data").exists():
        pytest.skip("studies/data is present: this checks the checkout without data")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert main(["verify", str(study)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("NOT VERIFIED  0 passed, 0 failed, 32 not verified")
    data = study.parent / "data"
    assert sum(f"audiorepro fetch clotho-eval --data {data};" in x for x in lines) == 2
    assert sum(f"fetch audiocaps-test --data {data} --audio" in x for x in lines) == 2


def _verdict(out: str) -> str:
    """``verify OUT``'s verdict line: its last line, the results tables above it (as
    docs/studies.md says: ``| tail -1`` is the verdict)."""
    lines = out.splitlines()
    (table,) = [i for i, line in enumerate(lines) if ": results (" in line]
    assert table < len(lines) - 1
    return lines[-1]


def test_a_passing_output_folder_says_what_was_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    last = _verdict(capsys.readouterr().out)
    n = len([p for p in out.rglob("*") if p.is_file()]) - 1  # all but the manifest
    assert last == (
        f"PASS  8 passed, 0 failed, 0 not verified; checked {n}/{n} files against the "
        "manifest, parity 2/2, identity 0/0, published 8/8"
    )


def test_a_failed_value_is_a_fail_whatever_else_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path, value=0.5), out) == 1
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert _verdict(capsys.readouterr().out).startswith("FAIL  7 passed, 2 failed")


def _no_published(study: Path) -> Path:
    """The study without its published values: a dump to recompute, nothing to compare."""
    text = study.read_text()
    study.write_text(text[: text.index("[[published]]")])
    return study


def test_verify_of_a_study_with_nothing_to_check_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A study with dumps and no published value: verify checks nothing, so its verdict says
    that (exit 1) and names what would give it something to check; never PASS."""
    study = _no_published(_study(tmp_path))
    assert main(["verify", str(study), "--json", str(tmp_path / "v.json")]) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("NOTHING CHECKED  0 passed, 0 failed, 0 not verified; ")
    assert "[[published]]" in last and "PASS" not in last
    assert json.loads((tmp_path / "v.json").read_text())["passed"] is False


def test_verify_out_of_a_run_with_nothing_checked_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files that match their manifest prove the folder intact, not a number: a run with no
    published value that recorded no check is NOTHING CHECKED; one whose parity ran passes."""
    out = tmp_path / "out"
    assert _reproduce(_no_published(_study(tmp_path)), out) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0  # metric parity ran on both cells: checked
    assert _verdict(capsys.readouterr().out).startswith("PASS  0 passed, 0 failed")
    record = json.loads((out / "verification.json").read_text())
    record["metric_parity"]["cells"] = []
    _rewrite_record(out, metric_parity=record["metric_parity"])
    assert main(["verify", str(out)]) == 1
    last = _verdict(capsys.readouterr().out)
    assert last.startswith("NOTHING CHECKED  0 passed, 0 failed, 0 not verified; checked ")
    assert "parity 0/0" in last and "add published values" in last


def test_verify_out_ends_with_its_verdict_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("PASS  8 passed")
    assert any(": results (bundle.json.gz)" in line for line in lines[:-1])
    shell = subprocess.run(
        f'"{sys.executable}" -m audiorepro verify "{out}" | tail -1',
        shell=True, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert shell.stdout.startswith("PASS  8 passed"), shell.stdout

"""``--cells PATTERN`` and ``--device`` on ``reproduce`` and ``verify STUDY`` (issue 23):
checked before any work, recorded in the bundle, the manifest and the report; a study run
whole on its own devices writes what it wrote before (the golden tests hold its bytes)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from audiorepro.cli import main
from tests.test_outputs_folder import _study


def _bundle(out: Path) -> dict[str, object]:
    return json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))  # type: ignore[no-any-return]


def test_help_shows_both(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("reproduce", "verify"):
        assert main([command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "--cells PATTERN" in text and "--device cpu|cuda|cuda:N" in text


@pytest.mark.parametrize("device", ["bogus", "meta", "cuda:x", "CPU"])
@pytest.mark.parametrize("command", ["reproduce", "verify"])
def test_a_bogus_device_is_one_line_before_any_work(
    tmp_path: Path, device: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, str(_study(tmp_path)), "--device", device]
    argv += ["--out", str(tmp_path / "out")] if command == "reproduce" else []
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"audiorepro: error: '--device': is '{device}'; expected cpu, cuda or cuda:N"
    assert not (tmp_path / "out").exists()


def test_a_bogus_device_in_a_study_file_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "x"\n[[cell]]\nid = "c"\nmodel = "m"\n'
        'dataset = "d"\nextract = { model = "m", audio = "a", captions = "c.csv", '
        'device = "meta" }\n'
    )
    assert main(["verify", str(study)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "device" in err and "cuda:N" in err, err


def test_a_part_of_a_study_runs_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["reproduce", str(_study(tmp_path)), "--out", str(out), "--cells", "f*"]
    assert main([*argv, "--device", "cuda:1"]) == 0
    bundle = _bundle(out)
    expected = {"cells": "f*", "device": "cuda:1", "ran": ["five"], "of": ["five", "one"]}
    assert bundle["selection"] == {**expected, "partial": True}
    assert [c["id"] for c in bundle["cells"]] == ["five"]  # type: ignore[attr-defined]
    assert json.loads((out / "manifest.json").read_text())["selection"] == expected
    report = (out / "report.html").read_text()
    assert "A part of the study</strong>: 1 of its 2 cells (--cells f*): five." in report
    assert "Models ran on --device cuda:1." in report
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0


def test_a_whole_study_records_no_selection(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", str(_study(tmp_path)), "--out", str(out)]) == 0
    assert "selection" not in _bundle(out)
    assert "selection" not in json.loads((out / "manifest.json").read_text())
    assert "A part of the study" not in (out / "report.html").read_text()


@pytest.mark.parametrize("command", ["reproduce", "verify"])
def test_a_pattern_matching_no_cell_lists_the_cells(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, str(_study(tmp_path)), "--cells", "nothing*"]
    argv += ["--out", str(tmp_path / "out")] if command == "reproduce" else []
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith("its cells: five, one"), err
    assert not (tmp_path / "out").exists()


def test_verify_a_part_of_a_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = _study(tmp_path, value=0.5)  # cell five's published t2a/r@1 is wrong
    # cell one has no published value: nothing checked, which is never a pass (issue 35)
    assert main(["verify", str(study), "--cells", "one"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("NOTHING CHECKED")
    assert main(["verify", str(study), "--cells", "five"]) == 1
    assert "FAIL         five  t2a/r@1" in capsys.readouterr().out

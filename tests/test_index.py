"""``OUT/README.txt``: the output folder's index (:mod:`audiorepro.runner.output.index`), an output
like any other: listed in the manifest, checked by ``verify``, covered by the signature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audiorepro.cli import main
from tests.test_core_install import _dump_study
from tests.test_sign import _cryptography_pair


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run" / "out"
    (tmp_path / "run").mkdir()
    assert main(["reproduce", str(_dump_study(tmp_path / "run")), "--out", str(out)]) == 0
    return out


def test_the_index_names_every_entry_and_is_listed(run: Path) -> None:
    text = (run / "README.txt").read_text()
    assert text.startswith('audiorepro output folder of the study "core".\n')
    for entry in ("report.html", "verification.json", "bundle.json.gz", "tables/", "manifest.json"):
        assert f"\n{entry} " in text, entry
    assert str(run) not in text and str(run.parent) not in text  # no path: same bytes anywhere
    manifest = json.loads((run / "manifest.json").read_text())
    assert "README.txt" in manifest["outputs"]


def test_the_index_is_the_same_bytes_in_another_folder(run: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "out2"
    (tmp_path / "elsewhere").mkdir()
    assert main(["reproduce", str(_dump_study(tmp_path / "elsewhere")), "--out", str(other)]) == 0
    assert (other / "README.txt").read_bytes() == (run / "README.txt").read_bytes()


def test_verify_and_sign_cover_the_index(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _cryptography_pair(tmp_path, "pem")
    assert main(["sign", str(run), "--key", str(key.private)]) == 0
    assert main(["verify", str(run), "--key", str(key.public)]) == 0
    capsys.readouterr()
    with (run / "README.txt").open("a") as f:
        f.write("an extra line\n")
    assert main(["verify", str(run), "--key", str(key.public)]) == 1
    lines = capsys.readouterr().out.splitlines()
    verdict = [line for line in lines if line.startswith("FAIL  0 passed, 2 failed")]
    failed = [line for line in lines if line.startswith("FAIL") and line not in verdict]
    assert len(verdict) == 1 and len(failed) == 2, lines
    assert all("README.txt" in line for line in failed), failed

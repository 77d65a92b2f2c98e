"""A core install (no extras): `reproduce` of a study of dumps runs without the model stack."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.core.progress import progress_bar
from tests.conftest import FIXTURES


def _dump_study(tmp: Path) -> Path:
    dump = tmp / "dumps" / "synthetic_1cap.npz"
    dump.parent.mkdir()
    shutil.copy(FIXTURES / "dumps" / "synthetic_1cap.npz", dump)
    sha = hashlib.sha256(dump.read_bytes()).hexdigest()
    study = tmp / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "core"\n\n[[cell]]\nid = "s/1cap"\n'
        f'model = "synthetic"\ndataset = "s"\ndump = "dumps/synthetic_1cap.npz"\nsha256 = "{sha}"\n'
    )
    return study


def test_reproduce_without_tqdm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # tqdm comes with the models extra only: a core install must run, without bars.
    monkeypatch.setitem(sys.modules, "tqdm", None)
    out = tmp_path / "out"
    assert main(["reproduce", str(_dump_study(tmp_path)), "--out", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert (out / "verification.json").is_file() and (out / "report.html").is_file()


def test_progress_bar_without_tqdm_returns_the_items(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a terminal without tqdm: no bar (in a log the stage lines need no tqdm).
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr("audiorepro.core.progress._is_tty", lambda stream: True)
    items = [1, 2, 3]
    assert progress_bar(items, "stage", enabled=True) is items

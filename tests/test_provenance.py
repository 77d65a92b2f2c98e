"""Git provenance in every layout (issue 23): the manifest's commit is the checkout's HEAD
when audiorepro runs from a clone (``PYTHONPATH=src``, as the tests do, or an editable
install), the commit a wheel was built from (stamped by ``setup.py``), or the image's
``REVISION``; "not from a git checkout" only when none of these holds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from audiorepro.runner.output.manifest import PACKAGE, checkout_of, git_provenance
from tests.conftest import ROOT
from tests.test_outputs_folder import _reproduce, _study


def _head(repo: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_run_from_the_checkout_records_its_head(tmp_path: Path) -> None:
    """From the clone (``PYTHONPATH=src``, an editable install) the checkout is found; in the
    tox env the package is the wheel tox built from this clone, stamped with its HEAD."""
    from_source = PACKAGE == ROOT / "src" / "audiorepro"
    assert (checkout_of(PACKAGE) == ROOT) if from_source else (checkout_of(PACKAGE) is None)
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    git = json.loads((out / "manifest.json").read_text())["git"]
    assert git["commit"] == _head(ROOT) and isinstance(git["dirty"], bool)
    assert git["source"] == ("checkout" if from_source else "wheel build")


def test_a_package_inside_another_repository_is_not_its_checkout(tmp_path: Path) -> None:
    """A wheel installed in a virtualenv that sits in some other clone: that clone's HEAD is
    not this code's commit."""
    package = tmp_path / ".venv" / "lib" / "site-packages" / "audiorepro"
    package.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    assert checkout_of(package) is None
    got = git_provenance(package)
    assert got == {"commit": None, "dirty": None, "note": "not from a git checkout"}


def test_the_image_revision_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIOREPRO_REVISION", "0123abc")
    assert git_provenance(tmp_path) == {
        "commit": "0123abc",
        "dirty": None,
        "source": "image REVISION",
    }
    monkeypatch.setenv("AUDIOREPRO_REVISION", "unknown")  # the Dockerfile's default
    assert git_provenance(tmp_path)["note"] == "not from a git checkout"
    assert "AUDIOREPRO_REVISION=${REVISION}" in (ROOT / "Dockerfile").read_text()


@pytest.mark.slow
def test_a_wheel_built_from_a_checkout_records_its_commit(tmp_path: Path) -> None:
    """``pip wheel`` of a clone (seconds): the wheel holds ``audiorepro/_build_info.json``
    with the clone's HEAD, and the installed package reports it, away from any checkout."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "wheel"), str(clone)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("audiorepro-*.whl")
    with zipfile.ZipFile(wheel) as z:
        stamp = json.loads(z.read("audiorepro/_build_info.json"))
        record = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/RECORD")))
        z.extractall(tmp_path / "site")
    assert stamp == {"commit": _head(clone), "dirty": False}
    assert b"audiorepro/_build_info.json" in record
    shutil.rmtree(clone)  # no checkout left to find
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    env.pop("AUDIOREPRO_REVISION", None)
    code = "from audiorepro.runner.output.manifest import git_provenance; print(git_provenance())"
    got = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
        cwd=tmp_path,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.strip() == repr(
        {"commit": stamp["commit"], "dirty": False, "source": "wheel build"}
    )

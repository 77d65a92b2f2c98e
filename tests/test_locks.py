"""The hashed locks agree with pyproject.toml, and the environment check reads them right."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audiorepro.checks.locks import LOCKS, check_lock, environment_differences, read_lock
from tests.conftest import ROOT

PYPROJECT = ROOT / "pyproject.toml"
TRIO = {"torch": "2.9.1", "torchvision": "0.24.1", "torchaudio": "2.9.1"}


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_lock_agrees_with_pyproject(name: str) -> None:
    problems = check_lock(PYPROJECT, ROOT / "requirements" / name, LOCKS[name])
    assert problems == [], f"run `python tools/lock.py`: {problems}"


@pytest.mark.parametrize("name", [n for n in LOCKS if "models" in LOCKS[n].extras])
def test_model_locks_pin_the_matching_trio_and_numpy_1(name: str) -> None:
    pins, hashes, _ = read_lock(ROOT / "requirements" / name)
    assert {k: pins[k] for k in TRIO} == TRIO
    assert pins["numpy"].startswith("1.")
    assert all(hashes[k] for k in TRIO)


def _copy(tmp_path: Path, name: str) -> tuple[Path, Path]:
    project = tmp_path / "pyproject.toml"
    shutil.copy(PYPROJECT, project)
    lock = tmp_path / name
    shutil.copy(ROOT / "requirements" / name, lock)
    return project, lock


def test_changed_requirement_is_caught(tmp_path: Path) -> None:
    project, lock = _copy(tmp_path, "image-linux-x86_64.txt")
    project.write_text(project.read_text().replace('"click>=8.1"', '"click>=99"'))
    problems = check_lock(project, lock, LOCKS["image-linux-x86_64.txt"])
    assert any("changed since this lock was written" in p for p in problems)
    assert any("'click>=99'" in p and "not satisfied" in p for p in problems)


def test_unpinned_or_unhashed_lines_are_caught(tmp_path: Path) -> None:
    project, lock = _copy(tmp_path, "lint.txt")
    text = lock.read_text()
    pins, _, _ = read_lock(lock)
    lock.write_text(
        "".join(
            ln.rstrip(" \\") + "\n" for ln in text.splitlines() if not ln.strip().startswith("--")
        )
    )
    problems = check_lock(project, lock, LOCKS["lint.txt"])
    assert problems == [f"{n}=={v} has no --hash" for n, v in pins.items()]
    lock.write_text(text + "somepackage>=1\n")
    (problem,) = check_lock(project, lock, LOCKS["lint.txt"])
    assert "expected `name==version`" in problem and "somepackage>=1" in problem


def test_missing_lock_says_how_to_make_it(tmp_path: Path) -> None:
    assert check_lock(PYPROJECT, tmp_path / "none.txt", LOCKS["lint.txt"]) == [
        "missing; run `python tools/lock.py`"
    ]


def test_environment_differences_lists_versions(tmp_path: Path) -> None:
    from importlib import metadata

    installed = metadata.version("click")
    lock = tmp_path / "lock.txt"
    lock.write_text(
        f"click=={installed}+local \\\n    --hash=sha256:{'0' * 64}\n"
        f"numpy==0.0.1 \\\n    --hash=sha256:{'0' * 64}\n"
        f"surely-not-installed==1.0 \\\n    --hash=sha256:{'0' * 64}\n"
    )
    assert environment_differences(lock) == [
        f"numpy: pinned 0.0.1, installed {metadata.version('numpy')}",
        "surely-not-installed: pinned 1.0, not installed",
    ]

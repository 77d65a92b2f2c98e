"""`audiorepro selfcheck`: each check can fail, and the whole passes in the locked env."""

from __future__ import annotations

from pathlib import Path

import pytest

from audiorepro.checks import selfcheck
from audiorepro.cli import main
from tests.conftest import DUMPS, ROOT

DEV_LOCK = ROOT / "requirements" / "dev-linux-x86_64.txt"


def test_golden_check_names_a_value_that_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    assert selfcheck.check_golden().passed
    golden = selfcheck.golden_5cap()
    moved = {**golden, "a2t/r@5": golden["a2t/r@5"] + 1e-9}
    monkeypatch.setattr(selfcheck, "golden_5cap", lambda: moved)
    check = selfcheck.check_golden()
    assert check.passed is False and "off: a2t/r@5" in check.detail


def test_parity_check_covers_every_fixture_dump() -> None:
    check = selfcheck.check_parity()
    assert check.passed and check.detail.startswith(
        f"{len(DUMPS)} fixture dumps"
    )  # 5: with classes


def test_environment_check_lists_differences_and_fails_only_when_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text(f"click==0.1 \\\n    --hash=sha256:{'0' * 64}\n")
    monkeypatch.setenv("AUDIOREPRO_BASE_IMAGE", "docker.io/pytorch/pytorch:2.9.1-cuda12.8")
    loose = selfcheck.check_environment(lock, strict=False)
    assert loose.passed is None and "click: pinned 0.1, installed" in loose.detail
    assert "base image unpinned" in loose.detail
    assert selfcheck.check_environment(lock, strict=True).passed is False
    monkeypatch.setenv("AUDIOREPRO_BASE_IMAGE", "x@sha256:" + "a" * 64)
    assert "unpinned" not in selfcheck.check_environment(lock, strict=False).detail


@pytest.mark.locked
def test_selfcheck_passes_in_the_locked_environment(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("laion_clap", reason="the model stack is not installed (tox -e py311)")
    code = main(["selfcheck", "--lock", str(DEV_LOCK), "--strict-environment"])
    out = capsys.readouterr().out
    assert code == 0, out
    for name in ("golden", "parity", "identity", "environment"):
        assert any(line.startswith(f"{name} ") and " ok " in line for line in out.splitlines())
    assert out.rstrip().endswith("selfcheck: passed")


def test_locked_tests_skip_saying_why_unless_the_lock_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unpinned install (the README's quick loop) skips the ``locked`` tests with the
    reason; where tox requires the lock (AUDIOREPRO_LOCKED=1) they run and fail on a
    difference instead."""
    from tests.conftest import locked_skip_reason

    lock = tmp_path / "lock.txt"
    lock.write_text(f"click==0.1 \\\n    --hash=sha256:{'0' * 64}\n")
    monkeypatch.delenv("AUDIOREPRO_LOCKED", raising=False)
    reason = locked_skip_reason(lock)
    assert reason is not None and "1 of 1 installed packages differ" in reason
    assert "click: pinned 0.1, installed" in reason and "tox -e py311" in reason
    monkeypatch.setenv("AUDIOREPRO_LOCKED", "1")
    assert locked_skip_reason(lock) is None

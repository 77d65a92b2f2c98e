"""Progress on stderr: a bar on a terminal, plain stage lines in a log, never in an output.

A real ``reproduce`` of a dump study runs as a subprocess twice: with stderr a pipe (a log
file: no carriage return, a start and an end line per stage) and with stderr a terminal (a
pseudo-terminal from :mod:`pty`: tqdm's bar, drawn with carriage returns). Both runs write
the same outputs, byte for byte.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from audiorepro.core import progress
from audiorepro.core.progress import MILESTONE_MIN, StageLines, progress_bar
from audiorepro.runner.output.publish import run_files
from tests.test_core_install import _dump_study

#: The stages a one-cell retrieval study of dumps runs (:mod:`audiorepro.runner.kinds.retrieval`).
STAGES = ("extract", "metrics", "parity")


def output_hashes(out: Path) -> dict[str, bytes]:
    """Every output of a run but its manifest (which records times), by path."""
    return {rel: (out / rel).read_bytes() for rel in run_files(out)}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The suite turns progress off (conftest.py); in-process runs set the other two.
    for name in ("AUDIOREPRO_PROGRESS", "TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.pop(name, None)
    return env


def _command(study: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "audiorepro", "reproduce", str(study), "--out", str(out)]


def test_a_log_gets_stage_lines_and_no_carriage_return(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        _command(_dump_study(tmp_path), out), capture_output=True, env=_env(), timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"\r" not in done.stderr and b"\r" not in done.stdout
    err = done.stderr.decode()
    for stage in STAGES:
        assert f"{stage}: started, 1 item\n" in err, err
        assert f"{stage}: done, 1 item in " in err, err
    assert "tables: started, 5 items\n" in err and "tables: done, 5 items in " in err
    assert "started" not in done.stdout.decode()  # progress is stderr's only


def _run_on_a_terminal(command: list[str]) -> tuple[int, bytes]:
    """Run with stderr (only) a pseudo-terminal 100 columns wide; returns (exit, its bytes)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        command, stderr=slave, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=_env()
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: the process has ended
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return proc.wait(timeout=300), seen


def test_a_terminal_still_gets_the_bar_and_the_same_outputs(tmp_path: Path) -> None:
    study = _dump_study(tmp_path)
    code, seen = _run_on_a_terminal(_command(study, tmp_path / "tty"))
    assert code == 0, seen.decode(errors="replace")
    # each stage's bar is drawn (tqdm redraws at most every 0.1 s, so a stage faster than
    # that shows only its first frame before the bar is cleared: 0%, not 100%)
    assert b"\r" in seen and all(f"{s:<9}: ".encode() in seen for s in STAGES), seen
    assert b"item/s]" in seen
    assert b"started," not in seen
    piped = subprocess.run(_command(study, tmp_path / "log"), capture_output=True, env=_env())
    assert piped.returncode == 0
    tty_hashes, log_hashes = output_hashes(tmp_path / "tty"), output_hashes(tmp_path / "log")
    assert tty_hashes == log_hashes and len(tty_hashes) > 3


def test_a_long_stage_writes_milestones_in_a_log() -> None:
    log = io.StringIO()
    n = 4 * MILESTONE_MIN
    assert list(StageLines(range(n), "extract  ", "item", log)) == list(range(n))
    lines = log.getvalue().splitlines()
    assert lines[0] == f"extract: started, {n} items"
    assert lines[1:4] == [f"extract: {q}% ({q * n // 100}/{n})" for q in (25, 50, 75)]
    assert lines[4].startswith(f"extract: done, {n} items in ") and len(lines) == 5


def test_a_log_without_tqdm_still_gets_stage_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AUDIOREPRO_PROGRESS", raising=False)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert list(progress_bar([1, 2], "stage", enabled=True)) == [1, 2]
    assert capsys.readouterr().err.splitlines()[0] == "stage: started, 2 batches"


def test_progress_off_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AUDIOREPRO_PROGRESS", "off")
    items = [1, 2]
    assert progress_bar(items, "stage", enabled=True) is items
    assert capsys.readouterr().err == ""


def test_library_bars_are_turned_off_in_a_log_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "environ", {})  # what it sets stays in this test
    monkeypatch.setattr(progress, "_is_tty", lambda stream: True)
    progress.quiet_library_bars()
    assert "TQDM_DISABLE" not in os.environ
    monkeypatch.setattr(progress, "_is_tty", lambda stream: False)
    progress.quiet_library_bars()
    assert os.environ["TQDM_DISABLE"] == "1" and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"

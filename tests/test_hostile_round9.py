"""Hostile round 9: the native trec-eval program (issue 48) against trec_eval and the Python
path (``AUDIOREPRO_TREC_NATIVE=0``), tried as a new user and as a hostile one.

Each case runs the real console command in a fresh process (the native program is only
exec'ed from a real command line) under both paths and asserts the same stdout, stderr and
exit code. Those marked "fixed" failed before their fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

QRELS = "1 0 d1 1\n1 0 d2 0\n1 0 d3 1\n2 0 d1 1\n"
RUN = "1 Q0 d1 1 0.9 tag\n1 Q0 d2 2 0.8 tag\n1 Q0 d3 3 0.7 tag\n2 Q0 d1 1 0.5 tag\n"


def _files(tmp_path: Path) -> tuple[str, str]:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text(QRELS)
    run.write_text(RUN)
    return str(qrels), str(run)


def _env(native: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env["AUDIOREPRO_TREC_NATIVE"] = "1" if native else "0"
    return env


@pytest.mark.parametrize(
    ("name", "reason"), [("closed", "bad file descriptor"), ("pipe", "broken pipe")]
)
def test_an_unwritable_standard_output_is_one_line_and_exit_2_on_both_paths(
    tmp_path: Path, name: str, reason: str
) -> None:
    """fixed: standard output closed (``>&-``) or a pipe whose reader has gone (``| true``,
    ``| head -1`` on a long output). The native program said ``cannot be accessed: Bad file
    descriptor`` / ``Broken pipe`` (exit 2); the Python path died with a traceback
    (``AttributeError: 'NoneType' object has no attribute 'write'``; ``BrokenPipeError``),
    exit 1."""
    qrels, run = _files(tmp_path)
    results = []
    for native in (True, False):
        read, write = os.pipe()
        os.close(read)
        if name == "closed":
            os.close(write)
        command = [sys.executable, "-m", "audiorepro", "trec-eval", "-q", qrels, run]
        opened = {"stdout": write} if name == "pipe" else {"stdout": None}
        proc = subprocess.run(
            command, env=_env(native), stderr=subprocess.PIPE, timeout=120,
            close_fds=name == "closed", pass_fds=(), **({} if name == "closed" else opened),
            preexec_fn=(lambda: os.close(1)) if name == "closed" else None,
        )  # fmt: skip
        if name == "pipe":
            os.close(write)
        results.append(proc)
    for proc in results:
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.decode().lower() == f"audiorepro: error: cannot be accessed: {reason}\n"
    assert results[0].stderr == results[1].stderr


def test_a_reader_that_leaves_mid_output_is_the_same_line_on_both_paths(tmp_path: Path) -> None:
    """fixed: ``audiorepro trec-eval -q -m all_trec ... | head -1`` on an output of about a
    megabyte. The native program said ``cannot be accessed: Broken pipe`` (exit 2); the Python
    path exited 0 in silence: CPython's buffered writer dropped the rest of its partial write
    to the pipe. (trec_eval is killed by SIGPIPE, exit 141, no message: a message and exit 2
    tell an evaluation script that the output was cut.)"""
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("".join(f"{q} 0 d{d} {d % 2}\n" for q in range(300) for d in range(10)))
    run.write_text(
        "".join(f"{q} Q0 d{d} {d} {d / 7:.4f} t\n" for q in range(300) for d in range(10))
    )
    command = [
        sys.executable,
        "-m",
        "audiorepro",
        "trec-eval",
        "-q",
        "-m",
        "all_trec",
        str(qrels),
        str(run),
    ]
    results = []
    for native in (True, False):
        proc = subprocess.Popen(
            command, env=_env(native), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith(b"num_ret")
        proc.stdout.close()
        results.append((proc.wait(timeout=120), proc.stderr.read()))
        proc.stderr.close()
    assert results[0] == results[1] == (2, b"audiorepro: error: cannot be accessed: Broken pipe\n")


@pytest.mark.parametrize("level", ["99999999999", "1000001", "-1000001"])
def test_a_qrels_jg_level_beyond_the_bound_is_refused_as_in_qrels(
    tmp_path: Path, level: str
) -> None:
    """fixed: ``-R qrels_jg`` with a level of ``99999999999`` (read by ``atol``): the native
    program handed it to the Python path, which died of ``MemoryError: trec-eval's
    evaluation`` (a traceback, exit 1: a per-level count for 10**11 levels); ``1000001`` was
    evaluated where the same line in a plain qrels is refused. Now the qrels_jg reader
    refuses it as the qrels reader does: one line naming the file, the line and the field."""
    qrels, run = tmp_path / "qrels_jg", tmp_path / "run"
    qrels.write_text(f"1 g1 d1 1\n1 g2 d1 {level}\n")
    run.write_text("1 Q0 d1 1 0.9 t\n")
    command = [sys.executable, "-m", "audiorepro", "trec-eval", "-R", "qrels_jg", "-q"]
    for native in (True, False):
        proc = subprocess.run(
            [*command, "-m", "qrels_jg", str(qrels), str(run)],
            env=_env(native), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == (
            f"audiorepro: error: {qrels}: line 2: field 'rel' is {int(level)}; expected a "
            "relevance level between -1000000 and 1000000\n"
        )


def test_the_level_bound_is_one_number_in_every_reader() -> None:
    """The qrels_jg reader keeps its own copy of the bound (it imports no numpy)."""
    from audiorepro.formats import trec, trec_light, trec_prefs

    assert trec_prefs.MAX_LEVEL == trec_light.MAX_LEVEL == trec.MAX_LEVEL


def _installed_copy(tmp_path: Path) -> Path:
    """The package as a wheel installs it (no ``src/`` beside a ``setup.py``: nothing is
    rebuilt in place); the folder to put on ``PYTHONPATH``."""
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "src" / "audiorepro", site / "audiorepro", ignore=ignore)
    return site


_NOEXEC = """set -e
mount --bind "$1" "$1"
mount -o remount,bind,noexec "$1"
shift
exec "$@"
"""


@pytest.mark.parametrize("how", ["not a library", "noexec mount"])
def test_kernels_that_cannot_be_loaded_are_one_line(tmp_path: Path, how: str) -> None:
    """fixed: the package on a ``noexec`` mount (``unshare -m``, ``mount --bind``,
    ``remount,noexec``): the native program cannot be exec'ed and the Python path answers,
    but its ``ctypes.CDLL`` of the kernels failed too (``OSError: ... failed to map segment
    from shared object``): a traceback, exit 1, on both paths. Likewise a library file that
    is not one (a truncated copy). Now one line naming the library, why and what to do."""
    site = _installed_copy(tmp_path)
    qrels, run = _files(tmp_path)
    command = [sys.executable, "-m", "audiorepro", "trec-eval", "-m", "map", qrels, run]
    if how == "not a library":
        (library,) = (site / "audiorepro" / "core").glob("_trec*.so")
        library.write_bytes(b"not an ELF file\n")
        runs = [command]
        native_flags = [False]
    else:
        if shutil.which("unshare") is None or os.geteuid() != 0:
            pytest.skip("needs root and unshare(1) to mount the package noexec")
        script = tmp_path / "noexec.sh"
        script.write_text(_NOEXEC)
        runs = [["unshare", "-m", "sh", str(script), str(site), *command]] * 2
        native_flags = [True, False]
    for argv, native in zip(runs, native_flags, strict=True):
        env = {**_env(native), "PYTHONPATH": str(site)}
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        if how == "noexec mount" and "mount" in proc.stderr and "audiorepro" not in proc.stderr:
            pytest.skip(f"cannot mount here: {proc.stderr.strip()}")
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("audiorepro: error: the compiled trec-eval kernels (")
        assert "cannot be loaded" in proc.stderr and proc.stderr.count("\n") == 1

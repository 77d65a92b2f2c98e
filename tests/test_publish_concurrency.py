"""The output folder under hostile conditions: OUT a bind mount in a read-only parent (the
``apptainer --bind "$PWD/out":/out`` case), runs killed at any moment (SIGKILL, midway through
publication), a publication that fails, two runs into one OUT, and folders that belong to
someone else (another run's, the user's, a FIFO). Each test failed before staging moved
into OUT (:mod:`audiorepro.runner.output.publish`)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.runner.output.publish import AREA
from tests.conftest import ROOT
from tests.test_outputs_folder import _reproduce, _study

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
CLI = f"{shlex.quote(sys.executable)} -m audiorepro"


def _hashes(out: Path) -> dict[str, str]:
    """Every file of OUT with its SHA-256, but the hidden run area (the lock, a dead run's
    leftovers: not outputs, removed by the next run)."""
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and AREA not in p.relative_to(out).parts
    }


def _one_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- OUT a bind mount in a read-only parent -------------------------------------------------


def _namespaces() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


needs_mounts = pytest.mark.skipif(
    not _namespaces(), reason="needs root and unshare -m (mount namespaces)"
)


def _mounted(parent: Path, writable: Path, script: str) -> list[str]:
    """``script`` in a mount namespace where ``parent`` is read-only and ``parent/out`` is a
    bind mount of ``writable``, as apptainer gives a SIF's root and a ``--bind``."""
    p, w = shlex.quote(str(parent)), shlex.quote(str(writable))
    setup = (
        f"mount --bind {p} {p} && mount -o remount,ro,bind {p} && mount --bind {w} {p}/out && "
        f"! touch {p}/probe-write 2>/dev/null && "
    )
    return ["unshare", "-m", "sh", "-c", setup + script]


@needs_mounts
def test_out_a_bind_mount_in_a_read_only_parent_reproduces_and_verifies(tmp_path: Path) -> None:
    study = _study(tmp_path)
    parent, writable = tmp_path / "P", tmp_path / "W"
    (parent / "out").mkdir(parents=True)
    writable.mkdir()
    out = shlex.quote(str(parent / "out"))
    script = f"{CLI} reproduce {shlex.quote(str(study))} --out {out} && {CLI} verify {out}"
    done = subprocess.run(
        _mounted(parent, writable, script), capture_output=True, text=True, env=ENV, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "PASS" in done.stdout
    assert (writable / "manifest.json").is_file() and not (writable / AREA).exists()
    assert sorted(p.name for p in parent.iterdir()) == ["out"]  # nothing beside OUT


@needs_mounts
def test_a_sigkill_midway_leaves_the_bind_mounted_out_as_it_was(tmp_path: Path) -> None:
    """A previous run's outputs, then a second run (another published value: other bytes)
    killed with SIGKILL once it has staged files: OUT holds the first run's files, byte for
    byte, ``verify`` passes them, and the next run succeeds."""
    parent, writable = tmp_path / "P", tmp_path / "W"
    (parent / "out").mkdir(parents=True)
    writable.mkdir()
    assert _reproduce(_study(tmp_path), writable) == 0
    before = _hashes(writable)
    study = _study(tmp_path, value=0.5)
    out = shlex.quote(str(parent / "out"))
    run = subprocess.Popen(
        _mounted(parent, writable, f"exec {CLI} reproduce {shlex.quote(str(study))} --out {out}"),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not list((writable / AREA).glob("staging-*/*")):
            assert run.poll() is None and time.monotonic() < deadline, "the run never staged"
            time.sleep(0.02)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert _hashes(writable) == before
    assert main(["verify", str(writable)]) == 0
    assert _reproduce(_study(tmp_path), writable) == 0
    assert not (writable / AREA).exists()  # the dead run's staging was removed


# -- killed or failing midway through publication -------------------------------------------

_KILL_AT = """
import os, sys
import audiorepro.runner.output.publish as publish
from audiorepro.cli import main
real, count = publish._rename, [0]
def rename(src, dst, out):
    if count[0] == int(sys.argv[1]):
        os._exit(137)  # as SIGKILL would: no handler, no cleanup
    count[0] += 1
    real(src, dst, out)
publish._rename = rename
sys.exit(main(["reproduce", sys.argv[2], "--out", sys.argv[3]]))
"""


def _killed_publishing(at: int, study: Path, out: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _KILL_AT, str(at), str(study), str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert done.returncode == 137, done.stderr[-3000:]


@pytest.mark.parametrize("at", [0, 2, 5, 9])
def test_a_publication_killed_midway_is_refused_by_verify_and_rolled_back(
    tmp_path: Path, at: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed after ``at`` of the swap's renames (5 old entries out, then 5 new in): verify
    says so in one line, and the next run restores the previous outputs before anything."""
    from audiorepro.runner.output.publish import recover

    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    before = _hashes(out)
    _killed_publishing(at, _study(tmp_path, value=0.5), out)
    assert (out / AREA / "journal.json").exists()
    capsys.readouterr()
    assert main(["verify", str(out)]) == 2
    _one_line(capsys.readouterr().err, str(out), "interrupted publication")
    recover(out)
    assert _hashes(out) == before
    assert main(["verify", str(out)]) == 0
    assert _reproduce(_study(tmp_path, value=0.5), out) == 1  # the new value fails, published
    assert not (out / AREA).exists()


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (errno.EXDEV, "is on another file system than the output folder"),
        (errno.EROFS, "is on a read-only file system"),
        (errno.EACCES, "is not writable by this user"),
    ],
)
@pytest.mark.parametrize("at", [0, 3, 7])
def test_a_failed_publication_is_undone_and_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    code: int,
    message: str,
    at: int,
) -> None:
    """A rename of the swap refused by the file system: one true line naming the folder at
    fault, exit 2; OUT holds its previous outputs and its cache; no staging left."""
    import audiorepro.runner.output.publish as publish

    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    (out / "cache").mkdir()
    (out / "cache" / "kept.bin").write_bytes(b"cache")
    before = _hashes(out)
    real, count = publish.os.rename, [0]

    def rename(src: object, dst: object) -> None:
        if not str(src).startswith(str(out)):
            return real(src, dst)  # type: ignore[arg-type]
        if count[0] == at:
            count[0] += 1
            raise OSError(code, os.strerror(code), str(src))
        count[0] += 1
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(publish.os, "rename", rename)
    capsys.readouterr()
    assert _reproduce(_study(tmp_path, value=0.5), out) == 2
    line = _one_line(capsys.readouterr().err, message, "publication was undone", str(out))
    assert "nothing was written" not in line
    monkeypatch.undo()
    assert _hashes(out) == before
    assert not (out / AREA).exists()
    assert main(["verify", str(out)]) == 0


@pytest.mark.parametrize(
    ("code", "message"),
    [(errno.EROFS, "is on a read-only file system"), (errno.EACCES, "is not writable by this")],
)
def test_an_out_that_cannot_be_written_names_the_folder_at_fault(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    code: int,
    message: str,
) -> None:
    """OUT missing in a parent that refuses: the parent is named; OUT there but refusing:
    OUT is named. Before any work, exit 2 (root ignores permissions, so the errors are
    raised here as the file system would)."""
    from pathlib import Path as RealPath

    study = _study(tmp_path)
    parent = tmp_path / "P"
    parent.mkdir()
    real_mkdir = RealPath.mkdir

    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        if self.parent == parent or self == parent / "out" / AREA:
            raise OSError(code, os.strerror(code), str(self))
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(RealPath, "mkdir", mkdir)
    assert _reproduce(study, parent / "out") == 2
    _one_line(capsys.readouterr().err, f"{parent}: {message}", "cannot be created in it")
    real_mkdir(parent / "out")
    assert _reproduce(study, parent / "out") == 2
    _one_line(capsys.readouterr().err, f"{parent / 'out'}: {message}")
    assert list((parent / "out").iterdir()) == []


@needs_mounts
def test_a_read_only_out_is_one_line_naming_it(tmp_path: Path) -> None:
    study, out = _study(tmp_path), tmp_path / "out"
    out.mkdir()
    q = shlex.quote(str(out))
    script = f"mount --bind {q} {q} && mount -o remount,ro,bind {q} && "
    script += f"exec {CLI} reproduce {shlex.quote(str(study))} --out {q}"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=ENV, timeout=300
    )
    assert done.returncode == 2, done.stderr
    _one_line(done.stderr, f"{out}: is on a read-only file system")


# -- one run per OUT ---------------------------------------------------------------------------

_HOLD = """
import sys, time
from pathlib import Path
from audiorepro.runner.output.publish import claim, new_staging
with claim(Path(sys.argv[1])):
    new_staging(Path(sys.argv[1]))
    print("holding", flush=True)
    time.sleep(600)
"""


def _holder(out: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE, text=True, env=ENV
    )
    assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
    return holder


def test_a_second_run_into_one_out_is_refused_and_a_dead_holder_is_no_obstacle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    before = _hashes(out)
    holder = _holder(out)
    try:
        capsys.readouterr()
        assert _reproduce(_study(tmp_path, value=0.5), out) == 2
        _one_line(capsys.readouterr().err, str(out), f"process {holder.pid}", "another")
        assert _hashes(out) == before
    finally:
        holder.kill()
        holder.wait()
    # Killed: its lock died with it; its staging folder is a leftover the next run removes.
    assert list((out / AREA).glob("staging-*"))
    assert _reproduce(_study(tmp_path), out) == 0
    assert not (out / AREA).exists()
    assert main(["verify", str(out)]) == 0


def test_each_run_stages_in_a_folder_of_its_own(tmp_path: Path) -> None:
    from audiorepro.runner.output.publish import claim, new_staging

    out = tmp_path / "out"
    with claim(out):
        first, second = new_staging(out), new_staging(out)
    assert first != second and first.parent == second.parent == out / AREA


# -- what is not the previous run's is never removed -----------------------------------------


def test_another_runs_folder_inside_out_is_refused_not_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "R"
    assert _reproduce(_study(tmp_path), out / "sub") == 0
    sub = _hashes(out / "sub")
    capsys.readouterr()
    assert _reproduce(_study(tmp_path), out) == 2
    _one_line(capsys.readouterr().err, str(out), "sub/")
    assert _hashes(out / "sub") == sub
    # Also when R already holds a run's outputs and sub arrives later.
    shutil.move(out / "sub", tmp_path / "sub")
    assert _reproduce(_study(tmp_path), out) == 0
    shutil.move(tmp_path / "sub", out / "sub")
    assert _reproduce(_study(tmp_path), out) == 2
    assert _hashes(out / "sub") == sub


def test_folders_beside_out_named_like_staging_are_the_users(tmp_path: Path) -> None:
    out = tmp_path / "out"
    mine = {}
    for name in (".out.old", ".out.staging"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.txt").write_text(f"{name}\n")
        mine[name] = f"{name}\n"
    assert _reproduce(_study(tmp_path), out) == 0
    assert _reproduce(_study(tmp_path), out) == 0
    assert {n: (tmp_path / n / "notes.txt").read_text() for n in mine} == mine


def test_a_fifo_in_out_is_flagged_and_never_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    os.mkfifo(out / "tables" / "pipe")
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert "tables/pipe" in capsys.readouterr().out
    assert _reproduce(_study(tmp_path), out) == 2
    _one_line(capsys.readouterr().err, "tables/pipe")
    assert (out / "tables" / "pipe").is_fifo()


def test_verify_passes_no_folder_whose_manifest_is_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    (out / "manifest.json").rename(tmp_path / "elsewhere.json")
    (out / "manifest.json").symlink_to(tmp_path / "elsewhere.json")
    capsys.readouterr()
    assert main(["verify", str(out)]) == 2
    _one_line(capsys.readouterr().err, "manifest.json", "symbolic link")


def test_verify_racing_a_republish_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """While ``verify OUT`` reads the files, a run publishes into OUT (and is killed halfway
    through, the worst timing): one line, exit 2, never a FileNotFoundError."""
    # The folder is read (and each file hashed) by runner/output/folder.py.
    import audiorepro.runner.output.folder as folder_module

    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    (tmp_path / "second").mkdir()
    other = _study(tmp_path / "second", value=0.5)
    real, raced = folder_module.sha256_file, []

    def sha256_file(path: Path) -> str:
        if not raced:
            raced.append(path)
            _killed_publishing(6, other, out)
        return real(path)

    monkeypatch.setattr(folder_module, "sha256_file", sha256_file)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 2
    _one_line(capsys.readouterr().err, str(out), "changed while it was verified")
    assert raced


def test_a_journal_naming_paths_outside_out_is_refused(tmp_path: Path) -> None:
    from audiorepro.core.errors import UserError
    from audiorepro.runner.output.publish import recover

    out = tmp_path / "out"
    (out / AREA).mkdir(parents=True)
    (tmp_path / "victim").write_text("keep\n")
    journal = {"staging": "staging-x", "old": "old-x", "remove": [], "add": ["../victim"]}
    (out / AREA / "journal.json").write_text(json.dumps(journal))
    with pytest.raises(UserError, match=r"journal\.json"):
        recover(out)
    assert (tmp_path / "victim").read_text() == "keep\n"

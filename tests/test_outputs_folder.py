"""The output folder model: a run is staged and published whole, its manifest lists exactly
what it wrote (nested studies included, top-level manifest last), and ``verify OUT`` passes
exactly the folders of runs that passed and were not touched."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.runner.demo import prepare_probe_demo
from audiorepro.specs.study import load_study
from tests.conftest import FIXTURES


def _study(tmp_path: Path, *, value: float | None = None) -> Path:
    """Two cells over fixture dumps; published values for the first only (so a problem with
    the second is a failure that no golden row shows)."""
    from audiorepro.synthetic.dumps import golden_5cap

    shutil.copy(FIXTURES / "dumps" / "synthetic_5cap.npz", tmp_path / "a.npz")
    shutil.copy(FIXTURES / "dumps" / "synthetic_1cap.npz", tmp_path / "b.npz")
    sha = {n: hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in ("a.npz", "b.npz")}
    values = golden_5cap()
    if value is not None:
        values["t2a/r@1"] = value
    lines = ['schema = "audiorepro.study/1"', 'name = "synthetic"']
    for cid, ds, dump in (("five", "synthetic-5cap", "a.npz"), ("one", "synthetic-1cap", "b.npz")):
        lines += ["[[cell]]", f'id = "{cid}"', 'model = "synthetic"', f'dataset = "{ds}"']
        lines += [f'dump = "{dump}"', f'sha256 = "{sha[dump]}"']
    lines += ["[[published]]", 'cell = "five"', "tolerance = 1e-12", 'provenance = "test"']
    lines.append("values = { " + ", ".join(f'"{k}" = {v!r}' for k, v in values.items()) + " }")
    path = tmp_path / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _reproduce(study: Path, out: Path) -> int:
    return main(["reproduce", str(study), "--out", str(out)])


def _rewrite_record(out: Path, **changes: object) -> None:
    """Change OUT's verification.json and re-hash it in the manifest, as a run that recorded
    these values would have written them."""
    path = out / "verification.json"
    record = json.loads(path.read_text())
    record.update(changes)
    path.write_text(json.dumps(record))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["outputs"]["verification.json"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))


def test_verify_fails_a_run_whose_failures_are_not_golden_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    _rewrite_record(out, failures=["cell one: dump b.npz is not available here"])
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert "failure: cell one: dump b.npz" in capsys.readouterr().out


def test_verify_passes_a_passed_untouched_run_and_names_what_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    assert main(["verify", str(out)]) == 0
    capsys.readouterr()
    (out / "stray.txt").write_text("not an output\n")
    assert main(["verify", str(out)]) == 1
    assert "stray.txt" in capsys.readouterr().out
    (out / "stray.txt").unlink()
    (out / "tables" / "parity.md").unlink()
    assert main(["verify", str(out)]) == 1
    assert "tables/parity.md" in capsys.readouterr().out


def test_verify_fails_a_failed_parity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    # A folder whose record says parity failed (and whose manifest agrees) must not pass.
    _rewrite_record(out, metric_parity_passed=False)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert "metric parity" in capsys.readouterr().out


def test_foreign_files_in_out_are_refused_before_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    assert _reproduce(_study(tmp_path), out) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_rerun_replaces_the_previous_outputs_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    # A table an earlier version of the study wrote: listed by that run, gone after this one.
    (out / "tables" / "old.csv").write_text("stale\n")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["outputs"]["tables/old.csv"] = hashlib.sha256(b"stale\n").hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert _reproduce(_study(tmp_path), out) == 0
    assert not (out / "tables" / "old.csv").exists()
    assert main(["verify", str(out)]) == 0


def test_a_run_killed_midway_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("audiorepro.runner.kinds.write_outputs", killed)
    assert _reproduce(_study(tmp_path, value=0.5), out) == 2  # "aborted"
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _nested(tmp_path: Path) -> Path:
    from audiorepro.runner.study import run_studies

    out = tmp_path / "out"
    top = load_study(_study(tmp_path))
    probe = load_study(prepare_probe_demo(tmp_path / "probe-work"))
    results = run_studies([(top, "."), (probe, "probe")], out, progress=False)
    assert [r["passed"] for _, _, r in results] == [True, True]
    return out


def test_top_manifest_covers_the_nested_study(tmp_path: Path) -> None:
    out = _nested(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    assert "probe/manifest.json" in manifest["outputs"]
    assert "probe/verification.json" in manifest["outputs"]
    assert main(["verify", str(out)]) == 0


@pytest.mark.parametrize("damage", ["delete", "tamper", "incomplete"])
def test_verify_notices_damage_to_the_nested_study(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _nested(tmp_path)
    if damage == "delete":
        shutil.rmtree(out / "probe")
    elif damage == "tamper":
        (out / "probe" / "report.html").write_text("<p>all good</p>")
    else:
        # Re-hashed throughout, as a run killed before finishing the probe study would be.
        path = out / "probe" / "verification.json"
        record = json.loads(path.read_text())
        record["probe_complete"] = False
        path.write_text(json.dumps(record))
        for m in (out / "probe" / "manifest.json", out / "manifest.json"):
            manifest = json.loads(m.read_text())
            rel = "verification.json" if m.parent.name == "probe" else "probe/verification.json"
            manifest["outputs"][rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            m.write_text(json.dumps(manifest))
        top = json.loads((out / "manifest.json").read_text())
        top["outputs"]["probe/manifest.json"] = hashlib.sha256(
            (out / "probe" / "manifest.json").read_bytes()
        ).hexdigest()
        (out / "manifest.json").write_text(json.dumps(top))
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert "probe/" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content",
    ["{", "[]", '{"golden": {"rows": 3}}', '{"golden": {"rows": []}, "failures": "x"}'],
)
def test_malformed_verification_is_one_line(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    (out / "verification.json").write_text(content)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 2
    err = capsys.readouterr().err
    assert "verification.json" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "content", ["{", '{"outputs": []}', '{"outputs": {"../x": "ab"}}', '{"outputs": {"a": 1}}']
)
def test_malformed_manifest_is_one_line(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _reproduce(_study(tmp_path), out) == 0
    (out / "manifest.json").write_text(content)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 2
    err = capsys.readouterr().err
    assert "manifest.json" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("where", ["under-a-file", "proc", "a-file"])
def test_an_output_folder_that_cannot_be_written_is_one_line(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study(tmp_path)
    (tmp_path / "file").write_text("x")
    out = {
        "under-a-file": tmp_path / "file" / "out",
        "proc": Path("/proc/audiorepro-test-out"),
        "a-file": tmp_path / "file",
    }[where]
    assert _reproduce(study, out) == 2
    err = capsys.readouterr().err
    assert str(out) in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "file").read_text() == "x"


def test_json_pointing_at_a_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "here"
    folder.mkdir()
    dump = FIXTURES / "dumps" / "synthetic_5cap.npz"
    assert main(["metrics", str(dump), "--json", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and len(err.strip().splitlines()) == 1
    assert list(folder.iterdir()) == []


_FSIZE_SCRIPT = """
import resource, signal, sys
from pathlib import Path
from audiorepro.cli import main
from audiorepro.formats.dump import load_dump
from audiorepro.metrics.retrieval import compute_retrieval
# Load the rank-count kernels before the limit (a checkout builds them in place on first use):
# their files are not what is tested.
compute_retrieval(load_dump(sys.argv[3]))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG, not a kill
# The command imports its stack lazily, after the limit: CPython would write those modules'
# .pyc files cut at the limit (its bytecode write does not check a short write) into the
# checkout's src/, and every later process reading them fails. Not what is tested.
sys.dont_write_bytecode = True
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.exit(main(["reproduce", sys.argv[2], "--out", str(Path(sys.argv[2]).parent / "out")]))
"""


@pytest.mark.parametrize("limit", [4 << 10, 16 << 10])
def test_a_full_disk_is_one_line_and_leaves_nothing_behind(tmp_path: Path, limit: int) -> None:
    """A file-size limit (``ulimit -f``: EFBIG, as a full disk gives ENOSPC) hit while
    ``reproduce`` writes: one line naming the file being written, exit 2, no traceback, OUT
    not published, the staging folder and every temporary file removed. Real writes in a
    subprocess, no mock: 4 KiB stops at verification.json, 16 KiB at the report."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    study = _study(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE_SCRIPT, str(limit), str(study), str(tmp_path / "a.npz")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "cannot be written: the file would exceed the file-size limit" in lines[0]
    written = lines[0].split(": cannot be written")[0].removeprefix("audiorepro: error: ")
    assert Path(written).name and ".audiorepro-run/staging-" in written, lines[0]
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".*"))
    left = [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not left, left


@pytest.mark.parametrize("code", ["ENOSPC", "EFBIG", "EDQUOT", "EROFS", "EACCES", "EPERM"])
def test_every_write_errno_has_the_one_message(code: str) -> None:
    """The errors a file system gives a writer (full, size limit, quota, read-only, no
    permission) are one WriteError each (exit 2), naming the file and the reason; the test
    above gives one of them for real."""
    import errno
    import os

    from audiorepro.core.errors import WRITE_ERRNOS, UserError, write_error

    number = getattr(errno, code)
    assert number in WRITE_ERRNOS
    error = write_error(OSError(number, os.strerror(number)), "OUT/tables/x.csv")
    assert isinstance(error, UserError)
    text = str(error)
    assert text.startswith("OUT/tables/x.csv: cannot be written: " + WRITE_ERRNOS[number])
    assert "\n" not in text

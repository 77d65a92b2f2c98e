"""benchmarks/hear.py, the command docs/benchmarks.md documents, run as written at a tiny size
(AUDIOREPRO_HEAR_BENCH_TINY=1: the words task cut to its first files; the command line is the
page's). It needs heareval and takes minutes (marked heareval and bench: `tox -e hear-bench`,
which also installs hearbaseline; CI's `tox -e hear` leaves it out);
it checks that every step ran for both networks and that the kit's `hear-mlp-v1` on the saved
embeddings gives heareval's own predictor's test score (the default grid, 8 points)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "benchmarks.md"


@pytest.mark.heareval
@pytest.mark.slow
@pytest.mark.bench  # minutes: in tox -e hear-bench, not in CI's hear env
def test_the_documented_hear_benchmark_runs_as_written_at_tiny_size() -> None:
    from tests.test_documented_commands import blocks

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    page = [b for b in blocks("docs/benchmarks.md") if b.heading.startswith("Real networks")]
    (shell,) = [b for b in page if b.lang == "bash"]
    (line,) = shell.commands()
    argv = shlex.split(line)
    assert argv[:2] == ["python", "benchmarks/hear.py"] and PAGE.is_file()
    env = dict(os.environ, AUDIOREPRO_HEAR_BENCH_TINY="1")
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True,
        check=False, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [r.split(" | ") for r in done.stdout.splitlines() if r.startswith("| ")]
    assert [(r[0], r[1]) for r in rows[1:]] == [
        ("| resemblyzer", "words-v1-full"),
        ("| hear:hearbaseline.torchcrepe", "words-v1-full"),
    ]
    for r in rows[1:]:
        # wall / CPU seconds in every timed column, heareval's runner for the HEAR module only
        timed = [c for c in r[2:7] if c != "(not a HEAR module)"]
        assert all(len(c.split(" / ")) == 2 for c in timed), r
        assert len(timed) == (5 if "hear:" in r[0] else 4)
        assert r[7] == "yes |", r  # the kit's hear-mlp-v1 scores as heareval's predictor

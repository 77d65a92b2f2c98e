"""The README's first command, run as a new user would: a fresh clone, a fresh virtualenv."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import OWN_LINE, PIP_CACHE, ROOT, foreign_lines


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None, "README.md must open with a bash block of the set-up commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_the_two_commands() -> None:
    first, second = readme_commands()
    assert "audiorepro reproduce" in first and "pip install" in first
    assert "tox" in second and "py311" in second
    # .ci/run calls exactly the second command, as a line of its own.
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert second in ci
    # Both commands install into a virtual environment: a stock Debian/Ubuntu Python refuses a
    # pip install outside one (externally-managed-environment).
    for command in (first, second):
        assert "python3 -m venv " in command and "python3 -m pip install" not in command


def _clean_env() -> dict[str, str]:
    """This environment as a new user's shell has it: no virtualenv or tox on PATH, no
    Python settings, not the suite's lock requirement; pip's cache is the user's own (warm
    on a machine that installed the locks before, as CI's has: the wheels are not downloaded
    again, and nothing in what is installed changes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".tox" not in p)
    env.pop("AUDIOREPRO_LOCKED", None)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("AUDIOREPRO_PROGRESS", None)  # a user's run: stage lines on
    env["PIP_CACHE_DIR"] = str(PIP_CACHE)
    return env


def package_index() -> str:
    """The index pip installs from here: ``PIP_INDEX_URL``, else pip's configured
    ``index-url``, else PyPI's."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    listed = subprocess.run(
        ["python3", "-m", "pip", "config", "list"], env=_clean_env(), capture_output=True,
        text=True, check=False, timeout=60,
    ).stdout  # fmt: skip
    found = re.search(r"^\S*?\.index-url='([^']+)'$", listed, re.M)  # not extra-index-url
    return found.group(1) if found else "https://pypi.org/simple/"


def index_unreachable(url: str) -> str | None:
    """Why pip could not install from ``url`` here (its ``pip/`` page not read in 15 s), or
    None when it can."""
    import urllib.request

    page = url.rstrip("/") + "/pip/"
    try:
        with urllib.request.urlopen(page, timeout=15) as response:
            response.read(1)
    except (OSError, ValueError) as exc:
        return f"{page}: {exc}"
    return None


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A fresh clone (with the working tree's changes) in which the README's first command
    ran in a fresh virtualenv: (clone, stdout, stderr); asserts that it exited 0. Skips,
    saying why, where no package index answers (the command installs from one)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to clone (CI runs from one)")
    why = index_unreachable(package_index())
    if why is not None:
        pytest.skip(f"the README's install needs a package index, and none answers ({why})")
    clone = tmp_path_factory.mktemp("fresh") / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    # The working tree's uncommitted changes travel too, so the test checks what is on disk.
    for rel in subprocess.run(
        ["git", "ls-files", "--modified", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split():  # fmt: skip
        if (ROOT / rel).is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, clone / rel)
    result = subprocess.run(
        ["bash", "-c", readme_commands()[0]],
        cwd=clone,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return clone, result.stdout, result.stderr


@pytest.mark.slow
@pytest.mark.network
def test_first_readme_command_in_a_fresh_virtualenv(fresh_clone: tuple[Path, str, str]) -> None:
    clone, _, stderr = fresh_clone
    out = clone / "reproduce-demo"
    verification = json.loads((out / "verification.json").read_text())
    assert verification["failures"] == [] and verification["metric_parity_passed"]
    assert (out / "report.html").is_file() and (out / "manifest.json").is_file()
    # The demo's own lines only: no third-party warning or print reaches the user.
    assert foreign_lines(demo_stderr(stderr)) == []


#: How pip starts the lines it writes to stderr (a machine's pip configuration can make it
#: warn, e.g. about an index folder that is not there), as opposed to a warning raised in Python.
PIP_LINE = re.compile(r"^(WARNING|DEPRECATION): |^\[notice\] ")


def demo_stderr(stderr: str) -> str:
    r"""``stderr`` of the README's first command without pip's own lines: those that come
    before audiorepro's first line and start as pip starts them.

    >>> demo_stderr("WARNING: Location 'x' is ignored\ndemo: started\nWARNING: y\n")
    'demo: started\nWARNING: y'
    """
    lines = stderr.splitlines()
    first = next((i for i, line in enumerate(lines) if OWN_LINE.match(line)), len(lines))
    head = [line for line in lines[:first] if not PIP_LINE.match(line)]
    return "\n".join(head + lines[first:])


def quick_loop_line() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## For developers\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    (line,) = [x for x in block.group(1).splitlines() if x.strip()]
    return line


@pytest.mark.slow
@pytest.mark.network
def test_the_readme_quick_loop_line_installs_and_passes_the_environment_and_lock_tests(
    fresh_clone: tuple[Path, str, str],
) -> None:
    """The README's quick-loop line as written, in the clone whose .venv the first command
    made (an unpinned install, as a new developer has): its install (the test extra) runs
    whole, but its ``pytest -m "not slow"`` runs two modules, not the suite: those that
    depend on what is installed, the environment and lock checks (PYTEST_ADDOPTS names them,
    which replaces testpaths), whose ``locked`` test must skip with its reason, not fail. The
    rest of the quick loop is the suite that tox runs on the locked install."""
    clone, _, _ = fresh_clone
    line = quick_loop_line()
    assert (
        "pip install -e '.[test,models]'" in line
        and line.split("&&")[-1].split("#")[0].strip() == '.venv/bin/pytest -m "not slow"'
    )
    env = _clean_env()
    env["PYTEST_ADDOPTS"] = "-rs tests/test_selfcheck.py tests/test_locks.py"
    result = subprocess.run(
        ["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, check=False,
        timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert " failed" not in result.stdout and " passed" in result.stdout


def test_first_paragraph_states_the_install_and_the_cache_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's first paragraph says what the install costs and where the per-user cache
    is, and that place is where the demo keeps its models (XDG_CACHE_HOME unset)."""
    from audiorepro.runner.demo import model_cache

    text = (ROOT / "README.md").read_text()
    first = text.split("```", 2)[2].split("\n\n")[1]
    for fact in ("4.2 GB", "7.7 GB", "7 minutes", "CUDA wheels", "CPU index", "650 MB"):
        assert fact in first, fact
    assert "`rm -rf ~/.cache/audiorepro`" in first and "$XDG_CACHE_HOME/audiorepro" in first
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert model_cache().parent == Path.home() / ".cache" / "audiorepro"


def _ci_run(tmp_path: Path, apt_works_after_update: bool) -> list[str]:
    """.ci/run's output on a machine where apt-get install fails until the package lists are
    refreshed (or always), with stand-ins for id, apt-get and python3 (tox is not run)."""
    (tmp_path / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    scripts = {
        "id": "echo 0",
        "apt-get": (
            'if [ "$1" = update ]; then touch "$STATE/updated"; exit 0; fi\n'
            f'[ -f "$STATE/updated" ] && {"true" if apt_works_after_update else "false"}'
        ),
        "python3": (
            "mkdir -p .venv-tox/bin\n"
            "for t in pip tox; do printf '#!/bin/sh\\nexit 0\\n' > .venv-tox/bin/$t; "
            "chmod +x .venv-tox/bin/$t; done"
        ),
    }
    for name, body in scripts.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "STATE": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")], env=env, capture_output=True, text=True,
        check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_ci_run_refreshes_the_package_lists_once_and_says_what_skips(tmp_path: Path) -> None:
    lines = _ci_run(tmp_path / "a", apt_works_after_update=True)
    assert lines == [
        "ci: an install failed; refreshing the package lists (apt-get update) and trying again"
    ]
    lines = _ci_run(tmp_path / "b", apt_works_after_update=False)
    assert lines[0].startswith("ci: an install failed; refreshing the package lists")
    skips = lines[1:]
    assert [line.split(" (")[0] for line in skips] == [
        "ci: skip: the LaTeX compile test",
        "ci: skip: the report browser test",
        "ci: skip: the scale-out tests on a real Slurm",
        "ci: skip: tools/make_speech.py's regeneration test",
        "ci: skip: the container check",
    ]

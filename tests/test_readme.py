"""The README's first command, run as a new user would: a fresh clone, a fresh virtualenv."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT


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


@pytest.mark.slow
@pytest.mark.network
def test_first_readme_command_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to clone (CI runs from one)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    # The working tree's uncommitted changes travel too, so the test checks what is on disk.
    for rel in subprocess.run(
        ["git", "ls-files", "--modified", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split():  # fmt: skip
        if (ROOT / rel).is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, clone / rel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".tox" not in p)
    result = subprocess.run(
        ["bash", "-c", readme_commands()[0]],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    out = clone / "reproduce-demo"
    verification = json.loads((out / "verification.json").read_text())
    assert verification["failures"] == [] and verification["metric_parity_passed"]
    assert (out / "report.html").is_file() and (out / "manifest.json").is_file()

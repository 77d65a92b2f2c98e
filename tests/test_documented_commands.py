"""Every command of the README and of the documentation pages (``docs/*.md``) is run by a test
as written, or says on its line what it needs (``# needs network``, ``# needs apptainer``,
``# needs a Slurm cluster``, ``# needs a GPU``).

A shell block (```` ```bash ````) is either registered in :data:`RUN_BY` with the test that
extracts and runs it, or every command in it carries such a mark. Usage synopses, which are
not commands one can run, are ```` ```text ```` blocks and show their placeholders. Moving a
section between the README and a page moves its block: the registry names the page, and the
registered test must read that page, so a block cannot be moved away from the test that runs
it without this module failing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_hpc_readme import MARK
from tests.test_outputs_folder import _study as synthetic_study

#: (page, heading, index of the shell block under that heading) -> the test that runs it.
RUN_BY: dict[tuple[str, str, int], str] = {
    # The first line in a fresh clone and virtualenv; the second is .ci/run's (checked there).
    ("README.md", "audiorepro", 0):
        "tests/test_readme.py::test_first_readme_command_in_a_fresh_virtualenv",
    # The quick-loop line, on the unpinned install the first line made (its comment says why
    # it needs the network: the install); its pytest runs the environment and lock modules.
    ("README.md", "For developers", 0):
        "tests/test_readme.py::"
        "test_the_readme_quick_loop_line_installs_and_passes_the_environment_and_lock_tests",
    ("README.md", "For auditors: check a published number", 0):
        "tests/test_documented_commands.py::test_the_readme_auditor_lines_as_written",
    ("README.md", "Your own model or dump", 0):
        "tests/test_catalog.py::test_readme_list_commands_as_written",
    ("README.md", "A dump you already have", 0):
        "tests/test_documented_commands.py::test_the_readme_dump_lines_as_written",
    ("README.md", "Evaluate a model in one command", 0):
        "tests/test_evaluate.py::test_readme_evaluate_lines_as_written",
    ("docs/studies.md", "Signed output folders", 0):
        "tests/test_sign.py::test_the_readme_signing_commands_as_written",
    ("docs/studies.md", "Why did it move: diff", 0):
        "tests/test_diff.py::test_readme_ci_recipe_runs_as_written",
    ("docs/retrieval.md", "TREC runs: `trec-eval`", 0):
        "tests/test_trec_quicktest.py::test_the_readme_commands_run_as_written",
    ("docs/probe-layout.md", "Probe studies over a tree of saved files", 0):
        "tests/test_probe_layout.py::test_the_documented_command_reads_the_tree_as_it_is",
    ("docs/models.md", "Your own encoder", 0):
        "tests/test_encoders.py::test_the_documented_encoder_runs_as_written",
    ("docs/models.md", "A HEAR module in your working folder", 0):
        "tests/test_user_code.py::test_the_documented_hear_module_runs_as_written",
    ("docs/models.md", "Speaker verification: resemblyzer on real speech", 0):
        "tests/test_speech_study.py::test_the_documented_speech_study_runs_as_written",
    ("docs/hear.md", "Example tasks", 0):
        "tests/test_hear_tasks.py::test_documented_command_builds_the_same_tasks_twice",
    ("docs/hear.md", "Run a HEAR module: `audiorepro hear`", 0):
        "tests/test_hear_command.py::test_the_documented_hear_lines_as_written",
    ("docs/hear.md", "HEAR's predictor: `hear-mlp-v1`", 0):
        "tests/test_hear_mlp.py::test_the_documented_hear_mlp_line_as_written",
    ("docs/hear.md", "A HEAR study: verdicts on leaderboard rows", 0):
        "tests/test_hear_command.py::test_the_documented_hear_lines_as_written",
    ("docs/hear.md", "A results table across encoders: `audiorepro hear-table`", 0):
        "tests/test_hear_command.py::test_the_documented_hear_lines_as_written",
    ("docs/hear.md", "Embeddings through the cache, and on Slurm", 0):
        "tests/test_scaleout.py::test_the_documented_hear_slurm_lines_as_written",
    ("docs/hear.md", "A submission's saved embeddings, without its model", 0):
        "tests/test_hear_saved_embeddings.py::test_the_documented_saved_embeddings_line_as_written",
    ("docs/benchmarks.md", "Real networks over HEAR tasks: the kit against heareval", 0):
        "tests/test_hear_bench.py::test_the_documented_hear_benchmark_runs_as_written_at_tiny_size",
    ("docs/hear.md", "Your own encoder and a real network", 0):
        "tests/test_hear_networks.py::test_a_py_encoder_runs_scene_and_event_tasks_as_documented",
    ("docs/metrics.md", "Speaker verification: EER, minDCF, Cllr under each toolkit's definition",
     0): "tests/test_speech_study.py::test_the_documented_definitions_run_as_written",
    ("docs/hpc.md", "Reproduce on HPC", 1):
        "tests/test_hpc_readme.py::test_the_readme_hpc_lines_as_written",
}  # fmt: skip
SHELL = {"bash", "sh", "shell", "console"}
#: A synopsis line shows what the reader fills in: [options], NAME..., a|b or a CAPITAL word.
PLACEHOLDER = re.compile(r"\[|\.\.\.|\||\b[A-Z][A-Z0-9_]{2,}\b")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    heading: str  # the nearest heading above it
    index: int  # its place among the shell blocks under that heading
    lang: str
    body: str

    def commands(self) -> list[str]:
        """The block's commands, continuation lines joined, comment lines left out."""
        found, current = [], ""
        for line in self.body.splitlines():
            if line.endswith("\\"):
                current += line[:-1].strip() + " "
                continue
            current += line.strip()
            if current.strip() and not current.lstrip().startswith("#"):
                found.append(current.strip())
            current = ""
        return found


def pages() -> list[str]:
    return ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


def blocks(page: str) -> list[Block]:
    """The fenced blocks of a page, each with the heading it is under."""
    found: list[Block] = []
    heading, counts = "", dict[str, int]()
    lines = (ROOT / page).read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^```(\S*)", line)
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            lang = fence.group(1)
            index = counts.get(heading, 0) if lang in SHELL else -1
            if lang in SHELL:
                counts[heading] = index + 1
            body = "\n".join(lines[i + 1 : end])
            found.append(Block(page, i + 1, heading, index, lang, body))
            i = end + 1
            continue
        title = re.match(r"^#{1,6} (.*)$", line)
        if title:
            heading = title.group(1).strip()
        i += 1
    return found


def shell_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page) if b.lang in SHELL]


def test_every_documented_command_is_run_or_marked() -> None:
    unmarked = [
        f"{b.page}:{b.line} ({b.heading!r}): {c}"
        for b in shell_blocks()
        if (b.page, b.heading, b.index) not in RUN_BY
        for c in b.commands()
        if not MARK.search(c)
    ]
    assert unmarked == [], (
        "commands that no test runs and that do not say what they need (add a test and a row "
        "to RUN_BY, mark the line `# needs ...`, or make a synopsis a ```text block):\n"
        + "\n".join(unmarked)
    )


def test_every_registered_block_exists_and_its_test_reads_its_page() -> None:
    present = {(b.page, b.heading, b.index) for b in shell_blocks()}
    for key, test in RUN_BY.items():
        assert key in present, f"RUN_BY names a block that is not there: {key}"
        module, name = test.split("::")
        source = (ROOT / module).read_text()
        assert re.search(rf"^def {re.escape(name)}\(", source, re.M), test
        page = Path(key[0])
        # The registered module reads the page by name (ROOT / "docs" / "x.md", or README.md).
        assert page.name in source and (page.parent.name in ("", ".") or '"docs"' in source), (
            f"{module} does not read {key[0]}"
        )


def test_a_synopsis_shows_its_placeholders() -> None:
    """A ```text block is not run; a line of it that names a command must be a synopsis, so
    that a runnable command cannot hide from the check above as plain text."""
    runnable = [
        f"{b.page}:{b.line}: {line}"
        for page in pages()
        for b in blocks(page)
        if b.lang == "text"
        for line in b.commands()
        if re.match(r"(audiorepro|pip|python3?|\.venv)\b", line) and not PLACEHOLDER.search(line)
    ]
    assert runnable == [], "\n".join(runnable)


def test_the_block_parser_sees_marks_and_continuations() -> None:
    block = Block("x.md", 1, "h", 0, "bash", "# a comment\na \\\n  b  # needs network\nc\n")
    assert block.commands() == ["a b  # needs network", "c"]
    assert [bool(MARK.search(c)) for c in block.commands()] == [True, False]


def _readme_block(heading: str) -> list[str]:
    (block,) = [b for b in blocks("README.md") if b.heading == heading and b.lang == "bash"]
    return block.commands()


def _run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    assert argv[0] == "audiorepro", line
    return subprocess.run(
        [sys.executable, "-m", "audiorepro", *argv[1:]], cwd=cwd, env=dict(os.environ),
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip


@pytest.mark.slow
def test_the_readme_auditor_lines_as_written(tmp_path: Path) -> None:
    """In a folder holding a study and the dumps it names (``a.npz``, ``b.npz``)."""
    synthetic_study(tmp_path)
    lines = _readme_block("For auditors: check a published number")
    assert [line.split()[1] for line in lines] == ["verify", "reproduce", "verify", "explain"]
    for line in lines:
        result = _run(line, tmp_path)
        assert result.returncode == 0, (line, result.stdout[-2000:], result.stderr[-2000:])
    assert (tmp_path / "run" / "report.html").is_file()


@pytest.mark.slow
def test_the_readme_dump_lines_as_written(tmp_path: Path) -> None:
    """From a checkout (the fixture dump's path is the repository's)."""
    lines = _readme_block("A dump you already have")
    assert {line.split()[1] for line in lines} == {"metrics", "parity"}
    work = tmp_path / "checkout"
    work.mkdir()
    (work / "fixtures").symlink_to(ROOT / "fixtures")
    for line in lines:
        result = _run(line, work)
        assert result.returncode == 0, (line, result.stdout[-2000:], result.stderr[-2000:])
    assert (work / "metrics.json").is_file()

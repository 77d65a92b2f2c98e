"""The command line starts light: ``--help`` and ``--version`` load no numeric stack, and the
group's table of commands (audiorepro.cli.app.COMMANDS) says what each command's help says."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from audiorepro.cli.app import COMMANDS, cli, summary_of

#: Modules that cost seconds to import (numba's compiler, scipy, torch, the report renderer):
#: none of them may be loaded to print the group's help or the version.
HEAVY = ("numba", "scipy", "torch", "sklearn", "audiorepro.render", "audiorepro.metrics")

_PROBE = (
    "import json, sys\n"
    "from audiorepro.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


def _modules_after(*args: str) -> tuple[str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=True
    )
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_the_group_help_and_version_import_no_numeric_stack(args: tuple[str, ...]) -> None:
    out, modules = _modules_after(*args)
    assert out  # it printed the help or the version
    loaded = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert loaded == []


@pytest.mark.parametrize(
    "name",
    sorted(COMMANDS),
)
def test_each_command_help_imports_no_numeric_stack(name: str) -> None:
    """``audiorepro CMD --help`` in a fresh process: the command's module declares its options
    and help with click alone and imports its work when it runs."""
    out, modules = _modules_after(name, "--help")
    assert f"Usage: audiorepro {name} " in out
    assert COMMANDS[name].module in modules
    heavy = [h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules)]
    assert heavy == [], f"`audiorepro {name} --help` imported {', '.join(heavy)}"


def test_the_choices_help_prints_are_the_declared_ones() -> None:
    """cli/options.py names, for ``--help``, the choices its modules declare: each equal."""
    from audiorepro.checks.catalog import WHAT
    from audiorepro.cli import options
    from audiorepro.formats.dump import EMPTY_POLICIES
    from audiorepro.metrics.profiles import BUILT_IN
    from audiorepro.metrics.retrieval import TIE_POLICIES
    from audiorepro.runner.hear import PREDICTORS
    from audiorepro.runner.kinds.probe.published import SCHEMA as PROBE_PUBLISHED

    assert options.TIE_POLICIES == TIE_POLICIES
    assert options.HEAR_PREDICTORS == PREDICTORS
    assert options.EMPTY_POLICIES == EMPTY_POLICIES
    assert options.LIST_WHAT == WHAT
    assert options.PROBE_PUBLISHED_SCHEMA == PROBE_PUBLISHED
    assert options.BUILT_IN_PROFILES == tuple((p.name, p.kind, p.hint) for p in BUILT_IN)


def test_the_help_lists_the_registered_profiles() -> None:
    """``metrics --help`` and ``evaluate --help`` list the built-in profiles without importing
    the registry: the same words as the registry's own listing (profile_help())."""
    from audiorepro.cli.metrics import profile_help

    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "metrics", "--help"], capture_output=True, text=True
    )
    assert "".join(profile_help().split()) in "".join(done.stdout.split())
    out, _ = _modules_after("evaluate", "--help")
    assert "[canonical|laion-clap|trec|dcase]" in out


def test_a_command_is_imported_only_when_it_runs() -> None:
    out, modules = _modules_after("trec-eval", "--help")
    assert "Usage: audiorepro trec-eval" in out
    assert "audiorepro.cli.trec" in modules
    assert "audiorepro.cli.commands" not in modules  # another command's module


def test_every_command_has_an_entry_whose_summary_is_its_help() -> None:
    cli.load_all()  # type: ignore[attr-defined]
    assert sorted(cli.commands) == sorted(COMMANDS)
    for name, entry in COMMANDS.items():
        command = cli.commands[name]
        assert command.callback is not None
        assert command.callback.__module__ == entry.module, name
        assert " ".join(summary_of(command).split()) == entry.summary, name
        for limit in (30, 45, 80, 400):
            table = click.Command(name, help=entry.summary).get_short_help_str(limit)
            assert table == command.get_short_help_str(limit), (name, limit)


def test_the_group_help_lists_what_click_would_list() -> None:
    """The lazy listing equals click's own listing of the loaded commands, at two widths."""
    cli.load_all()  # type: ignore[attr-defined]
    for width in (80, 140):
        ctx = click.Context(cli, terminal_width=width)
        lazy = click.HelpFormatter(width=width)
        cli.format_commands(ctx, lazy)
        eager = click.HelpFormatter(width=width)
        click.Group.format_commands(cli, ctx, eager)
        assert lazy.getvalue() == eager.getvalue()


def test_an_unknown_command_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "audiorepro", "no-such-command"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "audiorepro: error: No such command 'no-such-command'. (see 'audiorepro --help')"
    ]


def _startup_bench() -> Any:
    import importlib.util

    path = Path(__file__).parent.parent / "benchmarks" / "startup.py"
    spec = importlib.util.spec_from_file_location("startup_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_startup_benchmark_times_a_fresh_call() -> None:
    """benchmarks/startup.py (run whole in ``tox -e bench``): its timing of one call in a
    fresh process, its table row and a command's own work, on ``--version``."""
    import os

    bench = _startup_bench()
    wall, cpu = bench.time_call(["--version"], dict(os.environ))
    assert wall > 0 and cpu >= 0
    assert bench.row("--version", [(wall, cpu)]).startswith("| --version | ")
    work_wall, work_cpu = bench.work_call(["--version"], dict(os.environ))
    assert 0 <= work_wall < wall and work_cpu >= 0
    assert "--version --help" not in bench.COMMANDS and "verify --help" in bench.COMMANDS


def test_the_startup_benchmark_runs_as_documented(demo: Path) -> None:
    """The small run its docstring documents, as written (OUT: the demo's folder): a fresh
    install of the checkout's wheel, ``--version`` and ``linear-probe`` timed, the probe
    beside the minimal scikit-learn script, and numba's cache left empty (issue 48)."""
    import os
    import shlex

    bench = _startup_bench()
    doc = bench.__doc__
    (line,) = [x.strip() for x in doc.splitlines() if "--rows=" in x]
    argv = shlex.split(line)
    assert argv[:2] == ["python", "benchmarks/startup.py"]
    argv = [str(demo) if a == "OUT" else a for a in argv[2:]]
    done = subprocess.run(
        [sys.executable, str(Path(bench.__file__)), *argv], capture_output=True, text=True,
        check=False, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "a fresh install of the checkout's wheel" in out
    assert re.search(r"^\| --version \| [0-9.]+ \|", out, re.M)
    assert re.search(r"^\| linear-probe \(200 x 512\) \|( [0-9.-]+ \|){9}$", out, re.M)
    assert re.search(r"^\| scikit-learn script, the same fit \| \| \| [0-9.]+ \|", out, re.M)
    assert re.search(
        r"linear-probe above the minimal scikit-learn script .*: -?[0-9.]+ s wall", out
    )
    assert "metrics DUMP" not in out  # only the rows asked for
    assert "numba's cache after every call: 0 file(s) written" in out


def test_metrics_of_a_dump_imports_no_jit_compiler(tmp_path: Path) -> None:
    """``metrics DUMP`` in a fresh process (issue 48 item 2): the exact rank counts are C
    compiled by the package's build, so neither numba nor llvmlite is imported, and a
    ``NUMBA_CACHE_DIR`` (empty, read-only) stays empty; the numbers are printed."""
    import os

    from tests.conftest import DUMPS

    cache = tmp_path / "numba-cache"
    cache.mkdir()
    cache.chmod(0o555)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "metrics", str(DUMPS[0])], capture_output=True,
        text=True, check=True, env=dict(os.environ, NUMBA_CACHE_DIR=str(cache)),
    )  # fmt: skip
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "audiorepro.metrics._exact_kernels" in modules  # the rank counts were computed
    assert {m.split(".")[0] for m in modules} & {"numba", "llvmlite"} == set()
    assert re.search(r"^r@1 \^ +[0-9.]+ +[0-9.]+$", done.stdout, re.M), done.stdout
    assert list(cache.iterdir()) == []


def test_diff_in_a_fresh_process_knows_every_built_in_kind(tmp_path: Path) -> None:
    """diff imports its work when it runs: that work includes registering the built-in kinds
    (a lazy import that skipped them left diff knowing no bundle schema at all)."""
    from audiorepro.runner.kinds import diff_kinds
    from audiorepro.runner.study import folder_problem  # noqa: F401 (registers the kinds)

    bundle = tmp_path / "bundle.json.gz"
    bundle.write_bytes(gzip.compress(b'{"schema": "audiorepro.nosuch/1"}', mtime=0))
    done = subprocess.run(
        [sys.executable, "-m", "audiorepro", "diff", str(bundle), str(bundle)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip().endswith("expected one of " + ", ".join(sorted(diff_kinds())))
    assert "audiorepro.bundle/1" in done.stderr


def test_diff_of_two_folders_imports_only_the_kinds_its_bundles_name(demo: Path) -> None:
    """``diff`` of two demo folders (a retrieval study with a nested probe study) in a fresh
    process: the two kinds its bundles name, none of the other kinds (each imports its whole
    computation) nor the numeric stacks only they use: scipy's optimizers are imported by the
    event metrics when they match events, not by the renderer that diff imports (issue 48
    item 4)."""
    out, modules = _modules_after("diff", str(demo), str(demo))
    assert "identical" in out
    kinds = {m.split(".")[3] for m in modules if m.startswith("audiorepro.runner.kinds.")}
    assert kinds == {"retrieval", "probe"}
    unneeded = ("torch", "sklearn", "numba", "scipy", "audiorepro.runner.study")
    loaded = [h for h in unneeded if any(m == h or m.startswith(h + ".") for m in modules)]
    assert loaded == []


#: What ``diff`` and ``verify OUT`` do not use, so do not import (issue 48 item 4): the model
#: and numeric stacks, the markdown parser (a report's notes), cryptography (needed only with
#: --key or --trusted-keys), the kinds' computation and spec models (a bundle is read back with
#: its kind's records alone; a study's spec is parsed only to run one) and the extraction
#: (the cache, the executors, the embedders: the manifest imports them to write one).
NOT_FOR_READING = (
    "torch",
    "transformers",
    "sklearn",
    "scipy",
    "numba",
    "markdown_it",
    "cryptography",
    "audiorepro.runner.kinds.probe.content",
    "audiorepro.runner.kinds.probe.gates",
    "audiorepro.runner.kinds.probe.runs",
    "audiorepro.runner.kinds.probe.saved",
    "audiorepro.runner.kinds.probe.spec",
    "audiorepro.runner.kinds.probe.measurements",
    "audiorepro.runner.kinds.retrieval.spec",
    "audiorepro.runner.executors",
    "audiorepro.runner.cache",
    "audiorepro.models.extract",
    "audiorepro.models.embedder",
)


def _unneeded(modules: set[str]) -> list[str]:
    return [h for h in NOT_FOR_READING if any(m == h or m.startswith(h + ".") for m in modules)]


@pytest.mark.parametrize("what", [".", "bundle.json.gz", "probe/bundle.json.gz"])
def test_diff_reads_two_runs_without_their_computation(demo: Path, what: str) -> None:
    """``diff`` of the demo's run with itself (its folder, a retrieval study with a probe
    study nested; or one of its two bundles) in a fresh process: the numbers compared, and
    none of :data:`NOT_FOR_READING` imported."""
    out, modules = _modules_after("diff", str(demo / what), str(demo / what))
    assert "identical" in out
    if what != "bundle.json.gz":  # the probe bundle was read, by its kind's records
        assert "audiorepro.runner.kinds.probe" in modules
    assert _unneeded(modules) == []


def test_verify_out_reads_the_folder_without_its_computation(demo: Path) -> None:
    """``verify OUT`` of the demo's folder in a fresh process: the verdict, and none of
    :data:`NOT_FOR_READING` imported."""
    out, modules = _modules_after("verify", str(demo))
    assert "PASS" in out
    assert _unneeded(modules) == []


def _small_run(line: str, demo: Path, rows: str) -> str:
    """``line`` (a documented ``python benchmarks/startup.py ...``) run as written, narrowed
    by the benchmark's own variables to ``rows`` on the demo's folder; its output."""
    import os
    import shlex

    argv = shlex.split(line)
    assert argv[:2] == ["python", "benchmarks/startup.py"]
    bench = _startup_bench()
    env = dict(os.environ, **{bench.SMALL_ROWS: rows, bench.SMALL_OUT: str(demo)})
    done = subprocess.run(
        [sys.executable, *argv[1:]], capture_output=True, text=True, check=False,
        timeout=900, env=env, cwd=Path(bench.__file__).parent.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"narrowed by {bench.SMALL_ROWS}={rows}, ")
    return done.stdout


def test_the_startup_line_of_the_benchmarks_page_runs_as_written(demo: Path) -> None:
    """docs/benchmarks.md's ``python benchmarks/startup.py --repeat 5``, as written (house
    rule: every documented command is tested), narrowed to ``--version`` and ``diff``: the
    fresh install, five warm calls each, diff's start-up row and numba's cache left empty."""
    page = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text()
    lines = set(re.findall(r"`(python benchmarks/startup\.py[^`]*)`", page))
    assert "python benchmarks/startup.py --repeat 5" in lines
    out = _small_run("python benchmarks/startup.py --repeat 5", demo, "--version,diff")
    assert "warm 5 runs each" in out
    assert re.search(r"^\| --version \| [0-9.]+ \|", out, re.M)
    assert re.search(r"^\| diff --help \| [0-9.]+ \|", out, re.M)
    assert re.search(r"^\| diff OUT OUT \|( -?[0-9.]+ \|){9}$", out, re.M)
    assert "| verify OUT |" not in out and "| trec-eval" not in out  # only the rows asked for
    assert "numba's cache after every call: 0 file(s) written" in out

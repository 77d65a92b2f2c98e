"""trec-eval's compiled kernels (``core/_trec.c``, issue 48 item 2): built ahead of time by the
package's own build, so that the first ``trec-eval`` in a fresh process, a fresh install, the
emulated read-only SIF (and a Slurm array task: ``tests/test_scaleout.py``) compiles nothing,
imports no numba and writes no cache; a checkout builds them in place once; a missing library
is one line saying how to get it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from audiorepro.core import native
from audiorepro.core.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
STANDINS = ROOT / "tests" / "standins"
QRELS = "1 0 a 1\n1 0 b 0\n2 0 c 2\n"
RUN = "1 Q0 a 1 0.5 bm25\n1 Q0 b 2 0.9 bm25\n2 Q0 c 1 1.0 bm25\n"
#: `-m map -m ndcg_cut.10` on QRELS and RUN, as trec_eval prints it (map: (1/2 + 1) / 2).
EXPECTED = "map                   \tall\t0.7500\nndcg_cut_10           \tall\t0.8155\n"
#: Runs the command line in this process, then reports what was imported and the CPU it took.
PROBE = (
    "import json, sys, time\n"
    "t = time.process_time()\n"
    "from audiorepro.cli import main\n"
    "code = main(['trec-eval', '-m', 'map', '-m', 'ndcg_cut.10', sys.argv[1], sys.argv[2]])\n"
    "cpu = time.process_time() - t\n"
    "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'llvmlite'})\n"
    "print(json.dumps({'code': code, 'cpu': cpu, 'jit': loaded}), file=sys.stderr)\n"
)


def _inputs(folder: Path) -> tuple[Path, Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").write_text(QRELS)
    (folder / "run").write_text(RUN)
    cache = folder / "numba-cache"  # empty and read-only: numba could write nothing there
    cache.mkdir()
    cache.chmod(0o555)
    return folder / "qrels", folder / "run", cache


def _report(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stderr
    report: dict[str, object] = json.loads(proc.stderr.strip().splitlines()[-1])
    return report


def _checkout_copy(tree: Path) -> Path:
    """What a clean checkout holds for the build (no library built in place)."""
    tree.mkdir(parents=True, exist_ok=True)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    built = shutil.ignore_patterns("_trec*.so", "_rankcount*.so", "__pycache__", "*.lock")
    shutil.copytree(ROOT / "src", tree / "src", ignore=built)
    return tree


def test_a_first_trec_eval_in_a_fresh_process_compiles_nothing(tmp_path: Path) -> None:
    qrels, run, cache = _inputs(tmp_path)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(qrels), str(run)], env=env,
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    report = _report(proc)
    assert proc.stdout == EXPECTED
    assert report["code"] == 0 and report["jit"] == []
    assert list(cache.iterdir()) == []


def test_the_wheel_carries_the_kernels_and_a_fresh_install_runs_them(tmp_path: Path) -> None:
    """The package's own build (what tox's ``package = wheel`` and the image run) compiles the
    kernels into a cp311 wheel; installed alone (``--target``, no checkout beside it), its
    first trec-eval and its first metrics DUMP find them and build nothing."""
    tree = _checkout_copy(tmp_path / "tree")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist"), str(tree)], check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("audiorepro-*.whl")
    assert wheel.name.endswith("-cp311-cp311-linux_x86_64.whl"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert "audiorepro/core/_trec.cpython-311-x86_64-linux-gnu.so" in names
    assert "audiorepro/metrics/_rankcount.cpython-311-x86_64-linux-gnu.so" in names
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)  # fmt: skip
    package = site / "audiorepro"
    before = sorted(p.relative_to(site) for p in package.rglob("*") if "__pycache__" not in p.parts)
    for path in package.rglob("*"):  # an installed tree that cannot be written to
        path.chmod(0o555 if path.is_dir() else 0o444)
    qrels, run, cache = _inputs(tmp_path / "inputs")
    env = {**os.environ, "PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(cache),
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    code = f"import audiorepro; assert audiorepro.__file__.startswith({str(site)!r})\n" + PROBE
    proc = subprocess.run([sys.executable, "-c", code, str(qrels), str(run)], env=env,
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    report = _report(proc)
    assert proc.stdout == EXPECTED and report["jit"] == []
    # The retrieval metrics' exact rank counts, compiled into the same wheel (issue 48 item 2).
    metrics = code.replace("main(['trec-eval', '-m', 'map', '-m', 'ndcg_cut.10', sys.argv[1], "
                           "sys.argv[2]])", "main(['metrics', sys.argv[1]])")  # fmt: skip
    assert metrics != code
    dump = ROOT / "fixtures" / "dumps" / "synthetic_1cap.npz"
    proc = subprocess.run([sys.executable, "-c", metrics, str(dump)], env=env,
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert _report(proc)["jit"] == [] and "r@1 ^" in proc.stdout
    after = sorted(p.relative_to(site) for p in package.rglob("*") if "__pycache__" not in p.parts)
    assert after == before and list(cache.iterdir()) == []


def test_a_checkout_builds_the_kernels_in_place_once(tmp_path: Path) -> None:
    """``PYTHONPATH=src`` in a checkout without the library: the first use builds it in place
    (setup.py's flags), the next uses load it, an edited ``_trec.c`` rebuilds it."""
    _checkout_copy(tmp_path)
    core = tmp_path / "src" / "audiorepro" / "core"
    assert not list(core.glob("_trec*.so"))
    code = "from audiorepro.core import native; native.library(); print(native.library_path().name)"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}

    def load() -> str:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True, cwd=tmp_path, timeout=300)  # fmt: skip
        return proc.stdout.strip()

    assert load() == "_trec.cpython-311-x86_64-linux-gnu.so"
    (built,) = core.glob("_trec*.so")
    first = built.stat().st_mtime_ns
    assert load() == built.name and built.stat().st_mtime_ns == first
    source = core / "_trec.c"
    os.utime(source, ns=(first + 10**9, first + 10**9))  # the source edited after the build
    load()
    assert built.stat().st_mtime_ns > first


def test_a_missing_library_is_one_line_naming_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "HERE", tmp_path)
    monkeypatch.setattr(native, "SOURCE", tmp_path / "_trec.c")
    monkeypatch.setattr(native, "SETUP", tmp_path / "setup.py")
    with pytest.raises(UserError) as caught:
        native.library()
    message = str(caught.value)
    assert "\n" not in message
    assert "compiled trec-eval kernels" in message
    assert "python setup.py build_ext --inplace" in message


def test_a_first_trec_eval_in_the_emulated_sif_compiles_nothing(tmp_path: Path) -> None:
    """In the read-only SIF (``tests/standins/sif.py``: the image's folders and root
    read-only, a fresh /tmp), with the image's own environment and numba's cache pointed at
    an empty read-only bind: the answer, no numba imported, nothing written."""
    from tests.test_hpc_readme import _needs_namespaces

    _needs_namespaces()
    sys.path.insert(0, str(STANDINS))
    try:
        import sif
    finally:
        sys.path.remove(str(STANDINS))
    image = sif.write_image(tmp_path / "audiorepro.sif")
    _, _, cache = _inputs(tmp_path / "data")
    (tmp_path / "data" / "probe.py").write_text(PROBE)
    env = {**os.environ, "PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(STANDINS / "apptainer"), "exec", "--containall", "--cleanenv",
         "--bind", f"{tmp_path / 'data'}:/data:ro", "--env", "NUMBA_CACHE_DIR=/data/numba-cache",
         str(image), "python", "/data/probe.py", "/data/qrels", "/data/run"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    report = _report(proc)
    assert proc.stdout == EXPECTED and report["jit"] == []
    assert list(cache.iterdir()) == []


def test_the_trec_benchmark_runs_every_format_beside_trec_eval(tmp_path: Path) -> None:
    """``benchmarks/trec.py`` (docs/benchmarks.md, ``tox -e bench``) at a tiny size: every
    judgement format is a row, both tools ran and printed the same bytes. Needs trec_eval
    ($TREC_EVAL or $TREC_EVAL_SRC, as the live comparison of test_trec_eval_binary)."""
    from tests.test_trec_eval_binary import _binary

    binary = _binary(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "trec.py"), "--sizes", "3", "--docs", "40",
         "--repeat", "1", "--trec-eval", str(binary), "--folder", str(tmp_path / "files")],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| 3 |")]
    assert [r[1] for r in rows] == [
        "qrels: -m all_trec",
        "qrels: -m map -m ndcg_cut.10",
        "-R prefs -m all_prefs",
        "-R qrels_prefs -m all_prefs",
        "-R qrels_jg -m qrels_jg",
    ]
    assert all(r[-1] == "yes |" for r in rows), proc.stdout


def test_the_documented_trec_benchmark_line_builds_trec_eval_from_its_source(
    tmp_path: Path,
) -> None:
    """docs/benchmarks.md's ``python benchmarks/trec.py --trec-eval-src PATH/trec_eval`` as
    written (PATH/trec_eval: ``$TREC_EVAL_SRC``), at a tiny size (three queries of 40
    documents, one run each: the options appended): it builds trec_eval from the source and
    prints every format's row with the same output. Skipped without ``$TREC_EVAL_SRC`` (a
    checkout of trec_eval at the pinned commit) or without gcc and make."""
    import re
    import shlex

    source = os.environ.get("TREC_EVAL_SRC")
    if not source:
        pytest.skip("needs $TREC_EVAL_SRC: trec_eval's source at its pinned commit")
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("$TREC_EVAL_SRC is set but gcc or make is missing")
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    line = re.search(r"`(python benchmarks/trec\.py --trec-eval-src PATH/trec_eval)`", text)
    assert line is not None
    argv = [source if a == "PATH/trec_eval" else a for a in shlex.split(line.group(1))]
    assert argv[:2] == ["python", "benchmarks/trec.py"]
    proc = subprocess.run(
        [sys.executable, *argv[1:], "--sizes", "3", "--docs", "40", "--repeat", "1",
         "--folder", str(tmp_path / "files")],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| 3 |")]
    assert len(rows) == 5 and all(r[-1] == "yes |" for r in rows), proc.stdout
    head = [line for line in proc.stdout.splitlines() if line.startswith("load average")]
    assert "trec_eval_src/trec_eval" in head[0]  # the binary built here

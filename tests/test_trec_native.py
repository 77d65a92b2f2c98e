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
from typing import Any

import pytest

from audiorepro.core import native
from audiorepro.core.errors import UserError
from tests.test_trec_eval_binary import RECORD, SEEDED
from tests.test_trec_quicktest import CASES

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
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, tree / name)
    built = shutil.ignore_patterns(
        "_trec*.so", "_rankcount*.so", "trec-eval", "__pycache__", "*.lock"
    )
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
    # The native trec-eval program, with its exec bit (a zip entry's Unix mode, high bits).
    mode = zipfile.ZipFile(wheel).getinfo("audiorepro/core/trec-eval").external_attr >> 16
    assert mode & 0o111 == 0o111, oct(mode)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)  # fmt: skip
    package = site / "audiorepro"
    before = sorted(p.relative_to(site) for p in package.rglob("*") if "__pycache__" not in p.parts)
    for path in package.rglob("*"):  # an installed tree that cannot be written to (the
        path.chmod(0o555 if path.is_dir() else path.stat().st_mode & 0o555)  # exec bits kept
    qrels, run, cache = _inputs(tmp_path / "inputs")
    env = {**os.environ, "PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(cache),
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    located = f"import audiorepro; assert audiorepro.__file__.startswith({str(site)!r})\n"
    code = located + PROBE
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
    # A real command line execs the installed program (main never returns).
    native = subprocess.run([sys.executable, "-c", "import sys\n" + located + EXEC_PROBE,
                             "-m", "map", "-m", "ndcg_cut.10", str(qrels), str(run)], env=env,
                            capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert (native.stdout, native.stderr) == (EXPECTED, "")
    after = sorted(p.relative_to(site) for p in package.rglob("*") if "__pycache__" not in p.parts)
    assert after == before and list(cache.iterdir()) == []
    _console_command_in_a_fresh_venv(tmp_path / "venv", wheel, qrels, run)


def _console_command_in_a_fresh_venv(venv: Path, wheel: Path, qrels: Path, run: Path) -> None:
    """The wheel in a fresh virtualenv with nothing else: its console command ``audiorepro
    trec-eval`` answers through the native program (no dependency is needed for that) and its
    peak memory is the program's, not the Python path's."""
    # Nothing of the checkout on the path (pip would take src/'s egg-info for an install).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUDIOREPRO_TREC_NATIVE")}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120, env=env)  # fmt: skip
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--no-deps", "-q", str(wheel)], check=True, capture_output=True,
                   timeout=300, env=env)  # fmt: skip
    argv = [str(venv / "bin" / "audiorepro"), "trec-eval", "-m", "map", "-m", "ndcg_cut.10",
            str(qrels), str(run)]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, EXPECTED, "")
    probe = EXEC_PROBE.replace("import sys\n", "import sys\nassert 'numpy' not in sys.modules\n")
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", probe, "-m", "map", "-m",
                           "ndcg_cut.10", str(qrels), str(run)], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert (proc.stdout, proc.stderr) == (EXPECTED, "")  # exec'ed: main never returned


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
    # A real command line in the image execs its native program (main never returns).
    (tmp_path / "data" / "exec_probe.py").write_text(EXEC_PROBE)
    proc = subprocess.run(
        [str(STANDINS / "apptainer"), "exec", "--containall", "--cleanenv",
         "--bind", f"{tmp_path / 'data'}:/data:ro", str(image), "python", "/data/exec_probe.py",
         "-m", "map", "-m", "ndcg_cut.10", "/data/qrels", "/data/run"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert (proc.stdout, proc.stderr) == (EXPECTED, "")


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
    assert [r[1] for r in rows[::2]] == [
        "qrels: -m all_trec",
        "qrels: -m map -m ndcg_cut.10",
        "-R prefs -m all_prefs",
        "-R qrels_prefs -m all_prefs",
        "-R qrels_jg -m qrels_jg",
    ]
    # audiorepro as users call it: the console command, then python -m
    assert [r[2] for r in rows] == ["`audiorepro`", "`python -m audiorepro`"] * 5
    assert [r[1] for r in rows[1::2]] == [r[1] for r in rows[::2]]
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
    assert len(rows) == 10 and all(r[-1] == "yes |" for r in rows), proc.stdout
    head = [line for line in proc.stdout.splitlines() if line.startswith("load average")]
    assert "trec_eval_src/trec_eval" in head[0]  # the binary built here


# ----------------------------------------------------- the native trec-eval program ----
# core/_trec_main.c, built by setup.py beside the kernels; `audiorepro trec-eval` execs it
# (cli/entry.py). It answers what the Python path answers, with the same bytes, and hands
# anything else to it before printing a byte.


#: Every recorded command line: trec_eval's quicktest and the seeded recordings, all formats.
RECORDED = [(name, argv) for name, argv in CASES] + [
    (path, [*argv[:-2], str(SEEDED / path.split("/")[0] / argv[-2]),
            str(SEEDED / path.split("/")[0] / argv[-1])])
    for path, _, argv in RECORD
]  # fmt: skip
#: What the program leaves to the Python path among them (nothing else may fall back).
FALLS_BACK = ("-Z",)
#: A Python that does not exist: a run that falls back says so (exit 2) instead of answering.
NO_PYTHON = "/nonexistent/python-for-the-fallback"
#: A real command line in a fresh process: says on stderr whether main() returned (the
#: native program did not replace the process) and what was imported before.
EXEC_PROBE = (
    "import sys\n"
    "sys.argv = ['audiorepro', 'trec-eval', *sys.argv[1:]]\n"
    "from audiorepro.cli import main\n"
    "code = main()\n"
    "print('returned', code, file=sys.stderr)\n"
)


def _exec_probe(probe: str, qrels: Path, run: Path) -> list[str]:
    """``probe`` (EXEC_PROBE's kind) on ``-m map -m ndcg_cut.10 QRELS RUN``."""
    return [sys.executable, "-c", probe, "-m", "map", "-m", "ndcg_cut.10", str(qrels), str(run)]


@pytest.fixture(scope="module")
def program() -> str:
    """The native program (built in place first in this checkout)."""
    from audiorepro.cli.entry import native_program

    path = native_program()
    assert path is not None, "the native trec-eval program was not built (setup.py build_ext)"
    return path


def _native(program: str, argv: list[str], python: str = NO_PYTHON,
            **kw: Any) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    env = {**os.environ, "AUDIOREPRO_PYTHON": python}
    env.pop("AUDIOREPRO_TREC_NATIVE", None)
    streams = {"stdout": kw.pop("stdout", subprocess.PIPE), "stderr": subprocess.PIPE}
    return subprocess.run([program, *argv], env=env, check=False, timeout=120, **streams, **kw)


def _python_path(argv: list[str]) -> tuple[int, str, str]:
    """The Python path in this process (main with an argv never execs): code, out, err."""
    import contextlib
    import io

    from audiorepro.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["trec-eval", *argv])
    return code, out.getvalue(), err.getvalue()


def _fell_back(proc: subprocess.CompletedProcess[bytes]) -> bool:
    return proc.returncode == 2 and b"cannot start the Python path" in proc.stderr


def test_every_recorded_case_is_counted() -> None:
    assert len(RECORDED) == 15 + 12 * (12 + 7)


@pytest.mark.parametrize(("name", "argv"), RECORDED, ids=[c[0] for c in RECORDED])
def test_the_program_prints_the_python_path_s_bytes_or_falls_back(
    name: str, argv: list[str], program: str
) -> None:
    proc = _native(program, argv)
    expected_fallback = any(a in FALLS_BACK for a in argv)
    assert _fell_back(proc) == expected_fallback, proc.stderr
    if not expected_fallback:
        code, out, err = _python_path(argv)
        assert (proc.returncode, proc.stdout.decode(), proc.stderr.decode()) == (code, out, err)
        assert code == 0 and out


def _fallback_files(tmp: Path, write: bool = True) -> dict[str, list[str]]:
    """Command lines the program hands to the Python path (files written into ``tmp``)."""
    qrels, run = tmp / "q", tmp / "r"
    texts = {qrels: QRELS, run: RUN, tmp / "short": "1 Q0 a 1 0.5\n",
             tmp / "accent": QRELS + "2 0 \u00e9t\u00e9 1\n",
             tmp / "z": "1 map 0.5 0.1\n2 map 0.5 0.1\n"}  # fmt: skip
    for path, text in texts.items() if write else ():
        path.write_text(text)
    files = [str(qrels), str(run)]
    return {
        "unknown measure": ["-m", "nope", *files],
        "parameters of a set": ["-m", "official.5", *files],
        "a cutoff of 0": ["-m", "P.0", *files],
        "utility of 3": ["-m", "utility.1,2,3", *files],
        "a prefs measure under -R qrels": ["-m", "prefs_simp", *files],
        "a malformed run": [str(qrels), str(tmp / "short")],
        "a non-ASCII docno": ["-q", str(tmp / "accent"), str(run)],
        "a missing file": [str(qrels), str(tmp / "missing")],
        "a folder": [str(qrels), str(tmp)],
        "standard input": [str(qrels), "-"],
        "-Z": ["-q", "-Z", str(tmp / "z"), *files],
        "--tie-bounds": ["--tie-bounds", *files],
        "no shared query": ["-D", "1.9", *files],
        "grouped flags": ["-qc", *files],
        "-T": ["-T", "other", *files],
        "--help": ["--help"],
    }


@pytest.mark.parametrize("case", sorted(_fallback_files(Path(), write=False)))
def test_a_fallback_gives_the_python_path_s_answer(case: str, tmp_path: Path,
                                                   program: str) -> None:  # fmt: skip
    """The program prints nothing of its own: the Python path answers (its stdout, stderr and
    exit code, the same as with the native path off)."""
    argv = _fallback_files(tmp_path)[case]
    stdin = b"1 Q0 a 1 0.5 r\n"
    native = _native(program, argv, python=sys.executable, input=stdin)
    env = {**os.environ, "AUDIOREPRO_TREC_NATIVE": "0"}
    python = subprocess.run([sys.executable, "-m", "audiorepro", "trec-eval", *argv], env=env,
                            input=stdin, capture_output=True, check=False, timeout=120)  # fmt: skip
    assert (native.returncode, native.stdout, native.stderr) == (
        python.returncode, python.stdout, python.stderr,
    )  # fmt: skip
    assert _fell_back(_native(program, argv, input=stdin))


MEASURE_SPECS = (
    "map", "P", "P.5", "P.7,3", "P.1,2,1000", "recall.4", "ndcg_cut.10", "ndcg_cut.3,1",
    "map_cut.2", "relative_P.3", "success.2", "unj.1", "iprec_at_recall", "iprec_at_recall.0.25",
    "iprec_at_recall.0.5,0.125", "Rprec_mult.0.5,1.5", "relstring", "relstring.3",
    "relstring.0", "utility.2,-1,0,1", "set_F.0.5", "11pt_avg.0.2,0.8", "ndcg", "ndcg.1=3,2=9",
    "ndcg.0=1,1=2.5", "G.1=2", "dcg.2=4", "ideal_dcg", "ndcg_rel.1=1,2=3", "Rndcg",
    "rbp", "rbp.p=0.5", "rbp_resid.p=0.8,1=1", "official", "all_trec", "set", "gm_map",
    "gm_bpref", "bpref", "infAP", "binG", "num_nonrel_judged_ret", "runid", "num_q", "Rprec",
    "recip_rank", "set_P", "set_map", "map.ignored",
)  # fmt: skip
JG_SPECS = ("qrels_jg", "map_avgjg", "P_avgjg", "P_avgjg.2,7", "Rprec_mult_avgjg.0.5", "num_q")
PREFS_SPECS = ("all_prefs", "prefs", "prefs_simp", "prefs_pair", "prefs_avgjg_Rnonrel_ret",
               "prefs_num_prefs_poss", "prefs_pair_imp", "num_q", "runid")  # fmt: skip
#: Per judgement format (-R): its -m specs, seeded folders and judgement files (the ``.c``
#: files judge a query the run lacks, for -c).
FORMATS = {
    "qrels": (MEASURE_SPECS, ["runs-00", "runs-03", "runs-06", "runs-09"], ["qrels"]),
    "qrels_jg": (JG_SPECS, ["prefs-00", "prefs-05", "prefs-10"], ["qrels_jg", "qrels_jg.c"]),
    "prefs": (PREFS_SPECS, ["prefs-01", "prefs-06", "prefs-11"], ["prefs", "prefs.c"]),
    "qrels_prefs": (PREFS_SPECS, ["prefs-02", "prefs-07"], ["qrels_prefs"]),
}


def _command_lines(rel_format: str) -> Any:
    from hypothesis import strategies as st

    specs, folders, files = FORMATS[rel_format]
    flags = st.lists(st.sampled_from(["-q", "-c", "-n", "-J"]), max_size=4)
    valued = st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["-M", "-M"]), st.integers(1, 60).map(str)),
            st.tuples(st.just("-l"), st.integers(-1, 3).map(str)),
            st.tuples(st.just("-N"), st.integers(0, 3000).map(str)),
            st.tuples(st.just("-D"), st.sampled_from(["0", "1.", "1.3", "2.1", "1.17"])),
        ),
        max_size=3,
    )
    where = st.tuples(st.sampled_from(folders), st.sampled_from(files))
    return st.tuples(where, st.booleans(), flags, valued, st.booleans(),
                     st.lists(st.sampled_from(specs), max_size=4))  # fmt: skip


@pytest.mark.parametrize("rel_format", sorted(FORMATS))
def test_command_lines_give_the_python_path_s_bytes(rel_format: str, program: str) -> None:
    """Any plain command line of each judgement format (flags, valued options attached or
    not, -m specs with nicknames, parameters and repeats): where the Python path answers, the
    program answers the same bytes, or fell back where the Python path reads the line through
    click; where it refuses (exit 2), the program fell back. Most examples are answered by the
    program (a test whose files were all missing would pass on fallbacks)."""
    from hypothesis import given

    from audiorepro.cli import trec_fast

    answered: list[bool] = []

    @given(_command_lines(rel_format))
    def check(line: tuple[Any, ...]) -> None:
        (folder, judgements), attached, flags, valued, shuffle, chosen = line
        argv = list(flags)
        for option, value in valued:
            argv += [option + value] if attached else [option, value]
        for spec in chosen:
            argv += ["-m" + spec] if attached else ["-m", spec]
        if rel_format != "qrels":
            argv += ["-R", rel_format]
        argv += [str(SEEDED / folder / judgements), str(SEEDED / folder / "run")]
        if shuffle:
            argv = argv[-2:-1] + argv[:-2] + argv[-1:]  # a file first, as trec_eval reads it
        proc = _native(program, argv)
        code, out, err = _python_path(argv)
        answered.append(not _fell_back(proc))
        if _fell_back(proc):
            # Only what the Python path refuses, or reads through click (-l -1: a value like an
            # option, which cli/trec_fast hands to click as the program hands it to Python).
            assert code != 0 or trec_fast.parse(["trec-eval", *argv]) is None, argv
            return
        assert (proc.returncode, proc.stdout.decode(), proc.stderr.decode()) == (0, out, err), argv

    check()
    assert sum(answered) >= len(answered) // 2, (sum(answered), len(answered))


def _peak(cmd: list[str], env: dict[str, str]) -> int:
    """The peak memory (KiB) of ``cmd`` in a fresh process forked from a bare ``python -S``
    (benchmarks/trec.py's LAUNCHER: Linux keeps the peak across exec)."""
    text = (ROOT / "benchmarks" / "trec.py").read_text()
    launcher = text.split('LAUNCHER = """\\\n', 1)[1].split('"""', 1)[0]
    report = Path(env["REPORT"])
    subprocess.run([sys.executable, "-S", "-c", launcher, str(report), *cmd], env=env,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    code, _, _, rss = report.read_text().split()
    assert code == "0"
    return int(rss)


def test_the_launcher_s_peak_memory_is_near_a_bare_python(tmp_path: Path, program: str) -> None:
    """`python -m audiorepro trec-eval` execs the program before importing anything but the
    package's entry: its peak is within a tenth of a bare `python -c pass` on this machine,
    where the Python path's is far above."""
    qrels, run, _ = _inputs(tmp_path)
    env = {**os.environ, "REPORT": str(tmp_path / "report")}
    env.pop("AUDIOREPRO_TREC_NATIVE", None)
    bare = min(_peak([sys.executable, "-c", "pass"], env) for _ in range(3))
    argv = [sys.executable, "-m", "audiorepro", "trec-eval", "-m", "all_trec", str(qrels), str(run)]
    ours = min(_peak(argv, env) for _ in range(3))
    python = _peak(argv, {**env, "AUDIOREPRO_TREC_NATIVE": "0"})
    assert ours <= 1.1 * bare < python, (bare, ours, python)


def test_a_command_line_execs_the_program_and_the_variable_turns_it_off(
    tmp_path: Path, program: str
) -> None:
    qrels, run, _ = _inputs(tmp_path)
    argv = _exec_probe(EXEC_PROBE, qrels, run)
    env = {k: v for k, v in os.environ.items() if k != "AUDIOREPRO_TREC_NATIVE"}
    native = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert (native.stdout, native.stderr) == (EXPECTED, "")  # replaced: main never returned
    off = subprocess.run(argv, env={**env, "AUDIOREPRO_TREC_NATIVE": "0"}, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert (off.stdout, off.stderr) == (EXPECTED, "returned 0\n")


def test_a_program_that_cannot_be_exec_ed_leaves_the_python_path(tmp_path: Path) -> None:
    """A program that exists but cannot be exec'ed (as on a noexec mount: execv fails) or is
    not executable: the Python path answers in the same process."""
    qrels, run, _ = _inputs(tmp_path)
    bogus = tmp_path / "trec-eval"
    bogus.write_bytes(b"\x7fELF not a program")
    bogus.chmod(0o755)
    probe = (f"import audiorepro.cli.entry as e; e.native_program = lambda: {str(bogus)!r}\n"
             + EXEC_PROBE)  # fmt: skip
    argv = _exec_probe(probe, qrels, run)
    env = {k: v for k, v in os.environ.items() if k != "AUDIOREPRO_TREC_NATIVE"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert (proc.stdout, proc.stderr) == (EXPECTED, "returned 0\n")


def test_a_checkout_builds_the_program_in_place_and_again_after_an_edit(tmp_path: Path) -> None:
    tree = _checkout_copy(tmp_path / "tree")
    core = tree / "src" / "audiorepro" / "core"
    qrels, run, _ = _inputs(tmp_path / "inputs")
    env = {k: v for k, v in os.environ.items() if k != "AUDIOREPRO_TREC_NATIVE"}
    env["PYTHONPATH"] = str(tree / "src")
    argv = _exec_probe(EXEC_PROBE, qrels, run)
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert (first.stdout, first.stderr) == (EXPECTED, "")
    built = (core / "trec-eval").stat().st_mtime_ns
    source = core / "_trec_main.c"
    os.utime(source, ns=(built + 10**9, built + 10**9))  # the source edited after the build
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert (again.stdout, again.stderr) == (EXPECTED, "")
    assert (core / "trec-eval").stat().st_mtime_ns > built


def test_an_output_that_cannot_be_written_is_one_line_as_on_the_python_path(
    tmp_path: Path, program: str
) -> None:
    """Standard output on a full device (/dev/full): the program's one line and exit code are
    the Python path's (a large output, written in several blocks, and a small one)."""
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    qrels, run = SEEDED / "runs-01" / "qrels", SEEDED / "runs-01" / "run"
    for argv in (["-q", "-m", "all_trec", str(qrels), str(run)], [str(qrels), str(run)]):
        with open("/dev/full", "wb") as full:
            native = _native(program, argv, stdout=full)
        env = {**os.environ, "AUDIOREPRO_TREC_NATIVE": "0"}
        with open("/dev/full", "wb") as full:
            cmd = [sys.executable, "-m", "audiorepro", "trec-eval", *argv]
            python = subprocess.run(cmd, env=env, stdout=full, stderr=subprocess.PIPE, timeout=120)
        assert (native.returncode, native.stderr) == (python.returncode, python.stderr)
        assert native.stderr.count(b"\n") == 1 and native.returncode == 2


def test_an_sdist_carries_every_source_of_the_program(tmp_path: Path) -> None:
    """A wheel built from the sdist builds the program too: each of its sources is there."""
    import tarfile

    from audiorepro.cli.entry import PROGRAM_SOURCES

    tree = _checkout_copy(tmp_path / "tree")
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")],
                   cwd=tree, check=True, capture_output=True, timeout=300)  # fmt: skip
    (archive,) = (tmp_path / "dist").glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {Path(n).name for n in tar.getnames() if "/src/audiorepro/core/" in n}
    assert set(PROGRAM_SOURCES) <= names, sorted(set(PROGRAM_SOURCES) - names)

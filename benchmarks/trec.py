"""``trec`` benchmark: ``audiorepro trec-eval`` beside trec_eval (built from its pinned source
with its default ``make``) on the same seeded files, every judgement format (``-R qrels``,
``prefs``, ``qrels_prefs``, ``qrels_jg``) at every size, in one run: each tool in its own fresh
process, its wall time (start-up included), CPU seconds (user + system) and peak memory (max
RSS), the ratios, and whether the two outputs are the same bytes. audiorepro is timed as users
call it, both ways: the console command ``audiorepro trec-eval`` (the script beside this
Python) and ``python -m audiorepro trec-eval``; each execs the native trec-eval program where
it can (docs/architecture.md, "Compiled kernels"), so both start-ups are in the figures.

    python benchmarks/trec.py --trec-eval-src PATH/trec_eval   # or --trec-eval PATH/binary

``--trec-eval-src`` (default ``$TREC_EVAL_SRC``) is a checkout of usnistgov/trec_eval at the
commit of ``fixtures/trec/PROVENANCE.md``, built here in a temporary folder (never in the
repository); ``--trec-eval`` (default ``$TREC_EVAL``) a binary already built that way.
``--peers`` adds pytrec_eval and ranx on the qrels rows. Run it under ``nice`` on a shared
machine; the table notes the load average. Each figure is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: (name, judgements file, trec_eval options) of every row, per size.
CASES = (
    ("qrels: -m all_trec", "qrels", ["-m", "all_trec"]),
    ("qrels: -m map -m ndcg_cut.10", "qrels", ["-m", "map", "-m", "ndcg_cut.10"]),
    ("-R prefs -m all_prefs", "prefs", ["-R", "prefs", "-m", "all_prefs"]),
    ("-R qrels_prefs -m all_prefs", "qrels_prefs", ["-R", "qrels_prefs", "-m", "all_prefs"]),
    ("-R qrels_jg -m qrels_jg", "qrels_jg", ["-R", "qrels_jg", "-m", "qrels_jg"]),
)
SIZES = (100, 2000, 10000)


def make_files(folder: Path, queries: int, docs: int, seed: int = 0) -> Path:
    """A run of ``docs`` documents per query with tied scores (3 decimals) and its
    judgements in every format, from one draw: graded qrels (levels 0-3, a third of each
    ranking judged plus unretrieved relevant documents); the same judgements as preferences
    (``qid jg jsg docno level``: three judgement groups of one sub-group, by docno), as
    ``qrels_prefs`` (the qrels with the group in the second column) and as ``qrels_jg``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = ("run", "qrels", "prefs", "qrels_prefs", "qrels_jg")
    files = {name: open(folder / name, "w") for name in names}
    try:
        for q in range(queries):
            ids = rng.choice(docs * 5, size=docs, replace=False)
            scores = np.round(rng.random(docs) * 20, 3)
            levels = rng.choice(4, size=docs, p=[0.55, 0.25, 0.12, 0.08])
            judged = rng.random(docs) < 0.33
            lines = [f"{q} Q0 D{d:08d} {r + 1} {s:.3f} bench\n" for r, (d, s) in
                     enumerate(zip(ids.tolist(), scores.tolist(), strict=True))]  # fmt: skip
            files["run"].write("".join(lines))
            extra = rng.choice(np.arange(docs * 5, docs * 6), size=docs // 20, replace=False)
            pairs = list(zip(ids[judged].tolist(), levels[judged].tolist(), strict=True))
            pairs += [(d, 1 + d % 3) for d in extra.tolist()]
            files["qrels"].write("".join(f"{q} 0 D{d:08d} {lv}\n" for d, lv in pairs))
            # Three judgement groups of one sub-group each (levels as classes). A group of
            # several sub-groups costs trec_eval a closure over all the query's judged
            # documents (7.0 s of CPU for 100 queries here, 1.5 s for audiorepro): not at
            # 10,000 queries (docs/benchmarks.md gives that figure apart).
            prefs = [f"{q} u{d % 3} s{d % 3} D{d:08d} {lv}\n" for d, lv in pairs]
            files["prefs"].write("".join(prefs))
            group_lines = "".join(f"{q} u{d % 3} D{d:08d} {lv}\n" for d, lv in pairs)
            files["qrels_prefs"].write(group_lines)
            files["qrels_jg"].write(group_lines)
    finally:
        for f in files.values():
            f.close()
    return folder


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float
    rss: int
    output: bytes


#: Starts the measured command from a small process (``python -S``: no site, nothing
#: imported): Linux keeps a process's peak RSS across ``exec`` and a forked child starts with
#: its parent's, so a command forked straight from this script (numpy loaded, a few dozen MB)
#: would report at least this script's memory.
LAUNCHER = """\
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {wall} {usage.ru_utime + usage.ru_stime} "
            f"{usage.ru_maxrss}")
"""


def measured(cmd: list[str]) -> Timing:
    """One fresh process: its wall and CPU seconds, peak RSS in bytes and standard output."""
    with tempfile.NamedTemporaryFile("r") as report:
        launch = [sys.executable, "-S", "-c", LAUNCHER, report.name, *cmd]
        proc = subprocess.run(launch, capture_output=True, check=False)
        code, wall, cpu, rss = report.read().split()
    if proc.returncode or int(code):
        raise RuntimeError(f"{' '.join(cmd[:4])} failed: {proc.stderr.decode()[-400:]}")
    return Timing(float(wall), float(cpu), int(rss) * 1024, proc.stdout)


def median(runs: list[Timing]) -> Timing:
    """The run of median wall time (its CPU and memory with it)."""
    return sorted(runs, key=lambda t: t.wall)[len(runs) // 2]


def build_trec_eval(source: Path, into: Path) -> Path:
    """trec_eval built from ``source`` by its own default ``make``, in ``into``."""
    build = into / "trec_eval_src"
    shutil.copytree(source, build, ignore=shutil.ignore_patterns(".git", "trec_eval"))
    subprocess.run(["make"], cwd=build, check=True, capture_output=True)
    return build / "trec_eval"


PYTREC = """
import sys, pytrec_eval
def read(path, run):
    out = {}
    for line in open(path):
        f = line.split()
        out.setdefault(f[0], {})[f[2]] = float(f[4]) if run else int(f[3])
    return out
qrels, run = read(sys.argv[1], False), read(sys.argv[2], True)
measures = set(pytrec_eval.supported_measures)
if sys.argv[3] != "all_trec":
    measures = {"map", "ndcg_cut.10"}
pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
"""

RANX = """
import sys
from ranx import Qrels, Run, evaluate
qrels = Qrels.from_file(sys.argv[1], kind="trec")
run = Run.from_file(sys.argv[2], kind="trec")
metrics = ["map", "ndcg@10"] if sys.argv[3] != "all_trec" else [
    "map", "mrr", "ndcg", "precision@10", "recall@100", "ndcg@10", "r-precision", "bpref"]
evaluate(qrels, run, metrics)
"""


def peer_rows(folder: Path, queries: int, name: str, flags: list[str], repeat: int
              ) -> list[str]:  # fmt: skip
    """pytrec_eval's and ranx's rows (qrels only), where installed."""
    rows = []
    for tool, script in (("pytrec_eval", PYTREC), ("ranx", RANX)):
        if importlib.util.find_spec(tool) is None:  # not imported here (see LAUNCHER)
            rows.append(f"| {queries:,} | {name}: {tool} not installed | | | | | | | | | |")
            continue
        which = "all_trec" if "all_trec" in flags else "map"
        cmd = [sys.executable, "-c", script, str(folder / "qrels"), str(folder / "run"), which]
        t = median([measured(cmd) for _ in range(repeat)])
        rows.append(f"| {queries:,} | {name}: {tool} in audiorepro's columns | | {t.wall:.2f} | "
                    f"| | {t.cpu:.2f} | | {t.rss / 2**20:.0f} MiB | | |")  # fmt: skip
    return rows


def bytecode() -> str:
    """audiorepro's modules compiled to ``.pyc`` first, as an installed wheel has them (pip
    compiles them at install): where ``PYTHONDONTWRITEBYTECODE`` is set, as on the project's
    machines, a checkout would otherwise compile its sources again in every measured start."""
    spec = importlib.util.find_spec("audiorepro")
    assert spec is not None and spec.submodule_search_locations
    package = next(iter(spec.submodule_search_locations))
    compileall.compile_dir(package, quiet=1)
    return package


def commands() -> dict[str, list[str]]:
    """audiorepro's two command lines as users type them: the console script installed beside
    this Python (``audiorepro``) and ``python -m audiorepro``."""
    script = Path(sys.executable).parent / "audiorepro"
    found = shutil.which("audiorepro")
    console = str(script) if script.is_file() else found
    if console is None:
        raise SystemExit("the console command audiorepro is not installed beside this Python")
    return {"`audiorepro`": [console], "`python -m audiorepro`": [sys.executable, "-m",
                                                                    "audiorepro"]}  # fmt: skip


def _mib(rss: int) -> str:
    return f"{rss / 2**20:.1f} MiB"


def table(args: argparse.Namespace, trec_eval: Path, folder: Path) -> int:
    """Every size and format, both tools side by side (audiorepro each way it is called); 1
    when an output differs."""
    differs = 0
    print(f"audiorepro: {bytecode()} (bytecode compiled)")
    print(f"load average: {os.getloadavg()[0]:.2f}; {args.docs} documents per query; "
          f"median of {args.repeat} run(s); trec_eval: {trec_eval}")  # fmt: skip
    print("| queries | judgements, measures | command | trec_eval wall s | audiorepro wall s "
          "| wall ratio | trec_eval CPU s | audiorepro CPU s | trec_eval peak | audiorepro peak "
          "| memory ratio | same output |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for queries in args.sizes:
        files = make_files(folder / f"{queries}x{args.docs}", queries, args.docs)
        for name, judgements, flags in CASES:
            if args.formats and judgements not in args.formats:
                continue
            paths = [str(files / judgements), str(files / "run")]
            theirs = [str(trec_eval), *flags, *paths]
            te = median([measured(theirs) for _ in range(args.repeat)])
            for command, start in commands().items():
                ours = [*start, "trec-eval", *flags, *paths]
                ar = median([measured(ours) for _ in range(args.repeat)])
                same = te.output == ar.output
                differs += not same
                print(f"| {queries:,} | {name} | {command} | {te.wall:.2f} | {ar.wall:.2f} | "
                      f"{ar.wall / te.wall:.2f}x | {te.cpu:.2f} | {ar.cpu:.2f} | {_mib(te.rss)} "
                      f"| {_mib(ar.rss)} | {ar.rss / te.rss:.2f}x | {'yes' if same else 'NO'} |",
                      flush=True)  # fmt: skip
            if args.peers and judgements == "qrels":
                for row in peer_rows(files, queries, name, flags, args.repeat):
                    print(row, flush=True)
    return 1 if differs else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="numbers of queries (default: 100 2000 10000)")  # fmt: skip
    parser.add_argument("--docs", type=int, default=1000, help="documents ranked per query")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool per row")
    parser.add_argument("--formats", nargs="*", default=None, help="only these judgement "
                        "files: qrels, prefs, qrels_prefs, qrels_jg")  # fmt: skip
    parser.add_argument("--trec-eval", type=Path, default=None,
                        help="a trec_eval binary (default $TREC_EVAL)")  # fmt: skip
    parser.add_argument("--trec-eval-src", type=Path, default=None,
                        help="trec_eval's source, built here (default $TREC_EVAL_SRC)")  # fmt: skip
    parser.add_argument("--peers", action="store_true", help="also pytrec_eval and ranx")
    parser.add_argument("--folder", type=Path, default=None, help="keep the files here")
    args = parser.parse_args(argv)
    if args.trec_eval is None and args.trec_eval_src is None:
        # The environment only where the command line names neither: an explicit
        # --trec-eval-src is built even where $TREC_EVAL is set.
        given = os.environ.get("TREC_EVAL")
        source = os.environ.get("TREC_EVAL_SRC")
        args.trec_eval = Path(given) if given else None
        args.trec_eval_src = Path(source) if source and not given else None
    with tempfile.TemporaryDirectory() as tmp:
        trec_eval = args.trec_eval
        if trec_eval is None:
            if args.trec_eval_src is None:  # tox -e bench where neither is set
                print("SKIPPED trec benchmark: needs --trec-eval-src (or $TREC_EVAL_SRC: "
                      "trec_eval's source at its pinned commit) or --trec-eval")  # fmt: skip
                return 0
            trec_eval = build_trec_eval(args.trec_eval_src, Path(tmp))
        return table(args, trec_eval, args.folder or Path(tmp))


if __name__ == "__main__":
    raise SystemExit(main())

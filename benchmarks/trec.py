"""``trec`` benchmark: trec_eval (built from its pinned source with its default ``make``),
pytrec_eval, ranx and ``audiorepro trec-eval`` on the same seeded qrels and run, each in its
own process, CPU seconds (user + system, parse and evaluate) and peak memory (max RSS).

    python benchmarks/trec.py --queries 10000 --docs 1000 --trec-eval /path/to/trec_eval

Run it under ``nice`` on a shared machine; the table notes the load average. Tools that are
not installed (or a trec_eval binary not given) are skipped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SETS = {"all_trec": ["-m", "all_trec"], "map+ndcg_cut.10": ["-m", "map", "-m", "ndcg_cut.10"]}


def make_files(folder: Path, queries: int, docs: int, seed: int = 0) -> tuple[Path, Path]:
    """A graded qrels (levels 0-3, a third of each ranking judged plus unretrieved relevant
    documents) and a run of ``docs`` documents per query with tied scores (3 decimals)."""
    rng = np.random.default_rng(seed)
    qrels, run = folder / "qrels", folder / "run"
    with open(qrels, "w") as fq, open(run, "w") as fr:
        for q in range(queries):
            ids = rng.choice(docs * 5, size=docs, replace=False)
            scores = np.round(rng.random(docs) * 20, 3)
            levels = rng.choice(4, size=docs, p=[0.55, 0.25, 0.12, 0.08])
            judged = rng.random(docs) < 0.33
            lines = [f"{q} Q0 D{d:08d} {r + 1} {s:.3f} bench\n" for r, (d, s) in
                     enumerate(zip(ids.tolist(), scores.tolist(), strict=True))]  # fmt: skip
            fr.write("".join(lines))
            extra = rng.choice(np.arange(docs * 5, docs * 6), size=docs // 20, replace=False)
            pairs = zip(ids[judged].tolist(), levels[judged].tolist(), strict=True)
            judged_lines = [f"{q} 0 D{d:08d} {lv}\n" for d, lv in pairs]
            judged_lines += [f"{q} 0 D{d:08d} {1 + d % 3}\n" for d in extra.tolist()]
            fq.write("".join(judged_lines))
    return qrels, run


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


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """(CPU seconds of the child, wall seconds, peak RSS in bytes), or raise on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    if status != 0:
        raise RuntimeError(f"{cmd[0]} failed: {err[-400:]}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss * 1024


def commands(tool: str, qrels: Path, run: Path, name: str, trec_eval: str | None
             ) -> list[str] | None:  # fmt: skip
    flags = SETS[name]
    if tool == "trec_eval":
        return None if trec_eval is None else [trec_eval, *flags, str(qrels), str(run)]
    if tool == "audiorepro":
        return [sys.executable, "-m", "audiorepro", "trec-eval", *flags, str(qrels), str(run)]
    module = {"pytrec_eval": "pytrec_eval", "ranx": "ranx"}[tool]
    try:
        __import__(module)
    except ImportError:
        return None
    script = PYTREC if tool == "pytrec_eval" else RANX
    return [sys.executable, "-c", script, str(qrels), str(run), name]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of trec_eval, audiorepro")
    parser.add_argument("--peer-repeat", type=int, default=1, help="runs of pytrec_eval, ranx")
    parser.add_argument("--extra", action="store_true", help="also audiorepro --tie-bounds")
    parser.add_argument("--trec-eval", default=None, help="trec_eval binary (built from source)")
    parser.add_argument("--tools", default="trec_eval,audiorepro,pytrec_eval,ranx")
    parser.add_argument("--folder", type=Path, default=None, help="keep the files here")
    parser.add_argument("--sets", default=",".join(SETS), help="measure sets, comma separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or Path(tmp)
        qrels, run = folder / "qrels", folder / "run"
        if not (qrels.exists() and run.exists()):
            qrels, run = make_files(folder, args.queries, args.docs)
        # one warm-up so that audiorepro's compiled kernels are cached, as after installation
        warm = ["trec-eval", "--tie-bounds", "-m", "ndcg", str(qrels), str(run)]
        subprocess.run([sys.executable, "-m", "audiorepro", *warm], stdout=subprocess.DEVNULL,
                       check=True)  # fmt: skip
        print(f"load average: {os.getloadavg()[0]:.2f}; {args.queries} queries x {args.docs}")
        print("| measures | tool | CPU seconds (median) | wall | peak memory |")
        print("|---|---|---:|---:|---:|")
        for name in args.sets.split(","):
            for tool in args.tools.split(","):
                cmd = commands(tool, qrels, run, name, args.trec_eval)
                if cmd is None:
                    print(f"| {name} | {tool} | skipped | | |")
                    continue
                repeat = args.repeat if tool in ("trec_eval", "audiorepro") else args.peer_repeat
                runs = sorted(timed(cmd) for _ in range(repeat))
                cpu, wall, rss = runs[len(runs) // 2]
                print(f"| {name} | {tool} | {cpu:.1f} | {wall:.1f} | {rss / 2**20:.0f} MiB |",
                      flush=True)  # fmt: skip
                if tool == "audiorepro" and args.extra:
                    for more in (["--tie-bounds"],):
                        cpu, wall, rss = sorted(timed([*cmd[:4], *more, *cmd[4:]])
                                                for _ in range(repeat))[repeat // 2]  # fmt: skip
                        print(f"| {name} | audiorepro {' '.join(more)} | {cpu:.1f} | {wall:.1f} "
                              f"| {rss / 2**20:.0f} MiB |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

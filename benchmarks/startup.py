"""``startup`` benchmark: what a call of the command line costs before it does any work.

Each command runs in a fresh process, ``--repeat`` times; the table gives the best and the
median wall time and the CPU seconds (user + system) of the best run, as hyperfine reports
them. ``trec-eval`` on a one-line qrels and run is timed twice: first with an empty numba
cache (what a fresh install or a fresh container pays) and then warm.

    python benchmarks/startup.py --repeat 5

Run it on an idle machine (the table notes the load average): start-up is mostly imports,
and imports are what a loaded machine slows most.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "--version": ["--version"],
    "--help": ["--help"],
    "trec-eval --help": ["trec-eval", "--help"],
    "verify --help": ["verify", "--help"],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_call(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``python -m audiorepro ARGS`` in a fresh process."""
    cpu0, wall0 = _cpu(), time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "audiorepro", *args], env=env, check=True, capture_output=True
    )
    return time.perf_counter() - wall0, _cpu() - cpu0


def row(name: str, runs: list[tuple[float, float]]) -> str:
    walls = [w for w, _ in runs]
    best = min(runs)
    return f"| {name} | {best[0]:.3f} | {statistics.median(walls):.3f} | {best[1]:.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    env = dict(os.environ)
    print(f"load average {os.getloadavg()[0]:.2f}; {opts.repeat} runs each")
    print("| command | best wall s | median wall s | CPU s (best) |\n|---|---|---|---|")
    for name, args in COMMANDS.items():
        print(row(name, [time_call(args, env) for _ in range(opts.repeat)]))
    with tempfile.TemporaryDirectory() as tmp:
        qrels, run = Path(tmp) / "qrels", Path(tmp) / "run"
        qrels.write_text("1 0 d1 1\n")
        run.write_text("1 Q0 d1 1 1.0 r\n")
        args = ["trec-eval", str(qrels), str(run)]
        cold = dict(env, NUMBA_CACHE_DIR=str(Path(tmp) / "numba"))
        print(row("trec-eval, first call (empty numba cache)", [time_call(args, cold)]))
        print(row("trec-eval, warm", [time_call(args, cold) for _ in range(opts.repeat)]))


if __name__ == "__main__":
    main()

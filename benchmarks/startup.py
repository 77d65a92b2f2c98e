"""``startup`` benchmark: what a call of the command line costs before it does any work.

Every row is timed in fresh processes (``python -m audiorepro ARGS``): a **first call** on a
fresh install (an empty ``NUMBA_CACHE_DIR`` and a fresh ``PYTHONPYCACHEPREFIX``: no compiled
kernel and no ``.pyc`` to read, what a new container or a fresh node pays), then ``--repeat``
**warm** calls in the same environment, of which the table gives the best and the median wall
time and the CPU seconds (user + system) of the best, as hyperfine reports them.

The rows: ``--version``, ``--help`` and every command's ``--help``; then the everyday commands
people call in loops (``verify OUT``, ``linear-probe``, ``metrics DUMP``, ``diff OUT OUT``,
``trec-eval``), for which the table adds the command's **own work**: the same call repeated in
one process, whose second call imports nothing (best of ``--repeat``); **start-up** is the
best warm call less that work. The output folder is the demo's (``reproduce`` runs it first,
about a minute, unless ``--out-folder`` names one); the dump is its retrieval dump; the
linear probe runs on a seeded dump of ``--probe-clips`` clips.

    python benchmarks/startup.py --repeat 5

Run it on an idle machine (the table notes the load average): start-up is mostly imports,
and imports are what a loaded machine slows most.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from audiorepro.cli.app import COMMANDS as CLI_COMMANDS
from audiorepro.core.io import npz_bytes

COMMANDS = {
    "--version": ["--version"],
    "--help": ["--help"],
    **{f"{name} --help": [name, "--help"] for name in sorted(CLI_COMMANDS)},
}

#: One process calls the command twice and reports the second call: the command's own work,
#: with every import and first-use cost already paid.
_TWICE = (
    "import contextlib, io, json, sys, time\n"
    "from audiorepro.cli import main\n"
    "args = sys.argv[1:]\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    "    main(args)\n"
    "    cpu0, wall0 = time.process_time(), time.perf_counter()\n"
    "    main(args)\n"
    "    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0\n"
    "print(json.dumps([wall, cpu]))\n"
)


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


def work_call(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of a second ``main(ARGS)`` in one process: the work alone."""
    done = subprocess.run(
        [sys.executable, "-c", _TWICE, *args], env=env, check=True, capture_output=True, text=True
    )
    wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return float(wall), float(cpu)


def row(name: str, runs: list[tuple[float, float]]) -> str:
    walls = [w for w, _ in runs]
    best = min(runs)
    return f"| {name} | {best[0]:.3f} | {statistics.median(walls):.3f} | {best[1]:.3f} |"


def fresh_env(base: dict[str, str], folder: Path) -> dict[str, str]:
    """A fresh install's environment: an empty numba cache and no ``.pyc`` to read, both
    written by the first call (PYTHONDONTWRITEBYTECODE dropped), so that later calls in it are
    warm."""
    folder.mkdir(parents=True)
    env = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return dict(env, NUMBA_CACHE_DIR=str(folder / "numba"), PYTHONPYCACHEPREFIX=str(folder / "pyc"))


def _probe_inputs(folder: Path, clips: int) -> tuple[Path, Path]:
    """A seeded audio-only dump (8 classes, 64 dimensions, 5 folds) and its labels file."""
    rng = np.random.default_rng(20261205)
    y = rng.integers(0, 8, clips)
    x = (rng.normal(size=(8, 64))[y] + 1.5 * rng.normal(size=(clips, 64))).astype(np.float32)
    ids = [f"{i:05d}.wav" for i in range(clips)]
    dump, labels = folder / "probe.npz", folder / "labels.csv"
    dump.write_bytes(npz_bytes({"audio_embeds": x, "audio_ids": np.asarray(ids)}))
    with labels.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("file_name", "label", "fold"))
        w.writerows([ids[i], f"c{y[i]}", str(1 + i % 5)] for i in range(clips))
    return dump, labels


def everyday(
    folder: Path, out: Path | None, clips: int, env: dict[str, str]
) -> dict[str, list[str]]:
    """The everyday commands' arguments, on inputs made in ``folder``."""
    if out is None:
        out = folder / "demo"
        subprocess.run(
            [sys.executable, "-m", "audiorepro", "reproduce", "--out", str(out)],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
    dump = sorted((out / "cache" / "dumps").glob("*.npz"))[0]
    probe, labels = _probe_inputs(folder, clips)
    qrels, run = folder / "qrels", folder / "run"
    qrels.write_text("1 0 d1 1\n")
    run.write_text("1 Q0 d1 1 1.0 r\n")
    return {
        "verify OUT": ["verify", str(out)],
        f"linear-probe ({clips} clips)": ["linear-probe", str(probe), "--labels", str(labels)],
        "metrics DUMP": ["metrics", str(dump)],
        "diff OUT OUT": ["diff", str(out), str(out)],
        "trec-eval (one line)": ["trec-eval", str(qrels), str(run)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out-folder", type=Path, default=None, help="a reproduce OUT to use")
    parser.add_argument("--probe-clips", type=int, default=500)
    opts = parser.parse_args()
    env = dict(os.environ)
    print(
        f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"load average {os.getloadavg()[0]:.2f}; first call once, warm {opts.repeat} runs each"
    )
    with tempfile.TemporaryDirectory() as tmp:
        print("\n| command | first call wall s | first call CPU s | warm best wall s "
              "| warm median wall s | warm CPU s (best) |\n|---|---|---|---|---|---|")  # fmt: skip
        for i, (name, args) in enumerate(COMMANDS.items()):
            fresh = fresh_env(env, Path(tmp) / f"help{i}")
            first = time_call(args, fresh)
            warm = row(name, [time_call(args, fresh) for _ in range(opts.repeat)])
            print(warm.replace(f"| {name} |", f"| {name} | {first[0]:.3f} | {first[1]:.3f} |", 1))
        commands = everyday(Path(tmp), opts.out_folder, opts.probe_clips, env)
        print("\n| command | first call wall s | first call CPU s | warm best wall s "
              "| warm CPU s (best) | own work wall s | own work CPU s | start-up wall s "
              "| start-up CPU s |\n|---|---|---|---|---|---|---|---|---|")  # fmt: skip
        for i, (name, args) in enumerate(commands.items()):
            fresh = fresh_env(env, Path(tmp) / f"cmd{i}")
            first = time_call(args, fresh)
            warm = min(time_call(args, fresh) for _ in range(opts.repeat))
            work = min(work_call(args, fresh) for _ in range(opts.repeat))
            print(
                f"| {name} | {first[0]:.3f} | {first[1]:.3f} | {warm[0]:.3f} | {warm[1]:.3f} "
                f"| {work[0]:.3f} | {work[1]:.3f} | {warm[0] - work[0]:.3f} "
                f"| {warm[1] - work[1]:.3f} |"
            )


if __name__ == "__main__":
    main()

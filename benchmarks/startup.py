"""``startup`` benchmark: what a call of the command line costs before it does any work.

Everything runs from a **fresh install**: the checkout's wheel, built by the package's own build
(``pip wheel``: the compiled kernels included) and installed with ``pip install --target`` into a
new folder (its dependencies are the running Python's), with numba's cache pointed at an empty
read-only folder; nothing has run there before. Every row is timed in fresh processes
(``python -m audiorepro ARGS``): the **first call** after the install, then ``--repeat`` **warm**
calls, of which the tables give the best and the median wall time and the CPU seconds (user +
system) of the best, as hyperfine reports them.

The rows: ``--version``, ``--help`` and every command's ``--help``; then the everyday commands
people call in loops (``verify OUT``, ``linear-probe``, ``metrics DUMP``, ``diff OUT OUT``,
``trec-eval``), for which the table adds the command's **own work**: the same call repeated in
one process, whose second call imports nothing (best of ``--repeat``); **start-up** is the
best warm call less that work. ``linear-probe`` (``linear-v1`` is scikit-learn's
``LogisticRegression``, so importing scikit-learn is part of its work) is also compared with
**a minimal scikit-learn script** doing the same fit on the same inputs (numpy's loader, the
csv module, ``StandardScaler`` and ``LogisticRegression`` with linear-v1's parameters, one fold
held out at a time), the two run in turn: the line under the table gives the command's best
warm call less the script's.
The output folder is the demo's (``reproduce`` runs it first, about a minute, unless
``--out-folder`` names one); the dump is its retrieval dump; the linear probe runs on a seeded
dump of ``--probe-clips`` clips x 512 dimensions.

``--container IMAGE`` adds the same commands in **fresh containers** (``podman run --rm``, the
inputs bound read-only, run as tools/container.py runs apptainer's way: another uid, a read-only
root, a fresh /tmp): each call is a new container, so every one is a first call; the table
gives the command's own process (wall and CPU, timed inside the container by its parent) and
the whole ``podman run``.

    # needs podman and the image that tox -e container builds:
    python benchmarks/startup.py --repeat 5 --container localhost/audiorepro:ci

A smaller run (what tests/test_cli_startup.py runs, on the demo it has):

    python benchmarks/startup.py --repeat 1 --rows=--version,linear-probe --probe-clips 200 \
        --out-folder OUT

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from audiorepro.cli.app import COMMANDS as CLI_COMMANDS
from audiorepro.core.io import npz_bytes
from audiorepro.metrics.linear_probe import LOGISTIC_PARAMS

ROOT = Path(__file__).resolve().parent.parent

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

#: What a scikit-learn user writes for linear-v1's fit (no audiorepro import): leave one fold
#: out, standardize with the training part, LogisticRegression with linear-v1's parameters.
SKLEARN_SCRIPT = """\
import csv, sys
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
PARAMS = {params}
with np.load(sys.argv[1], allow_pickle=False) as z:
    x, ids = z["audio_embeds"].astype(np.float64), [str(i) for i in z["audio_ids"]]
with open(sys.argv[2], newline="") as f:
    rows = {{r["file_name"]: (r["label"], r["fold"]) for r in csv.DictReader(f)}}
y = np.array([rows[i][0] for i in ids])
fold = np.array([rows[i][1] for i in ids])
for held in sorted(set(fold)):
    test = fold == held
    scaler = StandardScaler().fit(x[~test])
    model = LogisticRegression(C=1.0, **PARAMS).fit(scaler.transform(x[~test]), y[~test])
    accuracy = float(np.mean(model.predict(scaler.transform(x[test])) == y[test]))
    print(f"fold {{held}} accuracy {{accuracy:.4f}}")
"""

#: Run inside a container: one ``python -m audiorepro ARGS`` as a child, its wall and CPU.
_IN_CONTAINER = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "subprocess.run([sys.executable, '-m', 'audiorepro', *sys.argv[1:]], check=True,\n"
    "               stdout=subprocess.DEVNULL)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps([time.perf_counter() - t, u.ru_utime + u.ru_stime]))\n"
)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one command in a fresh process."""
    cpu0, wall0 = _cpu(), time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - wall0, _cpu() - cpu0


def time_call(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``python -m audiorepro ARGS`` in a fresh process."""
    return time_run([sys.executable, "-m", "audiorepro", *args], env)


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


def fresh_install(base: dict[str, str], folder: Path) -> dict[str, str]:
    """The checkout's wheel (its own build: the compiled kernels) installed into ``folder``
    with ``pip install --target``; the environment that runs it (and nothing of the
    checkout), numba's cache an empty read-only folder."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels, site, numba = folder / "wheel", folder / "site", folder / "numba-cache"
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(ROOT)], check=True, capture_output=True)  # fmt: skip
    wheel = sorted(wheels.glob("audiorepro-*.whl"))[0]
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)  # fmt: skip
    numba.mkdir()
    numba.chmod(0o555)
    env = {k: v for k, v in base.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
    return dict(env, PYTHONPATH=str(site), NUMBA_CACHE_DIR=str(numba))


def _probe_inputs(folder: Path, clips: int) -> tuple[Path, Path]:
    """A seeded audio-only dump (8 classes, 512 dimensions, 5 folds) and its labels file."""
    rng = np.random.default_rng(20261205)
    y = rng.integers(0, 8, clips)
    x = (rng.normal(size=(8, 512))[y] + 1.5 * rng.normal(size=(clips, 512))).astype(np.float32)
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
) -> tuple[dict[str, list[str]], Path]:
    """The everyday commands' arguments, on inputs made in ``folder``, and the OUT folder."""
    if out is None:
        out = folder / "demo"
        subprocess.run(
            [sys.executable, "-m", "audiorepro", "reproduce", "--out", str(out)],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
    dump = sorted((out / "cache" / "dumps").glob("*.npz"))[0]
    probe, labels = _probe_inputs(folder, clips)
    (folder / "sklearn_probe.py").write_text(SKLEARN_SCRIPT.format(params=dict(LOGISTIC_PARAMS)))
    qrels, run = folder / "qrels", folder / "run"
    qrels.write_text("1 0 d1 1\n")
    run.write_text("1 Q0 d1 1 1.0 r\n")
    return {
        "verify OUT": ["verify", str(out)],
        f"linear-probe ({clips} x 512)": ["linear-probe", str(probe), "--labels", str(labels)],
        "metrics DUMP": ["metrics", str(dump)],
        "diff OUT OUT": ["diff", str(out), str(out)],
        "trec-eval (one line)": ["trec-eval", str(qrels), str(run)],
    }, out


def help_table(env: dict[str, str], repeat: int, wanted: list[str] | None) -> None:
    print("\n| command | first call wall s | first call CPU s | warm best wall s "
          "| warm median wall s | warm CPU s (best) |\n|---|---|---|---|---|---|")  # fmt: skip
    for name, args in COMMANDS.items():
        if wanted is not None and name not in wanted:
            continue
        first = time_call(args, env)
        warm = row(name, [time_call(args, env) for _ in range(repeat)])
        print(warm.replace(f"| {name} |", f"| {name} | {first[0]:.3f} | {first[1]:.3f} |", 1))


def everyday_table(
    commands: dict[str, list[str]], env: dict[str, str], repeat: int, sklearn: Path
) -> None:
    print("\n| command | first call wall s | first call CPU s | warm best wall s "
          "| warm median wall s | warm CPU s (best) | own work wall s | own work CPU s "
          "| start-up wall s | start-up CPU s |\n" + "|---" * 10 + "|")  # fmt: skip
    comparison = ""
    for name, args in commands.items():
        first = time_call(args, env)
        script = [sys.executable, str(sklearn), *args[1:2], *args[3:4]]
        runs, refs = [], []
        for _ in range(repeat):  # the probe and the script alternate: the same load on both
            runs.append(time_call(args, env))
            if args[0] == "linear-probe":
                refs.append(time_run(script, env))
        warm, median = min(runs), statistics.median(w for w, _ in runs)
        work = min(work_call(args, env) for _ in range(repeat))
        print(
            f"| {name} | {first[0]:.3f} | {first[1]:.3f} | {warm[0]:.3f} | {median:.3f} "
            f"| {warm[1]:.3f} | {work[0]:.3f} | {work[1]:.3f} | {warm[0] - work[0]:.3f} "
            f"| {warm[1] - work[1]:.3f} |"
        )
        if refs:
            ref = min(refs)
            print(f"| scikit-learn script, the same fit | | | {ref[0]:.3f} | | {ref[1]:.3f} "
                  "| | | | |")  # fmt: skip
            wall = min(w for w, _ in runs) - min(w for w, _ in refs)
            cpu = min(c for _, c in runs) - min(c for _, c in refs)
            comparison = (
                f"\nlinear-probe above the minimal scikit-learn script (best of each): "
                f"{wall:.3f} s wall, {cpu:.3f} s CPU"
            )
    print(comparison)


def container_table(
    image: str, commands: dict[str, list[str]], folder: Path, out: Path, repeat: int
) -> None:
    """Each call in a new container (``podman run --rm``), inputs bound read-only."""
    sys.path.insert(0, str(ROOT / "tools"))
    import container  # tools/container.py: podman's settings and apptainer's way of running

    container.setup_podman()
    (folder / "time_in_container.py").write_text(_IN_CONTAINER)
    for path in (folder, out):
        path.chmod(0o755)
    binds = ["--volume", f"{folder}:/data:ro", "--volume", f"{out}:/out:ro"]
    base = ["podman", "run", "--rm", "--network=none", *container.APPTAINER_LIKE, *binds,
            "--entrypoint", "python", image, "/data/time_in_container.py"]  # fmt: skip

    def inside(arg: str) -> str:
        return arg.replace(str(out), "/out").replace(str(folder), "/data")

    print(f"\nIn fresh containers of {image} (every call a new container):\n\n"
          "| command | best wall s | median wall s | CPU s (best) | podman run best wall s "
          "|\n|---|---|---|---|---|")  # fmt: skip
    rows = {"--version": ["--version"], "--help": ["--help"], **commands}
    for name, args in rows.items():
        runs, outer = [], []
        for _ in range(max(repeat, 1)):
            t = time.perf_counter()
            done = subprocess.run([*base, *map(inside, args)], capture_output=True, text=True,
                                  check=True)  # fmt: skip
            outer.append(time.perf_counter() - t)
            wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
            runs.append((float(wall), float(cpu)))
        best = min(runs)
        print(f"| {name} | {best[0]:.3f} | {statistics.median(w for w, _ in runs):.3f} "
              f"| {best[1]:.3f} | {min(outer):.3f} |")  # fmt: skip


#: The documented lines (docs/benchmarks.md's ``--repeat 5``, this docstring's
#: ``--container``) run as written by the tests at a small cost: these variables, when set,
#: are the defaults of ``--rows`` and ``--out-folder`` (the output's first line says so).
SMALL_ROWS, SMALL_OUT = "AUDIOREPRO_STARTUP_ROWS", "AUDIOREPRO_STARTUP_OUT_FOLDER"


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--out-folder", type=Path, default=_env_path(SMALL_OUT), help="a reproduce OUT to use"
    )
    parser.add_argument("--probe-clips", type=int, default=2000)
    parser.add_argument(
        "--rows",
        default=os.environ.get(SMALL_ROWS),
        help="comma-separated row names (or prefixes) to time: all",
    )
    parser.add_argument("--container", default=None, help="also time in fresh containers")
    opts = parser.parse_args()
    wanted = None if opts.rows is None else [r for r in opts.rows.split(",") if r]

    def chosen(name: str) -> bool:
        return wanted is None or any(name == w or name.startswith(w) for w in wanted)

    narrowed = [v for v in (SMALL_ROWS, SMALL_OUT) if os.environ.get(v)]
    if narrowed:  # a test's small run of a documented line: said, so no table is mistaken
        print(f"narrowed by {', '.join(f'{v}={os.environ[v]}' for v in narrowed)}")
    print(
        f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"load average {os.getloadavg()[0]:.2f}; a fresh install of the checkout's wheel; "
        f"first call once, warm {opts.repeat} runs each"
    )
    with tempfile.TemporaryDirectory() as tmp:
        env = fresh_install(dict(os.environ), Path(tmp) / "install")
        help_table(env, opts.repeat, [n for n in COMMANDS if chosen(n)])
        inputs = Path(tmp) / "inputs"
        inputs.mkdir()
        commands, out = everyday(inputs, opts.out_folder, opts.probe_clips, env)
        commands = {n: a for n, a in commands.items() if chosen(n)}
        if commands:
            everyday_table(commands, env, opts.repeat, inputs / "sklearn_probe.py")
        if opts.container:
            if shutil.which("podman") is None:
                print("\nno container rows: podman is not installed")
            else:
                container_table(opts.container, commands, inputs, out, opts.repeat)
        (Path(tmp) / "install" / "numba-cache").chmod(0o755)
        written = list((Path(tmp) / "install" / "numba-cache").iterdir())
        print(f"\nnumba's cache after every call: {len(written)} file(s) written")


if __name__ == "__main__":
    main()

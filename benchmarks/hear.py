"""``hear`` benchmark: real networks over HEAR tasks, through the kit and through heareval.

For each network and task, in one run on one machine, each step in a fresh child process
(wall and CPU seconds, user + system, of the child):

- **kit**: ``audiorepro hear MODEL --tasks-dir DIR --task TASK --out ...`` (embeddings,
  ``linear-v1``, heareval's scores, tables, report, bundle, manifest);
- **heareval embed**: heareval 2021.1.3's own embedding runner, ``python -m
  heareval.embeddings.runner MODULE --tasks-dir DIR --task TASK`` (HEAR modules only: a
  ``py:`` encoder is not a HEAR module), with a stand-in ``tensorflow`` module (its runner
  imports tensorflow at its top for TF models; the lock does not install it);
- **heareval predict**: heareval's own predictor (``task_predictions``, the ``--grid`` grid,
  one grid point, CPU, deterministic; tests/hear_reference.py's two patches for torch 2.9 and
  pytorch-lightning 1.9.5) on the embeddings heareval wrote, or for a ``py:`` encoder on the
  kit's (heareval's layout).

The two sides do different work after the embeddings (the kit's predictor is a linear probe,
heareval's an MLP trained with early stopping), so both columns are given, not a ratio of
unlike things; the embedding step is the same work on both sides (each clip through the same
network) and is what the kit's column is mostly made of.

    python benchmarks/hear.py --model resemblyzer --model hear:hearbaseline.torchcrepe

It needs heareval's lock (``tox -e hear``'s target folder, or ``--heareval PATH``) and
hearbaseline/torchcrepe (the test extra and the hear lock); it builds the example tasks
(tools/make_hear_tasks.py, espeak-ng) unless ``--tasks-dir`` is given.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: heareval's embedding runner as ``python -m heareval.embeddings.runner`` runs it, with a
#: stand-in tensorflow (the two names its module touches).
HEAREVAL_EMBED = """
import runpy, sys, types
tf = types.ModuleType("tensorflow")
tf.Module = type("Module", (), {})
tf.test = types.SimpleNamespace(is_gpu_available=lambda **_: False)
sys.modules["tensorflow"] = tf
sys.argv[0] = "heareval.embeddings.runner"
runpy.run_module("heareval.embeddings.runner", run_name="__main__")
"""

#: heareval's predictor on one embeddings folder (tests/hear_reference.py).
#: Loaded by its path: heareval's wheel installs a top-level ``tests`` package of its own.
HEAREVAL_PREDICT = """
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("hear_reference", {path!r})
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
ref.heareval_predictions(Path(sys.argv[1]), grid=sys.argv[2])
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one child process (which must succeed)."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"hear benchmark: {' '.join(argv[:6])} failed:\n{done.stderr[-3000:]}")
    return wall, _cpu() - cpu


def module_name(model: str) -> str | None:
    """The HEAR module of a ``hear:MODULE`` spec (None for other encoders).

    >>> module_name("hear:hearbaseline.torchcrepe"), module_name("resemblyzer")
    ('hearbaseline.torchcrepe', None)
    """
    if not model.startswith("hear:"):
        return None
    return model.removeprefix("hear:").split(":")[0]


def bench(
    model: str, task: str, tasks_dir: Path, work: Path, env: dict[str, str], grid: str
) -> dict[str, object]:
    """One network over one task: the kit, heareval's runner and heareval's predictor."""
    py = sys.executable
    folder = next(p.name for p in tasks_dir.iterdir() if p.name.split("-")[0] == task)
    kit_out = work / f"kit-{model.replace(':', '_')}-{task}"
    kit = timed(
        [py, "-m", "audiorepro", "hear", model, "--tasks-dir", str(tasks_dir), "--task", task,
         "--out", str(kit_out)], env, work,
    )  # fmt: skip
    row: dict[str, object] = {"model": model, "task": folder, "kit": kit}
    module = module_name(model)
    if module is not None:
        emb_dir = work / f"heareval-{task}"
        row["heareval embed"] = timed(
            [py, "-c", HEAREVAL_EMBED, module, "--tasks-dir", str(tasks_dir), "--task", folder,
             "--embeddings-dir", str(emb_dir)], env, work,
        )  # fmt: skip
        predict_on = emb_dir / module / folder
    else:
        predict_on = work / f"kit-layout-{task}" / folder
        predict_on.parent.mkdir(parents=True, exist_ok=True)
        import shutil

        shutil.copytree(kit_out / folder, predict_on)
        (predict_on / "test.predicted-scores.json").unlink()
    row["heareval predict"] = timed(
        [
            py,
            "-c",
            HEAREVAL_PREDICT.format(path=str(ROOT / "tests" / "hear_reference.py")),
            str(predict_on),
            grid,
        ],
        env,
        work,
    )
    return row


def _fmt(pair: object) -> str:
    if not isinstance(pair, tuple):
        return "(not a HEAR module)"
    return f"{pair[0]:.1f} / {pair[1]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="repeatable (default: both networks)")
    parser.add_argument("--task", action="append", help="repeatable (default: words, events)")
    parser.add_argument("--tasks-dir", type=Path, help="default: build the example tasks")
    parser.add_argument("--grid", default="faster", help="heareval's predictor grid")
    parser.add_argument("--heareval", type=Path, help="heareval's lock installed with --target")
    args = parser.parse_args()
    models = args.model or ["resemblyzer", "hear:hearbaseline.torchcrepe"]
    tasks = args.task or ["words", "events"]
    env = dict(os.environ, OMP_NUM_THREADS="1", AUDIOREPRO_EMBEDDING_CACHE="off")
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # heareval's own checkpoints (see above)
    extra = [str(ROOT / "src")] + ([str(args.heareval)] if args.heareval else [])
    env["PYTHONPATH"] = os.pathsep.join([*extra, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tasks_dir = args.tasks_dir
        if tasks_dir is None:
            tasks_dir = work / "hear-tasks"
            tool = str(ROOT / "tools" / "make_hear_tasks.py")
            subprocess.run([sys.executable, tool, str(tasks_dir)], check=True, env=env)
        rows = [
            bench(m, t, tasks_dir.resolve(), work, env, args.grid) for m in models for t in tasks
        ]
    load = os.getloadavg()
    print(f"one torch thread; load average {load[0]:.1f} on {os.cpu_count()} CPUs")
    print("| network | task | kit (wall / CPU s) | heareval embed | heareval predict |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {r['task']} | {_fmt(r['kit'])} | "
            f"{_fmt(r.get('heareval embed'))} | {_fmt(r['heareval predict'])} |"
        )


if __name__ == "__main__":
    main()

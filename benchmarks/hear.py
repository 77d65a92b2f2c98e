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
  kit's (heareval's layout);
- **kit hear-mlp-v1**: ``audiorepro hear MODEL ... --predictor hear-mlp-v1 --embeddings E``,
  the kit's HEAR predictor on those same saved embeddings (no model run: the predictor, the
  scores and the kit's outputs);
- **heareval MLP**: heareval's own predictor as ``hear-mlp-v1`` defines it (the default grid,
  8 points) on the same embeddings, the like-for-like step; the last column says whether the
  two test scores agree (the kit's rounded to float32, as heareval logs it).

The two sides do different work after the embeddings (the kit's predictor is a linear probe,
heareval's an MLP trained with early stopping), so both columns are given, not a ratio of
unlike things; the embedding step is the same work on both sides (each clip through the same
network) and is what the kit's column is mostly made of.

    python benchmarks/hear.py --model resemblyzer --model hear:hearbaseline.torchcrepe

With ``AUDIOREPRO_HEAR_BENCH_TINY=1`` the same command runs at a tiny size (what
tests/test_hear_bench.py runs as written): the words task alone, cut to its first
:data:`TINY_FILES` files per split. The figures in docs/benchmarks.md are of the full size.

It needs heareval's lock (``tox -e hear``'s target folder, or ``--heareval PATH``) and
hearbaseline/torchcrepe (the test extra and the hear lock); it builds the example tasks
(tools/make_hear_tasks.py, espeak-ng) unless ``--tasks-dir`` is given.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Files kept per split at the tiny size (AUDIOREPRO_HEAR_BENCH_TINY=1).
TINY_FILES = 4

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
ref.heareval_predictions(Path(sys.argv[1]), grid=sys.argv[2], grid_points=int(sys.argv[3]))
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


def shrink(tasks_dir: Path, keep: int) -> None:
    """Each task's first ``keep`` files per split (the tiny size): split files and audio."""
    for task in tasks_dir.iterdir():
        meta = json.loads((task / "task_metadata.json").read_text())
        for split in meta["splits"]:
            files = json.loads((task / f"{split}.json").read_text())
            kept = dict(list(files.items())[:keep])
            (task / f"{split}.json").write_text(json.dumps(kept))
            for rate in (p for p in task.iterdir() if p.name.isdigit()):
                for clip in (rate / split).iterdir():
                    if clip.name not in kept:
                        clip.unlink()


def _test_score(folder: Path) -> float:
    """The first test split's test score of a ``test.predicted-scores.json``."""
    doc = json.loads((folder / "test.predicted-scores.json").read_text())
    first = next(k for k, v in doc.items() if isinstance(v, dict) and "test_score" in v)
    return float(doc[first]["test_score"])


def _float32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def bench(
    model: str, task: str, tasks_dir: Path, work: Path, env: dict[str, str], grid: str
) -> dict[str, object]:
    """One network over one task: the kit, heareval's runner, heareval's predictor, and the
    kit's hear-mlp-v1 against heareval's predictor on the same embeddings."""
    py = sys.executable
    folder = next(p.name for p in tasks_dir.iterdir() if p.name.split("-")[0] == task)
    name = model.replace(":", "_")
    kit_out = work / f"kit-{name}-{task}"
    kit = timed(
        [py, "-m", "audiorepro", "hear", model, "--tasks-dir", str(tasks_dir), "--task", task,
         "--out", str(kit_out)], env, work,
    )  # fmt: skip
    row: dict[str, object] = {"model": model, "task": folder, "kit": kit}
    module = module_name(model)
    if module is not None:
        emb_dir = work / f"heareval-{name}-{task}"
        row["heareval embed"] = timed(
            [py, "-c", HEAREVAL_EMBED, module, "--tasks-dir", str(tasks_dir), "--task", folder,
             "--embeddings-dir", str(emb_dir)], env, work,
        )  # fmt: skip
        predict_on = emb_dir / module / folder
    else:
        predict_on = work / f"kit-layout-{name}-{task}" / folder
        predict_on.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(kit_out / folder, predict_on)
        (predict_on / "test.predicted-scores.json").unlink()
    mlp_on = work / f"heareval-mlp-{name}-{task}" / folder  # before any predictor writes
    shutil.copytree(predict_on, mlp_on)
    mlp_out = work / f"kit-mlp-{name}-{task}"
    row["kit hear-mlp-v1"] = timed(
        [py, "-m", "audiorepro", "hear", model, "--tasks-dir", str(tasks_dir), "--task", task,
         "--predictor", "hear-mlp-v1", "--embeddings", str(predict_on.parent),
         "--out", str(mlp_out)], env, work,
    )  # fmt: skip
    script = HEAREVAL_PREDICT.format(path=str(ROOT / "tests" / "hear_reference.py"))
    row["heareval predict"] = timed([py, "-c", script, str(predict_on), grid, "1"], env, work)
    row["heareval MLP"] = timed([py, "-c", script, str(mlp_on), "default", "8"], env, work)
    ours, theirs = _float32(_test_score(mlp_out / folder)), _test_score(mlp_on)
    row["same"] = ours == theirs or (math.isnan(ours) and math.isnan(theirs))
    row["scores"] = (ours, theirs)
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
    tiny = os.environ.get("AUDIOREPRO_HEAR_BENCH_TINY") == "1"
    models = args.model or ["resemblyzer", "hear:hearbaseline.torchcrepe"]
    tasks = args.task or (["words"] if tiny else ["words", "events"])
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
            if tiny:
                shrink(tasks_dir, TINY_FILES)
        rows = [
            bench(m, t, tasks_dir.resolve(), work, env, args.grid) for m in models for t in tasks
        ]
    load = os.getloadavg()
    print(f"one torch thread; load average {load[0]:.1f} on {os.cpu_count()} CPUs")
    print(
        f"| network | task | kit (wall / CPU s) | heareval embed | heareval predict ({args.grid}, "
        "1 point) | kit hear-mlp-v1 (saved embeddings) | heareval MLP (default, 8 points) | "
        "same test score |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ours, theirs = r["scores"]  # type: ignore[misc]
        same = "yes" if r["same"] else f"no ({ours!r} against {theirs!r})"
        print(
            f"| {r['model']} | {r['task']} | {_fmt(r['kit'])} | "
            f"{_fmt(r.get('heareval embed'))} | {_fmt(r['heareval predict'])} | "
            f"{_fmt(r['kit hear-mlp-v1'])} | {_fmt(r['heareval MLP'])} | {same} |"
        )


if __name__ == "__main__":
    main()

"""Scale-out on Slurm: extraction as job arrays through submitit, then the local stages.

``audiorepro reproduce STUDY --executor slurm`` splits every cell that must be extracted (as
the study's kind describes them: :class:`~.extraction.StudyExtraction`; the executor never
asks which kind a study is or which encoder a cell runs) into
``shards`` parts (``extract --shard i/n``: whole batches, so the merged dump is byte-identical
to an unsharded one) and submits one array task per (cell, shard) with submitit. Each task runs
``audiorepro extract-part`` (inside ``apptainer exec --nv --containall --cleanenv`` with
``--container SIF``, the hub cache bound read-only at ``/hf`` and named by ``HF_HUB_CACHE``),
which writes its part atomically and then a ``.sha256`` record of it.
Once every task has ended, the parts are merged into the extraction cache (``OUT/cache/dumps``,
the files a local run would have written) and the metric, table and report stages run here,
exactly as with the local executor, so both give byte-identical outputs.

Faults: a task that failed, was cancelled, timed out or ran out of memory is reported by name
(cell and shard), job id, state and log path, and nothing is merged or reported for the study
(exit 1). Rerunning the same command submits only what is missing: a part counts as finished
only when its content hash matches its record and it belongs to the same extraction (cache
key, shard), never because a file exists. A task killed while writing leaves no part (atomic
write). Every wait is bounded (``wait_timeout_s``) and says what it waited for.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, parse_json, read_text
from audiorepro.formats.dump import read_npz
from audiorepro.models.offline import CONTAINER_HUB_CACHE
from audiorepro.runner.cache import cache_dump_path, record_entry
from audiorepro.runner.executors.extraction import StudyExtraction

#: States after which a Slurm job will not change any more (sacct's vocabulary).
RUNNING_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED",
                  "RESIZING", "PREEMPTED", "UNKNOWN", "READY"}  # fmt: skip

if TYPE_CHECKING:
    from submitit import Job


@dataclass(frozen=True)
class SlurmOptions:
    """What ``--executor slurm`` asks of the scheduler (``None``: the cluster's default)."""

    shards: int = 1
    partition: str | None = None
    account: str | None = None
    time_min: int = 60
    gpus_per_task: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    array_parallelism: int = 64
    container: Path | None = None
    binds: tuple[str, ...] = ()
    folder: Path | None = None  # submitit's logs and job files; default OUT/slurm
    wait_timeout_s: float | None = None  # default: the time limit plus ten minutes
    poll_s: float = 2.0
    setup: tuple[str, ...] = ()  # shell lines before each task (module load ...)

    def timeout(self) -> float:
        return self.wait_timeout_s if self.wait_timeout_s is not None else self.time_min * 60 + 600


@dataclass(frozen=True)
class Part:
    """One array task: shard ``shard`` of ``n_shards`` of a cell's extraction."""

    cell: str
    shard: int
    n_shards: int
    key: str
    path: Path

    @property
    def name(self) -> str:
        return f"cell {self.cell} shard {self.shard}/{self.n_shards}"


@dataclass
class Outcome:
    """What became of the submitted parts."""

    submitted: list[Part] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def part_path(out: Path, key: str, shard: int, n_shards: int) -> Path:
    return out / "cache" / "parts" / key[:32] / f"{shard:04d}-of-{n_shards:04d}.part.npz"


def _record(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def write_part_record(path: Path) -> None:
    """After a part is written: record its SHA-256 (atomically, after the part itself)."""
    atomic_write_bytes(_record(path), f"{sha256_file(path)}  {path.name}\n".encode())


def part_finished(part: Part) -> bool:
    """Is this part finished? Its bytes must match its record and it must be this extraction's
    shard (cache key and shard index); an existing file alone never counts."""
    record = _record(part.path)
    if not (part.path.is_file() and record.is_file()):
        return False
    try:  # a record is one line "<sha256>  <name>": anything else is not trusted
        written = read_text(record, what="a part record", max_bytes=1 << 16).split()[:1]
    except UserError:
        return False
    if written != [sha256_file(part.path)]:
        return False
    try:
        raw = str(read_npz(part.path, what="a dump part")["part_json"])
        info = parse_json(raw, source=part.path, key="part_json")
    except (UserError, KeyError):
        return False
    return bool(
        info.get("shard") == [part.shard, part.n_shards]
        and info.get("meta", {}).get("cache_key") == part.key
    )


def extract_part(
    study: StudyExtraction, cell_id: str, shard: tuple[int, int], key: str, out: Path
) -> None:
    """An array task's work: one shard of a cell's extraction, then the part's record.

    ``key`` is the cache key the driver computed: if this node computes another one (inputs,
    weights, code or settings changed since submission), nothing is written.
    """
    cell = study.cell(cell_id)
    here = cell.key()
    if here != key:
        raise UserError(
            f"cell {cell_id}: inputs, weights, code or settings changed since submission "
            f"(cache key {here[:12]}, submitted {key[:12]})",
            source=study.source,
            key="--key",
        )
    cell.write_part(shard, key, out)
    write_part_record(out)


def plan(study: StudyExtraction, out: Path, shards: int) -> tuple[list[Part], list[Part]]:
    """``(all parts, parts still to run)`` for the cells whose cached dump is missing."""
    if shards < 1:
        raise UserError(f"must be >= 1, got {shards}", key="--shards")
    parts, todo = [], []
    for cell in study.cells:
        key = cell.key()
        if cell.in_cache(out / "cache" / "dumps", key):
            continue
        for i in range(shards):
            part = Part(cell.cell, i, shards, key, part_path(out, key, i, shards))
            parts.append(part)
            if not part_finished(part):
                todo.append(part)
    return parts, todo


def _bind_paths(study: StudyExtraction, out: Path, extra: tuple[str, ...]) -> list[str]:
    """apptainer --bind arguments: the study's inputs read-only, the parts folder writable."""
    binds = [f"{p}:{p}:ro" for p in sorted(study.read_only)]
    parts = (out / "cache" / "parts").resolve()
    return [*binds, *extra, f"{parts}:{parts}"]


def _model_passthrough() -> list[str]:
    """apptainer arguments that bring the submitter's weights into the container.

    ``--containall --cleanenv`` drop the environment and give a fresh ``HOME``, so the hub
    cache is bound read-only at ``/hf`` and named there (docs/hpc.md's one mechanism: ``--bind
    CACHE:/hf:ro --env HF_HUB_CACHE=/hf``), and a laion checkpoint folder
    (``AUDIOREPRO_CHECKPOINT_DIR``) likewise at its own path. A cache that does not exist here
    is not bound: a task that needs it then says, in one line, which bind to add.
    """
    from huggingface_hub import constants

    args: list[str] = []
    cache = Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE)
    if cache.is_dir():
        inside = CONTAINER_HUB_CACHE
        args += ["--bind", f"{cache.resolve()}:{inside}:ro", "--env", f"HF_HUB_CACHE={inside}"]
    checkpoints = os.environ.get("AUDIOREPRO_CHECKPOINT_DIR")
    if checkpoints and Path(checkpoints).is_dir():
        folder = Path(checkpoints).resolve()
        args += ["--bind", f"{folder}:{folder}:ro", "--env", f"AUDIOREPRO_CHECKPOINT_DIR={folder}"]
    return args


def task_command(study: StudyExtraction, out: Path, part: Part, options: SlurmOptions) -> list[str]:
    """The command an array task runs (on the node, in the container with ``--container``)."""
    args = [
        "extract-part",
        str(study.source.resolve()),
        "--cell",
        part.cell,
        "--shard",
        f"{part.shard}/{part.n_shards}",
        "--key",
        part.key,
        "--out",
        str(part.path.resolve()),
    ]
    if options.container is None:
        return [sys.executable, "-m", "audiorepro", *args]
    binds = [x for b in _bind_paths(study, out, options.binds) for x in ("--bind", b)]
    return [
        "apptainer",
        "exec",
        "--nv",
        "--containall",
        "--cleanenv",
        *binds,
        *_model_passthrough(),
        str(options.container.resolve()),
        "audiorepro",
        *args,
    ]


def run_command(argv: list[str]) -> None:
    """What each array task executes: the command, failing the task with its exit code."""
    proc = subprocess.run(argv, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} exited with {proc.returncode}")


def require_scheduler() -> None:
    """submitit installed and ``sbatch`` on PATH, else one line (a command may ask before it
    writes anything)."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise UserError(
            "needs submitit: pip install 'audiorepro[slurm]'", key="--executor slurm"
        ) from None
    if shutil.which("sbatch") is None:
        raise UserError(
            "no sbatch on PATH: submit from a Slurm login node (or start tools/slurm-local)",
            key="--executor slurm",
        )


def _executor(out: Path, options: SlurmOptions) -> Any:
    require_scheduler()
    import submitit

    folder = options.folder or out / "slurm"
    executor = submitit.SlurmExecutor(folder=folder / "%j", max_num_timeout=0)
    params: dict[str, object] = {
        "time": options.time_min,
        "array_parallelism": options.array_parallelism,
        "job_name": "audiorepro-extract",
        "setup": list(options.setup),
    }
    for name in ("partition", "account", "gpus_per_task", "cpus_per_task", "mem"):
        if getattr(options, name) is not None:
            params[name] = getattr(options, name)
    if options.gpus_per_task is not None:
        # Slurm takes --gpus-per-task only with an explicit task count: one process per task.
        params["additional_parameters"] = {"ntasks": 1}
    executor.update_parameters(**params)
    return executor


def submit(
    study: StudyExtraction, out: Path, parts: list[Part], options: SlurmOptions
) -> list[Job[None]]:
    """Submit one array task per part; returns submitit's jobs, in the parts' order."""
    for part in parts:
        part.path.parent.mkdir(parents=True, exist_ok=True)
    commands = [task_command(study, out, p, options) for p in parts]
    return list(_executor(out, options).map_array(run_command, commands))


def wait(
    jobs: list[Job[None]], timeout: float, poll: float, say: Callable[[str], None]
) -> dict[str, str]:
    """Wait, at most ``timeout`` seconds, until no job is pending or running.

    Returns every job's last state. States come from one sacct query per poll (submitit's
    watcher, forced), never from waiting on a result, which for a job Slurm killed may never
    come.
    """
    if not jobs:
        return {}
    watcher = jobs[0].watcher
    deadline = time.monotonic() + timeout
    last = None
    while True:
        watcher.update()
        states = {j.job_id: watcher.get_state(j.job_id, mode="cache") for j in jobs}
        counts: dict[str, int] = {}
        for state in states.values():
            counts[state.split()[0]] = counts.get(state.split()[0], 0) + 1
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        if summary != last:
            say(f"slurm: {len(jobs)} task(s): {summary}")
            last = summary
        if not any(s.split()[0] in RUNNING_STATES for s in states.values()):
            return states
        if time.monotonic() > deadline:
            waiting = [f"{jid} {s}" for jid, s in states.items() if s.split()[0] in RUNNING_STATES]
            raise UserError(
                f"gave up after {timeout:.0f} s waiting for {len(waiting)} array task(s) to end "
                f"({', '.join(waiting)}); they stay queued: rerun the same command once they "
                "have ended (finished parts are kept), or scancel them",
                key="--wait-timeout",
            )
        time.sleep(poll)


def run_slurm(
    study: StudyExtraction,
    out: Path,
    options: SlurmOptions,
    say: Callable[[str], None] = print,
) -> Outcome:
    """Extract what is missing on Slurm and merge it into the cache (module docstring)."""
    outcome = Outcome()
    parts, todo = plan(study, out, options.shards)
    if todo:
        say(
            f"slurm: submitting {len(todo)} of {len(parts)} extraction part(s) "
            f"({len(parts) - len(todo)} already finished)"
        )
        jobs = submit(study, out, todo, options)
        outcome.submitted = todo
        states = wait(jobs, options.timeout(), options.poll_s, say)
        for part, job in zip(todo, jobs, strict=True):
            state = states[job.job_id]
            if state.startswith("COMPLETED") and part_finished(part):
                continue
            why = state if not state.startswith("COMPLETED") else "COMPLETED, but no valid part"
            outcome.failed.append(
                f"{part.name}: job {job.job_id} {why}; log {job.paths.stderr} "
                f"(stdout {job.paths.stdout})"
            )
    if outcome.failed:
        return outcome
    by_cell: dict[str, list[Part]] = {}
    for part in parts:
        by_cell.setdefault(part.cell, []).append(part)
    for cell_id, cell_parts in by_cell.items():
        key = cell_parts[0].key
        paths, dest = [p.path for p in cell_parts], cache_dump_path(out / "cache" / "dumps", key)
        study.cell(cell_id).merge(paths, key, dest)
        record_entry(out / "cache" / "dumps", key)
    return outcome


def sbatch_script(study: StudyExtraction, out: Path, options: SlurmOptions) -> str:
    """An sbatch array script running the same tasks ``--executor slurm`` would submit now."""
    _, todo = plan(study, out, options.shards)
    logs = (options.folder or out / "slurm").resolve()
    lines = [
        "#!/bin/bash",
        f"# audiorepro: extraction of study {study.name!r} ({study.source}) as a job array:",
        f"# {len(todo)} task(s), one per (cell, shard) still missing. Submit with",
        f"#     mkdir -p {logs} && sbatch THIS_FILE",
        "# and once every task has ended, merge, compute and report (submits nothing more when",
        "# every part is finished; a failed task is named, and then resubmitted, by:",
        f"#     audiorepro reproduce {study.source} --out {out} --executor slurm"
        + (f" --shards {options.shards}" if options.shards != 1 else ""),
        f"#SBATCH --job-name=audiorepro-{study.name}",
        f"#SBATCH --time={options.time_min}",
        f"#SBATCH --output={logs}/%A_%a.out",
    ]
    if todo:
        lines.append(f"#SBATCH --array=0-{len(todo) - 1}%{options.array_parallelism}")
    for flag, value in (
        ("ntasks", 1 if options.gpus_per_task is not None else None),
        ("partition", options.partition),
        ("account", options.account),
        ("gpus-per-task", options.gpus_per_task),
        ("cpus-per-task", options.cpus_per_task),
        ("mem", options.mem),
    ):
        if value is not None:
            lines.append(f"#SBATCH --{flag}={value}")
    lines += ["set -euo pipefail", *options.setup]
    if not todo:
        lines += ["echo 'nothing to extract: every part is finished'", "exit 0"]
        return "\n".join(lines) + "\n"
    lines.append("TASKS=(")
    for part in todo:
        lines.append(f"  # {part.name}")
        lines.append("  " + shlex.quote(shlex.join(task_command(study, out, part, options))))
    lines += [")", 'eval "${TASKS[$SLURM_ARRAY_TASK_ID]}"']
    return "\n".join(lines) + "\n"

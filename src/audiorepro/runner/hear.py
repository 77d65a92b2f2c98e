"""``audiorepro hear MODEL --tasks-dir DIR``: a HEAR 2021 module over HEAR tasks, run
as a ``hear`` study (:mod:`audiorepro.runner.kinds.hear`) of one cell per task.

The command writes the study it runs (``hear.toml``: one ``[[cell]]`` per task, its id the
task's folder name) into a temporary folder, checks every task and loads the module before
OUT is touched, then runs the study through the common driver: OUT holds each task's
embeddings in heareval's layout and its ``test.predicted-scores.json`` under
``OUT/<task folder>/``, beside the tables, ``report.html``, ``bundle.json.gz``,
``verification.json`` and the manifest of any study (which records the study's SHA-256).
With ``--embeddings E`` a submission's saved embeddings (``E/<task folder>/``, heareval's
layout) stand for the model: each cell reads them (``embeddings = ...``), MODEL only names
the submission, and OUT holds no copy of them.
"""

from __future__ import annotations

import gzip
import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

from audiorepro.core.errors import UserError
from audiorepro.formats.hear import find_tasks, read_task
from audiorepro.runner.executors.slurm import SlurmOptions, require_scheduler
from audiorepro.runner.kinds.hear import (
    PREDICTED_SCORES,
    HearBundleCell,
    check_task,
)
from audiorepro.runner.kinds.hear.entry import load_model
from audiorepro.runner.kinds.hear.spec import HEAR_PREDICTORS
from audiorepro.runner.output.publish import check_out, claim
from audiorepro.runner.study import run_studies
from audiorepro.specs.study import load_study

__all__ = [
    "PREDICTED_SCORES",
    "PREDICTORS",
    "HearTaskResult",
    "SlurmFailed",
    "format_results",
    "hear_study_text",
    "results_of",
    "run_hear",
]

PREDICTORS = HEAR_PREDICTORS


@dataclass(frozen=True)
class HearTaskResult:
    """One task's scores: test split (or fold) -> heareval score name -> value."""

    task: str
    folder: Path
    scores: dict[str, dict[str, float]]


def hear_study_text(
    model: str,
    tasks_dir: Path,
    tasks: list[str],
    predictor: str,
    embeddings: Path | None = None,
) -> str:
    """The ``hear`` study the command runs: one cell per task folder (JSON strings are TOML
    basic strings), with ``embeddings = "<embeddings>/<task folder>"`` when a submission's
    saved embeddings stand for the model.

    >>> print(hear_study_text("hear:m", Path("/t"), ["words-v1-full"], "linear-v1"))
    schema = "audiorepro.study/1"
    name = "hear"
    kind = "hear"
    <BLANKLINE>
    [[cell]]
    id = "words-v1-full"
    model = "hear:m"
    tasks_dir = "/t"
    task = "words-v1-full"
    predictor = "linear-v1"
    <BLANKLINE>
    """
    q = json.dumps
    lines = ['schema = "audiorepro.study/1"', 'name = "hear"', 'kind = "hear"', ""]
    for task in tasks:
        lines += ["[[cell]]", f"id = {q(task)}", f"model = {q(model)}"]
        lines += [f"tasks_dir = {q(str(tasks_dir))}", f"task = {q(task)}"]
        lines += [f"predictor = {q(predictor)}"]
        if embeddings is not None:
            lines += [f"embeddings = {q(str(embeddings / task))}"]
        lines += [""]
    return "\n".join(lines)


class SlurmFailed(Exception):
    """``--executor slurm``: array tasks failed (each named: cell, shard, job, state, log);
    nothing was computed or published, and a rerun submits only the missing parts."""

    def __init__(self, failures: list[str]) -> None:
        super().__init__("; ".join(failures))
        self.failures = failures


#: Where ``--executor slurm`` writes the study it runs: in OUT's cache, which the array tasks
#: read on their nodes (a temporary folder of the submitting host is not theirs).
SLURM_STUDY = Path("cache") / "hear" / "hear.toml"


def run_hear(
    model: str,
    tasks_dir: Path,
    names: tuple[str, ...],
    predictor: str,
    out: Path,
    slurm: SlurmOptions | None = None,
    *,
    embeddings: Path | None = None,
) -> list[HearTaskResult]:
    """The command (module docstring); every task is checked and the module loaded (or, with
    ``embeddings``, each task's saved embeddings found) before OUT is touched. With ``slurm``,
    each task's embeddings are an array task (the extraction cache's HEAR entries,
    :mod:`audiorepro.runner.kinds.hear.entry`), then the predictors and scores run here."""
    if predictor not in PREDICTORS:
        raise UserError(
            f"is {predictor!r}; expected one of {', '.join(PREDICTORS)}", key="--predictor"
        )
    paths = find_tasks(tasks_dir, names)
    for path in paths:
        check_task(read_task(path), predictor)
    saved = None if embeddings is None else Path(embeddings).resolve()
    if saved is None:
        load_model(model)  # loaded once per process: the study's cells reuse it
    for path in paths:
        if saved is not None and not (saved / path.name).is_dir():
            raise UserError(
                f"is missing; expected heareval's embeddings of task {path.name} (--embeddings "
                "E/<module> holds one folder per task, as heareval's embedding runner writes)",
                source=saved / path.name,
            )
    if slurm is not None and saved is not None:
        raise UserError(
            "takes no --executor slurm: saved embeddings leave nothing to compute",
            key="--embeddings",
        )
    if slurm is not None:  # before OUT is touched
        require_scheduler()
    folders = [p.name for p in paths]
    text = hear_study_text(model, Path(tasks_dir).resolve(), folders, predictor, saved)
    with tempfile.TemporaryDirectory() as tmp, claim(out):
        check_out(out)
        source = Path(tmp) / "hear.toml" if slurm is None else Path(out).resolve() / SLURM_STUDY
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text, encoding="utf-8")
        study = load_study(source)
        ((_, _, outcome),) = run_studies([(study, ".")], out, progress=False, slurm=slurm)
    if outcome.get("executor_failed"):
        raise SlurmFailed(outcome["failures"])
    if not outcome["passed"]:
        raise UserError("; ".join(outcome["failures"]), source=out)
    return results_of(out)


def results_of(out: Path) -> list[HearTaskResult]:
    """Each task's scores, read back from OUT: its cells from the bundle, their values from
    each ``test.predicted-scores.json`` (where NaN and infinity are as heareval writes them)."""
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    cells: list[HearBundleCell] = bundle["cells"]
    results = []
    for c in cells:
        doc = json.loads((out / c["predicted_scores"]).read_text(encoding="utf-8"))
        values = {f: {n: float(doc[f][f"test_{n}"]) for n in c["scores"][f]} for f in c["scores"]}
        results.append(HearTaskResult(c["task"], out / c["id"], values))
    return results


def format_results(results: list[HearTaskResult]) -> list[str]:
    """One line per task and test split: each score with 4 decimals (NaN as ``nan``).

    >>> format_results([HearTaskResult("words", Path("o"), {"test": {"top1_acc": 0.5}})])
    ['words  test  top1_acc 0.5000']
    """
    lines = []
    for r in results:
        for fold, values in r.scores.items():
            parts = [f"{k} {'nan' if math.isnan(v) else f'{v:.4f}'}" for k, v in values.items()]
            lines.append(f"{r.task}  {fold}  " + "  ".join(parts))
    return lines

"""A study of either kind -> its output folder; and re-reading a study or an output folder.

This is the runner's entry: it picks the study kind's stages (:mod:`.retrieval`, :mod:`.probe`)
and the executor that extracts what is missing (:mod:`.executors`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from audiorepro.checks.verify import FAIL, Summary, ValueRow, summarize
from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.runner.executors.slurm import SlurmOptions, run_slurm
from audiorepro.runner.outputs import Outcome
from audiorepro.runner.probe import run_probe, verify_probe
from audiorepro.runner.retrieval import CellResult, golden_rows, load_cell, run
from audiorepro.specs.study import Study


def run_study(
    study: Study,
    out: Path,
    *,
    progress: bool = True,
    slurm: SlurmOptions | None = None,
    say: Callable[[str], None] = print,
) -> Outcome:
    """Run a study of either kind (retrieval or probe); returns whether it passed, and why
    not (the full record is ``verification.json`` in ``out``).

    Extraction runs here (the local executor, cell by cell) unless ``slurm`` is given: then
    a retrieval study's missing extractions first run as Slurm job arrays. If any array task
    failed, nothing is computed: the result has ``executor_failed`` and names the tasks.
    """
    if study.kind == "probe":
        return run_probe(study, out)
    if slurm is not None:
        outcome = run_slurm(study, out, slurm, say=say)
        if outcome.failed:
            return {"passed": False, "failures": outcome.failed, "executor_failed": True}
    return run(study, out, progress=progress)


def verify_study(study: Study, cache: Path) -> Summary:
    """Recompute only what the study's published values need (``audiorepro verify STUDY``)."""
    if study.kind == "probe":
        return verify_probe(study)
    needed = {p.cell for p in study.published}
    results = [CellResult(c) for c in study.cells if c.id in needed]
    for res in results:
        load_cell(res, cache)
    return summarize(golden_rows(study, results))


def verify_output_dir(out: Path) -> Summary:
    """Re-read a reproduce output folder: its published-value rows, and every output file
    against the manifest's SHA-256 (a changed file is a FAIL row naming it)."""
    out = Path(out)
    rows: list[ValueRow] = []
    for name in ("verification.json", "manifest.json"):
        if not (out / name).is_file():
            raise UserError(f"has no {name}; expected the output folder of reproduce", source=out)
    try:
        verification = json.loads((out / "verification.json").read_text(encoding="utf-8"))
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        rows = list(verification["golden"]["rows"])
        outputs = dict(manifest["outputs"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UserError(
            f"holds an unreadable verification or manifest ({exc})", source=out
        ) from None
    for rel, expected in sorted(outputs.items()):
        path = out / rel
        got = sha256_file(path) if path.is_file() else None
        if got != expected:
            rows.append(
                {
                    "cell": "output",
                    "metric": rel,
                    "published": None,
                    "reproduced": None,
                    "delta": None,
                    "tolerance": 0.0,
                    "status": FAIL,
                    "reason": "missing" if got is None else "SHA-256 differs from manifest.json",
                }
            )
    return summarize(rows)

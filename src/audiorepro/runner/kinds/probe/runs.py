"""The probe study kind of ``audiorepro reproduce``: runs of prediction files -> tables, report.

Each ``[[run]]`` is one model's prediction file (:mod:`audiorepro.formats.predictions`); every
metric is recomputed from the predictions. Tables (CSV, Markdown, LaTeX; sortable in the report):

``leaders``          per task, the best run by that task's metric and direction, and the
                     runner-ups side by side (:data:`TASK_METRICS`)
``family_means``     per model family, the mean normalized MAE and Spearman over its runs'
                     defined targets
``target_<name>``    one per regression target: n, MAE, normalized MAE, RMSE, Pearson, Spearman
``classification_<corpus>``  accuracy (with its group-bootstrap interval in the report),
                     balanced accuracy, macro F1; confusion matrices in the report
``events_iou_<t>``   event precision, recall, F1 and matches at IoU 0.1, 0.3, 0.5
``events``           frame F1, start/end MAE, span class accuracies
``vectors``          speaker-vector mean cosine

A declared run whose file is missing, or that has fewer regression targets than its
``n_targets``, makes the study incomplete: everything is still written, the report and
``verification.json`` say which run, and the exit code is 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audiorepro.checks.verify import (
    NOT_VERIFIED,
    Summary,
    ValueRow,
    summarize,
    value_rows,
)
from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import JsonValue, atomic_write_bytes, parse_json, read_text
from audiorepro.formats.predictions import load_predictions
from audiorepro.metrics.probe import probe_report
from audiorepro.metrics.probe_records import ClassSpan, ProbeReport, RegressionReport
from audiorepro.render.markdown import markdown_html
from audiorepro.render.tables import (
    NOT_APPLICABLE,
    NOT_APPLICABLE_NOTE,
    Cell,
    Column,
    Table,
    slug,
)
from audiorepro.runner.kinds.probe.gates import GateResult
from audiorepro.runner.kinds.probe.measured import Measurements
from audiorepro.runner.kinds.probe.measurements import read_measurements
from audiorepro.runner.kinds.probe.published import ProbePublished
from audiorepro.runner.kinds.probe.records import (
    TASK_METRICS,
    FamilyMeanRecord,
    LeaderRecord,
    MetricParity,
    ProbeRun,
    ProbeRunRecord,
)
from audiorepro.runner.kinds.probe.saved import (
    CLASSIFICATION_FIELDS,
    FieldColumn,
    parity,
    percent_cell,
    reference_check,
    saved_value,
)
from audiorepro.runner.kinds.probe.spec import ProbeStudy, Run
from audiorepro.runner.output.outputs import ParityCell
from audiorepro.specs.schema import distinct_file_names
from audiorepro.specs.study import present

IOU = ("0.1", "0.3", "0.5")
#: Task kinds whose values the tables show as percentages (accuracy and F1, as the published
#: probe report shows them); the bundle keeps fractions.
PERCENT_KINDS = ("classification", "events")
REG_COLUMNS = (
    Column("n"),
    Column("mae", False),
    Column("normalized_mae", False),
    Column("rmse", False),
    Column("pearson", True),
    Column("spearman", True),
)


def flatten(report: Mapping[str, object]) -> dict[str, float | None]:
    """A probe report's numbers by path (``regression/valence/mae``, ``events/iou/0.5/f1``).

    >>> flatten({"classification": {"n": 3, "accuracy": 0.5, "per_class": {}}})
    {'classification/n': 3, 'classification/accuracy': 0.5}
    """
    out: dict[str, float | None] = {}

    def walk(prefix: str, node: object) -> None:
        if isinstance(node, dict):
            if prefix.endswith("per_class"):
                return
            for key, value in node.items():
                walk(f"{prefix}/{key}" if prefix else key, value)
        elif node is None or (isinstance(node, int | float) and not isinstance(node, bool)):
            out[prefix] = node

    for section in ("regression", "classification", "events", "vectors", "speaker_sets", "human"):
        if section in report:
            walk(section, report[section])
    return out


def _get(report: ProbeReport | None, *path: str) -> object:
    """The report's section or number at ``path`` (None: the report has none there)."""
    node: object = report
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _number(report: ProbeReport | None, *path: str) -> float | None:
    """The report's number at ``path`` (None: undefined, or the report has none there)."""
    value = _get(report, *path)
    assert value is None or isinstance(value, int | float), path
    return value


def _regression(report: ProbeReport | None) -> dict[str, RegressionReport]:
    """The report's regression targets (none: no report, or no regression section)."""
    return {} if report is None else report.get("regression") or {}


def _accuracy_ci(report: ProbeReport | None) -> list[float] | None:
    """The group-bootstrap interval of the report's classification accuracy, if any."""
    classification = None if report is None else report.get("classification")
    return None if classification is None else classification.get("accuracy_ci95_group_bootstrap")


def _event_classes(report: ProbeReport | None) -> dict[str, ClassSpan]:
    """The report's event classes by index (none: no report, events or classes)."""
    events = None if report is None else report.get("events")
    return {} if events is None else events.get("classes", {})


#: (task label, metric kind, [(run label, value)])
Task = tuple[str, str, list[tuple[str, float | None]]]


def _tasks(runs: list[ProbeRun]) -> list[Task]:
    """(task label, metric kind, [(run label, value)]) for every task any run reports."""
    tasks: list[Task] = []
    targets = list(dict.fromkeys(t for r in runs for t in _regression(r["report"])))
    for target in targets:
        values = [
            (r["model"], _number(r["report"], "regression", target, "normalized_mae"))
            for r in runs
            if _get(r["report"], "regression", target)
        ]
        tasks.append((f"regression: {target}", "regression", values))
    corpora = list(dict.fromkeys(r["corpus"] for r in runs if _get(r["report"], "classification")))
    for corpus in corpora:
        values = [
            (r["model"], _number(r["report"], "classification", "balanced_accuracy"))
            for r in runs
            if r["corpus"] == corpus and _get(r["report"], "classification")
        ]
        tasks.append((f"classification: {corpus}", "classification", values))
    if any(_get(r["report"], "events") for r in runs):
        values = [
            (r["model"], _number(r["report"], "events", "iou", "0.5", "f1"))
            for r in runs
            if _get(r["report"], "events")
        ]
        tasks.append(("events: vocal bursts", "events", values))
    if any(_get(r["report"], "vectors") for r in runs):
        values = [
            (r["model"], _number(r["report"], "vectors", "mean_cosine"))
            for r in runs
            if _get(r["report"], "vectors")
        ]
        tasks.append(("speaker vectors", "vectors", values))
    return tasks


@dataclass(frozen=True)
class Place:
    """One place of a task's ranking: the run's model and its value."""

    model: str
    value: float | int


@dataclass(frozen=True)
class Leader:
    """A task's leading runs, best first, and the runs whose value is undefined (the
    ``leaders`` entries of the bundle, :func:`dataclasses.asdict`)."""

    task: str
    metric: str
    higher_is_better: bool
    ranking: list[Place]
    undefined: list[str]

    def record(self) -> LeaderRecord:
        """As the bundle keeps it (the fields as a JSON object)."""
        return {
            "task": self.task,
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "ranking": [{"model": p.model, "value": p.value} for p in self.ranking],
            "undefined": list(self.undefined),
        }


@dataclass(frozen=True)
class FamilyMean:
    """A model family's mean normalized MAE and Spearman over its defined targets (the
    ``family_means`` entries of the bundle)."""

    family: str
    normalized_mae: float | None
    spearman: float | None
    n_targets: int

    def record(self) -> FamilyMeanRecord:
        """As the bundle keeps it (the fields as a JSON object)."""
        return {
            "family": self.family,
            "normalized_mae": self.normalized_mae,
            "spearman": self.spearman,
            "n_targets": self.n_targets,
        }


def run_record(run: ProbeRun) -> ProbeRunRecord:
    """A run as the bundle keeps it: every field but ``documents``, in the run's order."""
    record: ProbeRunRecord = {
        "id": run["id"],
        "model": run["model"],
        "family": run["family"],
        "corpus": run["corpus"],
        "attributes": run["attributes"],
        "predictions_sha256": run["predictions_sha256"],
        "saved_sha256": run["saved_sha256"],
        "saved_files": run["saved_files"],
        "report": run["report"],
        "saved": run["saved"],
        "config": run["config"],
        "problem": run["problem"],
    }
    if "unused" in run:
        record["unused"] = run["unused"]
    return record


def leaders(runs: list[ProbeRun], places: int = 3) -> list[Leader]:
    """Per task: runs ordered best first by the task's metric and direction (undefined last)."""
    out = []
    for label, kind, values in _tasks(runs):
        _, metric_label, higher = TASK_METRICS[kind]
        defined = [(m, v) for m, v in values if v is not None and not math.isnan(v)]
        ordered = sorted(defined, key=lambda mv: -mv[1] if higher else mv[1])
        out.append(
            Leader(
                task=label,
                metric=metric_label,
                higher_is_better=higher,
                ranking=[Place(m, v) for m, v in ordered[:places]],
                undefined=[m for m, v in values if v is None or math.isnan(v)],
            )
        )
    return out


def family_means(runs: list[ProbeRun]) -> list[FamilyMean]:
    """Per family: mean normalized MAE and Spearman over defined (run, target) pairs."""
    out = []
    for family in dict.fromkeys(r["family"] for r in runs):
        nmae: list[float] = []
        rho: list[float] = []
        for r in runs:
            if r["family"] != family:
                continue
            for values in _regression(r["report"]).values():
                if (v := values["normalized_mae"]) is not None:
                    nmae.append(v)
                if (v := values["spearman"]) is not None:
                    rho.append(v)
        out.append(
            FamilyMean(
                family=family,
                normalized_mae=math.fsum(nmae) / len(nmae) if nmae else None,
                spearman=math.fsum(rho) / len(rho) if rho else None,
                n_targets=len(nmae),
            )
        )
    return out


def _class_name(index: str, names: tuple[str, ...]) -> str:
    """An event class's name: the study's ``event_classes`` entry, else its index."""
    i = int(index)
    return names[i] if i < len(names) else f"class {index}"


REG_FIELDS = tuple(FieldColumn(c.name, c) for c in REG_COLUMNS)
IOU_FIELDS = (
    FieldColumn("precision", Column("precision (%)", True), True),
    FieldColumn("recall", Column("recall (%)", True), True),
    FieldColumn("f1", Column("f1 (%)", True), True),
    FieldColumn("matched", Column("matched")),
)
EVENT_FIELDS = (
    FieldColumn("frame_f1", Column("frame_f1 (%)", True), True),
    FieldColumn("start_mae_s", Column("start_mae_s", False)),
    FieldColumn("end_mae_s", Column("end_mae_s", False)),
    FieldColumn("oracle_span_class_accuracy", Column("oracle_span_class_accuracy (%)", True), True),
    FieldColumn(
        "detected_span_class_accuracy", Column("detected_span_class_accuracy (%)", True), True
    ),
)
VECTOR_FIELDS = (
    FieldColumn("n", Column("n")),
    FieldColumn("mean_cosine", Column("mean_cosine", True)),
)


def _field_rows(
    runs: list[ProbeRun], path: tuple[str, ...], fields: tuple[FieldColumn, ...]
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """One row per run: each declared field at ``path`` of its report."""
    return tuple(
        (
            r["model"],
            tuple(percent_cell(_number(r["report"], *path, f.field), f.percent) for f in fields),
        )
        for r in runs
    )


def _leaders_table(lead: list[Leader]) -> Table:
    """Per task: the leading runs and their values, best first."""
    width = max((len(t.ranking) for t in lead), default=0)
    cols: list[Column] = [Column("metric")]
    for place in range(1, width + 1):
        cols += [Column(f"#{place}"), Column(f"#{place} value")]
    rows = []
    percent = {TASK_METRICS[k][1] for k in PERCENT_KINDS}
    for t in lead:
        arrow = " ↑" if t.higher_is_better else " ↓"
        pct = t.metric in percent
        cells: list[Cell] = [t.metric + (" (%)" if pct else "") + arrow]
        for place in range(width):
            entry = t.ranking[place] if place < len(t.ranking) else None
            # A place beyond the task's runs has no value by design; one a run with an
            # undefined value would fill was expected ("not recorded / undefined").
            gap = None if place < len(t.ranking) + len(t.undefined) else NOT_APPLICABLE
            cells += [
                entry.model if entry else gap,
                percent_cell(entry.value, pct) if entry else gap,
            ]
        rows.append((t.task, tuple(cells)))
    return Table(
        "Task leaders (best run per task by its metric)",
        tuple(cols),
        tuple(rows),
        row_header="task",
        notes=(NOT_APPLICABLE_NOTE.removesuffix(".") + ": fewer runs than places.",)
        if any(len(t.ranking) + len(t.undefined) < width for t in lead)
        else (),
    )


def _family_means_table(fam: list[FamilyMean]) -> Table:
    return Table(
        "Family means over defined targets",
        (Column("normalized_mae", False), Column("spearman", True), Column("targets")),
        tuple((f.family, (f.normalized_mae, f.spearman, f.n_targets)) for f in fam),
        row_header="family",
    )


def _target_tables(runs: list[ProbeRun]) -> dict[str, Table]:
    """One table per regression target: every run's numbers for it."""
    reg_runs = [r for r in runs if _get(r["report"], "regression")]
    targets = list(dict.fromkeys(t for r in reg_runs for t in _regression(r["report"])))
    return {
        f"target_{slug(target)}": Table(
            f"Regression target {target}",
            REG_COLUMNS,
            _field_rows(reg_runs, ("regression", target), REG_FIELDS),
        )
        for target in targets
    }


def _classification_tables(runs: list[ProbeRun]) -> dict[str, Table]:
    """Per corpus: accuracy (with its group-bootstrap interval), balanced accuracy, macro F1."""
    tables = {}
    for corpus in dict.fromkeys(r["corpus"] for r in runs if _get(r["report"], "classification")):
        group = [r for r in runs if r["corpus"] == corpus and _get(r["report"], "classification")]
        intervals = tuple(
            tuple(
                _interval(ci, 100.0)
                if f.field == "accuracy" and (ci := _accuracy_ci(r["report"]))
                else None
                for f in CLASSIFICATION_FIELDS
            )
            for r in group
        )
        tables[f"classification_{slug(str(corpus))}"] = Table(
            f"Classification, {corpus}",
            tuple(f.column for f in CLASSIFICATION_FIELDS),
            _field_rows(group, ("classification",), CLASSIFICATION_FIELDS),
            notes=("Report: group-bootstrap 95% interval of accuracy (groups resampled, seeded).",),
            intervals=intervals,
        )
    return tables


def _event_tables(runs: list[ProbeRun], event_classes: tuple[str, ...]) -> dict[str, Table]:
    """Events at each IoU threshold, frames/timing/span classes, and per-class support."""
    ev_runs = [r for r in runs if _get(r["report"], "events")]
    if not ev_runs:
        return {}
    tables = {
        f"events_iou_{threshold.replace('.', '')}": Table(
            f"Vocal-burst events at IoU >= {threshold}",
            tuple(f.column for f in IOU_FIELDS),
            _field_rows(ev_runs, ("events", "iou", threshold), IOU_FIELDS),
        )
        for threshold in IOU
    }
    tables["events"] = Table(
        "Vocal-burst events: frames, timing, span classes",
        tuple(f.column for f in EVENT_FIELDS),
        _field_rows(ev_runs, ("events",), EVENT_FIELDS),
    )
    class_rows = [
        (
            r["model"],
            (
                _class_name(c, event_classes),
                v["support"],
                percent_cell(v["oracle_span_accuracy"], True),
            ),
        )
        for r in ev_runs
        for c, v in _event_classes(r["report"]).items()
    ]
    if class_rows:
        tables["event_classes"] = Table(
            "Vocal-burst classes: support and oracle-span accuracy per class (recomputed)",
            (Column("class"), Column("support"), Column("oracle_span_accuracy (%)", True)),
            tuple(class_rows),
            notes=("Support: reference events of the class.",),
        )
    return tables


def _tables(
    runs: list[ProbeRun],
    lead: list[Leader],
    fam: list[FamilyMean],
    event_classes: tuple[str, ...] = (),
) -> dict[str, Table]:
    """Every table recomputed from the predictions (see the module docstring), in the order
    the report shows them."""
    # No run with predictions: no leader or family mean to show (no empty table).
    tables = {"leaders": _leaders_table(lead)} if lead else {}
    if fam:
        tables["family_means"] = _family_means_table(fam)
    tables.update(_target_tables(runs))
    tables.update(_classification_tables(runs))
    tables.update(_event_tables(runs, event_classes))
    vec_runs = [r for r in runs if _get(r["report"], "vectors")]
    if vec_runs:
        tables["vectors"] = Table(
            "Speaker vectors",
            tuple(f.column for f in VECTOR_FIELDS),
            _field_rows(vec_runs, ("vectors",), VECTOR_FIELDS),
        )
    return tables


def _interval(pair: Any, scale: float = 1.0) -> tuple[float, float]:
    low, high = pair
    return scale * float(low), scale * float(high)


def _load_run(run: Run) -> tuple[ProbeReport | None, str | None]:
    if run.predictions is None:
        return None, None  # saved measurements only
    if not present(run.predictions):
        return None, f"declared run {run.id}: predictions file {run.predictions.name} is missing"
    try:
        digest = sha256_file(run.predictions)
        if digest != run.sha256:
            return (
                None,
                f"run {run.id}: predictions have SHA-256 {digest}, the study expects {run.sha256}",
            )
        report = probe_report(
            load_predictions(run.predictions), source=run.predictions.name, sha256=digest
        )
    except UserError as exc:
        return None, f"run {run.id}: {exc}"
    if run.n_targets is not None:
        found = len(report.get("regression", {}))
        if found < run.n_targets:
            return report, f"run {run.id} has {found} regression targets, {run.n_targets} declared"
    return report, None


def _golden_rows(study: ProbeStudy, runs: list[ProbeRun]) -> list[ValueRow]:
    rows: list[ValueRow] = []
    by_id = {r["id"]: r for r in runs}
    for pub in study.published:
        run = by_id[pub.cell]
        reproduced = {k: v for k, v in flatten(run["report"] or {}).items() if v is not None}
        reason = run["problem"] if run["report"] is None else None
        rows += [
            ValueRow(**r, provenance=pub.provenance)
            for r in value_rows(pub.cell, pub.values, pub.tolerance, reproduced, reason, "probe")
        ]
    return rows


def _load_saved(run: Run) -> tuple[dict[str, Measurements], list[str]]:
    """A run's saved files by split, read as they are (a malformed known key is a UserError,
    exit 2); a missing one is a problem of an incomplete study."""
    saved: dict[str, Measurements] = {}
    problems = []
    for split, ref in run.metrics.items():
        if not present(ref.path):
            problems.append(
                f"declared run {run.id}: saved {split} measurements {ref.path.name} are missing"
            )
            continue
        saved[split] = read_measurements(ref.path, split, at=ref.at, rename=ref.rename)
    return saved, problems


def _copy_name(run_id: str, split: str, path: Path) -> str:
    """Where a saved file's byte copy goes in the outputs (a JSONL file keeps its suffix)."""
    suffix = ".jsonl" if path.suffix == ".jsonl" else ".json"
    return f"measurements/{slug(run_id)}/{slug(split)}{suffix}"


def _load_config(run: Run) -> tuple[dict[str, JsonValue] | None, str | None]:
    """A run's config JSON (an object; a malformed one is a UserError, exit 2); a pattern
    run's several config files merged in order, the first file's key winning."""
    if run.config is None:
        return None, None
    merged: dict[str, JsonValue] = {}
    for ref in (run.config, *run.more_config):
        if not present(ref.path):
            return None, f"declared run {run.id}: config {ref.path.name} is missing"
        text = read_text(ref.path, what="a run's config JSON")
        doc = parse_json(text, source=ref.path)
        if not isinstance(doc, dict):
            raise UserError("is not a JSON object; expected a run's config", source=ref.path)
        merged = {**doc, **merged}
    return merged, None


def _runs(study: ProbeStudy, *, predictions: bool = True) -> list[ProbeRun]:
    runs: list[ProbeRun] = []
    for run in study.runs:
        report, problem = _load_run(run) if predictions else (None, None)
        documents, missing = _load_saved(run)
        saved = {s: m.shape for s, m in documents.items() if m.shape is not None}
        config, config_problem = _load_config(run)
        problems = ([problem] if problem is not None else []) + missing
        problems += [config_problem] if config_problem is not None else []
        runs.append(
            {
                "id": run.id,
                "model": run.model,
                "family": run.family,
                "corpus": run.corpus,
                "attributes": dict(run.attributes),
                "predictions_sha256": run.sha256,
                "saved_sha256": {split: ref.sha256 for split, ref in run.metrics.items()},
                "saved_files": {
                    split: _copy_name(run.id, split, ref.path) for split, ref in run.metrics.items()
                },
                "report": report,
                "saved": saved,
                "config": config,
                "problem": "; ".join(problems) if problems else None,
                # The whole documents, for key paths; not in the bundle (the byte copies are).
                "documents": documents,
            }
        )
    return runs


def check_output_names(study: ProbeStudy, runs: list[ProbeRun]) -> None:
    """Target and benchmark names of every run name table files (``target_<name>``,
    ``saved_target_<name>``, ``public_<name>``): two that slug alike (``a/b``, ``a_b``), in
    one run or in two, would overwrite each other's tables, and a name over
    :data:`~audiorepro.core.io.SLUG_MAX` characters cannot name a file. Refused (exit 2)
    before anything is written, naming both and where each comes from."""
    kinds: dict[str, list[tuple[str, str]]] = {"a target": [], "a saved target": [], "a bench": []}
    for i, (run, r) in enumerate(zip(study.runs, runs, strict=True)):
        if r["report"] is not None and run.predictions is not None:
            where = f"run[{i}] ({run.predictions.name}): reg_names"
            kinds["a target"] += [(where, t) for t in r["report"].get("regression", {})]
        for split, saved in r["saved"].items():
            where = f"run[{i}] ({run.metrics[split].path.name})"
            if split == "public":
                kinds["a bench"] += [(f"{where}: benchmark", str(b)) for b in saved]
            else:
                scores = [str(s["score"]) for s in saved.get("per_score", [])]
                kinds["a saved target"] += [(f"{where}: per_score", name) for name in scores]
    for what, items in kinds.items():
        distinct_file_names(items, source=str(study.source), what=f"{what} name")


def _parity(study: ProbeStudy, runs: list[ProbeRun]) -> MetricParity:
    """Saved vs recomputed for every run with predictions and a saved parity split."""
    cells = []
    for r in runs:
        if r["report"] is None:
            continue
        recomputed = flatten(r["report"])
        adapters = [s for s in r["saved"] if s.startswith("adapter")]
        for split in (study.parity_split, "public", *adapters):
            if split in r["saved"]:
                cells += parity(
                    r["id"],
                    split,
                    r["saved"][split],
                    recomputed,
                    study.parity_tolerance,
                    study.event_classes,
                )
    reference: list[ParityCell] = []
    for run, r in zip(study.runs, runs, strict=True):
        if r["report"] is not None and run.predictions is not None:
            reference += reference_check(run.id, load_predictions(run.predictions), r["report"])
    return {
        "passed": all(c["passed"] for c in cells + reference),
        "cells": cells,
        "reference": reference,
    }


def gate_table(gates: list[GateResult]) -> Table:
    """Each ``[[gate]]``: its file, how many records it checked, PASS or why not."""
    return Table(
        "Gates over the study's job records",
        (Column("file"), Column("records checked"), Column("result")),
        tuple((g.name, (g.file, g.checked, g.problem or "PASS")) for g in gates),
        row_header="gate",
    )


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:  # outside the study's folder: the full path says which file
        return path.as_posix()


def _narrative(study: ProbeStudy) -> list[tuple[str, str]]:
    """The study's ``[[section]]`` files as (title, HTML), in the order given: Markdown
    rendered with raw HTML disabled (:mod:`audiorepro.render.markdown`)."""
    out = []
    for section in study.sections:
        text = read_text(section.path, what="a Markdown section")
        out.append((section.title, f'<div class="narrative">{markdown_html(text)}</div>'))
    return out


def _copy_saved(study: ProbeStudy, out: Path) -> None:
    """Each saved file, byte for byte, under ``measurements/<run>/<split>.json``: the report's
    panels link to the exact file every number came from."""
    for run in study.runs:
        for split, ref in run.metrics.items():
            if ref.path.is_file():
                target = out / _copy_name(run.id, split, ref.path)
                atomic_write_bytes(target, ref.path.read_bytes())


def verify_probe_saved(
    study: ProbeStudy, published: list[ProbePublished], *, source: Path
) -> Summary:
    """``audiorepro verify --golden FILE STUDY`` for a probe study: each published value
    against the study's saved measurements (not recomputed: the saved files are what the
    study published from). A value the saved files do not hold, or whose file is missing, is
    NOT VERIFIED, never a pass."""
    ids = {r.id for r in study.runs}
    for i, pub in enumerate(published):
        if pub.run not in ids:
            raise UserError(
                f"names {pub.run!r}, which is not a run of {study.source.name}",
                source=source,
                key=f"run[{i}].run",
            )
    by_id = {r["id"]: r for r in _runs(study, predictions=False)}
    rows: list[ValueRow] = []
    for pub in published:
        run = by_id[pub.run]
        found: dict[str, float] = {}
        for metric in pub.values:
            value = saved_value(run["saved"], metric, study.families, run["documents"])
            if value is not None:
                found[metric] = float(value)
        reason = run["problem"]
        for row in value_rows(pub.run, pub.values, pub.tolerance, found, reason, "saved"):
            if row["status"] == NOT_VERIFIED and row["reason"] and reason is None:
                row["reason"] = f"the saved measurements hold no {row['metric']}"
            if pub.provenance is not None:
                row["provenance"] = pub.provenance
            rows.append(row)
    return summarize(rows)


def verify_probe(study: ProbeStudy) -> Summary:
    """``audiorepro verify`` for a probe study: its published values, recomputed."""
    return summarize(_golden_rows(study, _runs(study)))

"""The published probe module's content beyond the saved-measurement tables.

From what the study declares (:mod:`audiorepro.runner.kinds.probe.content_spec`) this builds

``derived_runs``, ``derived``  each ``[[derived]]`` number with its formula (per run; study-wide)
``panel_<run>_derived``  the run's derived numbers with their formulas (in its panel)
``job_attempts``       every Slurm attempt of the job records, final or superseded
``provenance``         study completion: runs, attempts, final allocations, the workflow's
                       state and completion time, and every study-wide derived number
``acted_<corpus>``     fixed mapping and supervised adapter side by side, told apart by protocol:
                       n, accuracy, balanced accuracy, macro F1, actor-bootstrap CI, parameters
``acted_<corpus>_classes``, ``_confusion``, ``_folds``, ``_trials``   per-class recall and
                       precision, confusion matrices, outer folds, inner-fold trials
``history``            each run's validation history (a JSONL split)
``class_labels``       the class names a file of the tree lists
``listing_<name>``     a list of records in a file of the tree (the backbones of study.json)

with figures (confusion heatmaps, history curves) for the report, the derived records and a
result manifest (counts, run ids, attempts) for the bundle, and the study's ``[[note]]`` s
attached under the tables they explain.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.io import JsonValue
from audiorepro.formats.keypath import KeyPathError, locate
from audiorepro.render.heatmap import heatmap
from audiorepro.render.plots import Series, line_chart
from audiorepro.render.tables import Column, Table, slug
from audiorepro.runner.kinds.probe.content_spec import ActedSpec, HistorySpec, JobsSpec, ListingSpec
from audiorepro.runner.kinds.probe.derived import (
    Derived,
    Ref,
    Value,
    evaluate,
    read_document,
    values_at,
)
from audiorepro.runner.kinds.probe.gates import (
    final_by_ids,
    final_items,
    job_id,
    workflow_final_ids,
)
from audiorepro.runner.kinds.probe.measurements import matches
from audiorepro.runner.kinds.probe.records import DerivedRecord, ProbeRun
from audiorepro.runner.kinds.probe.spec import ProbeStudy

Cell = float | int | str | None


@dataclass
class ContentResult:
    """Tables, report figures (title, HTML) and bundle records of the module's content."""

    tables: dict[str, Table] = field(default_factory=dict)
    figures: list[tuple[str, str]] = field(default_factory=list)
    heatmaps: list[str] = field(default_factory=list)
    derived: list[DerivedRecord] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    #: the aliased files as read for these tables (the notes read the same documents)
    files: _Files | None = None


class _Files:
    """The study's aliased files, each read once (None where it is not there)."""

    def __init__(self, study: ProbeStudy) -> None:
        self.paths = study.content.files
        self.docs: dict[str, JsonValue] = {}  #: alias -> the file as read (None: absent)

    def doc(self, alias: str) -> Any:
        if alias not in self.docs:
            path = self.paths[alias]
            self.docs[alias] = read_document(path) if path.is_file() else None
        return self.docs[alias]

    def source(self, alias: str) -> str:
        return str(self.paths[alias])


def _document(run: ProbeRun | None, split: str) -> tuple[Any, str]:
    m = None if run is None else run["documents"].get(split)
    return (None, "") if m is None else (m.document, m.source)


def _resolver(files: _Files, runs: list[ProbeRun], run: ProbeRun | None) -> Any:
    def resolve(ref: Ref) -> Value:
        if ref.every_run:
            out: list[float | None] = []
            for r in runs:
                doc, source = _document(r, ref.name)
                v = None if doc is None else values_at(doc, ref.path, source, text=ref.in_tres)
                out.append(v if isinstance(v, int | float) else None)
            return out
        if ref.name in files.paths:
            doc, source = files.doc(ref.name), files.source(ref.name)
        else:
            doc, source = _document(run, ref.name)
        return None if doc is None else values_at(doc, ref.path, source, text=ref.in_tres)

    return resolve


def _ratio(value: float | None, of: float | None) -> Cell:
    """A count over a count as the module shows it: ``11/40``."""
    if value is None or of is None:
        return None
    return f"{value:g}/{of:g}"


def _derived(study: ProbeStudy, runs: list[ProbeRun], out: ContentResult, files: _Files) -> None:
    records: list[DerivedRecord] = []
    for d in study.content.derived:
        scopes = [(r["id"], r) for r in runs] if d.per_run else [("", None)]
        values, of_values = {}, {}
        for key, run in scopes:
            resolve = _resolver(files, runs, run)
            values[key] = evaluate(d.formula, resolve)
            if d.of is not None:
                of_values[key] = evaluate(d.of, resolve)
        records.append(
            {
                "name": d.name,
                "label": d.label,
                "formula": d.formula.text,
                "of": None if d.of is None else d.of.text,
                "per_run": d.per_run,
                "values": values,
                "of_values": of_values,
            }
        )
    out.derived = records
    per_run = [r for r in records if r["per_run"]]
    if per_run:
        out.tables["derived_runs"] = Table(
            "Derived numbers per run (each column's formula below)",
            tuple(Column(r["label"]) for r in per_run),
            tuple((run["id"], tuple(_shown(r, run["id"]) for r in per_run)) for run in runs),
            row_header="run",
            notes=tuple(f"{r['label']} = {_formula(r)}" for r in per_run),
        )
        # The same numbers inside each run's panel, beside the files they are derived from.
        for run in runs:
            out.tables[f"panel_{slug(run['id'])}_derived"] = Table(
                f"{run['id']}: derived numbers",
                (Column("value"), Column("formula")),
                tuple((r["label"], (_shown(r, run["id"]), _formula(r))) for r in per_run),
                row_header="number",
            )
    study_wide = [r for r in records if not r["per_run"]]
    if study_wide:
        out.tables["derived"] = Table(
            "Derived numbers of the study",
            (Column("value"), Column("formula")),
            tuple((r["label"], (_shown(r, ""), _formula(r))) for r in study_wide),
            row_header="number",
        )


def _shown(record: DerivedRecord, key: str) -> Cell:
    value = record["values"].get(key)
    return _ratio(value, record["of_values"].get(key)) if record["of"] else value


def _formula(record: DerivedRecord) -> str:
    return record["formula"] + (f" over {record['of']}" if record["of"] else "")


def _field(item: Any, path: str) -> Any:
    try:
        found = locate(item, path)
    except KeyPathError:
        return None
    return None if found is None else found[1]


def _cell(value: Any) -> Cell:
    """A record's field as a table cell: numbers and text as they are, anything else as JSON
    text (a record is data, shown whatever it holds)."""
    if value is None or (isinstance(value, str | int | float) and not isinstance(value, bool)):
        return value
    return json.dumps(value, sort_keys=True)


def _jobs(
    study: ProbeStudy, runs: list[ProbeRun], out: ContentResult, spec: JobsSpec, files: _Files
) -> None:
    doc = files.doc(spec.file)
    found = _field(doc, spec.at) if doc is not None else []
    # A missing list, or an item that is no record, would leave the attempt table silently
    # short (a typo in `at` read as "no attempt").
    bad = (
        (spec.at, found)
        if not isinstance(found, list)
        else next(
            ((f"{spec.at}[{i}]", a) for i, a in enumerate(found) if not isinstance(a, dict)), None
        )
    )
    if bad is not None:
        raise UserError(
            ("is missing" if bad[1] is None else f"is {type(bad[1]).__name__}")
            + "; expected the list of job attempts (tables)",
            source=files.source(spec.file),
            key=bad[0],
        )
    attempts: list[dict[str, Any]] = found
    final, rule = _final(attempts, spec, files)  # as the gates pick them
    status = _status(attempts, final, spec, files)
    out.tables["job_attempts"] = Table(
        f"Every Slurm attempt ({study.content.files[spec.file].name}): repaired failures, "
        "replacements and final receipts",
        (*(Column(c) for c in spec.columns), Column("final attempt")),
        tuple(
            (str(i + 1), (*(_cell(a.get(c)) for c in spec.columns), status[i]))
            for i, a in enumerate(attempts)
        ),
        row_header="attempt",
        notes=(rule,),
    )
    workflow = files.doc(spec.workflow) if spec.workflow else None
    ok = [
        i
        for i in final
        if attempts[i].get("State") == "COMPLETED" and attempts[i].get("ExitCode") == "0:0"
    ]
    complete = [r for r in runs if r["problem"] is None]
    rows: list[tuple[str, tuple[Cell, ...]]] = [
        ("runs declared / with every file", (f"{len(runs)} / {len(complete)}",)),
        ("Slurm attempts recorded", (len(attempts),)),
        ("final allocations (COMPLETED 0:0)", (f"{len(final)} ({len(ok)})",)),
    ]
    if workflow is not None:
        rows += [
            ("workflow state", (_cell(_field(workflow, spec.state)),)),
            ("workflow completion (UTC)", (_cell(_field(workflow, spec.completed)),)),
        ]
    rows += [(r["label"], (_shown(r, ""),)) for r in out.derived if not r["per_run"]]
    out.tables["provenance"] = Table(
        "Study completion and provenance (job records, workflow, derived numbers)",
        (Column("recorded"),),
        tuple(rows),
        row_header="component",
    )
    out.manifest.update(
        {
            "job_attempts": len(attempts),
            "final_allocations": len(final),
            "final_job_ids": [_cell(attempts[i].get(spec.columns[0])) for i in sorted(final)],
            "attempts": [
                {c: _cell(a.get(c)) for c in spec.columns} | {"final": i in final}
                for i, a in enumerate(attempts)
            ],
            "workflow_state": _cell(_field(workflow, spec.state)) if workflow else None,
            "completed_utc": _cell(_field(workflow, spec.completed)) if workflow else None,
        }
    )


def _final(attempts: list[dict[str, Any]], spec: JobsSpec, files: _Files) -> tuple[set[int], str]:
    """The final attempts and the rule that picked them: the ids the workflow record names
    (``final_from``), or, where the study has no workflow record, the last attempt per
    ``final_by``."""
    wf = spec.final_from
    alias = None if wf is None else wf.file or spec.workflow
    record = None if alias is None else files.doc(alias)
    if wf is not None and alias is not None and record is not None:
        name = files.paths[alias].name
        try:
            ids = workflow_final_ids(record, wf, name)
            final = final_by_ids(attempts, ids, wf.id_field, files.paths[spec.file].name)
        except ValueError as exc:
            rule = f"{exc}; final attempts by {spec.final_by} instead (the gate fails)"
            return set(final_items(attempts, spec.final_by)), rule
        parts = [*wf.single, *(f"the last attempt of each of {p}" for p in wf.last_of)]
        return set(final), f"Final: the jobs {name} names ({'; '.join(parts)})."
    missing = f" ({files.paths[alias].name} is missing)" if alias is not None else ""
    return (
        set(final_items(attempts, spec.final_by)),
        f"Final: the last attempt of each {spec.final_by}{missing}.",
    )


def _status(
    attempts: list[dict[str, Any]], final: set[int], spec: JobsSpec, files: _Files
) -> list[str]:
    """Each attempt's role: final, superseded, or the supplementary job its record names
    (publication recovered where that record says so)."""
    record = files.doc(spec.supplementary) if spec.supplementary else None
    extra = job_id(record.get("id")) if isinstance(record, dict) else None
    recovered = isinstance(record, dict) and record.get("publication_recovery") is True
    id_field = spec.final_from.id_field if spec.final_from else spec.columns[0]
    out = []
    for i, a in enumerate(attempts):
        if i in final:
            out.append("final")
        elif extra is not None and job_id(a.get(id_field)) == extra:
            out.append("supplementary" + ("; publication recovered" if recovered else ""))
        else:
            out.append("superseded")
    return out


def _pct(value: Any) -> Cell:
    return 100.0 * value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _classifiers(run: ProbeRun, spec: ActedSpec) -> list[tuple[str, Any, Any, str, str]]:
    """(protocol, result, adapter document, file, key path of the result) of a run's fixed
    mapping and supervised adapter."""
    out: list[tuple[str, Any, Any, str, str]] = []
    if spec.fixed is not None:
        split, _, path = spec.fixed.partition(":")
        doc, source = _document(run, split)
        result = _field(doc, path) if doc is not None else None
        if isinstance(result, dict):
            out.append((spec.fixed_protocol, result, None, source, f"{path}."))
    if spec.adapter is not None:
        doc, source = _document(run, spec.adapter)
        if isinstance(doc, dict) and isinstance(doc.get("metrics"), dict):
            protocol = doc.get("protocol") or "Supervised adapter"
            out.append((f"Supervised: {protocol}", doc["metrics"], doc, source, "metrics."))
    return out


def _records(value: Any, source: str, key: str) -> list[dict[str, Any]]:
    """A saved list of records the acted tables read (per_class, folds, trials): absent is
    none; anything but a list of tables is one line naming the file and key, exit 2."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserError(
            f"is {type(value).__name__}; expected a list of tables", source=source, key=key
        )
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise UserError(
                f"is {type(item).__name__}; expected a table", source=source, key=f"{key}[{i}]"
            )
    return value


def _interval(value: Any, source: str, key: str) -> list[Any]:
    """A saved [low, high] interval (absent: not recorded)."""
    if value is None:
        return [None, None]
    if not isinstance(value, list) or len(value) != 2:
        raise UserError(f"is {_cell(value)}; expected [low, high]", source=source, key=key)
    return value


CI_KEY = "accuracy_actor_bootstrap_95ci"
#: A table's row: its label and its cells.
Row = tuple[str, tuple[Cell, ...]]


def _acted(runs: list[ProbeRun], spec: ActedSpec, out: ContentResult) -> None:
    name = f"acted_{slug(spec.corpus)}"
    summary: list[Row] = []
    classes: list[Row] = []
    confusion: list[tuple[str, Mapping[str, object]]] = []  #: (row label, true label's row)
    folds: list[Row] = []
    trials: list[Row] = []
    for run in runs:
        for protocol, x, adapter, source, at in _classifiers(run, spec):
            ci = _interval(x.get(CI_KEY), source, at + CI_KEY)
            params = 0 if adapter is None else _cell(adapter.get("parameters"))
            summary.append(
                (
                    run["id"],
                    (
                        protocol,
                        _cell(x.get("n")),
                        _pct(x.get("accuracy")),
                        _pct(x.get("balanced_accuracy")),
                        _pct(x.get("macro_f1")),
                        _pct(ci[0]),
                        _pct(ci[-1]),
                        params,
                    ),
                )
            )
            label = f"{run['id']} / {'fixed' if adapter is None else 'supervised'}"
            for c in _records(x.get("per_class"), source, f"{at}per_class"):
                classes.append(
                    (
                        label,
                        (
                            _cell(c.get("class")),
                            _cell(c.get("support")),
                            _pct(c.get("recall")),
                            _pct(c.get("precision")),
                        ),
                    )
                )
            matrix = x.get("confusion") if isinstance(x.get("confusion"), dict) else {}
            rows = {t: (v if isinstance(v, dict) else {}) for t, v in matrix.items()}
            confusion += [(f"{label} / {t}", row) for t, row in rows.items()]
            if rows:
                out.heatmaps.append(
                    heatmap(
                        list(rows),
                        [[_num(rows[t].get(p)) for p in rows] for t in rows],
                        chart_id=f"heat-{slug(label)}-{slug(spec.corpus)}",
                        title=f"{spec.corpus}: {label}",
                    )
                )
            for i, f in enumerate(_records((adapter or {}).get("folds"), source, "folds")):
                sel = f.get("selected") or {}
                if not isinstance(sel, dict):
                    raise UserError(f"is {_cell(sel)}; expected a table", source=source,
                                    key=f"folds[{i}].selected")  # fmt: skip
                folds.append(
                    (
                        run["id"],
                        (
                            _cell(f.get("fold")),
                            _cell(f.get("train_clips")),
                            _cell(f.get("held_clips")),
                            len(f.get("train_actors") or []),
                            len(f.get("held_actors") or []),
                            _cell(sel.get("lr")),
                            _cell(sel.get("epochs")),
                            _pct(sel.get("inner_accuracy")),
                            _pct(f.get("outer_accuracy")),
                        ),
                    )
                )
                trials += [
                    (
                        run["id"],
                        (
                            _cell(f.get("fold")),
                            _cell(t.get("lr")),
                            _cell(t.get("epochs")),
                            _pct(t.get("inner_accuracy")),
                        ),
                    )
                    for t in _records(f.get("trials"), source, f"folds[{i}].trials")
                ]
    _acted_tables(spec.corpus, name, summary, classes, confusion, folds, trials, out)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _acted_tables(
    corpus: str,
    name: str,
    summary: list[Row],
    classes: list[Row],
    confusion: list[tuple[str, Mapping[str, object]]],
    folds: list[Row],
    trials: list[Row],
    out: ContentResult,
) -> None:
    pct = [Column(f"{c} (%)", True) for c in ("accuracy", "balanced_accuracy", "macro_f1")]
    out.tables[name] = Table(
        f"{corpus}: fixed mapping (no corpus labels fitted) versus supervised adapter",
        (
            Column("protocol"),
            Column("n"),
            *pct,
            Column("actor-bootstrap CI low (%)"),
            Column("actor-bootstrap CI high (%)"),
            Column("trainable parameters"),
        ),
        tuple(summary),
        row_header="run",
    )
    if classes:
        out.tables[f"{name}_classes"] = Table(
            f"{corpus}: every class, recall and precision",
            (
                Column("class"),
                Column("support"),
                Column("recall (%)", True),
                Column("precision (%)", True),
            ),
            tuple(classes),
            row_header="run / protocol",
        )
    if confusion:
        heads = list(dict.fromkeys(p for _, row in confusion for p in row))
        out.tables[f"{name}_confusion"] = Table(
            f"{corpus}: confusion matrices (rows true label, columns predicted label)",
            tuple(Column(h) for h in heads),
            tuple((label, tuple(_cell(row.get(h)) for h in heads)) for label, row in confusion),
            row_header="run / protocol / true label",
        )
    if folds:
        out.tables[f"{name}_folds"] = Table(
            f"{corpus}: supervised adapter's outer folds",
            tuple(
                Column(c)
                for c in (
                    "outer fold",
                    "train clips",
                    "test clips",
                    "train actors",
                    "test actors",
                    "selected lr",
                    "selected epochs",
                    "inner accuracy (%)",
                    "outer accuracy (%)",
                )
            ),
            tuple(folds),
            row_header="run",
        )
    if trials:
        out.tables[f"{name}_trials"] = Table(
            f"{corpus}: every inner-fold hyperparameter trial",
            tuple(
                Column(c)
                for c in (
                    "outer fold",
                    "candidate lr",
                    "candidate epochs",
                    "mean inner accuracy (%)",
                )
            ),
            tuple(trials),
            row_header="run",
        )


def _history(runs: list[ProbeRun], spec: HistorySpec, out: ContentResult) -> None:
    rows, series, xs = [], [], []
    seen: set[str] = set()
    for run in runs:
        doc, source = _document(run, spec.split)
        if not isinstance(doc, list):
            continue
        points: dict[str, float | None] = {}
        for line in doc:
            x = _cell(_field(line, spec.x))
            # y = "a|b": a where the line records it, else b (two pipelines' spellings)
            found = [values_at(line, p, source, text=False) for p in spec.y.split("|")]
            y = next((v for v in found if isinstance(v, int | float)), None)
            rows.append((run["id"], (x, *(_cell(_field(line, c)) for c in spec.columns), y)))
            points[str(x)] = y
            if str(x) not in seen:  # a set: a history of 10**6 lines must not be quadratic
                seen.add(str(x))
                xs.append(str(x))
        series.append((run["id"], points))
    if not rows:
        return
    out.tables["history"] = Table(
        f"Every recorded validation result ({spec.split}: {spec.y} by {spec.x})",
        (Column(spec.x), *(Column(c) for c in spec.columns), Column(spec.y, False)),
        tuple(rows),
        row_header="run",
    )
    known = [v for _, p in series for v in p.values() if v is not None]
    if known:
        lo, hi = min(known), max(known)
        pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
        out.figures.append(
            (
                "Validation history",
                line_chart(
                    [Series(r, tuple(p.get(x) for x in xs)) for r, p in series],
                    chart_id="history",
                    title=f"{spec.y} by {spec.x}",
                    x_title=spec.x,
                    y_title=spec.y,
                    xlabels=xs,
                    lo=lo - pad,
                    hi=hi + pad,
                ),
            )
        )


def _class_labels(study: ProbeStudy, out: ContentResult, files: _Files) -> None:
    assert study.content.class_labels is not None
    alias, path = study.content.class_labels
    doc = files.doc(alias)
    names = None if doc is None else _field(doc, path)
    if names is None:
        return
    if not isinstance(names, list):
        raise UserError(
            f"is {type(names).__name__}; expected a list of class names",
            source=files.source(alias),
            key=path,
        )
    out.tables["class_labels"] = Table(
        f"Class labels ({study.content.files[alias].name}), by class index",
        (Column("label"),),
        tuple((str(i), (_cell(n),)) for i, n in enumerate(names)),
        row_header="class index",
    )


def _column(item: Any, column: str, spec: ListingSpec, source: str, at: str) -> Cell:
    """A record's column (``a|b``: a, else b); a ``numbers`` column's decimal text as its
    number, other text one line naming the file and key."""
    value = next((v for p in column.split("|") if (v := _field(item, p)) is not None), None)
    if column in spec.numbers and value is not None:
        return values_at(value, "", source, text=False, at=f"{at}.{column}")  # type: ignore[return-value]
    return _cell(value)


def _records_at(value: Any, source: str, at: str) -> list[Any]:
    if not isinstance(value, list):
        raise UserError(f"is {type(value).__name__}; expected a list of records", source=source,
                        key=at)  # fmt: skip
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise UserError(f"is {type(item).__name__}; expected a record (a table)",
                            source=source, key=f"{at}[{i}]")  # fmt: skip
    return value


def _listing(
    study: ProbeStudy, spec: ListingSpec, out: ContentResult, files: _Files, runs: list[ProbeRun]
) -> None:
    if spec.split is not None:
        _split_listing(spec, out, runs)
        return
    assert spec.file is not None  # checked when the study was read
    doc = files.doc(spec.file)
    items = None if doc is None else _field(doc, spec.at)
    if items is None:
        return
    source = files.source(spec.file)
    rows = []
    for i, item in enumerate(_records_at(items, source, spec.at)):
        cells = [_column(item, c, spec, source, f"{spec.at}[{i}]") for c in spec.columns]
        rows.append((str(cells[0]), tuple(cells[1:])))
    if rows:
        out.tables[f"listing_{slug(spec.name)}"] = Table(
            f"{spec.title} ({study.content.files[spec.file].name})",
            tuple(Column(c) for c in spec.columns[1:]),
            tuple(rows),
            row_header=spec.columns[0],
        )


def _split_listing(spec: ListingSpec, out: ContentResult, runs: list[ProbeRun]) -> None:
    """One table over every run that has the split: a row per record of each list the
    (wildcard) key path leads to, the keys ``*`` took in the column "where"."""
    assert spec.split is not None
    rows: list[tuple[str, tuple[Cell, ...]]] = []
    wild = "*" in spec.at
    for run in runs:
        doc, source = _document(run, spec.split)
        if doc is None:
            continue
        for at, took, value in matches(doc, spec.at):
            for i, item in enumerate(_records_at(value, source, at)):
                cells = tuple(_column(item, c, spec, source, f"{at}[{i}]") for c in spec.columns)
                rows.append((run["id"], ((" / ".join(took),) if wild else ()) + cells))
    if rows:
        out.tables[f"listing_{slug(spec.name)}"] = Table(
            f"{spec.title} (every run's {spec.split}: {spec.at})",
            (*((Column("where"),) if wild else ()), *(Column(c) for c in spec.columns)),
            tuple(rows),
            row_header="run",
        )


def content(study: ProbeStudy, runs: list[ProbeRun]) -> ContentResult:
    """Everything above that the study declares (nothing when it declares none of it)."""
    # Each aliased file is read and parsed once for every section (and the notes).
    files = _Files(study)
    out = ContentResult(files=files)
    c = study.content
    _derived(study, runs, out, files)
    if c.jobs is not None:
        _jobs(study, runs, out, c.jobs, files)
    for spec in c.acted:
        _acted(runs, spec, out)
    if c.history is not None:
        _history(runs, c.history, out)
    if c.class_labels is not None:
        _class_labels(study, out, files)
    for listing in c.listings:
        _listing(study, listing, out, files, runs)
    kinds = [r["attributes"].get("kind") for r in runs if r["attributes"].get("kind")]
    splits = [s for r in runs for s in r["documents"]]
    out.manifest = {
        "runs": len(runs),
        "run_ids": [r["id"] for r in runs],
        "complete_runs": sum(r["problem"] is None for r in runs),
        # The module's run counts (probe_runs, whisper_runs) by each run's kind, and its
        # evaluation counts (P3 retention, pre-finetune) by the runs' files of each split.
        "runs_by_kind": {k: kinds.count(k) for k in dict.fromkeys(kinds)},
        "split_files": {s: splits.count(s) for s in dict.fromkeys(splits)},
        "targets_per_run": None if study.completion is None else study.completion.targets,
        **out.manifest,
        "derived": {d["name"]: _shown(d, "") for d in out.derived if not d["per_run"]},
    }
    return out


def file_documents(result: ContentResult) -> dict[str, JsonValue]:
    """Every aliased file of the study as read (None where it is not there), for the bundle."""
    files = result.files
    return {} if files is None else {alias: files.doc(alias) for alias in files.paths}


def figures_html(result: ContentResult) -> list[tuple[str, str]]:
    """The figures as report sections: the history curves, then the heatmaps in one folded
    section (one per run and protocol)."""
    out = [(t, f"<div class='plot'>{h}</div>") for t, h in result.figures]
    if result.heatmaps:
        heat = "".join(f"<figure>{h}</figure>" for h in result.heatmaps)
        out.append(
            (
                "Confusion matrices (heatmaps)",
                "<details><summary>Every run and "
                f"protocol</summary><div class='heatmaps'>{heat}</div></details>",
            )
        )
    return out


def attach_notes(
    study: ProbeStudy, tables: Mapping[str, Table], files: _Files | None = None
) -> dict[str, Table]:
    """Each ``[[note]]`` under the table it explains: ``panel:<split>`` under each matching
    run's panel; a note with ``when`` only where that saved value is true. A note naming a
    table the report does not have is exit 2."""
    out = dict(tables)
    files = files if files is not None else _Files(study)
    for i, note in enumerate(study.content.notes):
        # The table is checked before `when`: a misnamed table must not pass unseen while
        # its saved flag happens to be false.
        names = _note_tables(study, out, note.table, note.runs, i)
        if note.when is not None:
            alias, _, path = note.when.partition(":")
            doc = files.doc(alias)
            # JSON true only: a saved "false" or "no" is text, and text is never false in Python.
            if doc is None or _field(doc, path) is not True:
                continue
        for n in names:
            out[n] = dataclasses.replace(out[n], notes=(*out[n].notes, note.text))
    return out


def _note_tables(
    study: ProbeStudy, out: Mapping[str, Table], table: str, runs: Mapping[str, Any], i: int
) -> list[str]:
    """The tables a note goes under; a table (or a panel split) the report lacks is exit 2."""
    if table.startswith("panel:"):
        split = table[len("panel:") :]
        every = [(r, f"panel_{slug(r.id)}_{slug(split)}") for r in study.runs]
        if not any(n in out for _, n in every):
            raise UserError(
                f"names the panel of split {split!r}, which no run's panel has",
                source=study.source,
                key=f"note[{i}].table",
            )
        matching = [(r, n) for r, n in every if n in out]
        return [n for r, n in matching if all(r.attributes.get(k) == v for k, v in runs.items())]
    if table in out:
        return [table]
    raise UserError(
        f"names table {table!r}, which the report does not have "
        f"(tables: {', '.join(sorted(n for n in out if not n.startswith('panel_')))})",
        source=study.source,
        key=f"note[{i}].table",
    )


def read_key_paths(study: ProbeStudy, documents: Mapping[str, Any]) -> list[str]:
    """The ``<split>:<key path>`` s this module reads of a run's files (``documents``: split ->
    :class:`~audiorepro.runner.kinds.probe.measured.Measurements`), so that the report's list of
    unused keys leaves them out."""
    c = study.content
    paths = [
        f"{r.name}:{r.path.split('[*]')[0]}"
        for d in c.derived
        for f in (d.formula, d.of)
        if f is not None
        for r in f.refs
        if r.name not in c.files and r.path.split("[*]")[0]
    ]
    for a in c.acted:
        paths += [a.fixed] if a.fixed else []
        if a.adapter:
            paths += [f"{a.adapter}:{k}" for k in ("metrics", "protocol", "parameters", "folds")]
    paths += [f"{sm.split}:{m}" for sm in c.summaries for m in sm.metrics or []]
    if c.history is not None and c.history.split in documents:
        lines = documents[c.history.split].document
        paths += [f"{c.history.split}:[{i}]" for i in range(len(lines))]
    for li in c.listings:  # a record-list table reads every list its key path leads to
        if li.split is not None and li.split in documents:
            found = matches(documents[li.split].document, li.at)
            paths += [f"{li.split}:{at}" for at, _, _ in found]
    return paths


__all__ = [
    "ContentResult",
    "Derived",
    "DerivedRecord",
    "attach_notes",
    "content",
    "figures_html",
    "read_key_paths",
]

"""The probe study kind through the one interface (:mod:`.kinds`): a thin adapter over the
probe stages of :mod:`.runs` and :mod:`.saved` (loading the runs, parity of saved
against recomputed numbers, leaders, tables, the bundle), in the order they always ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiorepro.checks.moves import (
    Identity,
    Moves,
    every,
    identity,
    in_cell,
    keys,
    pick,
    run_records,
)
from audiorepro.checks.verify import Summary, summarize
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import JsonObject
from audiorepro.render.html import render_probe_report
from audiorepro.render.tables import Table
from audiorepro.runner.kinds import (
    Better,
    BundlePart,
    Context,
    Identities,
    KindState,
    NumberRecord,
    NumberTier,
    StudyKind,
    cell_records,
    register_kind,
    rest_records,
)
from audiorepro.runner.kinds.probe.records import (
    TASK_METRICS,
    MetricParity,
    ProbeBundle,
    ProbeRun,
    ProbeVerification,
)
from audiorepro.runner.output.manifest import timestamp
from audiorepro.runner.output.outputs import PROBE_BUNDLE

if TYPE_CHECKING:
    from audiorepro.runner.kinds.probe.content import ContentResult
    from audiorepro.runner.kinds.probe.gates import GateResult
    from audiorepro.runner.kinds.probe.runs import FamilyMean, Leader
    from audiorepro.runner.kinds.probe.saved import SavedLeader
    from audiorepro.runner.kinds.probe.spec import ProbeStudy

# The steps import the probe's computation (.content, .gates, .runs, .saved: metrics, plots,
# markdown) and its spec (.spec: the study file's models) when they run: ``diff`` and
# ``verify OUT`` read a probe bundle with numbers/records/moves alone (issue 48 item 4).


@dataclass
class ProbeState(KindState):
    """A probe study between the steps of :class:`ProbeKind` (the runs as :mod:`.runs`
    builds them)."""

    study: ProbeStudy | None = None
    ctx: Context | None = None
    runs: list[ProbeRun] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    complete: bool = False
    parity: MetricParity | None = None
    leaders: list[Leader] = field(default_factory=list)
    family_means: list[FamilyMean] = field(default_factory=list)
    task_leaders: list[SavedLeader] = field(default_factory=list)
    #: Derived numbers, job records and the published module's other content.
    content: ContentResult | None = None


@register_kind
class ProbeKind(StudyKind["ProbeStudy", ProbeState]):  # the spec: imported to parse
    """Probe studies: prediction files recomputed, saved measurements read as they are."""

    name = "probe"
    bundle_schema = PROBE_BUNDLE
    run_checks = "completion rule, gates and parity with the predictions"

    def parse(self, doc: dict[str, Any], source: Path, strict: bool) -> ProbeStudy:
        """Its spec: :mod:`.spec`."""
        from audiorepro.runner.kinds.probe.spec import parse_probe

        return parse_probe(doc, source, strict)

    def load(self, study: ProbeStudy, ctx: Context) -> ProbeState:
        """The runs, their names checked (exit 2 before anything is written), what is
        missing and each gate: a study with any of these is incomplete."""
        from audiorepro.runner.kinds.probe.gates import check_gate
        from audiorepro.runner.kinds.probe.runs import _relative, _runs, check_output_names
        from audiorepro.runner.kinds.probe.saved import completion_problems

        runs = _runs(study)
        check_output_names(study, runs)
        state = ProbeState(study=study, ctx=ctx, runs=runs)
        state.failures = [r["problem"] for r in runs if r["problem"] is not None]
        state.failures += completion_problems(study, runs)
        state.gates = [check_gate(g, study.root or study.source.parent) for g in study.gates]
        state.failures += [
            f"gate '{g.name}' failed ({g.file}): {g.problem}" for g in state.gates if g.problem
        ]
        # A file the study names by an alias is one its numbers are derived from: without it
        # they would read "not recorded" with no word of why.
        state.failures += [
            f"file '{alias}' ({_relative(path, study.source.parent)}) is missing"
            for alias, path in study.content.files.items()
            if not path.is_file()
        ]
        state.complete = not state.failures
        return state

    def compute(self, state: ProbeState) -> None:
        from audiorepro.runner.kinds.probe.runs import family_means, leaders
        from audiorepro.runner.kinds.probe.saved import task_leaders

        assert state.study is not None
        present = [r for r in state.runs if r["report"] is not None]
        state.leaders, state.family_means = leaders(present), family_means(present)
        state.task_leaders = task_leaders(state.study, state.runs)

    def check_parity(self, state: ProbeState) -> None:
        from audiorepro.runner.kinds.probe.runs import _parity

        assert state.study is not None
        state.parity = parity = _parity(state.study, state.runs)
        # A saved number the predictions refute is the first thing an auditor must read.
        refuted = [
            f"saved {c['split']} number of run {c['run']} disagrees with its predictions: "
            f"{c['metric']} saved {c['saved']!r}, recomputed {c['recomputed']!r}"
            for c in parity["cells"]
            if not c["passed"]
        ] + [
            f"run {c['run']}: {c['metric']} recomputed {c['recomputed']!r}, the reference "
            f"definition gives {c['saved']!r}"
            for c in parity["reference"]
            if not c["passed"]
        ]
        state.failures[:0] = refuted

    def compare_published(self, state: ProbeState) -> Summary:
        from audiorepro.runner.kinds.probe.runs import _golden_rows

        assert state.study is not None
        return summarize(_golden_rows(state.study, state.runs))

    def tables(self, state: ProbeState, golden: Summary) -> dict[str, Table]:
        from audiorepro.runner.kinds.probe.content import attach_notes
        from audiorepro.runner.kinds.probe.content import content as module_content
        from audiorepro.runner.kinds.probe.runs import _tables, gate_table
        from audiorepro.runner.kinds.probe.saved import (
            parity_summary_table,
            parity_table,
            saved_tables,
            unused_keys,
        )

        assert state.study is not None and state.parity is not None
        study, parity = state.study, state.parity
        present = [r for r in state.runs if r["report"] is not None]
        tables = _tables(present, state.leaders, state.family_means, study.event_classes)
        tables.update(saved_tables(study, state.runs, state.task_leaders))
        if state.gates:
            tables["gates"] = gate_table(state.gates)
        state.content = module_content(study, state.runs)
        tables.update(state.content.tables)
        unused = unused_keys(study, state.runs)
        if unused is not None:
            tables["unused_keys"] = unused
        if parity["cells"] or parity["reference"]:
            tables["metric_parity_summary"] = parity_summary_table(parity)
            tables["metric_parity"] = parity_table(parity)
        noted = attach_notes(study, tables, state.content.files)
        # A table with no row says nothing (a saved-only study has no recomputed leaders or
        # family means): it is left out, not written as a bare header.
        return {name: t for name, t in noted.items() if t.rows}

    def bundle_part(
        self, state: ProbeState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        from audiorepro.runner.kinds.probe.content import figures_html, file_documents
        from audiorepro.runner.kinds.probe.runs import (
            _copy_saved,
            _narrative,
            _relative,
            run_record,
        )

        assert state.study is not None and state.ctx is not None and state.parity is not None
        assert state.content is not None
        study, parity, extra = state.study, state.parity, state.content
        _copy_saved(study, state.ctx.out)
        verification: ProbeVerification = {
            "probe_complete": state.complete,
            "failures": state.failures,
            "golden": golden,
            "rests_on": {
                "completion": len(state.runs) if study.completion is not None else 0,
                "gates": len(state.gates),
                "parity": len(parity["cells"]) + len(parity["reference"]),
                "published": len(golden["rows"]),
            },
        }
        if parity["cells"] or parity["reference"]:
            verification["metric_parity"] = parity
        bundle: ProbeBundle = {
            "schema": PROBE_BUNDLE,
            "kind": "probe",
            "study": {
                "name": study.name,
                "title": study.title,
                "sha256": sha256_file(study.source),
            },
            "runs": [run_record(r) for r in state.runs],
            # The typed records as the bundle's JSON objects (the same keys and values).
            "leaders": [t.record() for t in state.leaders],
            "family_means": [f.record() for f in state.family_means],
            "task_leaders": [t.record() for t in state.task_leaders],
            "verification": verification,
        }
        if extra.derived or extra.manifest.get("job_attempts") is not None:
            # The module's report and result manifest carry the time they were made. Here a
            # run's clock time goes into manifest.json only (same inputs, same bytes): the
            # bundle and the report carry it when it is an input, SOURCE_DATE_EPOCH.
            run_time = timestamp()
            if run_time["source"] == "SOURCE_DATE_EPOCH":
                extra.manifest["generated_utc"] = run_time["utc"]
            bundle["derived"], bundle["result_manifest"] = extra.derived, extra.manifest
        if study.content.files:
            bundle["study"]["files"] = {
                alias: {
                    "path": _relative(path, study.source.parent),
                    "sha256": sha256_file(path) if path.is_file() else None,
                }
                for alias, path in sorted(study.content.files.items())
            }
        if extra.derived or extra.manifest.get("job_attempts") is not None:
            bundle["files"] = file_documents(extra)
        figures = figures_html(extra)  # shown with the summaries, above the per-run panels
        report = render_probe_report(study, bundle, tables, _narrative(study), figures)
        return BundlePart(verification, report, bundle, [], inputs=_inputs(study))

    def verify(self, study: ProbeStudy, cache: Path) -> Summary:
        from audiorepro.runner.kinds.probe.runs import verify_probe

        return verify_probe(study)

    def numbers(self, bundle: JsonObject) -> Iterator[NumberRecord]:
        yield from cell_records(bundle, "runs", classify=_classify, identities=_identities)
        yield from rest_records(bundle, ("runs",), _classify_rest)

    def records(self, bundle: JsonObject) -> list[Identity]:
        """What each probe run depends on: its prediction file and saved measurement files
        (both hashes) and its recorded config; each aliased file (job records,
        normalization, workflow, ...) is a record of its own, named by its path, so that a
        derived number that moves names the file that changed. The probe bundle records no
        study settings: a change of them shows as unexplained (a missing record)."""
        out = run_records(None, None)
        for run in bundle["runs"]:
            value = pick(run, ("predictions_sha256", "saved_sha256", "saved_files", "config"))
            out.append(identity(str(run["id"]), "inputs", value))
        for record in ((bundle.get("study") or {}).get("files") or {}).values():
            out.append(identity(str(record["path"]), "inputs", record.get("sha256")))
        return out

    def moves(self, bundle: JsonObject, number: NumberRecord) -> Moves:
        return _moves(bundle, number.where)


_ALIAS = re.compile(r"\{\*?([A-Za-z_][A-Za-z0-9_-]*):")


def _file_key(rel: str) -> str:
    """The record key of a file a study names (its path as the manifest names it)."""
    return f"{rel}:inputs"


def _moves(bundle: JsonObject, where: tuple[str | int, ...]) -> Moves:
    """A probe number (tier a: float64 over the shipped files, order-fixed sums): a run's
    depends on its own files and config; a derived number on the files its formula names
    (and, per run, that run's); the result manifest, leaders and means on every run and
    every aliased file."""
    files = (bundle.get("study") or {}).get("files") or {}
    every_file = [_file_key(str(f["path"])) for f in files.values()]
    if in_cell(where, "runs"):
        rid = str(bundle["runs"][where[1]]["id"])
        return Moves(rid, "a", keys(rid, ("inputs",), tier="a"))
    if where[:2] == ("result_manifest", "derived") and len(where) > 2:
        # the manifest's copy of a derived number: on what that number reads
        at = [i for i, d in enumerate(bundle.get("derived") or []) if d.get("name") == where[2]]
        where = ("derived", *at[:1], "values", "")
    if where[0] == "derived" and len(where) > 1 and isinstance(where[1], int):
        entry = bundle["derived"][where[1]]
        text = f"{entry.get('formula', '')} {entry.get('of') or ''}"
        named = [_file_key(str(files[a]["path"])) for a in _ALIAS.findall(text) if a in files]
        values = entry.get("per_run") and len(where) > 3 and where[2] in ("values", "of_values")
        if values and str(where[3]) in {str(r["id"]) for r in bundle["runs"]}:
            rid = str(where[3])
            return Moves(rid, "a", keys(rid, ("inputs",), tier="a") | frozenset(named))
        return every(bundle, ("inputs",), named, key="runs")
    return every(bundle, ("inputs",), every_file, key="runs")


def _inputs(study: ProbeStudy) -> dict[str, str]:
    """The manifest's inputs: prediction files by name, saved files by their path from the
    study's folder (runs often share file names: runs/m1/test_metrics.json, runs/m2/...)."""
    from audiorepro.runner.kinds.probe.runs import _relative
    from audiorepro.runner.kinds.probe.spec import SavedFile

    inputs = {r.predictions.name: r.sha256 for r in study.runs if r.predictions and r.sha256}
    saved_refs = [ref for r in study.runs for ref in r.metrics.values()]
    saved_refs += [r.config for r in study.runs if r.config is not None]
    saved_refs += [ref for r in study.runs for ref in r.more_config]
    saved_refs += list(study.tree_files)
    saved_refs += [SavedFile(g.path, sha256_file(g.path)) for g in study.gates if g.path.is_file()]
    saved_refs += [SavedFile(s.path, s.sha256) for s in study.sections]
    inputs.update({_relative(ref.path, study.source.parent): ref.sha256 for ref in saved_refs})
    return inputs


#: Metric names whose direction is known: each task's headline metric, and the usual ones.
_DIRECTIONS: dict[str, Better] = {
    **{p.rpartition("/")[2]: ("higher" if up else "lower") for p, _, up in TASK_METRICS.values()},
    **dict.fromkeys(("mae", "rmse", "raw_mae", "start_mae", "end_mae"), "lower"),
    **dict.fromkeys(
        ("accuracy", "macro_f1", "pearson", "spearman", "f1", "precision", "recall"), "higher"
    ),
}


def _classify(run: JsonObject, below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A run's number: recomputed from its predictions or read from its saved files (tier a:
    float64 with order-fixed sums over the shipped files), its direction when the metric's
    name says it; a count (``n``) has none; a run's config and attributes are settings."""
    if below and below[0] in ("config", "attributes"):
        return None, None
    return _classify_rest(below)


def _classify_rest(below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A study-level number: the leaders' and family means' values (tier a)."""
    name = str(below[-1]) if below else ""
    return _DIRECTIONS.get(name), "a"


def _identities(run: JsonObject) -> Identities:
    saved = run.get("saved_sha256") or {}
    files = tuple(h for h in (run.get("predictions_sha256"), *saved.values()) if h)
    settings = tuple(f"{k}={v}" for k, v in sorted((run.get("attributes") or {}).items()))
    return Identities(settings=settings, files=files)

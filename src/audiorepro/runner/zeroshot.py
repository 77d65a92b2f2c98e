"""A zero-shot classification study -> its output folder.

Stages: the clips of the selected folds and one prompt per class (:mod:`audiorepro.formats.
esc50`, the study's template); per cell, audio embeddings per clip and text embeddings per
class prompt, written as a dump with class relevance (``dumps/<cell>.npz``: each clip
relevant to its class prompt); the zero-shot metrics (:mod:`audiorepro.metrics.zeroshot`, both
tie policies) and the ``laion-clap-zeroshot`` profile; the canonical ones against the
independent reference (:mod:`audiorepro.reference.zeroshot`, exact equality); published values;
tables, ``report.html``, ``bundle.json.gz``, ``verification.json`` and the manifest.

Each cell's dump is extracted once into the extraction cache (``OUT/cache/dumps``) and copied
from there; a rerun extracts nothing. With ``--executor slurm`` the missing cells are first
extracted as array tasks into the same cache (:mod:`audiorepro.runner.executors.zeroshot`).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Final, Literal, NotRequired

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.checks.verify import PASS, Summary, ValueRow, summarize, value_rows
from audiorepro.core.errors import UserError, WriteError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import (
    atomic_write_bytes,
    json_dumps,
    slug,
)
from audiorepro.core.progress import progress_bar
from audiorepro.formats.dump import Dump, load_dump
from audiorepro.metrics.retrieval import compute_retrieval
from audiorepro.metrics.zeroshot import (
    DEFINITIONS_VERSION,
    HIGHER_IS_BETTER,
    LAION_CLAP_METRICS,
    METRICS,
    compute_zeroshot,
    laion_clap_zeroshot,
)
from audiorepro.reference.zeroshot import reference_zeroshot_metrics
from audiorepro.render.html import selection_html, table_html
from audiorepro.render.tables import Column, Table, write_table
from audiorepro.runner.executors.zeroshot import MissingInputs, cached_cell, study_inputs
from audiorepro.runner.manifest import write_manifest
from audiorepro.runner.outputs import Outcome, gzip_bytes
from audiorepro.specs.selection import selection_record
from audiorepro.specs.study import ZeroshotStudy

ZEROSHOT_BUNDLE: Final = "audiorepro.zeroshot-bundle/1"


class ParityRow(TypedDict):
    """One zero-shot metric against the reference (or the dump's retrieval metric)."""

    metric: str
    harness: Any
    independent: Any
    equal: bool  #: exact equality: both sides are exact


class ZeroshotParityCell(TypedDict):
    cell: str
    rows: list[ParityRow]
    passed: bool


class ZeroshotParity(TypedDict):
    cells: list[ZeroshotParityCell]
    passed: bool


class ZeroshotVerification(TypedDict):
    """``verification.json`` of a zero-shot study."""

    metric_parity: ZeroshotParity
    metric_parity_passed: bool
    failures: list[str]
    golden: Summary


class ZeroshotBundleCell(TypedDict):
    id: str
    model: str
    dump: str  #: the dump's path in the output folder
    dump_sha256: str
    n_clips: int
    n_classes: int
    #: ``canonical`` (tie policy -> metrics) and ``laion-clap-zeroshot``
    metrics: dict[str, Any]
    model_meta: dict[str, Any]  #: the dump's meta_json


class ZeroshotBundle(TypedDict):
    """``bundle.json.gz`` of a zero-shot study (decompressed)."""

    schema: Literal["audiorepro.zeroshot-bundle/1"]
    study: dict[str, Any]  #: name, title, tie policy, definitions version, inputs
    cells: list[ZeroshotBundleCell]
    verification: ZeroshotVerification
    #: ``--cells``/``--device`` of a run of part of the study (absent: the whole study)
    selection: NotRequired[dict[str, Any]]


TIE_POLICIES = ("pessimistic", "optimistic")


def cell_metrics(
    audio: npt.NDArray[Any], text: npt.NDArray[Any], labels: npt.NDArray[np.int64]
) -> dict[str, Any]:
    """Canonical metrics under both tie policies and the laion-clap zero-shot profile."""
    return {
        "canonical": {
            tie: compute_zeroshot(audio, text, labels, tie_policy=tie)  # type: ignore[arg-type]
            for tie in TIE_POLICIES
        },
        "laion-clap-zeroshot": laion_clap_zeroshot(audio, text, labels),
    }


def reproduced_values(metrics: dict[str, Any], profile: str, tie_policy: str) -> dict[str, float]:
    if profile == "laion-clap-zeroshot":
        return dict(metrics["laion-clap-zeroshot"])
    canonical = metrics["canonical"][tie_policy]
    return {m: canonical[m] for m in METRICS}


#: Zero-shot metric -> the a2t retrieval metric of the class-relevance dump that must equal it.
SAME_AS_RETRIEVAL = {"accuracy": "r@1", "top5_accuracy": "r@5"}


def _parity(
    cell_id: str,
    dump: Dump,
    labels: npt.NDArray[np.int64],
    harness: dict[str, Any],
    tie_policy: Any,
) -> ZeroshotParityCell:
    """The zero-shot metrics against the independent reference (exactly equal) and against
    the retrieval metrics of the dump with class relevance (a2t r@1 is top-1 accuracy)."""
    audio, text = dump.audio_embeds, dump.text_embeds
    independent = reference_zeroshot_metrics(audio, text, labels, tie_policy)
    a2t = compute_retrieval(dump).metrics(tie_policy)["a2t"]
    rows: list[ParityRow] = []
    for m in (*METRICS, "per_class_recall"):
        ours, theirs = harness[m], independent[m]
        rows.append({"metric": m, "harness": ours, "independent": theirs, "equal": ours == theirs})
    for m, r in SAME_AS_RETRIEVAL.items():
        rows.append(
            {
                "metric": f"{m} = a2t/{r}",
                "harness": harness[m],
                "independent": a2t[r],
                "equal": harness[m] == a2t[r],
            }
        )
    return {"cell": cell_id, "rows": rows, "passed": all(r["equal"] for r in rows)}


def _golden(
    study: ZeroshotStudy, metrics: dict[str, dict[str, Any]], errors: dict[str, str]
) -> Summary:
    rows: list[ValueRow] = []
    for pub in study.published:
        reason = errors.get(pub.cell)
        reproduced = (
            {}
            if reason is not None
            else reproduced_values(metrics[pub.cell], pub.profile, pub.tie_policy)
        )
        rows += [
            ValueRow(**r, provenance=pub.provenance)
            for r in value_rows(
                pub.cell, pub.values, pub.tolerance, reproduced, reason, pub.profile
            )
        ]
    return summarize(rows)


def _tables(
    study: ZeroshotStudy, metrics: dict[str, dict[str, Any]], golden: Summary
) -> dict[str, Table]:
    names = (*METRICS, *LAION_CLAP_METRICS)
    rows: list[tuple[str, tuple[float | None, ...]]] = []
    for cell in study.cells:
        m = metrics.get(cell.id)
        if m is None:
            rows.append((cell.id, tuple(None for _ in names)))
            continue
        values = reproduced_values(m, "zeroshot", study.tie_policy)
        values.update(m["laion-clap-zeroshot"])
        rows.append((cell.id, tuple(values[n] for n in names)))
    ds = study.dataset
    main = Table(
        title=f"Zero-shot classification, {ds.name} (folds {', '.join(map(str, ds.folds))})",
        columns=tuple(Column(n, HIGHER_IS_BETTER[n]) for n in names),
        rows=tuple(rows),
        row_header="cell",
        notes=(
            f"prompt template {ds.template!r}; accuracy, top5_accuracy, balanced_accuracy "
            f"(zero-shot definitions version {DEFINITIONS_VERSION}, {study.tie_policy} ties); "
            "mean_rank ... mAP@10 as laion-clap computes them (laion-clap-zeroshot)",
        ),
    )
    published = Table(
        title="Published vs reproduced",
        columns=tuple(
            Column(n) for n in ("metric", "published", "reproduced", "delta", "tolerance", "status")
        ),
        rows=tuple(
            (
                r["cell"],
                (
                    r["metric"],
                    r["published"],
                    r["reproduced"],
                    r["delta"],
                    r["tolerance"],
                    r["status"],
                ),
            )
            for r in golden["rows"]
        ),
        row_header="cell",
        digits=6,
    )
    return {f"zeroshot_{slug(ds.name)}": main, "published": published}


def _report(study: ZeroshotStudy, tables: dict[str, Table], failures: list[str]) -> str:
    e = html.escape
    status = "PASSED" if not failures else f"FAILED ({len(failures)} problem(s))"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(study.title)}</title></head><body>",
        f"<h1>{e(study.title)}</h1>",
        f"<p><strong>{e(status)}</strong></p>",
    ]
    partial = selection_html({"selection": selection_record(study.selection)})
    if partial:  # absent for the whole study: the report's bytes unchanged
        parts.insert(-1, partial)
    if failures:
        parts.append("<ul>" + "".join(f"<li>{e(f)}</li>" for f in failures) + "</ul>")
    for i, (name, table) in enumerate(tables.items()):
        parts.append(table_html(table, f"t{i}-{slug(name)}"))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def run_zeroshot(
    study: ZeroshotStudy, out: Path, *, cache: Path | None = None, progress: bool = False
) -> Outcome:
    """Run every stage into ``out``; returns whether the study passed, and why not. The
    dumps come from the extraction cache ``cache`` (default ``out/cache/dumps``);
    ``progress``: a bar (or stage lines in a log) over the cells on stderr."""
    out = Path(out)
    cache = cache or out / "cache" / "dumps"
    inputs = study_inputs(study)
    failures: list[str] = []
    metrics: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    cells: list[ZeroshotBundleCell] = []
    parity: list[ZeroshotParityCell] = []
    for cell in progress_bar(list(study.cells), "zero-shot", progress, unit="cell"):
        try:
            cached = cached_cell(cell, inputs, cache)
        except WriteError:
            raise  # an output (the cache) that cannot be written stops the run: not a bad cell
        except UserError as exc:
            errors[cell.id] = str(exc)
            failures.append(f"cell {cell.id}: {exc}")
            continue
        dump_rel = f"dumps/{slug(cell.id)}.npz"
        atomic_write_bytes(out / dump_rel, cached.read_bytes())
        dump = load_dump(out / dump_rel)
        audio, text, meta = dump.audio_embeds, dump.text_embeds, dump.meta
        m = cell_metrics(audio, text, inputs.labels)
        metrics[cell.id] = m
        p = _parity(
            cell.id, dump, inputs.labels, m["canonical"][study.tie_policy], study.tie_policy
        )
        parity.append(p)
        if not p["passed"]:
            failures.append(f"metric parity failed for cell {cell.id}")
        cells.append(
            {
                "id": cell.id,
                "model": cell.model,
                "dump": dump_rel,
                "dump_sha256": sha256_file(out / dump_rel),
                "n_clips": int(audio.shape[0]),
                "n_classes": int(text.shape[0]),
                "metrics": m,
                "model_meta": meta,
            }
        )
    golden = _golden(study, metrics, errors)
    for row in golden["rows"]:
        if row["status"] != PASS:
            failures.append(
                f"published {row['cell']} {row['metric']}: {row['status']}"
                + (f" ({row['reason']})" if row["reason"] else "")
            )
    tables = _tables(study, metrics, golden)
    for name, table in tables.items():
        write_table(out / "tables", name, table)
    parity_passed = (
        bool(parity) and len(parity) == len(study.cells) and all(p["passed"] for p in parity)
    )
    verification: ZeroshotVerification = {
        "metric_parity": {"cells": parity, "passed": parity_passed},
        "metric_parity_passed": parity_passed,
        "failures": failures,
        "golden": golden,
    }
    bundle: ZeroshotBundle = {
        "schema": ZEROSHOT_BUNDLE,
        "study": {
            "name": study.name,
            "title": study.title,
            "tie_policy": study.tie_policy,
            "definitions_version": DEFINITIONS_VERSION,
            "inputs": inputs.record,
        },
        "cells": cells,
        "verification": verification,
    }
    selection = selection_record(study.selection)
    if selection is not None:
        bundle["selection"] = selection
    atomic_write_bytes(out / "verification.json", json_dumps(verification).encode())
    atomic_write_bytes(out / "report.html", _report(study, tables, failures).encode())
    atomic_write_bytes(out / "bundle.json.gz", gzip_bytes(json_dumps(bundle).encode()))
    write_manifest(
        out,
        study,
        [],
        inputs={study.dataset.metadata.name: inputs.record["metadata_sha256"]},
    )
    return {"passed": not failures, "failures": failures}


def verify_zeroshot(study: ZeroshotStudy, cache: Path) -> Summary:
    """Recompute only what the published values need (``audiorepro verify STUDY``), the
    dumps through the extraction cache ``cache``."""
    needed = {p.cell for p in study.published}
    metrics: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    try:
        inputs = study_inputs(study)
    except MissingInputs as exc:
        return _golden(study, metrics, {cell: str(exc) for cell in needed})
    for cell in study.cells:
        if cell.id not in needed:
            continue
        try:
            dump = load_dump(cached_cell(cell, inputs, cache))
        except WriteError:
            raise
        except UserError as exc:
            errors[cell.id] = str(exc)
            continue
        metrics[cell.id] = cell_metrics(dump.audio_embeds, dump.text_embeds, inputs.labels)
    return _golden(study, metrics, errors)

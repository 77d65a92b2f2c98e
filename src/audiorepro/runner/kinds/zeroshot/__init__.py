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
extracted as array tasks into the same cache (:mod:`audiorepro.runner.kinds.zeroshot.extraction`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, NotRequired

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

import audiorepro.metrics.profiles  # noqa: F401 (registers the built-in profiles)
from audiorepro.checks.moves import (
    CELL_CAUSES,
    Identity,
    Moves,
    extraction_records,
    identity,
    in_cell,
    keys,
    run_records,
    study_level,
)
from audiorepro.checks.verify import Summary, ValueRow, summarize, value_rows
from audiorepro.core.errors import UserError, WriteError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import JsonObject, JsonValue, atomic_write_bytes, slug
from audiorepro.core.progress import progress_bar
from audiorepro.formats.dump import Dump, load_dump
from audiorepro.metrics.profile_registry import (
    ProfileRequest,
    canonical_profile,
    is_canonical,
    registered_profiles,
)
from audiorepro.metrics.retrieval import compute_retrieval
from audiorepro.metrics.zeroshot import (
    DEFINITIONS_VERSION,
    HIGHER_IS_BETTER,
    METRICS,
    ZeroshotMetrics,
    compute_zeroshot,
    metric_values,
)
from audiorepro.reference.zeroshot import reference_zeroshot_metrics
from audiorepro.render.html import kind_report, selection_html
from audiorepro.render.tables import Column, Table, published_table
from audiorepro.runner.executors.extraction import StudyExtraction
from audiorepro.runner.kinds import (
    Better,
    BundlePart,
    Context,
    KindState,
    NumberRecord,
    NumberTier,
    StudyKind,
    cell_records,
    dump_identities,
    parity_verification,
    record_parity,
    register_kind,
    rest_records,
)
from audiorepro.runner.kinds.zeroshot.extraction import (
    InputsRecord,
    MissingInputs,
    ZeroshotInputs,
    cached_cell,
    study_inputs,
    zeroshot_extraction,
)
from audiorepro.runner.kinds.zeroshot.spec import ZeroshotStudy, parse_zeroshot
from audiorepro.specs.selection import SelectionRecord, selection_record

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


#: tie policy -> the canonical zero-shot metrics under it
CanonicalMetrics = dict[str, ZeroshotMetrics]
#: A cell's metrics as its bundle records them: ``canonical`` (:data:`CanonicalMetrics`) and
#: each peer profile's own metrics under the profile's name (``laion-clap-zeroshot``).
MetricsRecord = dict[str, CanonicalMetrics | dict[str, float]]


@dataclass(frozen=True)
class CellMetrics:
    """A cell's metrics: canonical under both tie policies, and every peer profile's."""

    canonical: CanonicalMetrics
    profiles: dict[str, dict[str, float]]  #: profile name -> its metrics, in registry order

    def record(self) -> MetricsRecord:
        """The metrics as the bundle records them."""
        out: MetricsRecord = {"canonical": self.canonical}
        out.update(self.profiles)
        return out


class ZeroshotBundleCell(TypedDict):
    id: str
    model: str
    dump: str  #: the dump's path in the output folder
    dump_sha256: str
    n_clips: int
    n_classes: int
    #: ``canonical`` (tie policy -> metrics) and ``laion-clap-zeroshot``
    metrics: MetricsRecord
    model_meta: dict[str, JsonValue]  #: the dump's meta_json


class ZeroshotStudyRecord(TypedDict):
    """The study in its bundle: name, title, tie policy, definitions version, inputs."""

    name: str
    title: str
    tie_policy: str
    definitions_version: int
    inputs: InputsRecord


class ZeroshotBundle(TypedDict):
    """``bundle.json.gz`` of a zero-shot study (decompressed)."""

    schema: Literal["audiorepro.zeroshot-bundle/1"]
    study: ZeroshotStudyRecord
    cells: list[ZeroshotBundleCell]
    verification: ZeroshotVerification
    #: ``--cells``/``--device`` of a run of part of the study (absent: the whole study)
    selection: NotRequired[SelectionRecord]


TIE_POLICIES = ("pessimistic", "optimistic")


def cell_metrics(dump: Dump, labels: npt.NDArray[np.int64]) -> CellMetrics:
    """Canonical metrics under both tie policies, then every zero-shot profile of the
    registry (``laion-clap-zeroshot``) under its own name, over the cell's dump (class
    relevance: each clip relevant to its class prompt)."""
    audio, text = dump.audio_embeds, dump.text_embeds
    canonical = {
        tie: compute_zeroshot(audio, text, labels, tie_policy=tie)  # type: ignore[arg-type]
        for tie in TIE_POLICIES
    }
    profiles = {}
    for profile in registered_profiles("zeroshot"):
        request = ProfileRequest(dump, None, "pessimistic", None)
        profiles[profile.name] = profile.compute(request).metrics
    return CellMetrics(canonical, profiles)


def reproduced_values(metrics: CellMetrics, profile: str, tie_policy: str) -> dict[str, float]:
    if not is_canonical(profile):  # a peer's profile: its own numbers, by its name
        return dict(metrics.profiles[profile])
    return metric_values(metrics.canonical[tie_policy])


#: Zero-shot metric -> the a2t retrieval metric of the class-relevance dump that must equal it.
SAME_AS_RETRIEVAL = {"accuracy": "r@1", "top5_accuracy": "r@5"}


def _parity(
    cell_id: str,
    dump: Dump,
    labels: npt.NDArray[np.int64],
    harness: ZeroshotMetrics,
    tie_policy: Any,
) -> ZeroshotParityCell:
    """The zero-shot metrics against the independent reference (exactly equal) and against
    the retrieval metrics of the dump with class relevance (a2t r@1 is top-1 accuracy)."""
    audio, text = dump.audio_embeds, dump.text_embeds
    independent = reference_zeroshot_metrics(audio, text, labels, tie_policy)
    a2t = compute_retrieval(dump).metrics(tie_policy)["a2t"]
    rows: list[ParityRow] = []
    named: Mapping[str, object] = harness  # by the metric's name, as the reference gives it
    for m in (*METRICS, "per_class_recall"):
        ours, theirs = named[m], independent[m]
        rows.append({"metric": m, "harness": ours, "independent": theirs, "equal": ours == theirs})
    for m, r in SAME_AS_RETRIEVAL.items():
        rows.append(
            {
                "metric": f"{m} = a2t/{r}",
                "harness": named[m],
                "independent": a2t[r],
                "equal": named[m] == a2t[r],
            }
        )
    return {"cell": cell_id, "rows": rows, "passed": all(r["equal"] for r in rows)}


def _golden(
    study: ZeroshotStudy, metrics: dict[str, CellMetrics], errors: dict[str, str]
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
    study: ZeroshotStudy, metrics: dict[str, CellMetrics], golden: Summary
) -> dict[str, Table]:
    peers = [p for p in registered_profiles("zeroshot") if not is_canonical(p.name)]
    names = (*METRICS, *(n for p in peers for n in p.metric_names or ()))
    rows: list[tuple[str, tuple[float | None, ...]]] = []
    for cell in study.cells:
        m = metrics.get(cell.id)
        if m is None:
            rows.append((cell.id, tuple(None for _ in names)))
            continue
        values = reproduced_values(m, canonical_profile("zeroshot"), study.tie_policy)
        for p in peers:
            values.update(m.profiles[p.name])
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
    published = published_table(golden["rows"])
    return {f"zeroshot_{slug(ds.name)}": main, "published": published}


def _report(study: ZeroshotStudy, tables: dict[str, Table], failures: list[str]) -> str:
    # A partial run's selection, before the verdict (absent for the whole study).
    partial = selection_html({"selection": selection_record(study.selection)})
    return kind_report(study.title, failures, tables, preamble=partial)


@dataclass
class ZeroshotState(KindState):
    """A zero-shot study between the steps of :class:`ZeroshotKind`."""

    study: ZeroshotStudy | None = None
    ctx: Context | None = None
    inputs: ZeroshotInputs | None = None
    dumps: dict[str, tuple[str, Dump]] = field(default_factory=dict)  #: cell -> (rel, dump)
    metrics: dict[str, CellMetrics] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    parity: list[ZeroshotParityCell] = field(default_factory=list)


@register_kind
class ZeroshotKind(StudyKind[ZeroshotStudy, ZeroshotState]):
    """Zero-shot classification: clips against one prompt per class, through the cache."""

    name = "zeroshot"
    title = "zero-shot"
    bundle_schema = ZEROSHOT_BUNDLE
    extracts = True
    parse = staticmethod(parse_zeroshot)  # its spec: .spec

    def extraction(self, study: ZeroshotStudy) -> StudyExtraction:
        return zeroshot_extraction(study)

    def load(self, study: ZeroshotStudy, ctx: Context) -> ZeroshotState:
        """Each cell's dump from the extraction cache, copied to ``dumps/<cell>.npz``."""
        inputs = study_inputs(study)
        state = ZeroshotState(study=study, ctx=ctx, inputs=inputs)
        cells = progress_bar(list(study.cells), "zero-shot", ctx.progress, unit="cell")
        for cell in cells:
            try:
                cached = cached_cell(cell, inputs, ctx.cache)
            except WriteError:
                raise  # an output (the cache) that cannot be written stops the run
            except UserError as exc:
                state.errors[cell.id] = str(exc)
                state.failures.append(f"cell {cell.id}: {exc}")
                continue
            dump_rel = f"dumps/{slug(cell.id)}.npz"
            atomic_write_bytes(ctx.out / dump_rel, cached.read_bytes())
            state.dumps[cell.id] = (dump_rel, load_dump(ctx.out / dump_rel))
        return state

    def compute(self, state: ZeroshotState) -> None:
        assert state.inputs is not None
        for cell_id, (_, dump) in state.dumps.items():
            state.metrics[cell_id] = cell_metrics(dump, state.inputs.labels)

    def check_parity(self, state: ZeroshotState) -> None:
        assert state.study is not None and state.inputs is not None
        tie = state.study.tie_policy
        for cell_id, (_, dump) in state.dumps.items():
            harness = state.metrics[cell_id].canonical[tie]
            p = _parity(cell_id, dump, state.inputs.labels, harness, tie)
            record_parity(state.parity, state.failures, cell_id, p)

    def compare_published(self, state: ZeroshotState) -> Summary:
        assert state.study is not None
        return _golden(state.study, state.metrics, state.errors)

    def tables(self, state: ZeroshotState, golden: Summary) -> dict[str, Table]:
        assert state.study is not None
        return _tables(state.study, state.metrics, golden)

    def bundle_part(
        self, state: ZeroshotState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        assert state.study is not None and state.ctx is not None and state.inputs is not None
        study, out, parity = state.study, state.ctx.out, state.parity
        cells: list[ZeroshotBundleCell] = []
        for cell in study.cells:
            if cell.id not in state.dumps:
                continue
            dump_rel, dump = state.dumps[cell.id]
            cells.append(
                {
                    "id": cell.id,
                    "model": cell.model,
                    "dump": dump_rel,
                    "dump_sha256": sha256_file(out / dump_rel),
                    "n_clips": int(dump.audio_embeds.shape[0]),
                    "n_classes": int(dump.text_embeds.shape[0]),
                    "metrics": state.metrics[cell.id].record(),
                    "model_meta": dump.meta,
                }
            )
        verification: ZeroshotVerification = parity_verification(
            parity, len(study.cells), state.failures, golden
        )
        bundle: ZeroshotBundle = {
            "schema": ZEROSHOT_BUNDLE,
            "study": {
                "name": study.name,
                "title": study.title,
                "tie_policy": study.tie_policy,
                "definitions_version": DEFINITIONS_VERSION,
                "inputs": state.inputs.record,
            },
            "cells": cells,
            "verification": verification,
        }
        selection = selection_record(study.selection)
        if selection is not None:
            bundle["selection"] = selection
        report = _report(study, tables, state.failures)
        metadata = {study.dataset.metadata.name: state.inputs.record["metadata_sha256"]}
        return BundlePart(verification, report, bundle, [], inputs=metadata)

    def verify(self, study: ZeroshotStudy, cache: Path) -> Summary:
        return verify_zeroshot(study, cache)

    def numbers(self, bundle: JsonObject) -> Iterator[NumberRecord]:
        yield from cell_records(bundle, "cells", classify=_classify, identities=dump_identities)
        yield from rest_records(bundle, ("cells",), _classify_rest)

    def records(self, bundle: JsonObject) -> list[Identity]:
        """What each zero-shot cell depends on: its dump's recorded meta (the prompt template
        as preprocessing), the evaluated clips (inputs); the run's tie policy."""
        study = bundle["study"]
        out = run_records({"tie_policy": study["tie_policy"]}, study["definitions_version"])
        record = dict(study["inputs"])
        clips = {k: v for k, v in record.items() if k != "template"}
        for cell in bundle["cells"]:
            cid = str(cell["id"])
            weights, code, pre, _, software = extraction_records(cid, cell["model_meta"])
            pre = identity(cid, "preprocessing", pre.value | {"template": record.get("template")})
            out += [weights, code, pre, identity(cid, "inputs", clips), software]
        return out

    def moves(self, bundle: JsonObject, number: NumberRecord) -> Moves:
        """A cell's metric: tier b (the embeddings are extracted here), the rank rule; its
        clip count: tier a, moved by its clips only; a study-level number follows the cell a
        table on its way names, else every cell."""
        where = number.where
        if not in_cell(where):
            return study_level(bundle, where, CELL_CAUSES, tier="b")
        cid = str(bundle["cells"][where[1]]["id"])
        if where[2] == "metrics":
            return Moves(cid, "b", keys(cid, CELL_CAUSES, tier="b"), "ranks")
        if where[2] == "n_clips":
            return Moves(cid, "a", keys(cid, ("inputs",), tier="a"))
        return Moves(cid, "a", keys(cid, CELL_CAUSES, tier="a"))


def _classify(cell: JsonObject, below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A cell's number: a metric (canonical or of the laion-clap profile; tier b: over
    CPU-extracted embeddings), or an input count or setting (no tier)."""
    if not below or below[0] != "metrics":
        return None, None
    # canonical/<tie>/<metric>[/<class>], laion-clap-zeroshot/<metric>
    at = 3 if is_canonical(str(below[1])) else 2
    name = str(below[at]) if len(below) > at else ""
    better = True if name == "per_class_recall" else HIGHER_IS_BETTER.get(name)
    return (None if better is None else ("higher" if better else "lower")), "b"


def _classify_rest(below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A study-level number: parity rows (of the metrics: tier b), counts and settings."""
    if "metric_parity" in below:
        return None, "b"
    return None, None


def verify_zeroshot(study: ZeroshotStudy, cache: Path) -> Summary:
    """Recompute only what the published values need (``audiorepro verify STUDY``), the
    dumps through the extraction cache ``cache``."""
    needed = {p.cell for p in study.published}
    metrics: dict[str, CellMetrics] = {}
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
        metrics[cell.id] = cell_metrics(dump, inputs.labels)
    return _golden(study, metrics, errors)

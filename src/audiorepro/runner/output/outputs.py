"""The outputs every study kind writes besides its tables and manifest: ``verification.json``,
``report.html`` and ``bundle.json.gz`` (sorted keys, gzip with no name and mtime 0), and their
typed records.

Each bundle shape has its own schema id: :data:`RETRIEVAL_BUNDLE` and :data:`PROBE_BUNDLE`
(JSON Schemas in ``docs/schemas/``).
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, NotRequired

from typing_extensions import TypedDict

from audiorepro.checks.parity import ParityBlock
from audiorepro.checks.verify import Summary
from audiorepro.core.io import JsonValue, atomic_write_bytes, json_dumps
from audiorepro.formats.dump import EmptyPolicy, GainLevels
from audiorepro.metrics.probe import ProbeReport
from audiorepro.metrics.retrieval import TiePolicy, TieSummary
from audiorepro.models.identity import IdentityBlock
from audiorepro.specs.measurements import Measurements
from audiorepro.specs.selection import SelectionRecord

RETRIEVAL_BUNDLE: Final = "audiorepro.bundle/1"
PROBE_BUNDLE: Final = "audiorepro.probe-bundle/1"


class RetrievalVerification(TypedDict):
    """``verification.json`` of a retrieval study (the published structure, then ours)."""

    metric_parity: ParityBlock
    #: The first identity check (the published structure has one), or None.
    checkpoint_identity: IdentityBlock | None
    checkpoint_identities: list[IdentityBlock]
    metric_parity_passed: bool
    cross_pipeline_comparable: bool
    failures: list[str]
    golden: Summary


class ParityCell(TypedDict):
    """One saved probe number against the number recomputed from the same run's predictions."""

    run: str
    split: str
    metric: str  #: the recomputed report path (``regression/valence/mae``)
    saved: float | None
    recomputed: float | None
    abs_delta: float | None  #: None when either side is undefined
    tolerance: float  #: 0 for counts: they must match exactly
    passed: bool


class MetricParity(TypedDict):
    """Saved vs recomputed numbers of every run with both, and the reference check."""

    passed: bool
    cells: list[ParityCell]
    #: recomputed numbers against :mod:`audiorepro.reference.probe` (independent definitions)
    reference: list[ParityCell]


class RestsOn(TypedDict):
    """What a probe study's verdict rests on, each a count of checks made: the declared runs
    held to a completion rule, the gates, the saved and recomputed numbers compared (parity
    with the predictions and with the reference definitions) and the published values."""

    completion: int
    gates: int
    parity: int
    published: int


class ProbeVerification(TypedDict):
    """``verification.json`` of a probe study."""

    probe_complete: bool
    failures: list[str]
    golden: Summary
    metric_parity: NotRequired[MetricParity]
    rests_on: NotRequired[RestsOn]


class Outcome(TypedDict):
    """What a run says to its caller: passed, and why not."""

    passed: bool
    failures: list[str]
    #: Slurm array tasks failed: nothing was computed (the failures name the tasks).
    executor_failed: NotRequired[bool]


class BootstrapRecord(TypedDict):
    resamples: int
    seed: int
    level: float


class RetrievalStudyRecord(TypedDict):
    name: str
    title: str
    sha256: str
    tie_policy: TiePolicy
    bootstrap: BootstrapRecord
    #: the study's cutoffs ``k`` (absent: none given, definitions 1.0's metrics)
    k: NotRequired[list[int]]
    #: the study's policy for queries without a relevant item (absent: none, they are refused)
    empty_queries: NotRequired[EmptyPolicy]


class RankHistogram(TypedDict):
    """Counts of queries by the position of their first relevant item, in bins."""

    bins: list[str]
    counts: list[int]


class PairedRecord(TypedDict):
    """A paired bootstrap of model ``a`` against ``b`` (the dataset's first cell) on the same
    queries: ``metric(a) - metric(b)``, its interval and the fraction of resamples in which
    ``a`` is not better."""

    dataset: str
    a: str
    b: str
    direction: str
    metric: str
    difference: float
    low: float
    high: float
    fraction_not_better: float


class BundleCell(TypedDict):
    """One cell: its identity, and (when its dump was there) every number of it."""

    id: str
    model: str
    dataset: str
    error: str | None
    dump_sha256: NotRequired[str | None]
    n_clips: NotRequired[int]
    n_captions: NotRequired[int]
    captions_per_clip: NotRequired[int | None]
    model_meta: NotRequired[dict[str, JsonValue]]
    #: direction -> hit rate at k = 1..10
    curves: NotRequired[dict[str, list[float]]]
    #: direction -> queries by the rank of their first relevant item
    rank_histogram: NotRequired[dict[str, RankHistogram]]
    #: direction -> metric -> value
    metrics: NotRequired[dict[str, dict[str, float]]]
    ties: NotRequired[dict[str, TieSummary]]
    #: only for a graded dump (``relevance_gains``): the gains' kind and the number of
    #: relevance entries at each gain (absent for binary relevance)
    graded_relevance: NotRequired[GainLevels]
    #: profile -> metric -> value
    profiles: NotRequired[dict[str, dict[str, float]]]
    #: direction -> metric -> [low, high] (95% bootstrap)
    intervals: NotRequired[dict[str, dict[str, list[float]]]]


class BundleStatus(TypedDict):
    passed: bool
    counts: dict[str, int]
    statuses: list[str]


class RetrievalBundle(TypedDict):
    """``bundle.json.gz`` of a retrieval study: every number and every input's identity."""

    schema: Literal["audiorepro.bundle/1"]
    definitions_version: int
    #: with a study's ``k`` only: 1 (definitions 1.1, which add measures and cutoffs)
    definitions_minor: NotRequired[int]
    study: RetrievalStudyRecord
    cells: list[BundleCell]
    paired_bootstrap: list[PairedRecord]
    verification: RetrievalVerification
    status: BundleStatus
    #: ``--cells``/``--device`` of a run of part of the study (absent: the whole study)
    selection: NotRequired[SelectionRecord]


class ProbeRunRecord(TypedDict):
    """A probe run as the bundle keeps it: :class:`ProbeRun` without ``documents``."""

    id: str
    model: str
    family: str
    corpus: str | None
    attributes: dict[str, str]  #: the study's attributes of the run
    predictions_sha256: str | None
    #: split -> SHA-256 and copy name of the saved file
    saved_sha256: dict[str, str]
    saved_files: dict[str, str]
    #: the report recomputed from the predictions (None: none, or they failed to load)
    report: ProbeReport | None
    #: split -> the saved numbers in audiorepro's measurement shape
    saved: dict[str, Any]
    config: dict[str, JsonValue] | None  #: the run's config files, merged
    problem: str | None
    #: split -> the saved keys no table used (set by ``kinds.probe.saved.unused_keys``)
    unused: NotRequired[dict[str, list[str]]]


class ProbeRun(ProbeRunRecord):
    """A probe run between the stages (loaded by ``runner.probe._runs``; read by the tables,
    leaders, parity, content and the bundle): the bundle keeps it without ``documents``."""

    #: split -> the whole saved document, for key paths (not in the bundle)
    documents: dict[str, Measurements]


class PlaceRecord(TypedDict):
    """One place of a task's ranking: the run's model and its value."""

    model: str
    value: float | int


class LeaderRecord(TypedDict):
    """A task's leading runs by its metric, best first (``kinds.probe.runs.Leader``)."""

    task: str
    metric: str
    higher_is_better: bool
    ranking: list[PlaceRecord]
    undefined: list[str]  #: the models whose value is undefined


class FamilyMeanRecord(TypedDict):
    """A family's mean normalized MAE and Spearman (``kinds.probe.runs.FamilyMean``)."""

    family: str
    normalized_mae: float | None
    spearman: float | None
    n_targets: int


class SavedLeaderRecord(TypedDict):
    """A ``[[leaders]]`` task over saved measurements (``kinds.probe.saved.SavedLeader``)."""

    task: str
    metric: str
    label: str
    higher_is_better: bool
    percent: bool
    best_candidate_run: str | None
    best_candidate_value: float | int | None
    baselines: dict[str, float | int | None]  #: run id -> value (None: not recorded)
    highest_measured_run: str | None


class AliasedFile(TypedDict):
    """A file the study names by an alias (``files``): its path from the study's folder (as
    the manifest's inputs name it) and its SHA-256 (None: missing)."""

    path: str
    sha256: str | None


class ProbeStudyRecord(TypedDict):
    name: str
    title: str
    sha256: str
    #: the study's aliased files (``files = {...}``), what its derived numbers and result
    #: manifest read: each an identity of those numbers (``audiorepro diff``)
    files: NotRequired[dict[str, AliasedFile]]


class DerivedRecord(TypedDict):
    """A study's ``[[derived]]`` number in the bundle: its formula(s) and value(s)."""

    name: str
    label: str
    formula: str
    #: the formula of the count it is shown over ("11/40"), or None
    of: str | None
    per_run: bool
    #: run id -> value (per run), or "" -> value (study-wide); None where not recorded
    values: dict[str, float | None]
    of_values: dict[str, float | None]


class ProbeBundle(TypedDict):
    """``bundle.json.gz`` of a probe study: every run's report, leaders, family means."""

    schema: Literal["audiorepro.probe-bundle/1"]
    kind: Literal["probe"]
    study: ProbeStudyRecord
    runs: list[ProbeRunRecord]
    leaders: list[LeaderRecord]
    family_means: list[FamilyMeanRecord]
    #: the study's ``[[leaders]]`` tasks over saved measurements
    task_leaders: NotRequired[list[SavedLeaderRecord]]
    #: the study's ``[[derived]]`` numbers with their formulas (runner/kinds/probe/content.py)
    derived: NotRequired[list[DerivedRecord]]
    #: counts, run ids and job attempts (runner/kinds/probe/content.py)
    result_manifest: NotRequired[dict[str, Any]]
    #: every file of the study's ``files`` as read (alias -> document): the backbones of
    #: study.json, the training normalization, the job records, the validation job's receipt
    files: NotRequired[dict[str, JsonValue]]
    verification: ProbeVerification


def write_outputs(
    out: Path,
    verification: Mapping[str, object],
    report_html: str,
    bundle: Mapping[str, object],
) -> None:
    """The three outputs every study kind writes besides its tables and manifest."""
    atomic_write_bytes(out / "verification.json", json_dumps(verification).encode())
    atomic_write_bytes(out / "report.html", report_html.encode())
    atomic_write_bytes(out / "bundle.json.gz", gzip_bytes(json_dumps(bundle).encode()))


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no name and mtime 0: the bytes depend only on ``data``."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()

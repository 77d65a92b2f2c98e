"""The probe kind's records: ``verification.json`` and ``bundle.json.gz`` (schema id
:data:`~audiorepro.runner.output.outputs.PROBE_BUNDLE`) of a probe study, typed."""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired

from typing_extensions import TypedDict

from audiorepro.checks.verify import Summary
from audiorepro.core.io import JsonValue

# the report's and the saved file's records alone (light): not the metrics nor the reading
from audiorepro.metrics.probe_records import ProbeReport
from audiorepro.runner.kinds.probe.measured import Measurements
from audiorepro.runner.output.outputs import ParityCell

#: Task kind -> (metric path inside a run's report section, label, higher is better). Here,
#: with the records, because ``diff`` reads the directions and imports none of the runs' code.
TASK_METRICS: Final[dict[str, tuple[str, str, bool]]] = {
    "regression": ("normalized_mae", "normalized MAE", False),
    "classification": ("balanced_accuracy", "balanced accuracy", True),
    "events": ("iou/0.5/f1", "event F1 at IoU 0.5", True),
    "vectors": ("mean_cosine", "mean cosine", True),
}


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

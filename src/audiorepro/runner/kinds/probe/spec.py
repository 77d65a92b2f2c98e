"""The probe kind's spec: the ``kind = "probe"`` study file's tables, their checks, the study
they load into, and its lock file (the frame it shares with every kind:
:mod:`audiorepro.specs.study`; the probe's content, gates, run patterns and derived numbers are
read by its neighbours ``content_spec.py``, ``gates.py``, ``runpattern.py`` and ``derived.py``).

A probe study (``kind = "probe"``) has ``[[run]]`` tables instead of cells and identity checks.
Each run has a prediction file (``predictions`` with its ``sha256``), saved measurements, or
both; its published values are named by their path in the probe report
(``regression/valence/mae``)::

    kind = "probe"
    credits = "Study code: CC BY 4.0 ..."     # optional: the credits and licence line
    config_fields = ["epochs", "parameters", "backbone_revision"]  # training/provenance table
    event_classes = ["laugh", "cry", "sigh"]  # optional: event class names by class index
    parity = { split = "test", tolerance = 1e-6 }   # optional: saved split the predictions give

    [families]                          # family name -> target-name prefix
    emotion = "emo_"

    [[run]]
    id = "probe/legacy/m1/linear"       # unique
    model = "M1 / LINEAR"               # the table row
    family = "frozen + linear"          # optional, default the model (model-family means)
    attributes = { phase = "legacy", domain = "held-out A", kind = "frozen probe" }
    predictions = "preds/m1_linear.npz" # optional, with its sha256
    sha256 = "<64 hex>"
    corpus = "crema-like"               # optional: the classification corpus
    n_targets = 30                      # optional: regression targets the predictions must have
    [run.metrics.test]                  # saved measurements by split (docs/measurements.md)
    file = "runs/m1_linear/test_metrics.json"
    sha256 = "<64 hex>"
    [run.config]                        # optional: the run's config JSON
    file = "runs/m1_linear/config.json"
    sha256 = "<64 hex>"

    [[leaders]]                         # a task of the leader table
    task = "Emotion targets"
    metric = "test/family/emotion/normalized_mae"   # <split>/<field>/... in the saved files
    direction = "lower"                 # or "higher"
    label = "mean normalized MAE"       # optional
    candidates = { kind = "frozen probe" }          # attribute filter of the candidate pool
    baselines = ["whisper/tuned/base"]  # run ids shown beside the best candidate
    percent = false                     # optional: show as a percentage

    [[section]]                         # narrative, in the order given
    title = "Caveats"
    file = "notes/caveats.md"
    sha256 = "<64 hex>"

    [completion]                        # declared runs and targets per run
    runs = ["probe/legacy/m1/linear"]
    targets = 192
    split = "test"                      # optional
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import parse_json, read_text
from audiorepro.formats import keypath
from audiorepro.runner.kinds.probe.content_spec import (
    ActedSpec,
    Content,
    HistorySpec,
    JobsSpec,
    ListingSpec,
    NoteSpec,
    SummarySpec,
    load_content,
)
from audiorepro.runner.kinds.probe.derived import DerivedSpec
from audiorepro.runner.kinds.probe.gates import Gate, GateSpec, check_gate_spec
from audiorepro.runner.kinds.probe.measurements import rename_steps
from audiorepro.runner.kinds.probe.runpattern import PatternRun, RunPatternSpec, expand, in_root
from audiorepro.specs.schema import KeyProblem, Spec, distinct_file_names, validate
from audiorepro.specs.study import (
    FileSha256,
    Published,
    PublishedSpec,
    RelativePath,
    StudyFile,
    present,
    published_table,
    required_path,
    study_path,
)

#: Published probe values are named by their path in the ``audiorepro.probe/1`` report.
PROBE_METRIC = re.compile(
    r"^(regression/[^/]+/(n|mae|normalized_mae|rmse|pearson|spearman)"
    r"|classification/(n|accuracy|balanced_accuracy|macro_f1)"
    r"|events/(frame_f1|start_mae_s|end_mae_s|oracle_span_class_accuracy"
    r"|detected_span_class_accuracy|iou/(0\.1|0\.3|0\.5)/(precision|recall|f1|matched))"
    r"|vectors/(n|mean_cosine)"
    r"|human/[^/]+/[^/]+/(n|prompts|positive_rate|mean_prompt_spearman"
    r"|balanced_accuracy_oracle_per_prompt|balanced_accuracy_oracle_overall"
    r"|balanced_accuracy_5fold_clip_grouped))$"
)
_PROBE_METRICS = (
    "regression/<target>/<mae|normalized_mae|rmse|pearson|spearman|n>, "
    "classification/<accuracy|balanced_accuracy|macro_f1|n>, "
    "events/<frame_f1|start_mae_s|end_mae_s|iou/<0.1|0.3|0.5>/<precision|recall|f1|matched>>, "
    "vectors/<mean_cosine|n> or human/<benchmark>/<cut>/<mean_prompt_spearman|"
    "balanced_accuracy_oracle_per_prompt|balanced_accuracy_oracle_overall|"
    "balanced_accuracy_5fold_clip_grouped|positive_rate|prompts|n>"
)


class FileRef(Spec):
    """A file the study reads, with the SHA-256 it must have."""

    file: RelativePath
    sha256: FileSha256


class RunSpec(Spec):
    """One probe run: its prediction file and/or its saved measurements, and its attributes."""

    # The rules ProbeStudyFile._something_to_read checks, for the JSON Schema.
    model_config = ConfigDict(
        json_schema_extra={
            "dependentRequired": {"predictions": ["sha256"], "sha256": ["predictions"]},
            "anyOf": [
                {"required": ["predictions"]},
                {"required": ["metrics"], "properties": {"metrics": {"minProperties": 1}}},
            ],
        }
    )

    id: str = Field(description="a unique run id")
    model: str = Field(description="the model's name (the table row)")
    family: str | None = Field(None, description="the model family (default: the model)")
    attributes: dict[str, str] = Field(
        default_factory=dict,
        description="a table of attribute -> value (phase, domain, kind, head, ...)",
    )
    predictions: RelativePath | None = None
    sha256: FileSha256 | None = None
    metrics: dict[str, FileRef] = Field(
        default_factory=dict,
        description="a table of split -> {file, sha256}: saved measurements (test, public, ...)",
    )
    config: FileRef | None = Field(None, description="a table {file, sha256}: the run's config")
    corpus: str | None = Field(None, description="the classification corpus's name")
    n_targets: int | None = Field(None, ge=0, description="the number of regression targets")


class LeaderSpec(Spec):
    """One task of the leader table: the best candidate run by a saved metric."""

    task: str = Field(description="the task's label")
    metric: str = Field(
        description="a saved-measurement path: '<split>/<field>/...' "
        "(per_score/<score>/<field>, family/<name>/<field>)"
    )
    direction: Literal["higher", "lower"] = Field(description="'higher' or 'lower' is better")
    label: str | None = Field(None, description="how the metric is described in the table")
    candidates: dict[str, str] = Field(
        default_factory=dict, description="a table of attribute -> value a candidate must have"
    )
    baselines: list[str] = Field(default_factory=list, description="a list of run ids")
    percent: bool = Field(False, description="true to show the value as a percentage")


class SectionSpec(Spec):
    """A narrative section: a Markdown file rendered in the report, in the order given."""

    title: str = Field(description="the section's heading")
    file: RelativePath
    sha256: FileSha256


class CompletionSpec(Spec):
    """What a complete study has: the runs declared, the targets each has."""

    runs: list[str] = Field(default_factory=list, description="a list of expected run ids")
    targets: int | None = Field(None, ge=0, description="targets per run (per_score entries)")
    split: str = Field("test", description="the split whose targets are counted")
    exact: bool = Field(False, description="true: exactly `targets` per run, not at least")
    all_runs: bool = Field(False, description="true: every declared run is expected")


class ParitySpec(Spec):
    """Saved vs recomputed: which split the predictions reproduce, and the tolerance."""

    split: str = Field("test", description="the saved split the predictions reproduce")
    tolerance: float = Field(1e-6, ge=0, allow_inf_nan=False, description="a tolerance >= 0")


class ProbeStudyFile(StudyFile):
    """A probe study: runs of prediction files and published values of their metrics."""

    # The rule _something_to_read checks, for the JSON Schema.
    model_config = ConfigDict(
        json_schema_extra={"anyOf": [{"required": ["run"]}, {"required": ["runs"]}]}
    )

    kind: Literal["probe"] = Field(description="the study kind")
    run: list[RunSpec] = Field(
        default_factory=list, min_length=1, description="[[run]] tables (or [[runs]])"
    )
    root: RelativePath | None = Field(
        None, description="the study's tree, relative to the study file ([[runs]] patterns)"
    )
    runs: list[RunPatternSpec] = Field(
        default_factory=list,
        min_length=1,
        description="[[runs]] tables: runs declared by a path pattern",
    )
    study_dir: RelativePath | None = Field(
        None,
        description="a folder under root that patterns, files, gates and models are relative to",
    )
    rename: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="split -> key path -> new key name, for every run"
    )
    lock: RelativePath | None = Field(
        None, description="a lock file (audiorepro lock) pinning every saved file's SHA-256"
    )
    gate: list[GateSpec] = Field(
        default_factory=list, description="[[gate]] tables: conditions on the job records"
    )
    # Tree files, derived numbers and the module's other content (content_spec.py).
    files: dict[str, RelativePath] = Field(
        default_factory=dict, description="a table of file alias -> a file under root"
    )
    derived: list[DerivedSpec] = Field(default_factory=list, description="[[derived]] tables")
    jobs: JobsSpec | None = Field(None, description="the job records and workflow (aliases)")
    acted: list[ActedSpec] = Field(default_factory=list, description="[[acted]] tables")
    history: HistorySpec | None = Field(None, description="the runs' validation history")
    class_labels: str | None = Field(None, description="alias:key path of the class names")
    note: list[NoteSpec] = Field(default_factory=list, description="[[note]] tables")
    listing: list[ListingSpec] = Field(default_factory=list, description="[[listing]] tables")
    summaries: list[SummarySpec] = Field(
        default_factory=list, description="cross-run tables of other splits (summary_<split>)"
    )
    published: list[PublishedSpec] = Field(
        default_factory=list, description="a list of [[published]] tables"
    )
    families: dict[str, str] = Field(
        default_factory=dict, description="a table of family name -> target-name prefix"
    )
    leaders: list[LeaderSpec] = Field(
        default_factory=list, description="a list of [[leaders]] tables"
    )
    section: list[SectionSpec] = Field(
        default_factory=list, description="a list of [[section]] tables"
    )
    completion: CompletionSpec | None = Field(None, description="a table {runs, targets}")
    parity: ParitySpec = Field(default_factory=ParitySpec, description="a table")
    credits: str | None = Field(None, description="the credits and licence line")
    event_classes: list[str] = Field(
        default_factory=list,
        description="a list of event class names, by class index (the predictions' ev_*_class)",
        json_schema_extra={"uniqueItems": True},
    )
    config_fields: list[str] = Field(
        default_factory=list,
        description="a list of [run.config] fields for the training and provenance table",
    )
    config_applies: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="config field -> run attributes: only those runs have it (others: a dash)",
    )

    @model_validator(mode="after")
    def _something_to_read(self) -> ProbeStudyFile:
        # Here, not in RunSpec: a KeyProblem's key path is from the file's top, and only this
        # level knows the run's index.
        if not self.run and not self.runs:
            raise KeyProblem(("run",), "is missing; a probe study needs [[run]] or [[runs]]")
        for i, r in enumerate(self.run):
            if (r.predictions is None) != (r.sha256 is None):
                raise KeyProblem(
                    ("run", i, "sha256" if r.sha256 is None else "predictions"),
                    "is missing; 'predictions' and 'sha256' go together",
                )
            if r.predictions is None and not r.metrics:
                raise KeyProblem(
                    ("run", i, "predictions"),
                    "is missing; a run needs predictions or saved measurements "
                    "([run.metrics.<split>])",
                )
        for i, name in enumerate(self.event_classes):
            if name in self.event_classes[:i]:
                raise KeyProblem(("event_classes", i), f"repeats class {name!r}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _no_retrieval_tables(cls, data: Any) -> Any:
        for key in ("cell", "identity", "profiles"):
            if isinstance(data, dict) and key in data:
                raise KeyProblem(
                    (key,), "is for retrieval studies; a probe study has [[run]] tables"
                )
        return data


@dataclass(frozen=True)
class SavedFile:
    """A saved file of a run (a split's measurements, or its config) and its SHA-256."""

    path: Path
    sha256: str
    #: a key path to the sub-table the split reads (``models.base``), or the whole file
    at: str | None = None
    #: keys renamed as the study declares (key path pattern -> new name)
    rename: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Run:
    """One probe run: a model's prediction file and/or its saved measurements."""

    id: str
    model: str
    family: str
    predictions: Path | None
    sha256: str | None
    corpus: str | None = None
    n_targets: int | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, SavedFile] = field(default_factory=dict)
    config: SavedFile | None = None
    #: further config files of a pattern run (merged after ``config``; the first key wins)
    more_config: tuple[SavedFile, ...] = ()


@dataclass(frozen=True)
class Leader:
    task: str
    metric: str
    higher: bool
    label: str
    candidates: dict[str, str]
    baselines: tuple[str, ...]
    percent: bool


@dataclass(frozen=True)
class Section:
    title: str
    path: Path
    sha256: str


@dataclass(frozen=True)
class Completion:
    runs: tuple[str, ...]
    targets: int | None
    split: str
    exact: bool = False


@dataclass(frozen=True)
class ProbeStudy:
    """A probe study, loaded: runs of prediction files and published values."""

    name: str
    title: str
    source: Path
    published: tuple[Published, ...]
    runs: tuple[Run, ...]
    kind: Literal["probe"] = "probe"
    families: dict[str, str] = field(default_factory=dict)
    leaders: tuple[Leader, ...] = ()
    sections: tuple[Section, ...] = ()
    completion: Completion | None = None
    parity_split: str = "test"
    parity_tolerance: float = 1e-6
    credits: str | None = None
    config_fields: tuple[str, ...] = ()
    #: config field -> the run attributes of the runs it applies to (the others show a dash)
    config_applies: dict[str, dict[str, str]] = field(default_factory=dict)
    event_classes: tuple[str, ...] = ()
    #: files of the study's tree read to declare its ``[[runs]]`` (hashed when read)
    tree_files: tuple[SavedFile, ...] = ()
    #: the lock file that pins every saved file (``audiorepro lock`` writes it)
    lock: Path | None = None
    #: the study's tree (``root``), and the gates over its job records
    root: Path | None = None
    gates: tuple[Gate, ...] = ()
    #: tree files, derived numbers, job records, acted classifiers, history, notes
    content: Content = field(default_factory=Content)


def _saved(source: Path, key: str, ref: FileRef, strict: bool) -> SavedFile:
    # Like predictions: a missing file is an incomplete study (the runner's exit 1); a file
    # that is there with another hash is a wrong input (exit 2).
    path = required_path(source, f"{key}.file", ref.file, must_exist=False)
    if strict and present(path) and sha256_file(path) != ref.sha256:
        raise UserError(
            f"{path.name} has SHA-256 {sha256_file(path)}, the study expects {ref.sha256}",
            source=source,
            key=f"{key}.sha256",
        )
    return SavedFile(path=path, sha256=ref.sha256)


def _saved_path(metric: str, source: Path, key: str) -> None:
    """A saved-measurement path as a user writes it: ``<split>/<field>/...``, or
    ``<split>:<key path>`` with a key path that parses (:mod:`audiorepro.formats.keypath`)."""
    cut = min((i for i in (metric.find("/"), metric.find(":")) if i >= 0), default=-1)
    if cut <= 0:
        raise UserError(
            "expected a saved-measurement path '<split>/<field>/...' or '<split>:<key path>'",
            source=source,
            key=key,
        )
    if metric[cut] == ":":
        try:
            keypath.parse(metric[cut + 1 :])
        except keypath.KeyPathError as exc:
            raise UserError(
                f"{exc}; expected '<split>:<key path>'", source=source, key=key
            ) from None


def _found(path: Path) -> SavedFile:
    # No hash is typed for a pattern's file: the one found is recorded (a missing file is an
    # incomplete study, named by the runner).
    return SavedFile(path, sha256_file(path) if present(path) else "")


def _as_run(p: PatternRun) -> Run:
    config = [_found(c) for c in p.config]
    return Run(
        id=p.id,
        model=p.model,
        family=p.family,
        predictions=None,
        sha256=None,
        attributes=p.attributes,
        metrics={
            s: SavedFile(f.path, _found(f.path).sha256, f.at, f.rename)
            for s, f in p.metrics.items()
        },
        config=config[0] if config else None,
        more_config=tuple(config[1:]),
    )


def _pattern_runs(
    spec: ProbeStudyFile, source: Path, seen: set[str]
) -> tuple[list[Run], tuple[SavedFile, ...]]:
    """The runs every ``[[runs]]`` pattern declares (:mod:`.runpattern`), and the files of the
    tree read to declare them (``study.json``)."""
    root = required_path(source, "root", spec.root or ".", must_exist=True)
    base = _base(spec, root, source)
    runs = []
    tree = tuple(dict.fromkeys(_found(base / p.models.file) for p in spec.runs if p.models))
    _check_renames(spec, source)
    # An [[acted]] adapter split adapter_<x> is read from <x>_matched_adapter.json (the
    # module's name) in every run's folder unless a pattern's metrics name it.
    implied = {
        a.adapter: f"{a.adapter.removeprefix('adapter_')}_matched_adapter.json"
        for a in spec.acted
        if a.adapter is not None and a.adapter.startswith("adapter_")
    }
    for i, pattern in enumerate(spec.runs):
        for p in expand(pattern, root, source, f"runs[{i}]", base=base, implied=implied,
                        renames=spec.rename):  # fmt: skip
            if p.id in seen:
                raise UserError(f"declares run id {p.id!r} twice", source=source,
                                key=f"runs[{i}].id")  # fmt: skip
            seen.add(p.id)
            runs.append(_as_run(p))
    return runs, tree


def _base(spec: ProbeStudyFile, root: Path, source: Path) -> Path:
    """The folder patterns, files, gates and the model list are relative to: ``study_dir``
    under root (the module's study folder beside its sibling folders), else root."""
    if spec.study_dir is None:
        return root
    return in_root(root, root / spec.study_dir, source, "study_dir")


def _check_renames(spec: ProbeStudyFile, source: Path) -> None:
    for split, renames in spec.rename.items():
        for path, new in renames.items():
            try:
                rename_steps(path)
            except ValueError as exc:
                raise UserError(str(exc), source=source, key=f"rename.{split}") from None
            if not new or "." in new:
                raise UserError(f"renames {path!r} to {new!r}; expected a key without dots",
                                source=source, key=f"rename.{split}")  # fmt: skip


def _completion(c: CompletionSpec | None, runs: list[Run]) -> Completion | None:
    if c is None:
        return None
    expected = dict.fromkeys([*c.runs, *(r.id for r in runs if c.all_runs)])
    return Completion(tuple(expected), c.targets, c.split, c.exact)


def _check_leaders(spec: ProbeStudyFile, source: Path, seen: set[str]) -> None:
    """Each ``[[leaders]]`` task's baselines are runs, its metric a saved-measurement path."""
    for i, lead in enumerate(spec.leaders):
        for j, b in enumerate(lead.baselines):
            if b not in seen:
                raise UserError(
                    f"names {b!r}, which is not a run of this study",
                    source=source,
                    key=f"leaders[{i}].baselines[{j}]",
                )
        _saved_path(lead.metric, source, f"leaders[{i}].metric")


def _sections(spec: ProbeStudyFile, source: Path, strict: bool) -> tuple[Section, ...]:
    """The ``[[section]]`` files, each with the SHA-256 the study gives (checked when strict)."""
    sections = tuple(
        Section(
            title=s.title,
            path=required_path(source, f"section[{i}].file", s.file, must_exist=True),
            sha256=s.sha256,
        )
        for i, s in enumerate(spec.section)
    )
    for i, sec in enumerate(sections):
        if strict and sha256_file(sec.path) != sec.sha256:
            raise UserError(
                f"{sec.path.name} has SHA-256 {sha256_file(sec.path)}, the study expects "
                f"{sec.sha256}",
                source=source,
                key=f"section[{i}].sha256",
            )
    return sections


def _listed_runs(spec: ProbeStudyFile, source: Path, strict: bool, seen: set[str]) -> list[Run]:
    """The study's `[[run]]` entries, one by one (the `[[runs]]` patterns are `_pattern_runs`)."""
    runs = []
    for i, r in enumerate(spec.run):
        if r.id in seen:
            raise UserError(f"repeats run id {r.id!r}", source=source, key=f"run[{i}].id")
        seen.add(r.id)
        # A declared run whose file is missing is an incomplete study, reported by the
        # runner (exit 1), not a malformed one.
        predictions = study_path(source, f"run[{i}].predictions", r.predictions, must_exist=False)
        if (
            strict
            and predictions is not None
            and present(predictions)
            and sha256_file(predictions) != r.sha256
        ):
            raise UserError(
                f"predictions {predictions.name} have SHA-256 {sha256_file(predictions)}, "
                f"the study expects {r.sha256}",
                source=source,
                key=f"run[{i}].sha256",
            )
        runs.append(
            Run(
                id=r.id,
                model=r.model,
                family=r.family if r.family is not None else r.model,
                predictions=predictions,
                sha256=r.sha256,
                corpus=r.corpus,
                n_targets=r.n_targets,
                attributes=dict(r.attributes),
                metrics={
                    split: _saved(source, f"run[{i}].metrics.{split}", ref, strict)
                    for split, ref in r.metrics.items()
                },
                config=None
                if r.config is None
                else _saved(source, f"run[{i}].config", r.config, strict),
            )
        )
    return runs


def _config_applies(
    spec: ProbeStudyFile, runs: list[Run], source: Path
) -> dict[str, dict[str, str]]:
    """``config_applies``: each field one of ``config_fields``, each attribute one some run has
    (a filter no run could match would hide every value behind a dash)."""
    names = {a for r in runs for a in r.attributes}
    for name, where in spec.config_applies.items():
        if name not in spec.config_fields:
            raise UserError(
                f"names {name!r}, which is not one of config_fields "
                f"({', '.join(spec.config_fields) or 'none'})",
                source=source,
                key=f"config_applies.{name}",
            )
        for attr in where:
            if attr not in names:
                raise UserError(
                    f"names attribute {attr!r}, which no run has "
                    f"(attributes: {', '.join(sorted(names)) or 'none'})",
                    source=source,
                    key=f"config_applies.{name}.{attr}",
                )
    return {k: dict(v) for k, v in spec.config_applies.items()}


def _probe_metric(profile: str, metric: str) -> str | None:
    if PROBE_METRIC.match(metric):
        return None
    return f"unknown probe metric; expected {_PROBE_METRICS}"


def parse_probe(doc: dict[str, Any], source: Path, strict: bool) -> ProbeStudy:
    spec = validate(ProbeStudyFile, doc, source=str(source))
    seen: set[str] = set()
    runs = _listed_runs(spec, source, strict, seen)
    declared, tree_files = _pattern_runs(spec, source, seen)
    runs += declared
    # Corpus names and run ids name output files (classification_<corpus>, the copies under
    # measurements/<run>/): two that slug alike would overwrite each other.
    distinct_file_names(
        [(f"run[{i}].corpus", r.corpus) for i, r in enumerate(runs) if r.corpus is not None],
        source=str(source),
        what="a corpus name",
    )
    distinct_file_names(
        [(f"run[{i}].id", r.id) for i, r in enumerate(runs)], source=str(source), what="a run id"
    )
    published = tuple(
        published_table(
            p, i, source, seen, spec.tie_policy, what="run", metric_problem=_probe_metric
        )
        for i, p in enumerate(spec.published)
    )
    _check_leaders(spec, source, seen)
    sections = _sections(spec, source, strict)
    content = load_content(
        **{k: getattr(spec, k) for k in ("files", "derived", "jobs", "acted", "history")},
        class_labels=spec.class_labels,
        note=spec.note,
        listing=spec.listing,
        summaries=spec.summaries,
        root=required_path(source, "root", spec.root or ".", must_exist=False),
        base=_base(spec, required_path(source, "root", spec.root or ".", must_exist=False), source),
        splits={s for r in runs for s in r.metrics},
        source=source,
    )
    tree_files += tuple(SavedFile(p, h) for p, h in content.present_files())
    study = ProbeStudy(
        name=spec.name,
        title=spec.title if spec.title is not None else spec.name,
        source=source,
        published=published,
        runs=tuple(runs),
        families=dict(spec.families),
        leaders=tuple(
            Leader(
                task=lead.task,
                metric=lead.metric,
                higher=lead.direction == "higher",
                label=lead.label if lead.label is not None else lead.metric,
                candidates=dict(lead.candidates),
                baselines=tuple(lead.baselines),
                percent=lead.percent,
            )
            for lead in spec.leaders
        ),
        sections=sections,
        completion=_completion(spec.completion, runs),
        parity_split=spec.parity.split,
        parity_tolerance=spec.parity.tolerance,
        credits=spec.credits,
        config_fields=tuple(spec.config_fields),
        config_applies=_config_applies(spec, runs, source),
        event_classes=tuple(spec.event_classes),
        tree_files=tree_files,
        lock=study_path(source, "lock", spec.lock, must_exist=False),
        root=study_path(source, "root", spec.root or ".", must_exist=False),
        gates=_gates(spec, source),
        content=content,
    )
    if strict and study.lock is not None:
        check_lock(study)
    return study


def _gates(spec: ProbeStudyFile, source: Path) -> tuple[Gate, ...]:
    root = required_path(source, "root", spec.root or ".", must_exist=False)
    base = _base(spec, root, source)
    gates = []
    for i, g in enumerate(spec.gate):
        check_gate_spec(g, source, f"gate[{i}]")
        workflow = None
        if g.final_from is not None and g.final_from.file is not None:
            key = f"gate[{i}].final_from.file"
            workflow = in_root(root, base / g.final_from.file, source, key)
        path = in_root(root, base / g.file, source, f"gate[{i}].file")
        gates.append(Gate(g.name, path, g, workflow))
    return tuple(gates)


LOCK_SCHEMA = "audiorepro.lock/1"


def pinned_files(study: ProbeStudy) -> dict[str, str]:
    """Every saved file the study reads that is there (its runs' measurement and config
    files, the tree's ``study.json``, the gates' job records), by its path from the study's
    folder -> SHA-256."""
    refs = [ref for r in study.runs for ref in r.metrics.values()]
    refs += [ref for r in study.runs for ref in (r.config, *r.more_config) if ref is not None]
    refs += list(study.tree_files)
    refs += [SavedFile(g.path, "") for g in study.gates]
    refs += [SavedFile(g.workflow, "") for g in study.gates if g.workflow is not None]
    out = {}
    for ref in refs:
        if present(ref.path):
            rel = os.path.relpath(ref.path, study.source.parent)
            out[Path(rel).as_posix()] = ref.sha256 or sha256_file(ref.path)
    return dict(sorted(out.items()))


def check_lock(study: ProbeStudy) -> None:
    """Every saved file as the lock file pins it (one line, exit 2, naming the first that
    changed or that the lock does not pin)."""
    assert study.lock is not None
    if not study.lock.is_file():
        raise UserError(f"{study.lock.name} does not exist; write it with 'audiorepro lock "
                        f"{study.source.name}'", source=study.source, key="lock")  # fmt: skip
    doc = parse_json(read_text(study.lock, what="a lock file"), source=study.lock)
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("schema") != LOCK_SCHEMA or not isinstance(files, dict):
        raise UserError(
            f"expected a lock file {{schema = {LOCK_SCHEMA}, files}}", source=study.lock
        )
    for name, digest in pinned_files(study).items():
        if name not in files:
            raise UserError(f"{name} is not pinned; run 'audiorepro lock {study.source.name}' "
                            "to pin the files as they are now", source=study.lock)  # fmt: skip
        if files[name] != digest:
            raise UserError(f"{name} has SHA-256 {digest}, the lock file pins {files[name]}",
                            source=study.lock, key=f"files.{name}")  # fmt: skip

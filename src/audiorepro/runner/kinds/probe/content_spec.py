"""What a probe study declares beyond its runs: tree files, derived numbers, job records,
acted-emotion classifiers, a validation history, class labels and notes.

The published probe module's report shows numbers read from files beside the runs (the
training normalization, the class list, the workflow and Slurm records) and content of the
runs' files no measurement shape knows (per-class recall, confusion matrices, adapter folds,
``metrics.jsonl`` histories). A study names them with these keys (docs/probe-layout.md)::

    files = { norm = "release/training_normalization.json", jobs = "job_audit.json" }
    class_labels = "classes:names"           # a file alias and the key path of a list of names
    jobs = { file = "jobs", workflow = "workflow", completed = "updated_utc" }
    history = { split = "history", x = "epoch", y = "validation.loss" }

    [[acted]]
    corpus = "CREMA-D"
    fixed = "public:crema"                  # a fixed mapping: split and key path
    adapter = "adapter_crema"               # a supervised adapter: its split

    [[note]]
    table = "acted_crema-d"                 # the table it explains (panel:<split>: each run's)
    text = "..."
    when = "validation_job:publication_recovery"   # only when this saved value is true
    runs = { kind = "original encoder" }    # panel notes: only these runs'

    summaries = [{ split = "validation" }]  # a cross-run table of another split (summary_<split>)
    summaries = [{ split = "history", metrics = ["[epoch=3].validation.loss"] }]  # chosen numbers

    [[listing]]                             # a table of a list of records in a tree file
    name = "backbones"
    title = "Backbones, exact revisions and native feature widths"
    file = "study"
    at = "models"
    columns = ["id", "repo", "revision", "native_dim"]

Everything here is what a user writes: checked strictly when the study is read (an unknown
file alias or split is one line naming the key, exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.formats.keypath import KeyPathError, parse
from audiorepro.runner.kinds.probe.derived import Derived, DerivedSpec, load_derived
from audiorepro.runner.kinds.probe.gates import FinalIds
from audiorepro.runner.kinds.probe.measurements import kind_of, matches
from audiorepro.runner.kinds.probe.runpattern import in_root
from audiorepro.specs.schema import Spec, distinct_file_names

SLURM_COLUMNS = ("JobIDRaw", "JobName", "State", "ExitCode", "ElapsedRaw", "AllocTRES")


class JobsSpec(Spec):
    """``jobs``: the sacct-style job records and the workflow file (aliases of ``files``)."""

    file: str = Field(description="the alias of the job records file")
    at: str = Field("jobs", description="the key path of the list of attempts")
    final_by: str = Field("JobName", description="of attempts with one value, the last is final")
    columns: list[str] = Field(
        default_factory=lambda: list(SLURM_COLUMNS),
        description="the record fields the attempt table shows",
    )
    workflow: str | None = Field(None, description="the alias of the workflow file")
    completed: str = Field("updated_utc", description="the workflow's completion-time key path")
    state: str = Field("state", description="the workflow's state key path")
    gpu: str = Field("gres/gpu", description="the TRES kind counted for GPU-hours")
    final_from: FinalIds | None = Field(
        None,
        description="the final attempts by the ids the workflow record names (default: final_by)",
    )
    supplementary: str | None = Field(
        None, description="the alias of a supplementary job's record ({id, publication_recovery})"
    )


class ActedSpec(Spec):
    """``[[acted]]``: one acted-emotion corpus, its fixed mapping and supervised adapter."""

    corpus: str = Field(description="the corpus's name (tables acted_<corpus>...)")
    fixed: str | None = Field(None, description="split:key path of the fixed mapping's result")
    adapter: str | None = Field(None, description="the supervised adapter's split")
    fixed_protocol: str = Field(
        "Fixed taxonomy; no corpus labels fitted", description="the fixed mapping's protocol text"
    )


class HistorySpec(Spec):
    """``history``: a JSONL validation history per run, its x and y key paths."""

    split: str = Field("history", description="the runs' split holding the history")
    x: str = Field("epoch", description="the key path of each line's x (an epoch)")
    y: str = Field("validation.loss", description="the key path of each line's y")
    columns: list[str] = Field(
        default_factory=lambda: ["stage", "update", "validation.clips"],
        description="more key paths each row shows",
    )


class ListingSpec(Spec):
    """``[[listing]]``: a table of a list of records in a file of the tree (backbones ...)."""

    name: str = Field(min_length=1, description="the table's name (listing_<name>)")
    title: str = Field(description="the table's title")
    file: str | None = Field(None, description="the alias of the file (or split)")
    split: str | None = Field(None, description="a split of the runs: one table over every run")
    at: str = Field(
        description="the key path of the list; with split, ``*`` (every key) and ``[*]`` allowed"
    )
    columns: list[str] = Field(
        min_length=1,
        description="key paths of each record (a|b: a, else b); with file, the first is the row",
    )
    numbers: list[str] = Field(
        default_factory=list,
        description="columns that hold numbers: decimal text read as one, other text exit 2",
    )


class SummarySpec(Spec):
    """``summaries``: a cross-run table (``summary_<split>``) of one split of the runs that have
    it: the held-out summary (clips, frame and event F1, timing, span classes, speaker vectors,
    CPS MAE, as the primary split's ``burst_speaker``) or, with ``metrics``, the numbers at
    those key paths of each run's file."""

    split: str = Field(min_length=1, description="the runs' split summarized")
    metrics: list[str] | None = Field(
        None, min_length=1, description="key paths of the columns (default: the held-out summary)"
    )


class NoteSpec(Spec):
    """``[[note]]``: a note under the table it explains."""

    table: str = Field(description="a table's name, or panel:<split> (each run's panel)")
    text: str = Field(min_length=1, description="the note")
    when: str | None = Field(None, description="alias:key path; shown only when it is true")
    runs: dict[str, str] = Field(default_factory=dict, description="panel notes: run attributes")


@dataclass(frozen=True)
class Content:
    """The declarations above, loaded: file aliases resolved under the study's root."""

    files: dict[str, Path] = field(default_factory=dict)
    derived: tuple[Derived, ...] = ()
    jobs: JobsSpec | None = None
    acted: tuple[ActedSpec, ...] = ()
    history: HistorySpec | None = None
    class_labels: tuple[str, str] | None = None
    notes: tuple[NoteSpec, ...] = ()
    listings: tuple[ListingSpec, ...] = ()
    summaries: tuple[SummarySpec, ...] = ()

    def present_files(self) -> list[tuple[Path, str]]:
        """The aliased files that are there, with their SHA-256 (for the manifest and lock)."""
        return [(p, sha256_file(p)) for p in self.files.values() if p.is_file()]


def _split_ref(text: str, known: set[str], source: Path, key: str) -> tuple[str, str]:
    """``name:key path`` with a known name and a key path that parses."""
    name, sep, path = text.partition(":")
    if not sep or name not in known:
        raise UserError(
            f"{text!r} names {name!r}; expected <name>:<key path> with a name of "
            f"{', '.join(sorted(known)) or 'none'}",
            source=source,
            key=key,
        )
    try:
        parse(path)
    except KeyPathError as exc:
        raise UserError(str(exc), source=source, key=key) from None
    return name, path


def _alias(name: str | None, files: Mapping[str, Path], source: Path, key: str) -> None:
    if name is not None and name not in files:
        raise UserError(
            f"names {name!r}, which is not a file of 'files' "
            f"({', '.join(sorted(files)) or 'none'})",
            source=source,
            key=key,
        )


def load_content(
    *,
    files: Mapping[str, str],
    derived: list[DerivedSpec],
    jobs: JobsSpec | None,
    acted: list[ActedSpec],
    history: HistorySpec | None,
    class_labels: str | None,
    note: list[NoteSpec],
    listing: list[ListingSpec],
    root: Path,
    base: Path | None = None,
    summaries: Sequence[SummarySpec] = (),
    splits: set[str],
    source: Path,
) -> Content:
    """Check what the study declares against its file aliases and its runs' splits."""
    resolved: dict[str, Path] = {}
    for alias, rel in files.items():
        if alias in splits:
            raise UserError(
                f"file alias {alias!r} is also a split of a run",
                source=source,
                key=f"files.{alias}",
            )
        resolved[alias] = in_root(root, (base or root) / rel, source, f"files.{alias}")
    if jobs is not None:
        _alias(jobs.file, resolved, source, "jobs.file")
        _alias(jobs.workflow, resolved, source, "jobs.workflow")
        _alias(jobs.supplementary, resolved, source, "jobs.supplementary")
        if jobs.final_from is not None:
            _alias(jobs.final_from.file or jobs.workflow, resolved, source, "jobs.final_from.file")
            if (jobs.final_from.file or jobs.workflow) is None:
                raise UserError("names no workflow record (final_from.file or jobs.workflow)",
                                source=source, key="jobs.final_from")  # fmt: skip
    for what, names in (
        ("[[acted]] corpus name", [(f"acted[{i}].corpus", a.corpus) for i, a in enumerate(acted)]),
        ("[[listing]] name", [(f"listing[{i}].name", li.name) for i, li in enumerate(listing)]),
    ):
        # Each names tables (acted_<corpus>..., listing_<name>): one each, distinct files.
        seen: set[str] = set()
        for key, name in names:
            if name in seen:
                raise UserError(f"repeats {name!r}", source=source, key=key)
            seen.add(name)
        distinct_file_names(names, source=str(source), what=what)
    for i, a in enumerate(acted):
        if a.fixed is not None:
            _split_ref(a.fixed, splits, source, f"acted[{i}].fixed")
        if a.adapter is not None and a.adapter not in splits:
            raise UserError(
                f"names split {a.adapter!r}, which no run has",
                source=source,
                key=f"acted[{i}].adapter",
            )
    if history is not None:
        for path in [history.x, *history.y.split("|"), *history.columns]:
            try:
                parse(path)
            except KeyPathError as exc:
                raise UserError(str(exc), source=source, key="history") from None
    if history is not None and history.split not in splits:
        raise UserError(
            f"names split {history.split!r}, which no run has", source=source, key="history.split"
        )
    labels = None
    if class_labels is not None:
        labels = _split_ref(class_labels, set(resolved), source, "class_labels")
    for i, li in enumerate(listing):
        _check_listing(li, resolved, splits, source, f"listing[{i}]")
    for i, n in enumerate(note):
        if n.when is not None:
            _split_ref(n.when, set(resolved), source, f"note[{i}].when")
    _check_summaries(summaries, splits, source)
    return Content(
        files=resolved,
        derived=load_derived(derived, resolved, splits, source),
        jobs=jobs,
        acted=tuple(acted),
        history=history,
        class_labels=labels,
        notes=tuple(note),
        listings=tuple(listing),
        summaries=tuple(summaries),
    )


def _check_listing(
    li: ListingSpec, files: Mapping[str, Path], splits: set[str], source: Path, key: str
) -> None:
    """A listing reads one file alias or one split, its key paths parse, ``numbers`` are
    among its columns."""
    if (li.file is None) == (li.split is None):
        raise UserError("names a 'file' or a 'split' (one of them)", source=source, key=key)
    _alias(li.file, files, source, f"{key}.file")
    if li.split is not None and li.split not in splits:
        raise UserError(f"names split {li.split!r}, which no run has", source=source,
                        key=f"{key}.split")  # fmt: skip
    try:
        if li.split is not None:
            matches({}, li.at)
        else:
            parse(li.at)
        for column in li.columns:
            for path in column.split("|"):
                parse(path)
    except (KeyPathError, ValueError) as exc:
        raise UserError(str(exc), source=source, key=key) from None
    for j, column in enumerate(li.numbers):
        if column not in li.columns:
            raise UserError(f"names {column!r}, which is not one of columns", source=source,
                            key=f"{key}.numbers[{j}]")  # fmt: skip


def _check_summaries(summaries: Sequence[SummarySpec], splits: set[str], source: Path) -> None:
    """Each summary names a split some run has, once; its key paths parse; without ``metrics``
    the split has the held-out shape (the columns are its fields)."""
    seen: set[str] = set()
    for i, sm in enumerate(summaries):
        key = f"summaries[{i}]"
        if sm.split not in splits:
            raise UserError(
                f"names split {sm.split!r}, which no run has "
                f"(splits: {', '.join(sorted(splits)) or 'none'})",
                source=source,
                key=f"{key}.split",
            )
        if sm.split in seen:
            raise UserError(f"repeats split {sm.split!r}", source=source, key=f"{key}.split")
        seen.add(sm.split)
        if sm.metrics is None and kind_of(sm.split) != "held-out":
            raise UserError(
                f"split {sm.split!r} is a {kind_of(sm.split)} file; expected a held-out split "
                "(test, validation...) or a list of key paths in 'metrics'",
                source=source,
                key=f"{key}.metrics",
            )
        for j, path in enumerate(sm.metrics or []):
            try:
                parse(path)
            except KeyPathError as exc:
                raise UserError(str(exc), source=source, key=f"{key}.metrics[{j}]") from None

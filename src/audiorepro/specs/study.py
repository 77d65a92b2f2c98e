"""Study files (``audiorepro.study/1``, TOML): what ``audiorepro reproduce`` regenerates.

A study is cells of model x dataset, identity checks, and published values to verify::

    schema = "audiorepro.study/1"
    name = "demo"                       # [A-Za-z0-9._-]+
    title = "A short description"       # optional
    profiles = ["canonical", "laion-clap"]   # optional, default ["canonical"]
    tie_policy = "pessimistic"          # optional
    bootstrap = { resamples = 1000, seed = 0, level = 0.95 }   # optional

    [[cell]]
    id = "tiny-laion/fixture"           # unique
    model = "tiny-laion"                # the table row
    dataset = "fixture"                 # one table per dataset and direction
    dump = "dumps/x.npz"                # relative to the study file ...
    sha256 = "<64 hex>"                 # ... with the hash it must have
    # or, instead of dump/sha256, how to make it:
    # extract = { model = "tiny-laion", audio = "audio/", captions = "captions.csv",
    #             registry = "registry.toml", settings = { batch_size = 2 } }

    [[identity]]
    a = "tiny-hf"
    b = "tiny-laion"
    registry = "registry.toml"          # optional

    [[published]]
    cell = "tiny-laion/fixture"
    profile = "canonical"               # optional, default canonical
    tolerance = 1e-9
    provenance = "paper, table, URL, or the verification output it was copied from"
    values = { "t2a/r@1" = 0.5 }

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

A zero-shot classification study (``kind = "zeroshot"``) has one ``[dataset]`` (an audio
folder, ESC-50's metadata file with the folds to use, the prompt template) and ``[[cell]]``
tables of models; each clip is ranked against one prompt per class, and its published values
are zero-shot metrics (profile ``zeroshot``: accuracy, top5_accuracy, balanced_accuracy) or
laion-clap's names (profile ``laion-clap-zeroshot``: mean_rank, median_rank, R@1, R@5,
R@10, mAP@10)::

    kind = "zeroshot"
    [dataset]
    name = "esc50-fold1"                # the table's dataset name
    audio = "data/esc50/audio"          # relative to the study file
    metadata = "data/esc50/esc50.csv"   # ESC-50's meta/esc50.csv
    folds = [1]                         # the folds evaluated
    template = "This is a sound of {class}"   # one prompt per class: {class} once

    [[cell]]
    id = "630k-audioset-best/esc50-fold1"
    model = "630k-audioset-best"        # a model spec or registry name
    registry = "registry.toml"          # optional
    settings = { batch_size = 8 }       # optional: architecture and preprocessing
    device = "cuda"                     # optional, default cpu

A speaker-verification study (``kind = "speaker-verification"``) has ``[[cell]]`` tables of
clip embeddings (a dump, or every clip of an audio folder extracted by any encoder) and a trial
list (:mod:`audiorepro.formats.trials`); its published value is the equal error rate ``eer``::

    kind = "speaker-verification"
    [[cell]]
    id = "resemblyzer/speech"
    model = "resemblyzer"               # the table row
    trials = "speech/trials.csv"        # enrollment,test,target
    trials_sha256 = "<64 hex>"
    extract = { model = "resemblyzer", audio = "speech" }   # or dump = "...", sha256 = "..."

The kinds are declared once, as :class:`RetrievalStudyFile`, :class:`ProbeStudyFile`,
:class:`ZeroshotStudyFile`, :class:`LinearProbeStudyFile` and
:class:`SpeakerVerificationStudyFile`
(:mod:`audiorepro.specs.schema`; JSON Schema in ``docs/schemas/study.schema.json``).
:func:`load_study` checks everything before any work starts: unknown or missing keys, types,
unknown profile and metric names, duplicate or unknown cell ids, missing files, every dump's
SHA-256 against the study's, each extraction's caption file and clips
(:func:`audiorepro.formats.captions.load_inputs`), and names that would give two outputs the
same file name (datasets, corpora, run ids). Each problem is a
:class:`~audiorepro.core.errors.UserError` naming the file and the key (``cell[2].sha256``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import Field, field_validator

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import parse_toml, read_text
from audiorepro.metrics.retrieval import TiePolicy
from audiorepro.specs.hear_study import parse_hear_study
from audiorepro.specs.published import (
    Number,
    known_profile,
    profiles_schema,
    tolerance_problem,
)
from audiorepro.specs.schema import Spec, distinct_file_names

SCHEMA = "audiorepro.study/1"
#: The built-in kinds' names, in the order the ``kind`` key's error lists them (the schema's
#: vocabulary; each kind's spec is its own: :func:`register_spec`).
KINDS = ("retrieval", "probe", "zeroshot", "linear-probe", "speaker-verification", "hear")
#: The kind of a study file without a ``kind`` key.
DEFAULT_KIND = "retrieval"

# --- the file format (what a user writes) --------------------------------------------------

Name = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9._-]+$",
        description="the study's name: letters, digits, '.', '_' or '-'",
    ),
]
FileSha256 = Annotated[
    str,
    Field(pattern=r"^[0-9a-f]{64}$", description="the file's SHA-256: 64 lowercase hex digits"),
]
RelativePath = Annotated[str, Field(description="a path (relative to the study file)")]


class BootstrapSpec(Spec):
    """How the 95% intervals are drawn: resamples, seed, level."""

    resamples: int = Field(1000, ge=1, description="an integer >= 1")
    seed: int = Field(0, ge=0, lt=2**63, description="an integer in [0, 2**63)")
    level: float = Field(0.95, gt=0, lt=1, description="a level in (0, 1)")


#: The torch devices a study or ``--device`` may name (validated before any model loads).
DEVICE_PATTERN = r"^(cpu|cuda(:[0-9]+)?)$"


class PublishedSpec(Spec):
    """Published values of one cell (or run), with their tolerance and provenance."""

    cell: str = Field(description="the id of a cell (or run) of this study")
    profile: str = Field(
        "canonical", description="a profile name", json_schema_extra=profiles_schema
    )
    tie_policy: TiePolicy | None = Field(None, description="the tie policy of the values")
    tolerance: float = Field(ge=0, allow_inf_nan=False, description="a tolerance >= 0")
    provenance: str = Field(description="where the value was published")
    values: dict[str, Number] = Field(
        min_length=1, description="a table of metric -> published value"
    )
    n_clips: int | None = Field(
        None, ge=1, description="the clips of the dump the values were computed on"
    )
    n_captions: int | None = Field(
        None, ge=1, description="the captions of the dump the values were computed on"
    )

    _profile = field_validator("profile")(known_profile)


class StudyFile(Spec):
    schema_: Literal["audiorepro.study/1"] = Field(alias="schema", description="the format id")
    name: Name
    title: str | None = Field(None, description="a title")
    tie_policy: TiePolicy = Field("pessimistic", description="the tie policy of every metric")
    bootstrap: BootstrapSpec = Field(default_factory=BootstrapSpec, description="a table")


# --- the loaded study (paths resolved, defaults applied) -----------------------------------


@dataclass(frozen=True)
class Extraction:
    model: str
    audio: Path
    captions: Path
    registry: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    caption_selection: str | None = None


@dataclass(frozen=True)
class Cell:
    id: str
    model: str
    dataset: str
    dump: Path | None
    sha256: str | None
    extract: Extraction | None
    profiles: tuple[str, ...]


@dataclass(frozen=True)
class Published:
    cell: str
    profile: str
    tie_policy: TiePolicy
    tolerance: float
    provenance: str
    values: dict[str, float]
    #: The published dump's identity, where known: values compare only over the same.
    n_clips: int | None = None
    n_captions: int | None = None


@dataclass(frozen=True)
class ZeroshotCell:
    """A model to run over a kind's clips (a zero-shot cell; a linear-probe cell's extraction
    too): the one shape of 'a model, its registry, settings and device'."""

    id: str
    model: str
    registry: Path | None
    settings: dict[str, Any]
    device: str


@dataclass(frozen=True)
class Bootstrap:
    resamples: int = 1000
    seed: int = 0
    level: float = 0.95


@dataclass(frozen=True)
class Selection:
    """What part of a study a run ran (``--cells``) and on which device (``--device``); None
    fields were not given. Recorded in the bundle, the manifest and the report."""

    cells: str | None
    device: str | None
    #: The ids of the cells that ran, and of every cell of the study.
    ran: tuple[str, ...]
    of: tuple[str, ...]


class _OfCell(Protocol):
    @property
    def cell(self) -> str: ...


class Study(Protocol):
    """A loaded study of any kind, as the frame and the driver see it; each kind's own study
    (``RetrievalStudy``, ``ZeroshotStudy``, ...) has these and what its kind reads."""

    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def source(self) -> Path: ...
    @property
    def selection(self) -> Selection | None: ...
    @property
    def published(self) -> Sequence[_OfCell]: ...


class _HasCellId(Protocol):
    @property
    def id(self) -> str: ...


@runtime_checkable
class Selectable(Protocol):
    """A study a run can take part of (``--cells``) with its models on one device
    (``--device``): its kind says how (:func:`audiorepro.specs.selection.select`)."""

    @property
    def source(self) -> Path: ...
    @property
    def cells(self) -> Sequence[_HasCellId]: ...
    def selected(self, selection: Selection) -> Study:
        """The study of the cells ``selection`` ran, their models on its device."""
        ...


def dump_or_extract(
    dump: str | None, sha256: str | None, extract: bool, source: Path, where: str
) -> None:
    """A cell's embeddings come from exactly one of a dump (with its SHA-256) or an
    extraction, or one line naming the key."""
    if (dump is None) == (not extract):
        raise UserError(
            "give exactly one of 'dump' (with 'sha256') or 'extract'",
            source=source,
            key=f"{where}.dump",
        )
    if (dump is None) != (sha256 is None):
        raise UserError(
            "is missing; 'dump' and 'sha256' go together",
            source=source,
            key=f"{where}.{'sha256' if sha256 is None else 'dump'}",
        )


def check_hashes(
    files: Sequence[tuple[Path | None, str | None, str]], source: Path, where: str
) -> None:
    """Each file that is here has the SHA-256 the study states, or one line naming the key."""
    for path, digest, key in files:
        if path is not None and path.is_file() and sha256_file(path) != digest:
            raise UserError(
                f"{path.name} has SHA-256 {sha256_file(path)}, the study expects {digest}",
                source=source,
                key=f"{where}.{key}",
            )


class PublishedTable(Protocol):
    """A ``[[published]]`` table of a kind whose values belong to one cell and one profile
    (linear probe, speaker verification): what :func:`cell_published` reads."""

    @property
    def cell(self) -> str: ...
    @property
    def tolerance(self) -> float: ...
    @property
    def provenance(self) -> str: ...
    @property
    def values(self) -> Mapping[str, float]: ...


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


_IdSpec = TypeVar("_IdSpec", bound=_HasId)
_CellT = TypeVar("_CellT")


def unique_cells(
    source: Path, specs: Sequence[_IdSpec], make: Callable[[_IdSpec, int], _CellT]
) -> list[_CellT]:
    """Each ``[[cell]]`` of a study made by ``make`` (with its index); an id given twice, or
    two ids that would name one output file, is one line naming the key."""
    seen: set[str] = set()
    cells = []
    for i, c in enumerate(specs):
        if c.id in seen:
            raise UserError(f"repeats cell id {c.id!r}", source=source, key=f"cell[{i}].id")
        seen.add(c.id)
        cells.append(make(c, i))
    distinct_file_names(
        [(f"cell[{i}].id", c.id) for i, c in enumerate(specs)], source=str(source), what="a cell id"
    )
    return cells


def cell_published(
    source: Path,
    specs: Sequence[PublishedTable],
    cells: set[str],
    metric_problem: Callable[[str], str | None],
    profile: str,
    tie_policy: TiePolicy,
) -> tuple[Published, ...]:
    """Each ``[[published]]`` table of a study of cells: a cell of the study, metrics the kind
    computes (``metric_problem`` says why not), a tolerance that means something."""
    published = []
    for i, p in enumerate(specs):
        where = f"published[{i}]"
        if p.cell not in cells:
            raise UserError(
                f"names {p.cell!r}, which is not a cell of this study",
                source=source,
                key=f"{where}.cell",
            )
        for metric in p.values:
            problem = metric_problem(metric)
            if problem is not None:
                raise UserError(problem, source=source, key=f"{where}.values.{metric}")
        check_tolerance(dict(p.values), p.tolerance, source=source, where=where)
        values = dict(p.values)
        published.append(Published(p.cell, profile, tie_policy, p.tolerance, p.provenance, values))
    return tuple(published)


def present(path: Path) -> bool:
    """Whether something is at ``path``: a missing file makes a study incomplete (exit 1), but
    a folder, a FIFO or a symlink loop there is a wrong input, refused by the reader (exit 2)."""
    return path.exists() or path.is_symlink()


def study_path(source: Path, key: str, text: str | None, *, must_exist: bool) -> Path | None:
    if text is None:
        return None
    try:
        path: Path = (source.parent / text).resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError for a symlink loop
        raise UserError(
            f"{text!r} cannot be resolved (too many levels of symbolic links: a loop)",
            source=source,
            key=key,
        ) from None
    if must_exist and not path.exists():
        raise UserError(f"{text!r} does not exist (looked for {path})", source=source, key=key)
    return path


def required_path(source: Path, key: str, text: str, *, must_exist: bool) -> Path:
    path = study_path(source, key, text, must_exist=must_exist)
    assert path is not None
    return path


def check_tolerance(
    values: dict[str, float], tolerance: float, *, source: Path, where: str
) -> None:
    """A tolerance that means something for its metrics, values in their range
    (:func:`~audiorepro.specs.published.tolerance_problem`), else one line."""
    bad = tolerance_problem(values, tolerance)
    if bad is not None:
        raise UserError(bad[1], source=source, key=f"{where}.{bad[0]}")


def published_table(
    spec: PublishedSpec,
    i: int,
    source: Path,
    ids: set[str],
    tie: TiePolicy,
    *,
    what: str,
    metric_problem: Callable[[str, str], str | None],
) -> Published:
    """The ``[[published]]`` table ``i`` of a retrieval or probe study: of one of its ``ids``
    (a ``what``: cell or run), metrics the kind knows (``metric_problem(profile, metric)``
    says why not), a tolerance that means something."""
    where = f"published[{i}]"
    if spec.cell not in ids:
        raise UserError(
            f"names {spec.cell!r}, which is not a {what} of this study",
            source=source,
            key=f"{where}.cell",
        )
    for metric in spec.values:
        problem = metric_problem(spec.profile, metric)
        if problem is not None:
            raise UserError(problem, source=source, key=f"{where}.values.{metric}")
    check_tolerance(dict(spec.values), spec.tolerance, source=source, where=where)
    return Published(
        cell=spec.cell,
        profile=spec.profile,
        tie_policy=spec.tie_policy or tie,
        tolerance=spec.tolerance,
        provenance=spec.provenance,
        values=dict(spec.values),
        n_clips=getattr(spec, "n_clips", None),
        n_captions=getattr(spec, "n_captions", None),
    )


#: A study file's tables parsed and checked by its kind: (the file's document, its path,
#: strict) -> the kind's study. Each kind registers its own (its spec lives with its
#: computation: :func:`audiorepro.runner.kinds.register_kind`); the frame names none.
SpecParser = Callable[[dict[str, Any], Path, bool], Any]
_SPECS: dict[str, SpecParser] = {}
#: The module whose import registers the built-in kinds (each kind's spec beside its
#: computation, in ``runner/kinds/``): imported by name the first time a study names a kind
#: not registered yet, as pytest loads its built-in plugins by name. A study is loaded from
#: every layer above this one (checks, runner, api, cli); this name is the one way down to the
#: kinds, and tests/test_kind_homes.py holds it to that.
KIND_REGISTRY = "audiorepro.runner.study"


def register_spec(kind: str, parse: SpecParser | None) -> None:
    """The spec of study kind ``kind``: its parser, or None to remove it."""
    if parse is None:
        _SPECS.pop(kind, None)
    else:
        _SPECS[kind] = parse


def _registered(kind: object) -> SpecParser | None:
    if isinstance(kind, str) and kind not in _SPECS:
        importlib.import_module(KIND_REGISTRY)
    return _SPECS.get(kind) if isinstance(kind, str) else None


def parse_study(text: str, source: Path, *, strict: bool = True) -> Study:
    """Parse and validate a study. ``strict=False`` (for ``verify``) lets a dump be missing or
    differ from its hash: such a cell's values are then reported NOT VERIFIED, not an error."""
    doc = parse_toml(text, source=source)
    kind = doc.get("kind", DEFAULT_KIND)
    parse = _registered(kind)
    if parse is None:
        others = [k for k in _SPECS if k not in KINDS]
        raise UserError(
            f"is {kind!r}; expected one of {', '.join((*KINDS, *others))}",
            source=source,
            key="kind",
        )
    study: Study = parse(doc, source, strict)
    return study


def __getattr__(name: str) -> Any:
    """A name that moved to its kind's own spec module (``ZeroshotStudy``, ...), for the
    imports written before it moved: looked up in the registered kinds' spec modules."""
    if name.startswith("__"):
        raise AttributeError(name)
    importlib.import_module(KIND_REGISTRY)
    for parse in list(_SPECS.values()):
        module = sys.modules.get(getattr(parse, "__module__", ""))
        if module is not None and name in vars(module):
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_study(path: str | Path, *, strict: bool = True) -> Study:
    path = Path(path)
    return parse_study(read_text(path, what="a .toml study"), path.resolve(), strict=strict)


# The built-in kinds whose specs still live here (each moves beside its computation).
for _kind, _parse in (("hear", parse_hear_study),):
    register_spec(_kind, _parse)

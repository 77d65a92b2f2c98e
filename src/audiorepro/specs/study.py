"""Study files (``audiorepro.study/1``, TOML): the frame every study kind shares.

A study file names its kind (``kind = "..."``; without it, a retrieval study) and the tables
every kind has::

    schema = "audiorepro.study/1"
    name = "demo"                       # [A-Za-z0-9._-]+
    title = "A short description"       # optional
    kind = "retrieval"                  # optional: the study kind, default "retrieval"
    tie_policy = "pessimistic"          # optional
    bootstrap = { resamples = 1000, seed = 0, level = 0.95 }   # optional

    [[published]]                       # values to verify, of one cell (or run)
    cell = "tiny-laion/fixture"
    tolerance = 1e-9
    provenance = "paper, table, URL, or the verification output it was copied from"
    values = { "t2a/r@1" = 0.5 }

The rest of the file is its kind's: each kind's spec (its tables, their checks, the study they
load into) lives beside its computation, in ``runner/kinds/<kind>/spec.py``, and registers its
parser (:func:`register_spec`, through :func:`audiorepro.runner.kinds.register_kind`).
This module holds what they share: the common tables (:class:`StudyFile`,
:class:`PublishedSpec`), the loaded shapes (:class:`Published`, :class:`Cell`,
:class:`Selection`, the :class:`Study` protocol), the checks every kind makes the same way
(paths, file hashes, cell ids, tolerances) and :func:`load_study`, which hands the file to its
kind. Every problem is a :class:`~audiorepro.core.errors.UserError` naming the file and the key
(``cell[2].sha256``), before any work starts. JSON Schema: ``docs/schemas/study.schema.json``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import Field, field_validator

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_toml, read_text
from audiorepro.metrics.retrieval import TiePolicy
from audiorepro.specs.published import (
    Number,
    known_profile,
    profiles_schema,
    tolerance_problem,
)
from audiorepro.specs.schema import Spec

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


class HasId(Protocol):
    @property
    def id(self) -> str: ...


@runtime_checkable
class Selectable(Protocol):
    """A study a run can take part of (``--cells``) with its models on one device
    (``--device``): its kind says how (:func:`audiorepro.specs.selection.select`)."""

    @property
    def source(self) -> Path: ...
    @property
    def cells(self) -> Sequence[HasId]: ...
    def selected(self, selection: Selection) -> Study:
        """The study of the cells ``selection`` ran, their models on its device."""
        ...


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
#: computation: :func:`audiorepro.runner.kinds.register_kind`); the frame names none but
#: hear's, below.
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


# Kept from the type checker: a module ``__getattr__`` would make every name of this module
# look defined to mypy, and the package's own imports must name a kind's spec module.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A name that moved to its kind's own spec module (``ZeroshotStudy``, ...), for the
        imports written before it moved: looked up in the registered kinds' spec modules."""
        if name.startswith("__"):
            raise AttributeError(name)
        registry = importlib.import_module(KIND_REGISTRY)
        for module in registry.kind_spec_modules():
            if name in vars(module):
                return vars(module)[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_study(path: str | Path, *, strict: bool = True) -> Study:
    path = Path(path)
    return parse_study(read_text(path, what="a .toml study"), path.resolve(), strict=strict)

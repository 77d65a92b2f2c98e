"""The study kinds: one interface every kind implements, their registry, the one driver that
runs any kind, and one typed view of every number a run produces.

A kind (retrieval, probe, zero-shot, ...) is one folder: a :class:`StudyKind` subclass,
registered by name with :func:`register_kind`, beside its spec (``<kind>/spec.py``: the study
file's ``kind = "..."`` tables, their checks, the study they load into; registered with the
kind as its ``parse``; the frame every kind shares is :mod:`audiorepro.specs.study`). The
runner (:mod:`.study`) looks the kind up by the study's ``kind`` and runs it through
:func:`run_kind`, which owns what is common to every kind: the step order, the
published-value failures, writing the tables, the three outputs (``verification.json``,
``report.html``, ``bundle.json.gz``) and the manifest. Staging and publication, the extraction
cache, the executors and ``verify OUT`` stay in :mod:`.study`.

The steps, in order (lm-evaluation-harness' ``Task`` has the same shape)::

    load -> compute -> check_parity -> compare_published -> tables -> bundle_part

and ``numbers`` reads a bundle back as :class:`NumberRecord` s: every number, the same way
for every kind. What ``audiorepro diff`` asks of a kind (:class:`~audiorepro.checks.moves.
DiffRules`) is declared here too: ``records`` (what each cell recorded that its numbers
depend on) and ``moves`` (a number's tier and the records whose change can move it);
:func:`diff_kinds` hands the registered kinds to ``diff`` by the schema of their bundles.
"""

from __future__ import annotations

import functools
import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeAlias, TypeVar

from typing_extensions import TypedDict

from audiorepro.checks.moves import Identity, Moves

# The typed view's record and walk live with the checks that read it (``diff``); every kind
# here writes them.
from audiorepro.checks.numbers import Better as Better
from audiorepro.checks.numbers import Identities as Identities
from audiorepro.checks.numbers import NumberRecord as NumberRecord
from audiorepro.checks.numbers import NumberTier as NumberTier
from audiorepro.checks.numbers import numeric_leaves as numeric_leaves
from audiorepro.checks.numbers import readable as readable
from audiorepro.checks.verify import PASS, Summary
from audiorepro.core.errors import UserError
from audiorepro.core.io import JsonObject
from audiorepro.core.progress import progress_bar
from audiorepro.formats.dump import Dump
from audiorepro.render.tables import Table, write_table
from audiorepro.runner.output.manifest import write_manifest
from audiorepro.runner.output.outputs import Outcome, write_outputs
from audiorepro.specs.study import register_spec

if TYPE_CHECKING:  # the executors (and the model registry they name) load to run a study
    from audiorepro.runner.executors.extraction import StudyExtraction


@dataclass(frozen=True)
class Context:
    """Where a kind runs: its folder (in staging), the extraction cache, progress bars."""

    out: Path
    cache: Path
    progress: bool = False


@dataclass
class KindState:
    """What every kind's state carries between steps: the failures, in the order said."""

    failures: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BundlePart:
    """A kind's outputs besides its tables: ``verification.json``, ``report.html``,
    ``bundle.json.gz``, and what its manifest records (the dumps, the inputs' SHA-256)."""

    verification: Mapping[str, object]
    report_html: str
    bundle: Mapping[str, object]
    dumps: list[Dump] = field(default_factory=list)
    inputs: dict[str, str] | None = None


StudyT = TypeVar("StudyT")
StateT = TypeVar("StateT", bound=KindState)


class StudyKind(ABC, Generic[StudyT, StateT]):
    """The interface of a study kind; :func:`run_kind` calls the steps in order."""

    #: The study file's ``kind``.
    name: ClassVar[str]
    #: Whether its cells extract embeddings (through the extraction cache and the executors:
    #: the Slurm executor runs them as job arrays first).
    extracts: ClassVar[bool] = False
    #: Whether the driver shows a progress bar while it writes the tables.
    table_progress: ClassVar[bool] = False
    #: The ``schema`` of the bundle it writes (how a bundle read back finds its kind).
    bundle_schema: ClassVar[str] = ""
    #: What ``reproduce`` checks of the kind besides published values, said when ``verify
    #: STUDY`` has nothing to check.
    run_checks: ClassVar[str] = "metric parity"
    #: The kind in a sentence ("a zero-shot run"); its name when empty.
    title: ClassVar[str] = ""

    @property
    def label(self) -> str:
        return self.title or self.name

    def parse(self, doc: dict[str, Any], source: Path, strict: bool) -> StudyT:
        """A study file of this kind (its TOML document, its path) parsed and checked: each
        kind brings its own spec (``<kind>/spec.py``). Bad input: a UserError naming the
        file and key."""
        raise NotImplementedError(f"the {self.name} kind declares no spec of its own")

    def extraction(self, study: StudyT) -> StudyExtraction | None:
        """The cells it extracts, as the executors see them (None: it extracts nothing)."""
        return None

    @abstractmethod
    def load(self, study: StudyT, ctx: Context) -> StateT:
        """Load and check the inputs; a cell's problem is a failure, not an exception."""

    @abstractmethod
    def compute(self, state: StateT) -> None:
        """Every number of the kind."""

    @abstractmethod
    def check_parity(self, state: StateT) -> None:
        """The numbers against the independent reference; a mismatch is a failure."""

    @abstractmethod
    def compare_published(self, state: StateT) -> Summary:
        """One row per published value (PASS, FAIL, NOT VERIFIED).

        The kinds' bodies of this and :meth:`tables` look alike (hand the state's records to
        the kind's own ``_golden``/``_tables``) but are not one body: each kind's records are
        its own typed cells (a zero-shot cell's metrics by tie policy, a speaker cell's
        definitions, a linear-probe cell's folds), and the rows and tables read them by name.
        What they share is below: :func:`checks.verify.value_rows` words every row, and
        :func:`parity_verification` builds every per-cell parity record."""

    @abstractmethod
    def tables(self, state: StateT, golden: Summary) -> dict[str, Table]:
        """The tables, by file name, in the order written."""

    @abstractmethod
    def bundle_part(self, state: StateT, golden: Summary, tables: dict[str, Table]) -> BundlePart:
        """Verification, report and bundle (and any byte copies the kind writes itself)."""

    @abstractmethod
    def verify(self, study: StudyT, cache: Path) -> Summary:
        """Recompute only what the published values need (``audiorepro verify STUDY``)."""

    @abstractmethod
    def numbers(self, bundle: JsonObject) -> Iterator[NumberRecord]:
        """Every number of a bundle of this kind (decompressed ``bundle.json.gz``)."""

    @abstractmethod
    def records(self, bundle: JsonObject) -> list[Identity]:
        """What each cell (and the run) of a bundle recorded that its numbers depend on, each
        of one cause (weights, encoder code, preprocessing, inputs, ...): what ``diff``
        compares between two runs to name why a number moved."""

    @abstractmethod
    def moves(self, bundle: JsonObject, number: NumberRecord) -> Moves:
        """How ``diff`` compares ``number`` of ``bundle``: the cell it is shown under, its
        tier, the keys of the :meth:`records` whose change can move it, and how a tier-b
        tolerance is derived for it."""


def input_name(path: Path, study: Path) -> str:
    """How the manifest's ``inputs`` names a file a study reads: its path from the study
    file's folder (POSIX), so that two cells' ``trials.csv`` in two folders are two inputs
    (a bare file name recorded only the last one read).

    >>> input_name(Path("/s/a/trials.csv"), Path("/s/study.toml"))
    'a/trials.csv'
    >>> input_name(Path("/t/trials.csv"), Path("/s/study.toml"))
    '../t/trials.csv'
    """
    return Path(os.path.relpath(path, study.parent)).as_posix()


def golden_failures(golden: Summary) -> list[str]:
    """One failure per published value that did not pass (the same words for every kind)."""
    return [
        f"published {r['cell']} {r['metric']}: {r['status']}"
        + (f" ({r['reason']})" if r["reason"] else "")
        for r in golden["rows"]
        if r["status"] != PASS
    ]


def run_kind(kind: StudyKind[StudyT, StateT], study: StudyT, ctx: Context) -> Outcome:
    """Every step of ``kind`` for ``study`` into ``ctx.out``; returns whether it passed."""
    state = kind.load(study, ctx)
    kind.compute(state)
    kind.check_parity(state)
    golden = kind.compare_published(state)
    state.failures += golden_failures(golden)
    tables = kind.tables(state, golden)
    shown = ctx.progress and kind.table_progress
    for name, table in progress_bar(list(tables.items()), f"{'tables':<9}", shown, unit="item"):
        write_table(ctx.out / "tables", name, table)
    part = kind.bundle_part(state, golden, tables)
    write_outputs(ctx.out, part.verification, part.report_html, part.bundle)
    write_manifest(ctx.out, study, part.dumps, inputs=part.inputs)
    failures = list(state.failures)
    return {"passed": not failures, "failures": failures}


#: A registered kind, of whichever study and state (the registry holds kinds of every study).
AnyKind: TypeAlias = StudyKind[Any, Any]

_KINDS: dict[str, AnyKind] = {}

KindT = TypeVar("KindT", bound=type[AnyKind])


def register_kind(cls: KindT) -> KindT:
    """Class decorator: the kind under its ``name`` (a second kind of one name is refused)."""
    if cls.name in _KINDS and type(_KINDS[cls.name]) is not cls:
        raise ValueError(f"a study kind named {cls.name!r} is already registered")
    kind = _KINDS[cls.name] = cls()
    if cls.parse is not StudyKind.parse:  # a kind that brings its own spec
        register_spec(cls.name, kind.parse)
    return cls


def kind_spec_modules() -> list[ModuleType]:
    """Every registered kind's module and its spec module (``<kind module>.spec``, imported
    here: a kind whose ``parse`` is a method imports it only to parse), for the names that
    moved from ``specs.study`` into a kind's spec (its module ``__getattr__``)."""
    modules: list[ModuleType] = []
    for kind in list(_KINDS.values()):
        base = type(kind).__module__
        for name in (base, f"{base}.spec"):
            try:
                modules.append(importlib.import_module(name))
            except ModuleNotFoundError:
                continue
    return modules


def unregister_kind(name: str) -> None:
    """Remove a kind (a test's toy kind, after the test)."""
    _KINDS.pop(name, None)
    register_spec(name, None)


def kind_named(name: str) -> AnyKind:
    """The registered kind called ``name``."""
    try:
        return _KINDS[name]
    except KeyError:
        raise UserError(
            f"Unknown study kind {name!r}. Available: {', '.join(sorted(_KINDS))}"
        ) from None


def typed_numbers(bundle: JsonObject) -> Iterator[NumberRecord]:
    """Every number of a bundle read back, as the kind that wrote it (its ``schema``) yields
    them: the one typed view that ``audiorepro diff`` compares."""
    schema = bundle.get("schema")
    kind = next((k for k in _KINDS.values() if k.bundle_schema == schema), None)
    if kind is None:
        raise UserError(
            f"no study kind writes bundles of schema {schema!r}. Available: "
            + ", ".join(sorted(k.bundle_schema for k in _KINDS.values() if k.bundle_schema))
        )
    return kind.numbers(bundle)


#: The built-in kinds by the schema of the bundles they write: the module whose import
#: registers each (:func:`register_kind`, the one registration). ``diff`` imports only the
#: kinds its bundles name (:func:`diff_kinds`): a kind's module imports its whole computation
#: (metrics, references, renderer), about a second for all of them. tests/test_study_kinds.py
#: holds each entry to the kind its module registers.
BUILT_IN: Final[Mapping[str, str]] = {
    "audiorepro.bundle/1": "audiorepro.runner.kinds.retrieval",
    "audiorepro.probe-bundle/1": "audiorepro.runner.kinds.probe",
    "audiorepro.zeroshot-bundle/1": "audiorepro.runner.kinds.zeroshot",
    "audiorepro.linear-probe-bundle/1": "audiorepro.runner.kinds.linear_probe",
    "audiorepro.speaker-verification-bundle/1": "audiorepro.runner.kinds.speaker_verification",
    "audiorepro.hear-bundle/1": "audiorepro.runner.kinds.hear",
}


def _registered_schema(schema: str) -> AnyKind | None:
    return next((k for k in _KINDS.values() if k.bundle_schema == schema), None)


class DiffKinds(Mapping[str, AnyKind]):
    """The kinds by the schema of the bundles they write: every registered kind's and every
    built-in kind's (:data:`BUILT_IN`), a built-in kind's module imported the first time its
    schema is looked up. Its keys (listed in diff's messages) import nothing."""

    def __getitem__(self, schema: str) -> AnyKind:
        kind = _registered_schema(schema)
        if kind is None and schema in BUILT_IN:
            importlib.import_module(BUILT_IN[schema])  # registers it
            kind = _registered_schema(schema)
        if kind is None:
            raise KeyError(schema)
        return kind

    def _schemas(self) -> list[str]:
        registered = {k.bundle_schema for k in _KINDS.values() if k.bundle_schema}
        return sorted(registered | set(BUILT_IN))

    def __iter__(self) -> Iterator[str]:
        return iter(self._schemas())

    def __len__(self) -> int:
        return len(self._schemas())

    def __contains__(self, schema: object) -> bool:
        return isinstance(schema, str) and (
            schema in BUILT_IN or _registered_schema(schema) is not None
        )


def diff_kinds() -> DiffKinds:
    """The kinds by the schema of the bundles they write (registered and built-in, imported
    when asked): what ``audiorepro diff`` asks to read a bundle (:mod:`audiorepro.checks.diff`)."""
    return DiffKinds()


def kind_names() -> tuple[str, ...]:
    """The registered kinds, sorted."""
    return tuple(sorted(_KINDS))


# The typed view: helpers the kinds' ``numbers`` share.

#: The identities of a study-level number: none.
_NONE = Identities()


def records(
    node: Any,
    where: tuple[str | int, ...],
    path: str,
    *,
    classify: Callable[[tuple[str | int, ...]], tuple[Better, NumberTier]],
    identities: Identities = _NONE,
) -> Iterator[NumberRecord]:
    """The :class:`NumberRecord` of every number under ``node`` (found at ``where`` in the
    bundle, named ``path`` in the view); ``classify`` gets the keys below ``node`` and says
    the number's direction and tier."""
    for below, value in numeric_leaves(node):
        direction, tier = classify(below)
        name = f"{path}/{readable(below)}" if below else path
        yield NumberRecord(name, (*where, *below), value, direction, tier, identities)


def cell_records(
    bundle: JsonObject,
    key: str,
    *,
    classify: Callable[[JsonObject, tuple[str | int, ...]], tuple[Better, NumberTier]],
    identities: Callable[[JsonObject], Identities],
) -> Iterator[NumberRecord]:
    """The records of every cell (or run) of ``bundle[key]``, named by its ``id``;
    ``classify`` gets the cell and the keys below it."""
    for i, cell in enumerate(bundle.get(key, [])):
        yield from records(
            cell,
            (key, i),
            f"{key}/{cell['id']}",
            classify=functools.partial(classify, cell),
            identities=identities(cell),
        )


def dump_identities(cell: JsonObject) -> Identities:
    """A dump cell's identities: its dump's and weights' SHA-256 and its preprocessing.

    >>> dump_identities({"dump_sha256": "d", "model_meta": {"preprocessing": {"sr": 48000}}})
    Identities(dump='d', weights=None, settings=('sr=48000',), files=())
    """
    meta = cell.get("model_meta") or {}
    pre = meta.get("preprocessing")
    settings = tuple(f"{k}={pre[k]}" for k in sorted(pre)) if isinstance(pre, dict) else ()
    return Identities(
        dump=cell.get("dump_sha256"), weights=meta.get("weights_sha256"), settings=settings
    )


ParityT = TypeVar("ParityT", bound=Mapping[str, object])


def record_parity(parity: list[ParityT], failures: list[str], cell_id: str, row: ParityT) -> None:
    """One cell's parity row (harness against its twin) kept, and a failed one worded as every
    kind words it, so that the run ends failed (``run_kind``)."""
    parity.append(row)
    if not row["passed"]:
        failures.append(f"metric parity failed for cell {cell_id}")


class CellParity(TypedDict, Generic[ParityT]):
    """``metric_parity`` of a kind that checks each cell against its twin: the rows, and
    whether every cell has one and every row passed."""

    cells: list[ParityT]
    passed: bool


class ParityVerification(TypedDict, Generic[ParityT]):
    """``verification.json`` of a kind whose parity is one row per cell (hear, linear probe,
    speaker verification, zero-shot): the kinds' own TypedDicts have these keys."""

    metric_parity: CellParity[ParityT]
    metric_parity_passed: bool
    failures: list[str]
    golden: Summary


def parity_verification(
    parity: list[ParityT], n_cells: int, failures: list[str], golden: Summary
) -> ParityVerification[ParityT]:
    """The verification record of a run whose parity rows are ``parity`` (one per cell that
    ran, of ``n_cells``): passed only when every cell has a row and every row passed."""
    passed = bool(parity) and len(parity) == n_cells and all(p["passed"] for p in parity)
    return {
        "metric_parity": {"cells": parity, "passed": passed},
        "metric_parity_passed": passed,
        "failures": failures,
        "golden": golden,
    }


def rest_records(
    bundle: JsonObject,
    skip: tuple[str, ...],
    classify: Callable[[tuple[str | int, ...]], tuple[Better, NumberTier]],
) -> Iterator[NumberRecord]:
    """The records of every top-level part of ``bundle`` but ``skip`` (study-level numbers)."""
    for key, node in bundle.items():
        if key not in skip:
            yield from records(node, (key,), key, classify=classify)

"""The study kinds: one interface every kind implements, their registry, the one driver that
runs any kind, and one typed view of every number a run produces.

A kind (retrieval, probe, zero-shot, ...) is one module with a :class:`StudyKind` subclass,
registered by name with :func:`register_kind`, plus its spec (the study file's
``kind = "..."`` and its ``specs/study.py`` block). The runner (:mod:`.study`) looks the kind
up by the study's ``kind`` and runs it through :func:`run_kind`, which owns what is common to
every kind: the step order, the published-value failures, writing the tables, the three
outputs (``verification.json``, ``report.html``, ``bundle.json.gz``) and the manifest. Staging
and publication, the extraction cache, the executors and ``verify OUT`` stay in :mod:`.study`.

The steps, in order (lm-evaluation-harness' ``Task`` has the same shape)::

    load -> compute -> check_parity -> compare_published -> tables -> bundle_part

and ``numbers`` reads a bundle back as :class:`NumberRecord` s: every number, the same way
for every kind.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar

from audiorepro.checks.verify import PASS, Summary
from audiorepro.core.errors import UserError
from audiorepro.core.progress import progress_bar
from audiorepro.formats.dump import Dump
from audiorepro.render.tables import Table, write_table
from audiorepro.runner.executors.extraction import StudyExtraction
from audiorepro.runner.manifest import write_manifest
from audiorepro.runner.outputs import Outcome, write_outputs

#: Which way a number is better: ``higher``, ``lower``, or None (a count, a setting).
Better = Literal["higher", "lower"] | None
#: Its reproducibility tier (:mod:`audiorepro.checks.tiers`): ``a`` equal to the last bit on
#: every machine (the exact engine over a shipped dump, float64 over shipped prediction files),
#: ``b`` within a derived tolerance (CPU-extracted embeddings, torch float32), None not a
#: computed value (a count of the inputs, a setting).
NumberTier = Literal["a", "b"] | None


@dataclass(frozen=True)
class Identities:
    """What a number depends on: the dump's SHA-256, the weights' SHA-256, the settings that
    made it (a preprocessing or study setting, as ``key=value``), the input files' SHA-256.
    Empty for a study-level number."""

    dump: str | None = None
    weights: str | None = None
    settings: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class NumberRecord:
    """One number of a run: its readable ``path`` (unique within a bundle, cells by id), its
    ``where`` (the keys and list indices that reach it in the bundle), value, direction, tier
    and identities."""

    path: str
    where: tuple[str | int, ...]
    value: float | int
    direction: Better
    tier: NumberTier
    identities: Identities = field(default_factory=Identities)


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
        """One row per published value (PASS, FAIL, NOT VERIFIED)."""

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
    def numbers(self, bundle: Mapping[str, Any]) -> Iterator[NumberRecord]:
        """Every number of a bundle of this kind (decompressed ``bundle.json.gz``)."""


def golden_failures(golden: Summary) -> list[str]:
    """One failure per published value that did not pass (the same words for every kind)."""
    return [
        f"published {r['cell']} {r['metric']}: {r['status']}"
        + (f" ({r['reason']})" if r["reason"] else "")
        for r in golden["rows"]
        if r["status"] != PASS
    ]


def run_kind(kind: StudyKind[Any, Any], study: Any, ctx: Context) -> Outcome:
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


_KINDS: dict[str, StudyKind[Any, Any]] = {}

KindT = TypeVar("KindT", bound=type[StudyKind[Any, Any]])


def register_kind(cls: KindT) -> KindT:
    """Class decorator: the kind under its ``name`` (a second kind of one name is refused)."""
    if cls.name in _KINDS and type(_KINDS[cls.name]) is not cls:
        raise ValueError(f"a study kind named {cls.name!r} is already registered")
    _KINDS[cls.name] = cls()
    return cls


def unregister_kind(name: str) -> None:
    """Remove a kind (a test's toy kind, after the test)."""
    _KINDS.pop(name, None)


def kind_named(name: str) -> StudyKind[Any, Any]:
    """The registered kind called ``name``."""
    try:
        return _KINDS[name]
    except KeyError:
        raise UserError(
            f"Unknown study kind {name!r}. Available: {', '.join(sorted(_KINDS))}"
        ) from None


def kind_names() -> tuple[str, ...]:
    """The registered kinds, sorted."""
    return tuple(sorted(_KINDS))


# The typed view: helpers the kinds' ``numbers`` share.

Leaf = tuple[tuple[str | int, ...], float | int]


def numeric_leaves(node: Any, where: tuple[str | int, ...] = ()) -> Iterator[Leaf]:
    """Every int or float (not a bool, not None) under ``node``, with the keys and indices
    that reach it, in the bundle's order.

    >>> list(numeric_leaves({"a": [1, True, None, {"b": 0.5}], "c": "x"}))
    [(('a', 0), 1), (('a', 3, 'b'), 0.5)]
    """
    if isinstance(node, dict):
        for key, value in node.items():
            yield from numeric_leaves(value, (*where, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from numeric_leaves(value, (*where, i))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield where, node


def readable(where: tuple[str | int, ...]) -> str:
    """A ``where`` as a path: keys and indices joined by ``/``.

    >>> readable(("cells", 0, "metrics", "t2a", "r@1"))
    'cells/0/metrics/t2a/r@1'
    """
    return "/".join(str(part) for part in where)


def records(
    node: Any,
    where: tuple[str | int, ...],
    path: str,
    *,
    classify: Callable[[tuple[str | int, ...]], tuple[Better, NumberTier]],
    identities: Identities = Identities(),
) -> Iterator[NumberRecord]:
    """The :class:`NumberRecord` of every number under ``node`` (found at ``where`` in the
    bundle, named ``path`` in the view); ``classify`` gets the keys below ``node`` and says
    the number's direction and tier."""
    for below, value in numeric_leaves(node):
        direction, tier = classify(below)
        name = f"{path}/{readable(below)}" if below else path
        yield NumberRecord(name, (*where, *below), value, direction, tier, identities)


def cell_records(
    bundle: Mapping[str, Any],
    key: str,
    *,
    classify: Callable[[Mapping[str, Any], tuple[str | int, ...]], tuple[Better, NumberTier]],
    identities: Callable[[Mapping[str, Any]], Identities],
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


def dump_identities(cell: Mapping[str, Any]) -> Identities:
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


def rest_records(
    bundle: Mapping[str, Any],
    skip: tuple[str, ...],
    classify: Callable[[tuple[str | int, ...]], tuple[Better, NumberTier]],
) -> Iterator[NumberRecord]:
    """The records of every top-level part of ``bundle`` but ``skip`` (study-level numbers)."""
    for key, node in bundle.items():
        if key not in skip:
            yield from records(node, (key,), key, classify=classify)

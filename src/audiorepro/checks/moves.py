"""What can move a number: what a study kind declares so that ``audiorepro diff`` can say why a
number moved without knowing the kind's bundle (issue 45 item 2).

A kind (:mod:`audiorepro.runner.kinds`) answers three questions, the :class:`DiffRules`:

- ``numbers(bundle)``: every number of a bundle (:class:`~audiorepro.checks.numbers.NumberRecord`);
- ``records(bundle)``: what each cell (and the run) recorded that numbers depend on, each an
  :class:`Identity` of one :data:`Cause` (weights, encoder code, preprocessing, inputs, ...);
- ``moves(bundle, number)``: how a number is compared (:class:`Moves`): the cell it is shown
  under, its tier, the keys of the records whose change can move it, and how a tier-b
  tolerance is derived for it.

``diff`` walks only what the kind says: a cause is named for a moved number only when its
record differs between the runs and the kind declared that it can move that number. The
machine's records (:data:`MACHINE`: software, hardware, threads, image) come from each
run's manifest, the same for every kind. The helpers below are the shapes the built-in
kinds share (a cell's records read from an extracted dump's meta, a number of no cell).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args

from audiorepro.checks.numbers import NumberRecord
from audiorepro.checks.tiers import Tier

#: What a number depends on, the fixed vocabulary of causes, in the order they are reported.
Cause = Literal[
    "study",
    "weights",
    "encoder code",
    "preprocessing",
    "inputs",
    "definitions",
    "software",
    "hardware",
    "threads",
    "image",
]
CAUSES: Final[tuple[Cause, ...]] = get_args(Cause)
#: Records of the machine and its software: a tier-b number may move within its tolerance
#: when only these differ; a tier-a number does not depend on them at all.
MACHINE: Final = frozenset({"software", "hardware", "threads", "image"})
#: Keys of the run-wide records (every number of a run depends on the first two).
STUDY_KEY: Final = "run:study"
DEFINITIONS_KEY: Final = "run:definitions"
RUN_MACHINE_KEYS: Final = tuple(f"run:{k}" for k in ("software", "hardware", "threads", "image"))
#: Where a number that no cell owns is shown (leaders, derived numbers, parity rows,
#: counts of the study): it depends on every cell's records.
STUDY_CELL: Final = "(study)"
#: The records of an extracted cell that can move its computed numbers.
CELL_CAUSES: Final[tuple[Cause, ...]] = (
    "weights",
    "encoder code",
    "preprocessing",
    "inputs",
    "software",
)
#: How a tier-b tolerance is derived (:func:`audiorepro.checks.diff_load.tolerance_from`):
#: ``retrieval`` (:func:`.tiers.tier_b_tolerance` over the cell's dump), ``ranks`` (0 when
#: no query of the cell's retrieval dump is fragile), None (no bound derived: a move under
#: another machine is a change).
Rule = Literal["retrieval", "ranks"] | None


@dataclass(frozen=True)
class Identity:
    """One record numbers depend on, as a run recorded it: compared by its canonical JSON."""

    key: str  #: ``<cell>:<cause>`` or ``run:<cause>``
    kind: Cause
    scope: str  #: the cell id (or a file's path), or ``run``
    value: Any

    @property
    def canonical(self) -> str:
        return json.dumps(self.value, sort_keys=True, separators=(",", ":"))


def identity(scope: str, kind: Cause, value: Any) -> Identity:
    """The record ``kind`` of ``scope`` (a cell, a file, ``run``)."""
    return Identity(key=f"{scope}:{kind}", kind=kind, scope=scope, value=value)


@dataclass(frozen=True)
class Moves:
    """How ``diff`` compares one number: declared by its kind."""

    cell: str  #: the cell it is shown under (:data:`STUDY_CELL`: none; ``a | b``: a pair)
    tier: Tier
    depends_on: frozenset[str]  #: keys of the records whose change can move it
    rule: Rule = None
    metric: str = ""  #: the metric path the rule reads (``t2a/r@1``)
    float32: bool = False  #: laion-clap's float32 logits


class DiffRules(Protocol):
    """What ``diff`` asks a study kind (every :class:`~audiorepro.runner.kinds.StudyKind`)."""

    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str: ...  # the kind in a sentence ("a zero-shot run")
    @property
    def bundle_schema(self) -> str: ...
    def numbers(self, bundle: Any) -> Iterable[NumberRecord]: ...
    def records(self, bundle: Any) -> list[Identity]: ...
    def moves(self, bundle: Any, number: NumberRecord) -> Moves: ...


# ------------------------------------------------------------ shapes the kinds share


def keys(cell: str, causes: Iterable[str], *, tier: Tier) -> frozenset[str]:
    """What a number of ``cell`` and ``tier`` can be moved by: the cell's records of
    ``causes`` (a tier-a number: none of the machine's), the run's study and definitions,
    and (tier b only) the run's machine.

    >>> sorted(keys("c", ("weights", "software"), tier="a"))
    ['c:weights', 'run:definitions', 'run:study']
    >>> len(keys("c", ("weights", "software"), tier="b"))  # and the run's four machine records
    8
    """
    own = {f"{cell}:{k}" for k in causes if tier == "b" or k not in MACHINE}
    run = {STUDY_KEY, DEFINITIONS_KEY} | (set(RUN_MACHINE_KEYS) if tier == "b" else set())
    return frozenset(own | run)


def extracted(cell: Mapping[str, Any]) -> bool:
    """Whether a cell's embeddings were extracted here (its meta names the weights)."""
    return "weights_sha256" in (cell.get("model_meta") or {})


def every(
    bundle: Mapping[str, Any], causes: Sequence[str], extra: Sequence[str] = (), key: str = "cells"
) -> Moves:
    """A number no cell owns: it depends on every cell's (``bundle[key]``) records of
    ``causes``, and on the run's machine when any cell is tier b (a whole-study number is
    as exact as its least exact cell)."""
    cells = [c for c in bundle.get(key, []) if isinstance(c, Mapping)]
    tier: Tier = "b" if any(extracted(c) for c in cells) else "a"
    found = frozenset().union(*(keys(str(c["id"]), causes, tier=tier) for c in cells))
    return Moves(STUDY_CELL, tier, found | keys("run", (), tier=tier) | frozenset(extra))


def owner(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> Mapping[str, Any] | None:
    """The cell a study-level number belongs to, when a table on its way names it (a parity
    row's or a published value's ``cell``): its numbers follow that cell."""
    cells = {str(c.get("id")): c for c in bundle.get("cells", []) if isinstance(c, Mapping)}
    node: Any = bundle
    found = None
    for part in where[:-1]:
        node = node[part]
        if isinstance(node, Mapping) and str(node.get("cell")) in cells:
            found = cells[str(node["cell"])]
    return found


def study_level(
    bundle: Mapping[str, Any],
    where: tuple[str | int, ...],
    causes: Sequence[str],
    *,
    tier: Tier | None = None,
    rule: Rule = None,
) -> Moves:
    """A number outside the cells (a parity row, a published value, a count of the study):
    it follows the cell a row on its way names (in ``tier``, else that cell's: b when it was
    extracted), else it depends on every cell (:func:`every`)."""
    found = owner(bundle, where)
    if found is None:
        return every(bundle, causes)
    oid = str(found["id"])
    tier = tier or ("b" if extracted(found) else "a")
    return Moves(oid, tier, keys(oid, causes, tier=tier), rule=rule)


def in_cell(where: tuple[str | int, ...], key: str = "cells") -> bool:
    """Whether ``where`` reaches a number inside one entry of ``bundle[key]``."""
    return where[0] == key and len(where) > 2 and isinstance(where[1], int)


def pick(meta: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {k: meta[k] for k in names if k in meta}


_WEIGHT_KEYS: Final = ("model", "revision", "weights_sha256", "architecture", "spec")
_PREPROCESSING_KEYS: Final = (
    "preprocessing", "audio_decoder", "resampler", "sample_rate", "mono", "captions_layout",
)  # fmt: skip


def extraction_records(cid: str, meta: Mapping[str, Any]) -> list[Identity]:
    """An extracted dump's records from its meta: weights, encoder code, preprocessing,
    inputs (the clips) and software, in that order."""
    inputs = dict(meta.get("inputs", {}))
    layout = inputs.pop("captions_layout", None)
    pre = pick(meta, _PREPROCESSING_KEYS) | ({"captions_layout": layout} if layout else {})
    return [
        identity(cid, "weights", pick(meta, _WEIGHT_KEYS)),
        # The encoder's code (its source's SHA-256 and version; CLAP: the library's version),
        # absent from dumps written before it was recorded.
        identity(cid, "encoder code", meta.get("encoder_code")),
        identity(cid, "preprocessing", pre),
        identity(cid, "inputs", inputs),
        identity(cid, "software", meta.get("versions")),
    ]


def run_records(study: Any, definitions: Any) -> list[Identity]:
    """The run's own records: the study's settings and the definitions' version."""
    return [identity("run", "study", study), identity("run", "definitions", definitions)]

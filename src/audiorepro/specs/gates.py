"""Gates over a probe study's job records (``[[gate]]``): conditions its own files must meet.

A study's workflow and scheduler records say whether the study it reports finished: the
published probe module refuses to consolidate unless ``workflow.json`` is COMPLETE with no
errors and every final Slurm allocation is COMPLETED with exit ``0:0``. A gate says so in the
study::

    [[gate]]
    name = "workflow COMPLETE with no errors"
    file = "workflow.json"                  # relative to the study's root
    equals = { state = "COMPLETE" }         # key path -> the value it must have
    empty = ["errors"]                      # key paths that must be absent, null or empty

    [[gate]]
    name = "every final Slurm attempt COMPLETED 0:0"
    file = "consolidated_benchmark/job_audit.json"
    each = "jobs"                           # a key path to a list: each item must pass
    final_by = "JobName"                    # of the items with one JobName, the last only
    equals = { State = "COMPLETED", ExitCode = "0:0" }

A gate that does not hold fails the study (exit 1) and names the gate, the item and the key;
a gate's file that is missing or not JSON fails it the same way (the records are data: their
absence is a finding, not a malformed study).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.formats.keypath import KeyPathError, format_path, locate
from audiorepro.specs.schema import Spec


class GateSpec(Spec):
    """``[[gate]]``: a condition a file of the study's tree must meet."""

    name: str = Field(description="the gate's name, as failures name it")
    file: str = Field(description="a JSON file, relative to the study's root")
    equals: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="a table of key path -> the value it must have"
    )
    empty: list[str] = Field(
        default_factory=list, description="a list of key paths that must be absent or empty"
    )
    each: str | None = Field(None, description="a key path to a list: each item must pass")
    final_by: str | None = Field(None, description="with each: only the last item per field")


@dataclass(frozen=True)
class Gate:
    """A gate, its file resolved."""

    name: str
    path: Path
    spec: GateSpec


@dataclass(frozen=True)
class GateResult:
    """One gate's outcome: passed, or the first reason it did not."""

    name: str
    file: str
    checked: int
    problem: str | None


def _items(doc: Any, gate: GateSpec) -> list[tuple[str, Any]]:
    """(where, item) the conditions apply to: the document, or each (final) list item."""
    if gate.each is None:
        return [("", doc)]
    found = locate(doc, gate.each)
    if found is None or not isinstance(found[1], list):
        raise ValueError(f"{gate.each} is not a list")
    items = found[1]
    if not items:
        # "every final attempt COMPLETED" over no attempt would pass having checked nothing.
        raise ValueError(f"{gate.each} is empty: no record to check")
    final = final_items(items, gate.final_by)
    return [(format_path(doc, (*found[0], i)) + ".", items[i]) for i in final]


def final_items(items: list[Any], final_by: str | None) -> list[int]:
    """The indices of the last item of each group of equal ``final_by`` (every index without
    it), in order: Slurm's final attempt of each job name.

    A record without the field is its own group: it never shadows, nor is shadowed by, a
    record whose field happens to equal its index.

    >>> final_items([{"J": "a"}, {"J": "b"}, {"J": "a"}, {}, "text"], "J")
    [1, 2, 3, 4]
    """
    last: dict[tuple[str, str], int] = {}
    for i, item in enumerate(items):
        named = isinstance(item, dict) and final_by is not None and final_by in item
        last[("field", str(item[final_by])) if named else ("index", str(i))] = i
    return sorted(last.values())


def _problem(where: str, item: Any, gate: GateSpec) -> str | None:
    for path, expected in gate.equals.items():
        found = locate(item, path)
        value = None if found is None else found[1]
        if value != expected or type(value) is not type(expected):
            return f"{where}{path} is {value!r}, expected {expected!r}"
    for path in gate.empty:
        found = locate(item, path)
        if found is not None and found[1] not in (None, [], {}, ""):
            return f"{where}{path} is {str(found[1])[:80]!r}, expected none"
    return None


def check_gate(gate: Gate, root: Path) -> GateResult:
    """One gate over its file (never raises for the file's content: a finding)."""
    name = (
        gate.path.relative_to(root).as_posix() if gate.path.is_relative_to(root) else str(gate.path)
    )
    try:
        doc = parse_json(read_text(gate.path, what="a JSON job record"), source=gate.path)
        items = _items(doc, gate.spec)
        problems = [p for where, item in items if (p := _problem(where, item, gate.spec))]
    except (UserError, KeyPathError, ValueError) as exc:
        return GateResult(gate.name, name, 0, str(exc))
    return GateResult(gate.name, name, len(items), problems[0] if problems else None)


def check_gate_spec(gate: GateSpec, source: Path, key: str) -> None:
    """What a user wrote in a ``[[gate]]``: key paths that parse, ``final_by`` with ``each``."""
    paths = [(f"{key}.equals.{k}", k) for k in gate.equals]
    paths += [(f"{key}.empty[{i}]", p) for i, p in enumerate(gate.empty)]
    paths += [(f"{key}.each", gate.each)] if gate.each is not None else []
    for where, path in paths:
        try:
            locate({}, path)
        except KeyPathError as exc:
            raise UserError(str(exc), source=source, key=where) from None
    if gate.final_by is not None and gate.each is None:
        raise UserError("needs 'each' (the list whose final items it picks)", source=source,
                        key=f"{key}.final_by")  # fmt: skip

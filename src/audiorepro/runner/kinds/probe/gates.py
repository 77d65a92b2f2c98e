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
    final_from = { file = "workflow.json", single = ["pilot_job"], last_of = ["tasks"] }
    equals = { State = "COMPLETED", ExitCode = "0:0" }

``final_from``: the final attempts are the job ids the workflow record names (the module's
rule: the pilot and the last attempt of each cache job and task); a study without a workflow
record writes ``final_by = "JobName"`` instead (of the items with one JobName, the last).

A gate that does not hold fails the study (exit 1) and names the gate, the item and the key;
a gate's file that is missing or not JSON fails it the same way (the records are data: their
absence is a finding, not a malformed study).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.formats.keypath import KeyPathError, format_path, locate
from audiorepro.specs.schema import Spec


class FinalIds(Spec):
    """Which job attempts are final, as the workflow record says (the published module's rule:
    ``{pilot_job} | {last attempt's id of each cache job and each task}``)::

        final_from = { file = "workflow.json", single = ["pilot_job"],
                       last_of = ["cache_jobs", "tasks"] }
    """

    file: str | None = Field(
        None, description="the workflow record (gate: relative to root; jobs: default its workflow)"
    )
    single: list[str] = Field(
        default_factory=list, description="key paths each holding one final job id"
    )
    last_of: list[str] = Field(
        default_factory=list,
        description="key paths each a table of name -> list of attempts: the last one is final",
    )
    attempt_id: str = Field("id", description="the key of an attempt's job id (a number)")
    id_field: str = Field("JobIDRaw", description="the job record's id field (number or text)")


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
    final_from: FinalIds | None = Field(
        None, description="with each: only the items whose id the workflow record names final"
    )


@dataclass(frozen=True)
class Gate:
    """A gate, its file resolved."""

    name: str
    path: Path
    spec: GateSpec
    #: the workflow record ``final_from`` reads, resolved
    workflow: Path | None = None


@dataclass(frozen=True)
class GateResult:
    """One gate's outcome: passed, or the first reason it did not."""

    name: str
    file: str
    checked: int
    problem: str | None


def job_id(value: Any) -> str | None:
    """A job id as text of an integer: ``101`` and sacct's ``"101"`` are one id; anything
    else (``"101.batch"``, a float, a table) is None.

    >>> job_id(101), job_id("101"), job_id("1e2"), job_id(True)
    ('101', '101', None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and re.fullmatch(r"\d+", value):
        return str(int(value))
    return None


def workflow_final_ids(doc: Any, spec: FinalIds, source: str) -> list[str]:
    """The final job ids the workflow record names, in its order (ValueError naming the key
    where the record is not as ``spec`` says: a finding, the gate fails)."""
    ids: list[str] = []

    def add(value: Any, where: str) -> None:
        found = job_id(value)
        if found is None:
            raise ValueError(f"{source}: {where} is {str(value)[:40]!r}; expected a job id")
        if found not in ids:
            ids.append(found)

    for path in spec.single:
        hit = locate(doc, path)
        add(None if hit is None else hit[1], path)
    for path in spec.last_of:
        hit = locate(doc, path)
        groups = None if hit is None else hit[1]
        if not isinstance(groups, dict):
            raise ValueError(f"{source}: {path} is not a table of name -> attempts")
        for name, attempts in groups.items():
            where = f"{path}.{name}"
            if not isinstance(attempts, list) or not attempts:
                raise ValueError(f"{source}: {where} is not a list of attempts")
            last = attempts[-1]
            value = last.get(spec.attempt_id) if isinstance(last, dict) else last
            add(value, f"{where}[{len(attempts) - 1}].{spec.attempt_id}")
    return ids


def final_by_ids(items: list[Any], ids: list[str], id_field: str, source: str) -> list[int]:
    """The indices of the records whose ``id_field`` is one of ``ids`` (ValueError naming the
    first final id no record has: the module stops there too)."""
    where = {
        job_id(item.get(id_field)): i for i, item in enumerate(items) if isinstance(item, dict)
    }
    for j in ids:
        if j not in where:
            raise ValueError(f"final job {j} (per the workflow record) has no record in {source}")
    return sorted(where[j] for j in ids)


def _items(doc: Any, gate: GateSpec, workflow: Path | None = None) -> list[tuple[str, Any]]:
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
    if gate.final_from is not None and workflow is not None:
        spec = gate.final_from
        record = parse_json(read_text(workflow, what="a JSON workflow record"), source=workflow)
        ids = workflow_final_ids(record, spec, workflow.name)
        final = final_by_ids(items, ids, spec.id_field, gate.file)
    else:
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
        items = _items(doc, gate.spec, gate.workflow)
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
    if gate.final_from is not None:
        if gate.each is None or gate.final_by is not None or gate.final_from.file is None:
            raise UserError("needs 'each', a 'file' (the workflow record) and no 'final_by'",
                            source=source, key=f"{key}.final_from")  # fmt: skip
        wf = gate.final_from
        for where, path in [
            *(("single", p) for p in wf.single),
            *(("last_of", p) for p in wf.last_of),
        ]:
            try:
                locate({}, path)
            except KeyPathError as exc:
                raise UserError(str(exc), source=source, key=f"{key}.final_from.{where}") from None
    if gate.final_by is not None and gate.each is None:
        raise UserError("needs 'each' (the list whose final items it picks)", source=source,
                        key=f"{key}.final_by")  # fmt: skip

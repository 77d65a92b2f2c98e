"""A toy study kind, whole in one module outside the package (its spec, its computation, its
records, its numbers and what can move each): ``tests/test_study_kinds.py`` copies this file
into a temporary folder and imports it from there; importing it registers the kind, as a
plugin's module would. A study of it::

    schema = "audiorepro.study/1"
    kind = "toy-count"
    name = "toy"
    offset = 0                      # added to every value (a study setting)

    [[cell]]
    id = "a"
    values = [1, 2, 3]

    [[published]]
    cell = "a"
    sum = 6.0

Per cell the numbers are the sum and mean of its values (plus the offset), and their count.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiorepro.checks.moves import (
    Identity,
    Moves,
    identity,
    in_cell,
    keys,
    run_records,
    study_level,
)
from audiorepro.checks.verify import Summary, ValueRow, summarize, value_rows
from audiorepro.core.errors import UserError
from audiorepro.render.tables import Column, Table
from audiorepro.runner.kinds import (
    Better,
    BundlePart,
    Context,
    Identities,
    KindState,
    NumberRecord,
    NumberTier,
    StudyKind,
    cell_records,
    register_kind,
    rest_records,
)


@dataclass(frozen=True)
class CountStudy:
    """A toy study: per cell a list of integers; its numbers are their sum and mean."""

    name: str
    title: str
    source: Path
    cells: dict[str, tuple[int, ...]]
    published: dict[str, float]  #: cell -> published sum
    offset: int = 0
    kind: str = "toy-count"


@dataclass
class CountState(KindState):
    study: CountStudy | None = None
    sums: dict[str, int] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)
    parity: dict[str, bool] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)


def _int_list(value: Any, source: Path, key: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise UserError("expected a list of integers", source=source, key=key)
    return tuple(value)


class CountKind(StudyKind[CountStudy, CountState]):
    name = "toy-count"
    bundle_schema = "toy/1"
    title = "toy count"

    # ---------------------------------------------------------------- the spec
    def parse(self, doc: dict[str, Any], source: Path, strict: bool) -> CountStudy:
        known = {"schema", "kind", "name", "title", "offset", "cell", "published"}
        for key in doc:
            if key not in known:
                raise UserError(f"is not a key of a toy-count study ({', '.join(sorted(known))})",
                                source=source, key=key)  # fmt: skip
        cells = {
            str(c["id"]): _int_list(c.get("values"), source, f"cell[{i}].values")
            for i, c in enumerate(doc.get("cell", []))
        }
        published = {str(p["cell"]): float(p["sum"]) for p in doc.get("published", [])}
        offset = doc.get("offset", 0)
        if type(offset) is not int:
            raise UserError("expected an integer", source=source, key="offset")
        name = str(doc.get("name", "toy"))
        return CountStudy(name, str(doc.get("title", name)), source, cells, published, offset)

    # ---------------------------------------------------------------- the computation
    def load(self, study: CountStudy, ctx: Context) -> CountState:
        state = CountState(study=study, steps=["load"])
        for cell, values in study.cells.items():
            if not values:
                state.failures.append(f"cell {cell}: no values")
        return state

    def compute(self, state: CountState) -> None:
        assert state.study is not None
        state.steps.append("compute")
        for cell, values in state.study.cells.items():
            if values:
                shifted = [v + state.study.offset for v in values]
                state.sums[cell] = sum(shifted)
                state.means[cell] = sum(shifted) / len(shifted)

    def check_parity(self, state: CountState) -> None:
        assert state.study is not None
        state.steps.append("parity")
        for cell, total in state.sums.items():
            independent = 0
            for v in state.study.cells[cell]:  # the reference: a loop, not sum()
                independent += v + state.study.offset
            state.parity[cell] = independent == total

    def compare_published(self, state: CountState) -> Summary:
        assert state.study is not None
        state.steps.append("published")
        rows: list[ValueRow] = []
        for cell, value in state.study.published.items():
            got = {"sum": float(state.sums[cell])} if cell in state.sums else {}
            reason = None if got else "no values"
            rows += value_rows(cell, {"sum": value}, 0.0, got, reason, "toy")
        return summarize(rows)

    def tables(self, state: CountState, golden: Summary) -> dict[str, Table]:
        state.steps.append("tables")
        body = tuple((c, (state.sums[c], state.means[c])) for c in state.sums)
        return {"counts": Table("Counts", (Column("sum", True), Column("mean", True)), body)}

    def bundle_part(
        self, state: CountState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        assert state.study is not None
        state.steps.append("bundle")
        verification = {"failures": state.failures, "golden": golden, "parity": state.parity}
        study = state.study
        cells = [
            {"id": c, "sum": state.sums[c], "mean": state.means[c], "n": len(v), "values": list(v)}
            for c, v in study.cells.items()
            if c in state.sums
        ]
        bundle = {
            "schema": self.bundle_schema,
            "study": {"name": study.name, "offset": study.offset},
            "cells": cells,
            "verification": verification,
        }
        return BundlePart(verification, "<html>toy</html>\n", bundle)

    def verify(self, study: CountStudy, cache: Path) -> Summary:
        state = self.load(study, Context(cache, cache))
        self.compute(state)
        return self.compare_published(state)

    # ---------------------------------------------------------------- what diff asks
    def numbers(self, bundle: Mapping[str, Any]) -> Iterator[NumberRecord]:
        def classify(
            cell: Mapping[str, Any], below: tuple[str | int, ...]
        ) -> tuple[Better, NumberTier]:
            return ("higher", "a") if below[0] in ("sum", "mean") else (None, None)

        def identities(cell: Mapping[str, Any]) -> Identities:
            return Identities(settings=(f"n={len(cell['values'])}",))

        yield from cell_records(bundle, "cells", classify=classify, identities=identities)
        yield from rest_records(bundle, ("cells",), lambda below: (None, None))

    def records(self, bundle: Mapping[str, Any]) -> list[Identity]:
        """A cell's values (inputs); the study's offset (the run's ``study`` record)."""
        out = run_records({"offset": bundle["study"]["offset"]}, None)
        for cell in bundle["cells"]:
            digest = hashlib.sha256(json.dumps(cell["values"]).encode()).hexdigest()
            out.append(identity(str(cell["id"]), "inputs", {"values_sha256": digest}))
        return out

    def moves(self, bundle: Mapping[str, Any], number: NumberRecord) -> Moves:
        """Sum and mean: moved by the cell's values (and the run's offset); the count of
        values by the values alone; a published row's numbers follow their cell."""
        where = number.where
        if not in_cell(where):
            return study_level(bundle, where, ("inputs",), tier="a")
        cid = str(bundle["cells"][where[1]]["id"])
        if where[2] == "n":
            return Moves(cid, "a", frozenset({f"{cid}:inputs"}))
        return Moves(cid, "a", keys(cid, ("inputs",), tier="a"))


register_kind(CountKind)

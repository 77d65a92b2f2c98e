"""The study-kind interface (:mod:`audiorepro.runner.kinds`): a new kind is one module.

The toy kind below is defined here, in a test module, and registered through the registry
without touching the package; the runner then runs it like the built-in kinds: its steps,
the tables, the three outputs and the manifest, publication, ``verify OUT`` and the typed
view of its numbers.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

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
    kind_named,
    kind_names,
    numeric_leaves,
    register_kind,
    rest_records,
    unregister_kind,
)
from audiorepro.runner.study import run_studies, verify_output_dir, verify_study


@dataclass(frozen=True)
class CountStudy:
    """A toy study: per cell a list of integers; its numbers are their sum and mean."""

    name: str
    title: str
    source: Path
    cells: dict[str, tuple[int, ...]]
    published: dict[str, float]  #: cell -> published sum
    kind: str = "toy-count"


@dataclass
class CountState(KindState):
    study: CountStudy | None = None
    sums: dict[str, int] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)
    parity: dict[str, bool] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)


class CountKind(StudyKind[CountStudy, CountState]):
    name = "toy-count"

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
                state.sums[cell] = sum(values)
                state.means[cell] = sum(values) / len(values)

    def check_parity(self, state: CountState) -> None:
        assert state.study is not None
        state.steps.append("parity")
        for cell, total in state.sums.items():
            independent = 0
            for v in state.study.cells[cell]:  # the reference: a loop, not sum()
                independent += v
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
        cells = [
            {"id": c, "sum": state.sums[c], "mean": state.means[c], "values": list(v)}
            for c, v in state.study.cells.items()
            if c in state.sums
        ]
        bundle = {"schema": "toy/1", "cells": cells, "verification": verification}
        return BundlePart(verification, "<html>toy</html>\n", bundle)

    def verify(self, study: CountStudy, cache: Path) -> Summary:
        state = self.load(study, Context(cache, cache))
        self.compute(state)
        return self.compare_published(state)

    def numbers(self, bundle: Mapping[str, Any]) -> Iterator[NumberRecord]:
        def classify(
            cell: Mapping[str, Any], below: tuple[str | int, ...]
        ) -> tuple[Better, NumberTier]:
            return ("higher", "a") if below[0] in ("sum", "mean") else (None, None)

        def identities(cell: Mapping[str, Any]) -> Identities:
            return Identities(settings=(f"n={len(cell['values'])}",))

        yield from cell_records(bundle, "cells", classify=classify, identities=identities)
        yield from rest_records(bundle, ("cells",), lambda below: (None, None))


@pytest.fixture
def toy_kind() -> Iterator[CountKind]:
    register_kind(CountKind)
    try:
        kind = kind_named("toy-count")
        assert isinstance(kind, CountKind)
        yield kind
    finally:
        unregister_kind("toy-count")


def _study(tmp_path: Path, published: float = 6.0) -> CountStudy:
    source = tmp_path / "toy.toml"
    source.write_text('kind = "toy-count"\n')
    return CountStudy("toy", "A toy study", source, {"a": (1, 2, 3), "b": (4, 5)}, {"a": published})


def test_the_builtin_kinds_are_registered() -> None:
    assert {"retrieval", "probe", "zeroshot"} <= set(kind_names())
    assert kind_named("retrieval").extracts and kind_named("zeroshot").extracts
    assert not kind_named("probe").extracts


def test_an_unknown_kind_names_the_available_ones() -> None:
    with pytest.raises(UserError, match=r"Unknown study kind 'nope'\. Available: .*probe"):
        kind_named("nope")


def test_a_second_kind_of_one_name_is_refused(toy_kind: CountKind) -> None:
    class Other(CountKind):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_kind(Other)
    assert isinstance(kind_named("toy-count"), CountKind)


def test_a_toy_kind_runs_through_the_runner(toy_kind: CountKind, tmp_path: Path) -> None:
    out = tmp_path / "out"
    [(_, folder, outcome)] = run_studies([(_study(tmp_path), ".")], out, progress=False)
    assert folder == out and outcome == {"passed": True, "failures": []}
    assert (out / "tables" / "counts.csv").read_text().splitlines()[1:] == [
        "a,6,2.0",
        "b,9,4.5",
    ]
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    assert [c["sum"] for c in bundle["cells"]] == [6, 9]
    assert json.loads((out / "verification.json").read_text())["golden"]["counts"]["PASS"] == 1
    # The runner's common parts: the manifest covers every output, verify OUT re-reads them.
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"bundle.json.gz", "report.html", "tables/counts.csv"} <= set(manifest["outputs"])
    assert verify_output_dir(out)["counts"]["FAIL"] == 0
    # The typed view: every number of the bundle, once, with its direction and identities.
    view = list(toy_kind.numbers(bundle))
    assert {r.where for r in view} == {w for w, _ in numeric_leaves(bundle)}
    by_path = {r.path: r for r in view}
    assert len(by_path) == len(view)
    assert by_path["cells/b/mean"].value == 4.5 and by_path["cells/b/mean"].direction == "higher"
    assert by_path["cells/b/mean"].identities.settings == ("n=2",)


def test_a_toy_kind_runs_its_steps_in_order(toy_kind: CountKind, tmp_path: Path) -> None:
    from audiorepro.runner.kinds import run_kind

    calls: list[str] = []
    real_load = toy_kind.load

    def load(study: CountStudy, ctx: Context) -> CountState:
        state = real_load(study, ctx)
        calls.append("seen")
        state.steps = calls
        return state

    toy_kind.load = load  # type: ignore[method-assign]
    (tmp_path / "o").mkdir()
    outcome = run_kind(toy_kind, _study(tmp_path, published=7.0), Context(tmp_path / "o", tmp_path))
    assert calls == ["seen", "compute", "parity", "published", "tables", "bundle"]
    # A published value that fails is a failure in the common words of every kind.
    assert outcome["failures"] == ["published a sum: FAIL"]


def test_verify_study_of_a_toy_kind(toy_kind: CountKind, tmp_path: Path) -> None:
    assert verify_study(_study(tmp_path), tmp_path)["counts"]["PASS"] == 1  # type: ignore[arg-type]

"""Golden data builders shared by the golden tests and the cross-CPU check.

Each builder turns one output (a fixture dump's report, a demo run's bundle, the probe demo's
bundle) into the structure its golden file holds, with every value in its tier
(:mod:`audiorepro.checks.tiers`): plain values are tier a (exact), tier-b leaves carry their
tolerance.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from audiorepro.checks.tiers import LEGEND, compare
from audiorepro.formats.dump import load_dump
from audiorepro.metrics.retrieval import compute_retrieval, metrics_report


def with_legend(data: dict[str, Any]) -> dict[str, Any]:
    return {"tiers": LEGEND, **data}


def fixture_data(path: Path) -> dict[str, Any]:
    """A shipped fixture dump's canonical report: all tier a."""
    dump = load_dump(path)
    return with_legend(metrics_report(dump, compute_retrieval(dump)))


def _bundle(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    return data


def demo_dumps(out: Path) -> dict[str, tuple[Path, bool]]:
    """SHA-256 -> (dump file, extracted?) for every dump under a demo run's cache."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted((out / "cache").rglob("*.npz")):
        extracted = path.parent == out / "cache" / "dumps"
        found[hashlib.sha256(path.read_bytes()).hexdigest()] = (path, extracted)
    return found


def demo_data(out: Path) -> dict[str, Any]:
    """Every retrieval number of a demo run, in its tier, and its identity verdict."""
    from audiorepro.checks.tiers import tier_cell

    bundle = _bundle(out)
    dumps = demo_dumps(out)
    cells = {}
    for cell in bundle["cells"]:
        path, extracted = dumps[cell["dump_sha256"]]
        cells[cell["id"]] = tier_cell(
            cell["metrics"], cell["profiles"], load_dump(path), extracted=extracted
        )
    verification = bundle["verification"]
    return with_legend(
        {
            "cells": cells,
            "identity": {
                "verdict": verification["checkpoint_identity"]["verdict"],
                "weights": verification["checkpoint_identity"]["weights"]["status"],
            },
            "golden_counts": verification["golden"]["counts"],
            "definitions_version": bundle["definitions_version"],
        }
    )


def probe_data(out: Path) -> dict[str, Any]:
    """Every metric of every probe run, and the family means: all tier a (float64 over the
    shipped prediction files, with order-fixed sums)."""
    from audiorepro.runner.kinds.probe.runs import flatten

    bundle = _bundle(out)
    return with_legend(
        {
            "runs": {r["id"]: flatten(r["report"]) for r in bundle["runs"] if r["report"]},
            "family_means": bundle["family_means"],
            "task_leaders": bundle.get("task_leaders", []),
        }
    )


def dump_yaml(data: dict[str, Any], filename: Path) -> None:
    from pytest_regressions.data_regression import RegressionYamlDumper

    text = yaml.dump_all(
        [data], Dumper=RegressionYamlDumper, default_flow_style=False, allow_unicode=True,
        indent=2, encoding="utf-8",
    )  # fmt: skip
    filename.write_bytes(text)


def compare_with_golden(data: dict[str, Any], golden: Path) -> list[str]:
    """The differences between ``data`` and the golden file (missing file: one line)."""
    if not golden.is_file():
        return [f"{golden}: missing golden file (a missing golden is a failure)"]
    return compare(yaml.safe_load(golden.read_text()), json.loads(json.dumps(data)))


@pytest.fixture
def tiered_regression(data_regression: Any) -> Callable[[dict[str, Any], Path], None]:
    """pytest-regressions' check (``--force-regen`` included), comparing by tier."""
    from pytest_regressions.common import perform_regression_check

    def check(data: dict[str, Any], fullpath: Path) -> None:
        __tracebackhide__ = True

        def check_fn(obtained: Path, expected: Path) -> None:
            problems = compare(
                yaml.safe_load(Path(expected).read_text()),
                yaml.safe_load(Path(obtained).read_text()),
            )
            if problems:
                raise AssertionError("\n".join([f"golden values differ: {expected}", *problems]))

        perform_regression_check(
            datadir=data_regression.datadir,
            original_datadir=data_regression.original_datadir,
            request=data_regression.request,
            check_fn=check_fn,
            dump_fn=lambda filename: dump_yaml(data, Path(filename)),
            extension=".yml",
            basename=None,
            fullpath=fullpath,
            force_regen=data_regression.force_regen,
            with_test_class_names=data_regression.with_test_class_names,
        )

    return check

"""Golden values for the shipped fixture dumps (pytest-regressions).

Regenerate only on purpose (``pytest --force-regen``) and explain every changed number under
"Changed numbers" in CHANGELOG.md. A missing golden file is a failure, never a skip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from audiorepro.formats.dump import load_dump
from audiorepro.metrics.retrieval import compute_retrieval, metrics_report
from tests.conftest import DUMPS, GOLDEN


@pytest.mark.parametrize("path", DUMPS, ids=[p.stem for p in DUMPS])
def test_fixture_metrics_golden(path: Path, data_regression: Any) -> None:
    dump = load_dump(path)
    report = metrics_report(dump, compute_retrieval(dump))
    golden = GOLDEN / "fixtures" / f"{path.stem}.yml"
    data_regression.check(report, fullpath=golden)


def test_every_fixture_has_a_golden_file() -> None:
    names = {p.stem for p in DUMPS}
    goldens = {p.stem for p in (GOLDEN / "fixtures").glob("*.yml")}
    assert names == goldens

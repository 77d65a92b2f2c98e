"""Golden values for the shipped fixture dumps (pytest-regressions).

Regenerate only on purpose (``pytest --force-regen``) and explain every changed number under
"Changed numbers" in CHANGELOG.md. A missing golden file is a failure, never a skip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DUMPS, GOLDEN
from tests.goldens import fixture_data


@pytest.mark.parametrize("path", DUMPS, ids=[p.stem for p in DUMPS])
def test_fixture_metrics_golden(path: Path, tiered_regression: Any) -> None:
    """Shipped dumps through the exact engine: every value tier a, equal to the last bit."""
    tiered_regression(fixture_data(path), GOLDEN / "fixtures" / f"{path.stem}.yml")


def test_every_fixture_has_a_golden_file() -> None:
    names = {p.stem for p in DUMPS}
    goldens = {p.stem for p in (GOLDEN / "fixtures").glob("*.yml")}
    assert names == goldens

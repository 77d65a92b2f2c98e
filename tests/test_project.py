"""Project-level guarantees: independence of the reference, fixtures, parameter checks."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from audiorepro.core.errors import UserError
from audiorepro.metrics import retrieval
from tests.conftest import FIXTURES, ROOT

SRC = ROOT / "src" / "audiorepro"


def _imports(package: Path) -> set[str]:
    names: set[str] = set()
    for py in package.rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
    return names


def test_reference_and_harness_share_no_code() -> None:
    ref, harness = _imports(SRC / "reference"), _imports(SRC / "metrics")
    assert not any(
        n.startswith("audiorepro") and not n.startswith("audiorepro.reference") for n in ref
    ), ref
    assert not any(n.startswith("audiorepro.reference") for n in harness), harness


def test_fixtures_regenerate_bit_identically() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_fixtures.py"), "all", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for kind, files in (("dumps", 4), ("audio", 7), ("probe", 6)):
        assert (FIXTURES / kind / "SHA256SUMS").read_text().count("\n") == files, kind


K_FUNCS = [
    retrieval.hit_rate_at_k,
    retrieval.recall_at_k,
    retrieval.mean_average_precision_at_k,
    retrieval.hit_at_k_per_query,
    retrieval.recall_at_k_per_query,
]


@pytest.mark.parametrize("func", K_FUNCS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "5", None])
def test_every_k_parameter_is_checked_alike(func: object, bad: object) -> None:
    """One error table for every ranking metric with a cut-off (torchmetrics' drift, avoided)."""
    ranking = retrieval.Ranking.from_lists([[1], [2]])
    with pytest.raises(UserError) as info:
        func(ranking, k=bad)  # type: ignore[operator]
    assert str(info.value) == (
        f"The 'k' parameter of {func.__name__} must be an int >= 1. Got {bad!r}."  # type: ignore[attr-defined]
    )


def test_every_k_function_is_in_the_error_table() -> None:
    import inspect

    with_k = {
        name
        for name, f in vars(retrieval).items()
        if inspect.isfunction(f)
        and f.__module__ == retrieval.__name__
        and not name.startswith("_")
        and "k" in inspect.signature(f).parameters
    }
    # average_precision_per_query takes k=None to mean "no cut-off".
    assert with_k - {"average_precision_per_query"} == {f.__name__ for f in K_FUNCS}


def test_metric_registry_directions_and_docstrings() -> None:
    for name, metric in retrieval.METRICS.items():
        doc = metric.func.__doc__ or ""
        assert "Formula:" in doc and "Ties:" in doc and ">>>" in doc, name
        assert metric.higher_is_better == (name not in {"mean_rank", "median_rank"})


def test_tie_policy_checked() -> None:
    with pytest.raises(UserError, match="'tie_policy' parameter"):
        retrieval.ranking_from_scores([[1.0]], [[0]], tie_policy="random")  # type: ignore[arg-type]


METRIC_MODULES = ["regression", "classification", "events", "vectors"]
#: Public helpers that compute no metric themselves (a doctest is still required).
HELPERS = {
    "valid_pairs",
    "average_ranks",
    "iou_matrix",
    "match_events",
    "decode_events",
    "confusion_matrix",
}


@pytest.mark.parametrize("module", METRIC_MODULES)
def test_every_probe_metric_documents_formula_ties_and_example(module: str) -> None:
    import importlib
    import inspect

    mod = importlib.import_module(f"audiorepro.metrics.{module}")
    for name, func in vars(mod).items():
        if (
            not inspect.isfunction(func)
            or func.__module__ != mod.__name__
            or name.startswith("_")
            or name.endswith("_report")
        ):
            continue
        doc = func.__doc__ or ""
        assert ">>>" in doc, f"{module}.{name}: no doctest"
        if name not in HELPERS:
            assert "Formula" in doc and "Ties:" in doc, f"{module}.{name}: formula or ties"

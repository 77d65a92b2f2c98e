"""Project-level guarantees: independence of the reference, fixtures, parameter checks."""

from __future__ import annotations

import ast
import configparser
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from audiorepro.core.errors import UserError
from audiorepro.metrics import retrieval
from tests.conftest import FIXTURES, ROOT

SRC = ROOT / "src" / "audiorepro"


def _imports(package: Path, root: Path = SRC.parent) -> set[str]:
    """Every module ``package`` imports, relative imports resolved (``from ..metrics import x``
    is ``audiorepro.metrics.x``), imports inside functions included."""
    names: set[str] = set()
    for py in package.rglob("*.py"):
        parts = py.relative_to(root).with_suffix("").parts
        here = parts if py.name == "__init__.py" else parts[:-1]
        here = tuple(p for p in here if p != "__init__")
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here[: len(here) - node.level + 1]
                    base = ".".join((*up, base) if base else up)
                names.add(base)
                names.update(f"{base}.{a.name}" for a in node.names)
    return names


def test_import_scan_resolves_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "audiorepro" / "reference"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import retrieval\n")
    (pkg / "retrieval.py").write_text("def f():\n    from ..metrics import retrieval\n")
    names = _imports(pkg, tmp_path)
    assert "audiorepro.metrics.retrieval" in names
    assert "audiorepro.reference.retrieval" in names


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
    for kind, files in (("dumps", 5), ("audio", 7), ("probe", 35)):
        assert (FIXTURES / kind / "SHA256SUMS").read_text().count("\n") == files, kind


K_FUNCS = [
    retrieval.hit_rate_at_k,
    retrieval.recall_at_k,
    retrieval.mean_average_precision_at_k,
    retrieval.hit_at_k_per_query,
    retrieval.recall_at_k_per_query,
    retrieval.precision_at_k,
    retrieval.precision_at_k_per_query,
    retrieval.mean_reciprocal_rank_at_k,
    retrieval.ndcg_at_k,
]
#: Their ``k=None`` means "no cut-off"; any other bad value is refused as above.
OPTIONAL_K_FUNCS = [
    retrieval.average_precision_per_query,
    retrieval.reciprocal_rank_per_query,
    retrieval.ndcg_per_query,
    retrieval.ndcg_tie_averaged_per_query,
]


@pytest.mark.parametrize(
    ("func", "bad"),
    [
        (f, bad)
        for f in K_FUNCS + OPTIONAL_K_FUNCS
        for bad in (0, -1, 1.5, True, "5", None)
        if not (bad is None and f in OPTIONAL_K_FUNCS)  # None: no cut-off, a valid call
    ],
    ids=lambda v: getattr(v, "__name__", repr(v)),
)
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
    assert with_k == {f.__name__ for f in K_FUNCS + OPTIONAL_K_FUNCS}


def test_metric_registry_directions_and_docstrings() -> None:
    for name, metric in retrieval.METRICS.items():
        doc = metric.func.__doc__ or ""
        assert "Formula:" in doc and "Ties:" in doc and ">>>" in doc, name
        assert metric.higher_is_better == (name not in {"mean_rank", "median_rank"})


def test_tie_policy_checked() -> None:
    with pytest.raises(UserError, match="'tie_policy' parameter"):
        retrieval.ranking_from_scores([[1.0]], [[0]], tie_policy="random")  # type: ignore[arg-type]


METRIC_MODULES = ["regression", "classification", "events", "vectors", "hear"]
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


def test_every_extra_named_to_users_exists() -> None:
    """A message telling users to install an extra names one that pyproject.toml defines."""
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    named = {
        m.group(1)
        for py in SRC.rglob("*.py")
        for m in re.finditer(r"audiorepro\[([A-Za-z0-9_,-]+)\]", py.read_text())
    }
    assert named, "the scan found no install hint at all"
    assert {e for n in named for e in n.split(",")} <= extras


def test_placeholder_is_defined_once() -> None:
    """The text standing for a hash not yet known is one constant, not three copies."""
    text = "to be filled on first verified download"
    where = [
        f"{py.relative_to(SRC)}:{node.lineno}"
        for py in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(py.read_text()))
        if isinstance(node, ast.Constant) and node.value == text
    ]
    assert where == ["core/hashing.py:" + where[0].rpartition(":")[2]], where


def test_every_reference_function_is_used_by_a_test() -> None:
    """A reference function no test calls checks nothing (event_counts once sat unused)."""
    tests = "".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    unused = [
        f"{py.stem}.{node.name}"
        for py in (SRC / "reference").glob("*.py")
        for node in ast.parse(py.read_text()).body
        if isinstance(node, ast.FunctionDef)
        and not node.name.startswith("_")
        and not re.search(rf"\.{node.name}\b|\b{node.name}\(", tests)
    ]
    assert unused == []


def test_numba_cache_persists_between_tox_runs() -> None:
    """tox empties {envtmpdir} on every run: a cache there recompiles every kernel each time.
    The default lives under the tox work folder, and NUMBA_CACHE_DIR set outside still wins."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "tox.ini")
    setenv = dict(
        line.split("=", 1)
        for line in config["testenv"]["setenv"].strip().splitlines()
        if "=" in line
    )
    value = {k.strip(): v.strip() for k, v in setenv.items()}["NUMBA_CACHE_DIR"]
    assert "{envtmpdir}" not in value, value
    assert value.startswith("{env:NUMBA_CACHE_DIR:") and "{toxworkdir}" in value, value


def test_demo_published_values_are_package_data() -> None:
    """The demo and selfcheck read their published values from package data (golden/ is not
    installed): a file the wheel ships, not numbers copied into the code."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["audiorepro"]
    data = SRC / "data" / "demo_published.toml"
    assert data.is_file()
    assert any(data.relative_to(SRC).match(g) for g in globs), globs
    demo = (SRC / "runner" / "demo.py").read_text()
    floats = [
        node.value
        for node in ast.walk(ast.parse(demo))
        if isinstance(node, ast.Constant) and isinstance(node.value, float)
    ]
    assert floats == [], floats


def test_tests_are_network_free_unless_marked() -> None:
    """A connection off this machine fails at once in a test not marked network."""
    with pytest.raises(OSError, match="network-free test"):
        socket.create_connection(("192.0.2.1", 80), timeout=0.1)  # TEST-NET-1: never routed

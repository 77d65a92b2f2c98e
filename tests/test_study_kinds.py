"""The study-kind interface (:mod:`audiorepro.runner.kinds`): a new kind is one module.

The toy kind (``tests/toy_kind.py``: its spec, computation, records, numbers and what can move
each) is copied into a temporary folder and imported from there, which registers it, as a
plugin's module would, without touching the package; the runner then runs it like the
built-in kinds: its steps, the tables, the three outputs and the manifest, publication,
``verify OUT`` and the typed view of its numbers; and ``reproduce``, ``verify OUT`` and
``diff`` run on study files of it, ``diff`` naming the cause of each moved number from what
the kind declares (issue 45 item 5).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.runner.kinds import (
    BUILT_IN,
    Context,
    diff_kinds,
    kind_named,
    kind_names,
    numeric_leaves,
    register_kind,
    unregister_kind,
)
from audiorepro.runner.study import run_studies, verify_output_dir, verify_study

#: The toy kind's module: copied into a temporary folder and imported from there.
TOY = Path(__file__).parent / "toy_kind.py"


def _import_toy(folder: Path) -> ModuleType:
    """The toy kind's module imported from ``folder`` (as a plugin's would be): importing
    it registers the kind."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(TOY, folder / "toy_count_kind.py")
    spec = importlib.util.spec_from_file_location("toy_count_kind", folder / "toy_count_kind.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["toy_count_kind"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def toy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    module = _import_toy(tmp_path_factory.mktemp("plugin"))
    try:
        yield module
    finally:
        unregister_kind("toy-count")
        sys.modules.pop("toy_count_kind", None)


@pytest.fixture
def toy_kind(toy: ModuleType) -> Any:
    kind = kind_named("toy-count")
    assert isinstance(kind, toy.CountKind)
    return kind


def _study(tmp_path: Path, published: float = 6.0) -> Any:
    toy = sys.modules["toy_count_kind"]
    source = tmp_path / "toy.toml"
    source.write_text('kind = "toy-count"\n')
    return toy.CountStudy(
        "toy", "A toy study", source, {"a": (1, 2, 3), "b": (4, 5)}, {"a": published}
    )


def test_the_builtin_kinds_are_registered() -> None:
    assert {"retrieval", "probe", "zeroshot"} <= set(kind_names())
    assert kind_named("retrieval").extracts and kind_named("zeroshot").extracts
    assert not kind_named("probe").extracts


def test_the_built_in_table_names_each_kind_s_module_and_schema() -> None:
    """``diff`` imports a built-in kind by the table (:data:`BUILT_IN`), not by importing every
    kind: each entry's module, imported alone in a fresh process, registers the kind of that
    schema, and every kind the package registers has its entry."""
    import subprocess

    code = (
        "import importlib, sys\n"
        "from audiorepro.runner.kinds import _KINDS\n"
        "module, schema = sys.argv[1:]\n"
        "importlib.import_module(module)\n"
        "print(*sorted(k.bundle_schema for k in _KINDS.values()))\n"
    )
    for schema, module in BUILT_IN.items():
        done = subprocess.run(
            [sys.executable, "-c", code, module, schema], capture_output=True, text=True, check=True
        )
        assert schema in done.stdout.split(), module
    built_in = {
        k.bundle_schema
        for k in map(kind_named, kind_names())
        if type(k).__module__.startswith("audiorepro.")
    }
    assert built_in == set(BUILT_IN)
    assert set(diff_kinds()) >= built_in and all(
        diff_kinds()[s].bundle_schema == s for s in built_in
    )
    assert "toy/1" not in diff_kinds() and "nope/1" not in diff_kinds()


def test_an_unknown_kind_names_the_available_ones() -> None:
    with pytest.raises(UserError, match=r"Unknown study kind 'nope'\. Available: .*probe"):
        kind_named("nope")


def test_a_second_kind_of_one_name_is_refused(toy: ModuleType) -> None:
    class Other(toy.CountKind):  # type: ignore[name-defined,misc]
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_kind(Other)
    assert isinstance(kind_named("toy-count"), toy.CountKind)


def test_a_toy_kind_runs_through_the_runner(toy_kind: Any, tmp_path: Path) -> None:
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


def test_a_toy_kind_runs_its_steps_in_order(toy_kind: Any, tmp_path: Path) -> None:
    from audiorepro.runner.kinds import run_kind

    calls: list[str] = []
    real_load = toy_kind.load

    def load(study: Any, ctx: Context) -> Any:
        state = real_load(study, ctx)
        calls.append("seen")
        state.steps = calls
        return state

    toy_kind.load = load
    (tmp_path / "o").mkdir()
    outcome = run_kind(toy_kind, _study(tmp_path, published=7.0), Context(tmp_path / "o", tmp_path))
    assert calls == ["seen", "compute", "parity", "published", "tables", "bundle"]
    # A published value that fails is a failure in the common words of every kind.
    assert outcome["failures"] == ["published a sum: FAIL"]


def test_verify_study_of_a_toy_kind(toy_kind: Any, tmp_path: Path) -> None:
    assert verify_study(_study(tmp_path), tmp_path)["counts"]["PASS"] == 1


def _toy_file(folder: Path, b: str = "[4, 5]", offset: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "toy.toml"
    path.write_text(
        'schema = "audiorepro.study/1"\nkind = "toy-count"\nname = "toy"\n'
        f"offset = {offset}\n"
        '[[cell]]\nid = "a"\nvalues = [1, 2, 3]\n'
        f'[[cell]]\nid = "b"\nvalues = {b}\n'
        '[[published]]\ncell = "a"\nsum = ' + f"{6.0 + 3 * offset}\n"
    )
    return path


def _diff(a: Path, b: Path, json_out: Path, code: int) -> dict[str, Any]:
    assert main(["diff", str(a), str(b), "--json", str(json_out)]) == code
    return dict(json.loads(json_out.read_text()))


def test_reproduce_verify_and_diff_a_toy_kind_from_its_study_file(
    toy: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The toy kind's study files through the CLI: ``reproduce`` (its own spec parses the
    file), ``verify OUT``, and ``diff`` of two runs where one cell's values changed (that
    cell's numbers move, caused by its inputs; its count of values moved by nothing else)
    and of two runs where the study's offset changed (every sum and mean moves, caused by the
    run's study record; no count moves)."""
    runs = tmp_path / "runs"
    base = _toy_file(tmp_path / "base")
    assert main(["reproduce", str(base), "--out", str(runs / "base")]) == 0
    assert main(["verify", str(runs / "base")]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["verify", str(base)]) == 0  # verify STUDY: the kind recomputes the sum
    assert "PASS" in capsys.readouterr().out
    # a rerun: identical, nothing named
    assert main(["reproduce", str(base), "--out", str(runs / "again")]) == 0
    doc = _diff(runs / "base", runs / "again", tmp_path / "same.json", 0)
    assert doc["verdict"] == "identical" and [c for c in doc["causes"] if c["numbers"]] == []
    assert doc["kind"] == "toy/1" and {n["path"] for n in doc["numbers"]} >= {"a/sum", "b/n"}
    # one cell's values changed: its sum, mean, count and values move, caused by its inputs
    other = _toy_file(tmp_path / "other", b="[4, 5, 9]")
    assert main(["reproduce", str(other), "--out", str(runs / "other")]) == 0
    assert main(["verify", str(runs / "other")]) == 0
    capsys.readouterr()
    doc = _diff(runs / "base", runs / "other", tmp_path / "cell.json", 1)
    assert doc["verdict"] == "changed, explained"
    moved = {n["path"]: n for n in doc["numbers"] if n["verdict"] != "identical"}
    assert set(moved) == {"b/sum", "b/mean", "b/n", "b/values/2"}  # the new value too
    assert moved["b/sum"]["a"] == 9 and moved["b/sum"]["b"] == 18
    assert {c for n in moved.values() for c in n["causes"]} == {"b:inputs"}
    named = {c["key"]: c["numbers"] for c in doc["causes"]}
    assert sorted(named["b:inputs"]) == ["b/mean", "b/n", "b/sum", "b/values/2"]
    assert {c["cell"]: c["verdict"] for c in doc["cells"]}["a"] == "identical"
    out = capsys.readouterr().out
    assert "inputs        b: " in out and "DEFECT" not in out
    # the study's offset changed: every sum and mean moves, caused by the run's study
    # record; the counts do not move, and the offset is not named for them
    shifted = _toy_file(tmp_path / "shifted", offset=1)
    assert main(["reproduce", str(shifted), "--out", str(runs / "shifted")]) == 0
    doc = _diff(runs / "base", runs / "shifted", tmp_path / "offset.json", 1)
    moved = {n["path"]: n for n in doc["numbers"] if n["verdict"] != "identical"}
    assert {"a/sum", "a/mean", "b/sum", "b/mean"} <= set(moved)
    assert not any(p.endswith("/n") or "/values/" in p for p in moved)
    assert all(n["causes"] == ["run:study"] for n in moved.values())
    (study,) = [c for c in doc["causes"] if c["key"] == "run:study"]
    assert '"offset": 0' in study["a"] and '"offset": 1' in study["b"]


def test_a_study_file_of_an_unregistered_kind_names_the_registered_ones(
    toy: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _toy_file(tmp_path / "s")
    unregister_kind("toy-count")
    assert main(["reproduce", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "is 'toy-count'; expected one of retrieval, probe" in err
    assert not (tmp_path / "o").exists()

"""One home per study kind (issue 45): a kind's spec lives beside its computation
(``runner/kinds/<kind>/spec.py``), the study frame (``specs/study.py``) dispatches through
the one registration, and a study loads from a fresh process with only the frame imported."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SPECS = ROOT / "src" / "audiorepro" / "specs"
STUDIES = ROOT / "studies"
#: The kinds whose spec has moved to its home, and the study file the repository bundles.
MOVED = {
    "retrieval": "clap_retrieval.toml",
    "probe": "probe_published_layout.toml",
    "zeroshot": "esc50_zeroshot.toml",
    "linear-probe": "esc50_linear_probe.toml",
    "speaker-verification": "speaker_verification.toml",
}
#: Every built-in kind has its home, hear too (it bundles no study: one is written per test).
AT_HOME = (*MOVED, "hear")
#: A hear study whose task folder is absent: loaded with ``strict=False``, its cell is kept and
#: its values are NOT VERIFIED, as ``verify`` loads it.
HEAR_STUDY = """schema = "audiorepro.study/1"
name = "hear-home"
kind = "hear"

[[cell]]
id = "words"
model = "hear:m"
tasks_dir = "absent"
task = "words-v1-full"
"""


#: The kinds whose every spec part has moved home, and those parts (``runner/kinds/<kind>/``).
WHOLE = {
    "probe": ("content_spec", "derived", "gates", "measurements", "published", "runpattern"),
}


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return done.stdout


def test_a_moved_kind_loads_with_only_the_frame_imported(tmp_path: Path) -> None:
    # Nothing imported but the frame: the frame finds the kind through the registration.
    hear = tmp_path / "hear.toml"
    hear.write_text(HEAR_STUDY, encoding="utf-8")
    studies = {kind: STUDIES / name for kind, name in MOVED.items()} | {"hear": hear}
    assert list(studies) == list(AT_HOME)
    for kind, path in studies.items():
        out = _fresh(
            "import sys\n"
            "from audiorepro.specs.study import load_study\n"
            "assert 'audiorepro.runner.study' not in sys.modules\n"
            f"s = load_study({str(path)!r}, strict=False)\n"
            "print(s.kind, type(s).__module__)\n"
        )
        assert out.split() == [kind, f"audiorepro.runner.kinds.{kind.replace('-', '_')}.spec"]


def test_the_frame_reaches_the_kinds_only_through_the_registry_name() -> None:
    # No module of the specs layer imports a kind; the frame imports the registration module by
    # its one name (KIND_REGISTRY), nothing else by name.
    for path in sorted(SPECS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("audiorepro.runner"), (path, node.lineno)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
                assert path.name == "study.py", (path, node.lineno)
                assert [ast.unparse(a) for a in node.args] == ["KIND_REGISTRY"], node.lineno
    out = _fresh("from audiorepro.specs.study import KIND_REGISTRY as K; print(K)")
    assert out.strip() == "audiorepro.runner.study"


def test_an_old_import_of_a_moved_name_finds_the_kind_s_own_class() -> None:
    out = _fresh(
        "from audiorepro.specs import study\n"
        "from audiorepro.runner.kinds.zeroshot import spec\n"
        "print(study.ZeroshotStudy is spec.ZeroshotStudy)\n"
    )
    assert out.strip() == "True"


def test_the_frame_is_small_and_every_moved_kind_has_its_spec_at_home() -> None:
    frame = SPECS / "study.py"
    assert len(frame.read_text(encoding="utf-8").splitlines()) <= 400
    kinds = ROOT / "src" / "audiorepro" / "runner" / "kinds"
    for kind in AT_HOME:
        assert (kinds / kind.replace("-", "_") / "spec.py").is_file(), kind
    # No kind's module is left beside the folders, nor a kind's spec in the frame's layer.
    assert not list(kinds.glob("hear*.py"))
    assert not (SPECS / "hear_study.py").exists()


def owned_by(home: str, edges: dict[str, set[str]]) -> list[str]:
    """The modules of ``specs/`` that only ``home`` (a kind's package) imports, directly or through
    other such modules; the command line (above every kind) does not count as an owner."""
    owned: set[str] = set()
    grew = True
    while grew:
        grew = False
        for module in sorted(m for m in edges if m.startswith("audiorepro.specs.")):
            importers = {m for m, ts in edges.items() if module in ts}
            importers = {m for m in importers if not m.startswith("audiorepro.cli")}
            mine = all(m == home or m.startswith(home + ".") or m in owned for m in importers)
            if module not in owned and importers and mine:
                owned.add(module)
                grew = True
    return sorted(owned)


def test_a_whole_kind_s_spec_parts_live_in_its_folder() -> None:
    from tests.test_layout import graph

    edges = graph()
    kinds = ROOT / "src" / "audiorepro" / "runner" / "kinds"
    for kind, parts in WHOLE.items():
        for part in parts:
            assert (kinds / kind / f"{part}.py").is_file(), (kind, part)
        assert owned_by(f"audiorepro.runner.kinds.{kind}", edges) == [], kind


def test_a_spec_part_only_one_kind_imports_is_found() -> None:
    # The check above can fail: a specs module only the probe kind imports, and one that only
    # such a module and the kind import, are both the kind's own; one the frame uses is not.
    edges = {
        "audiorepro.specs.study": {"audiorepro.specs.cells"},
        "audiorepro.specs.cells": set(),
        "audiorepro.specs.gates": set(),
        "audiorepro.specs.content": {"audiorepro.specs.gates"},
        "audiorepro.runner.kinds.probe.spec": {
            "audiorepro.specs.content",
            "audiorepro.specs.gates",
            "audiorepro.specs.cells",
        },
        "audiorepro.cli.study": {"audiorepro.specs.content"},
    }
    assert owned_by("audiorepro.runner.kinds.probe", edges) == [
        "audiorepro.specs.content",
        "audiorepro.specs.gates",
    ]


def test_the_probe_records_resolve_without_their_computation() -> None:
    """The probe bundle's records import their field types for real, from light modules
    (``metrics/probe_records.py``: the report; ``runner/kinds/probe/measured.py``: a saved
    file as read): in a fresh process every annotation of a run's records resolves and the
    bundle's JSON Schema builds with no hook bound first, and neither the saved files' reading
    (its pydantic models) nor the metrics that compute a report are imported for it."""
    out = _fresh(
        "import json, sys, typing\n"
        "from pydantic import TypeAdapter\n"
        "from audiorepro.runner.kinds.probe import records\n"
        "hints = {n: sorted(typing.get_type_hints(getattr(records, n)))\n"
        "         for n in ('ProbeRun', 'ProbeRunRecord')}\n"
        "schema = TypeAdapter(records.ProbeBundle).json_schema()\n"
        "reading = 'audiorepro.runner.kinds.probe.measurements' in sys.modules\n"
        "print(json.dumps({'hints': hints, 'defs': sorted(schema['$defs']), 'reading': reading}))\n"
    )
    got = json.loads(out)
    assert {"report", "documents"} <= set(got["hints"]["ProbeRun"])
    assert "report" in got["hints"]["ProbeRunRecord"]
    assert {"ProbeReport", "RegressionReport", "HumanCutReport"} <= set(got["defs"])
    assert got["reading"] is False

"""``audiorepro diff``: one factor changed at a time, and the cause it names.

Models-free runs here (fixture dumps, the synthetic probe demo) and in-memory views for the
comparison's bounds; the runs that extract with tiny models are in ``test_diff_runs.py``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from audiorepro.checks.diff import (
    ENVIRONMENT,
    Identity,
    NumberRecord,
    RunView,
    bundle_view,
    flatten_zeroshot,
    leaves,
)
from audiorepro.checks.diff_compare import compare_runs
from audiorepro.checks.diff_load import load_run
from audiorepro.cli import main
from audiorepro.runner.demo import prepare_probe_demo
from tests.conftest import ROOT
from tests.test_outputs_folder import _study as synthetic_study


def read_bundle(out: Path) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes())))


def write_bundle(out: Path, bundle: dict[str, Any]) -> None:
    """Rewrite a run's bundle as a run that recorded these values would have."""
    data = json.dumps(bundle, sort_keys=True).encode()
    (out / "bundle.json.gz").write_bytes(gzip.compress(data, mtime=0))


def diff(a: Path, b: Path, *args: str) -> int:
    return main(["diff", str(a), str(b), *args])


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One models-free retrieval run over two fixture dumps."""
    tmp = tmp_path_factory.mktemp("synthetic")
    assert main(["reproduce", str(synthetic_study(tmp)), "--out", str(tmp / "out")]) == 0
    return tmp / "out"


def copy_run(run: Path, tmp_path: Path, name: str = "b") -> Path:
    shutil.copytree(run, tmp_path / name)
    return tmp_path / name


def test_retrieval_numbers_of_shipped_dumps_are_tier_a_and_depend_on_their_dump(
    synthetic: Path,
) -> None:
    bundle = read_bundle(synthetic)
    view = load_run(synthetic).view
    five = bundle["cells"][0]
    assert five["id"] == "five"
    expected = {f"five/metrics/{p}" for p, _ in leaves(five["metrics"])}
    assert expected <= set(view.numbers)
    r1 = view.numbers["five/metrics/t2a/r@1"]
    assert r1.value == five["metrics"]["t2a"]["r@1"] and r1.tier == "a"
    assert r1.higher_is_better is True
    assert view.numbers["five/metrics/t2a/mean_rank"].higher_is_better is False
    assert "five:inputs" in r1.depends_on and "one:inputs" not in r1.depends_on
    # tier a does not depend on the machine: a move under another CPU would be a defect
    assert not any(k.endswith(tuple(ENVIRONMENT)) for k in r1.depends_on)
    assert {n.tier for n in view.numbers.values()} == {"a"}
    assert view.identities["five:inputs"].value["dump_sha256"] == five["dump_sha256"]
    assert view.identities["run:hardware"].kind == "hardware"  # from the manifest


def test_rerun_is_identical_and_another_thread_count_moves_nothing(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    study = synthetic_study(tmp_path)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "again")]) == 0
    capsys.readouterr()
    assert diff(synthetic, tmp_path / "again") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(": identical")
    assert re.search(r"threads +run: .*OMP_NUM_THREADS.*: moved nothing", out)
    assert "0 of " in out


def test_a_tampered_number_with_nothing_else_changed_is_a_defect(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = copy_run(synthetic, tmp_path)
    bundle = read_bundle(b)
    bundle["cells"][1]["metrics"]["a2t"]["mrr"] += 0.125
    write_bundle(b, bundle)
    capsys.readouterr()
    assert diff(synthetic, b) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(": changed, unexplained")
    assert lines[2].startswith("DEFECT: 1 number(s) moved although nothing")
    assert "one/metrics/a2t/mrr" in lines[3] and "|delta| 0.125" in lines[3]
    assert "nothing it depends on differs" in lines[3]


def test_a_bumped_definitions_version_names_definitions(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = copy_run(synthetic, tmp_path)
    bundle = read_bundle(b)
    bundle["definitions_version"] += 1
    bundle["cells"][0]["metrics"]["t2a"]["map"] += 0.25
    write_bundle(b, bundle)
    capsys.readouterr()
    assert diff(synthetic, b, "--json", str(tmp_path / "d.json")) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(": changed, explained")
    assert re.search(r"definitions +run: 1 -> 2: moved 1 number\(s\), largest \|delta\| 0.25", out)
    doc = json.loads((tmp_path / "d.json").read_text())
    moved = [n for n in doc["numbers"] if n["verdict"] != "identical"]
    assert [(n["path"], n["causes"]) for n in moved] == [
        ("five/metrics/t2a/map", ["run:definitions"])
    ]


def test_another_shipped_dump_names_inputs_of_that_cell_only(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = copy_run(synthetic, tmp_path)
    bundle = read_bundle(b)
    bundle["cells"][1]["dump_sha256"] = "0" * 64
    bundle["cells"][1]["n_captions"] -= 1
    bundle["cells"][1]["metrics"]["t2a"]["r@1"] = 0.0
    write_bundle(b, bundle)
    capsys.readouterr()
    assert diff(synthetic, b, "--json", str(tmp_path / "d.json")) == 1
    doc = json.loads((tmp_path / "d.json").read_text())
    named = {c["key"] for c in doc["causes"] if c["numbers"]}
    assert named == {"one:inputs"}
    cause = next(c for c in doc["causes"] if c["key"] == "one:inputs")
    assert cause["kind"] == "inputs" and "captions)" in cause["b"]
    assert {c["cell"]: c["verdict"] for c in doc["cells"]}["five"] == "identical"


def _view(value_b: float, *, hardware_b: str = "avx512") -> tuple[RunView, RunView]:
    """Two one-number runs (a tier-b metric) whose hardware may differ."""
    deps = frozenset({"run:study", "run:definitions", "c:weights", "run:hardware"})

    def one(value: float, hardware: str) -> RunView:
        number = NumberRecord("c/metrics/t2a/r@1", "c", value, True, "b", deps, rule="retrieval")
        ids = [
            Identity("run:study", "study", "run", {"tie_policy": "pessimistic"}),
            Identity("run:definitions", "definitions", "run", 1),
            Identity("c:weights", "weights", "c", {"weights_sha256": {"w.pt": "ab"}}),
            Identity("run:hardware", "hardware", "run", {"torch_cpu_capability": hardware}),
        ]
        return RunView("audiorepro.bundle/1", "s", {number.path: number}, {i.key: i for i in ids})

    return one(0.5, "avx512"), one(value_b, hardware_b)


@pytest.mark.parametrize(
    ("value_b", "hardware_b", "strict", "verdict"),
    [
        (0.5, "default", False, "identical"),
        (0.55, "default", False, "within tier"),
        (0.55, "default", True, "changed, explained"),
        (0.75, "default", False, "changed, explained"),
        (0.55, "avx512", False, "changed, unexplained"),
    ],
)
def test_the_bound_a_hardware_difference_allows(
    value_b: float, hardware_b: str, strict: bool, verdict: str
) -> None:
    a, b = _view(value_b, hardware_b=hardware_b)
    result = compare_runs(a, b, tolerance=lambda record: 0.1, strict=strict)
    assert result.verdict == verdict
    (number,) = result.numbers
    if verdict != "identical":
        assert number.causes == (() if "unexplained" in verdict else ("run:hardware",))
    # --strict changes the verdict, not the fact that the move is within the bound
    assert number.within_tier == (value_b < 0.6 and "unexplained" not in verdict)


def test_no_derived_tolerance_is_not_within_tier() -> None:
    a, b = _view(0.5000001, hardware_b="default")
    result = compare_runs(a, b, tolerance=lambda record: None)
    assert result.verdict == "changed, explained" and result.numbers[0].tolerance is None


def _zeroshot_bundle() -> dict[str, Any]:
    meta = {
        "model": "tiny-laion",
        "revision": None,
        "weights_sha256": {"tiny-laion.pt": "a" * 64},
        "preprocessing": {"truncation": "fusion"},
        "resampler": "scipy",
        "versions": {"torch": "2.9.1"},
    }
    cell = {
        "id": "x/esc50",
        "model": "x",
        "dump": "dumps/x.npz",
        "dump_sha256": "b" * 64,
        "n_clips": 9,
        "n_classes": 3,
        "model_meta": meta,
        "metrics": {
            "canonical": {"pessimistic": {"accuracy": 0.5, "per_class_recall": {"dog": 1.0}}},
            "laion-clap-zeroshot": {"R@1": 0.5, "mean_rank": 1.5},
        },
    }
    return {
        "schema": "audiorepro.zeroshot-bundle/1",
        "study": {
            "name": "z",
            "tie_policy": "pessimistic",
            "definitions_version": 1,
            "inputs": {"audio_sha256": "c" * 64, "n_clips": 9, "template": "a {class}"},
        },
        "cells": [cell, {**cell, "id": "y/esc50"}],
        "verification": {},
    }


def test_zero_shot_numbers_are_tier_b_and_a_swapped_checkpoint_names_its_cell() -> None:
    bundle = _zeroshot_bundle()
    records = {r.path: r for r in flatten_zeroshot(bundle)}
    assert records["x/esc50/metrics/canonical/pessimistic/accuracy"].tier == "b"
    assert records["x/esc50/n_clips"].tier == "a"
    other = json.loads(json.dumps(bundle))
    other["cells"][1]["model_meta"]["weights_sha256"] = {"tiny-laion.pt": "d" * 64}
    other["cells"][1]["metrics"]["laion-clap-zeroshot"]["R@1"] = 0.75
    result = compare_runs(bundle_view(bundle), bundle_view(other), tolerance=lambda r: None)
    assert result.verdict == "changed, explained"
    moved = [c for c in result.causes if c.numbers]
    assert [c.difference.key for c in moved] == ["y/esc50:weights"]
    assert moved[0].numbers == ("y/esc50/metrics/laion-clap-zeroshot/R@1",)
    assert "dddd" in moved[0].difference.b and "aaaa" in moved[0].difference.a
    template = json.loads(json.dumps(bundle))
    template["study"]["inputs"]["template"] = "the {class}"
    template["cells"][0]["metrics"]["laion-clap-zeroshot"]["R@1"] = 0.25
    result = compare_runs(bundle_view(bundle), bundle_view(template), tolerance=lambda r: None)
    assert {c.difference.kind for c in result.causes if c.numbers} == {"preprocessing"}


def test_a_changed_encoder_source_is_named_encoder_code() -> None:
    """Same weights, other encoder code (a user's module edited): the moved numbers name
    ``encoder code`` of that cell, not weights and not an unexplained move."""
    bundle = _zeroshot_bundle()
    for cell in bundle["cells"]:
        cell["model_meta"]["encoder_code"] = {"source_sha256": "e" * 64, "version": None}
    other = json.loads(json.dumps(bundle))
    other["cells"][0]["model_meta"]["encoder_code"] = {"source_sha256": "f" * 64, "version": None}
    other["cells"][0]["metrics"]["canonical"]["pessimistic"]["accuracy"] = 0.75
    result = compare_runs(bundle_view(bundle), bundle_view(other), tolerance=lambda r: None)
    assert result.verdict == "changed, explained"
    moved = [c for c in result.causes if c.numbers]
    assert [c.difference.key for c in moved] == ["x/esc50:encoder code"]
    assert moved[0].difference.kind == "encoder code"
    assert "ffff" in moved[0].difference.b


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("probe-diff")
    study = prepare_probe_demo(work / "inputs")
    assert main(["reproduce", str(study), "--out", str(work / "out")]) == 0
    return study, work / "out"


def test_a_probe_study_whose_saved_file_changed_names_inputs_of_that_run(
    probe_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study, out = probe_run
    inputs = tmp_path / "inputs"
    shutil.copytree(study.parent, inputs)
    saved = inputs / "runs" / "clap-linear__legacy__test.json"
    old = saved.read_bytes()
    record = json.loads(old)
    record["burst_end_mae_s"] += 0.01
    saved.write_text(json.dumps(record))
    text = (inputs / "study.toml").read_text()
    import hashlib

    text = text.replace(
        hashlib.sha256(old).hexdigest(), hashlib.sha256(saved.read_bytes()).hexdigest()
    )
    (inputs / "study.toml").write_text(text)
    assert main(["reproduce", str(inputs / "study.toml"), "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert diff(out, tmp_path / "b", "--json", str(tmp_path / "d.json")) == 1
    doc = json.loads((tmp_path / "d.json").read_text())
    named = {c["key"] for c in doc["causes"] if c["numbers"]}
    assert named == {"clap-linear/legacy:inputs"}
    moved = {n["path"] for n in doc["numbers"] if n["verdict"] != "identical"}
    assert "clap-linear/legacy/saved/test/burst_end_mae_s" in moved
    assert all(n["verdict"] == "changed, explained" for n in doc["numbers"] if n["path"] in moved)


def test_json_validates_against_its_schema_and_html_is_deterministic(
    synthetic: Path, tmp_path: Path
) -> None:
    b = copy_run(synthetic, tmp_path)
    bundle = read_bundle(b)
    bundle["cells"][0]["metrics"]["t2a"]["r@5"] = 0.0
    write_bundle(b, bundle)
    schema = json.loads((ROOT / "docs" / "schemas" / "diff.schema.json").read_text())
    for name in ("1", "2"):
        assert diff(synthetic, b, "--json", str(tmp_path / f"{name}.json"),
                    "--html", str(tmp_path / f"{name}.html")) == 1  # fmt: skip
        jsonschema.validate(json.loads((tmp_path / f"{name}.json").read_text()), schema)
    assert (tmp_path / "1.html").read_bytes() == (tmp_path / "2.html").read_bytes()
    page = (tmp_path / "1.html").read_text()
    assert "changed, unexplained" in page and "five/metrics/t2a/r@5" in page
    assert "<script" in page and "http" not in page.replace("https://", "")  # self-contained
    with pytest.raises(jsonschema.ValidationError):
        broken = json.loads((tmp_path / "1.json").read_text())
        broken["numbers"][0]["tier"] = "z"
        jsonschema.validate(broken, schema)


def test_reproduce_against_a_committed_bundle(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline.json.gz"
    shutil.copy(synthetic / "bundle.json.gz", baseline)
    study = synthetic_study(tmp_path)
    capsys.readouterr()
    assert (
        main(["reproduce", str(study), "--out", str(tmp_path / "run"), "--against", str(baseline)])
        == 0
    )
    assert ": identical" in capsys.readouterr().out
    bundle = json.loads(gzip.decompress(baseline.read_bytes()))
    bundle["cells"][0]["metrics"]["t2a"]["r@1"] = 0.0
    baseline.write_bytes(gzip.compress(json.dumps(bundle).encode()))
    code = main(
        ["reproduce", str(study), "--out", str(tmp_path / "run2"), "--against", str(baseline)]
    )
    assert code == 1
    assert ": changed, unexplained" in capsys.readouterr().out
    assert (
        main(
            [
                "reproduce",
                str(study),
                "--out",
                str(tmp_path / "run3"),
                "--against",
                str(tmp_path / "none"),
            ]
        )
        == 2
    )
    assert not (tmp_path / "run3").exists()  # refused before any work


def readme_diff_commands() -> list[str]:
    text = (ROOT / "docs" / "studies.md").read_text()
    section = re.search(r"^## Why did it move: diff\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section is not None, "docs/studies.md needs the section 'Why did it move: diff'"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), re.S)
    return [
        line for b in blocks for line in b.splitlines() if line.strip() and not line.startswith("#")
    ]


def test_readme_ci_recipe_runs_as_written(tmp_path: Path) -> None:
    """The diff commands of docs/studies.md, in a folder holding a study, each as written (with
    ``audiorepro`` this checkout's command line)."""
    commands = readme_diff_commands()
    assert any("--against" in c for c in commands) and any(
        c.startswith("audiorepro diff") for c in commands
    )
    synthetic_study(tmp_path)
    shell = f'audiorepro() {{ "{sys.executable}" -m audiorepro "$@"; }}\nset -e\n'
    for command in commands:
        result = subprocess.run(
            ["bash", "-c", shell + command], cwd=tmp_path, env=dict(os.environ),
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])


def test_a_bundle_alone_is_compared_with_the_top_level_study_of_a_folder(
    synthetic: Path, probe_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """A folder with a nested study (as the demo's probe/): folder against folder compares
    both studies; a bundle alone holds the top-level one only, and is compared with that."""
    folder = copy_run(synthetic, tmp_path, "nested")
    shutil.copytree(probe_run[1], folder / "probe")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["outputs"]["probe/bundle.json.gz"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    both = load_run(folder).view
    assert any(p.startswith("probe/clap-linear/legacy/") for p in both.numbers)
    assert "probe/clap-linear/legacy:inputs" in both.identities
    assert diff(folder, folder) == 0
    assert diff(synthetic / "bundle.json.gz", folder) == 0
    # two folders, one with a nested study and one without: not two runs of one study
    assert diff(folder, synthetic) == 2


def test_counts_of_ranks_follow_the_cell_tier_and_counts_of_inputs_are_exact(
    synthetic: Path,
) -> None:
    """Over an extracted dump a rank histogram's counts can move with the CPU (tier b, the
    rank rule); the numbers of clips and captions cannot (tier a)."""
    bundle = read_bundle(synthetic)
    bundle["cells"][0]["model_meta"] = {"model": "m", "weights_sha256": {"w.pt": "a" * 64}}
    numbers = bundle_view(bundle).numbers
    counts = [n for p, n in numbers.items() if p.startswith("five/rank_histogram/t2a/counts/")]
    assert counts and {(n.tier, n.rule) for n in counts} == {("b", "ranks")}
    assert numbers["five/n_clips"].tier == "a" and numbers["five/metrics/t2a/r@1"].tier == "b"
    assert "run:hardware" in numbers["five/metrics/t2a/r@1"].depends_on
    assert {n.tier for p, n in numbers.items() if p.startswith("one/")} == {"a"}

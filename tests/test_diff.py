"""``audiorepro diff``: one factor changed at a time, and the cause it names.

Models-free runs here (fixture dumps, the synthetic probe demo) and in-memory views for the
comparison's bounds; the runs that extract with tiny models are in ``test_diff_runs.py``.
"""

from __future__ import annotations

import gzip
import hashlib
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
    flatten,
)
from audiorepro.checks.diff import bundle_view as _bundle_view
from audiorepro.checks.diff_compare import compare_runs
from audiorepro.checks.diff_load import LoadedRun
from audiorepro.checks.diff_load import load_run as _load_run
from audiorepro.checks.numbers import numeric_leaves, readable
from audiorepro.cli import main
from audiorepro.runner.demo import prepare_probe_demo
from audiorepro.runner.kinds import diff_kinds
from tests.conftest import ROOT
from tests.test_outputs_folder import _study as synthetic_study


def load_run(path: Path) -> LoadedRun:
    """A run read as ``audiorepro diff`` reads it: each bundle as its kind declares it."""
    return _load_run(path, diff_kinds())


def bundle_view(bundle: dict[str, Any]) -> RunView:
    return _bundle_view(bundle, diff_kinds()[bundle["schema"]])


def read_bundle(out: Path) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes())))


def write_bundle(out: Path, bundle: dict[str, Any]) -> None:
    """Rewrite a run's bundle as a run that recorded these values would have (its hash in
    the manifest too: ``diff`` compares only folders that hold what their run wrote)."""
    data = json.dumps(bundle, sort_keys=True).encode()
    (out / "bundle.json.gz").write_bytes(gzip.compress(data, mtime=0))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["outputs"]["bundle.json.gz"] = hashlib.sha256(
        (out / "bundle.json.gz").read_bytes()
    ).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))


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
    expected = {f"five/metrics/{readable(w)}" for w, _ in numeric_leaves(five["metrics"])}
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
    assert re.search(r"threads +run: .*OMP_NUM_THREADS.*: moved nothing", out, re.S)
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
    assert re.search(r"definitions +run: 1 -> 2: moved 2 number\(s\), largest \|delta\| 1", out)
    doc = json.loads((tmp_path / "d.json").read_text())
    moved = [n for n in doc["numbers"] if n["verdict"] != "identical"]
    assert [(n["path"], n["causes"]) for n in moved] == [  # the version is a number too
        ("definitions_version", ["run:definitions"]),
        ("five/metrics/t2a/map", ["run:definitions"]),
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
    records = {r.path: r for r in flatten(bundle, diff_kinds()[bundle["schema"]])}
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


def test_a_count_of_clips_names_only_the_clips_not_an_encoder_edit() -> None:
    """Issue 43 item 5: the second run has other clips and an edited encoder: the accuracy
    moved and both can have moved it; the count of clips moved and only the clips can have:
    the encoder edit is not named for it."""
    bundle = _zeroshot_bundle()
    for cell in bundle["cells"]:
        cell["model_meta"]["encoder_code"] = {"source_sha256": "e" * 64, "version": None}
    other = json.loads(json.dumps(bundle))
    other["study"]["inputs"] = {**bundle["study"]["inputs"], "audio_sha256": "d" * 64}
    other["study"]["inputs"]["n_clips"] = 8
    cell = other["cells"][0]
    cell["model_meta"]["encoder_code"] = {"source_sha256": "f" * 64, "version": None}
    cell["n_clips"] = 8
    cell["metrics"]["canonical"]["pessimistic"]["accuracy"] = 0.625
    result = compare_runs(bundle_view(bundle), bundle_view(other), tolerance=lambda r: None)
    causes = {n.path: n.causes for n in result.numbers if n.verdict != "identical"}
    assert causes["x/esc50/n_clips"] == ("x/esc50:inputs",)
    accuracy = causes["x/esc50/metrics/canonical/pessimistic/accuracy"]
    assert {"x/esc50:inputs", "x/esc50:encoder code"} <= set(accuracy)
    # y's count of clips did not move (its clips changed too, by the study's record)
    assert "y/esc50/n_clips" not in causes


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
    for path in sorted((folder / "probe").rglob("*")):  # as a run with a nested study writes
        if path.is_file() and "cache" not in path.relative_to(folder).parts:
            rel = path.relative_to(folder).as_posix()
            manifest["outputs"][rel] = hashlib.sha256(path.read_bytes()).hexdigest()
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


# ---------------------------------------------------------------- verified ground (issue 35)


def test_a_tampered_folder_is_not_compared_and_its_file_is_named(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table edited after its run, and a bundle number edited without its manifest: the
    folder fails its manifest, so the verdict is that (exit 1), never ``identical``."""
    b = copy_run(synthetic, tmp_path)
    table = next(iter(sorted((b / "tables").glob("*.csv"))))
    table.write_text(table.read_text() + "edited,1\n")
    capsys.readouterr()
    assert diff(synthetic, b, "--json", str(tmp_path / "d.json")) == 1
    out = capsys.readouterr().out
    rel = table.relative_to(b).as_posix()
    assert f"NOT COMPARED: {b} fails its manifest: {rel}: SHA-256 differs" in out
    assert "identical" not in out and "DEFECT" not in out
    assert not (tmp_path / "d.json").exists()  # nothing compared, nothing written
    c = copy_run(synthetic, tmp_path, "c")
    bundle = read_bundle(c)
    bundle["cells"][0]["metrics"]["t2a"]["r@1"] += 0.5
    (c / "bundle.json.gz").write_bytes(gzip.compress(json.dumps(bundle).encode(), mtime=0))
    assert diff(c, synthetic) == 1
    assert f"{c} fails its manifest: bundle.json.gz: SHA-256" in capsys.readouterr().out


def test_a_folder_whose_signature_fails_under_key_is_not_compared(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --key, each folder must be signed by it: an unsigned one is named."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public = Ed25519PrivateKey.generate().public_key()
    key = tmp_path / "key.pub.pem"
    key.write_bytes(
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    capsys.readouterr()
    assert diff(synthetic, synthetic, "--key", str(key)) == 1
    out = capsys.readouterr().out
    assert "fails its manifest: attestation.intoto.json: missing" in out


def _pools(out: Path, pools: list[dict[str, Any]]) -> None:
    """Record these BLAS thread pools in OUT's manifest (the manifest lists no hash of
    itself), in this order."""
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["environment"]["blas"]["threadpools"] = pools
    (out / "manifest.json").write_text(json.dumps(manifest))


POOLS = [
    {"architecture": "SkylakeX", "internal_api": "openblas", "num_threads": 2,
     "user_api": "blas", "version": "0.3.30"},
    {"architecture": "Cooperlake", "internal_api": "openblas", "num_threads": 2,
     "user_api": "blas", "version": "0.3.23.dev"},
]  # fmt: skip


def test_thread_pools_in_another_import_order_are_no_cause_and_a_move_stays_unexplained(
    synthetic: Path, tmp_path: Path
) -> None:
    """threadpoolctl lists pools in import order, which differs between two runs on one
    machine: compared as a set, so the runs differ in nothing, and a number that moved is
    ``changed, unexplained`` (a bug), never blamed on another machine."""
    a, b = copy_run(synthetic, tmp_path, "a"), copy_run(synthetic, tmp_path, "b")
    _pools(a, POOLS)
    _pools(b, POOLS[::-1])
    assert diff(a, b, "--json", str(tmp_path / "d.json")) == 0
    assert json.loads((tmp_path / "d.json").read_text())["causes"] == []
    bundle = read_bundle(b)
    bundle["cells"][0]["model_meta"] = {"model": "m", "weights_sha256": {"w.pt": "a" * 64}}
    write_bundle(b, bundle)  # now tier b: it depends on the machine
    bundle_a = read_bundle(a)
    bundle_a["cells"][0]["model_meta"] = bundle["cells"][0]["model_meta"]
    write_bundle(a, bundle_a)
    bundle["cells"][0]["metrics"]["t2a"]["r@1"] += 0.001
    write_bundle(b, bundle)
    assert diff(a, b, "--json", str(tmp_path / "d.json")) == 1
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["verdict"] == "changed, unexplained" and doc["causes"] == []


def test_values_in_causes_are_shown_whole(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = copy_run(synthetic, tmp_path)
    manifest = json.loads((b / "manifest.json").read_text())
    cpu = "CPU " + " ".join(f"flag{i}" for i in range(80)) + " END"
    manifest["environment"]["cpu"] = cpu
    (b / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert diff(synthetic, b, "--json", str(tmp_path / "d.json")) == 0
    out = capsys.readouterr().out
    assert "..." not in out
    words = [w.strip('",{}:') for line in out.splitlines() for w in line.split()]
    assert all(f"flag{i}" in words for i in range(80)) and "END" in words
    assert max(len(line) for line in out.splitlines() if "flag" in line) <= 100  # wrapped
    (hardware,) = [c for c in json.loads((tmp_path / "d.json").read_text())["causes"]
                   if c["kind"] == "hardware"]  # fmt: skip
    assert cpu in hardware["b"]


def test_every_number_of_the_typed_view_is_compared() -> None:
    """diff's numbers are the kind's typed view: every number of the bundle, once."""
    from audiorepro.runner.kinds import typed_numbers

    bundle = _zeroshot_bundle()
    view = bundle_view(bundle)
    assert len(view.numbers) == len(list(typed_numbers(bundle)))
    leaves = {readable(w) for w, _ in numeric_leaves(bundle)}
    assert len(leaves) == len(view.numbers)


@pytest.fixture(scope="module")
def layout_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The probe layout study (derived numbers, a result manifest, no predictions), run once
    from a copy of its tree; returns (the copy's study file, OUT)."""
    from tests.test_probe_layout import STUDY, TREE

    work = tmp_path_factory.mktemp("layout")
    shutil.copytree(TREE, work / TREE.name)
    shutil.copy(STUDY, work / STUDY.name)
    out = work / "layout-out"
    assert main(["reproduce", str(work / STUDY.name), "--out", str(out)]) == 0
    return work / STUDY.name, out


def test_two_runs_of_one_command_on_one_machine_have_no_cause(
    layout_run: tuple[Path, Path], tmp_path: Path
) -> None:
    study, base = layout_run
    assert main(["reproduce", str(study), "--out", str(tmp_path / "again")]) == 0
    assert diff(base, tmp_path / "again", "--json", str(tmp_path / "d.json")) == 0
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["verdict"] == "identical" and doc["causes"] == []
    paths = {n["path"] for n in doc["numbers"]}
    assert any(p.startswith("derived/") for p in paths)
    assert any(p.startswith("result_manifest/") for p in paths)


def test_a_moved_derived_number_names_its_file(
    layout_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job's ElapsedRaw times 10 and the training SD times 3, rerun: tracked GPU-hours and
    every CPS normalized MAE move, each with the file it is derived from as its cause."""
    study, base = layout_run
    work = tmp_path / "work"
    shutil.copytree(study.parent, work, ignore=shutil.ignore_patterns("layout-out"))
    tree = work / "probe_published_layout"
    jobs = tree / "embedding_probe_study_20261006" / "consolidated_benchmark" / "job_audit.json"
    record = json.loads(jobs.read_text())
    record["jobs"][2]["ElapsedRaw"] = str(int(record["jobs"][2]["ElapsedRaw"]) * 10)  # sacct text
    jobs.write_text(json.dumps(record))
    norm = tree / "hf_layered_release" / "model" / "training_normalization.json"
    sd = json.loads(norm.read_text())
    sd["cps_std"] *= 3
    norm.write_text(json.dumps(sd))
    assert main(["reproduce", str(work / study.name), "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert diff(base, tmp_path / "b", "--json", str(tmp_path / "d.json")) == 1
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["verdict"] == "changed, explained"
    moved = {n["path"]: n for n in doc["numbers"] if n["verdict"] != "identical"}
    jobs_key = (
        "probe_published_layout/embedding_probe_study_20261006/consolidated_benchmark/"
        "job_audit.json:inputs"
    )
    norm_key = "probe_published_layout/hf_layered_release/model/training_normalization.json:inputs"
    gpu = moved["derived/1/values/"]  # gpu_hours, the study's second [[derived]]
    assert gpu["b"] > gpu["a"] and jobs_key in gpu["causes"] and norm_key not in gpu["causes"]
    cps = [n for p, n in moved.items() if p.startswith("derived/0/values/")]
    with gzip.open(base / "bundle.json.gz", "rt") as fh:  # every run with a CPS MAE moves
        derived = json.load(fh)["derived"][0]["values"]
    assert len(cps) == sum(v is not None for v in derived.values()) > 0
    for n in cps:
        assert abs(n["b"] * 3 - n["a"]) < 1e-9 and norm_key in n["causes"], n
        assert jobs_key not in n["causes"]
    assert moved["result_manifest/derived/gpu_hours"]["causes"] == [jobs_key]
    # (the attempt table's own ElapsedRaw is sacct's text in the module's layout: no number)
    out = capsys.readouterr().out
    assert "consolidated_benchmark/job_audit.json" in out and "DEFECT" not in out


def _moved(node: Any) -> Any:
    """Every float under ``node`` moved by 1e-3 (relative and absolute)."""
    if isinstance(node, dict):
        return {k: _moved(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_moved(v) for v in node]
    return node * 1.001 + 1e-3 if isinstance(node, float) else node


def test_two_bundles_of_over_a_thousand_cells_whose_every_number_moved_list_the_moves(
    synthetic: Path, tmp_path: Path
) -> None:
    """Issue 44 (round 4 left): two 1,000-cell bundles whose every number moved were refused
    as too many numbers (exit 2 after a second: 100,000 at most; these fixture cells hold 94
    numbers each, so 1,200 of them) and, with
    that bound lifted, took minutes (each study-level number and each cause walked every
    cell). Now: exit 1 with every move listed."""
    import copy

    bundle = read_bundle(synthetic)
    cells = [
        {**copy.deepcopy(bundle["cells"][i % len(bundle["cells"])]), "id": f"c{i:04d}"}
        for i in range(1200)
    ]
    a = {**bundle, "cells": cells, "paired_bootstrap": []}
    b = {**a, "cells": _moved(cells)}
    moved = sum(isinstance(v, float) for _, v in numeric_leaves(cells))
    assert sum(1 for _ in numeric_leaves(a)) > 100_000  # over the bound that refused it
    path_a = tmp_path / "a.json.gz"
    path_b = tmp_path / "b.json.gz"
    path_a.write_bytes(gzip.compress(json.dumps(a).encode(), mtime=0))
    path_b.write_bytes(gzip.compress(json.dumps(b).encode(), mtime=0))
    assert diff(path_a, path_b, "--json", str(tmp_path / "d.json")) == 1
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["verdict"] == "changed, unexplained"  # nothing recorded differs: a defect
    assert sum(n["verdict"] != "identical" for n in doc["numbers"]) == moved

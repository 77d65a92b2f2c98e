"""``audiorepro diff`` on real runs that extract with tiny models: one factor changed at a time
(another CPU dispatch, a swapped checkpoint, a preprocessing setting, a subset of the clips),
and the cause each names."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.synthetic.audio import IDENTITY_CLIPS
from audiorepro.synthetic.audio import build as build_audio
from tests.test_esc50 import tiny_study  # noqa: F401  (the zero-shot run, a fixture)

pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")


def _study(
    folder: Path, name: str, *, laion: str = "tiny", settings: str = "", audio: str = "audio"
) -> Path:
    """Two extracted cells on the fixture clips: tiny-laion (from registry folder ``laion``)
    and tiny-hf (seed 0). Paths are relative to ``folder``; the study's name is the same."""
    cells = ""
    for cid, model, registry in (("laion", "tiny-laion", laion), ("hf", "tiny-hf", "tiny")):
        cells += (
            f'[[cell]]\nid = "{cid}"\nmodel = "{model}"\ndataset = "clips"\n'
            f'[cell.extract]\nmodel = "{model}"\nregistry = "{registry}/registry.toml"\n'
            f'audio = "{audio}"\ncaptions = "{audio}/captions.csv"\n'
            f"settings = {{ batch_size = 2{settings} }}\n"
        )
    path = folder / f"{name}.toml"
    path.write_text(
        'schema = "audiorepro.study/1"\nname = "tiny-diff"\n'
        'profiles = ["canonical", "laion-clap"]\n'
        "bootstrap = { resamples = 50, seed = 0, level = 0.95 }\n" + cells
    )
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from audiorepro.models.tiny import build_tiny_models

    folder = tmp_path_factory.mktemp("tiny-diff")
    build_tiny_models(folder / "tiny", seed=0)
    build_tiny_models(folder / "tiny-seed1", seed=1)
    build_audio(folder / "audio", names=IDENTITY_CLIPS)
    build_audio(folder / "audio4", names=IDENTITY_CLIPS[:4])
    return folder


def _reproduce(study: Path, out: Path, **env: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "audiorepro", "reproduce", str(study), "--out", str(out)],
        env=dict(os.environ, **env), capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def baseline(inputs: Path) -> Path:
    _reproduce(_study(inputs, "base"), inputs / "runs" / "base")
    return inputs / "runs" / "base"


def _diff(a: Path, b: Path, tmp_path: Path, code: int) -> dict[str, Any]:
    assert main(["diff", str(a), str(b), "--json", str(tmp_path / "d.json")]) == code
    return dict(json.loads((tmp_path / "d.json").read_text()))


def _moved_by(doc: dict[str, Any]) -> dict[str, set[str]]:
    """Each cause that moved numbers -> the cells of those numbers."""
    cells = {n["path"]: n["cell"] for n in doc["numbers"]}
    return {c["key"]: {cells[p] for p in c["numbers"]} for c in doc["causes"] if c["numbers"]}


def test_another_cpu_dispatch_is_within_tier_b_and_names_hardware(
    inputs: Path, baseline: Path, tmp_path: Path
) -> None:
    _reproduce(_study(inputs, "base"), tmp_path / "default", ATEN_CPU_CAPABILITY="default")
    doc = _diff(baseline, tmp_path / "default", tmp_path, 0)
    assert doc["verdict"] in ("identical", "within tier")
    hardware = next(c for c in doc["causes"] if c["key"] == "run:hardware")
    assert "ATEN_CPU_CAPABILITY" in hardware["b"] and '"default"' in hardware["b"]
    for n in doc["numbers"]:
        if n["verdict"] != "identical":
            assert n["tier"] == "b" and n["within_tier"] and n["delta"] <= n["tolerance"]
            assert "run:hardware" in n["causes"]


def test_a_rerun_served_from_the_cache_records_the_same_machine(
    inputs: Path, baseline: Path, tmp_path: Path
) -> None:
    """Issue 44: torch's CPU capability and CUBLAS_WORKSPACE_CONFIG were recorded only when a
    model loaded, so a rerun served from the cache (a fresh process that never imports torch
    to extract) recorded None and diff named a machine change between two runs on one
    machine; and the OpenMP pools differed in count. Now both runs record the same."""
    import shutil

    again = tmp_path / "again"
    shutil.copytree(baseline, again)  # its cache holds both cells' extractions
    before = sorted(p.name for p in again.rglob("*.npz"))
    _reproduce(_study(inputs, "base"), again)
    assert sorted(p.name for p in again.rglob("*.npz")) == before  # nothing extracted anew
    envs = [json.loads((run / "manifest.json").read_text())["environment"]
            for run in (baseline, again)]  # fmt: skip
    for env in envs:
        assert env["cpu_dispatch"]["torch_cpu_capability"] is not None
        assert env["determinism_variables"]["CUBLAS_WORKSPACE_CONFIG"] is not None
    assert envs[0]["cpu_dispatch"] == envs[1]["cpu_dispatch"]
    doc = _diff(baseline, again, tmp_path, 0)
    assert doc["verdict"] == "identical"
    kinds = {c["kind"] for c in doc["causes"]}
    assert not kinds & {"hardware", "software"}, doc["causes"]
    # The extracting run loaded the model stack's OpenMP runtime, its threads fixed to the
    # kit's count; the run from the cache computed nothing with it and did not load it: the
    # thread pools may differ there, but they can name no number (none moved).
    assert all(not c["numbers"] for c in doc["causes"] if c["kind"] == "threads"), doc["causes"]


def test_a_rerun_with_another_thread_count_is_identical_and_names_threads(
    inputs: Path, baseline: Path, tmp_path: Path
) -> None:
    _reproduce(_study(inputs, "base"), tmp_path / "threads", OMP_NUM_THREADS="1")
    doc = _diff(baseline, tmp_path / "threads", tmp_path, 0)
    assert doc["verdict"] == "identical"
    threads = next(c for c in doc["causes"] if c["key"] == "run:threads")
    assert "OMP_NUM_THREADS" in threads["b"] and threads["numbers"] == []


def test_a_swapped_checkpoint_names_weights_of_that_cell_only(
    inputs: Path, baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _reproduce(_study(inputs, "seed1", laion="tiny-seed1"), tmp_path / "seed1")
    capsys.readouterr()
    doc = _diff(baseline, tmp_path / "seed1", tmp_path, 1)
    assert doc["verdict"] == "changed, explained"
    # the laion cell, and the paired comparison that holds it; nothing of hf alone
    assert _moved_by(doc) == {"laion:weights": {"laion", "hf | laion"}}
    assert {c["cell"]: c["verdict"] for c in doc["cells"]}["hf"] == "identical"
    assert "weights       laion: " in capsys.readouterr().out


def test_another_preprocessing_setting_names_preprocessing(
    inputs: Path, baseline: Path, tmp_path: Path
) -> None:
    study = _study(inputs, "fmax", settings=", frequency_max = 8000.0")
    _reproduce(study, tmp_path / "fmax")
    doc = _diff(baseline, tmp_path / "fmax", tmp_path, 1)
    moved = _moved_by(doc)
    assert set(moved) <= {"laion:preprocessing", "hf:preprocessing"} and moved
    assert moved.get("laion:preprocessing", {"laion"}) <= {"laion", "hf | laion"}
    cause = next(c for c in doc["causes"] if c["key"] == "laion:preprocessing")
    assert "frequency_max" in cause["a"] and "8000.0" in cause["b"]


def test_a_subset_of_the_clips_names_inputs_with_the_counts(
    inputs: Path, baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _reproduce(_study(inputs, "subset", audio="audio4"), tmp_path / "subset")
    capsys.readouterr()
    doc = _diff(baseline, tmp_path / "subset", tmp_path, 1)
    assert set(_moved_by(doc)) == {"laion:inputs", "hf:inputs"}
    cause = next(c for c in doc["causes"] if c["key"] == "laion:inputs")
    assert "4 of 5 clips" in cause["b"]
    assert "4 of 5 clips" in capsys.readouterr().out


def test_a_zero_shot_run_is_flattened_with_its_dumps_and_a_tampered_number_is_a_defect(
    tiny_study: tuple[Path, Path],  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    """A real zero-shot run (ESC-50 stand-in, tiny models): every number tier b but the
    counts, each cell's dump found for its tolerance, and an edited number unexplained."""
    import gzip
    import shutil

    from audiorepro.checks.diff_load import load_run
    from audiorepro.runner.kinds import diff_kinds

    _, out = tiny_study
    run = load_run(out, diff_kinds())
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    cells = [c["id"] for c in bundle["cells"]]
    assert set(run.dumps) == set(cells)
    accuracy = f"{cells[0]}/metrics/canonical/pessimistic/accuracy"
    assert run.view.numbers[accuracy].tier == "b"
    assert run.view.numbers[f"{cells[0]}/n_clips"].tier == "a"
    assert (
        run.view.identities[f"{cells[0]}:inputs"].value["n_clips"] == bundle["cells"][0]["n_clips"]
    )
    assert _diff(out, out, tmp_path, 0)["verdict"] == "identical"
    shutil.copytree(out, tmp_path / "b")
    bundle["cells"][0]["metrics"]["canonical"]["pessimistic"]["accuracy"] += 0.5
    (tmp_path / "b" / "bundle.json.gz").write_bytes(
        gzip.compress(json.dumps(bundle).encode(), mtime=0)
    )
    assert main(["diff", str(out), str(tmp_path / "b")]) == 1  # fails its manifest first
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest["outputs"]["bundle.json.gz"] = hashlib.sha256(
        (tmp_path / "b" / "bundle.json.gz").read_bytes()
    ).hexdigest()
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))  # as a run wrote it
    doc = _diff(out, tmp_path / "b", tmp_path, 1)
    assert doc["verdict"] == "changed, unexplained"
    assert doc["numbers"][0]["path"] == accuracy and doc["numbers"][0]["causes"] == []


def test_a_zero_shot_run_with_another_prompt_template_names_preprocessing(
    tiny_study: tuple[Path, Path],  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    """Issue 43 item 5: the second zero-shot run prompts with another template: every moved
    number is a cell's metric (or a row of it), caused by that cell's preprocessing (the
    template is recorded there); the clip counts stay identical, and no weights, encoder
    code or inputs are named."""
    import shutil

    study, out = tiny_study
    shutil.copytree(study.parent, tmp_path / "study")
    path = tmp_path / "study" / study.name
    text = path.read_text()
    path.write_text(text.replace("This is a sound of {class}", "A recording of {class}"))
    _reproduce(path, tmp_path / "b")
    doc = _diff(out, tmp_path / "b", tmp_path, 1)
    assert doc["verdict"] == "changed, explained"
    moved = [n for n in doc["numbers"] if n["verdict"] != "identical"]
    assert moved and any("/metrics/" in n["path"] for n in moved)
    assert not any(n["path"].endswith("/n_clips") for n in moved)
    named = {c for n in moved for c in n["causes"]}
    cells = {k for k in named if not k.startswith("run:")}
    assert cells and {k.rpartition(":")[2] for k in cells} == {"preprocessing"}, named
    # the two runs' machine records (this process and a subprocess) may differ too: they
    # can move these tier-b numbers, and only they are named besides the template
    assert {k.rpartition(":")[2] for k in named - cells} <= {"software", "hardware", "threads"}
    cause = next(c for c in doc["causes"] if c["kind"] == "preprocessing")
    assert "A recording of {class}" in cause["b"] and "This is a sound" in cause["a"]

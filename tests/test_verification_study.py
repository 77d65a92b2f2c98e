"""A speaker-verification study over a VoxCeleb-format synthetic trial list (issue 47): the
study's numbers equal the metrics computed directly from the embeddings, every definition is
checked against its twin (on a seeded subset of trials when the list is long), and the
benchmark of docs/benchmarks.md runs as written."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from audiorepro.cli.app import main
from audiorepro.core.hashing import sha256_file
from audiorepro.metrics.verification_toolkits import DEFINITIONS, compute_definitions
from audiorepro.runner.kinds import speaker_verification as kind
from tests.conftest import ROOT


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "verification_study", ROOT / "benchmarks" / "verification_study.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """50,000 VoxCeleb-format trials (the benchmark's data at test size), reproduced."""
    folder = tmp_path_factory.mktemp("synthetic")
    study = _benchmark().build(folder / "study", 50_000)
    assert main(["reproduce", str(study), "--out", str(folder / "out")]) == 0
    return folder / "study", folder / "out"


def _bundle(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))  # type: ignore[no-any-return]


def test_the_study_gives_the_metrics_computed_directly(synthetic: tuple[Path, Path]) -> None:
    study, out = synthetic
    arrays = np.load(study / "embeddings.npz")
    ids = {clip: i for i, clip in enumerate(arrays["audio_ids"].tolist())}
    emb = arrays["audio_embeds"].astype(np.float64)
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    lines = [line.split() for line in (study / "veri_test.txt").read_text().splitlines()]
    assert len(lines) == 50_000 and all(len(f) == 3 and f[1].startswith("id1") for f in lines)
    a = np.array([ids[f[1]] for f in lines])
    b = np.array([ids[f[2]] for f in lines])
    target = np.array([f[0] == "1" for f in lines])
    scores = (unit[a] * unit[b]).sum(axis=1)
    direct = compute_definitions(scores, target)
    [cell] = _bundle(out)["cells"]
    assert cell["target_trials"] == 25_000 and cell["nontarget_trials"] == 25_000
    for d in DEFINITIONS:  # summation order differs from einsum's: equal within 1e-9
        got, want = cell["definitions"][d.name], direct[d.name]
        assert got == pytest.approx(want, abs=1e-9), d.name
    assert cell["eer"] == cell["definitions"]["eer"] and 0.005 < cell["eer"] < 0.05


def test_every_definition_is_checked_on_the_twins_seeded_subset(
    synthetic: tuple[Path, Path],
) -> None:
    """50,000 trials > TWIN_TRIALS: the twin sees its seeded subset, and every definition with
    a twin is compared there."""
    _, out = synthetic
    parity = _bundle(out)["verification"]["metric_parity"]
    [cell] = parity["cells"]
    assert parity["passed"] is True and cell["passed"] is True
    assert cell["n_trials"] == kind.TWIN_TRIALS and cell["twin_subset_seed"] == kind.TWIN_SEED
    assert set(cell["definitions"]) == set(kind.TWINS) == {d.name for d in DEFINITIONS}
    for name, row in cell["definitions"].items():
        assert row["passed"] is True and row["ours"] is not None, name
        assert abs(row["ours"] - row["twin"]) <= row["tolerance"]
    assert cell["twin_eer_of_our_scores"] == cell["eer"]


def test_the_twin_subset_is_seeded_sorted_and_has_both_classes() -> None:
    target = np.zeros(100_000, dtype=bool)
    target[77_777] = True  # a single target trial: a plain draw misses it
    pick = kind.twin_subset(100_000, target)
    assert pick is not None and pick.size == kind.TWIN_TRIALS
    assert np.array_equal(pick, kind.twin_subset(100_000, target))
    assert np.all(np.diff(pick) > 0) and 77_777 in pick
    assert kind.twin_subset(kind.TWIN_TRIALS, target[: kind.TWIN_TRIALS]) is None


def test_a_definition_that_disagrees_with_its_twin_fails_parity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5]
    target = [True, False, True, False, False]
    assert all(r["passed"] for r in kind.definition_parity(scores, target).values())
    wrong = dict(kind.TWINS, cllr=lambda s, t: 1.0)
    monkeypatch.setattr(kind, "TWINS", wrong)
    rows = kind.definition_parity(scores, target)
    assert rows["cllr"]["passed"] is False and rows["eer"]["passed"] is True


def test_the_documented_benchmark_runs() -> None:
    """``benchmarks/verification_study.py`` (docs/benchmarks.md) at a small size; its figure
    is measured there, not asserted here."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "verification_study.py"), "--trials", "6000"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines()[-1].split()[0] == "6000"


def test_bootstrap_intervals_over_speakers_byte_identical_reruns(tmp_path: Path) -> None:
    """A cell with ``bootstrap`` (VoxCeleb paths name the speakers): the intervals contain
    the values, the parameters are recorded, the report and table show them, and a rerun
    writes the same bytes."""
    line = "bootstrap = { resamples = 40, seed = 3, level = 0.9 }\n"
    study = _benchmark().build(tmp_path / "s", 20_000, speakers=200, clips=20, cell=line)
    outs = [tmp_path / "one", tmp_path / "two"]
    for out in outs:
        assert main(["reproduce", str(study), "--out", str(out)]) == 0
    assert (outs[0] / "bundle.json.gz").read_bytes() == (outs[1] / "bundle.json.gz").read_bytes()
    assert (outs[0] / "report.html").read_bytes() == (outs[1] / "report.html").read_bytes()
    [cell] = _bundle(outs[0])["cells"]
    boot = cell["bootstrap"]
    assert {k: boot[k] for k in ("method", "resamples", "seed", "level", "speakers")} == {
        "method": "speakers", "resamples": 40, "seed": 3, "level": 0.9,
        "speakers": "voxceleb paths",
    }  # fmt: skip
    assert boot["n_speakers"] == 200 and boot["skipped"] == 0
    for name in ("eer", "min_dcf_p0.01", "min_dcf_p0.05"):
        low, high = boot["intervals"][name]
        assert low <= cell["definitions"][name] <= high and low < high, name
    report = (outs[0] / "report.html").read_text()
    low, high = boot["intervals"]["eer"]
    assert f"EER {cell['eer']:.4f} [{low:.4f}, {high:.4f}]" in report
    assert "Speaker verification: intervals over speakers" in report


def test_bootstrap_of_a_csv_list_needs_a_speakers_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kit's CSV names no speakers: without ``bootstrap.speakers`` one line, exit 2;
    with a speakers file the intervals are over its speakers."""
    study = _benchmark().build(tmp_path / "s", 3_000, speakers=30, clips=20)
    lines = [f.split() for f in (study.parent / "veri_test.txt").read_text().splitlines()]
    csv_list = study.parent / "trials.csv"
    csv_list.write_text("enrollment,test,target\n" + "".join(f"{a},{b},{t}\n" for t, a, b in lines))
    clips = sorted({c for _, a, b in lines for c in (a, b)})
    speakers = study.parent / "speakers.csv"
    speakers.write_text("file_name,speaker\n" + "".join(f"{c},{c[:7]}\n" for c in clips))
    text = study.read_text().replace("veri_test.txt", "trials.csv")
    text = re.sub(r'trials_sha256 = "\w+"', f'trials_sha256 = "{sha256_file(csv_list)}"', text)
    study.write_text(text + "bootstrap = { resamples = 20 }\n")
    capsys.readouterr()
    assert main(["reproduce", str(study), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "key 'cell[0].bootstrap.speakers': names no speakers" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
    study.write_text(text + 'bootstrap = { resamples = 20, speakers = "speakers.csv", '
                     f'speakers_sha256 = "{sha256_file(speakers)}" }}\n')  # fmt: skip
    assert main(["reproduce", str(study), "--out", str(tmp_path / "ok")]) == 0
    [cell] = _bundle(tmp_path / "ok")["cells"]
    assert cell["bootstrap"]["n_speakers"] == 30 and cell["bootstrap"]["speakers"] == "speakers.csv"
    manifest = json.loads((tmp_path / "ok" / "manifest.json").read_text())
    assert manifest["inputs"]["speakers.csv"] == sha256_file(speakers)

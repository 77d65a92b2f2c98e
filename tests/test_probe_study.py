"""The probe study kind: the synthetic demo end to end, goldens, incomplete studies, verify."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.runner.demo import prepare_probe_demo
from audiorepro.runner.kinds.probe.runs import flatten, leaders
from audiorepro.specs.study import load_study
from tests.conftest import FIXTURES, GOLDEN
from tests.goldens import probe_data

OUTPUTS = ("report.html", "bundle.json.gz", "verification.json")


def _run(study: Path, out: Path) -> int:
    return main(["reproduce", str(study), "--out", str(out)])


@pytest.fixture(scope="module")
def probe_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("probe")
    study = prepare_probe_demo(work / "inputs")
    assert _run(study, work / "out") == 0
    return study, work / "out"


def test_demo_inputs_are_the_shipped_fixtures(probe_demo: tuple[Path, Path]) -> None:
    study, _ = probe_demo
    shipped = (FIXTURES / "probe" / "SHA256SUMS").read_text().split()
    expected = dict(zip(shipped[1::2], shipped[0::2], strict=True))
    files: dict[str, str] = {}
    for path in (study, study.parent / "study_tampered.toml"):
        if path.name == "study_tampered.toml":
            path = prepare_probe_demo(study.parent, tampered=True)
        for r in load_study(path).runs:
            if r.predictions is not None and r.sha256 is not None:
                files[r.predictions.name] = r.sha256
            files.update({ref.path.name: ref.sha256 for ref in r.metrics.values()})
            if r.config is not None:
                files[r.config.path.name] = r.config.sha256
        files.update({s.path.name: s.sha256 for s in load_study(path).sections})
    assert files == expected


def test_demo_writes_every_table_kind(probe_demo: tuple[Path, Path]) -> None:
    _, out = probe_demo
    names = {p.stem for p in (out / "tables").glob("*.md")}
    assert {"leaders", "family_means", "target_valence", "classification_crema-like",
            "classification_ravdess-like", "events_iou_01", "events_iou_03", "events_iou_05",
            "events", "vectors"} <= names  # fmt: skip
    for stem in names:
        assert (out / "tables" / f"{stem}.csv").is_file() and (
            out / "tables" / f"{stem}.tex"
        ).is_file()
    leaders_md = (out / "tables" / "leaders.md").read_text()
    assert "normalized MAE ↓" in leaders_md and "balanced accuracy (%) ↑" in leaders_md
    # Accuracy and F1 as percentages, as the published probe report shows them.
    crema = next(x for x in leaders_md.splitlines() if x.startswith("| classification: crema"))
    assert "| 77.7778 |" in crema  # clap-mlp: 56/72 (golden/demo/probe.yml)
    # A target nobody annotated is undefined everywhere, never 0.
    assert "| regression: emotion_21 | normalized MAE ↓ | Not recorded / undefined |" in leaders_md
    report = (out / "report.html").read_text()
    assert (
        "PASSED" in report and "confusion matrix" in report and '<table class="sortable"' in report
    )


def test_leaders_follow_the_metric_direction() -> None:
    runs = [
        {"model": m, "corpus": None, "report": {"regression": {"t": {"normalized_mae": v}}}}
        for m, v in (("a", 0.5), ("b", 0.2), ("c", None))
    ]
    (task,) = leaders(runs)
    assert [r.model for r in task.ranking] == ["b", "a"] and task.undefined == ["c"]


def test_probe_golden(probe_demo: tuple[Path, Path], tiered_regression: Any) -> None:
    _, out = probe_demo
    tiered_regression(probe_data(out), GOLDEN / "demo" / "probe.yml")


def test_rerun_is_byte_identical(probe_demo: tuple[Path, Path], tmp_path: Path) -> None:
    study, out = probe_demo
    assert _run(study, tmp_path / "again") == 0
    for name in OUTPUTS:
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name


def _copy_study(probe_demo: tuple[Path, Path], tmp_path: Path) -> Path:
    study, _ = probe_demo
    shutil.copytree(study.parent, tmp_path / "inputs")
    return tmp_path / "inputs" / "study.toml"


def test_missing_run_and_missing_targets_make_the_study_incomplete(
    probe_demo: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _copy_study(probe_demo, tmp_path)
    (study.parent / "runs" / "clap-mlp__ravdess-like.npz").unlink()
    text = study.read_text().replace("n_targets = 24", "n_targets = 30", 1)
    study.write_text(text)
    out = tmp_path / "out"
    assert _run(study, out) == 1
    printed = capsys.readouterr().out
    assert (
        "declared run clap-mlp/ravdess-like: predictions file clap-mlp__ravdess-like.npz is missing"
        in printed
    )
    assert "run clap-linear/crema-like has 24 regression targets, 30 declared" in printed
    verification = json.loads((out / "verification.json").read_text())
    assert verification["probe_complete"] is False and len(verification["failures"]) == 2
    report = (out / "report.html").read_text()
    assert report.index("INCOMPLETE") < report.index("<h2>")


def test_published_probe_values_are_verified(
    probe_demo: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _copy_study(probe_demo, tmp_path)
    import gzip

    _, out = probe_demo
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    run = next(r for r in bundle["runs"] if r["id"] == "whisper-ft/crema-like")
    values = flatten(run["report"])
    published = {
        k: values[k]
        for k in ("regression/valence/spearman", "events/iou/0.5/f1", "classification/accuracy")
    }
    header = '\n[[published]]\ncell = "whisper-ft/crema-like"\ntolerance = 0.0\n'
    items = ", ".join(f'"{k}" = {v!r}' for k, v in published.items())
    block = header + 'provenance = "test"\nvalues = { ' + items + " }\n"
    study.write_text(study.read_text() + block)
    assert main(["verify", str(study)]) == 0
    assert "3 passed, 0 failed" in capsys.readouterr().out
    study.write_text(study.read_text().replace(repr(published["events/iou/0.5/f1"]), "0.5"))
    assert main(["verify", str(study)]) == 1
    assert "FAIL         whisper-ft/crema-like  events/iou/0.5/f1" in capsys.readouterr().out


@pytest.mark.parametrize(
    "edit, key, message",
    [
        (
            ('name = "probe-demo"', 'name = "probe-demo"\ncell = []'),
            "cell",
            "is for retrieval studies",
        ),
        (('kind = "probe"', 'kind = "probes"'), "kind", "expected one of retrieval, probe"),
        (('predictions = "runs/', 'predictions_ = "runs/'), "run[1].predictions_", "unknown key"),
    ],
)
def test_broken_probe_study(
    probe_demo: tuple[Path, Path], tmp_path: Path, edit: tuple[str, str], key: str, message: str
) -> None:
    study = _copy_study(probe_demo, tmp_path)
    study.write_text(study.read_text().replace(*edit, 1))
    with pytest.raises(UserError, match=message) as info:
        load_study(study)
    assert info.value.key == key


def test_unknown_probe_metric(probe_demo: tuple[Path, Path], tmp_path: Path) -> None:
    study = _copy_study(probe_demo, tmp_path)
    study.write_text(
        study.read_text()
        + '\n[[published]]\ncell = "clap-mlp/crema-like"\ntolerance = 0.0\nprovenance = "x"\n'
        + 'values = { "regression/valence/r2" = 0.5 }\n'
    )
    with pytest.raises(UserError, match="unknown probe metric") as info:
        load_study(study)
    assert info.value.key == "published[0].values.regression/valence/r2"


def test_changed_predictions_are_refused_before_work(
    probe_demo: tuple[Path, Path], tmp_path: Path
) -> None:
    study = _copy_study(probe_demo, tmp_path)
    target = study.parent / "runs" / "clap-mlp__crema-like.npz"
    target.write_bytes(target.read_bytes() + b"\0")
    with pytest.raises(UserError, match="the study expects") as info:
        load_study(study)
    assert info.value.key == "run[5].sha256"
    assert hashlib.sha256(target.read_bytes()).hexdigest() in str(info.value)


def test_the_bundle_is_what_its_typed_records_declare(probe_demo: tuple[Path, Path]) -> None:
    """The bundle validates against the schema generated from its typed records (the probe
    report, leaders, family means, runs): a record whose type says less or other than what
    is written fails here."""
    import gzip

    import jsonschema

    schema = json.loads(
        (Path(__file__).parent.parent / "docs/schemas/bundle.schema.json").read_text()
    )
    bundle = json.loads(gzip.decompress((probe_demo[1] / "bundle.json.gz").read_bytes()))
    assert any(r["report"] for r in bundle["runs"])  # a typed report is there
    jsonschema.validate(bundle, {"$defs": schema["$defs"], "$ref": "#/$defs/ProbeBundle"})

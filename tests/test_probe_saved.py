"""Probe studies from saved measurements: study keys, the metric-file schema, tables, parity."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.metrics.probe import family_mean
from audiorepro.runner.demo import prepare_probe_demo
from audiorepro.runner.kinds.probe.measurements import load_measurements, parse_measurements
from audiorepro.runner.kinds.probe.saved import saved_value
from audiorepro.specs.study import load_study


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _held_out(scale: float) -> dict[str, Any]:
    """A hand-written test_metrics.json; ``scale`` makes runs differ."""
    return {
        "clips": 10,
        "loss": 1.5 * scale,
        "per_score": [
            {
                "score": "emo_joy",
                "n": 10,
                "raw_mae": 0.5 * scale,
                "normalized_mae": 0.25 * scale,
                "pearson": 0.5,
                "spearman": 0.4,
            },
            {
                "score": "emo_anger",
                "n": 0,
                "raw_mae": None,
                "normalized_mae": None,
                "pearson": None,
                "spearman": None,
            },
            {
                "score": "emo_fear",
                "n": 10,
                "raw_mae": 1.0,
                "normalized_mae": 0.75 * scale,
                "pearson": 0.1,
                "spearman": 0.2,
            },
            {
                "score": "dnsmos:ovrl",
                "n": 9,
                "raw_mae": 0.3,
                "normalized_mae": 0.6,
                "pearson": 0.7,
                "spearman": 0.8,
            },
        ],
        "speaker_cosine": {
            "timbre": {"mean": 0.5 * scale, "n": 7},
            "identity": {"mean": 0.25, "n": 6},
        },
        "burst_localization": {
            t: {"precision": 0.5, "recall": 0.25, "f1": f, "matched": 3}
            for t, f in (("0.1", 0.5), ("0.3", 0.4), ("0.5", 0.3 * scale))
        },
        "frame_f1": 0.6,
        "cps_raw_mae": 1.25,
        "burst_start_mae_s": 0.05,
        "burst_end_mae_s": 0.07,
    }


RUNS = (
    # id, model, phase, kind, scale
    ("probe/legacy/a/linear", "A / LINEAR", "legacy", "frozen probe", 1.0),
    ("probe/tuned/a/linear", "A / LINEAR", "tuned", "frozen probe", 0.5),
    ("whisper/tuned/base", "Whisper Base", "tuned", "full fine-tune", 0.8),
)


def _saved_study(root: Path, *, extra: str = "") -> Path:
    """A study with saved measurements only: three runs, families, leaders, completion."""
    lines = ['schema = "audiorepro.study/1"', 'kind = "probe"', 'name = "saved"', ""]
    lines += ['config_fields = ["stages", "epochs", "lr", "seed"]', 'credits = "CC BY 4.0, tests"']
    lines += ["", "[families]", 'emotion = "emo_"', 'dnsmos = "dnsmos:"', ""]
    for run_id, model, phase, kind, scale in RUNS:
        folder = root / run_id.replace("/", "_")
        folder.mkdir(parents=True)
        test = folder / "test_metrics.json"
        test.write_text(json.dumps(_held_out(scale)))
        retention = folder / "p3_metrics.json"
        retention.write_text(json.dumps({"clips": 4, "frame_f1": 0.5 * scale}))
        lines += [
            "[[run]]",
            f'id = "{run_id}"',
            f'model = "{model}"',
            f'attributes = {{ phase = "{phase}", kind = "{kind}" }}',
            "[run.metrics.test]",
            f'file = "{test.relative_to(root)}"',
            f'sha256 = "{_sha(test)}"',
            "[run.metrics.p3]",
            f'file = "{retention.relative_to(root)}"',
            f'sha256 = "{_sha(retention)}"',
            "",
        ]
        if kind == "full fine-tune":
            config = folder / "config.json"
            config.write_text(json.dumps({"epochs": 2, "stages": ["S1", "S2"], "lr": 1e-5}))
            lines[-1:-1] = [
                "[run.config]",
                f'file = "{config.relative_to(root)}"',
                f'sha256 = "{_sha(config)}"',
            ]
    lines += [
        "[[leaders]]",
        'task = "Emotion targets"',
        'metric = "test/family/emotion/normalized_mae"',
        'direction = "lower"',
        'candidates = { kind = "frozen probe" }',
        'baselines = ["whisper/tuned/base"]',
        "",
        "[[leaders]]",
        'task = "Timbre"',
        'metric = "test/speaker_cosine/timbre/mean"',
        'direction = "higher"',
        'candidates = { kind = "frozen probe", phase = "legacy" }',
        'baselines = ["whisper/tuned/base"]',
        "",
        "[completion]",
        'runs = ["probe/legacy/a/linear", "probe/tuned/a/linear", "whisper/tuned/base"]',
        "targets = 4",
        "",
    ]
    notes = root / "notes.md"
    notes.write_text("Compare *within* a domain <b>only</b>.\n")
    lines += ["[[section]]", 'title = "Caveats"', 'file = "notes.md"', f'sha256 = "{_sha(notes)}"']
    study = root / "study.toml"
    study.write_text("\n".join(lines) + extra)
    return study


def test_family_mean_weights_each_valid_target_once() -> None:
    # Hand-computed: emotion has joy 0.25 and fear 0.75 (anger is null): (0.25 + 0.75) / 2.
    scores = _held_out(1.0)["per_score"]
    assert family_mean(scores, "emo_", "normalized_mae") == 0.5
    assert family_mean(scores, "emo_", "pearson") == pytest.approx(0.3)
    assert family_mean(scores, "nope", "pearson") is None
    saved = {"test": parse_measurements(_held_out(1.0), "test", source="t.json")}
    assert saved_value(saved, "test/family/emotion/normalized_mae", {"emotion": "emo_"}) == 0.5
    assert saved_value(saved, "test/speaker_cosine/identity/n", {}) == 6
    assert saved_value(saved, "test/per_score/dnsmos:ovrl/spearman", {}) == 0.8
    assert saved_value(saved, "test/per_score/emo_anger/pearson", {}) is None


def test_saved_only_study_writes_every_table(tmp_path: Path) -> None:
    study = _saved_study(tmp_path / "in")
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 0
    tables = tmp_path / "out" / "tables"
    names = {p.stem for p in tables.glob("*.csv")}
    assert {"task_leaders", "families", "burst_speaker", "retention", "completion",
            "saved_target_emo_joy", "panel_whisper_tuned_base_test"} <= names  # fmt: skip
    leaders = (tables / "task_leaders.csv").read_text().splitlines()
    # Emotion (lower is better): legacy 0.5, tuned 0.25 (scale 0.5), whisper 0.4 (scale 0.8).
    row = leaders[1].split(",")
    assert row[0] == "Emotion targets" and row[2] == "A / LINEAR / tuned" and float(row[3]) == 0.25
    assert float(row[4]) == pytest.approx(0.4) and row[5] == "A / LINEAR / tuned"
    # Timbre (higher is better), candidates only legacy probes: 0.5; whisper 0.4 is beside it.
    row = leaders[2].split(",")
    assert row[2] == "A / LINEAR / legacy" and float(row[3]) == 0.5 and row[5] == row[2]
    families = (tables / "families.csv").read_text().splitlines()
    assert families[0].startswith("model,phase,kind,emotion normalized_mae")
    nmae, rho = families[1].split(",")[3:5]  # emotion: nMAE (.25 + .75) / 2, rho (.4 + .2) / 2
    assert float(nmae) == 0.5 and float(rho) == pytest.approx(0.3)
    speaker = (tables / "burst_speaker.md").read_text()
    assert "timbre cosine" in speaker and "identity n" in speaker
    retention = (tables / "retention.csv").read_text()
    assert "A / LINEAR / legacy,p3,4,50.0" in retention
    assert "A / LINEAR / tuned,p3,4,25.0" in retention
    training = (tables / "training.csv").read_text().splitlines()
    assert training == ["model,stages,epochs,lr,seed", 'Whisper Base / tuned,"S1, S2",2,1e-05,']
    copy = tmp_path / "out" / "measurements" / "whisper_tuned_base" / "test.json"
    original = tmp_path / "in" / "whisper_tuned_base" / "test_metrics.json"
    assert copy.read_bytes() == original.read_bytes()
    report = (tmp_path / "out" / "report.html").read_text()
    assert 'href="measurements/whisper_tuned_base/test.json"' in report
    assert "CC BY 4.0, tests" in report
    # The narrative section, in its place, its Markdown rendered and its raw HTML escaped.
    assert "<h2>Caveats</h2>" in report and "<em>within</em>" in report
    assert "&lt;b&gt;only&lt;/b&gt;" in report and "<b>only" not in report
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {"whisper_tuned_base/test_metrics.json", "probe_legacy_a_linear/test_metrics.json",
            "whisper_tuned_base/config.json", "notes.md"} <= set(manifest["inputs"])  # fmt: skip
    again = tmp_path / "again"
    assert main(["reproduce", str(study), "--out", str(again)]) == 0
    for name in ("report.html", "bundle.json.gz", "verification.json", "tables/families.csv"):
        assert (again / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_completion_names_missing_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _saved_study(tmp_path / "in")
    study.write_text(study.read_text().replace("targets = 4", "targets = 5"))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 1
    printed = capsys.readouterr().out
    assert "completion: run probe/legacy/a/linear has 4 targets, 5 expected" in printed


@pytest.mark.parametrize(
    "edit, key, message",
    [
        (('direction = "lower"', 'direction = "down"'), "leaders[0].direction",
         "'higher' or 'lower'"),
        (('baselines = ["whisper/tuned/base"]', 'baselines = ["nope"]'), "leaders[0].baselines[0]",
         "not a run"),
        (("[families]", "[family]"), "family", "unknown key"),
        (("[run.metrics.test]\nfile", "[run.metrics.test]\npath"), "run[0].metrics.test.path",
         "unknown key"),
    ],
)  # fmt: skip
def test_bad_study_keys(tmp_path: Path, edit: tuple[str, str], key: str, message: str) -> None:
    study = _saved_study(tmp_path)
    study.write_text(study.read_text().replace(*edit, 1))
    with pytest.raises(UserError, match=message) as info:
        load_study(study)
    assert info.value.key == key


@pytest.mark.parametrize(
    "doc, key, message",
    [
        ({"frame_f1": "high"}, "frame_f1", "expected a number, or null"),
        ({"per_score": [{"n": 3}]}, "per_score[0].score", "is missing"),
        ({"speaker_cosine": {"timbre": {"mean": 0.5, "n": -1}}}, "speaker_cosine.timbre.n", ">= 0"),
        ({"burst_localization": {"0.7": {"f1": "x"}}}, "burst_localization.0.7.f1", "a number"),
        ({"per_score": [{"score": "a"}, {"score": "a"}]}, "per_score[1].score", "repeats"),
    ],
)  # fmt: skip
def test_malformed_metric_json(tmp_path: Path, doc: Any, key: str, message: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match=message) as info:
        load_measurements(path, "test")
    assert info.value.key == key and str(path) in str(info.value)


def test_malformed_metric_json_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = _saved_study(tmp_path / "in")
    target = tmp_path / "in" / "whisper_tuned_base" / "test_metrics.json"
    target.write_text('{"clips": 10, "frame_f1": "x"}')
    # The third run's test file is the fifth hash of the study: record the new file's hash, so
    # that the study is well-formed and the file itself is what is malformed.
    old = study.read_text().split('sha256 = "')[5].split('"')[0]
    study.write_text(study.read_text().replace(old, _sha(target)))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "key 'frame_f1'" in err[0] and "test_metrics.json" in err[0]


def test_public_and_adapter_files(tmp_path: Path) -> None:
    public = {"emolia-emo": {"repo_min_2_raters": {"n": 5, "prompts": 2,
                                                   "mean_prompt_spearman": 0.3}},
              "emonet": {"all": {"n": 4, "pearson": 0.5},
                         "per_emotion": [{"category": "joy", "n": 4, "mae": 0.1}]}}  # fmt: skip
    parsed = parse_measurements(public, "public", source="p")
    assert parsed["emonet"]["per_emotion"][0]["mae"] == 0.1
    with pytest.raises(UserError, match="is not a list") as info:
        parse_measurements({"emonet": {"per_emotion": {"n": 1}}}, "public", source="p")
    assert info.value.key == "emonet.per_emotion"
    with pytest.raises(UserError, match="is missing") as info:
        parse_measurements({"classes": ["a"]}, "adapter_crema", source="a")
    assert info.value.key == "metrics"


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The synthetic probe demo (saved measurements for every run, predictions for most)."""
    work = tmp_path_factory.mktemp("parity")
    study = prepare_probe_demo(work / "inputs")
    assert main(["reproduce", str(study), "--out", str(work / "out")]) == 0
    return study, work / "out"


def test_demo_parity_proves_every_saved_number(demo_runs: tuple[Path, Path]) -> None:
    _, out = demo_runs
    parity = json.loads((out / "verification.json").read_text())["metric_parity"]
    assert parity["passed"] is True
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    run = next(r for r in bundle["runs"] if r["id"] == "clap-mlp/crema-like")
    saved = run["saved"]["test"]
    # Written out by hand from docs/measurements.md: saved field -> recomputed path.
    names = {"n": "n", "raw_mae": "mae", "normalized_mae": "normalized_mae",
             "pearson": "pearson", "spearman": "spearman"}  # fmt: skip
    expected = {
        f"regression/{s['score']}/{names[f]}"
        for s in saved["per_score"]
        for f in names
        if s[f] is not None
    }
    expected |= {f"events/iou/{t}/{f}" for t, v in saved["burst_localization"].items() for f in v}
    expected |= {"events/frame_f1", "events/start_mae_s", "events/end_mae_s",
                 "events/oracle_span_class_accuracy", "events/detected_span_class_accuracy",
                 "vectors/mean_cosine", "vectors/n"}  # fmt: skip
    # The second named speaker-vector set is proved by the predictions' set of that name; the
    # event classes by their index in the study's event_classes (laugh, cry, sigh).
    assert set(saved["speaker_cosine"]) == {"timbre", "identity"}
    expected |= {"speaker_sets/identity/mean_cosine", "speaker_sets/identity/n"}
    index = {"laugh": 0, "cry": 1, "sigh": 2}
    expected |= {
        f"events/classes/{index[c['name']]}/{f}"
        for c in saved["burst_per_class"]
        for f in ("support", "oracle_span_accuracy")
    }
    checked = {c["metric"] for c in parity["cells"] if c["run"] == "clap-mlp/crema-like"}
    assert checked == expected
    # Adapter files are proved by the run's classification predictions.
    adapter = {c["metric"] for c in parity["cells"] if c["split"] == "adapter_ravdess"}
    assert adapter == {f"classification/{f}" for f in ("n", "accuracy", "balanced_accuracy",
                                                         "macro_f1")}  # fmt: skip
    # Every prompt and dimension of every cut of a saved public file.
    human_cells = [c for c in parity["cells"] if c["run"] == "clap-mlp/human"]
    public = run_human = next(r for r in bundle["runs"] if r["id"] == "clap-mlp/human")
    cuts = public["saved"]["public"]["emo-like"]
    prompts = sum(len(v["per_prompt"]) for v in cuts.values() if isinstance(v, dict))
    dimensions = sum(len(v["per_dimension"]) for v in cuts.values() if isinstance(v, dict))
    assert prompts == 8 and dimensions == 4  # 4 prompts, 2 dimensions, in 2 cuts
    assert sum("/per_prompt/" in c["metric"] for c in human_cells) == 3 * prompts
    assert sum("/per_dimension/" in c["metric"] for c in human_cells) == 4 * dimensions
    assert run_human["saved"]["public"]["emo-like"]["per_emotion"]  # saved only: not compared
    human = {c["metric"] for c in parity["cells"] if c["run"] == "clap-mlp/human"}
    assert "human/emo-like/min_2_raters/balanced_accuracy_5fold_clip_grouped" in human
    assert {c["run"] for c in parity["reference"]} >= {"clap-mlp/crema-like", "clap-mlp/human"}
    # Legacy runs have saved numbers only: nothing to prove, nothing refuted.
    assert not any(c["run"].endswith("/legacy") for c in parity["cells"])
    names_out = {p.stem for p in (out / "tables").glob("*.csv")}
    assert {"task_leaders", "families", "burst_speaker", "retention", "completion", "training",
            "public_emo-like", "adapters", "metric_parity", "burst_classes", "event_classes",
            "human_prompts_emo-like", "human_dimensions_emo-like",
            "public_emo-like_per_emotion"} <= names_out  # fmt: skip


def test_tampered_saved_number_fails_first(demo_runs: tuple[Path, Path], tmp_path: Path) -> None:
    study, _ = demo_runs
    tampered = prepare_probe_demo(study.parent, tampered=True)
    assert main(["reproduce", str(tampered), "--out", str(tmp_path / "out")]) == 1
    verification = json.loads((tmp_path / "out" / "verification.json").read_text())
    (first,) = verification["failures"]  # the only failure: the saved number that is off
    assert "run clap-mlp/crema-like" in first and "regression/valence/mae" in first
    (bad,) = [c for c in verification["metric_parity"]["cells"] if not c["passed"]]
    assert bad["abs_delta"] == pytest.approx(1e-3) and bad["tolerance"] == 1e-6
    assert bad["saved"] == pytest.approx(bad["recomputed"] + 1e-3)
    report_html = (tmp_path / "out" / "report.html").read_text()
    assert report_html.index("regression/valence/mae") < report_html.index("<h2>")
    assert "FAIL" in (tmp_path / "out" / "tables" / "metric_parity.csv").read_text().splitlines()[1]


def test_demo_rerun_is_byte_identical(demo_runs: tuple[Path, Path], tmp_path: Path) -> None:
    study, out = demo_runs
    assert main(["reproduce", str(study), "--out", str(tmp_path / "again")]) == 0
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if path.is_file() and rel.name != "manifest.json":
            assert (tmp_path / "again" / rel).read_bytes() == path.read_bytes(), rel


def _human_study(root: Path, public: dict[str, Any]) -> Path:
    """One run: a human-benchmark prediction file and its saved public scores."""
    root.mkdir(parents=True, exist_ok=True)
    preds = root / "human.npz"
    cut = np.array([[True]] * 4 + [[False]] * 4)
    np.savez(
        preds,
        hb_bench=np.array(["emo"] * 8),
        hb_prompt=np.array(["p"] * 4 + ["q"] * 4),
        hb_clip=np.array([f"c{i}" for i in range(8)]),
        hb_score=np.array([0.1, 0.2, 0.8, 0.9, 0.9, 0.8, 0.2, 0.1]),
        hb_label=np.array([0, 0, 1, 1, 0, 0, 1, 1]),
        hb_cut_names=np.array(["min2"]),
        hb_cut=cut,
    )
    saved = root / "public.json"
    saved.write_text(json.dumps(public))
    study = root / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nkind = "probe"\nname = "human"\n\n[[run]]\n'
        f'id = "m"\nmodel = "M"\npredictions = "human.npz"\nsha256 = "{_sha(preds)}"\n'
        f'[run.metrics.public]\nfile = "public.json"\nsha256 = "{_sha(saved)}"\n'
    )
    return study


#: Hand-computed: prompt p is separated perfectly (oracle 1, rho 0.894 from average label
#: ranks), prompt q reversed (oracle 0.5, rho -0.894); overall, no single threshold beats 0.5.
HUMAN = {
    "emo": {
        "all": {"n": 8, "prompts": 2, "positive_rate": 0.5, "mean_prompt_spearman": 0.0,
                "balanced_accuracy_oracle_per_prompt": 0.75,
                "balanced_accuracy_oracle_overall": 0.5},
        "min2": {"n": 4, "prompts": 1, "positive_rate": 0.5,
                 "mean_prompt_spearman": 0.8944271909999159,
                 "balanced_accuracy_oracle_per_prompt": 1.0,
                 "balanced_accuracy_oracle_overall": 1.0},
    }
}  # fmt: skip


def test_human_benchmark_cuts_are_proved(tmp_path: Path) -> None:
    study = _human_study(tmp_path / "in", HUMAN)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 0
    parity = json.loads((tmp_path / "out" / "verification.json").read_text())["metric_parity"]
    proved = {c["metric"] for c in parity["cells"] if c["passed"]}
    assert len(proved) == 12 and "human/emo/min2/balanced_accuracy_oracle_overall" in proved
    assert any(c["metric"].endswith("5fold_clip_grouped") for c in parity["reference"])
    assert (tmp_path / "out" / "tables" / "public_emo.csv").is_file()


def test_tampered_human_number_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = json.loads(json.dumps(HUMAN))
    bad["emo"]["min2"]["balanced_accuracy_oracle_overall"] = 0.9
    study = _human_study(tmp_path / "in", bad)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert "run m disagrees" in printed[1]
    assert "human/emo/min2/balanced_accuracy_oracle_overall saved 0.9, recomputed 1.0" in printed[1]


def test_published_human_values_are_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _human_study(tmp_path / "in", HUMAN)
    study.write_text(
        study.read_text()
        + '\n[[published]]\ncell = "m"\ntolerance = 0.0\nprovenance = "hand-computed"\n'
        + 'values = { "human/emo/all/balanced_accuracy_oracle_per_prompt" = 0.75 }\n'
    )
    assert main(["verify", str(study)]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "run, key, message",
    [
        ('id = "a"\nmodel = "A"\n', "run[0].predictions", "needs predictions or saved"),
        ('id = "a"\nmodel = "A"\npredictions = "p.npz"\n', "run[0].sha256",
         "'predictions' and 'sha256' go together"),
        ('id = "a"\nmodel = "A"\nattributes = { phase = 1 }\n', "run[0].attributes.phase",
         "expected a string"),
    ],
)  # fmt: skip
def test_a_run_needs_something_to_read(
    tmp_path: Path, run: str, key: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "study.toml"
    study.write_text('schema = "audiorepro.study/1"\nkind = "probe"\nname = "x"\n\n[[run]]\n' + run)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"key '{key}'" in line and message in line

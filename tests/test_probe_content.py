"""The published probe module's remaining content, read from the bundled tree as it is.

``studies/probe_published_layout.toml`` declares derived numbers (CPS normalized MAE,
GPU-hours, the supplementary validation count), the job records (attempt table, provenance,
result manifest), the acted-emotion classifiers, the validation history, class labels and
notes. Each expected value is computed here from the tree's JSON files with ``json`` and
``re``, never from audiorepro."""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.render.tables import MISSING_TEXT, NOT_APPLICABLE_TEXT, slug
from audiorepro.specs.derived import evaluate, parse_formula, values_at
from tests.conftest import ROOT

STUDY = ROOT / "studies" / "probe_published_layout.toml"
TREE = ROOT / "studies" / "probe_published_layout"


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _rows(out: Path, table: str) -> list[list[str]]:
    with (out / "tables" / f"{table}.csv").open(newline="") as f:
        return list(csv.reader(f))[1:]


def _runs(tree: Path) -> dict[str, Path]:
    """Run id -> folder, as the study's two patterns declare them."""
    out = {}
    for phase in ("legacy", "gemini"):
        for model in ("clap", "clap-l"):
            for head in ("linear", "mlp"):
                out[f"probe/{phase}/{model}/{head}"] = tree / "probes" / phase / model / head
    for phase in ("legacy", "gemini"):
        out[f"whisper/{phase}/base"] = tree / "whisper" / phase / "base"
    return out


def _copy(tmp: Path, study_text: str | None = None) -> Path:
    shutil.copytree(TREE, tmp / TREE.name)
    study = tmp / STUDY.name
    study.write_text(study_text if study_text is not None else STUDY.read_text())
    return study


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any], str]:
    tmp = tmp_path_factory.mktemp("content")
    study = _copy(tmp)
    out = tmp / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    return tmp / TREE.name, out, bundle, (out / "report.html").read_text()


def test_cps_normalized_mae_is_the_raw_mae_over_the_training_sd(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    tree, out, bundle, report = done
    sd = _read(tree / "release/training_normalization.json")["cps_std"]
    expected = {
        run: _read(folder / "test_metrics.json")["cps_raw_mae"] / sd
        for run, folder in _runs(tree).items()
    }
    shown = {run: float(value) for run, value in _rows(out, "derived_runs")}
    assert shown == pytest.approx(expected, rel=1e-12)
    record = next(d for d in bundle["derived"] if d["name"] == "cps_normalized_mae")
    assert record["formula"] == "{test:cps_raw_mae} / {norm:cps_std}" and record["per_run"]
    assert record["values"] == pytest.approx(expected, rel=1e-12)
    # The same number inside each run's panel, with its formula, below the per-run heading.
    panels = report.index("<h2>Per-run panels</h2>")
    for run, value in expected.items():
        name = f"panel_{slug(run)}_derived"
        rows = {label: (float(v), f) for label, v, f in _rows(out, name)}
        cps = rows[record["label"]]
        assert cps == (pytest.approx(value, rel=1e-12), record["formula"])
        at = report.index(f'id="table-{name}"')
        assert at > panels and report.rfind("<summary>", 0, at) == report.rfind(
            f"<summary>{run}:", 0, at
        )
    assert "table-derived_runs" in report and "{test:cps_raw_mae} / {norm:cps_std}" in report


def test_gpu_hours_and_the_validation_count(done: tuple[Path, Path, dict[str, Any], str]) -> None:
    tree, out, bundle, _ = done
    jobs = _read(tree / "consolidated_benchmark/job_audit.json")["jobs"]
    gpus = [int(re.search(r"gres/gpu=(\d+)", j["AllocTRES"]).group(1)) for j in jobs]  # type: ignore[union-attr]
    hours = sum(int(j["ElapsedRaw"]) * g for j, g in zip(jobs, gpus, strict=True)) / 3600
    runs = _runs(tree)
    validated = sum((f / "validation_metrics.json").is_file() for f in runs.values())
    derived = {name: value for name, value, _ in _rows(out, "derived")}
    assert float(derived["tracked GPU-hours"]) == pytest.approx(hours, rel=1e-12)
    assert derived["supplementary validation evaluated"] == f"{validated}/{len(runs)}"
    assert 0 < validated < len(runs)  # the count says something
    records = {d["name"]: d for d in bundle["derived"]}
    assert records["gpu_hours"]["values"] == {"": pytest.approx(hours, rel=1e-12)}
    assert "tres({jobs:jobs[*].AllocTRES}, 'gres/gpu')" in records["gpu_hours"]["formula"]
    assert records["validation_runs"]["of"] == "count({*test:clips})"
    assert bundle["result_manifest"]["derived"]["validation_runs"] == f"{validated}/{len(runs)}"


def test_every_slurm_attempt_and_the_result_manifest(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    tree, out, bundle, report = done
    jobs = _read(tree / "consolidated_benchmark/job_audit.json")["jobs"]
    last = {j["JobName"]: j["JobIDRaw"] for j in jobs}
    rows = _rows(out, "job_attempts")
    assert [r[1] for r in rows] == [j["JobIDRaw"] for j in jobs]
    assert [r[-1] for r in rows] == [
        "final" if last[j["JobName"]] == j["JobIDRaw"] else "superseded" for j in jobs
    ]
    assert "superseded" in [r[-1] for r in rows] and "FAILED" in [r[3] for r in rows]
    manifest = bundle["result_manifest"]
    assert manifest["job_attempts"] == len(jobs)
    assert manifest["final_allocations"] == len(last)
    assert sorted(manifest["final_job_ids"]) == sorted(last.values())
    assert [a["JobIDRaw"] for a in manifest["attempts"]] == [j["JobIDRaw"] for j in jobs]
    assert manifest["run_ids"] == list(_runs(tree)) and manifest["runs"] == len(_runs(tree))
    workflow = _read(tree / "workflow.json")
    provenance = dict((r[0], r[1]) for r in _rows(out, "provenance"))
    assert provenance["workflow completion (UTC)"] == workflow["updated_utc"]
    assert manifest["completed_utc"] == workflow["updated_utc"]
    assert provenance["final allocations (COMPLETED 0:0)"] == f"{len(last)} ({len(last)})"
    assert "table-job_attempts" in report and "table-provenance" in report


def test_acted_classifiers_fixed_and_supervised_told_apart(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    tree, out, _, report = done
    run, folder = "probe/gemini/clap-l/mlp", _runs(tree)["probe/gemini/clap-l/mlp"]
    adapter = _read(folder / "crema_matched_adapter.json")
    fixed = _read(folder / "public_metrics.json")["crema"]
    summary = [r for r in _rows(out, "acted_CREMA-D") if r[0] == run]
    assert [r[1] for r in summary] == [
        "Fixed taxonomy; no corpus labels fitted",
        f"Supervised: {adapter['protocol']}",
    ]
    assert float(summary[0][3]) == pytest.approx(100 * fixed["accuracy"])
    assert float(summary[1][3]) == pytest.approx(100 * adapter["metrics"]["accuracy"])
    low, high = adapter["metrics"]["accuracy_actor_bootstrap_95ci"]
    assert [float(x) for x in summary[1][6:8]] == pytest.approx([100 * low, 100 * high])
    assert (summary[0][8], summary[1][8]) == ("0", str(adapter["parameters"]))
    classes = [r for r in _rows(out, "acted_CREMA-D_classes") if r[0] == f"{run} / supervised"]
    assert [(r[1], int(r[2]), float(r[3]), float(r[4])) for r in classes] == [
        (c["class"], c["support"], pytest.approx(100 * c["recall"]),
         pytest.approx(100 * c["precision"]))
        for c in adapter["metrics"]["per_class"]
    ]  # fmt: skip
    confusion = {r[0]: r[1:] for r in _rows(out, "acted_CREMA-D_confusion")}
    for true, row in fixed["confusion"].items():
        assert confusion[f"{run} / fixed / {true}"] == [str(v) for v in row.values()]
    folds = [r for r in _rows(out, "acted_CREMA-D_folds") if r[0] == run]
    assert [int(r[1]) for r in folds] == [f["fold"] for f in adapter["folds"]]
    assert [int(r[4]) for r in folds] == [len(f["train_actors"]) for f in adapter["folds"]]
    trials = [r for r in _rows(out, "acted_CREMA-D_trials") if r[0] == run]
    assert len(trials) == sum(len(f["trials"]) for f in adapter["folds"])
    # One heatmap per run, corpus and protocol.
    assert report.count('class="chart heatmap"') == len(_runs(tree)) * 2 * 2


def test_history_class_labels_and_notes(done: tuple[Path, Path, dict[str, Any], str]) -> None:
    tree, out, _, report = done
    expected = [
        (run, str(line["epoch"]), line["validation"]["loss"])
        for run, folder in _runs(tree).items()
        if (folder / "metrics.jsonl").is_file()
        for line in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())
    ]
    rows = _rows(out, "history")
    assert [(r[0], r[1], float(r[-1])) for r in rows] == expected
    assert 'id="history"' in report  # the curves
    names = _read(tree / "release/classes.json")["names"]
    assert [r[1] for r in _rows(out, "class_labels")] == names
    # The conditional note is under the provenance table; the panel note under each frozen
    # probe's validation panel, and nowhere else.
    assert _read(tree / "consolidated_benchmark/validation_job.json")["publication_recovery"]
    md = (out / "tables" / "provenance.md").read_text()
    assert "publication was recovered on the login node" in md
    panels = [
        p
        for p in (out / "tables").glob("panel_*_validation.md")
        if not p.name.endswith("_p3_validation.md")  # the retention audit's split
    ]
    assert panels and all("not an untouched test" in p.read_text() for p in panels)
    assert report.count("not an untouched test") == len(panels)


def test_the_validation_summary_across_runs(done: tuple[Path, Path, dict[str, Any], str]) -> None:
    """``summaries = [{ split = "validation" }]``: one row per run that has a validation file,
    the module's burst summary columns, each value the saved one."""
    tree, out, _, report = done
    expected = []
    for folder in _runs(tree).values():
        if not (folder / "validation_metrics.json").is_file():
            continue
        x = _read(folder / "validation_metrics.json")
        loc = x["burst_localization"]
        expected.append(
            [
                x["clips"],
                100 * x["frame_f1"],
                *(100 * loc[t]["f1"] for t in ("0.1", "0.3", "0.5")),
                x["burst_start_mae_s"],
                x["burst_end_mae_s"],
                100 * x["burst_class_oracle_span_accuracy"],
                100 * x["burst_matched_event_class_accuracy"],
                *(v for n in sorted(x["speaker_cosine"]) for v in x["speaker_cosine"][n].values()),
                x["cps_raw_mae"],
            ]
        )
    rows = _rows(out, "summary_validation")
    assert expected and len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        # After the run label and its five attributes (phase, domain, kind, head).
        assert [float(c) for c in row[5:]] == pytest.approx([float(v) for v in want], rel=1e-9)
    assert 'id="table-summary_validation"' in report
    assert report.index('id="table-summary_validation"') < report.index("<h2>Per-run panels</h2>")


def test_a_summary_of_chosen_key_paths(tmp_path: Path) -> None:
    """``metrics`` names the columns by key path, here of the JSONL history."""
    text = STUDY.read_text().replace(
        'summaries = [{ split = "validation" }]',
        'summaries = [{ split = "history", metrics = ["[epoch=1].validation.loss", '
        '"[epoch=9].validation.loss"] }]',
    )
    study = _copy(tmp_path, text)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    tree = tmp_path / TREE.name
    expected = []
    for folder in _runs(tree).values():
        if (folder / "metrics.jsonl").is_file():
            lines = list(map(json.loads, (folder / "metrics.jsonl").read_text().splitlines()))
            expected.append(next(x for x in lines if x["epoch"] == 1)["validation"]["loss"])
    rows = _rows(out, "summary_history")
    assert [float(r[-2]) for r in rows] == pytest.approx(expected, rel=1e-12)
    assert {r[-1] for r in rows} == {""}  # no epoch 9: not recorded (an empty CSV cell)


def test_a_config_field_only_some_runs_have_is_a_dash_elsewhere(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """``config_applies``: the whisper runs' configs have no stages, epochs, clips, parameters
    by design; their cells are a dash (explained), not "not recorded"; the probes' are their
    config's values."""
    tree, out, _, _ = done
    md = (out / "tables" / "training.md").read_text()
    assert MISSING_TEXT not in md and "a field this kind of run does not have" in md
    lines = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in md.splitlines()}
    whisper = [cells for label, cells in lines.items() if label.startswith("Whisper")]
    assert len(whisper) == 2 and all(c[:4] == [NOT_APPLICABLE_TEXT] * 4 for c in whisper)
    rows = _rows(out, "training")
    probes = [(run, f) for run, f in _runs(tree).items() if run.startswith("probe/")]
    for row, (_, folder) in zip(rows, probes, strict=False):
        config = _read(folder / "config.json")
        assert row[1:5] == [
            ", ".join(config["stages"]),
            str(config["epochs_per_stage"]),
            str(config["train_clips"]),
            str(config["parameters"]),
        ]
    assert [r[1:5] for r in rows[len(probes) :]] == [["", "", "", ""]] * 2  # CSV: empty


def test_the_p3_retention_before_and_after_tuning(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """Each whisper phase's encoder on the identical P3 selections, both files kept in the tuned
    model's folder as the module keeps them: one row per phase and selection, saved values."""
    tree, out, _, _ = done
    folder = tree / "whisper/gemini/base"
    expected = []
    for domain in ("p3_validation", "p3_test"):
        for phase in ("legacy", "gemini"):
            x = _read(folder / f"{phase}_{domain}_metrics.json")
            expected.append(
                (
                    domain,
                    x["clips"],
                    100 * x["frame_f1"],
                    100 * x["burst_localization"]["0.5"]["f1"],
                    x["burst_start_mae_s"],
                    x["burst_end_mae_s"],
                )
            )
    rows = _rows(out, "retention")
    assert [r[0] for r in rows] == ["Whisper Base / legacy / Flash test",
                                    "Whisper Base / gemini / Flash test"] * 2  # fmt: skip
    assert [(r[1], int(r[2])) for r in rows] == [e[:2] for e in expected]
    shown = [[float(c) for c in r[3:7]] for r in rows]
    assert shown == [pytest.approx(list(e[2:]), rel=1e-9) for e in expected]


def test_a_listing_of_records_in_a_tree_file(done: tuple[Path, Path, dict[str, Any], str]) -> None:
    tree, out, _, _ = done
    models = _read(tree / "study.json")["models"]
    assert _rows(out, "listing_backbones") == [
        [m["id"], m["repo"], m["revision"], str(m["native_dim"])] for m in models
    ]


def test_a_note_shown_only_when_the_saved_value_says_so(tmp_path: Path) -> None:
    study = _copy(tmp_path)
    receipt = tmp_path / TREE.name / "consolidated_benchmark/validation_job.json"
    receipt.write_text(json.dumps({"id": 102, "publication_recovery": False}))
    text = study.read_text().replace('runs = { kind = "frozen probe" }', 'runs = { kind = "x" }')
    study.write_text(text)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "report.html").read_text()
    assert "publication was recovered" not in report and "not an untouched test" not in report


FORMULA = "{test:cps_raw_mae} / {norm:cps_std}"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (FORMULA, "__import__('os').getcwd()", "is not allowed"),
        (FORMULA, "{test:cps_raw_mae} ** 2", "operator Pow is not allowed"),
        (FORMULA, "{test:cps_raw_mae}.real", "Attribute is not allowed"),
        (FORMULA, "(lambda: 1)()", "is not allowed"),
        (FORMULA, "open({test:x})", "call of 'open'"),
        (FORMULA, "{nope:cps_std} + 1", "names 'nope', which is neither a file"),
        (FORMULA, "{*norm:cps_std}", "names 'norm', which is neither"),
        (FORMULA, "{test:per_score[} / 2", "cannot read key path"),
        (FORMULA, "1 +", "cannot read"),
        (FORMULA, "-" * 300 + "1", "nests deeper than 100 levels"),
        (FORMULA, "1 + 1" * 500, "a formula has at most 2000"),
        ('table = "provenance"', 'table = "no_such_table"', "names table 'no_such_table'"),
        ('{ split = "validation" }', '{ split = "valid" }', "names split 'valid', which no"),
        ("config_applies = { stages", "config_applies = { stage", "not one of config_fields"),
        ('stages = { kind = "', 'stages = { sort = "', "names attribute 'sort', which no run"),
        ('{ split = "validation" }', '{ split = "public" }', "expected a held-out split"),
        ('{ split = "validation" }', '{ split = "test", metrics = ["a["] }', "key path"),
        ('{ split = "validation" }', '{ split = "test", metric = ["a"] }', "metric"),
        (
            '{ split = "validation" }',
            '{ split = "test" }, { split = "test" }',
            "repeats split 'test'",
        ),
        ('file = "jobs"', 'file = "job"', "names 'job', which is not a file"),
        ('"classes:names"', '"labels:names"', "'labels:names' names 'labels'"),
        ('fixed = "public:crema"', 'fixed = "pub:crema"', "names 'pub'"),
        ('file = "study", at', 'file = "stud", at', "names 'stud', which is not a file"),
        ('corpus = "RAVDESS"', 'corpus = "CREMA-D"', "key 'acted[1].corpus': repeats 'CREMA-D'"),
        (
            'corpus = "CREMA-D", fixed = "public:crema", adapter = "adapter_crema" },\n'
            '  { corpus = "RAVDESS"',
            'corpus = "CREMA D", fixed = "public:crema", adapter = "adapter_crema" },\n'
            '  { corpus = "CREMA/D"',
            "name the same output files (CREMA_D)",
        ),
    ],
)
def test_a_bad_declaration_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, message: str
) -> None:
    text = STUDY.read_text()
    assert old in text
    study = _copy(tmp_path, text.replace(old, new, 1))
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (out / "report.html").exists()


def test_a_job_record_of_the_wrong_type_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _copy(tmp_path)
    path = tmp_path / TREE.name / "consolidated_benchmark/job_audit.json"
    doc = _read(path)
    doc["jobs"][1]["ElapsedRaw"] = [3700]
    path.write_text(json.dumps(doc))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "job_audit.json" in err and "expected a number" in err


@pytest.mark.parametrize(
    ("formula", "doc", "expected"),
    [
        ("{f:a} / {f:b}", {"a": 3, "b": 0}, None),  # undefined, not an error
        ("{f:a} - {f:missing}", {"a": 3}, None),  # not recorded
        ("mean({f:x[*].v})", {"x": [{"v": 1}, {"v": None}, {"v": 4}]}, 2.5),
        ("count({f:x[*].v}) / count({f:x[*]})", {"x": [{"v": 1}, {}]}, 0.5),
        ("-{f:a} + 2 * (1 + 1)", {"a": 1.5}, 2.5),
        ("sum(tres({f:x[*].t}, 'gres/gpu'))", {"x": [{"t": "gres/gpu=2"}, {"t": "cpu=1"}]}, 2.0),
    ],
)
def test_the_formula_grammar(formula: str, doc: Any, expected: float | None) -> None:
    parsed = parse_formula(formula, source=Path("s.toml"), key="derived[0].formula")
    assert evaluate(parsed, lambda ref: values_at(doc, ref.path, "f.json")) == expected


#: The published module's report elements (probe-report-module.txt, in its order) -> the table
#: of audiorepro's report that shows each for the bundled study.
MODULE_ELEMENTS = {
    "Which model is best for which task?": "task_leaders",
    "Study completion and data (allocations, workflow completion, GPU-hours, N/40)": "provenance",
    "Protocols and metric definitions": "Metric definitions",
    "All model/phase combinations: public benchmark results": "public_emo-like",
    "Matched MLP accuracy per run": "adapters",
    "Speaker vectors, CPS and vocal-burst timing for every run": "burst_speaker",
    "Emotion, voice-style, aesthetics and DNSMOS target agreement": "families",
    "Every quality axis (per target)": "saved_target_valence",
    "Held-out audio targets of each run": "panel_probe_gemini_clap_mlp_test",
    "Full selection-validation metrics of each run": "panel_probe_gemini_clap_mlp_validation",
    "CPS normalized MAE, derived using frozen training SD": "derived_runs",
    "EmoNet intensity: all recorded cuts": "public_emo-like",
    "All EmoNet emotion categories": "public_emo-like_per_emotion",
    "Every dimension of a cut": "human_dimensions_emo-like",
    "All individual prompts in a cut": "human_prompts_emo-like",
    "CREMA-D and RAVDESS: fixed mappings versus matched supervised MLPs": "acted_CREMA-D",
    "Every class: recall and precision": "acted_RAVDESS_classes",
    "Confusion matrix": "acted_RAVDESS_confusion",
    "Adapter protocol and trainable parameters": "acted_RAVDESS",
    "Outer folds": "acted_RAVDESS_folds",
    "Every inner-fold hyperparameter trial": "acted_RAVDESS_trials",
    "Executed training details": "training",
    "Every recorded validation result": "history",
    "Backbones, exact revisions and native feature widths": "listing_backbones",
    "Canonical vocal-burst class labels": "class_labels",
    "Every Slurm attempt": "job_attempts",
    "Gates: complete workflow, final allocations COMPLETED 0:0": "gates",
    "Full validation quality of the selected best checkpoint (cross-run)": "summary_validation",
    "Full Whisper tuning: P3 retention before and after": "retention",
}
#: Elements the bundled study does not show yet (issue 27, other items): when one appears,
#: move it above.
NOT_YET = {}


def test_every_element_of_the_module_report_appears(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    _, out, bundle, report = done
    for element, name in MODULE_ELEMENTS.items():
        shown = f'id="table-{name}"' in report or f"<h2>{name}</h2>" in report
        assert shown, element
    for element, name in NOT_YET.items():
        assert not (out / "tables" / f"{name}.csv").exists(), f"{element}: move it up"
    # The figures and the bundle's parts: heatmaps, history curves, the result manifest.
    assert 'class="chart heatmap"' in report and 'id="history"' in report
    assert {"derived", "result_manifest"} <= set(bundle)


def test_the_documented_study_keys_are_the_bundled_studys(tmp_path: Path) -> None:
    # docs/probe-layout.md shows `files`, `derived`, `note` and `[[gate]]` as excerpts of the
    # bundled study (which the tests run): each excerpt must be what the study declares, so
    # that a reader who copies one copies a tested declaration (labels and note texts aside).
    page = (ROOT / "docs" / "probe-layout.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", page, re.S)]
    study = tomllib.loads(STUDY.read_text())
    keys = {k for b in blocks for k in b}
    assert keys == {"gate", "files", "derived", "note"}, keys
    for block in blocks:
        for alias, path in block.get("files", {}).items():
            assert study["files"][alias] == path, alias
        for entry in block.get("derived", []):
            declared = {
                d["name"]: {k: v for k, v in d.items() if k != "label"} for d in study["derived"]
            }
            assert declared[entry["name"]] == entry, entry["name"]
        for entry in block.get("note", []):
            assert entry["text"] == "..."
            shown = [{**n, "text": "..."} for n in study["note"]]
            assert entry in shown, entry
        for gate in block.get("gate", []):
            assert gate in study["gate"], gate["name"]

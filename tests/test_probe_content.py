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
from audiorepro.runner.kinds.probe.derived import evaluate, parse_formula, values_at
from tests.conftest import ROOT

STUDY = ROOT / "studies" / "probe_published_layout.toml"
TREE = ROOT / "studies" / "probe_published_layout"
SD = "embedding_probe_study_20261006"  # the module's study folder; its siblings beside it
NORM = "hf_layered_release/model/training_normalization.json"
JOBS = f"{SD}/consolidated_benchmark/job_audit.json"
WORKFLOW = f"{SD}/workflow.json"
RECEIPT = f"{SD}/consolidated_benchmark/validation_job.json"
BACKBONES = ("clapv2_s", "voiceclap_large_v2")


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _rows(out: Path, table: str) -> list[list[str]]:
    with (out / "tables" / f"{table}.csv").open(newline="") as f:
        return list(csv.reader(f))[1:]


def _runs(tree: Path) -> dict[str, Path]:
    """Run id -> folder, as the study's three patterns declare them (the module's order)."""
    out = {}
    for phase in ("legacy", "gemini"):
        for model in BACKBONES:
            for head in ("linear", "mlp"):
                out[f"probe/{phase}/{model}/{head}"] = tree / SD / "probes" / phase / model / head
    for phase in ("legacy", "gemini"):
        for size in ("base", "small"):
            out[f"whisper/{phase}/{size}"] = tree / SD / "whisper" / phase / size
    return out


def _test_file(tree: Path, run: str) -> Path:
    """Where the module keeps a run's Flash (or Ladder/P3) test: the original Whisper's in the
    tuned model's folder (legacy_on_flash_test_metrics.json), the tuned one's named
    gemini_test_metrics.json."""
    folder = _runs(tree)[run]
    if run.startswith("whisper/legacy/"):
        return tree / SD / "whisper/gemini" / folder.name / "legacy_on_flash_test_metrics.json"
    if run.startswith("whisper/gemini/"):
        return folder / "gemini_test_metrics.json"
    return folder / "test_metrics.json"


def _module_finals(tree: Path) -> set[int]:
    """The module's final jobs: the pilot and the last attempt of each cache job and task."""
    wf = _read(tree / WORKFLOW)
    return {wf["pilot_job"]} | {
        a[-1]["id"] for group in ("cache_jobs", "tasks") for a in wf[group].values()
    }


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
    sd = _read(tree / NORM)["cps_std"]
    expected = {run: _read(_test_file(tree, run))["cps_raw_mae"] / sd for run in _runs(tree)}
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
    """The module's GPU-hours: ``int(ElapsedRaw)`` (sacct writes text) times 4 over the
    four-GPU allocations only; the pilot's one-GPU allocation is not counted."""
    tree, out, bundle, _ = done
    jobs = _read(tree / JOBS)["jobs"]
    assert all(isinstance(j["ElapsedRaw"], str) for j in jobs)  # as sacct writes it
    hours = sum(int(j["ElapsedRaw"]) * 4 / 3600 for j in jobs if "gres/gpu=4" in j["AllocTRES"])
    assert any("gres/gpu=1" in j["AllocTRES"] for j in jobs)  # the rule is tested, not moot
    runs = _runs(tree)
    validated = sum((f / "validation_metrics.json").is_file() for f in runs.values())
    derived = {name: value for name, value, _ in _rows(out, "derived")}
    assert float(derived["tracked GPU-hours (four-GPU allocations)"]) == pytest.approx(hours)
    assert derived["supplementary validation evaluated"] == f"{validated}/{len(runs)}"
    assert 0 < validated < len(runs)  # the count says something
    records = {d["name"]: d for d in bundle["derived"]}
    assert records["gpu_hours"]["values"] == {"": pytest.approx(hours, rel=1e-12)}
    assert records["validation_runs"]["of"] == "count({*test:clips})"
    manifest = bundle["result_manifest"]
    assert manifest["derived"] == {
        "gpu_hours": pytest.approx(hours),
        "validation_runs": f"{validated}/{len(runs)}",
    }


def test_every_slurm_attempt_and_the_result_manifest(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """Final attempts as the module takes them (the workflow record's ids), the supplementary
    validation job as its receipt says, and the result manifest's counts."""
    tree, out, bundle, report = done
    jobs = _read(tree / JOBS)["jobs"]
    finals = _module_finals(tree)
    receipt = _read(tree / RECEIPT)
    rows = _rows(out, "job_attempts")
    assert [r[1] for r in rows] == [j["JobIDRaw"] for j in jobs]
    expected = [
        "final" if int(j["JobIDRaw"]) in finals
        else "supplementary; publication recovered" if int(j["JobIDRaw"]) == receipt["id"]
        else "superseded"
        for j in jobs
    ]  # fmt: skip
    assert [r[-1] for r in rows] == expected
    assert "superseded" in expected and "FAILED" in [r[3] for r in rows]
    manifest = bundle["result_manifest"]
    assert manifest["job_attempts"] == len(jobs)
    assert manifest["final_allocations"] == len(finals) == 7
    assert sorted(map(int, manifest["final_job_ids"])) == sorted(finals)
    assert [a["JobIDRaw"] for a in manifest["attempts"]] == [j["JobIDRaw"] for j in jobs]
    assert manifest["run_ids"] == list(_runs(tree)) and manifest["runs"] == len(_runs(tree))
    # The module's counts: runs by kind, P3 audits and pre-finetune evaluations by split.
    assert manifest["runs_by_kind"] == {"frozen probe": 8, "original encoder": 2,
                                        "full encoder tuning": 2}  # fmt: skip
    p3 = len(list((tree / SD / "whisper/gemini").glob("*/*_p3_*_metrics.json")))
    pre = len(list((tree / SD / "probes").glob("*/*/*/pre_finetune_test_metrics.json")))
    assert manifest["split_files"]["p3_test"] + manifest["split_files"]["p3_validation"] == p3
    assert manifest["split_files"]["pre_finetune"] == pre > 0
    assert manifest["targets_per_run"] == _read(tree / SD / "study.json")["targets"]
    workflow = _read(tree / WORKFLOW)
    provenance = dict((r[0], r[1]) for r in _rows(out, "provenance"))
    assert provenance["workflow completion (UTC)"] == workflow["updated_utc"]
    assert manifest["completed_utc"] == workflow["updated_utc"]
    assert provenance["final allocations (COMPLETED 0:0)"] == f"{len(finals)} ({len(finals)})"
    assert "table-job_attempts" in report and "table-provenance" in report
    # The report's time: a clock time goes into manifest.json only (same inputs, same bytes);
    # the report says where it is (test_the_report_time_is_source_date_epochs: when set).
    assert "generated_utc" not in manifest
    assert "report generated at the run's time (<code>manifest.json</code>" in report
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", _read(out / "manifest.json")["time"]["utc"]
    )
    # The bundle keeps the files the module's bundle keeps: backbones, normalization, receipt.
    assert bundle["files"]["study"]["models"] == _read(tree / SD / "study.json")["models"]
    assert bundle["files"]["norm"] == _read(tree / NORM)
    assert bundle["files"]["validation_job"] == receipt


def test_acted_classifiers_fixed_and_supervised_told_apart(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    tree, out, _, report = done
    run = "probe/gemini/voiceclap_large_v2/mlp"
    folder = _runs(tree)[run]
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
    expected = []
    for run, folder in _runs(tree).items():
        # The probes' history in their folder; the tuned Whisper's in the sibling training
        # folder, its loss spelled validation_loss (y = "validation.loss|validation_loss").
        size = folder.name
        path = (
            tree / "gemini_finetune_preparation_20261005/training" / f"whisper_{size}/metrics.jsonl"
            if run.startswith("whisper/gemini/")
            else folder / "metrics.jsonl"
        )
        if path.is_file():
            for line in map(json.loads, path.read_text().splitlines()):
                loss = (
                    line["validation"]["loss"] if "validation" in line else line["validation_loss"]
                )
                expected.append((run, str(line["epoch"]), loss))
    rows = _rows(out, "history")
    assert [(r[0], r[1], float(r[-1])) for r in rows] == expected
    assert {r[0] for r in rows} >= {"whisper/gemini/base", "whisper/gemini/small"}
    assert 'id="history"' in report  # the curves
    names = _read(tree / "hf_layered_release/model/classes.json")["names"]
    assert [r[1] for r in _rows(out, "class_labels")] == names
    # The conditional note is under the provenance table; the panel notes under each frozen
    # probe's and each original encoder's validation panel, and nowhere else.
    assert _read(tree / RECEIPT)["publication_recovery"]
    md = (out / "tables" / "provenance.md").read_text()
    assert "publication was recovered on the login node" in md
    panels = sorted((out / "tables").glob("panel_*_validation.md"))
    panels = [p for p in panels if not p.name.endswith("_p3_validation.md")]
    probes = [p for p in panels if p.name.startswith("panel_probe_")]
    original = [p for p in panels if p.name.startswith("panel_whisper_legacy_")]
    assert probes and all("not an untouched test" in p.read_text() for p in probes)
    assert original and all("re-evaluated" in p.read_text() for p in original)
    assert report.count("not an untouched test") == len(probes)


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
    rows = [r for r in _rows(out, "summary_history") if not r[0].startswith("Whisper")]
    assert [float(r[-2]) for r in rows] == pytest.approx(expected, rel=1e-12)
    assert {r[-1] for r in rows} == {""}  # no epoch 9: not recorded (an empty CSV cell)


def test_the_training_table_is_the_probes_configs(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """As the module's: one row per run with a config (the probes: config.json merged with
    COMPLETE.json), every field its saved value; the Whisper runs have none (no row)."""
    tree, out, _, _ = done
    rows = _rows(out, "training")
    probes = [(run, f) for run, f in _runs(tree).items() if run.startswith("probe/")]
    assert len(rows) == len(probes)
    for row, (_, folder) in zip(rows, probes, strict=True):
        config = _read(folder / "config.json") | _read(folder / "COMPLETE.json")
        assert row[1:] == [
            ", ".join(config["stages"]),
            *(str(config[k]) for k in ("epochs_per_stage", "train_clips", "validation_clips",
                                       "test_clips")),
            ", ".join(map(str, config["stage_training_clips"])),
            *(str(config[k]) for k in ("parameters", "scalar_parameters_each", "updates",
                                       "best_validation_loss")),
        ]  # fmt: skip


def test_a_config_field_only_some_runs_have_is_a_dash_elsewhere(tmp_path: Path) -> None:
    """``config_applies``: read the tuned Whisper's COMPLETE.json as its config too; it has no
    stages or clips by design: a dash (explained), not "not recorded"; the probes' cells are
    their config's values."""
    tuned = 'kind = "full encoder tuning", head = "layer-pooled multitask heads" }\n'
    text = STUDY.read_text()
    assert tuned in text
    text = text.replace(tuned, tuned + 'config = ["COMPLETE.json"]\n')
    text = text.replace("\n[families]", '\nconfig_applies = { stages = { kind = "frozen probe" }, '
                        'train_clips = { kind = "frozen probe" } }\n\n[families]')  # fmt: skip
    study = _copy(tmp_path, text)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    md = (out / "tables" / "training.md").read_text()
    assert "a field this kind of run does not have" in md
    lines = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in md.splitlines()}
    whisper = [cells for label, cells in lines.items() if label.startswith("Whisper")]
    assert len(whisper) == 2 and all(c[0] == c[2] == NOT_APPLICABLE_TEXT for c in whisper)
    assert all(c[1] == MISSING_TEXT for c in whisper)  # epochs_per_stage: expected, not saved
    rows = {r[0]: r for r in _rows(out, "training")}
    first = _read(_runs(tmp_path / TREE.name)["probe/legacy/clapv2_s/linear"] / "config.json")
    assert rows["CLAPv2 S / LINEAR / legacy / Ladder/P3 test"][1] == ", ".join(first["stages"])


def test_the_p3_retention_before_and_after_tuning(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """Each Whisper phase's encoder on the identical P3 selections, both files kept in the tuned
    model's folder as the module keeps them: one row per phase and selection, saved values."""
    tree, out, _, _ = done
    expected = []
    for size in ("base", "small"):
        folder = tree / SD / "whisper/gemini" / size
        for domain in ("p3_validation", "p3_test"):
            for phase in ("legacy", "gemini"):
                x = _read(folder / f"{phase}_{domain}_metrics.json")
                expected.append((f"Whisper {size.title()} / {phase} / Flash test", domain,
                                 x["clips"], 100 * x["frame_f1"],
                                 100 * x["burst_localization"]["0.5"]["f1"],
                                 x["burst_start_mae_s"], x["burst_end_mae_s"]))  # fmt: skip
    rows = _rows(out, "retention")
    assert [(r[0], r[1], int(r[2])) for r in rows] == [e[:3] for e in expected]
    shown = [[float(c) for c in r[3:7]] for r in rows]
    assert shown == [pytest.approx(list(e[3:]), rel=1e-9) for e in expected]


def test_a_record_list_table_over_every_runs_split(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """``listing`` with ``split`` and a wildcard ``at``: every per_family list of every cut of
    every benchmark of every run's public file, one declaration (the original Whisper's read
    from the sibling bench_eval file, its benchmarks renamed)."""
    tree, out, _, _ = done
    expected = []
    for run in _runs(tree):
        if run.startswith("whisper/legacy/"):
            size = run.rsplit("/", 1)[1]
            doc = _read(tree / "bench_eval_20261004/public_scores.json")["models"][size]
            doc = {k.replace("_", "-") if k.startswith("emolia") else k: v for k, v in doc.items()}
        else:
            doc = _read(_runs(tree)[run] / "public_metrics.json")
        for bench, cuts in doc.items():
            for cut, value in cuts.items():
                if isinstance(value, dict) and "per_family" in value:
                    expected += [[run, f"{bench} / {cut}", f["family"], str(f["n"]),
                                  str(f["mean_prompt_rho"]), str(f["balanced_accuracy_oracle"])]
                                 for f in value["per_family"]]  # fmt: skip
    assert _rows(out, "listing_families") == expected and len(expected) > 100


def test_renamed_keys_read_the_modules_spellings(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """bench_eval spells emolia_emo (the module renames it to emolia-emo): one benchmark, one
    table, the original Whisper's rows in it; per-prompt rho and balanced_accuracy are the
    prompt's Spearman and oracle balanced accuracy (no "not recorded" where the file has it)."""
    tree, out, bundle, _ = done
    assert not (out / "tables" / "public_emolia_emo.csv").exists()
    bench = _read(tree / "bench_eval_20261004/public_scores.json")["models"]["small"]
    cut = bench["emolia_emo"]["repo_min_2_raters"]
    rows = [r for r in _rows(out, "public_emolia-emo") if r[0].startswith("Whisper Small / legacy")]
    shown = {r[1]: r for r in rows}
    assert float(shown["repo_min_2_raters"][5]) == pytest.approx(cut["mean_prompt_spearman"])
    prompts = [
        r
        for r in _rows(out, "human_prompts_emolia-emo")
        if r[0].startswith("Whisper Small / legacy") and r[1] == "repo_min_2_raters"
    ]
    assert [(r[2], float(r[4]), float(r[5])) for r in prompts] == [
        (p["prompt"], pytest.approx(p["rho"]), pytest.approx(p["balanced_accuracy"]))
        for p in cut["per_prompt"]
    ]
    assert all(r[4] and r[5] for r in _rows(out, "human_prompts_emolia-dim"))
    run = next(r for r in bundle["runs"] if r["id"] == "whisper/legacy/small")
    assert "emolia_emo" not in run.get("unused", {}).get("public", [])


def test_a_listing_of_records_in_a_tree_file(done: tuple[Path, Path, dict[str, Any], str]) -> None:
    tree, out, _, _ = done
    models = _read(tree / SD / "study.json")["models"]
    assert _rows(out, "listing_backbones") == [
        [
            m["id"],
            m.get("repo", m.get("model_name")),
            m.get("revision", m.get("checkpoint")),
            str(m["native_dim"]),
        ]
        for m in models
    ]


def test_a_note_shown_only_when_the_saved_value_says_so(tmp_path: Path) -> None:
    study = _copy(tmp_path)
    receipt = tmp_path / TREE.name / RECEIPT
    receipt.write_text(json.dumps({"id": 102, "publication_recovery": False}))
    text = study.read_text().replace('runs = { kind = "frozen probe" }', 'runs = { kind = "x" }')
    text = text.replace('runs = { kind = "original encoder" }', 'runs = { kind = "x" }')
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
    path = tmp_path / TREE.name / JOBS
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


#: The published module's 71 report elements (probe-report-module.txt, in its order) -> how
#: the bundled study's report shows each: ("table", name), ("h2", heading), ("text", a
#: snippet of the report), ("task", a row of the task leaders), ("bundle", a key).
MODULE_ELEMENTS: dict[str, tuple[str, str]] = {
    "Completed comparison banner (workflow completion)": ("text", "workflow completion (UTC)"),
    "Which model is best for which task?": ("table", "task_leaders"),
    "Task leader: EmoNet emotion intensity": ("task", "EmoNet emotion intensity"),
    "Task leader: VoiceNet-Emo / emolia-emo": ("task", "VoiceNet-Emo / emolia-emo"),
    "Task leader: VoiceNet-Ext / emolia-dim": ("task", "VoiceNet-Ext / emolia-dim"),
    "Task leader: CREMA-D": ("task", "CREMA-D"),
    "Task leader: RAVDESS speech": ("task", "RAVDESS speech"),
    "Task leader: Orange timbre128 prediction": ("task", "Orange timbre128 prediction"),
    "Task leader: Orange identity250 prediction": ("task", "Orange identity250 prediction"),
    "Task leader: Characters per second": ("task", "Characters per second"),
    "Task leader: Burst frame detection": ("task", "Burst frame detection"),
    "Task leader: Burst interval localization": ("task", "Burst interval localization"),
    "Task leader: Burst class with true intervals": ("task", "Burst class with true intervals"),
    "Task leader: Emotion-target regressions": ("task", "Emotion-target regressions"),
    "Task leader: VoiceNet-target regressions": ("task", "VoiceNet-target regressions"),
    "Task leader: Genuineness (0–6)": ("task", "Genuineness (0–6)"),
    "Task leader: Vocal-burst blend (0–10)": ("task", "Vocal-burst blend (0–10)"),
    "Task leader: AudioBox aesthetics, four axes": ("task", "AudioBox aesthetics, four axes"),
    "Task leader: DNSMOS outputs": ("task", "DNSMOS outputs"),
    "Study completion and data": ("table", "provenance"),
    "Frozen embedding backbones": ("table", "listing_backbones"),
    "Probe configurations, all trained and evaluated": ("table", "completion"),
    "Whisper full fine-tunes": ("table", "panel_whisper_gemini_small_test"),
    "Public benchmarks per configuration": ("table", "public_emonet"),
    "Final Slurm allocations, every final state COMPLETED 0:0": (
        "text",
        "final allocations (COMPLETED 0:0)",
    ),
    "Workflow completion (UTC)": ("text", "2026-10-07T04:12:09Z"),
    "Tracked allocation usage (GPU-hours)": ("text", "tracked GPU-hours (four-GPU allocations)"),
    "Supplementary full validation evaluation N/total": (
        "text",
        "supplementary validation evaluated",
    ),
    "Report generated (time stamp)": ("text", "report generated "),
    "Protocols and metric definitions": ("h2", "Metric definitions"),
    "All model/phase combinations: public benchmark results": ("table", "public_emolia-emo"),
    "Matched MLP accuracy per run": ("table", "adapters"),
    "Speaker vectors, CPS and vocal-burst timing for every run": ("table", "burst_speaker"),
    "Emotion, voice-style, aesthetics and DNSMOS target agreement": ("table", "families"),
    "Every quality axis (per target)": ("table", "saved_target_audiobox_CE"),
    "Full Whisper tuning: P3 retention before and after": ("table", "retention"),
    "Each P3 audit: all scores and event metrics": ("table", "panel_whisper_gemini_base_p3_test"),
    "Held-out audio targets of each run": ("table", "panel_probe_gemini_clapv2_s_mlp_test"),
    "CPS normalized MAE, derived using frozen training SD": ("table", "derived_runs"),
    "Interval IoU: precision, recall, event F1, matched": ("text", "burst_localization"),
    "Every target's raw/normalized MAE, Pearson, Spearman": ("table", "saved_target_emo_anger"),
    "Full selection-validation metrics of each run": (
        "table",
        "panel_whisper_legacy_base_validation",
    ),
    "Validation note: the split selected the checkpoint": ("text", "not an untouched test"),
    "Same Flash test: legacy head before its tuning epochs": (
        "table",
        "panel_probe_gemini_clapv2_s_mlp_pre_finetune",
    ),
    "EmoNet intensity: all recorded cuts": ("table", "public_emonet"),
    "All EmoNet emotion categories": ("table", "public_emonet_per_emotion"),
    "emolia-emo: all label-selection audits": ("table", "public_emolia-emo"),
    "emolia-dim: all label-selection audits": ("table", "public_emolia-dim"),
    "Every dimension of a cut (per_family)": ("table", "listing_families"),
    "All individual prompts in a cut (per_prompt)": ("table", "human_prompts_emolia-dim"),
    "CREMA-D and RAVDESS: fixed mappings versus matched supervised MLPs": (
        "table",
        "acted_CREMA-D",
    ),
    "Every class: recall and precision": ("table", "acted_RAVDESS_classes"),
    "Confusion matrix": ("table", "acted_RAVDESS_confusion"),
    "Adapter protocol and trainable parameters": ("table", "acted_RAVDESS"),
    "Outer folds": ("table", "acted_RAVDESS_folds"),
    "Every inner-fold hyperparameter trial": ("table", "acted_RAVDESS_trials"),
    "Exact metric JSON of each run": ("text", "measurements/"),
    "Executed training details": ("table", "training"),
    "Every recorded validation result (probes and Whisper training)": ("table", "history"),
    "Validation history curves": ("h2", "Validation history"),
    "Full validation quality of the selected best checkpoint (cross-run)": (
        "table",
        "summary_validation",
    ),
    "Backbones, exact revisions and native feature widths": ("table", "listing_backbones"),
    "Canonical vocal-burst class labels": ("table", "class_labels"),
    "Supplementary validation: publication recovered": (
        "text",
        "publication was recovered on the login node",
    ),
    "Every Slurm attempt": ("table", "job_attempts"),
    "Final study job? (final, supplementary, superseded)": (
        "text",
        "supplementary; publication recovered",
    ),
    "Gates: complete workflow, final allocations COMPLETED 0:0": ("table", "gates"),
    "Machine-readable result inventory (result manifest)": ("bundle", "result_manifest"),
    "Complete compressed result bundle (study, normalization, receipts)": ("bundle", "files"),
    "Confusion heatmaps": ("h2", "Confusion matrices (heatmaps)"),
    "Credits and licence": ("text", "class='credits'"),
}


def test_every_element_of_the_module_report_appears(
    done: tuple[Path, Path, dict[str, Any], str],
) -> None:
    """All 71 elements, from the bundled tree in the module's layout (no converted file), by a
    study file of at most 150 lines that passes."""
    _, out, bundle, report = done
    assert len(MODULE_ELEMENTS) == 71
    leaders = {r[0] for r in _rows(out, "task_leaders")}
    for element, (kind, name) in MODULE_ELEMENTS.items():
        shown = {
            "table": f'id="table-{name}"' in report,
            "h2": f">{name}</h2>" in report,
            "text": name in report,
            "task": name in leaders,
            "bundle": bool(bundle.get(name)),
        }[kind]
        assert shown, element
    assert len(STUDY.read_text().splitlines()) <= 150
    assert json.loads((out / "verification.json").read_text())["failures"] == []
    # No table without a row anywhere (a bare header says nothing).
    for path in (out / "tables").glob("*.csv"):
        assert len(path.read_text().splitlines()) > 1, path.name
    assert "<tbody></tbody>" not in report


def test_the_documented_study_keys_are_the_bundled_studys(tmp_path: Path) -> None:
    # docs/probe-layout.md shows `files`, `derived`, `note` and `[[gate]]` as excerpts of the
    # bundled study (which the tests run): each excerpt must be what the study declares, so
    # that a reader who copies one copies a tested declaration (labels and note texts aside).
    page = (ROOT / "docs" / "probe-layout.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", page, re.S)]
    study = tomllib.loads(STUDY.read_text())
    keys = {k for b in blocks for k in b}
    assert keys == {
        "gate",
        "files",
        "derived",
        "note",
        "rename",
        "listing",
        "families",
        "runs",
        "jobs",
        "history",
        "summaries",
        "leaders",
    }, keys
    for key in ("jobs", "history", "summaries", "leaders"):
        assert [b[key] for b in blocks if key in b] == [study[key]], key
    assert [b["runs"] for b in blocks if "runs" in b] == [study["runs"]]
    assert [b["families"] for b in blocks if "families" in b] == [study["families"]]
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
        if "rename" in block:
            assert block["rename"] == study["rename"]
        for entry in block.get("listing", []):
            assert entry in study["listing"], entry["name"]


GATE_RULE = (
    'final_from = { file = "workflow.json", single = ["pilot_job"], '
    'last_of = ["cache_jobs", "tasks"] }'
)


def _module_gate_passes(tree: Path) -> bool:
    """The module's own check (probe-report-module.txt, make_sections), on the tree's files."""
    by_id = {int(j["JobIDRaw"]): j for j in _read(tree / JOBS)["jobs"]}
    finals = _module_finals(tree)
    if any(j not in by_id for j in finals):
        return False  # the module stops with a KeyError
    return all(by_id[j]["State"] == "COMPLETED" and by_id[j]["ExitCode"] == "0:0" for j in finals)


def _edit(path: Path, change: Any) -> None:
    doc = _read(path)
    change(doc)
    path.write_text(json.dumps(doc))


def _fail_last_small(doc: Any) -> None:
    doc["jobs"][8]["State"] = "FAILED"  # 5008, the last whisper_small attempt


def _drop_repair(doc: Any) -> None:
    doc["tasks"]["whisper_base"].pop()  # 5006 (NODE_FAIL) is the last attempt now


def _unknown_job(doc: Any) -> None:
    doc["tasks"]["extra"] = [{"id": 6000}]


def _repair_supplementary(doc: Any) -> None:
    doc["jobs"][9]["State"] = "COMPLETED"
    doc["jobs"][9]["ExitCode"] = "0:0"


@pytest.mark.parametrize(
    ("file", "change", "problem"),
    [
        (None, None, None),  # as bundled: a repaired cache job, a recovered supplementary job
        (JOBS, _repair_supplementary, None),
        (JOBS, _fail_last_small, "State is 'FAILED', expected 'COMPLETED'"),
        (WORKFLOW, _drop_repair, "State is 'NODE_FAIL', expected 'COMPLETED'"),
        (WORKFLOW, _unknown_job, "final job 6000 (per the workflow record) has no record"),
    ],
)
def test_the_gate_passes_where_the_module_passes_and_fails_where_it_fails(
    tmp_path: Path, file: str | None, change: Any, problem: str | None
) -> None:
    study = _copy(tmp_path)
    tree = tmp_path / TREE.name
    if file is not None:
        _edit(tree / file, change)
    out = tmp_path / "out"
    code = main(["reproduce", str(study), "--out", str(out)])
    assert code == (0 if _module_gate_passes(tree) else 1)
    failures = json.loads((out / "verification.json").read_text())["failures"]
    gate = [f for f in failures if "every final Slurm attempt" in f]
    if problem is None:
        assert code == 0 and gate == []
    else:
        assert code == 1 and len(gate) == 1 and problem in gate[0], failures


def test_the_job_name_rule_fails_the_tree_the_module_passes(tmp_path: Path) -> None:
    """The last attempt per JobName (a study without a workflow record) takes the failed
    supplementary job as final: on this tree it fails, where the module (and the workflow
    rule) pass, and it counts 8 final allocations where the module counts 7."""
    study = _copy(tmp_path)
    text = study.read_text()
    assert GATE_RULE in text
    study.write_text(text.replace(GATE_RULE, 'final_by = "JobName"'))
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 1
    assert _module_gate_passes(tmp_path / TREE.name)
    failures = json.loads((out / "verification.json").read_text())["failures"]
    assert any("jobs[9].State is 'FAILED'" in f for f in failures), failures
    # The attempt table still follows the workflow record (the study's jobs.final_from).
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    assert bundle["result_manifest"]["final_allocations"] == 7


def _one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], study: Path, *names: str) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in err, (name, err)
    assert not (out / "report.html").exists()


def _public_file(tree: Path) -> Path:
    return tree / SD / "probes/gemini/clapv2_s/mlp/public_metrics.json"


@pytest.mark.parametrize(
    ("where", "change", "names"),
    [
        # sacct's text is read as its number only when it is decimal text
        (JOBS, lambda d: d["jobs"][3].update(ElapsedRaw="18e2x"),
         ("job_audit.json", "key 'jobs[3].ElapsedRaw'", "is text '18e2x'")),
        # a record-list table's numbers column
        ("public", lambda d: d["emolia-emo"]["repo_min_2_raters"]["per_family"][1].update(n="12x"),
         ("public_metrics.json", "emolia-emo.repo_min_2_raters.per_family[1].n", "is text '12x'")),
        ("public", lambda d: d["emolia-emo"]["all_repo_rows"].update(per_family={"a": 1}),
         ("public_metrics.json", "emolia-emo.all_repo_rows.per_family", "expected a list")),
        ("public", lambda d: d["emolia-dim"]["all_repo_rows"]["per_family"].append("x"),
         ("public_metrics.json", "per_family[2]", "expected a record")),
        # both spellings of a renamed key: which one holds the number would be a guess
        ("public", lambda d: d.update({"emolia_emo": d["emolia-emo"]}),
         ("public_metrics.json", "key 'emolia_emo'", "holds both 'emolia_emo' and 'emolia-emo'")),
        ("public", lambda d: d["emolia-emo"]["all_repo_rows"]["per_prompt"][0].update(spearman=0.1),
         ("public_metrics.json", "per_prompt[0].rho", "holds both 'rho' and 'spearman'")),
    ],
)  # fmt: skip
def test_bad_text_numbers_renames_and_record_lists_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: str,
    change: Any,
    names: tuple[str, ...],
) -> None:
    study = _copy(tmp_path)
    tree = tmp_path / TREE.name
    _edit(_public_file(tree) if where == "public" else tree / where, change)
    _one_line(tmp_path, capsys, study, *names)


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ('"*.*.per_prompt[*].rho" = "spearman"', '"*.*.per_prompt[*]" = "spearman"',
         ("key 'rename.public'", "must end in a plain key")),
        ('emolia_emo = "emolia-emo"', 'emolia_emo = "emolia.emo"',
         ("key 'rename.public'", "without dots")),
        ('split = "public", at', 'file = "study", split = "public", at',
         ("listing[1]", "a 'file' or a 'split'")),
        ('split = "public", at', 'split = "publik", at',
         ("listing[1].split", "names split 'publik'")),
        ('at = "*.*.per_family"', 'at = "*.*.per family]"',
         ("listing[1]", "cannot read key path")),
        ('numbers = ["n",', 'numbers = ["N",', ("listing[1].numbers[0]", "not one of columns")),
        ("each = \"jobs\"\nfinal_from", "final_from", ("gate[1].final_from", "needs 'each'")),
        ('y = "validation.loss|validation_loss"', 'y = "validation.loss|a["',
         ("key 'history'", "key path")),
    ],
)  # fmt: skip
def test_a_bad_rule_declaration_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, names: tuple[str, ...]
) -> None:
    text = STUDY.read_text()
    assert old in text, old
    study = _copy(tmp_path, text.replace(old, new, 1))
    _one_line(tmp_path, capsys, study, *names)


def test_decimal_text_is_read_as_the_modules_int_and_float_read_it() -> None:
    from audiorepro.runner.kinds.probe.derived import decimal_text

    for text in ("1800", "0", "-3", "+7", "2.50"):
        assert decimal_text(text) == float(text)
    for text in ("18e2x", "1e3", " 1800", "1800 ", "1_800", "nan", "inf", "", "1.", ".5", "0x10"):
        assert decimal_text(text) is None, text


def test_the_report_time_is_source_date_epochs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock time never enters the bundle or the report (two runs of one study: the same
    bytes but manifest.json); SOURCE_DATE_EPOCH, an input, is the module's `generated_utc`."""
    study = _copy(tmp_path)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        assert main(["reproduce", str(study), "--out", str(out)]) == 0
    for name in ("bundle.json.gz", "report.html", "verification.json"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1760000000")
    out = tmp_path / "epoch"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    manifest = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    assert manifest["result_manifest"]["generated_utc"] == "2025-10-09T08:53:20Z"
    assert "report generated <time>2025-10-09T08:53:20Z</time>" in (out / "report.html").read_text()

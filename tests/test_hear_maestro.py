"""A maestro-shaped HEAR event task: HEAR 2021's ``maestro-v3.0.0-5h`` lists
``evaluation: ["event_onset_50ms_fms", "event_onset_offset_50ms_20perc_fms"]``. Built here from
the kit's event task with that metadata; it runs end to end through `audiorepro hear` with both
predictors, its post-processing is chosen on the first score (as heareval's predictor does),
and a published row on the second score gets a verdict."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.formats.hear import read_task
from audiorepro.formats.hear_embeddings import read_embeddings
from audiorepro.metrics.hear_events import events_by_file, postprocessing_settings
from audiorepro.runner.kinds.hear.frames import _event_score, _frame_rows, _frame_scores, event_fold
from tests.hear_reference import build_tasks
from tests.test_hear_command import EVENT_MODULE

MAESTRO = ["event_onset_50ms_fms", "event_onset_offset_50ms_20perc_fms"]


@pytest.fixture(scope="module")
def maestro_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("maestro")
    built = build_tasks(root / "built")
    tasks = root / "tasks"
    shutil.copytree(built / "events-v1-full", tasks / "events-v1-full")
    meta_path = tasks / "events-v1-full" / "task_metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["evaluation"] = MAESTRO
    # A short MLP grid (heareval's task_specific_param_grid), so the test stays small.
    meta["evaluation_params"] = {"task_specific_param_grid": {"max_epochs": [4], "lr": [0.01]}}
    meta_path.write_text(json.dumps(meta, indent=4))
    (root / "mods").mkdir()
    (root / "mods" / "hear_maestro_module_t.py").write_text(EVENT_MODULE)
    sys.path.insert(0, str(root / "mods"))
    return tasks


def _run(tasks: Path, out: Path, predictor: str) -> dict[str, Any]:
    argv = ["hear", "hear:hear_maestro_module_t", "--tasks-dir", str(tasks), "--task", "events"]
    assert main([*argv, "--predictor", predictor, "--out", str(out)]) == 0
    doc: dict[str, Any] = json.loads(
        (out / "events-v1-full" / "test.predicted-scores.json").read_text()
    )
    return doc


@pytest.mark.parametrize("predictor", ["linear-v1", "hear-mlp-v1"])
def test_a_maestro_shaped_task_runs_with_both_scores(
    maestro_dir: Path, tmp_path: Path, predictor: str
) -> None:
    doc = _run(maestro_dir, tmp_path / "out", predictor)
    test = doc["test"]
    onset, both = test["test_event_onset_50ms_fms"], test["test_event_onset_offset_50ms_20perc_fms"]
    assert 0.0 <= both <= 1.0 and 0.0 <= onset <= 1.0
    # A hit on onset and offset is a hit on the onset (same collar): never more hits.
    assert both <= onset + 1e-12 or onset == 0.0
    again = _run(maestro_dir, tmp_path / "again", predictor)
    assert again == doc  # deterministic


def test_linear_v1_chooses_postprocessing_on_the_first_score(
    maestro_dir: Path, tmp_path: Path
) -> None:
    """The setting and validation score the command reports are event_fold's on the first
    score; with the scores listed the other way round the choice is made on the second."""
    doc = _run(maestro_dir, tmp_path / "out", "linear-v1")
    task = read_task(maestro_dir / "events-v1-full")
    saved = read_embeddings(task, tmp_path / "out" / "events-v1-full")
    emb = {k: s.embeddings for k, s in saved.items()}
    stamps = {k: s.timestamps for k, s in saved.items()}
    split = {s: (s,) for s in ("train", "valid", "test")}
    fold = event_fold(task, emb, stamps, split)
    assert (
        fold.test["event_onset_offset_50ms_20perc_fms"]
        == doc["test"]["test_event_onset_offset_50ms_20perc_fms"]
    )
    setting = tuple((str(k), v) for k, v in doc["postprocessing"])
    assert setting == fold.setting
    assert set(fold.test) == set(MAESTRO)
    assert doc["test"]["validation_score"] == fold.valid
    # The other order: the choice is made on the onset-and-offset score, whose best validation
    # value is at least the one the onset score's setting gives it.
    swapped = replace(task, metadata=replace(task.metadata, evaluation=tuple(reversed(MAESTRO))))
    other = event_fold(swapped, emb, stamps, split)
    assert set(other.test) == set(MAESTRO)
    train, valid = (_frame_rows(task, emb, stamps, (s,)) for s in ("train", "valid"))
    probs = _frame_scores(train, valid.x)

    def on_valid(name: str, setting: Any) -> float:
        events = events_by_file(probs, valid.files, valid.stamps, task.vocabulary, setting)
        return _event_score(name, events, task, ("valid",))

    values = {s: [on_valid(n, s) for n in MAESTRO] for s in postprocessing_settings(None)}
    assert fold.valid == values[fold.setting][0] == max(v[0] for v in values.values())
    assert other.valid == values[other.setting][1] == max(v[1] for v in values.values())


def test_a_published_row_on_the_second_score_gets_a_verdict(
    maestro_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got = _run(maestro_dir, tmp_path / "cmd", "linear-v1")["test"][
        "test_event_onset_offset_50ms_20perc_fms"
    ]
    off = got - 0.3 if got >= 0.3 else got + 0.3
    rows = "".join(
        f'\n[[published]]\ncell = "maestro"\ntolerance = 0.01\nprovenance = "a row"\n'
        f"values = {{ event_onset_offset_50ms_20perc_fms = {v!r} }}\n"
        for v in (round(got + 0.004, 6), round(off, 6))
    )
    study = tmp_path / "study.toml"
    study.write_text(
        f"""schema = "audiorepro.study/1"
name = "hear-maestro"
kind = "hear"

[[cell]]
id = "maestro"
model = "hear:hear_maestro_module_t"
tasks_dir = "{maestro_dir}"
task = "events"
predictor = "linear-v1"
{rows}"""
    )
    assert main(["reproduce", str(study), "--out", str(tmp_path / "o")]) == 1
    golden = json.loads((tmp_path / "o" / "verification.json").read_text())["golden"]
    assert [r["status"] for r in golden["rows"]] == ["PASS", "FAIL"]
    assert golden["rows"][0]["reproduced"] == got


@pytest.mark.heareval
@pytest.mark.slow
def test_kit_scores_on_heareval_maestro_predictions_equal_heareval(
    maestro_dir: Path, tmp_path: Path
) -> None:
    """heareval's own predictor (faster grid, one point) on the command's maestro-shaped
    folder: the kit's two scores of heareval's cached test predictions equal heareval's score
    classes to 1e-12 and its logged test.predicted-scores.json (float32) to float32."""
    import pickle

    import numpy as np
    from heareval.score import available_scores

    from audiorepro.formats.hear import HearEvent
    from audiorepro.metrics import hear as m
    from tests.hear_reference import heareval_predictions

    _run(maestro_dir, tmp_path / "out", "linear-v1")
    layout = tmp_path / "heareval" / "events-v1-full"
    shutil.copytree(
        tmp_path / "out" / "events-v1-full",
        layout,
        ignore=shutil.ignore_patterns("test.predicted-scores.json"),
    )
    heareval_predictions(layout)
    logged = json.loads((layout / "test.predicted-scores.json").read_text())["test"]
    pred = pickle.loads((layout / "test.predictions.pkl").read_bytes())  # this test's own file
    events = {
        kind: {
            k: [HearEvent(str(e["label"]), float(e["start"]), float(e["end"])) for e in v]
            for k, v in pred[f"{kind}_events"].items()
        }
        for kind in ("predicted", "target")
    }
    vocab = {
        label: i for i, label in enumerate(read_task(maestro_dir / "events-v1-full").vocabulary)
    }
    ours = {
        "event_onset_50ms_fms": m.event_onset_fms(
            events["predicted"], events["target"], collar=0.05
        ),
        "event_onset_offset_50ms_20perc_fms": m.event_onset_offset_fms(
            events["predicted"], events["target"]
        ),
    }
    for name, score in ours.items():
        theirs = dict(available_scores[name](label_to_idx=vocab)(
            pred["predicted_events"], pred["target_events"]
        ))  # fmt: skip
        for key in ("f_measure", "precision", "recall"):
            value = getattr(score, key)
            assert abs(value - theirs[key]) <= 1e-12 or (
                value != value and theirs[key] != theirs[key]
            )
            assert np.float32(value) == np.float32(logged[f"test_{name}_{key}"]) or value != value

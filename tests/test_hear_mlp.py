"""``hear-mlp-v1`` (runner.kinds.hear.mlp): heareval 2021.1.3's downstream predictor in plain
torch. Its grid and sampling, determinism, the command and its documented line; and, marked
heareval (`tox -e hear`), heareval's own predictor on the same embeddings: the same
predictions to the bit where both run on one thread, the kit's scores within the spread of
heareval's own runs over seeds where heareval runs on more."""

from __future__ import annotations

import json
import math
import pickle
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.hear import HearTask, read_task
from audiorepro.formats.hear_embeddings import read_embeddings
from audiorepro.metrics import hear as scores
from audiorepro.runner.kinds.hear import check_task
from audiorepro.runner.kinds.hear.mlp import grid_points, logged, mlp_cell, mlp_task
from tests import test_hear_command
from tests.conftest import ROOT
from tests.hear_reference import heareval_predictions, kit_embeddings

#: The three built tasks (tools/make_hear_tasks.py), as tests/test_hear_command.py builds them.
tasks_dir = test_hear_command.tasks_dir


def _layout(tasks_dir: Path, name: str, where: Path) -> tuple[HearTask, Path]:
    """The stand-in model's embeddings of task ``name`` in heareval's layout under ``where``."""
    task = read_task(tasks_dir / name)
    layout = where / task.name
    kit_embeddings(task, layout)
    return task, layout


def _inputs(task: HearTask, layout: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    saved = read_embeddings(task, layout)
    emb = {s: v.embeddings for s, v in saved.items()}
    event = task.metadata.embedding_type == "event"
    return emb, ({s: v.timestamps for s, v in saved.items()} if event else None)


def _meta_task(tasks_dir: Path, tmp_path: Path, **params: Any) -> HearTask:
    folder = tmp_path / "words"
    shutil.copytree(tasks_dir / "words-v1-full", folder)
    meta = json.loads((folder / "task_metadata.json").read_text())
    meta.update(params)
    (folder / "task_metadata.json").write_text(json.dumps(meta))
    return read_task(folder)


# --- the grid --------------------------------------------------------------------------------


def test_the_grids_and_their_sampling_are_heareval_s(tasks_dir: Path) -> None:
    """16 points in PARAM_GRID, 64 in FAST and FASTER; the order ParameterGrid then
    random.shuffle after seed 42 gives (heareval's first three sampled points)."""
    task = read_task(tasks_dir / "words-v1-full")
    assert [len(grid_points(task, g)) for g in ("default", "fast", "faster")] == [16, 64, 64]
    first = [(p.hidden_layers, p.lr, p.initialization) for p in grid_points(task)[:3]]
    assert first == [(1, 1e-4, "xavier_normal_"), (2, 1e-3, "xavier_uniform_"),
                     (1, 1e-3, "xavier_normal_")]  # fmt: skip
    assert {p.max_epochs for p in grid_points(task)} == {500}
    assert {(p.patience, p.check_val_every_n_epoch) for p in grid_points(task)} == {(20, 3)}


def test_a_task_specific_grid_updates_the_grid(tasks_dir: Path, tmp_path: Path) -> None:
    grid = {"task_specific_param_grid": {"max_epochs": [4], "lr": [0.01]}}
    task = _meta_task(tasks_dir, tmp_path, evaluation_params=grid)
    points = grid_points(task)
    assert len(points) == 4 and {(p.max_epochs, p.lr) for p in points} == {(4, 0.01)}


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"hidden_size": [3]}, "task_specific_param_grid.hidden_size': is not one of heareval"),
        ({"optim": ["Adagrad"]}, "task_specific_param_grid.optim': 'Adagrad' is not one of"),
        ({"lr": []}, "task_specific_param_grid.lr': expected a non-empty list"),
        ({"lr": ["fast"]}, "task_specific_param_grid.lr': expected numbers"),
        ({"patience": [0.5]}, "task_specific_param_grid.patience': expected whole numbers"),
        ({"max_epochs": [2]}, "task_specific_param_grid': has a point whose max_epochs is below"),
    ],
)
def test_a_bad_task_specific_grid_is_one_line(
    tasks_dir: Path, tmp_path: Path, grid: dict[str, Any], message: str
) -> None:
    task = _meta_task(tasks_dir, tmp_path, evaluation_params={"task_specific_param_grid": grid})
    with pytest.raises(UserError) as err:
        check_task(task, "hear-mlp-v1")  # as `audiorepro hear` checks a task before any work
    text = str(err.value)
    assert "task_metadata.json" in text and message in text and "\n" not in text, text


def test_multilabel_scene_tasks_take_the_mlp_not_the_linear_probe(tasks_dir: Path) -> None:
    task = read_task(tasks_dir / "mixtures-v1-full")
    check_task(task, "hear-mlp-v1")
    with pytest.raises(UserError, match="linear-v1 is a multiclass probe"):
        check_task(task, "linear-v1")


def test_a_multiclass_event_task_with_unlabelled_frames_is_one_line(
    tasks_dir: Path, tmp_path: Path
) -> None:
    """heareval asserts one label per row for multiclass; frames between events have none."""
    folder = tmp_path / "tasks" / "events-v1-full"
    shutil.copytree(tasks_dir / "events-v1-full", folder)
    meta = json.loads((folder / "task_metadata.json").read_text())
    (folder / "task_metadata.json").write_text(json.dumps(meta | {"prediction_type": "multiclass"}))
    task, layout = _layout(tmp_path / "tasks", "events-v1-full", tmp_path)
    emb, stamps = _inputs(task, layout)
    with pytest.raises(UserError) as err:
        mlp_task(task, emb, stamps, grid="faster", points=1)
    text = str(err.value)
    assert "task_metadata.json" in text and "'prediction_type': is a multiclass task" in text
    assert "\n" not in text


# --- determinism -----------------------------------------------------------------------------


def test_byte_reproducible_on_any_thread_count_and_the_caller_s_generator_untouched(
    tasks_dir: Path, tmp_path: Path
) -> None:
    """Two runs (the second with the caller on two threads and another seed) give the same
    predictions to the bit; torch's generator and thread count are as the caller left them."""
    import torch

    task, layout = _layout(tasks_dir, "events-v1-full", tmp_path)
    emb, stamps = _inputs(task, layout)
    torch.manual_seed(7)
    state = torch.get_rng_state()
    first = mlp_task(task, emb, stamps, grid="faster", points=3)
    assert torch.equal(torch.get_rng_state(), state)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    torch.manual_seed(123)
    try:
        second = mlp_task(task, emb, stamps, grid="faster", points=3)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    for key, fold in first.folds.items():
        assert fold.test_probs.tobytes() == second.folds[key].test_probs.tobytes()
        assert fold.trained.setting == second.folds[key].trained.setting
    assert [v for _, v in first.sampled] == [v for _, v in second.sampled]


def test_selection_takes_the_best_validation_point(tasks_dir: Path, tmp_path: Path) -> None:
    """The chosen point is the sampled point with the highest validation value (the first of
    equals), and a fold task trains it on every fold (test on fold i, validate on i+1)."""
    task, layout = _layout(tasks_dir, "mixtures-v1-full", tmp_path)
    emb, _ = _inputs(task, layout)
    fit = mlp_task(task, emb, None, grid="faster", points=3)
    values = [v for _, v in fit.sampled]
    assert fit.point == fit.sampled[values.index(max(values))][0]
    assert list(fit.folds) == ["fold00", "fold01", "fold02", "fold03"]
    assert [f.valid.splits for f in fit.folds.values()] == [
        ("fold01",),
        ("fold02",),
        ("fold03",),
        ("fold00",),
    ]
    first = fit.folds["fold00"]
    assert first.trained.validation == pytest.approx(max(values), abs=0)
    # The checkpoint's validation value is the first score of its validation predictions.
    value = scores.mean_average_precision_score(first.valid_probs, first.valid.y)
    assert logged("mAP", value) == first.trained.validation


# --- the command and its documented line -----------------------------------------------------


def _run_doc_line(line: str, cwd: Path) -> None:
    """One shell line of docs/hear.md as written (``python`` and ``audiorepro`` with ``-P``,
    so the module beside the tasks is found by audiorepro, not by the interpreter)."""
    argv = shlex.split(line)
    program = [sys.executable, "-P"] + ([] if argv[0] == "python" else ["-m", "audiorepro"])
    done = subprocess.run(
        [*program, *argv[1:]], cwd=cwd, capture_output=True, text=True, check=False, timeout=900
    )
    assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])


@pytest.mark.slow
def test_the_documented_hear_mlp_line_as_written(tasks_dir: Path, tmp_path: Path) -> None:
    """docs/hear.md, "HEAR's predictor": the module of "Run a HEAR module" and the section's
    lines; then a hear study cell with hear-mlp-v1 in this process: the same
    test.predicted-scores.json byte for byte, its published row PASS; and the scores are those
    of mlp_cell on the embeddings the command wrote."""
    from tests.test_documented_commands import blocks

    assert (ROOT / "docs" / "hear.md").is_file()
    module = [b for b in blocks("docs/hear.md") if b.heading.startswith("Run a HEAR module")]
    (source,) = [b.body for b in module if b.lang == "python"]
    page = [b for b in blocks("docs/hear.md") if b.heading.startswith("HEAR's predictor")]
    (shell,) = [b for b in page if b.lang == "bash"]
    (tmp_path / "my_hear_module.py").write_text(source + "\n")
    (tmp_path / "tools").mkdir()
    for tool in ("make_hear_tasks.py", "make_speech.py"):
        shutil.copy(ROOT / "tools" / tool, tmp_path / "tools" / tool)
    for line in shell.commands():
        _run_doc_line(line, tmp_path)
    written = tmp_path / "hear-mlp-out" / "words-v1-full" / "test.predicted-scores.json"
    doc = json.loads(written.read_text())
    assert doc["hparams"]["predictor"] == "hear-mlp-v1"
    assert doc["hparams"]["grid"] == "default" and doc["hparams"]["grid_points"] == 8
    assert isinstance(doc["test"]["epoch"], int)
    # Again in this process, as a hear study's cell (the module imported from tmp_path) with
    # the first run's value as its published row: the same file byte for byte, and PASS.
    study = tmp_path / "mlp-study.toml"
    study.write_text(
        f"""schema = "audiorepro.study/1"
name = "hear-mlp"
kind = "hear"

[[cell]]
id = "words-v1-full"
model = "hear:my_hear_module"
tasks_dir = "hear-tasks"
task = "words"
predictor = "hear-mlp-v1"

[[published]]
cell = "words-v1-full"
tolerance = 0.01
provenance = "the documented command's run"
values = {{ top1_acc = {doc["test"]["test_top1_acc"]!r} }}
"""
    )
    sys.path.insert(0, str(tmp_path))
    try:
        assert main(["reproduce", str(study), "--out", str(tmp_path / "o2")]) == 0
    finally:
        sys.path.remove(str(tmp_path))
    again = tmp_path / "o2" / "words-v1-full" / "test.predicted-scores.json"
    assert again.read_bytes() == written.read_bytes()
    golden = json.loads((tmp_path / "o2" / "verification.json").read_text())["golden"]
    assert [r["status"] for r in golden["rows"]] == ["PASS"]
    task = read_task(tmp_path / "hear-tasks" / "words-v1-full")
    emb, _ = _inputs(task, written.parent)
    fit = mlp_cell(task, emb, None)
    assert doc["test"]["test_top1_acc"] == fit.folds["test"][0]["top1_acc"]
    assert doc["test"]["validation_score"] == fit.folds["test"][1]


# --- heareval's own predictor ----------------------------------------------------------------

#: (task, grid, points): each of heareval's code paths on the three built tasks: a multiclass,
#: a multilabel fold and an event task on the faster grid (no hidden layer or one, patience 1
#: and 3, validation every epoch), and the default grid's first two points (one and two hidden
#: layers of 1024, both initializations, validation every third epoch, patience 20).
CASES: list[tuple[str, str, int, dict[str, Any]]] = [
    ("words-v1-full", "faster", 4, {}),
    ("mixtures-v1-full", "faster", 2, {}),
    ("events-v1-full", "faster", 4, {}),
    ("words-v1-full", "default", 2, {}),
    # d_prime first: validation values compared in float64 (heareval's numpy float64).
    ("mixtures-v1-full", "faster", 2, {"evaluation": ["d_prime", "mAP"]}),
    # The validation loss monitored instead of the score; an event task's one setting.
    ("words-v1-full", "faster", 2, {"use_scoring_for_early_stopping": False}),
    ("events-v1-full", "faster", 2, {
        "use_scoring_for_early_stopping": False,
        "evaluation_params": {
            "event_postprocessing_grid": {"median_filter_ms": [250], "min_duration": [125]}
        },
    }),
]  # fmt: skip


def _their_hparams(hparams: dict[str, Any]) -> dict[str, Any]:
    """heareval's hparams (str() of torch classes and functions) by the kit's names."""
    out = dict(hparams)
    for key in ("hidden_norm", "embedding_norm", "optim"):
        out[key] = out[key].split("'")[1].rsplit(".", 1)[-1]
    out["initialization"] = out["initialization"].split()[1]
    return out


def _single_thread() -> Any:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    return threads


@pytest.mark.heareval
@pytest.mark.parametrize(("name", "grid", "points", "meta"), CASES)
def test_predictions_equal_heareval_s_on_one_thread(
    tasks_dir: Path, tmp_path: Path, name: str, grid: str, points: int, meta: dict[str, Any]
) -> None:
    """heareval's predictor (one intra-op thread, as the kit runs) and the kit's on the same
    embeddings: every test split's predictions equal to the bit, the same chosen point, epochs,
    validation values (as heareval logs them: float32, d_prime float64) and post-processing;
    the kit's scores of the same predictions are heareval's logged test scores."""
    import torch

    if meta:
        edited = tmp_path / "tasks" / name
        shutil.copytree(tasks_dir / name, edited)
        data = json.loads((edited / "task_metadata.json").read_text())
        (edited / "task_metadata.json").write_text(json.dumps(data | meta))
    task, layout = _layout(tmp_path / "tasks" if meta else tasks_dir, name, tmp_path)
    emb, stamps = _inputs(task, layout)
    threads = _single_thread()
    try:
        heareval_predictions(layout, grid=grid, grid_points=points)
    finally:
        torch.set_num_threads(threads)
    theirs = json.loads((layout / "test.predicted-scores.json").read_text())
    cell = mlp_cell(task, emb, stamps, grid=grid, points=points)
    fit = mlp_task(task, emb, stamps, grid=grid, points=points)
    kit = {k: v.rsplit(".", 1)[-1] if isinstance(v, str) else v
           for k, v in fit.point.hparams().items()}  # fmt: skip
    assert _their_hparams(theirs["hparams"]) == kit
    for key, fold in fit.folds.items():
        with (layout / f"{key}.predictions.pkl").open("rb") as fp:
            pred = pickle.load(fp)  # written by heareval in this test
        assert np.array_equal(pred["prediction"].numpy(), fold.test_probs), key
        assert theirs[key]["epoch"] == fold.trained.epoch
        assert theirs[key]["validation_score"] == fold.trained.validation
        for score in task.metadata.evaluation:
            ours = cell.folds[key][0][score]
            theirs_value = theirs[key][f"test_{score}"]
            if math.isnan(ours) or math.isinf(ours):
                assert ours == theirs_value or math.isnan(theirs_value), (key, score)
            else:
                assert logged(score, ours) == pytest.approx(theirs_value, rel=1e-12, abs=0)
    if task.metadata.embedding_type == "event":
        chosen = fit.folds["test"].trained.setting
        assert [tuple(p) for p in theirs["postprocessing"]] == list(chosen or ())


def _seeding(pl: Any, seed: int) -> Any:
    def seed_everything(_seed: int, workers: bool = False) -> int:
        return int(pl.seed_everything(seed, workers=workers))

    return seed_everything


#: heareval's seeds for the spread (its own 42 among them).
SEEDS = (42, 0, 1, 2, 3)


@pytest.mark.heareval
@pytest.mark.parametrize("name", ["words-v1-full", "events-v1-full"])
def test_on_two_threads_the_kit_lies_within_heareval_s_spread_over_seeds(
    tasks_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """heareval on two intra-op threads sums float32 in another order than on one (the kit
    always runs on one), so its predictions differ; there every test score of the kit's lies
    within the range of heareval's own runs over seeds (its ``seed_everything(42)`` given
    each seed in turn)."""
    import heareval.predictions.task_predictions as tp
    import pytorch_lightning as pl
    import torch

    task, layout = _layout(tasks_dir, name, tmp_path / "kit")
    emb, stamps = _inputs(task, layout)
    ours = mlp_cell(task, emb, stamps, grid="faster", points=2).folds["test"][0]
    runs: list[dict[str, Any]] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for seed in SEEDS:
            monkeypatch.setattr(tp, "seed_everything", _seeding(pl, seed))
            _, copy = _layout(tasks_dir, name, tmp_path / f"seed{seed}")
            heareval_predictions(copy, grid="faster", grid_points=2)
            runs.append(json.loads((copy / "test.predicted-scores.json").read_text())["test"])
    finally:
        torch.set_num_threads(threads)
    for score, value in ours.items():
        theirs = [r[f"test_{score}"] for r in runs]
        lo, hi = min(theirs), max(theirs)
        # heareval logs a score in float32 (d_prime float64): compare at that precision.
        assert lo <= logged(score, value) <= hi, (score, value, theirs)

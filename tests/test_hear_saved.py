"""A HEAR submission's saved predictions scored without its model: hear study cells with
`predictions = DIR` (runner.kinds.hear.saved, formats.hear_predictions). heareval's own
predictor writes the folders in the tests marked heareval (`tox -e hear`); elsewhere the files
are written with heareval's own line (`pickle.dump(predictor.test_predictions, fp)`)."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.hear import data_splits, read_task
from audiorepro.formats.hear_embeddings import write_embeddings
from tests.conftest import ROOT
from tests.hear_reference import build_tasks

TOOL = ROOT / "tools" / "make_hear_tasks.py"
TASKS = ("words-v1-full", "mixtures-v1-full", "events-v1-full")


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tasks(tmp_path_factory.mktemp("hear-saved"))


def _study(path: Path, cells: list[tuple[str, str, Path]], published: str = "") -> Path:
    text = 'schema = "audiorepro.study/1"\nname = "saved"\nkind = "hear"\n'
    for cid, task, folder in cells:
        text += (
            f'\n[[cell]]\nid = "{cid}"\nmodel = "hear:submitted"\ntasks_dir = "tasks"\n'
            f'task = "{task}"\npredictions = "{folder.relative_to(path.parent).as_posix()}"\n'
        )
    path.write_text(text + published)
    return path


def _row(cell: str, values: dict[str, float], tolerance: float) -> str:
    inner = ", ".join(f"{k} = {v!r}" for k, v in values.items())
    return (
        f'\n[[published]]\ncell = "{cell}"\ntolerance = {tolerance!r}\n'
        f'provenance = "the submission\'s test.predicted-scores.json"\nvalues = {{ {inner} }}\n'
    )


def _golden(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((out / "verification.json").read_text())["golden"][
        "rows"
    ]
    return rows


# --- files written with heareval's own line -------------------------------------------------


def _dump_scene(folder: Path, task: Any, seed: int, test: tuple[str, ...]) -> tuple[Any, Any]:
    """heareval's `<test split>.predictions.pkl` of seeded class scores for the task's test
    rows: `pickle.dump(predictor.test_predictions, fp)`, a dict of CPU tensors."""
    import torch

    from audiorepro.formats.hear_embeddings import row_order

    index = {label: j for j, label in enumerate(task.vocabulary)}
    order = row_order(task)  # heareval's test rows: its shuffle of the split's files
    names = [(s, n) for s in test for n in order[s]]
    target = np.zeros((len(names), len(index)), dtype=np.float32)
    for i, (s, n) in enumerate(names):
        target[i, [index[label] for label in task.scene_labels[s][n]]] = 1
    logits = np.random.default_rng(seed).standard_normal(target.shape).astype(np.float32)
    logits += 1.5 * target  # better than chance, not perfect
    prediction = torch.softmax(torch.from_numpy(logits), dim=1)
    doc = {
        "target": torch.from_numpy(target),
        "prediction": prediction,
        "prediction_logit": torch.from_numpy(logits),
    }
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{'|'.join(test)}.predictions.pkl", "wb") as fp:
        pickle.dump(doc, fp)
    return target, prediction.numpy()


def test_saved_scene_predictions_are_scored_and_checked_against_a_row(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sklearn.metrics import accuracy_score

    shutil.copytree(tasks_dir, tmp_path / "tasks")
    task = read_task(tmp_path / "tasks" / "words-v1-full")
    folder = tmp_path / "submission" / "words-v1-full"
    target, prediction = _dump_scene(folder, task, 0, ("test",))
    acc = float(accuracy_score(target.argmax(axis=1), prediction.argmax(axis=1)))
    assert 0.125 < acc < 1.0
    rows = _row("w", {"top1_acc": acc}, 1e-9) + _row("w2", {"top1_acc": acc - 0.1}, 0.05)
    cells = [("w", "words-v1-full", folder), ("w2", "words-v1-full", folder)]
    study = _study(tmp_path / "saved.toml", cells, rows)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 1  # the FAIL row
    got = {r["cell"]: (r["status"], r["reproduced"]) for r in _golden(out)}
    assert got == {"w": ("PASS", acc), "w2": ("FAIL", acc)}
    doc = json.loads((out / "w" / "test.predicted-scores.json").read_text())
    assert doc["test"]["test_top1_acc"] == acc
    # Without the folder the rows cannot be computed: NOT VERIFIED, never PASS.
    shutil.rmtree(tmp_path / "submission")
    capsys.readouterr()
    assert main(["verify", str(study)]) != 0
    assert "NOT VERIFIED" in capsys.readouterr().out


def test_saved_fold_predictions_aggregate_as_the_leaderboard(
    tasks_dir: Path, tmp_path: Path
) -> None:
    from sklearn.metrics import average_precision_score

    shutil.copytree(tasks_dir, tmp_path / "tasks")
    task = read_task(tmp_path / "tasks" / "mixtures-v1-full")
    folder = tmp_path / "sub" / "mixtures-v1-full"
    maps = []
    for i, split in enumerate(data_splits(task.metadata)):
        target, prediction = _dump_scene(folder, task, i, split["test"])
        keep = target.sum(axis=0) > 0  # heareval's mAP counts a class without positives 0
        per = [
            average_precision_score(target[:, j], prediction[:, j]) for j in np.flatnonzero(keep)
        ]
        maps.append(sum(per) / target.shape[1])
    mean = float(np.mean(maps))
    study = _study(
        tmp_path / "s.toml", [("m", "mixtures-v1-full", folder)], _row("m", {"mAP": mean}, 1e-9)
    )
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 0
    ((row,),) = [_golden(tmp_path / "out")]
    assert row["status"] == "PASS" and row["reproduced"] == pytest.approx(mean, abs=1e-12)


def test_a_pickle_naming_anything_else_is_refused_unread(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(tasks_dir, tmp_path / "tasks")
    folder = tmp_path / "sub"
    folder.mkdir()
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (shutil.copy, (str(TOOL), str(marker)))

    (folder / "test.predictions.pkl").write_bytes(pickle.dumps({"target": Payload()}))
    study = _study(tmp_path / "s.toml", [("w", "words-v1-full", folder)])
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "test.predictions.pkl: names shutil.copy; expected only tensors" in err
    assert err.count("\n") == 1 and not marker.exists() and not (tmp_path / "out").exists()


def test_predictions_of_another_task_are_one_line(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(tasks_dir, tmp_path / "tasks")
    task = read_task(tmp_path / "tasks" / "words-v1-full")
    folder = tmp_path / "sub"
    target, _ = _dump_scene(folder, task, 0, ("test",))
    import torch

    doc = {
        "target": torch.from_numpy(np.eye(target.shape[1])[np.zeros(len(target), int)]),
        "prediction": torch.ones(target.shape),
    }
    (folder / "test.predictions.pkl").write_bytes(pickle.dumps(doc))
    study = _study(tmp_path / "s.toml", [("w", "words-v1-full", folder)])
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "holds other labels than the task's test split" in err and err.count("\n") == 1


# --- heareval's own predictor writes the folders --------------------------------------------


def _embed(tasks_dir: Path, root: Path) -> None:
    """The three tasks embedded by docs/hear.md's `my_frames.py` in heareval's layout."""
    import soundfile

    from tests.test_documented_commands import blocks

    page = [b for b in blocks("/".join(("docs", "hear.md"))) if "real network" in b.heading]
    (source,) = [b.body for b in page if b.lang == "python"]
    scope: dict[str, Any] = {}
    exec(compile(source, "my_frames.py", "exec"), scope)  # the page's encoder, as printed
    enc = scope["make"]()
    for name in TASKS:
        task = read_task(tasks_dir / name)
        event = task.metadata.embedding_type == "event"
        emb: dict[str, dict[str, Any]] = {}
        stamps: dict[str, dict[str, Any]] = {}
        for s in task.metadata.splits:
            emb[s], stamps[s] = {}, {}
            for n in task.files(s):
                audio, _ = soundfile.read(str(task.audio_dir(16000, s) / n), dtype=np.float32)
                if event:
                    ((emb[s][n], stamps[s][n]),) = enc.embed_frames([audio])
                else:
                    emb[s][n] = enc.embed_audio([audio])[0]
        write_embeddings(task, root / name, emb, stamps if event else None)


@pytest.mark.heareval
def test_heareval_saved_predictions_reproduce_its_own_scores(
    tasks_dir: Path, tmp_path: Path
) -> None:
    """heareval's predictor (faster grid, one grid point) on a scene, a fold and an event
    task; a study of cells pointing at its folders, its own test.predicted-scores.json as the
    published rows: the kit's scores of its saved predictions, rounded to float32 as
    pytorch-lightning logs them, equal what it logged to the bit, and every row PASSes."""
    from tests.hear_reference import heareval_predictions

    shutil.copytree(tasks_dir, tmp_path / "tasks")
    _embed(tmp_path / "tasks", tmp_path / "emb")
    rows, cells, logged = "", [], {}
    for name in TASKS:
        heareval_predictions(tmp_path / "emb" / name)
        theirs = json.loads((tmp_path / "emb" / name / "test.predicted-scores.json").read_text())
        task = read_task(tmp_path / "tasks" / name)
        cid = name.split("-")[0]
        folds = [k for k in theirs if k not in ("aggregated_scores", "hparams", "postprocessing",
                                                "score_mode", "embedding_path")]  # fmt: skip
        logged[cid] = {
            k: {m: theirs[k][f"test_{m}"] for m in task.metadata.evaluation} for k in folds
        }
        board = {
            m: float(np.mean([logged[cid][k][m] for k in folds])) for m in task.metadata.evaluation
        }
        # a row holds numbers: heareval's NaN (a class without negatives) is no value
        rows += _row(cid, {m: v for m, v in board.items() if np.isfinite(v)}, 1e-5)
        cells.append((cid, name, tmp_path / "emb" / name))
    study = _study(tmp_path / "s.toml", cells, rows)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    assert {r["status"] for r in _golden(out)} == {"PASS"}
    for cid, folds_logged in logged.items():
        ours = json.loads((out / cid / "test.predicted-scores.json").read_text())
        for fold, values in folds_logged.items():
            for metric, value in values.items():
                mine = float(np.float32(ours[fold][f"test_{metric}"]))
                assert mine == value or (np.isnan(mine) and np.isnan(value)), (cid, fold, metric)


def test_diff_names_the_saved_predictions_that_moved_a_score(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(tasks_dir, tmp_path / "tasks")
    task = read_task(tmp_path / "tasks" / "words-v1-full")
    folder = tmp_path / "sub"
    _dump_scene(folder, task, 0, ("test",))
    study = _study(tmp_path / "s.toml", [("w", "words-v1-full", folder)])
    assert main(["reproduce", str(study), "--out", str(tmp_path / "a")]) == 0
    _dump_scene(folder, task, 5, ("test",))  # the submission's predictions replaced (another score)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "saved_sha256" in out and "top1_acc" in out

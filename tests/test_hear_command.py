"""`audiorepro hear`: a HEAR module over the built HEAR tasks (runner.hear, cli.hear); the
documented lines of docs/hear.md as written; heareval's own predictor on the command's output
(marked heareval: `tox -e hear`)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.hear import read_task
from audiorepro.formats.hear_embeddings import read_embeddings
from tests.conftest import ROOT
from tests.encoder_sources import write_encoders
from tests.hear_reference import heareval_predictions

TOOL = ROOT / "tools" / "make_hear_tasks.py"


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    out = tmp_path_factory.mktemp("hear-cmd") / "tasks"
    subprocess.run([sys.executable, str(TOOL), str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def hear_spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    enc = write_encoders(tmp_path_factory.mktemp("hear-enc"), "hearcmd")
    sys.path.insert(0, str(enc.root / "mods"))
    return enc.hear_spec


def _scores(out: Path, task: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / task / "test.predicted-scores.json").read_text())
    return data


def test_hear_runs_a_module_over_a_scene_task(
    tasks_dir: Path, hear_spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["hear", hear_spec, "--tasks-dir", str(tasks_dir), "--task", "words", "--out", str(out)]
    assert main(argv) == 0
    task = read_task(tasks_dir / "words-v1-full")
    # The embeddings are the module's own get_scene_embeddings of each clip, as heareval reads it.
    import soundfile
    import torch

    from audiorepro.models.registry import load_registry, resolve_spec
    from audiorepro.models.user_encoders import load_user

    module = load_user(resolve_spec(hear_spec, load_registry([])), "cpu").encoder
    saved = read_embeddings(task, out / "words-v1-full")
    for split in ("train", "test"):
        name = task.files(split)[0]
        audio, _ = soundfile.read(str(task.audio_dir(16000, split) / name), dtype=np.float32)
        with torch.no_grad():
            direct = module.module.get_scene_embeddings(torch.from_numpy(audio)[None], module.model)  # type: ignore[attr-defined]
        assert np.array_equal(saved[split].embeddings[name], direct[0].numpy())
    # The top-1 accuracy is what a logistic regression on the standardized train split gives
    # on the test split, computed here with scikit-learn directly.
    from sklearn.linear_model import LogisticRegression

    def rows(split: str) -> tuple[np.ndarray, list[str]]:
        files = task.files(split)
        x = np.stack([saved[split].embeddings[f] for f in files]).astype(np.float64)
        return x, [task.scene_labels[split][f][0] for f in files]

    (x_tr, y_tr), (x_te, y_te) = rows("train"), rows("test")
    mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0)
    sd[sd == 0] = 1.0
    clf = LogisticRegression(C=1.0, solver="lbfgs", max_iter=1000, tol=1e-6)
    clf.fit((x_tr - mu) / sd, y_tr)
    expected = float(np.mean(clf.predict((x_te - mu) / sd) == np.array(y_te)))
    scores = _scores(out, "words-v1-full")
    assert scores["test"]["test_top1_acc"] == expected  # type: ignore[index]
    assert scores["test"]["test_score"] == expected  # type: ignore[index]
    assert scores["score_mode"] == "max" and scores["embedding_path"] == "words-v1-full"
    assert f"words-v1-full  test  top1_acc {expected:.4f}" in capsys.readouterr().out


def test_fold_tasks_aggregate_over_folds(tasks_dir: Path, hear_spec: str, tmp_path: Path) -> None:
    """The words task re-declared as three presplit folds: one model per fold (heareval's
    rotation), each fold's scores and their mean and sample standard deviation."""
    folds = tmp_path / "tasks" / "wordfolds"
    shutil.copytree(tasks_dir / "words-v1-full", folds)
    meta = json.loads((folds / "task_metadata.json").read_text())
    meta.update(task_name="wordfolds", split_mode="presplit_kfold", evaluation=["top1_acc", "mAP"])
    (folds / "task_metadata.json").write_text(json.dumps(meta))
    out = tmp_path / "out"
    assert main(["hear", hear_spec, "--tasks-dir", str(tmp_path / "tasks"), "--out", str(out)]) == 0
    scores = _scores(out, "wordfolds")
    per_fold = [scores[f]["test_top1_acc"] for f in ("test", "train", "valid")]  # type: ignore[index]
    agg = scores["aggregated_scores"]
    assert agg["test_top1_acc_mean"] == pytest.approx(np.mean(per_fold), abs=1e-15)  # type: ignore[index]
    assert agg["test_top1_acc_std"] == pytest.approx(np.std(per_fold, ddof=1), abs=1e-15)  # type: ignore[index]
    assert {"test_mAP", "validation_score"} <= set(scores["test"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("events", "events-v1-full: is an event task; `audiorepro hear` runs scene tasks so far"),
        ("mixtures", "mixtures-v1-full: is a multilabel task; linear-v1 is a multiclass probe"),
        ("nosuch", "key '--task': has no task 'nosuch' (tasks here: events-v1-full, "),
    ],
)
def test_tasks_it_cannot_run_are_one_line_exit_2(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, message: str
) -> None:
    """Refused before any model is loaded (the module named here does not exist)."""
    argv = ["hear", "hear:no_such_module_x", "--tasks-dir", str(tasks_dir), "--task", task]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_documented_hear_lines_as_written(tmp_path: Path) -> None:
    """docs/hear.md, "Run a HEAR module": the module as printed, then its shell lines, in a
    folder holding the tools."""
    from tests.test_documented_commands import blocks

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    page = [b for b in blocks("docs/hear.md") if b.heading.startswith("Run a HEAR module")]
    (source,) = [b.body for b in page if b.lang == "python"]
    (shell,) = [b for b in page if b.lang == "bash"]
    (tmp_path / "my_hear_module.py").write_text(source + "\n")
    (tmp_path / "tools").mkdir()
    for tool in ("make_hear_tasks.py", "make_speech.py"):
        shutil.copy(ROOT / "tools" / tool, tmp_path / "tools" / tool)
    for line in shell.commands():
        argv = shlex.split(line)
        env = dict(os.environ)
        while "=" in argv[0]:
            key, _, value = argv.pop(0).partition("=")
            # Where the kit comes from (a checkout's src/ in the tests) stays on the path.
            env[key] = os.pathsep.join(v for v in (value, env.get(key)) if v)
        program = [sys.executable] if argv[0] == "python" else [sys.executable, "-m", "audiorepro"]
        done = subprocess.run(
            [*program, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
            check=False, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    scores = json.loads(
        (tmp_path / "hear-out" / "words-v1-full" / "test.predicted-scores.json").read_text()
    )
    assert 0.0 <= scores["test"]["test_top1_acc"] <= 1.0
    assert (ROOT / "docs" / "hear.md").is_file()


@pytest.mark.heareval
@pytest.mark.slow
def test_heareval_predictor_runs_on_the_command_output(
    tasks_dir: Path, hear_spec: str, tmp_path: Path
) -> None:
    """The command's OUT/<task> is an embeddings folder heareval's own predictor takes."""
    out = tmp_path / "out"
    assert (
        main(
            ["hear", hear_spec, "--tasks-dir", str(tasks_dir), "--task", "words", "--out", str(out)]
        )
        == 0
    )
    layout = tmp_path / "heareval" / "words-v1-full"
    shutil.copytree(
        out / "words-v1-full", layout, ignore=shutil.ignore_patterns("test.predicted-scores.json")
    )
    heareval_predictions(layout)
    theirs = json.loads((layout / "test.predicted-scores.json").read_text())
    assert 0.0 <= theirs["test"]["test_top1_acc"] <= 1.0

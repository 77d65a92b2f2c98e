"""`audiorepro hear`: a HEAR module over the built HEAR tasks (runner.hear, cli.hear); the
documented lines of docs/hear.md as written; heareval's own predictor on the command's output
(marked heareval: `tox -e hear`)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.hear import read_task
from audiorepro.formats.hear_embeddings import read_embeddings
from tests.conftest import ROOT
from tests.encoder_sources import write_encoders
from tests.hear_reference import build_tasks, heareval_predictions


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tasks(tmp_path_factory.mktemp("hear-cmd"))


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
    # The embeddings are the module's own get_scene_embeddings of the clips, as heareval reads
    # them and batches them: its embedding runner hands the module consecutive files of
    # <split>.json, int(0.7 * (120 / 1.0) * (16000 / 16000)) = 84 one-second clips at a time.
    import soundfile
    import torch

    from audiorepro.models.registry import load_registry, resolve_spec
    from audiorepro.models.user_encoders import load_user

    module = load_user(resolve_spec(hear_spec, load_registry([])), "cpu").encoder
    saved = read_embeddings(task, out / "words-v1-full")
    for split in ("train", "test"):
        names = task.files(split)[:84]
        audio = np.stack(
            [
                soundfile.read(str(task.audio_dir(16000, split) / n), dtype=np.float32)[0]
                for n in names
            ]
        )
        with torch.no_grad():
            direct = module.module.get_scene_embeddings(torch.from_numpy(audio), module.model)  # type: ignore[attr-defined]
        for i, name in enumerate(names):
            assert np.array_equal(saved[split].embeddings[name], direct[i].numpy()), name
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
    """docs/hear.md, "Run a HEAR module" and "A HEAR study": the module and the study as
    printed, then their shell lines, in a folder holding the tools."""
    from tests.test_documented_commands import blocks

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    page = [b for b in blocks("docs/hear.md") if b.heading.startswith("Run a HEAR module")]
    (source,) = [b.body for b in page if b.lang == "python"]
    (shell,) = [b for b in page if b.lang == "bash"]
    study = [b for b in blocks("docs/hear.md") if b.heading.startswith("A HEAR study")]
    (toml,) = [b.body for b in study if b.lang == "toml"]
    (study_shell,) = [b for b in study if b.lang == "bash"]
    table = [b for b in blocks("docs/hear.md") if b.heading.startswith("A results table")]
    (table_shell,) = [b for b in table if b.lang == "bash"]
    (tmp_path / "my_hear_module.py").write_text(source + "\n")
    (tmp_path / "hear-study.toml").write_text(toml + "\n")
    (tmp_path / "tools").mkdir()
    for tool in ("make_hear_tasks.py", "make_speech.py"):
        shutil.copy(ROOT / "tools" / tool, tmp_path / "tools" / tool)
    for line in [*shell.commands(), *study_shell.commands(), *table_shell.commands()]:
        argv = shlex.split(line)
        env = dict(os.environ)
        while "=" in argv[0]:
            key, _, value = argv.pop(0).partition("=")
            # Where the kit comes from (a checkout's src/ in the tests) stays on the path.
            env[key] = os.pathsep.join(v for v in (value, env.get(key)) if v)
        # -P: the working folder is not put on the import path (`python -m` would put it
        # there; the `audiorepro` script does not), so a HEAR module beside the study is
        # found by audiorepro itself, as the page says, not by the interpreter.
        program = (
            [sys.executable, "-P"]
            if argv[0] == "python"
            else [sys.executable, "-P", "-m", "audiorepro"]
        )
        done = subprocess.run(
            [*program, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
            check=False, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    scores = json.loads(
        (tmp_path / "hear-out" / "words-v1-full" / "test.predicted-scores.json").read_text()
    )
    assert 0.0 <= scores["test"]["test_top1_acc"] <= 1.0
    # The study's published row holds (both commands exited 0: reproduce and verify PASS).
    golden = json.loads((tmp_path / "hear-study-out" / "verification.json").read_text())["golden"]
    assert [r["status"] for r in golden["rows"]] == ["PASS"]
    assert golden["rows"][0]["reproduced"] == scores["test"]["test_top1_acc"]
    assert (tmp_path / "hear-table" / "hear.tex").is_file()
    runs = (tmp_path / "hear-table" / "runs.csv").read_text()
    assert (
        hashlib.sha256((tmp_path / "hear-out" / "bundle.json.gz").read_bytes()).hexdigest() in runs
    )
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


def _study(path: Path, tasks_dir: Path, hear_spec: str, published: str = "") -> Path:
    path.write_text(
        f"""schema = "audiorepro.study/1"
name = "hear-words"
kind = "hear"

[[cell]]
id = "seed-words"
model = "{hear_spec}"
tasks_dir = "{tasks_dir}"
task = "words"
predictor = "linear-v1"
{published}"""
    )
    return path


def _row(value: float, tolerance: float, metric: str = "top1_acc") -> str:
    return (
        f'\n[[published]]\ncell = "seed-words"\ntolerance = {tolerance}\n'
        f'provenance = "a leaderboard row"\nvalues = {{ {metric} = {value!r} }}\n'
    )


def test_a_hear_study_gives_verdicts_on_leaderboard_rows(
    tasks_dir: Path, hear_spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`reproduce` of a hear study: the command's OUT (the same files, the same scores) plus
    PASS and FAIL on published rows, as `verify OUT` and `verify STUDY` say them; a study whose
    tasks are gone verifies NOT VERIFIED."""
    import gzip

    cmd = tmp_path / "cmd"
    argv = ["hear", hear_spec, "--tasks-dir", str(tasks_dir), "--task", "words", "--out", str(cmd)]
    assert main(argv) == 0
    got = _scores(cmd, "words-v1-full")["test"]["test_top1_acc"]  # type: ignore[index]
    # Within the tolerance (PASS), and 0.3 away (FAIL), on one cell.
    off = got - 0.3 if got >= 0.3 else got + 0.3
    rows = _row(round(got + 0.004, 6), 0.01) + _row(round(off, 6), 0.01)
    study = _study(tmp_path / "study.toml", tasks_dir, hear_spec, rows)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 1
    for name in ("report.html", "bundle.json.gz", "manifest.json", "verification.json",
                 "tables/hear.csv", "tables/published.md", "seed-words/test.predicted-scores.json",
                 "seed-words/train.embeddings.npy"):  # fmt: skip
        assert (out / name).is_file(), name
        if not name.startswith("seed-words"):
            assert (cmd / name).is_file(), name  # the command's OUT: the same outputs
    assert _scores(out, "seed-words") == _scores(cmd, "words-v1-full")
    golden = json.loads((out / "verification.json").read_text())["golden"]
    assert [r["status"] for r in golden["rows"]] == ["PASS", "FAIL"]
    assert golden["rows"][0]["reproduced"] == got
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    (cell,) = bundle["cells"]
    assert cell["leaderboard"] == {"top1_acc": got} and cell["embedding_size"] > 0
    assert (
        cell["model_meta"]["weights_sha256"]
        == {"hearseed.pt": cell["model_meta"]["weights_sha256"]["hearseed.pt"]}
        and bundle["verification"]["metric_parity_passed"]
    )
    assert main(["diff", str(out), str(out)]) == 0  # diff knows the kind's bundle
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["verify", str(study)]) == 1
    said = capsys.readouterr().out
    assert "PASS" in said and "FAIL" in said
    shutil.move(str(tasks_dir), str(tmp_path / "moved"))
    try:
        assert main(["verify", str(study)]) == 1
        assert "NOT VERIFIED" in capsys.readouterr().out
    finally:
        shutil.move(str(tmp_path / "moved"), str(tasks_dir))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(0.5, 0.01, "mAP"), "key 'published[0].values.mAP': is not a score of task words"),
        (_row(0.5, 1.0), "key 'published[0].tolerance': is 1.0: 0.5 +- 1.0 covers the whole"),
        (_row(1.5, 0.01), "key 'published[0].values.top1_acc': is 1.5, outside the range"),
    ],
)
def test_a_hear_studys_bad_rows_are_one_line_exit_2(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str, message: str
) -> None:
    study = _study(tmp_path / "study.toml", tasks_dir, "hear:no_such_module_x", row)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_a_hear_study_refuses_cells_in_one_line(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study(tmp_path / "study.toml", tasks_dir, "hear:no_such_module_x")
    argv = ["reproduce", str(study), "--cells", "seed-*", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is a hear study; --cells and --device apply to" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def two_runs(
    tasks_dir: Path, hear_spec: str, tmp_path_factory: pytest.TempPathFactory
) -> list[Path]:
    """The words task run by two encoders: the seeded test module and the docs' module."""
    from tests.test_documented_commands import blocks

    root = tmp_path_factory.mktemp("hear-table")
    page = [b for b in blocks("docs/hear.md") if b.heading.startswith("Run a HEAR module")]
    (source,) = [b.body for b in page if b.lang == "python"]
    (root / "mods").mkdir()
    (root / "mods" / "hear_table_doc_module.py").write_text(source + "\n")
    sys.path.insert(0, str(root / "mods"))
    outs = []
    for i, spec in enumerate((hear_spec, "hear:hear_table_doc_module")):
        out = root / f"run{i}"
        argv = ["hear", spec, "--tasks-dir", str(tasks_dir), "--task", "words", "--out", str(out)]
        assert main(argv) == 0
        outs.append(out)
    return outs


def test_hear_table_across_encoders_links_each_number_to_its_run(
    two_runs: list[Path], tmp_path: Path
) -> None:
    import csv
    import gzip

    assert main(["hear-table", *map(str, two_runs), "--out", str(tmp_path / "t")]) == 0
    with open(tmp_path / "t" / "hear.csv", newline="") as f:
        table = list(csv.reader(f))
    with open(tmp_path / "t" / "runs.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    assert table[0][1:] == ["words-v1-full top1_acc"] and len(table) == 3
    for run, row, link in zip(two_runs, table[1:], runs, strict=True):
        bundle = json.loads(gzip.decompress((run / "bundle.json.gz").read_bytes()))
        (cell,) = bundle["cells"]
        assert row[0] == cell["model"] == link["encoder"]
        assert float(row[1]) == cell["leaderboard"]["top1_acc"] == float(link["value"])
        assert link["run"] == str(run) and link["cell"] == "words-v1-full"
        assert (
            link["bundle sha256"]
            == hashlib.sha256((run / "bundle.json.gz").read_bytes()).hexdigest()
        )
        assert int(link["dim"]) == cell["embedding_size"]
    # The seeded module has one weight file, the docs' module none.
    assert runs[0]["weights sha256"].startswith("hearseed.pt=") and runs[1]["weights sha256"] == ""
    for suffix in (".md", ".tex"):
        assert (tmp_path / "t" / f"hear{suffix}").is_file() and (
            tmp_path / "t" / f"runs{suffix}"
        ).is_file()


def test_hear_table_refuses_a_changed_run_and_a_repeated_pair(
    two_runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = str(two_runs[0])
    assert main(["hear-table", first, first, "--out", str(tmp_path / "a")]) == 2
    assert "on words-v1-full is in" in capsys.readouterr().err
    changed = tmp_path / "changed"
    shutil.copytree(two_runs[1], changed)
    scores = changed / "words-v1-full" / "test.predicted-scores.json"
    scores.write_text(scores.read_text().replace("0.", "0.9", 1))
    assert main(["hear-table", str(changed), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert (
        "test.predicted-scores.json: SHA-256 differs from manifest.json" in err
        and err.count("\n") == 1
    )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


EVENT_MODULE = """
import torch

class Model(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = 32
    timestamp_embedding_size = 32

def load_model(model_file_path=""):
    return Model()

def get_timestamp_embeddings(audio, model):  # 50 ms frames: a log spectrum of 25 ms each
    n = audio.shape[1] // 800
    frames = audio[:, : n * 800].reshape(audio.shape[0], n, 800)[:, :, :400]
    emb = torch.log1p(torch.fft.rfft(frames, dim=-1).abs())[:, :, :32]
    return emb, (torch.arange(n, dtype=torch.float32) * 50.0 + 12.5).expand(audio.shape[0], n)

def get_scene_embeddings(audio, model):
    return get_timestamp_embeddings(audio, model)[0].mean(dim=1)
"""


@pytest.fixture(scope="module")
def event_run(tasks_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hear-events")
    (root / "mods").mkdir()
    (root / "mods" / "hear_event_module_t.py").write_text(EVENT_MODULE)
    sys.path.insert(0, str(root / "mods"))
    out = root / "out"
    argv = ["hear", "hear:hear_event_module_t", "--tasks-dir", str(tasks_dir), "--task", "events"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def _read(path: Path) -> np.ndarray:
    import soundfile

    audio, _ = soundfile.read(str(path), dtype=np.float32)
    return np.asarray(audio)


def test_an_event_task_runs_timestamp_embeddings_and_heareval_postprocessing(
    tasks_dir: Path, event_run: Path
) -> None:
    """The module's own timestamp embeddings in heareval's layout; the scores are those of
    events made by heareval's post-processing (with the setting the run chose) from a
    per-label logistic regression on the training frames, computed here with scikit-learn."""
    import hear_event_module_t as module  # type: ignore[import-not-found]
    import torch
    from sklearn.linear_model import LogisticRegression

    from audiorepro.formats.hear_embeddings import frame_labels
    from audiorepro.metrics.hear import event_onset_fms, segment_error_rate
    from audiorepro.metrics.hear_events import EVENT_POSTPROCESSING_GRID, events_by_file

    task = read_task(tasks_dir / "events-v1-full")
    saved = read_embeddings(task, event_run / "events-v1-full")
    name = task.files("test")[0]
    audio = _read(task.audio_dir(16000, "test") / name)
    emb, stamps = module.get_timestamp_embeddings(torch.from_numpy(audio)[None], None)
    assert np.array_equal(saved["test"].embeddings[name], emb[0].numpy())
    assert np.array_equal(saved["test"].timestamps[name], stamps[0].numpy().astype(np.float64))

    def frames(split: str) -> tuple[np.ndarray, np.ndarray, list[str], list[float]]:
        xs, ys, files, times = [], [], [], []
        for f in task.files(split):
            t = saved[split].timestamps[f]
            xs.append(saved[split].embeddings[f].astype(np.float64))
            labels = frame_labels(task.events[split][f], t)
            ys.append([[label in row for label in task.vocabulary] for row in labels])
            files += [f] * len(t)
            times += [float(v) for v in t]
        return np.concatenate(xs), np.concatenate(ys).astype(int), files, times

    (x_tr, y_tr, _, _), (x_te, _, files, times) = frames("train"), frames("test")
    mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0)
    sd[sd == 0] = 1.0
    probs = np.zeros((len(x_te), len(task.vocabulary)))
    for j in range(len(task.vocabulary)):
        clf = LogisticRegression(C=1.0, solver="lbfgs", max_iter=1000, tol=1e-6)
        clf.fit((x_tr - mu) / sd, y_tr[:, j])
        probs[:, j] = clf.predict_proba((x_te - mu) / sd)[:, 1]
    scores: dict[str, Any] = _scores(event_run, "events-v1-full")
    setting = tuple((str(k), v) for k, v in scores["postprocessing"])
    assert [dict(setting)[k] in v for k, v in EVENT_POSTPROCESSING_GRID.items()] == [True, True]
    events = events_by_file(probs, files, times, task.vocabulary, setting)
    reference = {f: list(task.events["test"][f]) for f in task.files("test")}
    fms = event_onset_fms(events, reference).f_measure
    er = segment_error_rate(events, reference, task.vocabulary)
    assert scores["test"]["test_event_onset_200ms_fms"] == pytest.approx(fms, abs=1e-12)
    assert scores["test"]["test_segment_1s_er"] == pytest.approx(er, abs=1e-12)
    assert 0.0 < fms <= 1.0


def test_an_event_task_needs_get_timestamp_embeddings(
    tasks_dir: Path, hear_spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["hear", hear_spec, "--tasks-dir", str(tasks_dir), "--task", "events"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "get_timestamp_embeddings is not implemented (an event task needs it)" in err
    assert err.count("\n") == 1 and not (tmp_path / "o").exists()


@pytest.mark.heareval
@pytest.mark.slow
def test_heareval_predictor_runs_on_an_event_output(event_run: Path, tmp_path: Path) -> None:
    """The command's event task folder is one heareval's own predictor and event
    post-processing take (its faster grid, one grid point)."""
    layout = tmp_path / "heareval" / "events-v1-full"
    shutil.copytree(
        event_run / "events-v1-full",
        layout,
        ignore=shutil.ignore_patterns("test.predicted-scores.json"),
    )
    heareval_predictions(layout)
    theirs = json.loads((layout / "test.predicted-scores.json").read_text())
    assert 0.0 <= theirs["test"]["test_event_onset_200ms_fms"] <= 1.0


FLOAT64_MODULE = """
import torch

DTYPE = torch.{dtype}

class Model(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = 32
    timestamp_embedding_size = 32

def load_model(model_file_path=""):
    return Model()

def _frames(audio):  # computed in float64; each function returns DTYPE
    x = audio.to(torch.float64)
    n = x.shape[1] // 800
    frames = x[:, : n * 800].reshape(x.shape[0], n, 800)[:, :, :400]
    stamps = (torch.arange(n, dtype=torch.float64) * 50.0 + 12.5).expand(x.shape[0], n)
    return torch.log1p(torch.fft.rfft(frames, dim=-1).abs())[:, :, :32] / 3.0, stamps

def get_timestamp_embeddings(audio, model):
    emb, stamps = _frames(audio)
    return emb.to(DTYPE), stamps

def get_scene_embeddings(audio, model):
    return _frames(audio)[0].mean(dim=1).to(DTYPE)
"""


@pytest.mark.parametrize("task", ["words", "events"])
def test_a_float64_module_runs_as_heareval_runs_it(
    tasks_dir: Path, tmp_path: Path, task: str
) -> None:
    """A HEAR module whose tensors are float64 (hearvalidator's float32 rule refuses it,
    heareval's embedding runner takes it and its memmap_embeddings casts each file to
    float32): the kit runs it and its rows and scores are those of the same module returning
    the float32 cast of its tensors."""
    (tmp_path / "mods").mkdir()
    for dtype in ("float64", "float32"):
        source = FLOAT64_MODULE.replace("{dtype}", dtype)
        (tmp_path / "mods" / f"hear_dtype_{dtype}_t.py").write_text(source)
    sys.path.insert(0, str(tmp_path / "mods"))
    try:
        docs = {}
        for dtype in ("float64", "float32"):
            out = tmp_path / dtype
            argv = ["hear", f"hear:hear_dtype_{dtype}_t", "--tasks-dir", str(tasks_dir)]
            assert main([*argv, "--task", task, "--out", str(out)]) == 0
            folder = next(p for p in out.iterdir() if p.name.startswith(task))
            docs[dtype] = json.loads((folder / "test.predicted-scores.json").read_text())
            rows = (folder / "test.embeddings.npy").read_bytes()
            docs[dtype]["rows"] = hashlib.sha256(rows).hexdigest()
    finally:
        sys.path.remove(str(tmp_path / "mods"))
    for doc in docs.values():
        doc.get("hparams", {}).pop("model", None)
    assert docs["float64"]["test"] == docs["float32"]["test"]
    assert docs["float64"]["rows"] == docs["float32"]["rows"]

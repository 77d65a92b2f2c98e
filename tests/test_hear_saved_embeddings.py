"""A HEAR submission's saved embeddings trained on and scored by the kit's predictor, without
its model: `audiorepro hear --embeddings E` and hear study cells with `embeddings = DIR`
(runner.kinds.hear.saved, formats.hear_embeddings). The embeddings are written by a run of the
kit (heareval's layout, byte for byte as heareval's runner writes it: tests/test_hear_tasks.py)
or, in the tests marked heareval, by heareval's own embedding runner."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.hear import read_task
from tests.hear_reference import build_tasks
from tests.test_hear_saved import _dump_scene, _golden, _row

TABLES = ("hear.csv", "hear.md", "hear.tex")


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tasks(tmp_path_factory.mktemp("hear-saved-emb"))


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """docs/hear.md's `my_frames.py` (scene and frame embeddings), as printed."""
    from tests.test_documented_commands import blocks

    page = [b for b in blocks("/".join(("docs", "hear.md"))) if "real network" in b.heading]
    (source,) = [b.body for b in page if b.lang == "python"]
    path = tmp_path_factory.mktemp("hear-saved-enc") / "my_frames.py"
    path.write_text(source)
    return f"py:{path}:make"


def _hear(encoder: str, tasks_dir: Path, task: str, out: Path, *extra: str) -> int:
    argv = ["hear", encoder, "--tasks-dir", str(tasks_dir), "--task", task, *extra]
    return main([*argv, "--out", str(out)])


@pytest.fixture(scope="module")
def live(tasks_dir: Path, encoder: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the model over the scene and the event task: OUT/<task folder>/ holds its
    embeddings in heareval's layout (E/<module>/ as heareval's runner writes it)."""
    out = tmp_path_factory.mktemp("hear-live") / "live"
    assert _hear(encoder, tasks_dir, "words", out, "--task", "events") == 0
    return out


@pytest.mark.parametrize(
    ("task", "predictor"),
    [("words", "linear-v1"), ("events", "linear-v1"), ("words", "hear-mlp-v1")],
)
def test_saved_embeddings_score_as_the_model_run(
    tasks_dir: Path, encoder: str, live: Path, tmp_path: Path, task: str, predictor: str
) -> None:
    """The saved embeddings give the tables and test.predicted-scores.json of the run that
    wrote them, byte for byte; nothing of the model is loaded, no embedding copied to OUT."""
    ran, saved = tmp_path / "ran", tmp_path / "saved"
    assert _hear(encoder, tasks_dir, task, ran, "--predictor", predictor) == 0
    # MODEL only names the submission: a module that does not exist is never imported
    name = encoder if predictor == "linear-v1" else "hear:nobody_s_module_here"
    args = ("--predictor", predictor, "--embeddings", str(live))
    assert _hear(name, tasks_dir, task, saved, *args) == 0
    folder = next(p.name for p in ran.iterdir() if p.name.startswith(task))
    for table in TABLES:
        assert (saved / "tables" / table).read_bytes() == (ran / "tables" / table).read_bytes()
    scores = "test.predicted-scores.json"
    assert (saved / folder / scores).read_bytes() == (ran / folder / scores).read_bytes()
    assert sorted(p.name for p in (saved / folder).iterdir()) == [scores]
    bundle = json.loads(gzip.decompress((saved / "bundle.json.gz").read_bytes()))
    meta = bundle["cells"][0]["model_meta"]
    assert meta["weights_sha256"] == {} and len(meta["embeddings_sha256"]) == 64


def _break_nan(root: Path) -> str:
    path = root / "test" / "spk6_go.wav.embedding.npy"
    emb = np.load(path)
    emb[3] = np.nan
    np.save(path, emb)
    return "test/spk6_go.wav.embedding.npy: has NaN or infinite values; expected finite"


def _break_shape(root: Path) -> str:
    np.save(root / "train" / "spk1_yes.wav.embedding.npy", np.zeros((2, 48), np.float32))
    return "spk1_yes.wav.embedding.npy: expected a float32 (or float64, float16) embedding of 1"


def _break_dtype(root: Path) -> str:
    # float64 is read as heareval reads it (astype(np.float32)); integers are no embedding
    np.save(root / "train" / "spk1_yes.wav.embedding.npy", np.zeros(48, np.int64))
    return "embedding of 1 dimension(s) for a scene task, got int64"


def _break_dim(root: Path) -> str:
    np.save(root / "test" / "spk6_go.wav.embedding.npy", np.zeros(47, np.float32))
    return "spk6_go.wav.embedding.npy: has dimension 47, others [47, 48]"


def _break_split(root: Path) -> str:
    shutil.rmtree(root / "valid")
    return "valid: is missing; expected heareval's embeddings of split 'valid' of task words"


def _break_extra_clip(root: Path) -> str:
    shutil.copy(root / "test" / "spk6_go.wav.embedding.npy", root / "test" / "x.wav.embedding.npy")
    return "test: holds x.wav.embedding.npy, not a file of the task's test.json"


def _break_split_copy(root: Path) -> str:
    doc = json.loads((root / "test.json").read_text())
    doc["other.wav"] = doc.pop(next(iter(doc)))
    (root / "test.json").write_text(json.dumps(doc))
    return "test.json: names 'other.wav', not a file of the task's test.json; expected the"


def _break_labels(root: Path) -> str:
    (root / "test" / "spk6_go.wav.target-labels.json").write_text('["yes"]')
    return "spk6_go.wav.target-labels.json: is ['yes']; expected the task's labels ['go']"


def _break_timestamps(root: Path) -> str:
    victim = next((root / "test").glob("*.timestamps.json"))
    victim.unlink()
    return f"{victim.name}: is missing; expected the frames' timestamps (ms) of an event task"


def _break_frame_count(root: Path) -> str:
    victim = next((root / "train").glob("*.timestamps.json"))
    victim.write_text(json.dumps(json.loads(victim.read_text())[:-1]))
    return f"{victim.name}: expected one timestamp and one label list per frame"


def _break_frame_labels(root: Path) -> str:
    victim = next((root / "valid").glob("*.target-labels.json"))
    frames = json.loads(victim.read_text())
    frames[0] = [*frames[0], "no-such-label"]
    victim.write_text(json.dumps(frames))
    return f"{victim.name}: frame 0 has labels"


BREAKS = {
    "nan": ("words", _break_nan),
    "shape": ("words", _break_shape),
    "dtype": ("words", _break_dtype),
    "dimension": ("words", _break_dim),
    "missing split": ("words", _break_split),
    "extra clip": ("words", _break_extra_clip),
    "split file of another task": ("words", _break_split_copy),
    "labels": ("words", _break_labels),
    "missing timestamps": ("events", _break_timestamps),
    "frames without timestamps": ("events", _break_frame_count),
    "frame labels": ("events", _break_frame_labels),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_a_malformed_embeddings_folder_is_one_line(
    tasks_dir: Path, live: Path, tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    task, brk = BREAKS[case]
    emb = tmp_path / "emb"
    shutil.copytree(live, emb, ignore=shutil.ignore_patterns("*.gz", "tables", "*.html"))
    folder = next(p for p in emb.iterdir() if p.name.startswith(task))
    expected = brk(folder)
    capsys.readouterr()
    out = tmp_path / "out"
    assert _hear("hear:submitted", tasks_dir, task, out, "--embeddings", str(emb)) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()


def test_a_task_without_its_embeddings_folder_is_one_line(
    tasks_dir: Path, live: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emb = tmp_path / "emb"
    shutil.copytree(live / "words-v1-full", emb / "words-v1-full")
    argv = ("--embeddings", str(emb), "--task", "events")
    assert _hear("hear:submitted", tasks_dir, "words", tmp_path / "out", *argv) == 2
    err = capsys.readouterr().err
    assert f"{emb / 'events-v1-full'}: is missing; expected heareval's embeddings" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def _study(path: Path, cells: list[tuple[str, str, str, str]], published: str) -> Path:
    """cells: (id, task, "embeddings" or "predictions", folder relative to the study)."""
    text = 'schema = "audiorepro.study/1"\nname = "submission"\nkind = "hear"\n'
    for cid, task, key, folder in cells:
        text += (
            f'\n[[cell]]\nid = "{cid}"\nmodel = "hear:submitted"\ntasks_dir = "tasks"\n'
            f'task = "{task}"\n{key} = "{folder}"\n'
        )
    path.write_text(text + published)
    return path


def test_a_study_of_saved_embeddings_and_predictions_gives_verdicts_on_rows(
    tasks_dir: Path, live: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One submission's folder as heareval leaves it (its embeddings and, after its predictor,
    its test.predictions.pkl): a cell on each; PASS, FAIL, then NOT VERIFIED once gone."""
    shutil.copytree(tasks_dir, tmp_path / "tasks")
    sub = tmp_path / "sub" / "words-v1-full"
    shutil.copytree(live / "words-v1-full", sub)
    task = read_task(tmp_path / "tasks" / "words-v1-full")
    target, prediction = _dump_scene(sub, task, 0, ("test",))
    acc_p = float(np.mean(target.argmax(axis=1) == prediction.argmax(axis=1)))
    ran = json.loads((live / "words-v1-full" / "test.predicted-scores.json").read_text())
    acc_e = ran["test"]["test_top1_acc"]
    rows = _row("e", {"top1_acc": acc_e}, 1e-9) + _row("p", {"top1_acc": acc_p}, 1e-9)
    rows += _row("e-off", {"top1_acc": min(1.0, acc_e + 0.2)}, 0.05)
    folder = "sub/words-v1-full"
    cells = [("e", "words", "embeddings", folder), ("p", "words", "predictions", folder)]
    study = _study(tmp_path / "s.toml", [*cells, ("e-off", "words", "embeddings", folder)], rows)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 1
    got = {r["cell"]: (r["status"], r["reproduced"]) for r in _golden(tmp_path / "out")}
    assert got == {"e": ("PASS", acc_e), "p": ("PASS", acc_p), "e-off": ("FAIL", acc_e)}
    capsys.readouterr()
    assert main(["verify", str(study)]) == 1
    lines = capsys.readouterr().out
    assert lines.count("PASS") >= 2 and "FAIL" in lines and "NOT VERIFIED" not in lines
    shutil.rmtree(tmp_path / "sub")
    assert main(["verify", str(study)]) != 0
    assert capsys.readouterr().out.count("NOT VERIFIED") >= 3


def test_a_cell_with_both_saved_folders_is_one_line(
    tasks_dir: Path, live: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(tasks_dir, tmp_path / "tasks")
    shutil.copytree(live / "words-v1-full", tmp_path / "sub")
    study = _study(tmp_path / "s.toml", [("e", "words", "embeddings", "sub")], "")
    study.write_text(study.read_text() + 'predictions = "sub"\n')
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "s.toml: key 'cell[0].embeddings': is given with predictions; expected one" in err
    assert err.count("\n") == 1


def test_diff_names_the_saved_embeddings_that_moved_a_score(
    tasks_dir: Path, live: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emb = tmp_path / "emb"
    shutil.copytree(live / "words-v1-full", emb / "words-v1-full")
    assert (
        _hear("hear:submitted", tasks_dir, "words", tmp_path / "a", "--embeddings", str(emb)) == 0
    )
    rng = np.random.default_rng(0)
    for path in sorted((emb / "words-v1-full" / "train").glob("*.embedding.npy")):
        np.save(path, rng.standard_normal(np.load(path).shape).astype(np.float32))
    assert (
        _hear("hear:submitted", tasks_dir, "words", tmp_path / "b", "--embeddings", str(emb)) == 0
    )
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "embeddings_sha256" in out and "top1_acc" in out, out


@pytest.mark.heareval
def test_heareval_s_saved_embeddings_and_predictions_verify_its_row(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """heareval's own embedding runner (the stand-in model of tests/hear_reference.py) and its
    own predictor (the default grid, 8 points, as `hear-mlp-v1`; one intra-op thread, as the
    kit trains) write one submission's folder; a study scores its predictions as saved and
    trains `hear-mlp-v1` on its embeddings: both give heareval's logged score of the row (the
    same test predictions to the bit: tests/test_hear_mlp.py), PASS; a row off by 0.2 FAILs."""
    import torch

    from tests.hear_reference import heareval_embeddings, heareval_predictions

    shutil.copytree(tasks_dir, tmp_path / "tasks")
    sub = tmp_path / "embeddings" / "stand-in" / "words-v1-full"
    heareval_embeddings(read_task(tmp_path / "tasks" / "words-v1-full"), sub)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        heareval_predictions(sub, grid="default", grid_points=8)
    finally:
        torch.set_num_threads(threads)
    logged = json.loads((sub / "test.predicted-scores.json").read_text())["test"]["test_top1_acc"]
    rows = _row("e", {"top1_acc": logged}, 1e-6) + _row("p", {"top1_acc": logged}, 1e-6)
    rows += _row("e-off", {"top1_acc": abs(logged - 0.2)}, 0.05)
    folder = "embeddings/stand-in/words-v1-full"
    cells = [(c, "words", k, folder) for c, k in (("e", "embeddings"), ("p", "predictions"))]
    study = _study(tmp_path / "s.toml", [*cells, ("e-off", "words", "embeddings", folder)], rows)
    text = study.read_text().replace('embeddings = "', 'predictor = "hear-mlp-v1"\nembeddings = "')
    study.write_text(text)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 1
    got = {r["cell"]: r["status"] for r in _golden(tmp_path / "out")}
    assert got == {"e": "PASS", "p": "PASS", "e-off": "FAIL"}
    bundle = json.loads(gzip.decompress((tmp_path / "out" / "bundle.json.gz").read_bytes()))
    board = {c["id"]: c["leaderboard"]["top1_acc"] for c in bundle["cells"]}
    assert board["e"] == board["p"] and float(np.float32(board["e"])) == logged
    capsys.readouterr()
    assert main(["verify", str(study)]) == 1
    assert "NOT VERIFIED" not in capsys.readouterr().out


def test_the_documented_saved_embeddings_line_as_written(tmp_path: Path) -> None:
    """docs/hear.md, "A submission's saved embeddings": the module and the lines of "Run a
    HEAR module" as printed (they write hear-out), then the page's line on its embeddings;
    the tables are the module run's, byte for byte."""
    import os
    import shlex
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.test_documented_commands import blocks

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    page = blocks("docs/hear.md")
    run = [b for b in page if b.heading.startswith("Run a HEAR module")]
    (source,) = [b.body for b in run if b.lang == "python"]
    (shell,) = [b for b in run if b.lang == "bash"]
    (saved,) = [b for b in page if b.heading.startswith("A submission's saved embeddings")]
    (tmp_path / "my_hear_module.py").write_text(source + "\n")
    (tmp_path / "tools").mkdir()
    for tool in ("make_hear_tasks.py", "make_speech.py"):
        shutil.copy(ROOT / "tools" / tool, tmp_path / "tools" / tool)
    for line in [*shell.commands(), *saved.commands()]:
        argv = shlex.split(line)
        # -P: the folder is not on the import path; audiorepro finds the module (see
        # tests/test_hear_command.py), and with --embeddings never imports it
        program = [sys.executable, "-P"] + ([] if argv[0] == "python" else ["-m", "audiorepro"])
        done = subprocess.run(
            [*program, *argv[1:]], cwd=tmp_path, env=dict(os.environ), capture_output=True,
            text=True, check=False, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    assert "--embeddings hear-out" in saved.body
    for table in TABLES:
        ours = (tmp_path / "hear-saved" / "tables" / table).read_bytes()
        assert ours == (tmp_path / "hear-out" / "tables" / table).read_bytes()

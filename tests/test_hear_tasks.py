"""HEAR task folders (formats.hear), heareval's embeddings layout (formats.hear_embeddings) and
the tasks tools/make_hear_tasks.py builds; heareval 2021.1.3's own embedding runner is the
reference for the layout (tests marked heareval: `tox -e hear`)."""

from __future__ import annotations

import json
import math
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.formats.hear import (
    HearEvent,
    check_task_audio,
    data_splits,
    find_tasks,
    read_task,
)
from audiorepro.formats.hear_embeddings import frame_labels, read_embeddings
from tests.conftest import ROOT
from tests.hear_reference import heareval_embeddings, heareval_predictions, kit_embeddings

TOOL = ROOT / "tools" / "make_hear_tasks.py"
NAMES = ("words-v1-full", "mixtures-v1-full", "events-v1-full")
needs_espeak = pytest.mark.skipif(
    shutil.which("espeak-ng") is None,
    reason="needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng; .ci/run does)",
)


def _build(out: Path) -> None:
    subprocess.run([sys.executable, str(TOOL), str(out)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    out = tmp_path_factory.mktemp("hear") / "tasks"
    _build(out)
    return out


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@needs_espeak
def test_documented_command_builds_the_same_tasks_twice(tasks_dir: Path, tmp_path: Path) -> None:
    """docs/hear.md's command as written, from a folder holding the tools: a second build,
    byte for byte the fixture's."""
    from tests.test_documented_commands import blocks

    (block,) = [
        b for b in blocks("docs/hear.md") if b.heading == "Example tasks" and b.lang == "bash"
    ]
    (line,) = block.commands()
    assert line == "python tools/make_hear_tasks.py hear-tasks"
    (tmp_path / "tools").mkdir()
    for tool in ("make_hear_tasks.py", "make_speech.py"):
        shutil.copy(ROOT / "tools" / tool, tmp_path / "tools" / tool)
    argv = [sys.executable, *line.split()[1:]]
    subprocess.run(argv, cwd=tmp_path, check=True, capture_output=True)
    first, second = _tree(tasks_dir), _tree(tmp_path / "hear-tasks")
    assert sorted({k.split("/")[0] for k in first}) == sorted(NAMES)
    assert first == second
    assert (ROOT / "docs" / "hear.md").is_file()


def test_the_tasks_read_as_heareval_reads_them(tasks_dir: Path) -> None:
    words, mixtures, events = (read_task(tasks_dir / n) for n in NAMES)
    assert (words.metadata.embedding_type, words.metadata.prediction_type) == (
        "scene",
        "multiclass",
    )
    assert words.vocabulary == ("down", "go", "left", "no", "right", "stop", "up", "yes")
    assert [len(words.files(s)) for s in ("train", "valid", "test")] == [32, 8, 8]
    assert mixtures.metadata.split_mode == "presplit_kfold"
    assert mixtures.metadata.splits == ("fold00", "fold01", "fold02", "fold03")
    assert data_splits(mixtures.metadata)[3] == {
        "train": ("fold01", "fold02"), "valid": ("fold00",), "test": ("fold03",)
    }  # fmt: skip
    assert all(1 <= len(v) <= 3 for s in mixtures.scene_labels.values() for v in s.values())
    assert events.metadata.evaluation == ("event_onset_200ms_fms", "segment_1s_er")
    every = [e for s in events.events.values() for v in s.values() for e in v]
    assert {e.label for e in every} == {"beep", "chirp", "word"}
    assert all(0 <= e.start < e.end <= 4000.0 for e in every)
    for task in (words, mixtures, events):
        check_task_audio(task, 16_000)
    assert find_tasks(tasks_dir, ("words",)) == (tasks_dir / "words-v1-full",)


def _copy(tasks_dir: Path, tmp_path: Path, name: str = "words-v1-full") -> Path:
    target = tmp_path / name
    shutil.copytree(tasks_dir / name, target, ignore=shutil.ignore_patterns("16000"))
    return target


def _edit_json(path: Path, edit: object) -> None:
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


MALFORMED = [
    ("task_metadata.json", lambda d: d.pop("embedding_type"),
     "task_metadata.json: key 'embedding_type': is missing (expected 'scene' or 'event')"),
    ("task_metadata.json", lambda d: d.update(prediction_type="regression"),
     "task_metadata.json: key 'prediction_type': expected 'multiclass' or 'multilabel', "
     "got 'regression'"),
    ("task_metadata.json", lambda d: d.update(splits=["train", "test"]),
     "task_metadata.json: key 'splits': expected 'train', 'valid' and 'test'"),
    ("task_metadata.json", lambda d: d.update(evaluation=["f1"]),
     "task_metadata.json: key 'evaluation': names a score heareval 2021.1.3 does not have: 'f1'"),
    ("task_metadata.json", lambda d: d.update(sample_duration="1s"),
     "task_metadata.json: key 'sample_duration': expected seconds or null, got '1s'"),
    ("train.json", lambda d: d.update({"spk1_yes.wav": ["maybe"]}),
     "train.json: key 'spk1_yes.wav': label 'maybe' is not in labelvocabulary.csv"),
    ("train.json", lambda d: d.update({"../x.wav": ["yes"]}),
     "train.json: key '../x.wav': expected a plain file name (no folder)"),
    ("valid.json", lambda d: d.update({"spk1_yes.wav": ["yes"]}),
     "valid.json: key 'spk1_yes.wav': is also in split 'train' (a file is in one split)"),
]  # fmt: skip


@pytest.mark.parametrize(("file", "edit", "message"), MALFORMED)
def test_a_malformed_task_is_one_line_naming_file_and_key(
    tasks_dir: Path, tmp_path: Path, file: str, edit: object, message: str
) -> None:
    task = _copy(tasks_dir, tmp_path)
    _edit_json(task / file, edit)
    with pytest.raises(UserError) as info:
        read_task(task)
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(task)), text
    assert message in text, text


def test_a_malformed_vocabulary_or_event_names_its_file(tasks_dir: Path, tmp_path: Path) -> None:
    task = _copy(tasks_dir, tmp_path)
    (task / "labelvocabulary.csv").write_text("idx,label\n0,down\n2,go\n")
    with pytest.raises(UserError, match=r"labelvocabulary.csv: key 'idx': expected indices 0..1"):
        read_task(task)
    events = _copy(tasks_dir, tmp_path, "events-v1-full")
    _edit_json(events / "test.json", lambda d: d["scene016.wav"][0].update(end=10.0))
    with pytest.raises(UserError, match=r"test.json: key 'scene016.wav\[0\]': ends \(10.0 ms\)"):
        read_task(events)
    with pytest.raises(UserError, match=r"has no audio at 16000 Hz"):
        check_task_audio(read_task(_copy(tasks_dir, tmp_path / "fresh")), 16_000)


def test_frame_labels_follow_heareval_intervals() -> None:
    """heareval's interval tree holds [start, end + 0.0001) ms: the end frame is inside."""
    ev = (HearEvent("a", 100.0, 200.0), HearEvent("b", 150.0, 150.0))
    assert frame_labels(ev, [99.9, 100.0, 150.0, 200.0, 200.0001]) == [
        [], ["a"], ["a", "b"], ["a"], []
    ]  # fmt: skip


def test_kit_layout_reads_back(tasks_dir: Path, tmp_path: Path) -> None:
    for name in NAMES:
        task = read_task(tasks_dir / name)
        kit_embeddings(task, tmp_path / name)
        splits = read_embeddings(task, tmp_path / name)
        first = splits[task.metadata.splits[0]]
        assert first.files == task.files(task.metadata.splits[0])
        emb = first.embeddings[first.files[0]]
        assert emb.dtype == np.float32 and emb.ndim == (1 if name != "events-v1-full" else 2)
        dims = tmp_path / name / f"{task.metadata.splits[0]}.embedding-dimensions.json"
        rows, dim = json.loads(dims.read_text())
        assert dim == emb.shape[-1] and rows >= len(first.files)
    (tmp_path / "words-v1-full" / "test" / "spk6_go.wav.embedding.npy").unlink()
    with pytest.raises(UserError, match=r"spk6_go.wav.embedding.npy: is missing"):
        read_embeddings(read_task(tasks_dir / "words-v1-full"), tmp_path / "words-v1-full")


@pytest.mark.heareval
@pytest.mark.parametrize("name", NAMES)
def test_kit_layout_is_heareval_runner_layout(tasks_dir: Path, tmp_path: Path, name: str) -> None:
    """heareval's own task_embeddings and the kit's writer, on one model's embeddings, write
    the same files byte for byte; the one allowed difference is the order of the labels of
    overlapping events within one frame (heareval's is a Python set's)."""
    task = read_task(tasks_dir / name)
    ours, theirs = tmp_path / "kit" / name, tmp_path / "heareval" / name
    heareval_embeddings(task, theirs)
    kit_embeddings(task, ours)
    _same_layout(task, ours, theirs)


@pytest.mark.heareval
@pytest.mark.parametrize("name", NAMES)
def test_float64_embeddings_layout_is_heareval_runner_layout(
    tasks_dir: Path, tmp_path: Path, name: str
) -> None:
    """A module returning float64 (hearvalidator asks float32; heareval's runner takes it):
    heareval saves each file's float64 array as it is and casts the stacked rows to float32;
    the kit writes the same files byte for byte, and reads them back as heareval's
    memmap_embeddings does (float32)."""
    task = read_task(tasks_dir / name)
    ours, theirs = tmp_path / "kit" / name, tmp_path / "heareval" / name
    heareval_embeddings(task, theirs, float64=True)
    kit_embeddings(task, ours, float64=True)
    _same_layout(task, ours, theirs)
    split = task.metadata.splits[0]
    first = task.files(split)[0]
    saved = np.load(theirs / split / f"{first}.embedding.npy")
    assert saved.dtype == np.float64 and not np.array_equal(saved, saved.astype(np.float32))
    back = read_embeddings(task, theirs)[split].embeddings[first]
    assert back.dtype == np.float32 and np.array_equal(back, saved.astype(np.float32))


def _same_layout(task: Any, ours: Path, theirs: Path) -> None:
    a, b = _tree(ours), _tree(theirs)
    assert sorted(a) == sorted(b)
    for key in a:
        if key.endswith("filename-timestamps.json"):
            # heareval writes its output folder's path before <split>/<file>, the kit not
            # (docs/hear.md); its predictor reads the file name alone
            prefix = lambda rows, root: [[str(Path(s).relative_to(root)), t] for s, t in rows]  # noqa: E731
            assert json.loads(a[key]) == prefix(json.loads(b[key]), theirs)
        elif key.endswith(".pkl") or key.endswith("target-labels.json"):
            load = pickle.loads if key.endswith(".pkl") else json.loads  # our own files
            x, y = load(a[key]), load(b[key])
            if task.metadata.embedding_type == "event":
                x, y = [sorted(f) for f in x], [sorted(f) for f in y]
            assert x == y, key
        else:
            assert a[key] == b[key], key


def _kit_scores(
    task_meta: dict[str, Any], vocab: list[str], pred: dict[str, Any]
) -> dict[str, float]:
    """The kit's scores of one test fold from heareval's cached test predictions."""
    from audiorepro.metrics import hear as m

    if task_meta["embedding_type"] == "event":
        as_events = lambda d: {  # noqa: E731
            k: [HearEvent(str(e["label"]), float(e["start"]), float(e["end"])) for e in v]
            for k, v in d.items()
        }
        predicted, reference = as_events(pred["predicted_events"]), as_events(pred["target_events"])
        onset = m.event_onset_fms(predicted, reference)
        return {
            "event_onset_200ms_fms_f_measure": onset.f_measure,
            "event_onset_200ms_fms_precision": onset.precision,
            "event_onset_200ms_fms_recall": onset.recall,
            "segment_1s_er_error_rate": m.segment_error_rate(predicted, reference, vocab),
        }
    p, t = pred["prediction"].numpy(), pred["target"].numpy()
    funcs = {"top1_acc": m.top1_accuracy_score, "mAP": m.mean_average_precision_score,
             "d_prime": m.d_prime_score, "aucroc": m.aucroc_score}  # fmt: skip
    return {name: funcs[name](p, t) for name in task_meta["evaluation"]}


@pytest.mark.heareval
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_kit_scores_on_heareval_predictions_equal_heareval(
    tasks_dir: Path, tmp_path: Path, name: str
) -> None:
    """heareval's own predictor (the `faster` grid, one grid point, every fold) on the kit's
    embeddings layout; the kit's scores of heareval's cached test predictions equal heareval's
    score classes on them to 1e-12, and its test.predicted-scores.json, where pytorch-lightning's
    logging stored each score as float32, to float32."""
    import warnings

    from heareval.score import available_scores

    task = read_task(tasks_dir / name)
    layout = tmp_path / "embeddings" / name
    kit_embeddings(task, layout)
    heareval_predictions(layout)
    results = json.loads((layout / "test.predicted-scores.json").read_text())
    meta = json.loads((layout / "task_metadata.json").read_text())
    vocab = list(task.vocabulary)
    folds = [s["test"][0] for s in data_splits(task.metadata)]
    assert set(folds) <= set(results)
    for fold in folds:
        pred = pickle.loads((layout / f"{fold}.predictions.pkl").read_bytes())  # this test's own
        ours = _kit_scores(meta, vocab, pred)
        for key, value in ours.items():
            logged = results[fold][f"test_{key}"]
            assert np.float32(value) == np.float32(logged) or (
                math.isnan(value) and math.isnan(logged)
            ), (fold, key)
        label_to_idx = {label: i for i, label in enumerate(vocab)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for score in meta["evaluation"]:
                fn = available_scores[score](label_to_idx=label_to_idx)
                if meta["embedding_type"] == "event":
                    theirs = dict(fn(pred["predicted_events"], pred["target_events"]))
                    mine = {
                        k.rpartition(score + "_")[2]: v
                        for k, v in ours.items()
                        if k.startswith(score)
                    }
                    assert mine and all(_close(mine[k], theirs[k]) for k in mine), (fold, score)
                else:
                    theirs = float(fn(pred["prediction"].numpy(), pred["target"].numpy()))
                    assert _close(ours[score], theirs), (fold, score)


def _close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= 1e-12

"""Hostile round 8: the HEAR path (issue 46) tried as a new user and as a hostile one.

The task folders here are not built by the kit's own ``tools/make_hear_tasks.py``: they are
written by hearpreprocess 2021.1.1's own pandas code (``SubcorpusMetadata``,
``MetadataVocabulary`` and ``FinalCombine`` in ``hearpreprocess/pipeline.py``, copied below
line for line where they shape the files), with the task configs its runner writes (``mode``,
``splits``, ``tmp_dir`` and the task's own extra keys). The HEAR modules are written the way
other authors wrote theirs (hearbaseline's ``naive``: a model object carrying the sizes and the
hop, float64 timestamps built on the audio's device). Each case asserts the right outcome;
those marked "fixed" failed before their fix.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from tests.conftest import ROOT
from tests.test_hostile import _one_line

# --- task folders as hearpreprocess writes them ---------------------------------------------


def _config(**kw: Any) -> dict[str, Any]:
    """A task config as hearpreprocess's runner dumps it (``mode``, ``tmp_dir`` and ``splits``
    added by ``runner.run``; ``modes`` removed)."""
    config: dict[str, Any] = {
        "task_name": "t", "version": "v1", "embedding_type": "scene",
        "prediction_type": "multiclass", "split_mode": "trainvaltest", "sample_duration": 1.0,
        "evaluation": ["top1_acc"], "download_urls": [], "default_mode": "full",
        "tmp_dir": "_workdir", "mode": "full",
    }  # fmt: skip
    config.update(kw)
    if config["split_mode"] == "trainvaltest":
        config["splits"] = ["train", "valid", "test"]  # pipeline.SPLITS
    else:
        config["splits"] = [f"fold{i:02d}" for i in range(config["nfolds"])]
    return config


def _build(out: Path, config: dict[str, Any], rows: list[dict[str, Any]], seconds: float) -> Path:
    """One task folder, its label files written by hearpreprocess's own pandas code."""
    import pandas as pd
    import soundfile as sf

    metadata = pd.DataFrame(rows)
    work = out / f"{config['task_name']}-{config['version']}-{config['mode']}"
    scratch = out.parent / f"{work.name}-scratch"
    scratch.mkdir(parents=True)
    rng = np.random.default_rng(8)
    for split in config["splits"]:
        folder = work / "16000" / split
        folder.mkdir(parents=True)
        for stem in metadata[metadata.split == split].unique_filestem.unique():
            clip = (0.1 * rng.standard_normal(int(seconds * 16000))).astype(np.float32)
            sf.write(str(folder / f"{stem}.wav"), clip, 16000, subtype="PCM_16")
    for split in config["splits"]:  # SubcorpusMetadata.run
        split_path = work / "16000" / split
        audiodf = pd.DataFrame(
            [(a.stem, a.suffix) for a in list(split_path.glob("*.wav"))],
            columns=["unique_filestem", "ext"],
        )
        audiolabel_df = (
            metadata.merge(audiodf, on="unique_filestem")
            .assign(unique_filename=lambda df: df["unique_filestem"] + df["ext"])
            .drop("ext", axis=1)
        )
        if config["embedding_type"] == "scene":
            audiolabel_json = (
                audiolabel_df[["unique_filename", "label"]]
                .groupby("unique_filename")["label"]
                .apply(list)
                .to_dict()
            )
        else:
            audiolabel_json = (
                audiolabel_df[["unique_filename", "label", "start", "end"]]
                .set_index("unique_filename")
                .groupby(level=0)
                .apply(lambda group: group.to_dict(orient="records"))
                .to_dict()
            )
        json.dump(audiolabel_json, (work / f"{split}.json").open("w"), indent=True)
        audiolabel_df.to_csv(scratch / f"{split}.csv", index=False)
    labelset: set[Any] = set()  # MetadataVocabulary.run
    for split in config["splits"]:
        labelset |= set(pd.read_csv(scratch / f"{split}.csv")["label"].unique().tolist())
    labelcsv = pd.DataFrame(list(enumerate(sorted(labelset))), columns=["idx", "label"])
    labelcsv.to_csv(work / "labelvocabulary.csv", columns=["idx", "label"], index=False)
    json.dump(config, (work / "task_metadata.json").open("w"), indent=True)  # FinalCombine
    return work


def _event_rows() -> list[dict[str, Any]]:
    """A DCASE 2016 task 2-like event task: float milliseconds, two labels, 2 s scenes."""
    rows = []
    for i in range(12):
        split = ["train", "train", "valid", "test"][i % 4]
        for k in range(3):
            start = 300.0 * k + 50.5 * (i % 3)
            rows.append(
                {"unique_filestem": f"scene-{i:02d}", "split": split,
                 "label": ["beep", "click"][k % 2], "start": start, "end": start + 220.25}
            )  # fmt: skip
    return rows


def _digit_rows() -> list[dict[str, Any]]:
    """A spoken_digit-like fold task: integer labels, new_split_kfold's fold names."""
    return [
        {"unique_filestem": f"{i:05d}", "split": f"fold{i % 5:02d}", "label": i % 4}
        for i in range(60)
    ]


@pytest.fixture(scope="module")
def real_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hear-real")
    out = root / "tasks"
    event = _config(
        task_name="dcase_like", version="hear2021", embedding_type="event",
        prediction_type="multilabel", sample_duration=2.0,
        evaluation=["event_onset_200ms_fms", "segment_1s_er"],
        split_percentage={"valid": 20, "test": 20, "train": 60},
        max_task_duration_by_split={"train": None, "valid": None, "test": None},
    )  # fmt: skip
    _build(out, event, _event_rows(), 2.0)
    digits = _config(
        task_name="spoken_digit", version="1.0.9", split_mode="new_split_kfold", nfolds=5,
        sample_duration=0.56, tfds_task_name="spoken_digit", tfds_task_version="1.0.9",
        extract_splits=["train"], max_task_duration_by_fold=None,
    )  # fmt: skip
    _build(out, digits, _digit_rows(), 0.56)
    return out


# --- HEAR modules as other authors write them -----------------------------------------------

NAIVE = '''
"""hearbaseline.naive's shape: the model carries its sizes; float64 timestamps on the audio's
device; the scene embedding is the mean of the frames."""
import torch

class RandomProjection(torch.nn.Module):
    sample_rate = 16000
    embedding_size = 48
    scene_embedding_size = 48
    timestamp_embedding_size = 48
    n_fft = 1024
    hop = 256

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.projection = torch.nn.Linear(self.n_fft // 2 + 1, self.embedding_size)
        with torch.no_grad():
            self.projection.weight.copy_(torch.randn(self.projection.weight.shape, generator=g))
            self.projection.bias.zero_()

    def forward(self, x):
        window = torch.hann_window(self.n_fft, device=x.device)
        spec = torch.stft(x, self.n_fft, hop_length=self.hop, window=window,
                          return_complex=True).abs()
        return self.projection(torch.log1p(spec).transpose(1, 2))

def load_model(model_file_path: str = ""):
    model = RandomProjection()
    if model_file_path != "":
        model.load_state_dict(torch.load(model_file_path))
    return model

def get_timestamp_embeddings(audio, model):
    model.eval()
    with torch.no_grad():
        emb = model(audio)
    n = emb.shape[1]
    stamps = torch.arange(n, dtype=torch.float64, device=audio.device) * 1000.0 * model.hop
    return emb, (stamps / model.sample_rate).expand((audio.shape[0], n))

def get_scene_embeddings(audio, model):
    return get_timestamp_embeddings(audio, model)[0].mean(dim=1)
'''

SILENT = '''
"""Every frame the same (a model that has learnt nothing): no event is ever predicted."""
import torch

class Model(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = 8
    timestamp_embedding_size = 8

def load_model(model_file_path=""):
    return Model()

def get_timestamp_embeddings(audio, model):
    n = audio.shape[1] // 1600
    stamps = (torch.arange(n, dtype=torch.float32) * 100.0 + 50.0).expand(audio.shape[0], n)
    return torch.zeros(audio.shape[0], n, 8), stamps

def get_scene_embeddings(audio, model):
    return torch.zeros(audio.shape[0], 8)
'''


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hear-mods")
    (root / "h8_naive.py").write_text(NAIVE)
    (root / "h8_silent.py").write_text(SILENT)
    sys.path.insert(0, str(root))
    return root


# --- findings -------------------------------------------------------------------------------


def test_an_event_runs_filename_timestamps_are_the_same_bytes_in_every_run(
    real_tasks: Path, modules: Path, tmp_path: Path
) -> None:
    """fixed: ``<split>.filename-timestamps.json`` named each row's file by its absolute path
    in the run's staging folder (``OUT/.audiorepro-run/staging-<random>/...``), a folder that
    is gone after the run and has a new random name every run: the same inputs gave other
    bytes (and another manifest hash) every time. heareval reads only the path's last part
    (``Path(filename).name``, its file slug)."""
    texts = []
    for n in (1, 2):
        out = tmp_path / f"out{n}"
        argv = ["hear", "hear:h8_naive", "--tasks-dir", str(real_tasks), "--task", "dcase_like"]
        assert main([*argv, "--out", str(out)]) == 0
        texts.append(
            (out / "dcase_like-hear2021-full" / "test.filename-timestamps.json").read_text()
        )
    assert texts[0] == texts[1]
    rows = json.loads(texts[0])
    assert {Path(slug).name for slug, _ in rows} == {"scene-03.wav", "scene-07.wav", "scene-11.wav"}
    assert ".audiorepro-run" not in texts[0] and str(tmp_path) not in texts[0]


def test_a_published_value_against_an_undefined_score_fails_in_one_line(
    real_tasks: Path, modules: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: a ``[[published]]`` value for a score the run found undefined (an event
    F-measure with no predicted event is NaN, as heareval reports it) crashed with a
    traceback (``verification.json`` refused the NaN); it is a FAIL, saying why."""
    study = tmp_path / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "h8"\nkind = "hear"\n\n[[cell]]\nid = "ev"\n'
        f'model = "hear:h8_silent"\ntasks_dir = "{real_tasks}"\ntask = "dcase_like"\n\n'
        '[[published]]\ncell = "ev"\ntolerance = 0.05\nprovenance = "a leaderboard row"\n'
        "values = { event_onset_200ms_fms = 0.5, segment_1s_er = 1.0 }\n"
    )
    out = tmp_path / "out"
    code = main(["reproduce", str(study), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    rows = json.loads((out / "verification.json").read_text())["golden"]["rows"]
    by_metric = {r["metric"]: r for r in rows}
    onset = by_metric["event_onset_200ms_fms"]
    assert onset["status"] == "FAIL" and onset["reproduced"] is None, onset
    assert "undefined" in onset["reason"], onset
    assert by_metric["segment_1s_er"]["status"] == "PASS"
    assert main(["verify", str(out)]) == 1  # the FAIL stands when the folder is checked
    capsys.readouterr()


def _saved_fold_predictions(task: Path, folder: Path) -> dict[str, float]:
    """heareval-shaped ``fold<k>.predictions.pkl`` for the digits task: each fold's test rows
    in heareval's row order (its shuffle of the stacked embeddings), one-hot targets and
    seeded class scores, ``pickle.dump`` of a dict of CPU tensors as heareval writes it.
    Returns each fold's top-1 accuracy."""
    import pickle

    import torch

    from audiorepro.formats.hear import read_task
    from audiorepro.formats.hear_embeddings import row_order
    from audiorepro.metrics.hear import top1_accuracy_score

    t = read_task(task)
    folder.mkdir(parents=True)
    order, rng, accuracy = row_order(t), np.random.default_rng(3), {}
    for fold in t.metadata.splits:
        target = np.zeros((len(order[fold]), len(t.vocabulary)), dtype=np.float32)
        for i, name in enumerate(order[fold]):
            target[i, t.vocabulary.index(t.scene_labels[fold][name][0])] = 1.0
        prediction = rng.dirichlet(np.ones(len(t.vocabulary)), size=len(target)).astype(np.float32)
        prediction[: len(target) // (2 + int(fold[-1]))] = target[
            : len(target) // (2 + int(fold[-1]))
        ]
        with (folder / f"{fold}.predictions.pkl").open("wb") as fp:
            pickle.dump({"target": torch.tensor(target), "prediction": torch.tensor(prediction),
                         "prediction_logit": torch.tensor(prediction)}, fp)  # fmt: skip
        accuracy[fold] = top1_accuracy_score(prediction, target)
    return accuracy


def _saved_study(path: Path, tasks: Path, saved: Path, value: float) -> Path:
    path.write_text(
        'schema = "audiorepro.study/1"\nname = "h8s"\nkind = "hear"\n\n[[cell]]\nid = "sub"\n'
        f'model = "hear:a_submission"\ntasks_dir = "{tasks}"\ntask = "spoken_digit"\n'
        f'predictions = "{saved}"\n\n[[published]]\ncell = "sub"\ntolerance = 0.001\n'
        f'provenance = "its leaderboard row"\nvalues = {{ top1_acc = {value!r} }}\n'
    )
    return path


def test_a_saved_fold_copied_over_another_is_refused(
    real_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: a submission's ``fold01.predictions.pkl`` replaced by a copy of its better
    ``fold00.predictions.pkl`` passed the check "the targets hold the split's labels, count
    for count" (every fold of the task holds each digit three times), and the folds' mean,
    raised by the copy, got a PASS against a row claiming it. heareval's test rows follow its
    shuffle of the fold's files (no shuffle at test time), so the kit checks the targets row by
    row against the task's labels in that order."""
    task = real_tasks / "spoken_digit-1.0.9-full"
    saved = tmp_path / "saved"
    accuracy = _saved_fold_predictions(task, saved)
    honest = float(np.mean(list(accuracy.values())))
    out = tmp_path / "honest"
    study = _saved_study(tmp_path / "honest.toml", real_tasks, saved, honest)
    assert main(["reproduce", str(study), "--out", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()

    (saved / "fold01.predictions.pkl").write_bytes((saved / "fold00.predictions.pkl").read_bytes())
    claimed = float(
        np.mean(
            [accuracy["fold00"], accuracy["fold00"], *[accuracy[f"fold0{k}"] for k in (2, 3, 4)]]
        )
    )
    assert claimed > honest
    study = _saved_study(tmp_path / "claimed.toml", real_tasks, saved, claimed)
    code, err = (
        main(["reproduce", str(study), "--out", str(tmp_path / "claimed")]),
        capsys.readouterr().err,
    )
    assert code == 2, err
    _one_line(err, "fold01.predictions.pkl", "target", "fold01")
    assert not (tmp_path / "claimed").exists()


def test_diff_names_a_changed_clip_as_the_cause(
    real_tasks: Path, modules: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: a cell's identity held the task's label files but not its audio: two runs over
    the same task with one clip changed in place moved the fold scores, and ``diff`` called
    it "changed, unexplained: nothing it depends on differs" (a defect line). The bundle now
    records one SHA-256 over the clips read, and diff names the inputs."""
    import shutil

    import soundfile as sf

    other = tmp_path / "tasks"
    shutil.copytree(real_tasks, other)
    clip = other / "spoken_digit-1.0.9-full" / "16000" / "fold00" / "00000.wav"
    audio, rate = sf.read(str(clip), dtype="float32")
    sf.write(str(clip), 0.5 * audio, rate, subtype="PCM_16")  # quieter: a log spectrum moves
    argv = ["hear", "hear:h8_naive", "--task", "spoken_digit"]
    assert main([*argv, "--tasks-dir", str(real_tasks), "--out", str(tmp_path / "a")]) == 0
    assert main([*argv, "--tasks-dir", str(other), "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    code = main(["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    out = capsys.readouterr().out
    assert "moved" in out and "unexplained" not in out and "DEFECT" not in out, out
    assert "audio_sha256" in out, out
    assert code == 1, out


TRAINING_MODE = '''
"""A model left in training mode (heareval's runner never calls eval()): BatchNorm1d
normalises each embedding over the batch, and refuses a batch of one clip."""
import torch

class Model(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = 16
    timestamp_embedding_size = 16

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(200, 16)
        with torch.no_grad():
            g = torch.Generator().manual_seed(0)
            self.proj.weight.copy_(torch.randn(self.proj.weight.shape, generator=g))
            self.proj.bias.zero_()
        self.norm = torch.nn.BatchNorm1d(16)

    def forward(self, x):
        n = x.shape[1] // 200
        return self.norm(self.proj(x[:, : n * 200].reshape(x.shape[0], n, 200).abs().mean(1)))

def load_model(model_file_path=""):
    return Model()

def get_scene_embeddings(audio, model):
    return model(audio)

def get_timestamp_embeddings(audio, model):
    raise NotImplementedError
'''


def test_a_module_is_called_in_heareval_batches(
    real_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: the kit called ``get_scene_embeddings`` one clip at a time where heareval's
    embedding runner hands a module consecutive files of ``<split>.json`` in batches
    (``int(0.7 * 120 / sample_duration * 16000 / rate)``, 150 clips for spoken_digit's
    0.56 s): a module whose embeddings depend on the batch (a model left in training mode,
    which heareval never leaves) was refused ("Expected more than 1 value per channel when
    training") or embedded otherwise than heareval embeds it. Every fold here is one batch."""
    import soundfile as sf
    import torch

    from audiorepro.formats.hear import read_task

    (tmp_path / "h8_training_mode.py").write_text(TRAINING_MODE)
    sys.path.insert(0, str(tmp_path))
    out = tmp_path / "out"
    argv = ["hear", "hear:h8_training_mode", "--tasks-dir", str(real_tasks), "--out", str(out)]
    assert main([*argv, "--task", "spoken_digit"]) == 0, capsys.readouterr().err
    task = read_task(real_tasks / "spoken_digit-1.0.9-full")
    module = __import__("h8_training_mode")
    model = module.load_model()
    for fold in task.metadata.splits:
        files = task.files(fold)
        clips = [sf.read(str(task.audio_dir(16000, fold) / f), dtype="float32")[0] for f in files]
        with torch.no_grad():
            want = module.get_scene_embeddings(torch.from_numpy(np.stack(clips)), model).numpy()
        got = np.stack([np.load(out / task.name / fold / f"{f}.embedding.npy") for f in files])
        assert np.array_equal(got, want), fold


@pytest.mark.heareval
def test_heareval_runner_embeds_the_real_layout_tasks_as_the_kit(
    real_tasks: Path, modules: Path, tmp_path: Path
) -> None:
    """heareval's own ``task_embeddings`` (its ``Embedding`` of the module, its batches) over
    the folders hearpreprocess's code wrote, against ``audiorepro hear``'s output: the same
    files byte for byte, but ``filename-timestamps.json``'s paths (docs/hear.md)."""
    from tests.hear_reference import import_task_embeddings

    te = import_task_embeddings()
    out = tmp_path / "kit"
    assert main(["hear", "hear:h8_naive", "--tasks-dir", str(real_tasks), "--out", str(out)]) == 0
    embedding = te.Embedding("h8_naive")
    for task in sorted(p for p in real_tasks.iterdir() if p.is_dir()):
        theirs = tmp_path / "heareval" / task.name
        te.task_embeddings(embedding, task, theirs)
        for path in sorted(p for p in theirs.rglob("*") if p.is_file()):
            rel = path.relative_to(theirs)
            mine = (out / task.name / rel).read_bytes()
            if path.name.endswith("filename-timestamps.json"):
                rows = [
                    [str(Path(s).relative_to(theirs)), t] for s, t in json.loads(path.read_text())
                ]
                assert json.loads(mine) == rows, rel
            else:
                assert mine == path.read_bytes(), (task.name, rel)


@pytest.mark.parametrize("second", ["spoken_digit", "spoken_digit-1.0.9-full"])
def test_a_task_named_twice_is_one_line_naming_the_option(
    real_tasks: Path, modules: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], second: str
) -> None:
    """fixed: ``--task spoken_digit --task spoken_digit`` (or the folder name the second time)
    failed naming a file the user never wrote, ``/tmp/tmp.../hear.toml: key 'cell[1].id':
    repeats cell id``; it is one line naming ``--task``."""
    out = tmp_path / "out"
    argv = ["hear", "hear:h8_naive", "--tasks-dir", str(real_tasks), "--task", "spoken_digit"]
    code = main([*argv, "--task", second, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    _one_line(err, "--task", "spoken_digit-1.0.9-full twice", str(real_tasks))
    assert "hear.toml" not in err and not out.exists()


def test_hear_table_refuses_one_encoder_name_for_two_codes(
    real_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: two runs of ``hear:h8_twin``, a module without weight files edited between
    them (another seed), went into one row of the table, as if one model had made both
    numbers; only differing weight files were refused. The module's source SHA-256 (its code
    identity, in every bundle) must agree too."""
    import os
    import subprocess

    runs = []
    for seed in (0, 1):
        mods = tmp_path / f"mods{seed}"
        mods.mkdir()
        (mods / "h8_twin.py").write_text(NAIVE.replace("manual_seed(0)", f"manual_seed({seed})"))
        out, task = tmp_path / f"run{seed}", ("spoken_digit", "dcase_like")[seed]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(mods), *sys.path])}
        cmd = [sys.executable, "-m", "audiorepro", "hear", "hear:h8_twin"]
        cmd += ["--tasks-dir", str(real_tasks), "--task", task, "--out", str(out)]
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        runs.append(str(out))
    code = main(["hear-table", *runs, "--out", str(tmp_path / "table")])
    err = capsys.readouterr().err
    assert code == 2
    _one_line(err, "hear:h8_twin has other code in", runs[1], runs[0])
    assert not (tmp_path / "table").exists()


NONFINITE_FRAMES = '''
"""Finite scene embeddings (the validator's noise passes), -inf in the first frame of every
clip (a log of a silent frame)."""
from h8_naive import load_model, get_scene_embeddings, get_timestamp_embeddings as _frames

def get_timestamp_embeddings(audio, model):
    e, t = _frames(audio, model)
    e = e.clone()
    e[:, 0, 0] = float("-inf")
    return e, t
'''


@pytest.mark.parametrize("predictor", ["linear-v1", "hear-mlp-v1"])
def test_non_finite_frames_are_one_line(
    real_tasks: Path,
    modules: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    predictor: str,
) -> None:
    """fixed: frame embeddings holding -inf went on to the predictor: linear-v1 failed with
    scikit-learn's traceback ("Input X contains NaN"), hear-mlp-v1 trained on them and
    reported NaN scores (heareval's predictor asserts finite embeddings). One line naming
    the clip, exit 2, nothing written."""
    (modules / "h8_nonfinite.py").write_text(NONFINITE_FRAMES)
    out = tmp_path / "out"
    argv = ["hear", "hear:h8_nonfinite", "--tasks-dir", str(real_tasks), "--task", "dcase_like"]
    code = main([*argv, "--predictor", predictor, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    _one_line(err, "MODEL", "NaN or infinite", "train/scene-")
    assert not out.exists()


PY_NAN = """
import numpy as np

class Spectra:
    name = "h8-py-nan"
    sample_rate = 16000

    def embed_audio(self, waveforms):
        rows = [np.abs(np.fft.rfft(np.resize(w, 800)))[:16] for w in waveforms]
        out = np.stack(rows).astype(np.float32)
        out[:, 0] = np.where([w[0] > 0 for w in waveforms], np.nan, out[:, 0])  # about half
        return out

    def weight_files(self):
        return []

def make():
    return Spectra()
"""


def test_a_py_encoders_nan_embedding_is_one_line(
    real_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: a ``py:`` encoder whose embedding of some clip held NaN (its check clips were
    fine) sent it to linear-v1, which failed with scikit-learn's traceback ("Input X contains
    NaN"). One line naming the clip, exit 2."""
    (tmp_path / "h8_py_nan.py").write_text(PY_NAN)
    out = tmp_path / "out"
    spec = f"py:{tmp_path / 'h8_py_nan.py'}:make"
    argv = ["hear", spec, "--tasks-dir", str(real_tasks), "--task", "spoken_digit"]
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    _one_line(err, "MODEL", "NaN or infinite", ".wav")
    assert not out.exists()


# --- trec-eval against trec_eval 10 on odd inputs -------------------------------------------

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n"
RUN = "q1 Q0 d1 1 1 r\nq1 Q0 d2 2 2 r\nq2 Q0 d3 1 1 r\n"


@pytest.mark.parametrize(
    "qrels",
    [QRELS + "\n", "q1 0 d1 1\n\n" + QRELS[10:], "  \n" + QRELS, "# a\n# b\n" + QRELS],
)
def test_a_blank_qrels_line_is_a_comment_as_documented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], qrels: str
) -> None:
    """decided (docs/retrieval.md's divergences): trec_eval 10 quits on an empty or blank qrels
    line, or two comment lines in a row ('Malformed line N', exit 2); trec-eval reads them as
    comments, as both read them in a run, and prints the numbers of the file without them."""
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "clean").write_text(
        "".join(x + "\n" for x in qrels.splitlines() if x.strip() and not x.startswith("#"))
    )
    (tmp_path / "run").write_text(RUN)
    outs = []
    for name in ("qrels", "clean"):
        assert main(["trec-eval", "-q", str(tmp_path / name), str(tmp_path / "run")]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "map" in outs[0]
    page = (ROOT / "docs" / "retrieval.md").read_text(encoding="utf-8")
    assert "trec_eval.get_qrels: Malformed line N" in page


# --- label vocabularies as pandas (heareval's reader) reads them ---------------------------


@pytest.mark.parametrize("labels", [("true", "false"), ("TRUE", "FALSE"), ("false", "True")])
def test_a_true_false_vocabulary_is_refused_as_pandas_renames_it(labels: tuple[str, str]) -> None:
    """fixed: a vocabulary of ``true``/``false`` was read as written, but pandas (heareval's
    reader) reads such a column as booleans and heareval names the labels ``True`` and
    ``False``: the split files' ``true`` is then no label of heareval's vocabulary. Refused
    in one line, as a renamed label is."""
    import io

    import pandas as pd

    from audiorepro.core.errors import UserError
    from audiorepro.formats.hear import parse_vocabulary

    text = f"idx,label\n0,{labels[0]}\n1,{labels[1]}\n"
    read = [str(x) for x in pd.read_csv(io.StringIO(text))["label"]]
    assert read != list(labels)  # what heareval calls them differs from the text
    with pytest.raises(UserError) as info:
        parse_vocabulary(text, source="labelvocabulary.csv")
    assert "booleans" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("labels", [(" a", "b "), ("True", "False"), ("true", "x")])
def test_labels_pandas_keeps_as_written_are_read(labels: tuple[str, str]) -> None:
    """fixed: a label with a blank before or after it was refused ("pandas ... strips it"),
    but pandas keeps it (``skipinitialspace`` is off), and heareval reads the task."""
    import io

    import pandas as pd

    from audiorepro.formats.hear import parse_vocabulary

    text = f"idx,label\n0,{labels[0]}\n1,{labels[1]}\n"
    assert [str(x) for x in pd.read_csv(io.StringIO(text))["label"]] == list(labels)
    assert parse_vocabulary(text, source="labelvocabulary.csv") == labels


FRAME_FAULTS = {
    "numpy timestamps": ("return e, t.numpy()", "returned tuple of ['Tensor', 'ndarray']"),
    "embeddings alone": ("return e", "returned Tensor; expected a pair of torch tensors"),
    "a raised error": (
        'raise RuntimeError("CUDA out of memory")',
        "get_timestamp_embeddings failed: RuntimeError: CUDA out of memory",
    ),
}


@pytest.mark.parametrize("fault", FRAME_FAULTS)
def test_a_faulty_get_timestamp_embeddings_is_one_line(
    real_tasks: Path, modules: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str
) -> None:
    """fixed: an event task's ``get_timestamp_embeddings`` that raised, returned numpy
    timestamps or only the embeddings ended the command with a traceback (``AttributeError:
    'numpy.ndarray' object has no attribute 'detach'``, ``too many values to unpack``); a
    scene task's ``get_scene_embeddings`` already failed in one line. Now the same line."""
    body, words = FRAME_FAULTS[fault]
    name = "h8_fault_" + fault.replace(" ", "_")
    (modules / f"{name}.py").write_text(
        "from h8_naive import load_model, get_scene_embeddings, get_timestamp_embeddings as _f\n"
        f"def get_timestamp_embeddings(audio, model):\n    e, t = _f(audio, model)\n    {body}\n"
    )
    out = tmp_path / "out"
    argv = ["hear", f"hear:{name}", "--tasks-dir", str(real_tasks), "--task", "dcase_like"]
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    _one_line(err, name, words)
    assert not out.exists()


def test_a_fold_whose_score_is_undefined_is_left_out_of_the_mean_as_heareval_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: heareval aggregates folds with pandas (``aggregate_test_results``:
    ``results_df[score].mean()`` and ``.std()``), which leave a NaN fold out; HEAR's
    leaderboard reports that mean. The kit took numpy's mean, NaN as soon as one fold's score
    was undefined (``aucroc`` on a fold without a class's positives), so a leaderboard row
    copied from heareval's own file got FAIL. Saved predictions of a three-fold task whose
    fold02 lacks class ``c``: the kit's mean and deviation are pandas' over the folds."""
    import pickle

    import pandas as pd
    import torch

    from audiorepro.formats.hear import read_task
    from audiorepro.formats.hear_embeddings import row_order
    from audiorepro.metrics.hear import aucroc_score, top1_accuracy_score

    def label(i: int) -> str:  # fold02 (i % 3 == 2) holds a and b only
        return "ab"[(i // 3) % 2] if i % 3 == 2 else "abc"[(i // 3) % 3]

    rows = [
        {"unique_filestem": f"{i:03d}", "split": f"fold{i % 3:02d}", "label": label(i)}
        for i in range(36)
    ]
    config = _config(task_name="three", split_mode="presplit_kfold", nfolds=3,
                     evaluation=["top1_acc", "aucroc"], max_task_duration_by_fold=None)  # fmt: skip
    tasks = tmp_path / "tasks"
    task = read_task(_build(tasks, config, rows, 0.1))
    saved, order, rng = tmp_path / "saved", row_order(task), np.random.default_rng(5)
    saved.mkdir()
    results = {}
    for fold in task.metadata.splits:
        target = np.zeros((len(order[fold]), 3), dtype=np.float32)
        for i, name in enumerate(order[fold]):
            target[i, task.vocabulary.index(task.scene_labels[fold][name][0])] = 1.0
        prediction = rng.dirichlet(np.ones(3), size=len(target)).astype(np.float32)
        with (saved / f"{fold}.predictions.pkl").open("wb") as fp:
            pickle.dump(
                {"target": torch.tensor(target), "prediction": torch.tensor(prediction)}, fp
            )
        results[fold] = {"test_top1_acc": top1_accuracy_score(prediction, target),
                         "test_aucroc": aucroc_score(prediction, target)}  # fmt: skip
    assert np.isnan(results["fold02"]["test_aucroc"])  # the case: one fold undefined
    frame = pd.DataFrame.from_dict(results, orient="index")  # heareval's own two lines
    mean, std = frame["test_aucroc"].mean(), frame["test_aucroc"].std()
    study = tmp_path / "s.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "h8m"\nkind = "hear"\n\n[[cell]]\nid = "sub"\n'
        f'model = "hear:a_submission"\ntasks_dir = "{tasks}"\ntask = "three"\n'
        f'predictions = "{saved}"\n\n[[published]]\ncell = "sub"\ntolerance = 1e-9\n'
        f'provenance = "heareval aggregated_scores"\nvalues = {{ aucroc = {mean!r} }}\n'
    )
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0, capsys.readouterr()
    doc = json.loads((out / "sub" / "test.predicted-scores.json").read_text())
    assert doc["aggregated_scores"]["test_aucroc_mean"] == mean
    assert doc["aggregated_scores"]["test_aucroc_std"] == pytest.approx(std, rel=1e-15)


def test_hear_table_tells_a_pair_never_run_from_an_undefined_score() -> None:
    """fixed: hear-table said "Not recorded / undefined" both where no run holds the encoder
    on the task and where a run found the score undefined (NaN, null in the bundle); a pair
    never run is now a dash, no value by design, with the table's note saying why."""
    from audiorepro.render.tables import MISSING_TEXT, NOT_APPLICABLE, to_markdown
    from audiorepro.runner.hear_table import HearEntry, hear_tables

    entries = [
        HearEntry("hear:a", "words-v1-full", "top1_acc", 0.5, "o1", "ab", "c1", "w=1", 32),
        HearEntry("hear:a", "events-v1-full", "event_onset_200ms_fms", None, "o1", "ab", "c2",
                  "w=1", 32),
        HearEntry("hear:b", "words-v1-full", "top1_acc", 0.25, "o2", "cd", "c1", "w=2", 16),
    ]  # fmt: skip
    table = hear_tables(entries)["hear"]
    assert dict(table.rows) == {"hear:a": (None, 0.5), "hear:b": (NOT_APPLICABLE, 0.25)}
    text = to_markdown(table)
    assert text.count(MISSING_TEXT) == 1 and "no run of the encoder on the task" in text

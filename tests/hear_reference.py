"""heareval 2021.1.3 as the reference in tests: a small deterministic audio model, heareval's
own embedding runner on it, and the kit's writer on the same embeddings.

heareval's ``task_embeddings`` module imports tensorflow at its top (for TF models); the tests
run a torch-style model, so a stand-in ``tensorflow`` module with the two names heareval
touches (``Module``, ``test.is_gpu_available``) is placed in ``sys.modules`` while it is
imported. Nothing of heareval's own code is changed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.formats.hear import HearTask
from audiorepro.formats.hear_embeddings import write_embeddings

SAMPLE_RATE = 16_000
HOP = 800  # 50 ms frames at 16 kHz
SCENE_DIM = 6


def scene_embedding(audio: np.ndarray) -> np.ndarray:
    """A float32 summary of one clip: level, spread and energy in four quarters."""
    x = np.asarray(audio, dtype=np.float32)
    quarters = np.array_split(x * x, 4)
    feats = [np.mean(np.abs(x)), np.std(x), *[np.mean(q) for q in quarters]]
    return np.asarray(feats, dtype=np.float32)


def timestamp_embedding(audio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Frames every 50 ms (centred timestamps, ms, float32) with a 3-value summary each."""
    x = np.asarray(audio, dtype=np.float32)
    n = len(x) // HOP
    frames = x[: n * HOP].reshape(n, HOP)
    emb = np.stack(
        [np.mean(np.abs(frames), axis=1), np.std(frames, axis=1), np.max(frames, axis=1)], axis=1
    ).astype(np.float32)
    stamps = ((np.arange(n) * HOP + HOP / 2) / SAMPLE_RATE * 1000.0).astype(np.float32)
    return emb, stamps


class StandInModel:
    """Duck-types heareval's ``Embedding`` wrapper (what ``task_embeddings`` calls on it)."""

    type = "torch"
    sample_rate = SAMPLE_RATE

    def get_scene_embedding_as_numpy(self, audio: Any) -> np.ndarray:
        return np.stack([scene_embedding(a.numpy()) for a in audio])

    def get_timestamp_embedding_as_numpy(self, audio: Any) -> tuple[np.ndarray, np.ndarray]:
        pairs = [timestamp_embedding(a.numpy()) for a in audio]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


class Float64Model(StandInModel):
    """The stand-in model computing in float64 and returning float64 arrays (a module whose
    tensors are float64: heareval's runner saves them as they are)."""

    def get_scene_embedding_as_numpy(self, audio: Any) -> np.ndarray:
        return np.stack([scene_embedding64(a.numpy()) for a in audio])

    def get_timestamp_embedding_as_numpy(self, audio: Any) -> tuple[np.ndarray, np.ndarray]:
        pairs = [timestamp_embedding(a.numpy()) for a in audio]
        return np.stack([frames64(a.numpy()) for a in audio]), np.stack([p[1] for p in pairs])


def scene_embedding64(audio: np.ndarray) -> np.ndarray:
    """:func:`scene_embedding` in float64 (values float32 cannot hold exactly)."""
    x = np.asarray(audio, dtype=np.float64)
    quarters = np.array_split(x * x, 4)
    return np.asarray([np.mean(np.abs(x)), np.std(x), *[np.mean(q) for q in quarters]])


def frames64(audio: np.ndarray) -> np.ndarray:
    """:func:`timestamp_embedding`'s frames in float64."""
    x = np.asarray(audio, dtype=np.float64)
    frames = x[: len(x) // HOP * HOP].reshape(-1, HOP)
    return np.stack([np.mean(np.abs(frames), 1) / 3.0, np.std(frames, 1), np.max(frames, 1)], 1)


def import_task_embeddings() -> Any:
    """heareval.embeddings.task_embeddings, imported with a stand-in tensorflow."""
    if "tensorflow" not in sys.modules:
        tf = types.ModuleType("tensorflow")
        tf.Module = type("Module", (), {})  # type: ignore[attr-defined]
        tf.test = types.SimpleNamespace(is_gpu_available=lambda **_: False)  # type: ignore[attr-defined]
        sys.modules["tensorflow"] = tf
    import heareval.embeddings.task_embeddings as te

    return te


def heareval_embeddings(task: HearTask, out: Path, *, float64: bool = False) -> None:
    """heareval's own ``task_embeddings`` on ``task`` with the stand-in model (its float64
    variant with ``float64``)."""
    model = Float64Model() if float64 else StandInModel()
    import_task_embeddings().task_embeddings(model, task.path, out)


def kit_embeddings(task: HearTask, out: Path, *, float64: bool = False) -> None:
    """The same embeddings through the kit's writer (audio read as heareval reads it)."""
    import soundfile

    embeddings: dict[str, dict[str, Any]] = {}
    stamps: dict[str, dict[str, Any]] = {}
    for split in task.metadata.splits:
        embeddings[split], stamps[split] = {}, {}
        for name in task.files(split):
            audio, _ = soundfile.read(
                str(task.audio_dir(SAMPLE_RATE, split) / name), dtype=np.float32
            )
            if task.metadata.embedding_type == "scene":
                embeddings[split][name] = (scene_embedding64 if float64 else scene_embedding)(audio)
            else:
                embeddings[split][name], stamps[split][name] = timestamp_embedding(audio)
                if float64:
                    embeddings[split][name] = frames64(audio)
    event = task.metadata.embedding_type == "event"
    write_embeddings(task, out, embeddings, stamps if event else None)


def _honour_test_epoch(tp: Any) -> None:
    """The one line of heareval 2021.1.3 that pytorch-lightning >= 1.6 does not honour:
    ``task_predictions_test`` sets ``trainer.fit_loop.current_epoch`` (an attribute nothing
    reads in 1.9.5), so an event task's test step looks up the postprocessing of the epoch count
    after training and fails (KeyError). The same value is set where 1.9.5 reads it."""
    if getattr(tp.task_predictions_test, "honours_epoch", False):
        return
    original = tp.task_predictions_test

    def task_predictions_test(*, grid_point: Any, **kwargs: Any) -> Any:
        grid_point.trainer.fit_loop.epoch_progress.current.completed = grid_point.epoch
        return original(grid_point=grid_point, **kwargs)

    task_predictions_test.honours_epoch = True  # type: ignore[attr-defined]
    tp.task_predictions_test = task_predictions_test


def heareval_predictions(
    embed_task_dir: Path, *, grid: str = "faster", grid_points: int = 1
) -> None:
    """heareval's own predictor (``heareval.predictions.runner``'s work for one task) on an
    embeddings folder, on CPU, deterministic, run from the folder's parent (its logs go there).

    torch >= 2.6 loads checkpoints with ``weights_only=True`` by default, which refuses the
    torch classes in heareval's hyperparameters; these checkpoints are written by this run, so
    the old default is restored for it (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD)."""
    import logging
    import os

    import heareval.predictions.task_predictions as tp

    _honour_test_epoch(tp)
    meta = json.loads((embed_task_dir / "task_metadata.json").read_text())
    dims = [
        json.loads((embed_task_dir / f"{s}.embedding-dimensions.json").read_text())[1]
        for s in meta["splits"]
    ]
    previous = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    cwd = os.getcwd()
    os.chdir(embed_task_dir.parent)
    try:
        tp.task_predictions(
            embedding_path=Path(embed_task_dir.name), embedding_size=dims[0],
            grid_points=grid_points, gpus=None, in_memory=True, deterministic=True,
            grid=grid, logger=logging.getLogger("heareval-reference"),
        )  # fmt: skip
    finally:
        os.chdir(cwd)
        if previous is None:
            del os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
        else:
            os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = previous


def build_tasks(root: Path) -> Path:
    """The example HEAR tasks (tools/make_hear_tasks.py) in ``root/tasks``; skips, saying why,
    without espeak-ng."""
    import pytest

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    tool = Path(__file__).resolve().parent.parent / "tools" / "make_hear_tasks.py"
    out = root / "tasks"
    subprocess.run([sys.executable, str(tool), str(out)], check=True, capture_output=True)
    return out

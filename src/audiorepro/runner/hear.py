"""``audiorepro hear MODEL --tasks-dir DIR``: a HEAR 2021 module over HEAR scene tasks.

For each task: every clip of every split is read as heareval reads it (soundfile, float32, at
the module's sample rate from ``<rate>/<split>/``) and embedded by the module's own
``get_scene_embeddings``, one clip per call; the embeddings are written in heareval's layout
(``OUT/<task folder>/``, :mod:`audiorepro.formats.hear_embeddings`), so heareval's predictor
can run on them too; the predictor is trained on each of heareval's data splits
(:func:`audiorepro.formats.hear.data_splits`: train/valid/test, or each fold tested in turn)
and the task's scores (:mod:`audiorepro.metrics.hear`) are written to
``OUT/<task folder>/test.predicted-scores.json`` under heareval's keys.

Predictors: ``linear-v1`` (docs/linear-probe.md: standardized features, L2 logistic
regression, C = 1.0) on the training split(s) alone; its class scores are the softmax of its
decision values over the classes seen in training (0 for the others), so that mAP, d' and AUC
have scores to rank. It is a multiclass probe: multilabel and event tasks are refused, in one
line, before the model is loaded (HEAR's own predictor, ``hear-mlp-v1``, is not built yet).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file
from audiorepro.core.io import atomic_write_bytes
from audiorepro.formats.hear import HearTask, check_task_audio, data_splits, find_tasks, read_task
from audiorepro.formats.hear_embeddings import write_embeddings
from audiorepro.metrics import hear as scores
from audiorepro.metrics.linear_probe import LINEAR, fit_linear_v1
from audiorepro.models.registry import load_registry, resolve_spec
from audiorepro.models.user_encoders import load_user

__all__ = ["PREDICTORS", "HearTaskResult", "run_hear"]

PREDICTORS = (LINEAR,)
SCENE_SCORES = {
    "top1_acc": scores.top1_accuracy_score,
    "pitch_acc": scores.top1_accuracy_score,
    "chroma_acc": scores.chroma_accuracy_score,
    "mAP": scores.mean_average_precision_score,
    "d_prime": scores.d_prime_score,
    "aucroc": scores.aucroc_score,
}
PREDICTED_SCORES = "test.predicted-scores.json"


@dataclass(frozen=True)
class HearTaskResult:
    """One task's scores: test split (or fold) -> heareval score name -> value."""

    task: str
    folder: Path
    scores: dict[str, dict[str, float]]


def _check_task(task: HearTask, predictor: str) -> None:
    meta = task.metadata
    if meta.embedding_type != "scene":
        raise UserError(
            "is an event task; `audiorepro hear` runs scene tasks so far (event tasks need "
            "timestamp embeddings and hear-mlp-v1)",
            source=task.path,
        )
    if predictor == LINEAR and meta.prediction_type != "multiclass":
        raise UserError(
            f"is a {meta.prediction_type} task; {LINEAR} is a multiclass probe",
            source=task.path,
        )
    unknown = [e for e in meta.evaluation if e not in SCENE_SCORES]
    if unknown:
        raise UserError(
            f"names {unknown[0]!r}, not a scene score", source=task.path, key="evaluation"
        )


def _read_clip(path: Path, rate: int) -> npt.NDArray[np.float32]:
    """A clip as heareval's AudioFileDataset reads it: soundfile, float32, at ``rate``."""
    import soundfile

    check_regular_file(path, what="a HEAR task's audio clip")
    try:
        audio, sr = soundfile.read(str(path), dtype=np.float32)
    except (RuntimeError, soundfile.LibsndfileError, TypeError, ValueError) as exc:
        raise UserError(f"cannot be decoded ({exc})", source=path) from None
    if sr != rate or audio.ndim != 1 or audio.size == 0:
        raise UserError(
            f"is {sr} Hz with shape {audio.shape}; expected mono audio at {rate} Hz",
            source=path,
        )
    return np.asarray(audio, dtype=np.float32)


def embed_task(encoder: Any, task: HearTask, rate: int) -> dict[str, dict[str, Any]]:
    """Every clip's scene embedding (float32), split -> file -> vector."""
    out: dict[str, dict[str, Any]] = {}
    for split in task.metadata.splits:
        out[split] = {}
        for name in task.files(split):
            clip = _read_clip(task.audio_dir(rate, split) / name, rate)
            row = np.asarray(encoder.embed_audio([clip]))
            out[split][name] = np.ascontiguousarray(row[0], dtype=np.float32)
    return out


def _softmax(decision: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    shifted = decision - decision.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


def _rows(
    task: HearTask, emb: dict[str, dict[str, Any]], splits: tuple[str, ...]
) -> tuple[Any, Any]:
    index = {label: i for i, label in enumerate(task.vocabulary)}
    names = [(s, n) for s in splits for n in task.files(s)]
    x = np.stack([emb[s][n] for s, n in names])
    y = np.array([index[task.scene_labels[s][n][0]] for s, n in names], dtype=np.int64)
    return x, y


def _linear_fold(
    task: HearTask, emb: dict[str, dict[str, Any]], split: dict[str, tuple[str, ...]]
) -> tuple[dict[str, float], float]:
    """linear-v1 on one data split: the test scores and the validation score (the first)."""
    x_train, y_train = _rows(task, emb, split["train"])
    x_valid, y_valid = _rows(task, emb, split["valid"])
    x_test, y_test = _rows(task, emb, split["test"])
    fit = fit_linear_v1(x_train, y_train, np.concatenate([x_valid, x_test]))
    probs = np.zeros((len(fit.decision), len(task.vocabulary)))
    probs[:, list(fit.classes)] = _softmax(fit.decision)
    onehot = np.eye(len(task.vocabulary))
    valid, test = probs[: len(y_valid)], probs[len(y_valid) :]
    names = task.metadata.evaluation
    test_scores = {name: SCENE_SCORES[name](test, onehot[y_test]) for name in names}
    return test_scores, SCENE_SCORES[names[0]](valid, onehot[y_valid])


def _predicted_scores(
    task: HearTask, folds: dict[str, tuple[dict[str, float], float]], predictor: str
) -> dict[str, Any]:
    """heareval's ``test.predicted-scores.json`` keys: per test split ``test_score`` (the
    first score), ``test_<name>`` and ``validation_score``; ``aggregated_scores`` (mean and
    sample standard deviation over folds) when there are several."""
    primary = task.metadata.evaluation[0]
    out: dict[str, Any] = {}
    for fold, (test, valid) in folds.items():
        row = {"test_score": test[primary], "validation_score": valid}
        row.update({f"test_{name}": value for name, value in test.items()})
        out[fold] = row
    if len(folds) > 1:
        agg: dict[str, float] = {}
        for key in out[next(iter(folds))]:
            values = np.array([out[f][key] for f in folds], dtype=np.float64)
            agg[f"{key}_mean"] = float(np.mean(values))
            agg[f"{key}_std"] = float(np.std(values, ddof=1))
        out["aggregated_scores"] = agg
    maximize = scores.HEAR_SCORE_DIRECTIONS[primary]
    out["hparams"] = {"predictor": predictor, "C": 1.0}
    out["postprocessing"] = []
    out["score_mode"] = "max" if maximize else "min"
    out["embedding_path"] = task.name
    return out


def _dumps(obj: Any) -> bytes:
    """Sorted keys, indent 4; NaN written as heareval writes it (``NaN``)."""
    return (json.dumps(obj, sort_keys=True, indent=4, allow_nan=True) + "\n").encode()


def run_hear(
    model: str,
    tasks_dir: Path,
    names: tuple[str, ...],
    predictor: str,
    out: Path,
    *,
    device: str = "cpu",
) -> list[HearTaskResult]:
    """The command (module docstring); every task is checked before the model is loaded."""
    if predictor not in PREDICTORS:
        raise UserError(
            f"is {predictor!r}; expected one of {', '.join(PREDICTORS)}", key="--predictor"
        )
    tasks = [read_task(p) for p in find_tasks(tasks_dir, names)]
    for task in tasks:
        _check_task(task, predictor)
    spec = resolve_spec(model, load_registry([]))
    if spec.format != "hear":
        raise UserError("expected a HEAR module (hear:MODULE[:WEIGHTS]) for now", key=model)
    encoder = load_user(spec, device).encoder
    rate = int(encoder.sample_rate)
    for task in tasks:  # every task's audio is there before anything is written
        check_task_audio(task, rate)
    # Every clip of every task is decoded (its rate checked) and scored before the first
    # file is written: a bad clip in a later task leaves OUT as it was.
    done = []
    for task in tasks:
        emb = embed_task(encoder, task, rate)
        folds = {
            "|".join(s["test"]): _linear_fold(task, emb, s) for s in data_splits(task.metadata)
        }
        done.append((task, emb, folds))
    results = []
    for task, emb, folds in done:
        folder = out / task.name
        write_embeddings(task, folder, emb)
        atomic_write_bytes(
            folder / PREDICTED_SCORES, _dumps(_predicted_scores(task, folds, predictor))
        )
        results.append(HearTaskResult(task.name, folder, {k: v[0] for k, v in folds.items()}))
    return results


def format_results(results: list[HearTaskResult]) -> list[str]:
    """One line per task and test split: each score with 4 decimals (NaN as ``nan``).

    >>> format_results([HearTaskResult("words", Path("o"), {"test": {"top1_acc": 0.5}})])
    ['words  test  top1_acc 0.5000']
    """
    lines = []
    for r in results:
        for fold, values in r.scores.items():
            parts = [f"{k} {'nan' if math.isnan(v) else f'{v:.4f}'}" for k, v in values.items()]
            lines.append(f"{r.task}  {fold}  " + "  ".join(parts))
    return lines

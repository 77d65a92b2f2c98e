"""A ``hear`` cell scored from a HEAR submission's saved predictions, or trained on its saved
embeddings, without its model.

A cell with ``predictions = "DIR"`` (:mod:`audiorepro.runner.kinds.hear.spec`) names the folder
heareval 2021.1.3 wrote for one task (``embeddings/<module>/<task folder>/`` after its
predictor ran): for each of heareval's data splits (:func:`~audiorepro.formats.hear.data_splits`)
its ``<test split>.predictions.pkl`` (:mod:`audiorepro.formats.hear_predictions`, read without
unpickling code) gives the test rows' class scores and targets, or an event task's predicted
events. The kit scores them with heareval's scores (:mod:`audiorepro.metrics.hear`; events
against the task's own split file), the independent twin again (parity), and the published
row gets PASS/FAIL as any cell's does. The targets are checked against the task: a scene
split's rows must hold the task's labels of that split, row by row in heareval's order (its
shuffle of the split's files), and an event split's
predicted files must be files of that split; a folder saved for another task is one line.

What is not in the saved files is not invented: the validation score (heareval keeps it only
in its own ``test.predicted-scores.json``, which is what is being checked) is recorded as
null, the embedding size is read from ``<test split>.embedding-dimensions.json`` where heareval
wrote it (else 0), and the saved files' SHA-256 stand where a model's weights would.

A cell with ``embeddings = "DIR"`` names the folder heareval's embedding runner wrote for one
task (the same ``embeddings/<module>/<task folder>/``): its per-file
``<split>/<file>.embedding.npy`` (and an event task's ``.timestamps.json``) are read and
checked (:func:`read_saved_embeddings`) and given to the cell's predictor exactly as the
model's embeddings would be, so the scores equal a run of the model that wrote them; one
SHA-256 over the files read stands where the model's weights would.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import parse_json, read_text
from audiorepro.formats.hear import HearTask, data_splits
from audiorepro.formats.hear_embeddings import read_embeddings, row_order
from audiorepro.formats.hear_predictions import SavedPredictions, predictions_file, read_predictions
from audiorepro.runner.kinds.hear.frames import _event_score, _twin_score

Score = Callable[[Any, Any], float]
ScoreTables = tuple[Mapping[str, Score], Mapping[str, Score]]

__all__ = ["SavedEmbeddings", "SavedScores", "read_saved_embeddings", "score_saved"]


def _check_scene(
    task: HearTask, saved: SavedPredictions, test: tuple[str, ...], path: Path
) -> None:
    want = Counter(
        label for s in test for name in task.files(s) for label in task.scene_labels[s][name]
    )
    if saved.target.shape[1] != len(task.vocabulary):
        raise UserError(
            f"has {saved.target.shape[1]} label columns; expected {len(task.vocabulary)} "
            f"(task {task.name})",
            source=path,
            key="target",
        )
    got = Counter({task.vocabulary[j]: int(n) for j, n in enumerate(saved.target.sum(axis=0)) if n})
    if got != want:
        raise UserError(
            f"holds other labels than the task's {'|'.join(test)} split (e.g. "
            f"{sorted((got - want) or (want - got))[0]!r}); expected heareval's predictions of "
            f"task {task.name}",
            source=path,
            key="target",
        )
    _check_rows(task, saved, test, path)


def _check_rows(task: HearTask, saved: SavedPredictions, test: tuple[str, ...], path: Path) -> None:
    """Row by row: heareval's test rows are the split's files in the order of its stacked
    embeddings (its shuffle, :func:`row_order`; not shuffled at test time), so each target row
    must hold its file's labels. Counts alone let one fold's file stand for another's (folds
    with the same labels, count for count)."""
    order, index = row_order(task), {label: j for j, label in enumerate(task.vocabulary)}
    rows = [(s, name) for s in test for name in order[s]]
    for i, (s, name) in enumerate(rows):
        want = {index[label] for label in task.scene_labels[s][name]}
        got = {int(j) for j in np.flatnonzero(saved.target[i])}
        if got != want:
            raise UserError(
                f"row {i} holds {sorted(task.vocabulary[j] for j in got)}; expected the labels "
                f"of {s}/{name}, {sorted(task.vocabulary[j] for j in want)} (heareval's test rows "
                f"follow its shuffle of the {'|'.join(test)} split's files)",
                source=path,
                key="target",
            )


def _check_events(
    task: HearTask, saved: SavedPredictions, test: tuple[str, ...], path: Path
) -> None:
    files = {name for s in test for name in task.files(s)}
    assert saved.events is not None
    extra = sorted(set(saved.events) - files)
    if extra:
        raise UserError(
            f"names {extra[0]!r}, not a file of the task's {'|'.join(test)} split",
            source=path,
            key="predicted_events",
        )


def _split_scores(
    task: HearTask, saved: SavedPredictions, test: tuple[str, ...], tables: ScoreTables
) -> tuple[dict[str, float], dict[str, float]]:
    names = task.metadata.evaluation
    if saved.events is not None:
        # heareval scores only the files it has predictions for (docs/hear.md): so do we
        events = {name: saved.events.get(name, []) for s in test for name in task.files(s)}
        ours = {n: _event_score(n, events, task, test) for n in names}
        return ours, {n: _twin_score(n, events, task, test) for n in names}
    scene, twin = tables
    ours = {n: scene[n](saved.prediction, saved.target) for n in names}
    return ours, {n: twin[n](saved.prediction, saved.target) for n in names}


def _embedding_size(folder: Path, test: tuple[str, ...]) -> int:
    path = folder / f"{test[0]}.embedding-dimensions.json"
    if not path.is_file():
        return 0
    dims = parse_json(read_text(path, what="heareval's embedding dimensions"), source=path)
    if not (isinstance(dims, list) and len(dims) == 2 and isinstance(dims[1], int)):
        raise UserError(f"is {dims!r}; expected [rows, dim]", source=path)
    return int(dims[1])


@dataclass(frozen=True)
class SavedScores:
    """A task's scores from heareval's saved predictions."""

    scores: dict[str, dict[str, float]]  #: test split (or fold) -> score name -> value
    twin_scores: dict[str, dict[str, float]]  #: the same by the independent twin
    saved_sha256: dict[str, str]  #: each predictions file's SHA-256
    embedding_size: int  #: from heareval's embedding-dimensions file, else 0


def score_saved(task: HearTask, folder: Path, tables: ScoreTables) -> SavedScores:
    """Every data split's saved predictions in ``folder``, checked against the task and
    scored (module docstring); ``tables`` the scene scores and their twins by name."""
    event = task.metadata.embedding_type == "event"
    scores: dict[str, dict[str, float]] = {}
    twins: dict[str, dict[str, float]] = {}
    hashes: dict[str, str] = {}
    for split in data_splits(task.metadata):
        test = split["test"]
        path = predictions_file(folder, test)
        saved = read_predictions(path, event)
        (_check_events if event else _check_scene)(task, saved, test, path)
        key = "|".join(test)
        scores[key], twins[key] = _split_scores(task, saved, test, tables)
        hashes[path.name] = sha256_file(path)
    size = _embedding_size(folder, data_splits(task.metadata)[0]["test"])
    return SavedScores(scores, twins, hashes, size)


@dataclass(frozen=True)
class SavedEmbeddings:
    """A task's embeddings as a submission saved them in heareval's layout, read and checked
    (:func:`~audiorepro.formats.hear_embeddings.read_embeddings`), for the cell's predictor."""

    embeddings: dict[str, dict[str, Any]]  #: split -> file -> float32 embedding
    timestamps: dict[str, dict[str, Any]] | None  #: event tasks: split -> file -> ms
    #: one SHA-256 over every file read (each file's path and SHA-256, sorted): what diff
    #: names when the submission's embeddings change
    sha256: str


def read_saved_embeddings(task: HearTask, folder: Path) -> SavedEmbeddings:
    """The per-file embeddings (and an event task's timestamps) of every split of ``task``
    in ``folder``, heareval's ``E/<module>/<task folder>``: a malformed folder is one line
    naming the file and what was expected."""
    splits = read_embeddings(task, folder)
    event = task.metadata.embedding_type == "event"
    digest = hashlib.sha256()
    for split, saved in splits.items():
        for name in sorted(saved.files):
            suffixes = (".embedding.npy", ".timestamps.json") if event else (".embedding.npy",)
            for suffix in suffixes:
                rel = f"{split}/{name}{suffix}"
                digest.update(f"{rel}\t{sha256_file(folder / rel)}\n".encode())
    emb = {split: dict(saved.embeddings) for split, saved in splits.items()}
    stamps = {split: dict(saved.timestamps) for split, saved in splits.items()}
    return SavedEmbeddings(emb, stamps if event else None, digest.hexdigest())

"""The work of ``audiorepro linear-probe DUMP --labels CSV`` (its options are
:mod:`audiorepro.cli.linear_probe`, which imports this module when the command runs):
``linear-v1`` leaving one fold out on a dump's clip embeddings.

Its own module, not the linear-probe study kind's: the kind imports a study's whole stack
(verification, published values, the extraction executors, the SciPy twin, the renderer),
seconds that the one-line command does not use (issue 48: at most 0.5 s above a minimal
scikit-learn script doing the same fit).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
from typing_extensions import TypedDict

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.formats.probe_inputs import align, read_clip_embeddings, read_labels
from audiorepro.metrics.linear_probe import (
    DefinitionRecord,
    definition_record,
    leave_one_fold_out,
    mean_accuracy,
    probe_splits,
)


class DumpRecord(TypedDict):
    file: str
    sha256: str
    n_clips: int
    n_dims: int
    dtype: str


class LabelsRecord(TypedDict):
    file: str
    sha256: str
    fold_column: str
    classes: list[str]


class FoldRecord(TypedDict):
    fold: str
    n_train: int
    n_test: int
    accuracy: float
    near_ties: int
    min_margin: float


class LinearProbeRecord(TypedDict):
    """``audiorepro.linear-probe/1``: what ``audiorepro linear-probe`` prints or writes."""

    schema: Literal["audiorepro.linear-probe/1"]
    dump: DumpRecord
    labels: LabelsRecord
    probe: DefinitionRecord
    folds: list[FoldRecord]
    mean_accuracy: float


def linear_probe_dump(
    dump: Path, labels_path: Path, *, fold_column: str = "fold", c: float = 1.0
) -> LinearProbeRecord:
    """``audiorepro linear-probe DUMP --labels CSV``: ``linear-v1`` leaving one fold out,
    accuracy per fold and their mean, as an ``audiorepro.linear-probe/1`` record."""
    if not (math.isfinite(c) and c > 0):
        raise UserError(f"is {c!r}; expected a number > 0", key="--C")
    clips = read_clip_embeddings(dump)
    labels = read_labels(labels_path, fold_column=fold_column)
    aligned = align(labels, clips, labels_source=str(labels_path))
    if len(labels.folds) < 2:
        raise UserError(
            f"has {len(labels.folds)} fold(s) in column {fold_column!r}; leave one "
            "fold out needs at least two",
            source=labels_path,
            key=fold_column,
        )
    splits = leave_one_fold_out(aligned.folds, labels.folds)
    for s in splits:
        if np.unique(aligned.y[s.train]).size < 2:
            raise UserError(
                f"leaves fold {s.name!r} one training class; a probe needs two",
                source=labels_path,
                key=fold_column,
            )
    results = probe_splits(clips.embeds, aligned.y, splits, c=c)
    return {
        "schema": "audiorepro.linear-probe/1",
        "dump": {
            "file": dump.name,
            "sha256": sha256_file(dump),
            "n_clips": len(clips.ids),
            "n_dims": int(clips.embeds.shape[1]),
            "dtype": clips.dtype,
        },
        "labels": {
            "file": labels_path.name,
            "sha256": sha256_file(labels_path),
            "fold_column": fold_column,
            "classes": list(labels.classes),
        },
        "probe": definition_record(c, None),
        "folds": [
            {
                "fold": r.split.name,
                "n_train": int(r.split.train.size),
                "n_test": int(r.split.test.size),
                "accuracy": r.accuracy,
                "near_ties": r.near_ties,
                "min_margin": r.min_margin,
            }
            for r in results
        ],
        "mean_accuracy": mean_accuracy(results),
    }

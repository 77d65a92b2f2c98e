"""A HEAR study (``kind = "hear"``): HEAR 2021 tasks run by encoders, and leaderboard rows.

Each ``[[cell]]`` is one encoder over one HEAR task folder (:mod:`audiorepro.formats.hear`);
each ``[[published]]`` table is one leaderboard row: a cell, the values by heareval's score
names (the task's ``evaluation``; a fold task's value is the mean over its folds, as HEAR's
leaderboard reports it), a tolerance and where the row was published::

    schema = "audiorepro.study/1"
    name = "hear-words"
    kind = "hear"

    [[cell]]
    id = "mine-words"
    model = "hear:my_hear_module"          # the encoder, as `audiorepro hear` takes it
    tasks_dir = "hear-tasks"               # a folder of HEAR task folders
    task = "words"                         # a task's folder name or task_name
    predictor = "linear-v1"                # or "hear-mlp-v1" (HEAR's MLP grid)
    # predictions = "embeddings/m/words-v1-full"  # or: score heareval's saved predictions
    # embeddings = "embeddings/m/words-v1-full"   # or: its saved embeddings, this predictor

    [[published]]
    cell = "mine-words"
    tolerance = 0.02
    provenance = "our leaderboard row, 2026-12-01"
    values = { top1_acc = 0.375 }

A tolerance is checked as every kind checks it
(:func:`~audiorepro.specs.published.tolerance_problem`: not covering the score's whole range,
below the value for an unbounded one such as ``d_prime``). The task folder is read when the
study is loaded (a malformed task is one line naming its file and key), so a published score
the task does not compute is refused before any work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from audiorepro.core.errors import UserError
from audiorepro.core.io import slug
from audiorepro.formats.hear import HearTask, find_tasks, read_task
from audiorepro.specs.published import Number, tolerance_problem
from audiorepro.specs.schema import Spec, distinct_file_names, validate

__all__ = [
    "HEAR_PREDICTORS",
    "HearCell",
    "HearPublished",
    "HearStudy",
    "HearStudyFile",
    "parse_hear",
]

#: HEAR 2021's downstream predictor, heareval 2021.1.3's MLP grid (docs/hear.md).
MLP = "hear-mlp-v1"
#: The downstream predictors a HEAR cell can name (the first is the default).
HEAR_PREDICTORS = ("linear-v1", MLP)
#: Output entries a cell's folder (``OUT/<cell id>/``) must not take.
RESERVED_IDS = frozenset({"tables", "cache", "dumps", "probe"})

_Name = Annotated[
    str,
    Field(pattern=r"^[A-Za-z0-9._-]+$", description="letters, digits, '.', '_' or '-'"),
]


class HearCellSpec(Spec):
    """One encoder over one HEAR task."""

    id: _Name = Field(description="a unique cell id (its folder in the output)")
    model: str = Field(
        description="the encoder: hear:MODULE[:WEIGHTS], py:MODULE:FACTORY or a registry entry"
    )
    tasks_dir: str = Field(description="a folder of HEAR task folders (relative to the study)")
    task: str = Field(description="a task's folder name or task_name")
    predictor: Literal["linear-v1", "hear-mlp-v1"] = Field(
        "linear-v1", description="the downstream predictor: linear-v1 or hear-mlp-v1"
    )
    predictions: str | None = Field(
        None,
        description="heareval's output folder for this task (relative to the study): its saved "
        "<test split>.predictions.pkl are scored instead of running the model",
    )
    embeddings: str | None = Field(
        None,
        description="heareval's embeddings folder for this task (relative to the study): its "
        "saved <split>/<file>.embedding.npy are trained on and scored with the cell's predictor "
        "instead of running the model",
    )


class HearPublishedSpec(Spec):
    """One leaderboard row: a cell's scores by heareval's names."""

    cell: str = Field(description="the id of a cell of this study")
    tolerance: float = Field(ge=0, allow_inf_nan=False, description="a tolerance >= 0")
    provenance: str = Field(description="where the row was published")
    values: dict[str, Number] = Field(
        min_length=1, description="heareval score name (the task's evaluation) -> value"
    )


class HearStudyFile(Spec):
    """A HEAR study: encoders over HEAR tasks, and published leaderboard rows."""

    schema_: Literal["audiorepro.study/1"] = Field(alias="schema", description="the format id")
    name: _Name
    title: str | None = Field(None, description="a title")
    kind: Literal["hear"] = Field(description="the study kind")
    cell: list[HearCellSpec] = Field(min_length=1, description="at least one [[cell]]")
    published: list[HearPublishedSpec] = Field(
        default_factory=list, description="a list of [[published]] tables"
    )


@dataclass(frozen=True)
class HearCell:
    id: str
    model: str
    tasks_dir: Path
    task: str
    predictor: str
    #: The task's folder (None when ``tasks_dir`` is missing and the study was read leniently).
    task_path: Path | None
    #: heareval's saved predictions of this task (a submission's folder), scored without the
    #: model; None: the model runs.
    predictions: Path | None = None
    #: heareval's saved embeddings of this task (a submission's folder), given to the cell's
    #: predictor in place of running the model; None: the model runs.
    embeddings: Path | None = None


@dataclass(frozen=True)
class HearPublished:
    cell: str
    tolerance: float
    provenance: str
    values: dict[str, float]


@dataclass(frozen=True)
class HearStudy:
    """A HEAR study, loaded."""

    name: str
    title: str
    source: Path
    cells: tuple[HearCell, ...]
    published: tuple[HearPublished, ...]
    kind: Literal["hear"] = "hear"
    selection: None = None


def _saved_folder(c: HearCellSpec, where: str, source: Path) -> tuple[str, Path] | None:
    """The cell's saved predictions or embeddings folder (at most one of the two): its key
    and path."""
    if c.predictions is not None and c.embeddings is not None:
        raise UserError(
            "is given with predictions; expected one of them: heareval's saved predictions "
            "(scored as they are) or its saved embeddings (given to the cell's predictor)",
            source=source,
            key=f"{where}.embeddings",
        )
    for key, value in (("predictions", c.predictions), ("embeddings", c.embeddings)):
        if value is not None:
            return key, (source.parent / value).resolve()
    return None


def _cell(c: HearCellSpec, i: int, source: Path, strict: bool) -> tuple[HearCell, HearTask | None]:
    where = f"cell[{i}]"
    if c.id in RESERVED_IDS:
        raise UserError(
            f"is {c.id!r}, an output folder of every run; expected another id",
            source=source,
            key=f"{where}.id",
        )
    tasks_dir = (source.parent / c.tasks_dir).resolve()
    saved = _saved_folder(c, where, source)
    preds = saved[1] if saved is not None and saved[0] == "predictions" else None
    embs = saved[1] if saved is not None and saved[0] == "embeddings" else None
    if not tasks_dir.is_dir() and not strict:
        return HearCell(c.id, c.model, tasks_dir, c.task, c.predictor, None, preds, embs), None
    (path,) = find_tasks(tasks_dir, (c.task,), key=f"{source.name}: {where}.task")
    if saved is not None and strict and not saved[1].is_dir():
        raise UserError(
            f"is {getattr(c, saved[0])!r}, not a folder; expected heareval's {saved[0]} "
            "folder of the task",
            source=source,
            key=f"{where}.{saved[0]}",
        )
    cell = HearCell(c.id, c.model, tasks_dir, c.task, c.predictor, path, preds, embs)
    return cell, read_task(path)


def _published(
    p: HearPublishedSpec, i: int, source: Path, tasks: dict[str, HearTask | None]
) -> HearPublished:
    where = f"published[{i}]"
    if p.cell not in tasks:
        raise UserError(
            f"names {p.cell!r}, which is not a cell of this study",
            source=source,
            key=f"{where}.cell",
        )
    task = tasks[p.cell]
    for metric in p.values:
        if task is not None and metric not in task.metadata.evaluation:
            raise UserError(
                f"is not a score of task {task.name}; expected one of its evaluation: "
                + ", ".join(task.metadata.evaluation),
                source=source,
                key=f"{where}.values.{metric}",
            )
    bad = tolerance_problem(dict(p.values), p.tolerance)
    if bad is not None:
        raise UserError(bad[1], source=source, key=f"{where}.{bad[0]}")
    return HearPublished(p.cell, p.tolerance, p.provenance, dict(p.values))


def parse_hear(doc: dict[str, Any], source: Path, strict: bool) -> HearStudy:
    """A HEAR study from its parsed TOML; every task folder read (when ``strict=False``, a
    missing ``tasks_dir`` leaves its cell's values NOT VERIFIED rather than an error)."""
    spec = validate(HearStudyFile, doc, source=str(source))
    cells: list[HearCell] = []
    tasks: dict[str, HearTask | None] = {}
    for i, c in enumerate(spec.cell):
        if c.id in tasks:
            raise UserError(f"repeats cell id {c.id!r}", source=source, key=f"cell[{i}].id")
        cell, tasks[c.id] = _cell(c, i, source, strict)
        cells.append(cell)
    distinct_file_names(
        [(f"cell[{i}].id", slug(c.id)) for i, c in enumerate(spec.cell)],
        source=str(source),
        what="a cell id",
    )
    published = tuple(_published(p, i, source, tasks) for i, p in enumerate(spec.published))
    return HearStudy(
        name=spec.name,
        title=spec.title if spec.title is not None else spec.name,
        source=source,
        cells=tuple(cells),
        published=published,
    )

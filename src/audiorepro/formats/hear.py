"""HEAR 2021 task folders, read as hearpreprocess publishes them and heareval 2021.1.3 reads them.

A task is one folder (HEAR's archives unpack to ``tasks/<task_name>-<version>-<mode>/``)::

    task_metadata.json        the task: how it is embedded, predicted, split and scored
    labelvocabulary.csv       the label vocabulary: a header ``idx,label``, then idx 0..n-1
    <split>.json              the labels of each split's files
    <sample rate>/<split>/    the audio: one mono WAV per file named in <split>.json

``task_metadata.json`` is the task config hearpreprocess validated and wrote (its runner adds
``mode`` and ``splits``). The keys read, as heareval reads them:

- ``task_name`` (str), ``version`` and ``mode`` (str, optional: a task one writes oneself may
  leave them out);
- ``embedding_type``: ``scene`` (one embedding per file) or ``event`` (timestamped frames);
- ``prediction_type``: ``multiclass`` (exactly one label per file) or ``multilabel``;
- ``split_mode``: ``trainvaltest`` (``splits`` holds ``train``, ``valid`` and ``test``) or
  ``presplit_kfold``/``new_split_kfold`` (``splits`` names at least 3 folds; heareval tests on
  each fold in turn, validates on the next in sorted order and trains on the rest);
- ``splits``: the split names (a ``<split>.json`` each);
- ``sample_duration``: seconds every clip was trimmed or padded to, or null (kept as it was);
- ``evaluation``: the names of heareval's scores (:data:`HEAR_SCORES`), the first the one
  model selection uses;
- ``evaluation_params`` (optional): ``event_postprocessing_grid`` and
  ``task_specific_param_grid``, kept as written; ``use_scoring_for_early_stopping`` (optional,
  default true).

Every other key (``download_urls``, ``default_mode``, ``max_task_duration_by_split``, ...) is
pipeline data and is not an error. ``<split>.json`` maps each file name to its labels: a list
of labels for a scene task, a list of events ``{"label", "start", "end"}`` (milliseconds) for an
event task. heareval compares labels as ``str(label)`` after pandas read the vocabulary, so a
vocabulary pandas would read differently from its text (``007`` as 7, ``None`` as NaN) is
refused rather than silently renamed. A malformed task is one line naming the file and the key.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text

__all__ = [
    "HEAR_SCORES",
    "METADATA_FILE",
    "VOCABULARY_FILE",
    "HearEvent",
    "HearTask",
    "HearTaskMetadata",
    "check_task_audio",
    "data_splits",
    "find_tasks",
    "parse_split",
    "parse_task_metadata",
    "parse_vocabulary",
    "read_task",
]

METADATA_FILE = "task_metadata.json"
VOCABULARY_FILE = "labelvocabulary.csv"
#: heareval 2021.1.3's score names (``heareval.score.available_scores``).
HEAR_SCORES = (
    "top1_acc",
    "pitch_acc",
    "chroma_acc",
    "event_onset_200ms_fms",
    "event_onset_50ms_fms",
    "event_onset_offset_50ms_20perc_fms",
    "segment_1s_er",
    "mAP",
    "d_prime",
    "aucroc",
)
EmbeddingType = Literal["scene", "event"]
PredictionType = Literal["multiclass", "multilabel"]
SplitMode = Literal["trainvaltest", "presplit_kfold", "new_split_kfold"]
_KFOLD = ("presplit_kfold", "new_split_kfold")
#: Texts that pandas' read_csv reads as NaN by default (heareval then calls the label "nan").
_PANDAS_NA = frozenset(
    "#N/A,#N/A N/A,#NA,-1.#IND,-1.#QNAN,-NaN,-nan,1.#IND,1.#QNAN,<NA>,N/A,NA,NULL,NaN,None,"
    "n/a,nan,null".split(",")
)
#: Texts a column of which pandas' read_csv reads as booleans (heareval then calls the label
#: ``str(True)``, "True").
_PANDAS_BOOL = {"True": True, "TRUE": True, "true": True, "False": False, "FALSE": False,
                "false": False}  # fmt: skip
_INT = re.compile(r"^[+-]?[0-9]+$")
#: A file name in a split: a plain name, no folder (hearpreprocess forbids slashes).
_FILE = re.compile(r"^[^/\\\x00]+$")


@dataclass(frozen=True)
class HearEvent:
    """One labelled event of an event task's file; ``start`` and ``end`` in milliseconds."""

    label: str
    start: float
    end: float


@dataclass(frozen=True)
class HearTaskMetadata:
    """What ``task_metadata.json`` says about the task (the keys heareval reads)."""

    task_name: str
    version: str | None
    mode: str | None
    embedding_type: EmbeddingType
    prediction_type: PredictionType
    split_mode: SplitMode
    splits: tuple[str, ...]
    sample_duration: float | None
    evaluation: tuple[str, ...]
    use_scoring_for_early_stopping: bool
    evaluation_params: dict[str, Any]


@dataclass(frozen=True)
class HearTask:
    """A task folder: its metadata, vocabulary (index order) and each split's labels.

    ``scene_labels[split][file]`` holds a scene file's labels, ``events[split][file]`` an event
    file's events; files keep the order of ``<split>.json`` (heareval's order too)."""

    path: Path
    metadata: HearTaskMetadata
    vocabulary: tuple[str, ...]
    scene_labels: dict[str, dict[str, tuple[str, ...]]]
    events: dict[str, dict[str, tuple[HearEvent, ...]]]

    @property
    def name(self) -> str:
        return self.path.name

    def files(self, split: str) -> tuple[str, ...]:
        """The files of ``split`` in the order of its ``<split>.json``."""
        table = self.scene_labels if self.metadata.embedding_type == "scene" else self.events
        return tuple(table[split])

    def sample_rates(self) -> tuple[int, ...]:
        """The sample rates the folder holds audio at (its ``<rate>/`` folders), ascending."""
        return tuple(
            sorted(int(p.name) for p in self.path.iterdir() if p.is_dir() and p.name.isdigit())
        )

    def audio_dir(self, sample_rate: int, split: str) -> Path:
        return self.path / str(sample_rate) / split


def _need(
    data: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str, src: Path
) -> Any:
    if key not in data:
        raise UserError(f"is missing (expected {what})", source=src, key=key)
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        raise UserError(f"expected {what}, got {value!r}", source=src, key=key)
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _choice(data: dict[str, Any], key: str, choices: tuple[str, ...], src: Path) -> str:
    expected = " or ".join(repr(c) for c in choices)
    value = _need(data, key, str, expected, src)
    if value not in choices:
        raise UserError(f"expected {expected}, got {value!r}", source=src, key=key)
    return str(value)


def _strings(data: dict[str, Any], key: str, what: str, src: Path) -> tuple[str, ...]:
    value = _need(data, key, list, what, src)
    if not value or not all(isinstance(v, str) and v for v in value):
        raise UserError(f"expected {what}, got {value!r}", source=src, key=key)
    if len(set(value)) != len(value):
        twice = next(v for i, v in enumerate(value) if v in value[:i])
        raise UserError(f"names {twice!r} twice; expected {what}, each once", source=src, key=key)
    return tuple(value)


def _splits(data: dict[str, Any], split_mode: str, src: Path) -> tuple[str, ...]:
    splits = _strings(data, "splits", "a list of split names", src)
    bad = [s for s in splits if not _FILE.match(s) or s in (".", "..")]
    if bad:
        raise UserError(f"expected plain split names, got {bad[0]!r}", source=src, key="splits")
    if split_mode == "trainvaltest" and not {"train", "valid", "test"} <= set(splits):
        raise UserError(
            "expected 'train', 'valid' and 'test' for split_mode 'trainvaltest', "
            f"got {list(splits)}",
            source=src,
            key="splits",
        )
    if split_mode in _KFOLD and len(splits) < 3:
        raise UserError(
            f"expected at least 3 folds for split_mode {split_mode!r} (heareval tests on one, "
            f"validates on the next and trains on the rest), got {list(splits)}",
            source=src,
            key="splits",
        )
    return splits


def parse_task_metadata(data: Any, *, source: str | Path) -> HearTaskMetadata:
    """Check and read a parsed ``task_metadata.json`` (see the module docstring).

    >>> m = parse_task_metadata({"task_name": "words", "embedding_type": "scene",
    ...     "prediction_type": "multiclass", "split_mode": "trainvaltest",
    ...     "splits": ["train", "valid", "test"], "sample_duration": 1.0,
    ...     "evaluation": ["top1_acc"], "download_urls": []}, source="task_metadata.json")
    >>> m.embedding_type, m.splits, m.evaluation
    ('scene', ('train', 'valid', 'test'), ('top1_acc',))
    >>> try:
    ...     parse_task_metadata({"task_name": "w", "embedding_type": "frame"}, source="t.json")
    ... except UserError as exc:
    ...     print(exc)
    t.json: key 'embedding_type': expected 'scene' or 'event', got 'frame'
    """
    src = Path(source)
    if not isinstance(data, dict):
        raise UserError(f"expected a JSON object, got {type(data).__name__}", source=src)
    task_name = _need(data, "task_name", str, "the task's name (a string)", src)
    if not task_name.strip():  # heareval names the task's outputs by it; a study matches it
        raise UserError(
            f"is {task_name!r}; expected the task's name (a string that is not empty)",
            source=src,
            key="task_name",
        )
    version = _optional_str(data, "version", src)
    mode = _optional_str(data, "mode", src)
    embedding_type = _choice(data, "embedding_type", ("scene", "event"), src)
    prediction_type = _choice(data, "prediction_type", ("multiclass", "multilabel"), src)
    split_mode = _choice(data, "split_mode", ("trainvaltest", *_KFOLD), src)
    splits = _splits(data, split_mode, src)
    duration = _need(data, "sample_duration", (int, float, type(None)), "seconds or null", src)
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise UserError(
            f"expected seconds > 0 or null, got {duration!r}", source=src, key="sample_duration"
        )
    evaluation = _strings(data, "evaluation", "a list of heareval score names", src)
    unknown = [e for e in evaluation if e not in HEAR_SCORES]
    if unknown:
        raise UserError(
            f"names a score heareval 2021.1.3 does not have: {unknown[0]!r} "
            f"(expected one of {', '.join(HEAR_SCORES)})",
            source=src,
            key="evaluation",
        )
    early = data.get("use_scoring_for_early_stopping", True)
    if not isinstance(early, bool):
        raise UserError(
            f"expected true or false, got {early!r}",
            source=src,
            key="use_scoring_for_early_stopping",
        )
    params = data.get("evaluation_params", {})
    if not isinstance(params, dict):
        raise UserError(
            f"expected a JSON object, got {params!r}", source=src, key="evaluation_params"
        )
    return HearTaskMetadata(
        task_name=task_name,
        version=version,
        mode=mode,
        embedding_type=embedding_type,  # type: ignore[arg-type]
        prediction_type=prediction_type,  # type: ignore[arg-type]
        split_mode=split_mode,  # type: ignore[arg-type]
        splits=splits,
        sample_duration=None if duration is None else float(duration),
        evaluation=evaluation,
        use_scoring_for_early_stopping=early,
        evaluation_params=params,
    )


def _optional_str(data: dict[str, Any], key: str, src: Path) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise UserError(f"expected a string, got {value!r}", source=src, key=key)
    return value


def _pandas_problem(labels: list[str]) -> str | None:
    """Why pandas (which heareval reads the vocabulary with) would not keep a label's text."""
    for label in labels:
        if label in _PANDAS_NA:  # pandas keeps blanks around a label: only exact NA texts
            return f"label {label!r}: pandas reads it as a missing value"
    if all(label in _PANDAS_BOOL for label in labels):
        bad = [label for label in labels if label not in ("True", "False")]
        if bad:
            return (
                f"label {bad[0]!r}: pandas reads an all-true/false column as booleans "
                f"({_PANDAS_BOOL[bad[0]]})"
            )
        return None
    if all(_INT.match(label) for label in labels):
        bad = [label for label in labels if str(int(label)) != label]
        if bad:
            return (
                f"label {bad[0]!r}: pandas reads an all-integer column as numbers ({int(bad[0])})"
            )
        return None
    try:
        numbers = [float(label) for label in labels]
    except ValueError:
        return None  # a column of text: kept as written
    bad = [label for label, x in zip(labels, numbers, strict=True) if str(x) != label]
    if bad:
        return f"label {bad[0]!r}: pandas reads an all-number column as floats ({float(bad[0])})"
    return None


def parse_vocabulary(text: str, *, source: str | Path) -> tuple[str, ...]:
    """Read ``labelvocabulary.csv``: a header ``idx,label``, then one row per label with idx
    0..n-1 (in any row order); returns the labels in index order.

    >>> parse_vocabulary("idx,label\\n0,down\\n1,up\\n", source="labelvocabulary.csv")
    ('down', 'up')
    >>> try:
    ...     parse_vocabulary("idx,label\\n0,007\\n1,8\\n", source="v.csv")
    ... except UserError as exc:
    ...     print(exc)
    v.csv: key 'label': label '007': pandas reads an all-integer column as numbers (7)
    """
    # heareval reads the file with pandas, which drops a UTF-8 byte-order mark before the
    # header (a spreadsheet's "CSV UTF-8" writes one)
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"))))
    if not rows or [c.strip() for c in rows[0]] != ["idx", "label"]:
        got = rows[0] if rows else "nothing"
        raise UserError(
            f"expected the header 'idx,label', got {got!r}", source=source, key="header"
        )
    by_idx: dict[int, str] = {}
    for lineno, row in enumerate(rows[1:], 2):
        if len(row) != 2 or not _INT.match(row[0].strip()):
            raise UserError(
                f"expected 'idx,label', got {row!r}", source=source, key=f"line {lineno}"
            )
        idx = int(row[0])
        if idx in by_idx:
            raise UserError(f"index {idx} appears twice", source=source, key=f"line {lineno}")
        by_idx[idx] = row[1]
    if not by_idx or sorted(by_idx) != list(range(len(by_idx))):
        raise UserError(
            f"expected indices 0..{len(by_idx) - 1}, each once, got {sorted(by_idx)}",
            source=source,
            key="idx",
        )
    labels = [by_idx[i] for i in range(len(by_idx))]
    problem = _pandas_problem(labels)
    if problem is not None:
        raise UserError(problem, source=source, key="label")
    if len(set(labels)) != len(labels):
        raise UserError("names a label twice", source=source, key="label")
    return tuple(labels)


def _label(value: Any, vocabulary: frozenset[str], src: Path, key: str) -> str:
    """A label as heareval compares it (``str(label)``), checked against the vocabulary."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UserError(
            f"expected a label (a string or number), got {value!r}", source=src, key=key
        )
    label = str(value)
    if label not in vocabulary:
        raise UserError(f"label {label!r} is not in {VOCABULARY_FILE}", source=src, key=key)
    return label


def _ms(event: dict[str, Any], field: str, src: Path, key: str) -> float:
    value = event.get(field)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UserError(
            f"expected milliseconds (a number), got {value!r}", source=src, key=f"{key}.{field}"
        )
    if value < 0:
        raise UserError(
            f"expected milliseconds >= 0, got {value!r}", source=src, key=f"{key}.{field}"
        )
    return float(value)


def _event(value: Any, vocabulary: frozenset[str], src: Path, key: str) -> HearEvent:
    if not isinstance(value, dict):
        raise UserError(
            f"expected an event {{label, start, end}}, got {value!r}", source=src, key=key
        )
    if "label" not in value:
        raise UserError("is missing (expected the event's label)", source=src, key=f"{key}.label")
    label = _label(value["label"], vocabulary, src, f"{key}.label")
    start, end = _ms(value, "start", src, key), _ms(value, "end", src, key)
    if end < start:
        raise UserError(f"ends ({end} ms) before it starts ({start} ms)", source=src, key=key)
    return HearEvent(label, start, end)


def parse_split(
    data: Any, meta: HearTaskMetadata, vocabulary: tuple[str, ...], *, source: str | Path
) -> dict[str, tuple[str, ...]] | dict[str, tuple[HearEvent, ...]]:
    """Check and read a parsed ``<split>.json``: file name -> labels (scene) or events (event).

    >>> meta = parse_task_metadata({"task_name": "w", "embedding_type": "scene",
    ...     "prediction_type": "multiclass", "split_mode": "trainvaltest",
    ...     "splits": ["train", "valid", "test"], "sample_duration": 1.0,
    ...     "evaluation": ["top1_acc"]}, source="m.json")
    >>> parse_split({"a.wav": ["up"]}, meta, ("down", "up"), source="train.json")
    {'a.wav': ('up',)}
    >>> try:
    ...     parse_split({"a.wav": ["up", "down"]}, meta, ("down", "up"), source="train.json")
    ... except UserError as exc:
    ...     print(exc)
    train.json: key 'a.wav': expected exactly one label for a multiclass task, got 2
    """
    src = Path(source)
    if not isinstance(data, dict) or not data:
        raise UserError("expected a JSON object of file name -> labels, not empty", source=src)
    vocab = frozenset(vocabulary)
    scene: dict[str, tuple[str, ...]] = {}
    events: dict[str, tuple[HearEvent, ...]] = {}
    for name, value in data.items():
        if not _FILE.match(name) or name in (".", ".."):
            raise UserError("expected a plain file name (no folder)", source=src, key=name)
        if not isinstance(value, list):
            raise UserError(f"expected a list, got {value!r}", source=src, key=name)
        if meta.embedding_type == "event":
            events[name] = tuple(_event(v, vocab, src, f"{name}[{i}]") for i, v in enumerate(value))
            continue
        labels = tuple(_label(v, vocab, src, name) for v in value)
        if meta.prediction_type == "multiclass" and len(labels) != 1:
            raise UserError(
                f"expected exactly one label for a multiclass task, got {len(labels)}",
                source=src,
                key=name,
            )
        scene[name] = labels
    return events if meta.embedding_type == "event" else scene


def read_task(path: str | Path) -> HearTask:
    """Read the task folder at ``path`` (metadata, vocabulary, every split's labels); the audio
    is checked separately (:func:`check_task_audio`), since an archive may hold one rate."""
    folder = Path(path)
    if not folder.is_dir():
        raise UserError("is not a folder (expected a HEAR task folder)", source=folder)
    meta_path = folder / METADATA_FILE
    if not meta_path.is_file():
        raise UserError(f"has no {METADATA_FILE} (expected a HEAR task folder)", source=folder)
    meta = parse_task_metadata(
        parse_json(read_text(meta_path, what="a HEAR task_metadata.json"), source=meta_path),
        source=meta_path,
    )
    vocab_path = folder / VOCABULARY_FILE
    if not vocab_path.is_file():
        raise UserError(f"has no {VOCABULARY_FILE} (expected idx,label rows)", source=folder)
    vocabulary = parse_vocabulary(
        read_text(vocab_path, what="a label vocabulary"), source=vocab_path
    )
    scene: dict[str, dict[str, tuple[str, ...]]] = {}
    events: dict[str, dict[str, tuple[HearEvent, ...]]] = {}
    seen: dict[str, str] = {}
    for split in meta.splits:
        split_path = folder / f"{split}.json"
        if not split_path.is_file():
            raise UserError(f"is missing: {METADATA_FILE} names split {split!r}", source=split_path)
        text = read_text(split_path, what="a HEAR split label file")
        table = parse_split(
            parse_json(text, source=split_path), meta, vocabulary, source=split_path
        )
        for name in table:
            if name in seen:
                raise UserError(
                    f"is also in split {seen[name]!r} (a file is in one split)",
                    source=split_path,
                    key=name,
                )
            seen[name] = split
        if meta.embedding_type == "event":
            events[split] = table  # type: ignore[assignment]
        else:
            scene[split] = table  # type: ignore[assignment]
    return HearTask(folder, meta, vocabulary, scene, events)


def check_task_audio(task: HearTask, sample_rate: int) -> None:
    """Every file of every split is a regular file under ``<sample_rate>/<split>/``."""
    rate_dir = task.path / str(sample_rate)
    if not rate_dir.is_dir():
        have = ", ".join(str(r) for r in task.sample_rates()) or "none"
        raise UserError(
            f"has no audio at {sample_rate} Hz (expected the folder {sample_rate}/; "
            f"rates here: {have})",
            source=task.path,
        )
    for split in task.metadata.splits:
        for name in task.files(split):
            if not (task.audio_dir(sample_rate, split) / name).is_file():
                raise UserError(
                    f"is missing: {split}.json names it",
                    source=task.audio_dir(sample_rate, split) / name,
                )


def find_tasks(
    tasks_dir: str | Path, names: tuple[str, ...] = (), *, key: str = "--task"
) -> tuple[Path, ...]:
    """The task folders under ``tasks_dir`` (those holding a task_metadata.json), sorted; with
    ``names``, those folders (by folder name or ``task_name``), each of which must exist (a
    missing one is one line naming ``key``: the option or the study's key that named it)."""
    root = Path(tasks_dir)
    if not root.is_dir():
        raise UserError("is not a folder (expected a folder of HEAR tasks)", source=root)
    found = sorted(p for p in root.iterdir() if (p / METADATA_FILE).is_file())
    if not names:
        if not found:
            raise UserError(f"holds no HEAR task (no */{METADATA_FILE})", source=root)
        return tuple(found)
    chosen = []
    for name in names:
        if not name.strip():  # "" would match any folder named "-..." by its first part
            raise UserError(
                f"is {name!r}; expected a task's folder name or task_name (not empty)",
                source=root,
                key=key,
            )
        match = [p for p in found if p.name == name or p.name.split("-")[0] == name]
        if len(match) != 1:
            have = ", ".join(p.name for p in found) or "none"
            how = "no" if not match else "more than one"
            raise UserError(f"has {how} task {name!r} (tasks here: {have})", source=root, key=key)
        if match[0] in chosen:  # one run per task: a second would only repeat its cell
            raise UserError(
                f"names task {match[0].name} twice (as {name!r}); expected each task once",
                source=root,
                key=key,
            )
        chosen.append(match[0])
    return tuple(chosen)


def data_splits(meta: HearTaskMetadata) -> tuple[dict[str, tuple[str, ...]], ...]:
    """heareval's train/valid/test splits for the task (``get_splits_from_metadata``): one for
    ``trainvaltest``; for folds, one per fold in sorted order: test on fold i, validate on fold
    i+1 (cyclically), train on the others.

    >>> meta = parse_task_metadata({"task_name": "w", "embedding_type": "scene",
    ...     "prediction_type": "multilabel", "split_mode": "presplit_kfold",
    ...     "splits": ["fold01", "fold00", "fold02"], "sample_duration": 1.0,
    ...     "evaluation": ["mAP"]}, source="m.json")
    >>> for s in data_splits(meta): print(s)
    {'train': ('fold02',), 'valid': ('fold01',), 'test': ('fold00',)}
    {'train': ('fold00',), 'valid': ('fold02',), 'test': ('fold01',)}
    {'train': ('fold01',), 'valid': ('fold00',), 'test': ('fold02',)}
    """
    if meta.split_mode == "trainvaltest":
        return ({"train": ("train",), "valid": ("valid",), "test": ("test",)},)
    folds = sorted(meta.splits)
    out = []
    for i, test in enumerate(folds):
        valid = folds[(i + 1) % len(folds)]
        train = tuple(f for f in folds if f not in (test, valid))
        out.append({"train": train, "valid": (valid,), "test": (test,)})
    return tuple(out)

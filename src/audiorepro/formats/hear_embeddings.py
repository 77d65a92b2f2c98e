"""heareval 2021.1.3's embeddings folder for one task, read and written as its runner does.

``python -m heareval.embeddings.runner MODULE --tasks-dir T --embeddings-dir E`` writes, for
each task, ``E/<module name>/<task folder>/`` (heareval's ``task_embeddings``)::

    task_metadata.json, labelvocabulary.csv, <split>.json     copies of the task's files
    <split>/<file>.embedding.npy        np.save of the file's embedding: float32, shape (dim,)
                                        for a scene task, (frames, dim) for an event task
    <split>/<file>.target-labels.json   scene: the file's labels as <split>.json has them;
                                        event: per frame, the labels of the events active at
                                        its timestamp (start <= t < end + 0.0001 ms, heareval's
                                        interval tree), ``indent=4``
    <split>/<file>.timestamps.json      event only: the frames' timestamps (ms), a JSON list
    <split>.embedding-dimensions.json   [rows, dim] of the split's stacked embeddings
    <split>.embeddings.npy              the stacked rows, raw float32 (a numpy memmap, not the
                                        .npy format), files in the order of
                                        ``random.Random(0).shuffle`` of <split>.json's files,
                                        one generator for the task's splits in metadata order
    <split>.target-labels.pkl           the rows' labels in the same order (a pickle)
    <split>.filename-timestamps.json    event only: ["<split>/<file>", timestamp] per row

heareval's predictor reads the four split-level files; a submission's saved embeddings are the
per-file ones. :func:`write_embeddings` writes all of them, byte for byte as heareval does,
except two things. ``filename-timestamps.json`` names each row's file ``<split>/<file>``, where
heareval writes its output folder's path before it: the kit writes a run into a staging folder
that is renamed at the end, so that path would be gone and new in every run; heareval's
predictor reads only the name's last part (``Path(filename).name``). And one order: where
events overlap, heareval lists a frame's labels in the order of a Python set (its interval
tree's query), this module in the order of the events in <split>.json; the predictor reads them
as a set. :func:`read_embeddings` reads the per-file ones (never the
pickle), checking what heareval asserts: float32, one shape per task, as many frames as
timestamps and labels.
"""

from __future__ import annotations

import json
import pickle
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.formats.hear import METADATA_FILE, VOCABULARY_FILE, HearEvent, HearTask

__all__ = [
    "HearSplitEmbeddings",
    "frame_labels",
    "read_embeddings",
    "row_order",
    "write_embeddings",
]

#: heareval adds this to an event's end (ms) so that a frame at the very end still has it.
END_EPSILON_MS = 0.0001


@dataclass(frozen=True)
class HearSplitEmbeddings:
    """One split of an embeddings folder, files in the order of ``<split>.json``."""

    files: tuple[str, ...]
    embeddings: dict[str, npt.NDArray[np.float32]]
    timestamps: dict[str, npt.NDArray[np.float64]]  # event tasks only (ms)
    target_labels: dict[str, Any]  # as heareval wrote them (see the module docstring)


def frame_labels(events: tuple[HearEvent, ...], timestamps: Any) -> list[list[str]]:
    """The labels active at each timestamp (ms): ``start <= t < end + 0.0001``.

    >>> frame_labels((HearEvent("beep", 100.0, 200.0),), [50.0, 100.0, 200.0, 200.5])
    [[], ['beep'], ['beep'], []]
    """
    out = []
    for t in timestamps:
        time = float(t)
        out.append([e.label for e in events if e.start <= time < e.end + END_EPSILON_MS])
    return out


def _raw_split(task: HearTask, split: str) -> dict[str, Any]:
    """``<split>.json`` as written (labels keep their JSON types, as heareval copies them)."""
    path = task.path / f"{split}.json"
    data: dict[str, Any] = parse_json(read_text(path, what="a HEAR split label file"), source=path)
    return data


def _check_embedding(array: Any, kind: str, where: str) -> npt.NDArray[np.floating[Any]]:
    """A file's embedding as given: float32, or float64/float16 as a module may return them
    (heareval's runner saves them as they are and its ``memmap_embeddings`` casts every file
    with ``astype(np.float32)``, so the stacked rows are float32 either way)."""
    arr = np.asarray(array)
    ndim = 1 if kind == "scene" else 2
    floats = (np.float16, np.float32, np.float64)
    if arr.dtype not in floats or arr.ndim != ndim or 0 in arr.shape:
        raise UserError(
            f"expected a float32 (or float64, float16) embedding of {ndim} dimension(s) for a "
            f"{kind} task, got {arr.dtype} of shape {arr.shape}",
            source=where,
        )
    return arr


def row_order(task: HearTask) -> dict[str, list[str]]:
    """Each split's files in the order of its stacked rows (``<split>.embeddings.npy``):
    ``random.Random(0).shuffle`` of the split's files, one generator for the task's splits in
    metadata order (heareval's ``memmap_embeddings``; its predictor trains in this order)."""
    prng = random.Random()
    prng.seed(0)
    out: dict[str, list[str]] = {}
    for split in task.metadata.splits:
        names = list(task.files(split))
        prng.shuffle(names)
        out[split] = names
    return out


def write_embeddings(
    task: HearTask,
    out: str | Path,
    embeddings: dict[str, dict[str, Any]],
    timestamps: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Write ``out`` (heareval's ``E/<module>/<task folder>``) from each split's per-file
    embeddings (and, for an event task, per-file timestamps in ms), as heareval does."""
    root = Path(out)
    kind = task.metadata.embedding_type
    if kind == "event" and timestamps is None:
        raise UserError("an event task needs timestamps for every file", source=root)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(task.path / METADATA_FILE, root)
    shutil.copy(task.path / VOCABULARY_FILE, root)
    order = row_order(task)
    for split in task.metadata.splits:
        shutil.copy(task.path / f"{split}.json", root)
        raw = _raw_split(task, split)
        outdir = root / split
        outdir.mkdir(exist_ok=True)
        for name in raw:
            if name not in embeddings.get(split, {}):
                raise UserError(f"has no embedding for {split}/{name}", source=root)
            emb = _check_embedding(embeddings[split][name], kind, f"{split}/{name}")
            np.save(f"{outdir / name}.embedding.npy", emb)
            if kind == "scene":
                (outdir / f"{name}.target-labels.json").write_text(json.dumps(raw[name]))
                continue
            stamps = np.asarray(timestamps[split][name])  # type: ignore[index]
            if stamps.ndim != 1 or len(stamps) != emb.shape[0]:
                raise UserError(
                    f"expected {emb.shape[0]} timestamps (one per frame), got shape {stamps.shape}",
                    source=f"{split}/{name}",
                )
            labels = _raw_frame_labels(raw[name], stamps)
            (outdir / f"{name}.timestamps.json").write_text(json.dumps(stamps.tolist()))
            (outdir / f"{name}.target-labels.json").write_text(json.dumps(labels, indent=4))
        _write_split_rows(root, split, [outdir / f"{n}.embedding.npy" for n in order[split]], kind)


def _raw_frame_labels(events: list[dict[str, Any]], stamps: npt.NDArray[Any]) -> list[list[Any]]:
    """:func:`frame_labels` keeping each label's JSON value (heareval writes them as given)."""
    return [
        [e["label"] for e in events if e["start"] <= float(t) < e["end"] + END_EPSILON_MS]
        for t in stamps
    ]


def _write_split_rows(root: Path, split: str, files: list[Path], kind: str) -> None:
    """heareval's ``memmap_embeddings``: the split's rows, files in :func:`row_order`."""
    arrays = [np.load(f, allow_pickle=False) for f in files]
    rows = sum(1 if kind == "scene" else a.shape[0] for a in arrays)
    dim = arrays[-1].shape[-1]
    (root / f"{split}.embedding-dimensions.json").write_text(json.dumps((rows, dim)))
    stacked = np.concatenate([a.reshape(-1, a.shape[-1]) for a in arrays]).astype(np.float32)
    if stacked.shape != (rows, dim):
        raise UserError(f"embeddings of different sizes in split {split!r}", source=root)
    (root / f"{split}.embeddings.npy").write_bytes(stacked.tobytes())
    labels: list[Any] = []
    filename_timestamps: list[tuple[str, Any]] = []
    for f in files:
        lbl = json.loads(Path(str(f).replace("embedding.npy", "target-labels.json")).read_text())
        if kind == "scene":
            labels.append(lbl)
            continue
        labels += lbl
        stamps = json.loads(Path(str(f).replace("embedding.npy", "timestamps.json")).read_text())
        # <split>/<file>: heareval's predictor keys rows on Path(slug).name, and a path of the
        # folder written to (a staging folder, renamed after the run) would change every run
        slug = f.relative_to(root).as_posix().removesuffix(".embedding.npy")
        filename_timestamps += [(slug, t) for t in stamps]
    with (root / f"{split}.target-labels.pkl").open("wb") as fp:
        pickle.dump(labels, fp)
    if kind == "event":
        text = json.dumps(filename_timestamps, indent=4)
        (root / f"{split}.filename-timestamps.json").write_text(text)


def _finite(emb: npt.NDArray[np.float32], path: Path) -> None:
    bad = ~np.isfinite(emb)
    if bad.any():
        where = "" if emb.ndim == 1 else f" in frame {int(np.argwhere(bad)[0][0])}"
        raise UserError(
            f"has NaN or infinite values{where}; expected finite embeddings", source=path
        )


def _check_labels(labels: Any, expected: Any, path: Path, *, event: bool) -> None:
    """The saved labels are the task's: a scene file's as its split file has them, an event
    file's per frame as a multiset (heareval lists overlapping events in a set's order)."""
    if event:
        same = isinstance(labels, list) and len(labels) == len(expected)
        for i, (got, want) in enumerate(zip(labels if same else [], expected, strict=False)):
            if not isinstance(got, list) or sorted(map(json.dumps, got)) != sorted(
                map(json.dumps, want)
            ):
                raise UserError(
                    f"frame {i} has labels {got!r}; expected {want!r}, the task's events at "
                    "its timestamp",
                    source=path,
                )
        if same:
            return
    elif labels == expected:
        return
    raise UserError(f"is {labels!r}; expected the task's labels {expected!r}", source=path)


def _read_file(
    outdir: Path, name: str, kind: str, dims: set[int], raw: Any
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float64] | None, Any]:
    path = outdir / f"{name}.embedding.npy"
    if not path.is_file():
        raise UserError("is missing (its split's .json names the file)", source=path)
    try:
        emb = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise UserError(f"is not a .npy array ({exc})", source=path) from None
    # float32 as heareval's memmap_embeddings reads every file (astype(np.float32))
    emb = _check_embedding(emb, kind, str(path)).astype(np.float32)
    dims.add(int(emb.shape[-1]))
    if len(dims) > 1:
        raise UserError(f"has dimension {emb.shape[-1]}, others {sorted(dims)}", source=path)
    _finite(emb, path)
    labels_path = outdir / f"{name}.target-labels.json"
    labels = parse_json(read_text(labels_path, what="heareval target labels"), source=labels_path)
    if kind == "scene":
        _check_labels(labels, raw, labels_path, event=False)
        return emb, None, labels
    ts_path = outdir / f"{name}.timestamps.json"
    if not ts_path.is_file():
        raise UserError(
            "is missing; expected the frames' timestamps (ms) of an event task", source=ts_path
        )
    stamps = parse_json(read_text(ts_path, what="heareval timestamps"), source=ts_path)
    if not isinstance(stamps, list) or not all(
        isinstance(t, int | float) and not isinstance(t, bool) and np.isfinite(t) for t in stamps
    ):
        raise UserError("expected a JSON list of finite timestamps (ms)", source=ts_path)
    if not (len(stamps) == emb.shape[0] == (len(labels) if isinstance(labels, list) else -1)):
        raise UserError(
            f"expected one timestamp and one label list per frame ({emb.shape[0]} frames), "
            f"got {len(stamps)} timestamps",
            source=ts_path,
        )
    expected = _raw_frame_labels(raw, np.asarray(stamps, np.float64))
    _check_labels(labels, expected, labels_path, event=True)
    return emb, np.asarray(stamps, dtype=np.float64), labels


def _check_clips(task: HearTask, root: Path, split: str) -> None:
    """The folder holds the task's clips of ``split``: its copy of ``<split>.json`` (where
    heareval wrote one) and its ``*.embedding.npy`` name the same files as the task's."""
    want = set(task.files(split))
    copy = root / f"{split}.json"
    listed: set[str] = set()
    if copy.is_file():
        doc = parse_json(read_text(copy, what="heareval's copy of a split file"), source=copy)
        listed = set(doc) if isinstance(doc, dict) else set()
        if listed != want:
            extra, lacking = sorted(listed - want), sorted(want - listed)
            what = f"names {extra[0]!r}, not" if extra else f"lacks {lacking[0]!r},"
            raise UserError(
                f"{what} a file of the task's {split}.json; expected the embeddings of task "
                f"{task.name}",
                source=copy,
            )
    saved = {p.name[: -len(".embedding.npy")] for p in (root / split).glob("*.embedding.npy")}
    extra = sorted(saved - want)
    if extra:
        raise UserError(
            f"holds {extra[0]}.embedding.npy, not a file of the task's {split}.json; expected "
            f"the embeddings of task {task.name}",
            source=root / split,
        )


def read_embeddings(task: HearTask, folder: str | Path) -> dict[str, HearSplitEmbeddings]:
    """Read heareval's per-file embeddings of ``task`` from ``folder`` (its
    ``E/<module>/<task folder>``): every file of every split, checked to be the task's (its
    files, their labels and, for an event task, timestamps) and finite."""
    root = Path(folder)
    if not root.is_dir():
        raise UserError("is not a folder (expected heareval's embeddings of a task)", source=root)
    kind = task.metadata.embedding_type
    dims: set[int] = set()
    out: dict[str, HearSplitEmbeddings] = {}
    for split in task.metadata.splits:
        if not (root / split).is_dir():
            raise UserError(
                f"is missing; expected heareval's embeddings of split {split!r} of task "
                f"{task.name} ({len(task.files(split))} files)",
                source=root / split,
            )
        _check_clips(task, root, split)
        raw = _raw_split(task, split)
        files = task.files(split)
        embs: dict[str, npt.NDArray[np.float32]] = {}
        stamps: dict[str, npt.NDArray[np.float64]] = {}
        labels: dict[str, Any] = {}
        for name in files:
            emb, ts, lbl = _read_file(root / split, name, kind, dims, raw[name])
            embs[name], labels[name] = emb, lbl
            if ts is not None:
                stamps[name] = ts
        out[split] = HearSplitEmbeddings(files, embs, stamps, labels)
    return out

"""A HEAR event task in a ``hear`` cell: timestamp embeddings, a frame-level predictor, and
events scored as heareval scores them.

Embeddings: each clip, read as heareval reads it, goes to the module's own
``get_timestamp_embeddings(audio, model)`` (frames x dim and the frames' timestamps in ms) in
heareval's batches (:func:`heareval_batches`), or to a ``py:`` encoder's ``embed_frames([clip])``
(docs/models.md), one clip per call (:func:`frame_batch`; the cell's embeddings are a cache
entry, :mod:`.entry`).
Predictor ``linear-v1`` per label per frame: for each label of the vocabulary, ``linear-v1``
(docs/linear-probe.md) fitted on the training split(s)' frames with targets "label active at the
frame's timestamp" (``start <= t < end + 0.0001`` ms, as heareval's embedding runner labels
frames); a frame's score is the logistic of its decision value (scikit-learn's
``predict_proba``); a label never (always) active in training scores 0 (1) everywhere. Events:
heareval's post-processing (:mod:`audiorepro.metrics.hear_events`), each setting of the task's
grid (heareval's default when it declares none) tried on the validation split, the best by the
task's first score (ties: the first in grid order) applied to the test split."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.formats.hear import HearEvent, HearTask
from audiorepro.formats.hear_embeddings import frame_labels
from audiorepro.metrics import hear as scores
from audiorepro.metrics.hear_events import Setting, events_by_file, postprocessing_settings
from audiorepro.metrics.linear_probe import fit_linear_v1
from audiorepro.models.user_encoders import call_user, call_user_error
from audiorepro.reference import hear as twin

EVENT_SCORES = (
    "event_onset_200ms_fms",
    "event_onset_50ms_fms",
    "event_onset_offset_50ms_20perc_fms",
    "segment_1s_er",
)
Events = Mapping[str, list[HearEvent]]


def _event_score(name: str, predicted: Events, task: HearTask, split: tuple[str, ...]) -> float:
    reference = {n: list(task.events[s][n]) for s in split for n in task.files(s)}
    if name == "segment_1s_er":
        return scores.segment_error_rate(predicted, reference, task.vocabulary)
    if name == "event_onset_offset_50ms_20perc_fms":
        return scores.event_onset_offset_fms(predicted, reference).f_measure
    collar = 0.2 if name == "event_onset_200ms_fms" else 0.05
    return scores.event_onset_fms(predicted, reference, collar=collar).f_measure


def _twin_score(name: str, predicted: Events, task: HearTask, split: tuple[str, ...]) -> float:
    def tuples(events: Mapping[str, Any]) -> dict[str, list[twin.Event]]:
        return {n: [(e.label, e.start, e.end) for e in ev] for n, ev in events.items()}

    reference = {n: task.events[s][n] for s in split for n in task.files(s)}
    if name == "segment_1s_er":
        return twin.segment_error_rate(tuples(predicted), tuples(reference), list(task.vocabulary))
    if name == "event_onset_offset_50ms_20perc_fms":
        return twin.event_onset_offset_f(tuples(predicted), tuples(reference))[0]
    collar = 0.2 if name == "event_onset_200ms_fms" else 0.05
    return twin.event_onset_f(tuples(predicted), tuples(reference), collar)[0]


def heareval_batches(task: HearTask, split: str, rate: int) -> list[tuple[str, ...]]:
    """The files of ``split`` in the batches heareval's embedding runner hands a module
    (``task_embeddings``): consecutive files of ``<split>.json``, ``int(0.7 * (120 /
    sample_duration) * (16000 / rate))`` at a time (at least 1), one at a time where
    ``sample_duration`` is null (clips of any length). A module may depend on its batch (a
    model left in training mode normalises over it; BatchNorm refuses a batch of one), so the
    kit calls it as heareval does.

    >>> from pathlib import Path
    >>> from audiorepro.formats.hear import parse_task_metadata
    >>> m = parse_task_metadata({"task_name": "w", "embedding_type": "scene",
    ...     "prediction_type": "multiclass", "split_mode": "trainvaltest",
    ...     "splits": ["train", "valid", "test"], "sample_duration": 40.0,
    ...     "evaluation": ["top1_acc"]}, source="m.json")
    >>> t = HearTask(Path("t"), m, ("a",), {"train": dict.fromkeys("pqrst", ("a",))}, {})
    >>> heareval_batches(t, "train", 16000)  # int(0.7 * 3 * 1) = 2 clips a call
    [('p', 'q'), ('r', 's'), ('t',)]
    """
    files = task.files(split)
    duration = task.metadata.sample_duration
    size = 1 if duration is None else max(1, int(0.7 * (120 / duration) * (16000 / rate)))
    return [files[i : i + size] for i in range(0, len(files), size)]


FrameSource = Callable[[list[npt.NDArray[np.float32]]], list[tuple[Any, Any]]]


def frame_source(encoder: Any) -> FrameSource:
    """How an encoder gives a batch of clips' frames and their timestamps (ms), one pair per
    clip: a HEAR module by one ``get_timestamp_embeddings(audio, model)`` call on the batch
    stacked (clips of one length; else one call per clip), a ``py:`` encoder by its optional
    ``embed_frames([clip])`` per clip (docs/models.md); an encoder with neither is one line
    (an event task needs frames), checked before any clip is read."""
    module = getattr(encoder, "module", None)
    if module is not None and hasattr(encoder, "model"):  # a HEAR module (HearEncoder)
        func = getattr(module, "get_timestamp_embeddings", None)
        if not callable(func):
            raise UserError("has no get_timestamp_embeddings (an event task needs it)", key="MODEL")
        return partial(_hear_frames, func, encoder)
    frames = getattr(encoder, "embed_frames", None)
    if not callable(frames):
        raise UserError(
            f"{type(encoder).__name__} has no embed_frames(waveforms) (an event task needs "
            "frame embeddings and their timestamps: docs/models.md)",
            key="MODEL",
        )
    return partial(_py_frames, frames)


def _hear_frames(
    func: Any, encoder: Any, clips: list[npt.NDArray[np.float32]]
) -> list[tuple[Any, Any]]:
    import torch

    if len({len(c) for c in clips}) > 1:  # heareval's collate needs one length
        return [pair for c in clips for pair in _hear_frames(func, encoder, [c])]
    audio = torch.from_numpy(np.stack(clips))
    what = "get_timestamp_embeddings"
    with torch.no_grad():
        try:
            out = func(audio.to(encoder._device()), encoder.model)
        except NotImplementedError:
            raise UserError(
                "get_timestamp_embeddings is not implemented (an event task needs it)",
                key="MODEL",
            ) from None
        except (SystemExit, Exception) as exc:  # the module's own failure: call_user's line
            raise call_user_error(what, encoder.name, exc) from None
    if not (
        isinstance(out, tuple | list)
        and len(out) == 2
        and all(isinstance(x, torch.Tensor) for x in out)
    ):
        raise UserError(
            f"{what} returned {type(out).__name__}"
            + (f" of {[type(x).__name__ for x in out]}" if isinstance(out, tuple | list) else "")
            + "; expected a pair of torch tensors (embeddings, timestamps), as HEAR's API says",
            key=encoder.name,
        )
    e, t = out[0].detach().cpu().numpy(), out[1].detach().cpu().numpy()
    if len(e) != len(clips) or len(t) != len(clips):
        raise UserError(
            f"get_timestamp_embeddings gave {len(e)} embeddings and {len(t)} timestamp rows "
            f"for {len(clips)} clips; expected one each per clip",
            key="MODEL",
        )
    return [(e[i], t[i]) for i in range(len(clips))]


def _py_frames(func: Any, clips: list[npt.NDArray[np.float32]]) -> list[tuple[Any, Any]]:
    pairs = []
    for clip in clips:
        out = call_user(func, "embed_frames()", "MODEL", [clip])
        try:
            ((e, t),) = out
        except (TypeError, ValueError):
            raise UserError(
                "embed_frames([clip]) gave no single (embeddings, timestamps) pair; expected a "
                "list of one pair per clip",
                key="MODEL",
            ) from None
        pairs.append((e, t))
    return pairs


def frame_batch(
    source: FrameSource, clips: list[npt.NDArray[np.float32]], where: list[str]
) -> list[tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]]:
    """A batch of clips' timestamp embeddings (float32, frames x dim) and timestamps (ms) from
    :func:`frame_source`, each checked (``where``: the clips, ``<split>/<file>``)."""
    out = []
    for name, (raw_e, raw_t) in zip(where, source(clips), strict=True):
        e = np.asarray(raw_e, dtype=np.float32)
        t = np.asarray(raw_t, dtype=np.float64)
        if e.ndim != 2 or t.shape != (e.shape[0],) or e.shape[0] == 0:
            raise UserError(
                f"frames of {name} are {e.shape} embeddings and {t.shape} "
                "timestamps; expected (frames, dim) and (frames,) with frames >= 1",
                key="MODEL",
            )
        if not (np.isfinite(e).all() and np.isfinite(t).all()):
            # heareval's predictor asserts finite embeddings; a NaN frame would make the probe
            # fail or every score NaN
            raise UserError(
                f"frames of {name} hold NaN or infinite values (embeddings or timestamps); "
                "expected finite numbers",
                key="MODEL",
            )
        out.append((np.ascontiguousarray(e), t))
    return out


@dataclass(frozen=True)
class FrameRows:
    """One split group's frames: features, 0/1 label targets, and each row's file and time."""

    x: npt.NDArray[np.float32]
    y: npt.NDArray[np.int64]
    files: list[str]
    stamps: list[float]


def _frame_rows(
    task: HearTask, emb: Mapping[str, Any], stamps: Mapping[str, Any], split: tuple[str, ...]
) -> FrameRows:
    xs, ys, files, times = [], [], [], []
    index = {label: j for j, label in enumerate(task.vocabulary)}
    for s in split:
        for name in task.files(s):
            xs.append(emb[s][name])
            y = np.zeros((len(stamps[s][name]), len(index)), dtype=np.int64)
            for i, labels in enumerate(frame_labels(task.events[s][name], stamps[s][name])):
                y[i, [index[label] for label in labels]] = 1
            ys.append(y)
            files += [name] * len(stamps[s][name])
            times += [float(t) for t in stamps[s][name]]
    return FrameRows(np.concatenate(xs), np.concatenate(ys), files, times)


def _frame_scores(train: FrameRows, x_eval: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """linear-v1 per label: the logistic of each label's decision value per frame."""
    out = np.zeros((len(x_eval), train.y.shape[1]))
    for j in range(train.y.shape[1]):
        y = train.y[:, j]
        if y.min() == y.max():  # never (always) active in training
            out[:, j] = float(y[0])
            continue
        fit = fit_linear_v1(train.x, y, x_eval)
        out[:, j] = 1.0 / (1.0 + np.exp(-fit.decision[:, 1]))
    return out


@dataclass(frozen=True)
class EventFold:
    """One data split's test scores, validation score, chosen setting and the twin's scores."""

    test: dict[str, float]
    valid: float
    setting: Setting
    twin_test: dict[str, float]


def event_fold(
    task: HearTask,
    emb: Mapping[str, Any],
    stamps: Mapping[str, Any],
    split: dict[str, tuple[str, ...]],
) -> EventFold:
    """The frame predictor on one data split, its post-processing chosen on validation."""
    train = _frame_rows(task, emb, stamps, split["train"])
    valid = _frame_rows(task, emb, stamps, split["valid"])
    test = _frame_rows(task, emb, stamps, split["test"])
    probs = _frame_scores(train, np.concatenate([valid.x, test.x]))
    pv, pt = probs[: len(valid.x)], probs[len(valid.x) :]
    names = task.metadata.evaluation
    higher = scores.HEAR_SCORE_DIRECTIONS[names[0]]
    grid = task.metadata.evaluation_params.get("event_postprocessing_grid")
    best: tuple[float, Setting] | None = None
    for setting in postprocessing_settings(grid):
        events = events_by_file(pv, valid.files, valid.stamps, task.vocabulary, setting)
        value = _event_score(names[0], events, task, split["valid"])
        better = best is None or (value > best[0] if higher else value < best[0])
        if better and not np.isnan(value):
            best = (value, setting)
    if best is None:  # every setting scored NaN: the first, as heareval's comparison keeps it
        first = postprocessing_settings(grid)[0]
        events = events_by_file(pv, valid.files, valid.stamps, task.vocabulary, first)
        best = (_event_score(names[0], events, task, split["valid"]), first)
    events = events_by_file(pt, test.files, test.stamps, task.vocabulary, best[1])
    return EventFold(
        test={n: _event_score(n, events, task, split["test"]) for n in names},
        valid=best[0],
        setting=best[1],
        twin_test={n: _twin_score(n, events, task, split["test"]) for n in names},
    )

"""heareval 2021.1.3's event post-processing: frame-level label scores -> events.

As ``heareval.predictions.task_predictions`` does it (``create_events_from_prediction``,
``get_events_for_all_files``), per file:

1. the frames in timestamp order (ms); ``step`` = the mean difference of consecutive
   timestamps;
2. a median filter over time, label by label, of width ``round(median_filter_ms / step)``
   frames (none when that is 0), as ``scipy.ndimage.median_filter(size=(width, 1))`` computes
   it (its default ``reflect`` edges);
3. a frame is active for a label when its filtered score is strictly above the fixed threshold
   0.5;
4. each run of consecutive active frames of one label is an event from the first frame's
   timestamp to the last frame's (a single frame is an event of length 0), kept when
   ``end - start >= min_duration`` (ms);
5. events sorted by start; equal starts keep label order (Python's stable sort).

The settings tried are the task's ``evaluation_params.event_postprocessing_grid`` or
heareval's default (:data:`EVENT_POSTPROCESSING_GRID`), expanded as scikit-learn's
``ParameterGrid`` expands it (keys sorted, the last varying fastest); heareval keeps the one
whose events score best on the validation split (ties: the first in grid order) and applies it
to the test split.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.ndimage import median_filter

from audiorepro.formats.hear import HearEvent

__all__ = [
    "EVENT_POSTPROCESSING_GRID",
    "THRESHOLD",
    "Setting",
    "events_by_file",
    "events_from_frames",
    "postprocessing_settings",
]

#: heareval's ``EVENT_POSTPROCESSING_GRID`` (used when a task declares none).
EVENT_POSTPROCESSING_GRID: dict[str, tuple[float, ...]] = {
    "median_filter_ms": (250,),
    "min_duration": (125, 250),
}
#: The fixed threshold on a frame's label score (heareval never tunes it).
THRESHOLD = 0.5
#: One post-processing setting: ``(("median_filter_ms", x), ("min_duration", y))``.
Setting = tuple[tuple[str, float], ...]


def postprocessing_settings(grid: Mapping[str, Sequence[float]] | None = None) -> list[Setting]:
    """The settings of ``grid`` (heareval's default when None) in ``ParameterGrid`` order.

    >>> for setting in postprocessing_settings(): print(setting)
    (('median_filter_ms', 250), ('min_duration', 125))
    (('median_filter_ms', 250), ('min_duration', 250))
    """
    items = sorted((grid if grid is not None else EVENT_POSTPROCESSING_GRID).items())
    keys = [k for k, _ in items]
    return [
        tuple(zip(keys, values, strict=True))
        for values in itertools.product(*(v for _, v in items))
    ]


def events_from_frames(
    scores: npt.ArrayLike,
    timestamps: npt.ArrayLike,
    vocabulary: Sequence[str],
    *,
    median_filter_ms: float,
    min_duration: float,
    threshold: float = THRESHOLD,
) -> list[HearEvent]:
    """One file's events from its frames' label scores (rows: frames; columns: labels in
    vocabulary order), as the module docstring says.

    >>> s = [[0.9, 0.1], [0.8, 0.6], [0.2, 0.7], [0.1, 0.1]]
    >>> events_from_frames(s, [0.0, 50.0, 100.0, 150.0], ["a", "b"], median_filter_ms=0,
    ...                    min_duration=50)
    [HearEvent(label='a', start=0.0, end=50.0), HearEvent(label='b', start=50.0, end=100.0)]
    """
    stamps = np.asarray(timestamps, dtype=np.float64)
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    frames = np.asarray(scores)[order]
    if median_filter_ms:
        width = round(float(median_filter_ms / np.mean(np.diff(stamps))))
        if width:
            frames = median_filter(frames, size=(width, 1))
    active = frames > threshold
    events = []
    for j, label in enumerate(vocabulary):
        on = np.flatnonzero(active[:, j])
        # Runs of consecutive frame indices: a new run wherever the index jumps.
        for run in np.split(on, np.flatnonzero(np.diff(on) != 1) + 1) if on.size else ():
            start, end = float(stamps[run[0]]), float(stamps[run[-1]])
            if end - start >= min_duration:
                events.append(HearEvent(label, start, end))
    events.sort(key=lambda e: e.start)
    return events


def events_by_file(
    scores: npt.ArrayLike,
    files: Sequence[str],
    timestamps: Sequence[float],
    vocabulary: Sequence[str],
    setting: Setting,
) -> dict[str, list[HearEvent]]:
    """Every file's events from stacked frame rows (``files[i]`` and ``timestamps[i]`` name
    row ``i``; a file is keyed by its name without folders, as heareval keys it)."""
    rows: dict[str, list[int]] = {}
    for i, name in enumerate(files):
        rows.setdefault(name.replace("\\", "/").rsplit("/", 1)[-1], []).append(i)
    matrix = np.asarray(scores)
    stamps = np.asarray(timestamps, dtype=np.float64)
    params: dict[str, Any] = dict(setting)
    return {
        name: events_from_frames(matrix[idx], stamps[idx], vocabulary, **params)
        for name, idx in rows.items()
    }

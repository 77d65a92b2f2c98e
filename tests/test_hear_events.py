"""heareval's event post-processing (metrics.hear_events): frames -> events, its grid order,
and the kit against heareval 2021.1.3's own ``get_events_for_all_files`` (marked heareval:
`tox -e hear`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from audiorepro.metrics.hear_events import (
    events_by_file,
    events_from_frames,
    postprocessing_settings,
)

VOCAB = ("beep", "chirp", "speech")
GRID = {"median_filter_ms": [0, 62, 125, 250], "min_duration": [0, 62, 125, 250]}


def _frames(seed: int) -> tuple[np.ndarray, list[str], list[float]]:
    """Four files of blocky label scores with noise (float32, as heareval's predictor gives
    them), 25 or 50 ms frames, rows interleaved across files as a split's rows are."""
    rng = np.random.default_rng(seed)
    rows, files, stamps = [], [], []
    for f in range(4):
        step, n = (25.0, 160) if f % 2 else (50.0, 80)
        blocks = np.zeros((n, len(VOCAB)))
        for j in range(len(VOCAB)):
            for _ in range(3):
                a = int(rng.integers(0, n - 2))
                blocks[a : a + int(rng.integers(1, 20)), j] = 1.0
        scores = np.clip(0.15 + 0.7 * blocks + rng.normal(0, 0.25, blocks.shape), 0, 1)
        rows += list(scores.astype(np.float32))
        files += [f"test/file{f}.wav"] * n
        stamps += [i * step for i in range(n)]
    order = rng.permutation(len(rows))
    return np.stack(rows)[order], [files[i] for i in order], [stamps[i] for i in order]


def test_the_grid_is_expanded_as_parameter_grid() -> None:
    from sklearn.model_selection import ParameterGrid

    theirs = [tuple(d.items()) for d in ParameterGrid(GRID)]
    assert postprocessing_settings(GRID) == theirs and len(theirs) == 16


def test_without_a_filter_each_event_is_a_maximal_run_above_the_threshold() -> None:
    scores, files, stamps = _frames(0)
    setting = (("median_filter_ms", 0), ("min_duration", 0))
    events = events_by_file(scores, files, stamps, VOCAB, setting)
    assert set(events) == {f"file{f}.wav" for f in range(4)}
    for name, found in events.items():
        rows = sorted((stamps[i], i) for i, f in enumerate(files) if f.endswith("/" + name))
        t = np.array([s for s, _ in rows])
        m = scores[[i for _, i in rows]]
        for e in found:
            j = VOCAB.index(e.label)
            inside = (t >= e.start) & (t <= e.end)
            assert (m[inside, j] > 0.5).all()
            before, after = t[t < e.start], t[t > e.end]
            assert not before.size or m[t == before[-1], j][0] <= 0.5
            assert not after.size or m[t == after[0], j][0] <= 0.5
        # Every active frame lies in one event of its label.
        for k, j in zip(*np.nonzero(m > 0.5), strict=True):
            assert any(e.label == VOCAB[j] and e.start <= t[k] <= e.end for e in found)


def test_min_duration_drops_short_events_and_a_filter_smooths() -> None:
    s = [[0.9], [0.1], [0.9], [0.9], [0.9], [0.1]]
    t = [0.0, 50.0, 100.0, 150.0, 200.0, 250.0]
    raw = events_from_frames(s, t, ["a"], median_filter_ms=0, min_duration=0)
    assert [(e.start, e.end) for e in raw] == [(0.0, 0.0), (100.0, 200.0)]
    long = events_from_frames(s, t, ["a"], median_filter_ms=0, min_duration=100)
    assert [(e.start, e.end) for e in long] == [(100.0, 200.0)]
    # A 3-frame median (150 ms / 50 ms) fills the one-frame gap at 50 ms.
    smooth = events_from_frames(s, t, ["a"], median_filter_ms=150, min_duration=0)
    assert [(e.start, e.end) for e in smooth] == [(0.0, 200.0)]


@pytest.mark.heareval
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_events_equal_heareval(seed: int) -> None:
    """heareval's get_events_for_all_files over the same frames, for every setting of a grid
    wider than its default: the same events, start and end to the bit."""
    import torch
    from heareval.predictions.task_predictions import get_events_for_all_files

    scores, files, stamps = _frames(seed)
    theirs: dict[Any, Any] = get_events_for_all_files(
        torch.from_numpy(scores), files, stamps, dict(enumerate(VOCAB)), GRID
    )
    assert list(theirs) == postprocessing_settings(GRID)
    for setting, by_file in theirs.items():
        ours = events_by_file(scores, files, stamps, VOCAB, setting)
        assert set(ours) == set(by_file)
        for name, events in by_file.items():
            want = [(e["label"], float(e["start"]), float(e["end"])) for e in events]
            assert [(e.label, e.start, e.end) for e in ours[name]] == want, (setting, name)

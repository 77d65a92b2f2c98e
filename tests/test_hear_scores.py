"""HEAR's scores (metrics.hear): hand-computed cases against the kit and its twin
(reference.hear), the kit against the twin on seeded inputs, and the kit against heareval
2021.1.3's own score classes to 1e-12 (tests marked heareval: `tox -e hear`)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from audiorepro.formats.hear import HearEvent
from audiorepro.metrics import hear as kit
from audiorepro.reference import hear as ref

TOL = 1e-12


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= TOL


SCENE = {
    "top1_acc": (kit.top1_accuracy_score, ref.top1_accuracy),
    "chroma_acc": (kit.chroma_accuracy_score, ref.chroma_accuracy),
    "mAP": (kit.mean_average_precision_score, ref.mean_average_precision),
    "aucroc": (kit.aucroc_score, ref.aucroc),
    "d_prime": (kit.d_prime_score, ref.d_prime),
}
P = [[0.9, 0.1, 0.0], [0.2, 0.3, 0.5], [0.5, 0.5, 0.0], [0.1, 0.1, 0.8]]
T = [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
# By hand: argmax rows 0, 2, 0 (tie: first), 2 against 0, 0, 1, 2 -> 2/4. AP: class 0 scores
# .9+ .2+ .5- .1- -> 1/1, then 2/3 at .2 -> (1 + 2/3)/2; class 1: .5 (one row, positive) ->
# 1/1 at the top... .1,.3,.5,.1 with the positive at .5 -> 1; class 2: .8+ first -> 1.
# AUC: class 0 positives .9 .2 vs negatives .5 .1: wins 2 + 1 = 3/4; class 1: .5 vs .1 .3
# .1 -> 1; class 2: .8 vs 0 .5 0 -> 1.
HAND = {
    "top1_acc": 0.5,
    "chroma_acc": 0.5,
    "mAP": ((1 + 2 / 3) / 2 + 1 + 1) / 3,
    "aucroc": (0.75 + 1 + 1) / 3,
    "d_prime": math.inf,  # AUC 1 is d' = +inf (scipy's ndtri(1)), and so is the mean
}


@pytest.mark.parametrize("impl", ["kit", "reference"])
@pytest.mark.parametrize("name", sorted(SCENE))
def test_scene_scores_by_hand(name: str, impl: str) -> None:
    func = SCENE[name][0 if impl == "kit" else 1]
    assert _same(func(P, T), HAND[name])  # type: ignore[operator]


@pytest.mark.parametrize("impl", ["kit", "reference"])
def test_undefined_auc_is_nan_and_missing_positives_give_ap_zero(impl: str) -> None:
    t = [[1, 0], [1, 0], [0, 0]]  # class 1 has no positive
    p = [[0.9, 0.1], [0.2, 0.3], [0.5, 0.5]]
    aucroc, dprime, m_ap = (
        (kit.aucroc_score, kit.d_prime_score, kit.mean_average_precision_score)
        if impl == "kit"
        else (ref.aucroc, ref.d_prime, ref.mean_average_precision)
    )
    assert math.isnan(aucroc(p, t)) and math.isnan(dprime(p, t))
    assert _same(m_ap(p, t), (1 + 2 / 3) / 2 / 2)


def _scene_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of softmax-like scores (float32, as heareval's predictor gives them; rounded to
    make ties) and one-hot or multi-hot targets."""
    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(3, 40)), int(rng.integers(2, 26))
    scores = rng.random((n, c))
    if seed % 3 == 0:
        scores = np.round(scores, 1)  # many ties
    if seed % 2:
        targets = np.eye(c)[rng.integers(0, c, n)]
    else:
        targets = (rng.random((n, c)) < 0.3).astype(np.float64)
    return scores.astype(np.float32), targets.astype(np.float32)


@pytest.mark.parametrize("name", sorted(SCENE))
def test_scene_scores_equal_their_twin(name: str) -> None:
    fast, slow = SCENE[name]
    for seed in range(60):
        p, t = _scene_case(seed)
        assert _same(fast(p, t), slow(p, t)), (name, seed)  # type: ignore[operator]


def _events(rng: np.random.Generator, labels: list[str]) -> list[HearEvent]:
    out = []
    for _ in range(int(rng.integers(0, 6))):
        start = float(10 * rng.integers(0, 500))
        out.append(
            HearEvent(str(rng.choice(labels)), start, start + float(10 * rng.integers(1, 200)))
        )
    return out


def _event_case(
    seed: int,
) -> tuple[dict[str, list[HearEvent]], dict[str, list[HearEvent]], list[str]]:
    """Reference events per file and predictions made from them: onsets moved by up to
    +-300 ms on a 10 ms grid (200 ms collar boundaries included), labels swapped, events
    dropped and added, a file without predictions, a predicted file without reference."""
    rng = np.random.default_rng(1000 + seed)
    labels = ["beep", "chirp", "word"][: 2 + seed % 2]
    reference = {f"f{i}.wav": _events(rng, labels) for i in range(int(rng.integers(1, 6)))}
    predicted: dict[str, list[HearEvent]] = {}
    for name, events in reference.items():
        if rng.random() < 0.15:
            continue  # heareval scores only the files it has predictions for
        moved = []
        for e in events:
            if rng.random() < 0.2:
                continue
            shift = float(10 * rng.integers(-30, 31))
            label = str(rng.choice(labels)) if rng.random() < 0.2 else e.label
            start = max(0.0, e.start + shift)
            moved.append(HearEvent(label, start, max(start, e.end + shift)))
        predicted[name] = moved + _events(rng, labels)[:2]
    predicted["extra.wav"] = _events(rng, labels)
    return predicted, reference, labels


def _tuples(events: dict[str, list[HearEvent]]) -> dict[str, list[tuple[str, float, float]]]:
    return {k: [(e.label, e.start, e.end) for e in v] for k, v in events.items()}


def test_event_scores_by_hand() -> None:
    ev = HearEvent
    reference = {"a.wav": [ev("dog", 100.0, 500.0), ev("cat", 1000.0, 1500.0)]}
    # dog at +200 ms (inside the collar, a hit); cat at +201 ms (outside); an extra dog.
    predicted = {
        "a.wav": [ev("dog", 300.0, 900.0), ev("cat", 1201.0, 1500.0), ev("dog", 3000.0, 3100.0)]
    }
    scores = kit.event_onset_fms(predicted, reference)
    assert (scores.precision, scores.recall) == (1 / 3, 1 / 2)
    assert _same(scores.f_measure, 2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert ref.event_onset_f(_tuples(predicted), _tuples(reference)) == (
        scores.f_measure, scores.precision, scores.recall
    )  # fmt: skip
    # Segments (1 s): 0: dog ref, dog sys; 1: cat ref, cat sys; 2: - ; 3: dog sys.
    # S = 0, D = 0, I = 1 over N = 2 reference activities.
    er = kit.segment_error_rate(predicted, reference, ["cat", "dog"])
    assert er == ref.segment_error_rate(_tuples(predicted), _tuples(reference), ["cat", "dog"])
    assert abs(er - 0.5) < 1e-15
    empty = kit.event_onset_fms({"a.wav": []}, reference)
    assert math.isnan(empty.precision) and math.isnan(empty.f_measure) and empty.recall == 0.0


def test_event_scores_equal_their_twin() -> None:
    for seed in range(80):
        predicted, reference, labels = _event_case(seed)
        fast = kit.event_onset_fms(predicted, reference)
        slow = ref.event_onset_f(_tuples(predicted), _tuples(reference))
        assert all(
            _same(a, b)
            for a, b in zip((fast.f_measure, fast.precision, fast.recall), slow, strict=True)
        )
        er = kit.segment_error_rate(predicted, reference, labels)
        assert _same(er, ref.segment_error_rate(_tuples(predicted), _tuples(reference), labels))


def _offset_case(
    seed: int,
) -> tuple[dict[str, list[HearEvent]], dict[str, list[HearEvent]], list[str]]:
    """:func:`_event_case` with each prediction's offset moved again, on a 10 ms grid, by up to
    +-60 ms or by exactly 20% of a reference length (both tolerances' boundaries drawn)."""
    predicted, reference, labels = _event_case(seed)
    rng = np.random.default_rng(5000 + seed)
    lengths = [e.end - e.start for v in reference.values() for e in v] or [100.0]
    moved: dict[str, list[HearEvent]] = {}
    for name, events in predicted.items():
        out = []
        for e in events:
            if rng.random() < 0.5:
                delta = float(10 * rng.integers(-6, 7))
            else:
                delta = float(rng.choice([-1, 1]) * 0.2 * float(rng.choice(lengths)))
            out.append(HearEvent(e.label, e.start, max(e.start, e.end + delta)))
        moved[name] = out
    return moved, reference, labels


def test_onset_offset_score_by_hand() -> None:
    ev = HearEvent
    reference = {"a.wav": [ev("dog", 100.0, 1100.0), ev("cat", 2000.0, 2100.0)]}
    # dog: onset +50 ms (the collar's edge), offset +200 ms = 20% of 1 s (the length's edge):
    # a hit. cat: onset exact, offset +51 ms > max(50 ms, 20% of 100 ms): a miss.
    predicted = {"a.wav": [ev("dog", 150.0, 1300.0), ev("cat", 2000.0, 2151.0)]}
    scores = kit.event_onset_offset_fms(predicted, reference)
    assert (scores.f_measure, scores.precision, scores.recall) == (0.5, 0.5, 0.5)
    assert ref.event_onset_offset_f(_tuples(predicted), _tuples(reference)) == (0.5, 0.5, 0.5)
    # Onsets alone: both hit (the 50 ms score).
    assert kit.event_onset_fms(predicted, reference, collar=0.05).f_measure == 1.0
    assert kit.HEAR_SCORE_DIRECTIONS["event_onset_offset_50ms_20perc_fms"] is True


def test_onset_offset_score_equals_its_twin() -> None:
    for seed in range(80):
        predicted, reference, _ = _offset_case(seed)
        fast = kit.event_onset_offset_fms(predicted, reference)
        slow = ref.event_onset_offset_f(_tuples(predicted), _tuples(reference))
        assert all(
            _same(a, b)
            for a, b in zip((fast.f_measure, fast.precision, fast.recall), slow, strict=True)
        ), seed


# heareval 2021.1.3's own classes --------------------------------------------------------------


def _heareval_scene(name: str, c: int) -> Callable[[np.ndarray, np.ndarray], Any]:
    from heareval.score import available_scores

    return available_scores[name](label_to_idx={str(i): i for i in range(c)})  # type: ignore[no-any-return]


@pytest.mark.heareval
@pytest.mark.parametrize(
    "name", ["top1_acc", "pitch_acc", "chroma_acc", "mAP", "aucroc", "d_prime"]
)
def test_scene_scores_equal_heareval(name: str) -> None:
    """heareval's score class on the same predictions (float32, as its predictor passes them)
    and targets: equal to 1e-12, NaN where heareval gives NaN."""
    fast = {"pitch_acc": kit.top1_accuracy_score}.get(name) or SCENE[name][0]
    for seed in range(60):
        p, t = _scene_case(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn's "no positive class" warning
            theirs = float(_heareval_scene(name, p.shape[1])(p, t))
        assert _same(fast(p, t), theirs), (name, seed)  # type: ignore[operator]


def _heareval_events(events: dict[str, list[HearEvent]]) -> dict[str, list[dict[str, Any]]]:
    return {
        k: [{"label": e.label, "start": e.start, "end": e.end} for e in v]
        for k, v in events.items()
    }


@pytest.mark.heareval
def test_event_scores_equal_heareval() -> None:
    """heareval's event_onset_200ms_fms, event_onset_50ms_fms and segment_1s_er (sed_eval
    0.2.1 inside) on the same predicted and reference events."""
    from heareval.score import available_scores

    for seed in range(80):
        predicted, reference, labels = _event_case(seed)
        vocab = {label: i for i, label in enumerate(labels)}
        p, r = _heareval_events(predicted), _heareval_events(reference)
        for name, collar in (("event_onset_200ms_fms", 0.2), ("event_onset_50ms_fms", 0.05)):
            theirs = dict(available_scores[name](label_to_idx=vocab)(p, r))
            ours = kit.event_onset_fms(predicted, reference, collar=collar)
            assert _same(ours.f_measure, theirs["f_measure"]), (seed, name)
            assert _same(ours.precision, theirs["precision"]), (seed, name)
            assert _same(ours.recall, theirs["recall"]), (seed, name)
        (er,) = available_scores["segment_1s_er"](label_to_idx=vocab)(p, r)
        assert _same(kit.segment_error_rate(predicted, reference, labels), er[1]), seed


@pytest.mark.heareval
def test_onset_offset_score_equals_heareval() -> None:
    """heareval's event_onset_offset_50ms_20perc_fms (maestro's second score: sed_eval with
    t_collar=0.05, percentage_of_length=0.2, onsets and offsets) on the same events."""
    from heareval.score import available_scores

    name = "event_onset_offset_50ms_20perc_fms"
    hits = 0
    for seed in range(80):
        predicted, reference, labels = _offset_case(seed)
        vocab = {label: i for i, label in enumerate(labels)}
        p, r = _heareval_events(predicted), _heareval_events(reference)
        theirs = dict(available_scores[name](label_to_idx=vocab)(p, r))
        ours = kit.event_onset_offset_fms(predicted, reference)
        assert _same(ours.f_measure, theirs["f_measure"]), seed
        assert _same(ours.precision, theirs["precision"]), seed
        assert _same(ours.recall, theirs["recall"]), seed
        onset_only = kit.event_onset_fms(predicted, reference, collar=0.05).f_measure
        hits += ours.f_measure != onset_only
    assert hits > 10  # the offsets decide in many cases, not only the onsets

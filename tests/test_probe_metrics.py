"""Probe metrics: external cross-checks (scipy, scikit-learn), the reference, undefined cases,
bad files and byte-identical reruns."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from sklearn import metrics as skm

from audiorepro.cli import main
from audiorepro.metrics import classification as cls
from audiorepro.metrics import events as ev
from audiorepro.metrics import regression as reg
from audiorepro.reference import probe as ref

NAN = float("nan")
floats = st.floats(-5, 5, allow_nan=False, allow_infinity=False, width=32)


@given(st.lists(st.tuples(floats, floats | st.just(NAN)), min_size=0, max_size=25))
def test_regression_matches_reference_and_scipy(pairs: list[tuple[float, float]]) -> None:
    pred = [p for p, _ in pairs]
    true = [t for _, t in pairs]
    assert reg.mean_absolute_error(pred, true) == ref.mae(pred, true)
    r_rmse, h_rmse = ref.rmse(pred, true), reg.root_mean_squared_error(pred, true)
    assert (r_rmse is None) == (h_rmse is None)
    assert h_rmse == r_rmse  # same rounding rule, independent code
    valid = [(p, t) for p, t in pairs if not math.isnan(t)]
    for ours, theirs, scipy_fn in (
        (reg.pearson_r, ref.pearson, stats.pearsonr),
        (reg.spearman_rho, ref.spearman, stats.spearmanr),
    ):
        h, r = ours(pred, true), theirs(pred, true)
        assert (h is None) == (r is None)
        if h is None:
            continue
        assert h == pytest.approx(r, abs=1e-12)
        x, y = zip(*valid, strict=True)
        assert h == pytest.approx(float(scipy_fn(x, y)[0]), abs=1e-9)


def test_regression_undefined_cases() -> None:
    assert reg.regression_report([1.0, 2.0], [NAN, NAN], train_sd=1.0) == {
        "n": 0,
        "mae": None,
        "normalized_mae": None,
        "rmse": None,
        "pearson": None,
        "spearman": None,
    }
    const = reg.regression_report([3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0], train_sd=0.0)
    assert const["pearson"] is None and const["spearman"] is None
    assert const["mae"] == 1.0 and const["normalized_mae"] is None  # SD 0: undefined
    assert reg.pearson_r([1.0, 2.0], [1.0, 2.0]) is None  # fewer than 3 pairs


@pytest.mark.filterwarnings("ignore::UserWarning")  # sklearn on absent classes
@given(
    st.integers(1, 5).flatmap(
        lambda n_cls: st.tuples(
            st.just(n_cls),
            st.lists(
                st.tuples(st.integers(0, n_cls - 1), st.integers(0, n_cls - 1)),
                min_size=1,
                max_size=40,
            ),
        )
    )
)
def test_classification_matches_sklearn_and_reference(case: tuple[int, list[Any]]) -> None:
    n_cls, pairs = case
    t = [a for a, _ in pairs]
    p = [b for _, b in pairs]
    assert cls.accuracy(t, p) == skm.accuracy_score(t, p)
    assert cls.balanced_accuracy(t, p, n_classes=n_cls) == pytest.approx(
        skm.balanced_accuracy_score(t, p) if len(set(t)) else None, abs=1e-12
    )
    assert cls.macro_f1(t, p, n_classes=n_cls) == pytest.approx(
        skm.f1_score(t, p, average="macro", zero_division=0), abs=1e-12
    )
    assert np.array_equal(
        cls.confusion_matrix(t, p, n_classes=n_cls),
        skm.confusion_matrix(t, p, labels=list(range(n_cls))),
    )
    r = ref.classification(t, p, n_cls)
    assert cls.balanced_accuracy(t, p, n_classes=n_cls) == r["balanced_accuracy"]
    assert cls.macro_f1(t, p, n_classes=n_cls) == r["macro_f1"]


def test_group_bootstrap_is_seeded_and_resamples_groups() -> None:
    t = [0, 1, 1, 0, 1, 0]
    p = [0, 1, 0, 0, 0, 0]
    g = ["a", "a", "b", "b", "c", "c"]
    ci = cls.group_bootstrap_accuracy_ci(t, p, g, n_resamples=500)
    assert ci == cls.group_bootstrap_accuracy_ci(t, p, g, n_resamples=500)
    # Group accuracies are 1, 1/2, 1/2: any resample pools to a value in [1/2, 1].
    assert ci is not None and 0.5 <= ci[0] <= 4 / 6 <= ci[1] <= 1.0
    wider = cls.group_bootstrap_accuracy_ci(t, p, g, n_resamples=500, level=0.99)
    assert wider is not None and wider[0] <= ci[0] and ci[1] <= wider[1]


intervals = st.tuples(st.integers(0, 20), st.integers(1, 6)).map(
    lambda s: (s[0] / 4, (s[0] + s[1]) / 4)
)


@given(
    st.lists(intervals, max_size=6),
    st.lists(intervals, max_size=6),
    st.sampled_from(ev.IOU_THRESHOLDS),
)
def test_matching_is_optimal_against_brute_force(r: list[Any], p: list[Any], tau: float) -> None:
    pairs = ev.match_events(r, p, threshold=tau)
    count, total, n_optimal = ref.best_matchings(r, p, tau)
    assert len(pairs) == count
    assert len({a for a, _ in pairs}) == len({b for _, b in pairs}) == len(pairs)
    assert all(ref.iou(r[a], p[b]) >= tau for a, b in pairs)
    assert sum(ref.iou(r[a], p[b]) for a, b in pairs) == pytest.approx(total, abs=1e-9)
    assert n_optimal >= 1


clip_events = st.lists(st.tuples(intervals, st.integers(0, 2)), max_size=7)


@given(clip_events, clip_events)
def test_event_precision_recall_f1_match_reference(r: list[Any], p: list[Any]) -> None:
    """Per clip and threshold, the harness's counts equal the reference's exhaustive search."""
    ref_ev = np.array([e for e, _ in r], dtype=np.float64).reshape(-1, 2)
    pred_ev = np.array([e for e, _ in p], dtype=np.float64).reshape(-1, 2)
    ref_clip, pred_clip = [c for _, c in r], [c for _, c in p]
    got = ev.event_scores(ref_ev, ref_clip, pred_ev, pred_clip)
    for tau in ev.IOU_THRESHOLDS:
        want = ref.event_counts(ref_ev, ref_clip, pred_ev, pred_clip, tau)
        assert got["iou"][str(tau)] == want, tau


def test_matching_agrees_with_scipy_assignment_on_a_known_case() -> None:
    # Two references compete for one prediction: the better IoU wins, and the other reference
    # takes the remaining prediction, although greedy-by-IoU would leave it unmatched.
    r = [(0.0, 2.0), (1.0, 3.0)]
    p = [(0.5, 2.5), (2.0, 3.0)]
    assert ev.match_events(r, p, threshold=0.3) == [(0, 0), (1, 1)]


def test_event_scores_and_undefined_cases() -> None:
    none = ev.event_scores(np.zeros((0, 2)), [], np.zeros((0, 2)), [])
    assert none["iou"]["0.5"] == {"matched": 0, "precision": None, "recall": None, "f1": None}
    assert none["start_mae_s"] is None
    miss = ev.event_scores([[0, 1]], [0], [[5, 6]], [0])
    assert miss["iou"]["0.1"] == {"matched": 0, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    other_clip = ev.event_scores([[0, 1]], [0], [[0, 1]], [1])  # same times, other clip
    assert other_clip["iou"]["0.5"]["matched"] == 0
    hit = ev.event_scores([[0, 1], [2, 3]], [0, 0], [[0.1, 1], [2, 3.3]], [0, 0])
    assert hit["iou"]["0.5"]["matched"] == 2
    assert hit["start_mae_s"] == pytest.approx(0.05) and hit["end_mae_s"] == pytest.approx(0.15)
    assert ev.frame_f1([0, 0], [0.1, 0.2]) is None
    assert ev.frame_f1([1, 0, 1], [0.5, 0.5, 0.49]) == ref.frame_f1([1, 0, 1], [0.5, 0.5, 0.49])


def _write(path: Path, **arrays: Any) -> Path:
    np.savez(path, **arrays)
    return path


def _good() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    true = rng.standard_normal((20, 3))
    pred = true + 0.3 * rng.standard_normal((20, 3))
    true[0, 1] = NAN
    return {
        "reg_names": np.array(["valence", "arousal", "dominance"]),
        "reg_pred": pred,
        "reg_true": true,
        "reg_train_sd": np.array([1.0, 0.8, 1.2]),
        "cls_names": np.array(["angry", "happy", "sad"]),
        "cls_true": rng.integers(0, 3, 30),
        "cls_pred": rng.integers(0, 3, 30),
        "cls_group": np.array([f"actor{i % 5}" for i in range(30)]),
        "ev_ref": np.array([[0.0, 0.5], [1.0, 1.4], [0.2, 0.6]]),
        "ev_ref_clip": np.array([0, 0, 1]),
        "ev_pred": np.array([[0.02, 0.5], [1.1, 1.3], [3.0, 3.2]]),
        "ev_pred_clip": np.array([0, 0, 1]),
        "frame_true": np.array([0, 1, 1, 0, 1]),
        "frame_prob": np.array([0.1, 0.9, 0.4, 0.6, 0.5]),
    }


def test_probe_metrics_cli(tmp_path: Path) -> None:
    path = _write(tmp_path / "pred.npz", **_good())
    outs = []
    for i in range(2):
        out = tmp_path / f"{i}.json"
        assert main(["probe-metrics", str(path), "--json", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    assert doc["schema"] == "audiorepro.probe/1"
    assert set(doc["regression"]) == {"valence", "arousal", "dominance"}
    assert set(doc["regression"]["arousal"]) >= {
        "n",
        "mae",
        "normalized_mae",
        "rmse",
        "pearson",
        "spearman",
    }
    assert doc["regression"]["arousal"]["n"] == 19  # the NaN is masked
    assert set(doc["classification"]) >= {"n", "accuracy", "balanced_accuracy", "macro_f1"}
    assert set(doc["events"]["iou"]) == {"0.1", "0.3", "0.5"}
    assert doc["events"]["frame_f1"] == ev.frame_f1([0, 1, 1, 0, 1], [0.1, 0.9, 0.4, 0.6, 0.5])


BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown key", {"extra": np.zeros(1)}, "extra", "not a prediction-file key"),
    ("missing key", {"reg_train_sd": None}, "reg_train_sd", "missing"),
    ("pred shape", {"reg_pred": np.zeros((20, 2))}, "reg_pred", "expected [N, 3]"),
    ("NaN prediction", {"reg_pred": np.full((20, 3), NAN)}, "reg_pred", "non-finite"),
    ("class out of range", {"cls_pred": np.full(30, 3)}, "cls_pred", "outside [0, 3)"),
    ("float classes", {"cls_true": np.zeros(30)}, "cls_true", "integer"),
    (
        "event end before start",
        {"ev_pred": np.array([[1.0, 0.5], [1, 2], [3, 4]])},
        "ev_pred",
        "end <= start",
    ),
    ("frame labels", {"frame_true": np.array([0, 2, 1, 0, 1])}, "frame_true", "0 or 1"),
    ("probabilities", {"frame_prob": np.array([0, 1.5, 0, 0, 0])}, "frame_prob", "[0, 1]"),
]


@pytest.mark.parametrize("name,change,key,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_prediction_files(
    name: str,
    change: dict[str, Any],
    key: str,
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    arrays = _good()
    for k, v in change.items():
        if v is None:
            del arrays[k]
        else:
            arrays[k] = v
    path = _write(tmp_path / "bad.npz", **arrays)
    assert main(["probe-metrics", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"key '{key}'" in err and expected in err and "Traceback" not in err


vec = st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=3, max_size=3).filter(
    lambda v: sum(x * x for x in v) > 1e-6
)


@given(st.lists(st.tuples(vec, vec, st.booleans()), max_size=8))
def test_mean_cosine_matches_reference(items: list[Any]) -> None:
    from audiorepro.metrics.vectors import mean_cosine

    pred = [a for a, _, _ in items] or np.zeros((0, 3))
    refv = [b for _, b, _ in items] or np.zeros((0, 3))
    valid = [v for _, _, v in items]
    ours, theirs = mean_cosine(pred, refv, valid), ref.mean_cosine(pred, refv, valid)
    assert (ours is None) == (theirs is None)
    if ours is not None:
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_span_class_accuracies_and_vectors_in_the_report(tmp_path: Path) -> None:
    arrays = _good()
    arrays["ev_ref_class"] = np.array([0, 1, 2])
    arrays["ev_oracle_class"] = np.array([0, 1, 1])
    arrays["ev_pred_class"] = np.array([0, 2, 2])
    arrays["spk_pred"] = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    arrays["spk_ref"] = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    arrays["spk_valid"] = np.array([True, True, False])
    path = _write(tmp_path / "pred.npz", **arrays)
    out = tmp_path / "out.json"
    assert main(["probe-metrics", str(path), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["events"]["oracle_span_class_accuracy"] == pytest.approx(2 / 3)
    # Matches at IoU >= 0.1: (ref 0, pred 0) class 0 == 0 and (ref 1, pred 1) class 1 != 2.
    assert doc["events"]["detected_span_class_accuracy"] == 0.5
    assert doc["vectors"] == {"n": 2, "mean_cosine": pytest.approx((1 + 2**-0.5) / 2)}
    arrays["spk_valid"] = np.array([True, True, True])  # item 2 has a zero vector
    bad = _write(tmp_path / "bad.npz", **arrays)
    assert main(["probe-metrics", str(bad)]) == 2

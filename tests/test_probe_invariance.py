"""Registry-driven invariance tests for the probe metrics (as the retrieval metrics have).

:data:`PROBE_METRICS` lists every probe metric with the kind of inputs it takes and the
properties it must have; one hypothesis test per property runs over every metric that claims
it. A metric added to ``audiorepro.metrics`` without an entry here fails
:func:`test_every_probe_metric_is_registered`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.metrics import classification as cls
from audiorepro.metrics import events as ev
from audiorepro.metrics import regression as reg
from audiorepro.metrics import vectors as vec
from tests.strategies import (
    CLASSES,
    class_pairs,
    frame_pairs,
    regression_pairs,
    vector_triples,
)

#: What a property says (each is checked by the test of the same name below).
PROPERTIES = {
    "permutation": "reordering the items together changes nothing",
    "symmetric": "swapping prediction and reference changes nothing",
    "range01": "defined values lie in [0, 1]",
    "range11": "defined values lie in [-1, 1]",
    "nonnegative": "defined values are >= 0",
    "shift": "adding one constant to predictions and references changes nothing",
    "affine": "a positive affine map of the predictions changes nothing",
    "relabel": "renaming the classes consistently changes nothing",
    "perfect": "a perfect prediction scores the metric's best value",
}


@dataclass(frozen=True)
class ProbeMetric:
    func: Callable[..., float | None]
    #: which strategy draws its inputs: regression, classification, frames, vectors
    inputs: str
    properties: frozenset[str]
    #: the value of a perfect prediction (property "perfect")
    best: float | None = None


def _n(func: Callable[..., float | None]) -> Callable[..., float | None]:
    """Classification metrics that take the class count: the strategies' count."""
    return lambda true, pred: func(true, pred, n_classes=CLASSES)


REG = frozenset({"permutation", "shift"})
PROBE_METRICS: dict[str, ProbeMetric] = {
    "mean_absolute_error": ProbeMetric(
        reg.mean_absolute_error, "regression", REG | {"symmetric", "nonnegative", "perfect"}, 0.0
    ),
    "root_mean_squared_error": ProbeMetric(
        reg.root_mean_squared_error,
        "regression",
        REG | {"symmetric", "nonnegative", "perfect"},
        0.0,
    ),
    "normalized_mean_absolute_error": ProbeMetric(
        lambda p, t: reg.normalized_mean_absolute_error(p, t, train_sd=2.0),
        "regression",
        REG | {"symmetric", "nonnegative", "perfect"},
        0.0,
    ),
    "pearson_r": ProbeMetric(reg.pearson_r, "regression", REG | {"symmetric", "range11", "affine"}),
    "spearman_rho": ProbeMetric(
        reg.spearman_rho, "regression", REG | {"symmetric", "range11", "affine"}
    ),
    "accuracy": ProbeMetric(
        cls.accuracy,
        "classification",
        frozenset({"permutation", "symmetric", "range01", "relabel", "perfect"}),
        1.0,
    ),
    "balanced_accuracy": ProbeMetric(
        _n(cls.balanced_accuracy),
        "classification",
        frozenset({"permutation", "range01", "relabel"}),
    ),
    "macro_f1": ProbeMetric(
        _n(cls.macro_f1), "classification", frozenset({"permutation", "range01", "relabel"})
    ),
    "span_class_accuracy": ProbeMetric(
        ev.span_class_accuracy,
        "classification",
        frozenset({"permutation", "symmetric", "range01", "relabel", "perfect"}),
        1.0,
    ),
    "frame_f1": ProbeMetric(ev.frame_f1, "frames", frozenset({"permutation", "range01"})),
    "mean_cosine": ProbeMetric(
        vec.mean_cosine,
        "vectors",
        frozenset({"permutation", "symmetric", "range11", "perfect"}),
        1.0,
    ),
}
#: Metrics whose inputs need more than one array per side (checked against the reference and
#: hand-computed cases in test_probe_metrics.py), per-class tables (span_class_support: against
#: the reference in test_probe_report.py) and helpers that compute no metric.
NOT_HERE = {
    "span_class_support",
    "event_scores",
    "detected_span_class_accuracy",
    "group_bootstrap_accuracy_ci",
    "per_class_recall",
    "per_class_precision",
    "valid_pairs",
    "average_ranks",
    "iou_matrix",
    "match_events",
    "decode_events",
    "confusion_matrix",
}
STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "regression": regression_pairs(),
    "classification": class_pairs(),
    "frames": frame_pairs(),
    "vectors": vector_triples(),
}


def _with(prop: str) -> list[str]:
    return sorted(n for n, m in PROBE_METRICS.items() if prop in m.properties)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _call(name: str, args: tuple[Any, ...]) -> float | None:
    return PROBE_METRICS[name].func(*args)


def test_every_probe_metric_is_registered() -> None:
    public = {
        name
        for module in (reg, cls, ev, vec)
        for name, f in vars(module).items()
        if inspect.isfunction(f)
        and f.__module__ == module.__name__
        and not name.startswith("_")
        and not name.endswith("_report")
    }
    assert public - NOT_HERE == set(PROBE_METRICS)
    assert all(m.properties <= set(PROPERTIES) for m in PROBE_METRICS.values())
    assert all(m.inputs in STRATEGIES for m in PROBE_METRICS.values())


def _permute(args: tuple[Any, ...], order: list[int]) -> tuple[Any, ...]:
    return tuple(np.asarray(a)[order] for a in args)


@pytest.mark.parametrize("name", _with("permutation"))
@given(data=st.data())
def test_permutation(name: str, data: st.DataObject) -> None:
    args = data.draw(STRATEGIES[PROBE_METRICS[name].inputs])
    order = data.draw(st.permutations(range(len(args[0]))))
    assert _same(_call(name, args), _call(name, _permute(args, list(order))))


@pytest.mark.parametrize("name", _with("symmetric"))
@given(data=st.data())
def test_symmetric(name: str, data: st.DataObject) -> None:
    args = data.draw(STRATEGIES[PROBE_METRICS[name].inputs])
    swapped = (args[1], args[0], *args[2:])
    if PROBE_METRICS[name].inputs == "regression":
        # NaN marks a reference without annotation: keep it on the reference side.
        p, t = np.asarray(args[0]), np.asarray(args[1])
        keep = ~np.isnan(t)
        args, swapped = (p[keep], t[keep]), (t[keep], p[keep])
    assert _same(_call(name, args), _call(name, swapped))


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [(n, 0.0, 1.0) for n in _with("range01")]
    + [(n, -1.0, 1.0) for n in _with("range11")]
    + [(n, 0.0, math.inf) for n in _with("nonnegative")],
)
@given(data=st.data())
def test_range(name: str, low: float, high: float, data: st.DataObject) -> None:
    value = _call(name, data.draw(STRATEGIES[PROBE_METRICS[name].inputs]))
    assert value is None or low - 1e-12 <= value <= high + 1e-12


@pytest.mark.parametrize("name", _with("shift"))
@given(data=st.data(), c=st.sampled_from([-2.0, -0.5, 0.25, 3.0]))
def test_shift(name: str, data: st.DataObject, c: float) -> None:
    p, t = (np.asarray(a, dtype=np.float64) for a in data.draw(regression_pairs()))
    assert _same(_call(name, (p, t)), _call(name, (p + c, t + c)))


@pytest.mark.parametrize("name", _with("affine"))
@given(data=st.data(), a=st.sampled_from([0.5, 2.0, 4.0]), b=st.sampled_from([-1.0, 0.0, 2.0]))
def test_affine(name: str, data: st.DataObject, a: float, b: float) -> None:
    p, t = (np.asarray(x, dtype=np.float64) for x in data.draw(regression_pairs()))
    before, after = _call(name, (p, t)), _call(name, (a * p + b, t))
    assert (before is None) == (after is None)
    if before is not None and after is not None:
        assert math.isclose(before, after, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("name", _with("relabel"))
@given(data=st.data())
def test_relabel(name: str, data: st.DataObject) -> None:
    true, pred = data.draw(class_pairs())
    mapping = np.asarray(data.draw(st.permutations(range(CLASSES))), dtype=np.int64)
    renamed = (mapping[np.asarray(true, dtype=np.int64)], mapping[np.asarray(pred, dtype=np.int64)])
    assert _same(_call(name, (true, pred)), _call(name, renamed))


@pytest.mark.parametrize("name", _with("perfect"))
@given(data=st.data())
def test_perfect(name: str, data: st.DataObject) -> None:
    metric = PROBE_METRICS[name]
    args = data.draw(STRATEGIES[metric.inputs])
    reference = np.asarray(args[1])
    if metric.inputs == "regression":
        reference = np.where(np.isnan(reference), 0.0, reference)
    perfect = (reference, reference, *args[2:])
    value = _call(name, perfect)
    assert value is None or math.isclose(value, metric.best or 0.0, abs_tol=1e-12)

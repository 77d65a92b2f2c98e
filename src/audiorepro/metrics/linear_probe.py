"""Probe definitions: a classifier (``linear-v1``) and a regressor (``ridge-v1``) trained on
frozen clip embeddings, each named, versioned and written out completely.

``linear-v1`` (classification)
------------------------------
1. Features: the clip embeddings as float64, ``X`` [N, D].
2. Standardization with the training split only: ``mu = mean(X_train)``, ``sd`` the
   population standard deviation of ``X_train`` (``ddof = 0``), counted as 1 for a feature
   that scikit-learn's ``StandardScaler`` treats as constant (its ``_is_constant_feature``
   rule); every split becomes ``Z = (X - mu) / sd``, computed scale-free (:func:`standardize`).
3. Multinomial logistic regression with an L2 penalty through scikit-learn, exactly
   ``LogisticRegression(C=C, solver="lbfgs", max_iter=1000, tol=1e-6, fit_intercept=True)``.
   With the classes ``k`` present in the training split, it minimizes over ``W`` [K, D] and
   ``b`` [K] (two classes: one vector ``w`` and ``b``, the logistic loss)::

       1/2 ||W||_F^2 + C * sum_i -log( exp(W_{y_i} z_i + b_{y_i}) / sum_k exp(W_k z_i + b_k) )

   (the intercept is not penalized). ``C`` is 1.0 unless the study sets it, or is chosen from
   a declared grid by a deterministic inner stratified k-fold over the training items only
   (:func:`choose_c`: ``StratifiedKFold(n_splits=k, shuffle=False)`` in the training items'
   order; the C of the highest mean inner accuracy; ties to the smallest C).
4. Prediction: the class with the highest decision value ``W_k z + b_k``; **ties go to the
   lowest class index** (two classes: class 1 when ``w z + b > 0``, else class 0).

``ridge-v1`` (regression)
-------------------------
The same features and standardization; ``Ridge(alpha=alpha, fit_intercept=True,
solver="cholesky")`` per target (alpha 1.0 unless set), minimizing
``||y - Z w - b||^2 + alpha ||w||^2`` (the intercept not penalized); the prediction is
``Z w + b``. No ties (a real value).

Reproducibility
---------------
The solver is iterative (L-BFGS, stopping at ``tol``) over float64 BLAS: another BLAS, CPU
code path or thread count changes the order of sums, hence the last bits of every iterate,
hence where the solver stops; a prediction whose top-two decision margin is that small can
flip. The probe's predictions and accuracies are therefore **tier b**. Each split reports its
smallest margin and ``near_ties``, its test items within :data:`NEAR_TIE` of a tie: on
another machine with the same scikit-learn a split's accuracy can move by at most
``near_ties / n_test``. (Measured by this module's tests: 1 vs 2 BLAS threads and a
permutation of the features move the decision values by about 1e-13, so the band of 1e-6 is
seven orders wide; this is an observation, not a bound proved for every solver path.)
Another scikit-learn version may change the solver: its version is recorded with the numbers.

The independent twin (:mod:`audiorepro.reference.linear_probe`) minimizes the same
objective with SciPy to a far smaller tolerance; scikit-learn's ``tol=1e-6`` stops about
1e-2 short of that optimum in decision units (50 classes, 512 dimensions). Parity: the
predictions agree on every test item whose margin under the twin is at least
:data:`TWIN_BAND`, and the accuracies differ by at most the items inside the band over the
test items.

Versions: :data:`DEFINITIONS_VERSION` changes when a definition here changes;
the scikit-learn version is recorded with every number it made.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.core.errors import param_error

#: The definitions' version (raise it when a definition changes).
DEFINITIONS_VERSION: Final = "1.0"
LINEAR: Final = "linear-v1"
RIDGE: Final = "ridge-v1"
DEFINITIONS: Final = (LINEAR, RIDGE)
#: Exactly the estimator ``linear-v1`` names (besides ``C``).
LOGISTIC_PARAMS: Final[dict[str, str | int | float]] = {
    "solver": "lbfgs",
    "max_iter": 1000,
    "tol": 1e-6,
    "fit_intercept": True,
}
#: A test item whose top-two decision values differ by less is counted in ``near_ties``.
NEAR_TIE: Final = 1e-6
#: The twin's margin below which its prediction may differ from scikit-learn's (decision
#: units: log-odds); see the module docstring.
TWIN_BAND: Final = 0.1
#: The inner folds of a grid search over C (when the study declares a grid).
INNER_FOLDS: Final = 5

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def standardize(train: npt.ArrayLike, *others: npt.ArrayLike) -> list[FloatArray]:
    """Float64 features standardized with the training split's mean and population SD
    (``ddof = 0``); a feature scikit-learn's ``StandardScaler`` treats as constant keeps SD 1.
    Returns the training split and each other split.

    Formula: ``z = (x - mean(X_train)) / sd(X_train)``, computed scale-free: each feature is
    first multiplied by ``2**-e`` (``2**e`` just above its largest training magnitude; a power
    of two, so exact), so that values near 1e306 do not overflow the squares of the deviation
    (nor values near 1e-306 underflow them); the result is bit-identical to the direct
    formula wherever that does not overflow or underflow. Constant: a feature whose variance
    ``var`` (of the scaled values, mean ``m``, ``n`` training items) satisfies scikit-learn's
    ``_is_constant_feature`` rule ``var <= n eps var + (n m eps)**2`` (``eps`` float64's;
    the rule is scale-free) has SD 1, so ``z = x - mean``: a feature whose values differ
    only in the last bits stays near 0 instead of becoming full-size noise. Ties: none.

    >>> tr, te = standardize([[1.0, 5.0], [3.0, 5.0]], [[2.0, 6.0]])
    >>> tr.tolist(), te.tolist()
    ([[-1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0]])
    >>> float(standardize([[0.1]] * 7, [[1.1]])[1][0, 0])  # constant: SD 1, not a rounding
    1.0
    >>> standardize([[1e306], [-1e306]])[0].tolist()  # no overflow
    [[1.0], [-1.0]]
    >>> abs(float(standardize([[1.0], [1.0 + 2**-52]])[0][0, 0])) < 1e-15  # near-constant
    True
    """
    x = np.asarray(train, dtype=np.float64)
    n = x.shape[0]
    # frexp: |x| = f * 2**e with 0.5 <= f < 1; dividing by 2**e is exact (no rounding).
    _, e = np.frexp(np.max(np.abs(x), axis=0))
    xs = np.ldexp(x, -e)
    mu = xs.mean(axis=0)
    var = xs.var(axis=0)
    eps = np.finfo(np.float64).eps
    constant = var <= n * eps * var + (n * mu * eps) ** 2
    # A constant feature's SD is 1 in the features' own units: 2**-e in the scaled ones.
    sd = np.where(constant, np.ldexp(1.0, -e), np.sqrt(var))

    def z(a: npt.ArrayLike) -> FloatArray:
        out: FloatArray = (np.ldexp(np.asarray(a, dtype=np.float64), -e) - mu) / sd
        return out

    return [(xs - mu) / sd, *(z(o) for o in others)]


def argmax_lowest(scores: npt.ArrayLike) -> IntArray:
    """Per row the column of the highest value, ties to the lowest column index.

    >>> argmax_lowest([[0.5, 0.5, 0.1], [0.0, 1.0, 1.0]]).tolist()
    [0, 1]
    """
    s = np.asarray(scores, dtype=np.float64)
    return np.asarray(np.argmax(s, axis=1), dtype=np.int64)  # numpy returns the first maximum


def top_two_margin(scores: npt.ArrayLike) -> FloatArray:
    """Per row the highest decision value minus the second highest (0: a tie).

    >>> top_two_margin([[0.5, 0.25, 0.1], [1.0, 1.0, 0.0]]).tolist()
    [0.25, 0.0]
    """
    s = np.sort(np.asarray(scores, dtype=np.float64), axis=1)
    return np.asarray(s[:, -1] - s[:, -2], dtype=np.float64)


@dataclass(frozen=True)
class LinearFit:
    """One ``linear-v1`` probe on one split: the C used, the test predictions (global class
    indices), the decision values [n_test, K] of the training classes ``classes``."""

    c: float
    classes: tuple[int, ...]
    pred: IntArray
    decision: FloatArray


def _decisions(z_train: FloatArray, y: IntArray, z_test: FloatArray, c: float) -> FloatArray:
    """The decision values [n_test, K] of ``LogisticRegression`` fitted with C = ``c``
    (two classes: ``[-d, d]``, so that the argmax rule is sklearn's ``d > 0``)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, **LOGISTIC_PARAMS)
    model.fit(z_train, y)
    d = np.asarray(model.decision_function(z_test), dtype=np.float64)
    return np.stack([-d, d], axis=1) if d.ndim == 1 else d


def choose_c(
    z_train: FloatArray, y: IntArray, grid: Sequence[float], *, folds: int = INNER_FOLDS
) -> float:
    """The C of ``grid`` with the highest mean accuracy over a deterministic inner stratified
    k-fold of the (standardized) training items; ties to the smallest C.

    Each inner split is standardized again from its own training part (as ``linear-v1``).

    >>> z = np.array([[0.0], [0.1], [0.2], [1.0], [1.1], [1.2]] * 2)
    >>> choose_c(z, np.array([0, 0, 0, 1, 1, 1] * 2), [0.1, 1.0], folds=2)
    0.1
    """
    from sklearn.model_selection import StratifiedKFold

    best: tuple[float, float] | None = None  # (-mean accuracy, C)
    splits = list(StratifiedKFold(n_splits=folds, shuffle=False).split(z_train, y))
    for c in sorted(float(v) for v in grid):
        accs = []
        for tr, te in splits:
            a, b = standardize(z_train[tr], z_train[te])
            classes = np.unique(y[tr])
            pred = classes[argmax_lowest(_decisions(a, y[tr], b, c))]
            accs.append(float(np.mean(pred == y[te])))
        key = (-float(np.mean(accs)), c)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[1]


def fit_linear_v1(
    x_train: npt.ArrayLike,
    y_train: npt.ArrayLike,
    x_test: npt.ArrayLike,
    *,
    c: float = 1.0,
    grid: Sequence[float] | None = None,
    inner_folds: int = INNER_FOLDS,
) -> LinearFit:
    """``linear-v1`` (module docstring): standardize with the training split, fit
    ``LogisticRegression(C, lbfgs, max_iter=1000, tol=1e-6)``, predict the class of the
    highest decision value, ties to the lowest class index. ``grid``: choose C by
    :func:`choose_c` instead of ``c``.

    >>> x = np.array([[0.0, 1.0], [0.2, 0.9], [1.0, 0.0], [0.9, 0.2]])
    >>> fit = fit_linear_v1(x, [0, 0, 2, 2], [[0.1, 1.0], [1.0, 0.1]])
    >>> fit.pred.tolist(), fit.classes, fit.c
    ([0, 2], (0, 2), 1.0)
    """
    y = np.asarray(y_train, dtype=np.int64)
    classes = np.unique(y)
    if classes.size < 2:
        raise param_error(
            "y_train", "fit_linear_v1", "labels of at least two classes", int(classes.size)
        )
    z_train, z_test = standardize(x_train, x_test)
    if grid is not None:
        c = choose_c(z_train, y, grid, folds=inner_folds)
    if not (np.isfinite(c) and c > 0):
        raise param_error("c", "fit_linear_v1", "a finite number > 0", c)
    decision = _decisions(z_train, y, z_test, float(c))
    pred = classes[argmax_lowest(decision)].astype(np.int64)
    return LinearFit(float(c), tuple(int(k) for k in classes), pred, decision)


def fit_ridge_v1(
    x_train: npt.ArrayLike, y_train: npt.ArrayLike, x_test: npt.ArrayLike, *, alpha: float = 1.0
) -> FloatArray:
    """``ridge-v1`` (module docstring): the same standardization, ``Ridge(alpha,
    fit_intercept=True, solver="cholesky")``, the predictions of the test split ([n] or
    [n, K] as ``y_train``).

    >>> fit_ridge_v1([[0.0], [1.0], [2.0]], [1.0, 3.0, 5.0], [[3.0]], alpha=1e-12).round(6).tolist()
    [7.0]
    """
    from sklearn.linear_model import Ridge

    if not (np.isfinite(alpha) and alpha > 0):
        raise param_error("alpha", "fit_ridge_v1", "a finite number > 0", alpha)
    z_train, z_test = standardize(x_train, x_test)
    model = Ridge(alpha=float(alpha), fit_intercept=True, solver="cholesky")
    model.fit(z_train, np.asarray(y_train, dtype=np.float64))
    return np.asarray(model.predict(z_test), dtype=np.float64)


class DefinitionRecord(TypedDict):
    """What a probe's numbers depend on besides its inputs (:func:`definition_record`)."""

    definition: str
    definitions_version: str
    #: the scikit-learn estimator's class and fixed parameters
    estimator: dict[str, str | int | float | bool]
    C: float | None
    grid: list[float] | None
    inner_folds: int | None
    near_tie: float
    twin_band: float
    scikit_learn: str


def definition_record(c: float | None, grid: Sequence[float] | None) -> DefinitionRecord:
    """What a probe's numbers depend on besides its inputs: the definition, its version, its
    settings and the scikit-learn that fitted it.

    >>> r = definition_record(1.0, None); r["definition"], r["C"], r["grid"]
    ('linear-v1', 1.0, None)
    """
    import sklearn

    return {
        "definition": LINEAR,
        "definitions_version": DEFINITIONS_VERSION,
        "estimator": {"class": "sklearn.linear_model.LogisticRegression", **LOGISTIC_PARAMS},
        "C": c,
        "grid": None if grid is None else [float(v) for v in grid],
        "inner_folds": None if grid is None else INNER_FOLDS,
        "near_tie": NEAR_TIE,
        "twin_band": TWIN_BAND,
        "scikit_learn": sklearn.__version__,
    }


@dataclass(frozen=True)
class Split:
    """One train/test split of a protocol: its name (the held-out fold, or ``test``) and the
    item indices of each side, in item order."""

    name: str
    train: IntArray
    test: IntArray


def leave_one_fold_out(folds: Sequence[str], order: Sequence[str]) -> list[Split]:
    """One split per fold of ``order``: that fold's items the test split, the rest training.

    >>> [(s.name, s.train.tolist(), s.test.tolist()) for s in leave_one_fold_out("abab", "ab")]
    [('a', [1, 3], [0, 2]), ('b', [0, 2], [1, 3])]
    """
    f = np.asarray(list(folds))
    return [
        Split(
            str(k), np.flatnonzero(f != k).astype(np.int64), np.flatnonzero(f == k).astype(np.int64)
        )
        for k in order
    ]


def declared_split(folds: Sequence[str], train: Sequence[str], test: Sequence[str]) -> list[Split]:
    """The one split a study declares: items of the ``train`` folds against the ``test`` folds.

    >>> s = declared_split("aabc", ["a"], ["c"])[0]; s.name, s.train.tolist(), s.test.tolist()
    ('test', [0, 1], [3])
    """
    f = np.asarray(list(folds))
    tr = np.flatnonzero(np.isin(f, list(train))).astype(np.int64)
    te = np.flatnonzero(np.isin(f, list(test))).astype(np.int64)
    return [Split("test", tr, te)]


@dataclass(frozen=True)
class FoldResult:
    """One split's probe: the fit, its test accuracy, its near-tie count and smallest margin."""

    split: Split
    fit: LinearFit
    accuracy: float
    near_ties: int
    min_margin: float


def probe_splits(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    splits: Sequence[Split],
    *,
    c: float = 1.0,
    grid: Sequence[float] | None = None,
) -> list[FoldResult]:
    """``linear-v1`` on every split; accuracy = correct / test items of the split.

    >>> x = np.array([[0.0], [1.0], [0.1], [1.1]]); y = np.array([0, 1, 0, 1])
    >>> [r.accuracy for r in probe_splits(x, y, leave_one_fold_out("aabb", "ab"))]
    [1.0, 1.0]
    """
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.int64)
    out = []
    for s in splits:
        fit = fit_linear_v1(xa[s.train], ya[s.train], xa[s.test], c=c, grid=grid)
        margin = top_two_margin(fit.decision)
        correct = int(np.count_nonzero(fit.pred == ya[s.test]))
        out.append(
            FoldResult(
                split=s,
                fit=fit,
                accuracy=correct / int(s.test.size),
                near_ties=int(np.count_nonzero(margin < NEAR_TIE)),
                min_margin=float(margin.min()),
            )
        )
    return out


def mean_accuracy(results: Sequence[FoldResult]) -> float:
    """The unweighted mean of the splits' accuracies (what HEAR and the papers report for
    ESC-50's five folds), ``math.fsum / n``.

    >>> mean_accuracy([])
    Traceback (most recent call last):
    ...
    ValueError: no splits
    """
    if not results:
        raise ValueError("no splits")
    return math.fsum(r.accuracy for r in results) / len(results)

"""Reference ``linear-v1`` and ``ridge-v1`` probes: float64 NumPy/SciPy, written from the
definitions alone (no code shared with :mod:`audiorepro.metrics`, no scikit-learn).

``linear-v1``: standardize with the training split's mean and population SD (the SD of a
feature constant by scikit-learn's rule counts as 1), scale-free; minimize, over ``W``
[K, D] and ``b`` [K] of the classes in the training split,

    1/2 ||W||_F^2 + C * sum_i ( logsumexp_k(W_k z_i + b_k) - (W_{y_i} z_i + b_{y_i}) )

(two classes: one vector ``w``, ``b`` and the logistic loss ``log(1 + exp(-t_i (w z_i + b)))``
with ``t_i = +-1``), here divided by ``C n`` (the same minimizer, better scaled) and minimized
by ``scipy.optimize.minimize(method="L-BFGS-B")`` with the exact gradient and a tolerance far
below scikit-learn's; predict the class of the highest decision value, ties to the lowest
class index.

``ridge-v1``: the same standardization; the intercept is the training mean of ``y`` and
``w`` solves ``(Z_c^T Z_c + alpha I) w = Z_c^T (y - mean y)`` (``Z_c`` the centred training
features), by ``scipy.linalg.solve``.

Agreement (:func:`reference_linear_v1` against the harness): the predictions agree on every
test item whose top-two decision margin is above the near-tie band; the accuracies then
differ by at most the near-tie items over the test items.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
from scipy.special import logsumexp


def _standardized(train: Any, test: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    a = np.array(train, dtype=np.float64)
    b = np.array(test, dtype=np.float64)
    n = a.shape[0]
    # Standardization does not depend on the features' scale: divide each by its largest
    # training magnitude first, so that 1e306 does not overflow the squares below.
    top = np.abs(a).max(axis=0)
    top[top == 0] = 1.0
    a, b = a / top, b / top
    mean = a.sum(axis=0) / n
    var = ((a - mean) ** 2).sum(axis=0) / n
    # Constant as StandardScaler decides it (Chan, Golub and LeVeque's bound on the rounding
    # error of the two-pass variance): var <= n eps var + (n mean eps)^2; its SD counts as 1
    # in the features' own units.
    eps = 2.0**-52
    sd = np.sqrt(var)
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    sd[constant] = 1.0 / top[constant]
    return (a - mean) / sd, (b - mean) / sd


def _multinomial(theta: Any, z: Any, onehot: Any, scale: float) -> tuple[float, Any]:
    k, d = onehot.shape[1], z.shape[1]
    w, b = theta[: k * d].reshape(k, d), theta[k * d :]
    s = z @ w.T + b
    lse = logsumexp(s, axis=1)
    loss = float(np.sum(lse) - np.sum(s * onehot))
    p = np.exp(s - lse[:, None])
    g = p - onehot
    value = scale * 0.5 * float(np.sum(w * w)) + loss
    grad = np.concatenate([(scale * w + g.T @ z).ravel(), g.sum(axis=0)])
    return value / z.shape[0], grad / z.shape[0]


def _binary(theta: Any, z: Any, t: Any, scale: float) -> tuple[float, Any]:
    w, b = theta[:-1], theta[-1]
    m = t * (z @ w + b)
    loss = float(np.sum(np.logaddexp(0.0, -m)))
    g = -t * np.exp(-np.logaddexp(0.0, m))  # d loss / d (w z + b)
    value = scale * 0.5 * float(w @ w) + loss
    grad = np.concatenate([scale * w + z.T @ g, [g.sum()]])
    return value / z.shape[0], grad / z.shape[0]


def reference_linear_v1(
    x_train: Any, y_train: Any, x_test: Any, *, c: float = 1.0
) -> tuple[list[int], np.ndarray[Any, Any]]:
    """The test predictions (class labels) and the decision values [n_test, K] of the
    training classes in ascending order (two classes: ``[-d, d]``).

    >>> pred, _ = reference_linear_v1([[0.0], [0.1], [1.0], [1.1]], [3, 3, 5, 5], [[0.2], [0.9]])
    >>> pred
    [3, 5]
    """
    y = [int(v) for v in np.asarray(y_train).tolist()]
    classes = sorted(set(y))
    z, zt = _standardized(x_train, x_test)
    d, k = z.shape[1], len(classes)
    scale = 1.0 / float(c)  # the objective divided by C: 1/(2C) ||W||^2 + sum of losses
    options = {"maxiter": 100000, "maxfun": 200000, "gtol": 1e-13, "ftol": 1e-16, "maxcor": 30}
    if k == 2:
        t = np.array([1.0 if v == classes[1] else -1.0 for v in y])
        res = scipy.optimize.minimize(
            _binary,
            np.zeros(d + 1),
            args=(z, t, scale),
            jac=True,
            method="L-BFGS-B",
            options=options,
        )
        dec = zt @ res.x[:-1] + res.x[-1]
        scores = np.stack([-dec, dec], axis=1)
    else:
        onehot = np.zeros((len(y), k))
        for i, v in enumerate(y):
            onehot[i, classes.index(v)] = 1.0
        res = scipy.optimize.minimize(
            _multinomial,
            np.zeros(k * d + k),
            args=(z, onehot, scale),
            jac=True,
            method="L-BFGS-B",
            options=options,
        )
        scores = zt @ res.x[: k * d].reshape(k, d).T + res.x[k * d :]
    pred = []
    for row in scores.tolist():
        best = 0
        for j in range(1, len(row)):
            if row[j] > row[best]:  # strictly greater: a tie keeps the lower index
                best = j
        pred.append(classes[best])
    return pred, scores


def reference_ridge_v1(
    x_train: Any, y_train: Any, x_test: Any, *, alpha: float = 1.0
) -> np.ndarray[Any, Any]:
    """The ``ridge-v1`` predictions of the test split, from the normal equations.

    >>> reference_ridge_v1([[0.0], [1.0], [2.0]], [1.0, 3.0, 5.0], [[3.0]], alpha=1e-12).round(6)
    array([7.])
    """
    z, zt = _standardized(x_train, x_test)
    y = np.array(y_train, dtype=np.float64)
    zc = z - z.sum(axis=0) / z.shape[0]  # zero already, up to rounding
    ym = y.sum(axis=0) / y.shape[0]
    lhs = zc.T @ zc + float(alpha) * np.eye(z.shape[1])
    w = scipy.linalg.solve(lhs, zc.T @ (y - ym), assume_a="pos")
    return np.asarray(zt @ w + ym, dtype=np.float64)

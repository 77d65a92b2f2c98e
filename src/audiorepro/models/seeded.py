"""Random weights from a seed that are the same bits on every CPU.

torch's CPU samplers are not: ``normal_``, ``trunc_normal_`` and friends take vectorized paths
(with their own ``log``, ``cos`` and ``erfinv``) chosen by the CPU's instruction set at run
time, so one seed gave other tiny models, other weight hashes and other extraction cache keys
under another dispatch (``ATEN_CPU_CAPABILITY=default`` against AVX-512 on one machine, found
by ``tox -e crosscpu``). Integers from numpy's PCG64 stream, times one correctly rounded
float64 scale, rounded once to the tensor's dtype, involve no transcendental function and no
CPU-specific code path.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def uniform_fill(param: Any, std: float, rng: np.random.Generator) -> None:
    """Fill ``param`` with values of mean 0 and standard deviation ``std`` drawn from ``rng``."""
    import torch

    # The sum of four uniform integers (Irwin-Hall): bell-shaped like the normal initializers
    # it replaces, exact in integers, one rounding when scaled.
    ints = rng.integers(-(2**23), 2**23, size=(4, param.numel()), dtype=np.int64).sum(axis=0)
    values = ints.astype(np.float64) * (std * math.sqrt(3.0) / 2**24)
    param.copy_(torch.from_numpy(values.reshape(tuple(param.shape))).to(param.dtype))


def redraw_initialization(model: Any, seed: int) -> None:
    """Redraw every randomly initialized trainable tensor of ``model`` from ``seed``.

    Each keeps its initializer's spread, rounded to two significant digits (so that the last
    bits of torch's CPU-dependent draw do not change it; ``tox -e crosscpu`` checks the
    resulting hashes across dispatch variants); constant initializations (norm weights and
    biases, logit scales) are exact everywhere and are kept.
    """
    import torch

    rng = np.random.Generator(np.random.PCG64(seed))
    with torch.no_grad():
        for _, param in sorted(model.named_parameters()):
            if not param.requires_grad or param.numel() < 2 or not param.is_floating_point():
                continue
            if bool((param == param.reshape(-1)[0]).all()):
                continue
            std = float(param.double().std())
            uniform_fill(param, float(f"{std:.2g}"), rng)

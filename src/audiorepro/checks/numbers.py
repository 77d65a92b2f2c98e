"""The one typed view of a run's numbers: :class:`NumberRecord`, what every study kind's
``numbers`` (:mod:`audiorepro.runner.kinds`) yields for every number of its bundle, and the
walk that finds them. It lives here, below the runner, so that the checks that read a run's
numbers back (``diff``) read the same records the kinds write.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

#: Which way a number is better: ``higher``, ``lower``, or None (a count, a setting).
Better = Literal["higher", "lower"] | None
#: Its reproducibility tier (:mod:`audiorepro.checks.tiers`): ``a`` equal to the last bit on
#: every machine (the exact engine over a shipped dump, float64 over shipped prediction files),
#: ``b`` within a derived tolerance (CPU-extracted embeddings, torch float32), None not a
#: computed value (a count of the inputs, a setting).
NumberTier = Literal["a", "b"] | None


@dataclass(frozen=True)
class Identities:
    """What a number depends on: the dump's SHA-256, the weights' SHA-256, the settings that
    made it (a preprocessing or study setting, as ``key=value``), the input files' SHA-256.
    Empty for a study-level number."""

    dump: str | None = None
    weights: str | None = None
    settings: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class NumberRecord:
    """One number of a run: its readable ``path`` (unique within a bundle, cells by id), its
    ``where`` (the keys and list indices that reach it in the bundle), value, direction, tier
    and identities."""

    path: str
    where: tuple[str | int, ...]
    value: float | int
    direction: Better
    tier: NumberTier
    identities: Identities = field(default_factory=Identities)


Leaf = tuple[tuple[str | int, ...], float | int]


def numeric_leaves(node: Any, where: tuple[str | int, ...] = ()) -> Iterator[Leaf]:
    """Every int or float (not a bool, not None) under ``node``, with the keys and indices
    that reach it, in the bundle's order.

    >>> list(numeric_leaves({"a": [1, True, None, {"b": 0.5}], "c": "x"}))
    [(('a', 0), 1), (('a', 3, 'b'), 0.5)]
    """
    if isinstance(node, dict):
        for key, value in node.items():
            yield from numeric_leaves(value, (*where, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from numeric_leaves(value, (*where, i))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield where, node


def readable(where: tuple[str | int, ...]) -> str:
    """A ``where`` as a path: keys and indices joined by ``/``.

    >>> readable(("cells", 0, "metrics", "t2a", "r@1"))
    'cells/0/metrics/t2a/r@1'
    """
    return "/".join(str(part) for part in where)

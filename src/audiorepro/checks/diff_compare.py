"""The comparison of two :class:`~audiorepro.checks.diff.RunView` s: per number equal or
moved, the bound its differences allow, its causes, and the verdicts per cell and run.

Pure: the one thing that needs the runs' files, a tier-b number's derived tolerance, is a
function handed in (:mod:`audiorepro.checks.diff_load` reads it from the runs' dumps).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audiorepro.checks.diff import (
    ENVIRONMENT,
    KINDS,
    VERDICTS,
    Identity,
    Kind,
    Number,
    NumberRecord,
    RunView,
    Verdict,
    is_nan,
)
from audiorepro.checks.tiers import Tier

#: A tier-b number's tolerance from the runs' embeddings, or None when it cannot be derived
#: (no dump at hand): such a move is not within tier.
Tolerance = Callable[[NumberRecord], float | None]


@dataclass(frozen=True)
class Difference:
    """One identity that differs between the runs."""

    key: str
    kind: Kind
    scope: str
    a: str  #: what A records, in words
    b: str
    recorded: bool  #: False: one run does not record it (a bundle alone has no manifest)


@dataclass(frozen=True)
class NumberDiff:
    path: str
    cell: str
    a: Number
    b: Number
    delta: float | None  #: |b - a|; None when either is missing or not a number
    tier: Tier
    tolerance: float | None  #: the bound that applied (0 for tier a)
    within_tier: bool
    causes: tuple[str, ...]  #: keys of the differing identities it depends on
    verdict: Verdict


@dataclass(frozen=True)
class Cause:
    """A differing identity with the numbers it moved (none: it moved nothing)."""

    difference: Difference
    numbers: tuple[str, ...]
    largest_delta: float | None


@dataclass(frozen=True)
class CellVerdict:
    cell: str
    verdict: Verdict
    moved: int
    numbers: int


@dataclass(frozen=True)
class DiffResult:
    verdict: Verdict
    strict: bool
    kind: str
    study: str
    cells: tuple[CellVerdict, ...]
    causes: tuple[Cause, ...]  #: differences that moved numbers, then those that moved none
    numbers: tuple[NumberDiff, ...]  #: every number: unexplained first, then by |delta|


def _words(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def _short(value: Any) -> str:
    """A recorded value in words, whole: never cut (the terminal wraps it, :mod:`.diff_report`)."""
    return _words(value)


def _flat(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key in sorted(value, key=str):
            out |= _flat(value[key], f"{path}.{key}" if path else str(key))
        return out
    return {path: value}


def _changed(a: Any, b: Any) -> tuple[Any, Any]:
    """The parts of two records that differ (the leaves of two tables), else both.

    >>> _changed({"t": {"OMP": None, "cpus": 2}}, {"t": {"OMP": "1", "cpus": 2}})
    ({'t.OMP': None}, {'t.OMP': '1'})
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        fa, fb = _flat(a), _flat(b)
        keys = sorted(k for k in set(fa) | set(fb) if fa.get(k, ...) != fb.get(k, ...))
        return {k: fa.get(k) for k in keys}, {k: fb.get(k) for k in keys}
    return a, b


def _counts(a: Any, b: Any) -> str:
    """Counts such as ``5 of 6 clips`` when a record's ``n_*`` fields differ.

    >>> _counts({"n_clips": 975}, {"n_clips": 957})
    '957 of 975 clips'
    """
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        return ""
    parts = []
    for key in sorted(set(a) & set(b)):
        na, nb = a[key], b[key]
        if key.startswith("n_") and isinstance(na, int) and isinstance(nb, int) and na != nb:
            what = key[2:]
            parts.append(f"{nb} of {na} {what}" if nb < na else f"{nb} {what} vs {na}")
    return ", ".join(parts)


def difference(key: str, a: Identity | None, b: Identity | None) -> Difference | None:
    """How identity ``key`` differs between the runs, or None when it does not.

    An environment identity that one run does not record (a bundle alone) is a difference
    that is ``not recorded``: it may explain a tier-b move, never a tier-a one.
    """
    one = a or b
    assert one is not None
    if a is not None and b is not None and a.canonical == b.canonical:
        return None
    if a is None or b is None:
        missing = "not recorded" if one.scope.endswith("run") else "absent"
        return Difference(
            key, one.kind, one.scope,
            _short(a.value) if a else missing, _short(b.value) if b else missing,
            recorded=one.kind not in ENVIRONMENT,
        )  # fmt: skip
    va, vb = _changed(a.value, b.value)
    counts = _counts(a.value, b.value)
    return Difference(
        key, one.kind, one.scope, _short(va), _short(vb) + (f" ({counts})" if counts else ""),
        recorded=True,
    )  # fmt: skip


def differences(a: RunView, b: RunView) -> dict[str, Difference]:
    """Every identity that differs (environment identities neither run records are skipped)."""
    out = {}
    for key in sorted(set(a.identities) | set(b.identities)):
        found = difference(key, a.identities.get(key), b.identities.get(key))
        if found is not None:
            out[key] = found
    for kind in ("software", "hardware", "threads", "image"):
        # a run with no manifest on either side records no environment: not a difference
        for scope in {i.scope for i in [*a.identities.values(), *b.identities.values()]}:
            if scope.endswith("run"):
                key = f"{scope}:{kind}"
                if key not in a.identities and key not in b.identities:
                    out[key] = Difference(key, kind, scope, "not recorded", "not recorded", False)
    return out


def _delta(a: Number, b: Number) -> float | None:
    if a is None or b is None or is_nan(a) or is_nan(b):
        return None
    return abs(float(b) - float(a))


def _equal(a: Number, b: Number) -> bool:
    return (is_nan(a) and is_nan(b)) or ((a is None) == (b is None) and a == b)


def compare_number(
    record: NumberRecord,
    a: Number,
    b: Number,
    diffs: Mapping[str, Difference],
    *,
    tolerance: Tolerance,
    strict: bool,
    in_both: bool = True,
) -> NumberDiff:
    """One number: equal, or moved with its causes and whether its tier's bound holds (a
    number that only one run has moved, by an unknown delta)."""
    causes = tuple(sorted(k for k in record.depends_on if k in diffs and diffs[k].recorded))
    if not causes:  # what a bundle alone does not record may explain it, nothing recorded does
        causes = tuple(sorted(k for k in record.depends_on if k in diffs))
    delta = _delta(a, b) if in_both else None
    if in_both and _equal(a, b):
        return NumberDiff(record.path, record.cell, a, b, 0.0, record.tier, 0.0, True, causes,
                          "identical")  # fmt: skip
    verdict: Verdict
    tol: float | None = 0.0
    if not causes:
        verdict, within = "changed, unexplained", False
    elif record.tier == "b" and all(diffs[k].kind in ENVIRONMENT for k in causes):
        tol = tolerance(record)
        within = tol is not None and delta is not None and delta <= tol
        verdict = "within tier" if within and not strict else "changed, explained"
    else:
        tol, within, verdict = None, False, "changed, explained"
    return NumberDiff(record.path, record.cell, a, b, delta, record.tier, tol, within, causes,
                      verdict)  # fmt: skip


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The run's (or a cell's) verdict: its worst number's.

    >>> worst(["identical", "within tier"]), worst([])
    ('within tier', 'identical')
    """
    return max(verdicts, key=VERDICTS.index, default="identical")


def _order(n: NumberDiff) -> tuple[int, float, str]:
    moved = n.verdict != "identical"
    return (
        -VERDICTS.index(n.verdict) if moved else 1,
        -(n.delta if n.delta is not None else float("inf")),
        n.path,
    )


def _causes(diffs: Mapping[str, Difference], numbers: Sequence[NumberDiff]) -> tuple[Cause, ...]:
    # one pass over the moved numbers (a 1,000-cell run has thousands of differences and
    # hundreds of thousands of numbers: differences x numbers took minutes)
    hits: dict[str, list[NumberDiff]] = {key: [] for key in diffs}
    for n in numbers:
        if n.verdict != "identical":
            for key in n.causes:
                if key in hits:
                    hits[key].append(n)
    out = []
    for key, d in diffs.items():
        hit = hits[key]
        deltas = [n.delta for n in hit if n.delta is not None]
        out.append(Cause(d, tuple(n.path for n in hit), max(deltas, default=None)))
    return tuple(
        sorted(out, key=lambda c: (not c.numbers, KINDS.index(c.difference.kind), c.difference.key))
    )


def compare_runs(
    a: RunView, b: RunView, *, tolerance: Tolerance, strict: bool = False
) -> DiffResult:
    """Every number of either run compared, with the causes and verdicts."""
    diffs = differences(a, b)
    numbers = []
    for path in sorted(set(a.numbers) | set(b.numbers)):
        ra, rb = a.numbers.get(path), b.numbers.get(path)
        record = ra or rb
        assert record is not None
        if ra is not None and rb is not None:
            record = ra if ra.tier == "a" and rb.tier == "a" else (ra if ra.tier == "b" else rb)
        va = None if ra is None else ra.value
        vb = None if rb is None else rb.value
        both = ra is not None and rb is not None
        numbers.append(
            compare_number(record, va, vb, diffs, tolerance=tolerance, strict=strict, in_both=both)
        )
    numbers.sort(key=_order)
    by_cell: dict[str, list[NumberDiff]] = {}
    for n in numbers:
        by_cell.setdefault(n.cell, []).append(n)
    cells = tuple(
        CellVerdict(
            cell, worst([n.verdict for n in ns]), sum(n.verdict != "identical" for n in ns), len(ns)
        )
        for cell, ns in sorted(by_cell.items())
    )
    cells = tuple(sorted(cells, key=lambda c: (-VERDICTS.index(c.verdict), c.cell)))  # worst first
    return DiffResult(
        verdict=worst([c.verdict for c in cells]),
        strict=strict,
        kind=a.kind,
        study=a.study,
        cells=cells,
        causes=_causes(diffs, numbers),
        numbers=tuple(numbers),
    )

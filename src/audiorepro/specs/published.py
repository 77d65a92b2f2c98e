"""Published-values files (``audiorepro.published/1``, TOML): values to check against dumps.

A published-values file lists cells: a dump file name, what it holds, the profile and tie
policy the values were computed under, a tolerance, and the values by metric name (``t2a/r@1``
for canonical metrics, the peer's own names for other profiles). :mod:`audiorepro.checks.verify`
recomputes and compares them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.core.io import read_toml
from audiorepro.metrics.profiles import PROFILES
from audiorepro.metrics.retrieval import DIRECTIONS, METRICS, TIE_POLICIES

SCHEMA = "audiorepro.published/1"
CELL_KEYS = {"dump", "model", "dataset", "n_clips", "n_captions", "sha256", "profile",
             "tie_policy", "tolerance", "values"}  # fmt: skip
REQUIRED_CELL_KEYS = {"dump", "profile", "tolerance", "values"}


@dataclass(frozen=True)
class PublishedCell:
    dump: str
    profile: str
    tie_policy: str
    tolerance: float
    values: dict[str, float]
    n_clips: int | None = None
    n_captions: int | None = None
    sha256: str | None = None
    model: str | None = None
    dataset: str | None = None


def load_published(path: str | Path) -> list[PublishedCell]:
    """Read and validate a published-values file; problems name the file and the key."""
    path = Path(path)
    name = str(path)
    doc = read_toml(path, what="a published-values .toml", schema=SCHEMA)
    unknown = sorted(set(doc) - {"schema", "provenance", "cell", "finding"})
    if unknown:
        raise UserError(
            "is not a top-level key (expected schema, provenance, cell, finding)",
            source=name,
            key=unknown[0],
        )
    cells = doc.get("cell")
    if not isinstance(cells, list) or not cells:
        raise UserError("is missing or empty (expected [[cell]] tables)", source=name, key="cell")
    return [_cell(c, i, name) for i, c in enumerate(cells)]


def _cell(c: dict[str, Any], i: int, name: str) -> PublishedCell:
    def fail(key: str, msg: str) -> UserError:
        return UserError(msg, source=name, key=f"cell[{i}].{key}")

    for key in sorted(set(c) - CELL_KEYS):
        raise fail(key, "is not a cell key (expected " + ", ".join(sorted(CELL_KEYS)) + ")")
    for key in sorted(REQUIRED_CELL_KEYS - set(c)):
        raise fail(key, "is missing (required)")
    profile = c["profile"]
    if profile not in PROFILES:
        raise fail("profile", f"is {profile!r}, expected one of {', '.join(PROFILES)}")
    tie_policy = c.get("tie_policy", "pessimistic")
    if tie_policy not in TIE_POLICIES:
        raise fail("tie_policy", f"is {tie_policy!r}, expected pessimistic or optimistic")
    tol = c["tolerance"]
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0:
        raise fail("tolerance", f"is {tol!r}, expected a number >= 0")
    values = c["values"]
    if not isinstance(values, dict) or not values:
        raise fail("values", "is empty, expected metric = value pairs")
    for metric, value in values.items():
        if profile == "canonical":
            direction, _, base = metric.partition("/")
            if direction not in DIRECTIONS or base not in METRICS:
                raise fail(
                    f"values.{metric}",
                    "is not a canonical metric name (expected "
                    "t2a/NAME or a2t/NAME with NAME one of " + ", ".join(METRICS) + ")",
                )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise fail(f"values.{metric}", f"is {value!r}, expected a finite number")
    sha = c.get("sha256")
    if sha is not None and sha != PLACEHOLDER and not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise fail("sha256", f"is {sha!r}, expected 64 hex digits or {PLACEHOLDER!r}")
    return PublishedCell(
        dump=str(c["dump"]),
        profile=profile,
        tie_policy=tie_policy,
        tolerance=float(tol),
        values={k: float(v) for k, v in values.items()},
        n_clips=c.get("n_clips"),
        n_captions=c.get("n_captions"),
        sha256=None if sha in (None, PLACEHOLDER) else sha,
        model=c.get("model"),
        dataset=c.get("dataset"),
    )

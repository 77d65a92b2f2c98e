"""Verify published values: recompute each from its dump and compare, cell by cell.

A published-values file (``audiorepro.published/1``, TOML) lists cells: a dump file name,
what it holds, the profile and tie policy the values were computed under, a tolerance, and
the values by metric name (``t2a/r@1`` for canonical metrics, the peer's own names for other
profiles). Each value is PASS (``|reproduced - published| <= tolerance``), FAIL, or NOT
VERIFIED when its inputs are not available here (never a pass).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audiorepro.dump import load_dump
from audiorepro.errors import UserError
from audiorepro.io import read_toml
from audiorepro.metrics.profiles import PROFILES, compute_profile
from audiorepro.metrics.retrieval import DIRECTIONS, METRICS, TIE_POLICIES

SCHEMA = "audiorepro.published/1"
PLACEHOLDER_HASH = "to be filled on first verified download"
CELL_KEYS = {"dump", "model", "dataset", "n_clips", "n_captions", "sha256", "profile",
             "tie_policy", "tolerance", "values"}  # fmt: skip
REQUIRED_CELL_KEYS = {"dump", "profile", "tolerance", "values"}
PASS, FAIL, NOT_VERIFIED = "PASS", "FAIL", "NOT VERIFIED"


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
    if sha is not None and sha != PLACEHOLDER_HASH and not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise fail("sha256", f"is {sha!r}, expected 64 hex digits or {PLACEHOLDER_HASH!r}")
    return PublishedCell(
        dump=str(c["dump"]),
        profile=profile,
        tie_policy=tie_policy,
        tolerance=float(tol),
        values={k: float(v) for k, v in values.items()},
        n_clips=c.get("n_clips"),
        n_captions=c.get("n_captions"),
        sha256=None if sha in (None, PLACEHOLDER_HASH) else sha,
        model=c.get("model"),
        dataset=c.get("dataset"),
    )


def verify_published(cells: list[PublishedCell], dumps_dir: str | Path) -> dict[str, Any]:
    """One row per published value; ``passed`` only when every row passes."""
    rows: list[dict[str, Any]] = []
    for cell in cells:
        path = Path(dumps_dir) / cell.dump
        reason = None
        reproduced: dict[str, float] = {}
        if not path.is_file():
            reason = f"dump {cell.dump} is not available in {dumps_dir}"
        else:
            dump = load_dump(path)
            if cell.sha256 is not None and dump.sha256 != cell.sha256:
                reason = f"dump's sha256 {dump.sha256} differs from the recorded {cell.sha256}"
            elif cell.n_clips is not None and dump.n_clips != cell.n_clips:
                reason = f"dump has {dump.n_clips} clips, the published cell {cell.n_clips}"
            elif cell.n_captions is not None and dump.n_captions != cell.n_captions:
                reason = (
                    f"dump has {dump.n_captions} captions, the published cell {cell.n_captions}"
                )
            else:
                reproduced = compute_profile(
                    dump,
                    cell.profile,
                    tie_policy=cell.tie_policy,  # type: ignore[arg-type]
                ).metrics
        rows += value_rows(cell.dump, cell.values, cell.tolerance, reproduced, reason, cell.profile)
    return summarize(rows)


def value_rows(
    cell: str,
    values: dict[str, float],
    tolerance: float,
    reproduced: dict[str, float],
    reason: str | None,
    profile: str,
) -> list[dict[str, Any]]:
    """One row per published value: PASS, FAIL, or NOT VERIFIED (with the reason)."""
    rows = []
    for metric, published in values.items():
        row: dict[str, Any] = {
            "cell": cell,
            "metric": metric,
            "published": published,
            "tolerance": tolerance,
            "reproduced": None,
            "delta": None,
            "status": NOT_VERIFIED,
            "reason": reason,
        }
        if reason is None:
            if metric not in reproduced:
                row["reason"] = f"profile {profile} has no metric {metric}"
            else:
                value = reproduced[metric]
                row.update(
                    reproduced=value,
                    delta=value - published,
                    status=PASS if abs(value - published) <= tolerance else FAIL,
                )
        rows.append(row)
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in (PASS, FAIL, NOT_VERIFIED)}
    return {"rows": rows, "counts": counts, "passed": counts[PASS] == len(rows)}


def verify_lines(report: dict[str, Any]) -> list[str]:
    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.6g}"

    lines = []
    for r in report["rows"]:
        line = (
            f"{r['status']:<12} {r['cell']}  {r['metric']}  published {num(r['published'])}"
            f"  reproduced {num(r['reproduced'])}  delta {num(r['delta'])}"
            f"  tolerance {r['tolerance']:g}"
        )
        if r["reason"]:
            line += f"  ({r['reason']})"
        lines.append(line)
    c = report["counts"]
    lines.append(
        f"{'PASS' if report['passed'] else 'FAIL'}  {c[PASS]} passed, {c[FAIL]} failed, "
        f"{c[NOT_VERIFIED]} not verified"
    )
    return lines

"""Verify published values: recompute each from its dump and compare, cell by cell.

The published-values file is :mod:`audiorepro.specs.published`. Each value is PASS
(``|reproduced - published| <= tolerance``), FAIL, or NOT VERIFIED when its inputs are not
available here (never a pass).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from audiorepro.formats.dump import load_dump
from audiorepro.metrics.profiles import compute_profile
from audiorepro.specs.published import PublishedCell

Status = Literal["PASS", "FAIL", "NOT VERIFIED"]
PASS: Status = "PASS"
FAIL: Status = "FAIL"
NOT_VERIFIED: Status = "NOT VERIFIED"


class ValueRow(TypedDict):
    """One published value: reproduced, compared, and its status (with the reason when it
    could not be verified)."""

    cell: str
    metric: str
    published: float | None
    reproduced: float | None
    delta: float | None
    tolerance: float
    status: Status
    reason: str | None
    #: Where the value was published (rows of a study's ``[[published]]`` tables).
    provenance: NotRequired[str]


class Summary(TypedDict):
    """Rows, counts by status, and ``passed`` only when every row passes."""

    rows: list[ValueRow]
    counts: dict[str, int]
    passed: bool


def verify_published(cells: list[PublishedCell], dumps_dir: str | Path) -> Summary:
    """One row per published value; ``passed`` only when every row passes."""
    rows: list[ValueRow] = []
    for cell in cells:
        path = Path(dumps_dir) / cell.dump
        reason = None
        reproduced: dict[str, float] = {}
        if not path.exists():  # a folder or FIFO there is bad input, refused by load_dump
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
                    tie_policy=cell.tie_policy,
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
) -> list[ValueRow]:
    """One row per published value: PASS, FAIL, or NOT VERIFIED (with the reason)."""
    rows = []
    for metric, published in values.items():
        row: ValueRow = {
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
                row["reproduced"] = value
                row["delta"] = value - published
                row["status"] = PASS if abs(value - published) <= tolerance else FAIL
        rows.append(row)
    return rows


def summarize(rows: list[ValueRow]) -> Summary:
    """Counts by status; ``passed`` only when every row passes (an empty list passes)."""
    counts: dict[str, int] = {
        s: sum(1 for r in rows if r["status"] == s) for s in (PASS, FAIL, NOT_VERIFIED)
    }
    return {"rows": rows, "counts": counts, "passed": counts[PASS] == len(rows)}


def verify_lines(report: Summary) -> list[str]:
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

"""What every check of ``verify`` says: a row per value (PASS, FAIL or NOT VERIFIED), the
counts, the verdict (NOTHING CHECKED when there was nothing to check) and its lines. Light to
import (no metric): ``verify OUT`` reads a run's recorded rows and needs nothing else of
:mod:`audiorepro.checks.verify`, which recomputes published values from dumps.
"""

from __future__ import annotations

import math
from typing import Literal, NotRequired

from typing_extensions import TypedDict

Status = Literal["PASS", "FAIL", "NOT VERIFIED"]
PASS: Status = "PASS"
FAIL: Status = "FAIL"
NOT_VERIFIED: Status = "NOT VERIFIED"
#: A verdict, never a row's status: no value and no other check was there to check (exit 1).
Verdict = Literal["PASS", "FAIL", "NOT VERIFIED", "NOTHING CHECKED"]
NOTHING_CHECKED: Verdict = "NOTHING CHECKED"
#: What gives ``verify`` something to check, said when it had nothing.
TO_CHECK = (
    "give it a published value to recompute ([[published]] in the study, or --golden FILE); "
    "reproduce's output folder adds metric parity, checkpoint identity, completion and gates"
)


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
    #: What ``verify OUT`` checked besides the rows ("23 files against the manifest, ...").
    checked: NotRequired[str]
    #: How many checks besides the rows the verdict rests on (parity, identity, completion,
    #: gates); with no row and none of these, nothing was checked (never a PASS).
    checks: NotRequired[int]
    #: What would give it something to check, said when nothing was.
    to_check: NotRequired[str]


def value_rows(
    cell: str,
    values: dict[str, float],
    tolerance: float,
    reproduced: dict[str, float],
    reason: str | None,
    profile: str,
) -> list[ValueRow]:
    """One row per published value: PASS, FAIL, or NOT VERIFIED (with the reason); a value
    reproduced as NaN or infinite is a FAIL whose reason says so (its ``reproduced`` is None).

    >>> [(r["status"], r["reason"]) for r in value_rows(
    ...     "c", {"f": 0.5, "g": 0.5}, 0.1, {"f": float("nan"), "g": 0.55}, None, "hear")]
    [('FAIL', 'the reproduced value is undefined (NaN)'), ('PASS', None)]
    """
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
            elif not math.isfinite(reproduced[metric]):
                # an undefined score (heareval's NaN F-measure without events) reproduces no
                # published number; the record stays JSON (no NaN in verification.json)
                value = reproduced[metric]
                row["status"] = FAIL
                row["reason"] = (
                    "the reproduced value is undefined (NaN)"
                    if math.isnan(value)
                    else f"the reproduced value is infinite ({value})"
                )
            else:
                value = reproduced[metric]
                row["reproduced"] = value
                row["delta"] = value - published
                row["status"] = PASS if within(published, value, tolerance) else FAIL
        rows.append(row)
    return rows


def within(published: object, reproduced: object, tolerance: object) -> bool:
    """The rule of a PASS: both values and the tolerance are finite numbers and
    ``|reproduced - published| <= tolerance`` (NaN never passes).

    >>> within(0.5, 0.5004, 1e-3), within(0.5, float("nan"), 1e-3), within(0.5, None, 1.0)
    (True, False, False)
    """
    numbers = (published, reproduced, tolerance)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers):
        return False
    p, r, t = (float(x) for x in numbers)  # type: ignore[arg-type]
    return all(math.isfinite(x) for x in (p, r, t)) and abs(r - p) <= t


def recheck(row: ValueRow) -> ValueRow:
    """A recorded row as its own numbers say (``verify OUT`` reads rows a run wrote): a PASS
    whose values do not pass :func:`within` is a FAIL, saying so. A record edited, damaged or
    written by a faulty version must not read as PASS; other statuses are kept."""
    if row.get("status") != PASS or within(
        row.get("published"), row.get("reproduced"), row.get("tolerance")
    ):
        return row
    return {
        **row,
        "status": FAIL,
        "reason": "recorded as PASS, but its published and reproduced values are not within "
        "its tolerance",
    }


def check_failed(cell: str, what: str, reason: str) -> ValueRow:
    """A FAIL row of a check that compares no number (a file, a signature): ``cell`` names
    the check, ``what`` the file or item, ``reason`` what is wrong with it."""
    return {
        "cell": cell,
        "metric": what,
        "published": None,
        "reproduced": None,
        "delta": None,
        "tolerance": 0.0,
        "status": FAIL,
        "reason": reason,
    }


def summarize(rows: list[ValueRow]) -> Summary:
    """Counts by status; ``passed`` only when every row passes (an empty list passes)."""
    counts: dict[str, int] = {
        s: sum(1 for r in rows if r["status"] == s) for s in (PASS, FAIL, NOT_VERIFIED)
    }
    return {"rows": rows, "counts": counts, "passed": counts[PASS] == len(rows)}


def verdict(counts: dict[str, int], checks: int = 0) -> Verdict:
    """PASS when every value passed, FAIL when any failed, NOT VERIFIED when nothing failed
    but something could not be checked here, NOTHING CHECKED when there was no value and no
    other check (``checks``) at all: PASS is never said of nothing (all but PASS exit 1).

    >>> verdict({"PASS": 0, "FAIL": 0, "NOT VERIFIED": 32}), verdict({"PASS": 3, "FAIL": 0,
    ... "NOT VERIFIED": 0}), verdict({"PASS": 1, "FAIL": 1, "NOT VERIFIED": 1})
    ('NOT VERIFIED', 'PASS', 'FAIL')
    >>> verdict({"PASS": 0, "FAIL": 0, "NOT VERIFIED": 0}), verdict(
    ... {"PASS": 0, "FAIL": 0, "NOT VERIFIED": 0}, checks=2)
    ('NOTHING CHECKED', 'PASS')
    """
    if counts[FAIL]:
        return FAIL
    if counts[NOT_VERIFIED]:
        return NOT_VERIFIED
    return PASS if counts[PASS] or checks else NOTHING_CHECKED


def settle(report: Summary, checks: int = 0, to_check: str = TO_CHECK) -> Summary:
    """``report`` with the checks besides its rows counted; ``passed`` only when its verdict
    is PASS (a report with no row and no other check has checked nothing: not passed, and
    ``to_check`` says what would give it something to check)."""
    report["checks"] = checks
    if verdict(report["counts"], checks) == NOTHING_CHECKED:
        report["passed"] = False
        report["to_check"] = to_check
    return report


def verify_lines(report: Summary) -> list[str]:
    """One line per value (NOT VERIFIED values of one cell with one reason: one line with
    their count), then the verdict line and, for an output folder, what was checked."""

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.6g}"

    groups: dict[tuple[str, str], list[ValueRow]] = {}
    for r in report["rows"]:
        if r["status"] == NOT_VERIFIED and r["reason"]:
            groups.setdefault((r["cell"], r["reason"]), []).append(r)
    lines = []
    for r in report["rows"]:
        group = groups.get((r["cell"], r["reason"] or ""), [])
        if len(group) > 1:
            if group[0] is r:
                metrics = ", ".join(g["metric"] for g in group)
                lines.append(
                    f"{NOT_VERIFIED:<12} {r['cell']}  {len(group)} values ({metrics})"
                    f"  ({r['reason']})"
                )
            continue
        line = (
            f"{r['status']:<12} {r['cell']}  {r['metric']}  published {num(r['published'])}"
            f"  reproduced {num(r['reproduced'])}  delta {num(r['delta'])}"
            f"  tolerance {r['tolerance']:g}"
        )
        if r["reason"]:
            line += f"  ({r['reason']})"
        lines.append(line)
    c = report["counts"]
    said = verdict(c, report.get("checks", 0))
    last = f"{said}  {c[PASS]} passed, {c[FAIL]} failed, {c[NOT_VERIFIED]} not verified"
    if "checked" in report:
        last += f"; checked {report['checked']}"
    if said == NOTHING_CHECKED:
        last += f"; {report.get('to_check', TO_CHECK)}"
    lines.append(last)
    return lines

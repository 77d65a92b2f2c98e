"""Verify published values: recompute each from its dump and compare, cell by cell.

The published-values file is :mod:`audiorepro.specs.published`. Each value is PASS
(``|reproduced - published| <= tolerance``), FAIL, or NOT VERIFIED when its inputs are not
available here (never a pass).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from audiorepro.formats.dump import Dump, load_dump
from audiorepro.metrics.profile_registry import is_canonical
from audiorepro.metrics.profiles import compute_profile, published_cutoffs
from audiorepro.metrics.retrieval import DIRECTIONS, TiePolicy, compute_retrieval, is_metric_name
from audiorepro.specs.published import PublishedCell

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


def verify_published(cells: list[PublishedCell], dumps_dir: str | Path) -> Summary:
    """One row per published value; ``passed`` only when every row passes."""
    rows: list[ValueRow] = []
    for cell in cells:
        path = Path(dumps_dir) / cell.dump
        reason = None
        reproduced: dict[str, float] = {}
        if not path.exists():  # a folder or FIFO there is bad input, refused by load_dump
            reason = f"dump {cell.dump} is not available in {dumps_dir}{how_to_make(cell, path)}"
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
                    cutoffs=published_cutoffs(cell.profile, list(cell.values), None),
                ).metrics
                if is_canonical(cell.profile):
                    reproduced |= _at_other_cutoffs(dump, cell.values, reproduced, cell.tie_policy)
        rows += value_rows(cell.dump, cell.values, cell.tolerance, reproduced, reason, cell.profile)
    return summarize(rows)


def _at_other_cutoffs(
    dump: Dump, values: dict[str, float], have: dict[str, float], tie_policy: TiePolicy
) -> dict[str, float]:
    """The published canonical values that the 1.0 report lacks (definitions 1.1: ``t2a/
    ndcg@50``, ``a2t/precision@3``, ...), each computed by name."""
    wanted = [key for key in values if key not in have]
    if not wanted:
        return {}
    result = compute_retrieval(dump)
    out: dict[str, float] = {}
    for key in wanted:
        direction, _, name = key.partition("/")
        if direction in DIRECTIONS and is_metric_name(name):
            out[key] = result.value(direction, name, tie_policy)
    return out


#: How a published cell's dataset is prepared: registry name (``fetch/datasets.py``), the
#: audio ``extract`` reads there, and what ``fetch`` needs besides ``--data``.
_DATASETS = {
    # One caption per clip, as the published AudioCaps values were computed: without the
    # selection fetch prepares all five, and that dump is NOT VERIFIED again after extraction.
    "audiocaps": (
        "audiocaps-test",
        "audio.txt",
        " --audio AUDIOCAPS_TEST_AUDIO --caption-selection first-id",
    ),
    "clotho": ("clotho-eval", "audio", ""),
}


def how_to_make(cell: PublishedCell, path: Path) -> str:
    """The commands that make a missing dump, for the reason a value is NOT VERIFIED.

    >>> cell = PublishedCell("d.npz", "canonical", "pessimistic", 0.0, {}, model="m",
    ...                      dataset="clotho5")
    >>> print(how_to_make(cell, Path("dumps/d.npz")))
    ; make it: audiorepro fetch m clotho-eval --data DATA, then audiorepro extract --model m \
--audio DATA/clotho-eval/audio --captions DATA/clotho-eval/captions.csv --out dumps/d.npz
    >>> audiocaps = PublishedCell("a.npz", "canonical", "pessimistic", 0.0, {}, model="m",
    ...                           dataset="audiocaps1")
    >>> "--audio AUDIOCAPS_TEST_AUDIO --caption-selection first-id," in how_to_make(
    ...     audiocaps, Path("a.npz"))
    True
    """
    kind = next((k for k in _DATASETS if (cell.dataset or "").startswith(k)), None)
    if kind is None or cell.model is None:
        return "; make it with audiorepro extract (docs/formats.md, Embedding dump format)"
    name, audio, extra = _DATASETS[kind]
    return (
        f"; make it: audiorepro fetch {cell.model} {name} --data DATA{extra}, then audiorepro "
        f"extract --model {cell.model} --audio DATA/{name}/{audio} --captions "
        f"DATA/{name}/captions.csv --out {path}"
    )


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

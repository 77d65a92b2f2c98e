"""What ``audiorepro diff`` (and ``reproduce --against``) says: the terminal lines, the
``--json`` document (schema ``audiorepro.diff/1``, ``docs/schemas/diff.schema.json``) and
the ``--html`` page, all functions of the comparison only (deterministic bytes).

Exit codes: 0 when every number is identical or within its tier, 1 when any changed
(``--strict``: a tier-b move too), 2 on bad input.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Literal

from typing_extensions import TypedDict

from audiorepro.checks.diff import Kind, Kinds, Number, Verdict
from audiorepro.checks.diff_compare import Cause, DiffResult, NumberDiff, compare_runs
from audiorepro.checks.diff_load import check_comparable, load_run, tolerance_from, views
from audiorepro.checks.tiers import Tier
from audiorepro.core.errors import EXIT_CHECK_FAILED, EXIT_OK
from audiorepro.core.io import atomic_write_bytes, json_dumps
from audiorepro.render.html import _CSS, _JS, _e

SCHEMA: Final = "audiorepro.diff/1"
#: Moved numbers listed on the terminal (all of them are in --json and --html).
SHOWN: Final = 40


class DiffCause(TypedDict):
    """One identity that differs between the runs."""

    key: str  #: ``<cell>:<kind>`` or ``run:<kind>`` (a nested study's prefixed: ``probe/``)
    kind: Kind
    scope: str  #: the cell, or ``run``
    a: str  #: what run A records (the differing parts), in words
    b: str  #: what run B records, with counts such as "957 of 975 clips"
    recorded: bool  #: false: a run does not record it (a bundle alone has no manifest)
    numbers: list[str]  #: paths of the numbers it moved (empty: it moved none)
    largest_delta: float | None


class DiffNumber(TypedDict):
    """One number of either run."""

    path: str
    cell: str
    a: Number  #: null: not in run A (or undefined there)
    b: Number
    delta: float | None  #: |b - a|; null when either is missing
    tier: Tier  #: a: bit-identical given identical inputs; b: within a derived tolerance
    tolerance: float | None  #: the bound that applied; null: none applies or none derived
    within_tier: bool
    causes: list[str]  #: keys of the differing identities it depends on
    verdict: Verdict


class DiffCell(TypedDict):
    cell: str
    verdict: Verdict
    moved: int
    numbers: int


class DiffDocument(TypedDict):
    """``audiorepro diff --json``: the verdict, the causes and every number."""

    schema: Literal["audiorepro.diff/1"]
    a: str  #: run A as given (an output folder or a bundle)
    b: str
    study: str
    kind: str  #: the bundle schema(s), ``+``-joined for nested studies
    strict: bool  #: tier-b moves counted as changes
    verdict: Verdict
    cells: list[DiffCell]
    causes: list[DiffCause]
    numbers: list[DiffNumber]


def document(result: DiffResult, a: str, b: str) -> DiffDocument:
    causes: list[DiffCause] = [
        {
            "key": c.difference.key,
            "kind": c.difference.kind,
            "scope": c.difference.scope,
            "a": c.difference.a,
            "b": c.difference.b,
            "recorded": c.difference.recorded,
            "numbers": list(c.numbers),
            "largest_delta": c.largest_delta,
        }
        for c in result.causes
    ]
    numbers: list[DiffNumber] = [
        {
            "path": n.path, "cell": n.cell, "a": n.a, "b": n.b, "delta": n.delta, "tier": n.tier,
            "tolerance": n.tolerance, "within_tier": n.within_tier, "causes": list(n.causes),
            "verdict": n.verdict,
        }
        for n in result.numbers
    ]  # fmt: skip
    return {
        "schema": SCHEMA,
        "a": a,
        "b": b,
        "study": result.study,
        "kind": result.kind,
        "strict": result.strict,
        "verdict": result.verdict,
        "cells": [
            {"cell": c.cell, "verdict": c.verdict, "moved": c.moved, "numbers": c.numbers}
            for c in result.cells
        ],
        "causes": causes,
        "numbers": numbers,
    }


def _num(value: Number | None) -> str:
    return "absent" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


#: Terminal lines are wrapped at this width; a value is shown whole, on as many lines as
#: it takes (never cut to "...": two values that differ late would look the same).
WIDTH: Final = 100


def _cause_lines(c: Cause) -> list[str]:
    d = c.difference
    moved = (
        f"moved {len(c.numbers)} number(s), largest |delta| {_num(c.largest_delta)}"
        if c.numbers
        else "moved nothing"
    )
    return textwrap.wrap(
        f"  {d.kind:<13} {d.scope}: {d.a} -> {d.b}: {moved}",
        width=WIDTH,
        subsequent_indent=" " * 18,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _pair(a: Number, b: Number) -> str:
    """Both values, in full when six digits would show them equal."""
    sa, sb = _num(a), _num(b)
    return f"{a!r} -> {b!r}" if sa == sb else f"{sa} -> {sb}"


def _number_line(n: NumberDiff) -> str:
    causes = ", ".join(n.causes) or "nothing it depends on differs"
    bound = "" if n.tolerance is None else f" (bound {_num(n.tolerance)})"
    return (
        f"  {n.verdict:<21} {n.path}: {_pair(n.a, n.b)}, |delta| {_num(n.delta)}, "
        f"tier {n.tier}{bound}; causes: {causes}"
    )


def text_lines(result: DiffResult, a: str, b: str) -> list[str]:
    """The terminal report: verdict, causes grouped, cells, then the moved numbers."""
    moved = [n for n in result.numbers if n.verdict != "identical"]
    strict = " (strict: tier-b moves count as changes)" if result.strict else ""
    lines = [
        f"diff {a} -> {b}: {result.verdict}{strict}",
        f"  study {result.study}: {len(moved)} of {len(result.numbers)} number(s) moved",
    ]
    defects = [n for n in moved if n.verdict == "changed, unexplained"]
    if defects:
        lines.append(
            f"DEFECT: {len(defects)} number(s) moved although nothing they depend on differs "
            "(a missing identity or a bug):"
        )
        lines += [_number_line(n) for n in defects[:SHOWN]]
    if result.causes:
        lines.append("causes (what differs between the runs):")
        lines += [line for c in result.causes for line in _cause_lines(c)]
    lines.append("cells:")
    lines += [f"  {c.verdict:<21} {c.cell} ({c.moved} of {c.numbers} moved)" for c in result.cells]
    others = [n for n in moved if n.verdict != "changed, unexplained"]
    if others:
        lines.append("moved numbers, largest |delta| first:")
        lines += [_number_line(n) for n in others[:SHOWN]]
        if len(others) > SHOWN:
            lines.append(f"  ... and {len(others) - SHOWN} more (every number is in --json)")
    return lines


def _rows(cells: Sequence[Sequence[object]]) -> str:
    return "".join(
        "<tr>" + "".join(f'<td data-value="{_e(v)}">{_e(v)}</td>' for v in row) + "</tr>"
        for row in cells
    )


def _table(table_id: str, head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (
        f'<table class="sortable" id="{_e(table_id)}"><thead><tr>{th}</tr></thead>'
        f"<tbody>{_rows(rows)}</tbody></table>"
    )


def html_page(result: DiffResult, a: str, b: str) -> str:
    """One self-contained page in the report's style: verdict first, then causes, cells and
    every moved number (sortable tables); no time, host or path but the two given."""
    ok = result.verdict in ("identical", "within tier") and not (
        result.strict and result.verdict == "within tier"
    )
    summary = "".join(f"{_e(line)}<br>" for line in text_lines(result, a, b)[:2])
    causes = [
        (c.difference.kind, c.difference.scope, c.difference.a, c.difference.b, len(c.numbers),
         _num(c.largest_delta))
        for c in result.causes
    ]  # fmt: skip
    cells = [(c.verdict, c.cell, c.moved, c.numbers) for c in result.cells]
    moved = [
        (n.verdict, n.path, *_pair(n.a, n.b).split(" -> "), _num(n.delta), n.tier,
         _num(n.tolerance), ", ".join(n.causes) or "nothing it depends on differs")
        for n in result.numbers
        if n.verdict != "identical"
    ]  # fmt: skip
    defects = sum(n.verdict == "changed, unexplained" for n in result.numbers)
    defect = (
        f"<p class='fail'>DEFECT: {defects} number(s) moved although nothing they depend on "
        "differs (a missing identity or a bug); they are listed first below.</p>"
        if defects
        else ""
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>audiorepro diff: {_e(result.study)}</title><style>{_CSS}</style></head><body>"
        f"<h1>audiorepro diff: {_e(result.study)}</h1>"
        f"<div class='{'pass' if ok else 'fail'}'><strong>{_e(result.verdict)}</strong><br>"
        f"{summary}</div>{defect}"
        "<h2>Causes</h2>"
        + _table(
            "table-causes", ("kind", "scope", "A", "B", "numbers moved", "largest |delta|"), causes
        )
        + "<h2>Cells</h2>"
        + _table("table-cells", ("verdict", "cell", "moved", "numbers"), cells)
        + "<h2>Moved numbers</h2>"
        + _table(
            "table-numbers",
            ("verdict", "path", "A", "B", "|delta|", "tier", "bound", "causes"),
            moved,
        )
        + f"<script>{_JS}</script></body></html>\n"
    )


def exit_code(result: DiffResult) -> int:
    """0: identical or within tier (not with ``--strict``); 1: anything changed."""
    changed = result.verdict in ("changed, explained", "changed, unexplained")
    return EXIT_CHECK_FAILED if changed else EXIT_OK


#: A folder's check against its manifest (and signature): the first failing file and why,
#: or None when it holds exactly what its run wrote (``audiorepro.runner.study``).
FolderCheck = Callable[[Path], str | None]


def unverified(
    a: Path, b: Path, check: FolderCheck | None, say: Callable[[str], None]
) -> int | None:
    """Each side that is a folder checked against its manifest before anything is compared:
    a side that fails is the verdict (exit 1), named with its first failing file."""
    if check is None:
        return None
    for side in (a, b):
        if Path(side).is_dir():
            problem = check(Path(side))
            if problem is not None:
                say(f"diff {a} -> {b}: NOT COMPARED: {side} fails its manifest: {problem}")
                say(
                    f"  a folder that does not hold what its run wrote proves nothing; run "
                    f"audiorepro verify {side} for every problem"
                )
                return EXIT_CHECK_FAILED
    return None


def run_diff(
    a: Path,
    b: Path,
    *,
    strict: bool = False,
    json_out: Path | None = None,
    html_out: Path | None = None,
    say: Callable[[str], None] = print,
    check: FolderCheck | None = None,
    kinds: Kinds,
) -> int:
    """Read both runs (bad input: a UserError before anything is written), check each
    folder against its manifest (``check``: a failing side is the verdict, nothing is
    compared), compare every number as the kind that wrote it declares it (``kinds``: the
    study kinds by their bundles' schema), report."""
    run_a, run_b = load_run(a, kinds), load_run(b, kinds)  # bad input: exit 2 first
    failed = unverified(a, b, check, say)
    if failed is not None:
        return failed
    check_comparable(run_a, run_b)
    view_a, view_b = views(run_a, run_b)
    result = compare_runs(view_a, view_b, tolerance=tolerance_from(run_a, run_b), strict=strict)
    for line in text_lines(result, str(a), str(b)):
        say(line)
    for side in (run_a, run_b):
        if check is not None and not side.folder:
            say(
                f"  {side.source}: a bundle alone, checked against no manifest (give its "
                "output folder to check it)"
            )
    if json_out is not None:
        atomic_write_bytes(json_out, json_dumps(document(result, str(a), str(b))).encode())
    if html_out is not None:
        atomic_write_bytes(html_out, html_page(result, str(a), str(b)).encode())
    return exit_code(result)

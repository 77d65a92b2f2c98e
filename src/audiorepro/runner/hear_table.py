"""``audiorepro hear-table OUT ... --out DIR``: one table across encoders from HEAR runs.

Each OUT is the output folder of ``audiorepro hear`` or of a ``hear`` study
(:mod:`.kinds.hear`); its files are checked against its manifest first (a run whose files
changed since it was written is refused: the table would certify numbers no run made). The
table has one row per encoder and one column per task (the task's first evaluation score, the
test value or the mean over folds, as HEAR's leaderboard shows them), written as CSV, Markdown
and LaTeX (:mod:`audiorepro.render.tables`): ``DIR/hear.*``. Beside it, ``DIR/runs.*`` links
every number to the run that made it: the folder, its ``bundle.json.gz``'s SHA-256, the cell,
the module's weights' SHA-256 and its embedding size. ``DIR/hear.html`` is the same as one
page, as HEAR's and MTEB's leaderboards show it: the encoders x tasks table, each number a link
to the report of the run that made it (its cell, bundle SHA-256 and weights on hover), then
each encoder's metadata (embedding sizes, weights' SHA-256) and the runs table.
"""

from __future__ import annotations

import gzip
import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes
from audiorepro.metrics.hear import HEAR_SCORE_DIRECTIONS
from audiorepro.render.html import page, table_html
from audiorepro.render.tables import (
    NOT_APPLICABLE,
    NOT_APPLICABLE_NOTE,
    Column,
    Table,
    write_table,
)
from audiorepro.runner.kinds.hear import HEAR_BUNDLE
from audiorepro.runner.study import verify_output_dir

__all__ = ["HearEntry", "hear_page", "hear_tables", "read_runs", "write_hear_table"]


@dataclass(frozen=True)
class HearEntry:
    """One number of the table and the run that made it."""

    encoder: str
    task: str
    score: str
    value: float | None
    run: str  #: the run's folder, as given
    bundle_sha256: str
    cell: str
    weights_sha256: str  #: ``file=sha256`` of each weight file, ``;``-joined ("" for none)
    embedding_size: int
    #: the SHA-256 of the encoder's own source files (its code identity; "" where none)
    source_sha256: str = ""


def _bundle(out: Path) -> dict[str, Any]:
    path = out / "bundle.json.gz"
    if not path.is_file():
        raise UserError(
            "has no bundle.json.gz; expected the output folder of a HEAR run", source=out
        )
    try:
        bundle: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError) as exc:
        raise UserError(f"cannot be read ({exc})", source=path) from None
    if bundle.get("schema") != HEAR_BUNDLE:
        raise UserError(
            f"schema is {bundle.get('schema')!r}; expected {HEAR_BUNDLE} (a HEAR run)",
            source=path,
            key="schema",
        )
    return bundle


def _check_intact(out: Path) -> None:
    """Every file of the run as its manifest records it (else one line naming the first)."""
    summary = verify_output_dir(out)
    bad = [r for r in summary["rows"] if r["cell"] == "output"]
    if bad:
        r = bad[0]
        raise UserError(f"{r['metric']}: {r['reason']}; rerun it or verify it", source=out)


def read_runs(outs: list[Path]) -> list[HearEntry]:
    """Every cell of every run (checked against its manifest), in the order given."""
    entries = []
    for out in outs:
        _check_intact(out)
        bundle = _bundle(out)
        digest = sha256_file(out / "bundle.json.gz")
        for cell in bundle["cells"]:
            meta = cell.get("model_meta") or {}
            weights = meta.get("weights_sha256") or {}
            code = meta.get("code")
            source = code.get("source_sha256") if isinstance(code, dict) else None
            score = str(cell["primary_score"])
            entries.append(
                HearEntry(
                    encoder=str(cell["model"]),
                    task=str(cell["task"]),
                    score=score,
                    value=cell["leaderboard"].get(score),
                    run=str(out),
                    bundle_sha256=digest,
                    cell=str(cell["id"]),
                    weights_sha256=";".join(f"{k}={weights[k]}" for k in sorted(weights)),
                    embedding_size=int(cell["embedding_size"]),
                    source_sha256=str(source or ""),
                )
            )
    return entries


def _check_unique(entries: list[HearEntry]) -> None:
    seen: dict[tuple[str, str], HearEntry] = {}
    weights: dict[str, HearEntry] = {}
    for e in entries:
        other = seen.setdefault((e.encoder, e.task), e)
        if other is not e:
            raise UserError(
                f"{e.encoder} on {e.task} is in {other.run} (cell {other.cell}) and in {e.run} "
                f"(cell {e.cell}); expected one run per encoder and task"
            )
        first = weights.setdefault(e.encoder, e)
        if first.weights_sha256 != e.weights_sha256:
            raise UserError(
                f"{e.encoder} has other weights in {e.run} than in {first.run}; expected one "
                "encoder per name (give its weights a name of their own: hear:MODULE:WEIGHTS)"
            )
        if first.source_sha256 != e.source_sha256:  # one name, two models: never one row
            raise UserError(
                f"{e.encoder} has other code in {e.run} than in {first.run} (its source files' "
                "SHA-256 differ); expected one encoder per name"
            )


def hear_tables(entries: list[HearEntry]) -> dict[str, Table]:
    """The encoders x tasks table and the runs table.

    >>> e = HearEntry("hear:m", "words-v1-full", "top1_acc", 0.5, "o", "ab", "c", "w=1", 32)
    >>> t = hear_tables([e])
    >>> t["hear"].columns[0].name, t["hear"].rows
    ('words-v1-full top1_acc', (('hear:m', (0.5,)),))
    """
    _check_unique(entries)
    tasks = sorted({(e.task, e.score) for e in entries})
    encoders = list(dict.fromkeys(e.encoder for e in entries))
    at = {(e.encoder, e.task): e for e in entries}
    columns = tuple(Column(f"{t} {s}", HEAR_SCORE_DIRECTIONS.get(s)) for t, s in tasks)
    # a pair no run holds is no value by design (a dash), apart from a score a run found
    # undefined (NaN: "Not recorded / undefined")
    rows = tuple(
        (enc, tuple(at[(enc, t)].value if (enc, t) in at else NOT_APPLICABLE for t, _ in tasks))
        for enc in encoders
    )
    unrun = any(NOT_APPLICABLE in cells for _, cells in rows)
    main = Table(
        title="HEAR: encoders x tasks",
        columns=columns,
        rows=rows,
        row_header="encoder",
        notes=(
            "each task's first evaluation score (heareval 2021.1.3), the test split's or the "
            "mean over folds; the run of each number is in runs.csv",
            *(
                (NOT_APPLICABLE_NOTE.removesuffix(".") + ": no run of the encoder on the task.",)
                if unrun
                else ()
            ),
        ),
    )
    names = ("task", "score", "value", "run", "bundle sha256", "cell", "weights sha256", "dim")
    runs = Table(
        title="HEAR: the run of each number",
        columns=tuple(Column(n) for n in names),
        rows=tuple(
            (
                e.encoder,
                (
                    e.task,
                    e.score,
                    e.value,
                    e.run,
                    e.bundle_sha256,
                    e.cell,
                    e.weights_sha256,
                    e.embedding_size,
                ),
            )
            for e in entries
        ),
        row_header="encoder",
    )
    return {"hear": main, "runs": runs}


def _encoders_table(entries: list[HearEntry]) -> Table:
    """One row per encoder: its embedding size(s) over the tasks, its weights, its runs."""
    encoders = list(dict.fromkeys(e.encoder for e in entries))
    rows = []
    for enc in encoders:
        mine = [e for e in entries if e.encoder == enc]
        dims = ", ".join(str(d) for d in sorted({e.embedding_size for e in mine}))
        rows.append((enc, (dims, mine[0].weights_sha256 or "(none)", len({e.run for e in mine}))))
    return Table(
        title="Encoders",
        columns=(Column("embedding size"), Column("weights sha256"), Column("runs")),
        rows=tuple(rows),
        row_header="encoder",
    )


def hear_page(entries: list[HearEntry], tables: dict[str, Table], folder: Path) -> str:
    """``hear.html`` (module docstring): links are relative to ``folder``, so the page and
    the runs move together.

    >>> e = HearEntry("hear:m", "words-v1-full", "top1_acc", 0.5, "o", "ab", "c", "w=1", 32)
    >>> text = hear_page([e], hear_tables([e]), Path("t"))
    >>> '<a href="../o/report.html" title="run o, cell c' in text
    True
    """
    main = tables["hear"]
    tasks = [c.name for c in main.columns]
    at = {(e.encoder, f"{e.task} {e.score}"): e for e in entries}
    links: dict[tuple[int, int], tuple[str, str]] = {}
    for i, (enc, _) in enumerate(main.rows):
        for j, task in enumerate(tasks):
            e = at.get((enc, task))
            if e is not None:
                href = Path(os.path.relpath(Path(e.run) / "report.html", folder)).as_posix()
                weights = e.weights_sha256 or "no weight files"
                title = f"run {e.run}, cell {e.cell}, bundle {e.bundle_sha256}, {weights}"
                links[(i, j)] = (href, title)
    body = [
        f"<h1>{html.escape(main.title)}</h1>",
        "<p>Each number links to the report of the run that made it; the run, its cell, its "
        "bundle's SHA-256 and the encoder's weights are on the link's title.</p>",
        f"<div class='scroll'>{table_html(main, 'hear', links)}</div>",
        "<h2>Encoders</h2>",
        f"<div class='scroll'>{table_html(_encoders_table(entries), 'encoders')}</div>",
        "<h2>Runs</h2>",
        f"<div class='scroll'>{table_html(tables['runs'], 'runs')}</div>",
    ]
    return page(main.title, "\n".join(body))


def write_hear_table(outs: list[Path], folder: Path) -> dict[str, Table]:
    """Read the runs, write ``folder/hear.*``, ``folder/runs.*`` and ``folder/hear.html``;
    returns the tables."""
    entries = read_runs(outs)
    tables = hear_tables(entries)
    for name, table in tables.items():
        write_table(folder, name, table)
    text = hear_page(entries, tables, folder)
    atomic_write_bytes(folder / "hear.html", text.encode("utf-8"))
    return tables

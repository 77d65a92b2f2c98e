"""Result tables rendered three ways: CSV (full precision), Markdown and LaTeX (booktabs).

A :class:`Table` is rows (models) by columns (metrics). Each column knows its direction
(higher or lower is better, or neither); in Markdown and LaTeX the best value of each column is
marked (bold), every value that ties for best too. Missing values are never 0: CSV leaves the
field empty, Markdown says "Not recorded / undefined", LaTeX prints an em dash explained in the
caption. A cell that has no value by design (a baseline a task does not compare, a leader place
no run fills) is :data:`NOT_APPLICABLE`: empty in CSV and LaTeX, a dash in Markdown and HTML,
explained by the table's :data:`NOT_APPLICABLE_NOTE`; "Not recorded / undefined" is kept for a
value that was expected. Numbers: CSV uses Python's shortest round-trip repr (no information
lost); Markdown and LaTeX show :attr:`Table.digits` decimals, so the rendering depends only on
the values.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiorepro.core.io import atomic_write_bytes, slug

__all__ = ["slug"]  # re-exported: the runner names table files with it

MISSING_TEXT = "Not recorded / undefined"
NOT_APPLICABLE_TEXT = "—"
NOT_APPLICABLE_NOTE = "—: no value by design (not part of this row's comparison)."


class NotApplicable:
    """The marker of a cell with no value by design (one instance, :data:`NOT_APPLICABLE`)."""

    def __repr__(self) -> str:
        return "NOT_APPLICABLE"


NOT_APPLICABLE = NotApplicable()
Cell = float | int | str | NotApplicable | None


@dataclass(frozen=True)
class Column:
    name: str
    #: True: higher is better; False: lower is better; None: no best is marked.
    higher_is_better: bool | None = None


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]
    row_header: str = "model"
    digits: int = 4
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Optional per-cell confidence intervals ``(low, high)`` (or None), row by row; shown in
    #: the HTML report under each value, kept out of CSV, Markdown and LaTeX.
    intervals: tuple[tuple[tuple[float, float] | None, ...], ...] = ()

    def best(self) -> list[set[int]]:
        """For each column, the row indices holding its best value (empty: none marked).

        >>> t = Table("t", (Column("r@1", True), Column("rank", False), Column("n")),
        ...           (("a", (0.5, 3, 10)), ("b", (0.5, 2, 11)), ("c", (None, 9, 12))))
        >>> t.best()
        [{0, 1}, {1}, set()]
        """
        marks: list[set[int]] = []
        for j, col in enumerate(self.columns):
            values: list[tuple[int, float]] = []
            for i, (_, row) in enumerate(self.rows):
                v = row[j]
                if isinstance(v, int | float) and not isinstance(v, bool):
                    values.append((i, float(v)))
            if col.higher_is_better is None or not values:
                marks.append(set())
                continue
            target = (max if col.higher_is_better else min)(v for _, v in values)
            marks.append({i for i, v in values if v == target})
        return marks


def number(value: float | int, digits: int) -> str:
    """``digits`` decimals; a value that is not zero but would print as zero (a tolerance
    of 1e-9, a delta of 1e-12) keeps its magnitude, so that it never reads as zero.

    >>> number(1e-9, 6), number(0.0, 6), number(0.25, 6), number(-3e-12, 4)
    ('1e-09', '0.000000', '0.250000', '-3e-12')
    """
    if isinstance(value, int):
        return str(value)
    text = f"{value:.{digits}f}"
    if value != 0 and float(text) == 0:
        return f"{value:.3g}"
    return text


def published_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """The "Published vs reproduced" table of a kind's published-value rows (``cell``,
    ``metric``, ``published``, ``reproduced``, ``delta``, ``tolerance``, ``status``)."""
    names = ("metric", "published", "reproduced", "delta", "tolerance", "status")
    return Table(
        title="Published vs reproduced",
        columns=tuple(Column(n) for n in names),
        rows=tuple((r["cell"], tuple(r[n] for n in names)) for r in rows),
        row_header="cell",
        digits=6,
    )


def to_csv(table: Table) -> str:
    """CSV with a header row; numbers at full precision, missing values empty.

    >>> print(to_csv(Table("t", (Column("r@1", True),), (("m", (0.1,)), ("n", (None,))))), end="")
    model,r@1
    m,0.1
    n,
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([table.row_header, *(c.name for c in table.columns)])
    for label, values in table.rows:
        writer.writerow(
            [
                label,
                *(
                    ""
                    if v is None or isinstance(v, NotApplicable)
                    else repr(v)
                    if isinstance(v, float)
                    else v
                    for v in values
                ),
            ]
        )
    return buf.getvalue()


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table; best values bold; a title line above.

    >>> print(to_markdown(Table("T", (Column("r@1", True),), (("m", (0.25,)), ("n", (None,))))))
    **T**
    <BLANKLINE>
    | model | r@1 ↑ |
    |:--|--:|
    | m | **0.2500** |
    | n | Not recorded / undefined |
    <BLANKLINE>
    """
    best = table.best()
    arrows = {True: " ↑", False: " ↓", None: ""}
    head = [table.row_header, *(c.name + arrows[c.higher_is_better] for c in table.columns)]
    lines = [f"**{table.title}**", "", "| " + " | ".join(head) + " |"]
    lines.append("|:--|" + "--:|" * len(table.columns))
    for i, (label, values) in enumerate(table.rows):
        cells = []
        for j, v in enumerate(values):
            if v is None:
                cells.append(MISSING_TEXT)
            elif isinstance(v, NotApplicable):
                cells.append(NOT_APPLICABLE_TEXT)
            elif isinstance(v, str):
                cells.append(v)
            else:
                text = number(v, table.digits)
                cells.append(f"**{text}**" if i in best[j] else text)
        lines.append("| " + " | ".join([label, *cells]) + " |")
    lines += [f"_{note}_" for note in table.notes]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def write_table(folder: Path, name: str, table: Table) -> None:
    """Write ``folder/name.csv``, ``.md`` and ``.tex`` atomically."""
    for suffix, render in ((".csv", to_csv), (".md", to_markdown), (".tex", to_latex)):
        atomic_write_bytes(folder / f"{name}{suffix}", render(table).encode())


def latex_escape(text: str) -> str:
    r"""Escape LaTeX's special characters.

    >>> latex_escape("laion/clap_htsat & r@1 50%")
    'laion/clap\\_htsat \\& r@1 50\\%'
    """
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def to_latex(table: Table) -> str:
    """A booktabs ``table`` environment (needs ``\\usepackage{booktabs}``); best values bold."""
    best = table.best()
    arrows = {True: r" $\uparrow$", False: r" $\downarrow$", None: ""}
    spec = "l" + "r" * len(table.columns)
    head = [latex_escape(table.row_header)]
    head += [latex_escape(c.name) + arrows[c.higher_is_better] for c in table.columns]
    lines = [
        r"\begin{table}[ht]",
        r"\centering",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(head) + r" \\",
        r"\midrule",
    ]
    for i, (label, values) in enumerate(table.rows):
        cells = []
        for j, v in enumerate(values):
            if v is None:
                cells.append("---")
            elif isinstance(v, NotApplicable):
                cells.append("")
            elif isinstance(v, str):
                cells.append(latex_escape(v))
            else:
                text = number(v, table.digits)
                cells.append(rf"\textbf{{{text}}}" if i in best[j] else text)
        lines.append(" & ".join([latex_escape(label), *cells]) + r" \\")
    caption = (
        latex_escape(table.title) + r". Bold: best per column; --- : not recorded / undefined."
    )
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"

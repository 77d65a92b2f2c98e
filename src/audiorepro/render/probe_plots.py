"""Charts of the probe report's summary tables, drawn from the tables themselves.

The charts show what the table beside them holds, in the same units (a percentage column is
charted in percent): the saved task leaders as one bar chart per task (the best candidate
against each baseline the task compares), the recomputed leaders as one chart per metric (the
leading runs on each task of that metric), and the family means (normalized MAE and Spearman).
Because a chart is a function of its table alone (:mod:`audiorepro.render.plots`: fixed
coordinates, ids from table names), a rerun is byte-identical.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from audiorepro.render.plots import Series, bar_chart
from audiorepro.render.tables import Cell, Table, slug


def _number(value: Cell) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def value_range(values: Sequence[float | None]) -> tuple[float, float]:
    """The y range of a chart: from 0 (or the lowest value, when below 0) to a little above the
    highest value (1 when every value is 0 or there is none).

    >>> value_range([0.5, 0.25, None]), value_range([-0.5, 1.0]), value_range([])
    ((0.0, 0.55), (-0.55, 1.1), (0.0, 1.0))
    """
    defined = [v for v in values if v is not None]
    lo = min([0.0, *defined])
    hi = max([0.0, *defined])
    if hi == lo:
        return lo, lo + 1.0
    return round(lo * 1.1, 6), round(hi * 1.1, 6)


def _figure(svg: str) -> str:
    return f"<figure>{svg}</figure>"


def _index(table: Table, name: str) -> int | None:
    return next((j for j, c in enumerate(table.columns) if c.name == name), None)


def saved_leader_charts(table: Table) -> list[str]:
    """One chart per task of ``task_leaders``: the best candidate's value and each compared
    baseline's value, one bar each, named in the legend in full (a baseline the task does not
    compare has no bar)."""
    value_at, best_at = _index(table, "value"), _index(table, "best candidate")
    observed_at = _index(table, "best observed")
    if value_at is None or best_at is None or observed_at is None:
        return []
    charts = []
    for i, (task, cells) in enumerate(table.rows):
        bars = [Series(f"best candidate: {cells[best_at]}", (_number(cells[value_at]),))]
        bars += [
            Series(f"baseline: {table.columns[j].name}", (_number(cells[j]),))
            for j in range(value_at + 1, observed_at)
            if cells[j] is None or isinstance(cells[j], int | float)
        ]
        lo, hi = value_range([s.values[0] for s in bars])
        charts.append(
            bar_chart(
                bars,
                chart_id=f"plot-task-leaders-{i + 1}",
                title=task,
                x_title="best candidate and baselines",
                y_title=str(cells[0]),
                xlabels=[""],
                lo=lo,
                hi=hi,
            )
        )
    return charts


def recomputed_leader_charts(table: Table) -> list[str]:
    """One chart per metric of ``leaders``: each task of the metric, a bar per leading run."""
    places = [
        (j, j + 1)
        for j, c in enumerate(table.columns)
        if c.name.startswith("#") and not c.name.endswith(" value")
    ]
    by_metric: dict[str, list[tuple[str, dict[str, float | None]]]] = {}
    for task, cells in table.rows:
        ranked = {str(cells[m]): _number(cells[v]) for m, v in places if isinstance(cells[m], str)}
        by_metric.setdefault(str(cells[0]), []).append((task, ranked))
    charts = []
    for k, (metric, tasks) in enumerate(by_metric.items()):
        models = list(dict.fromkeys(m for _, ranked in tasks for m in ranked))
        series = [Series(m, tuple(ranked.get(m) for _, ranked in tasks)) for m in models]
        lo, hi = value_range([v for s in series for v in s.values])
        charts.append(
            bar_chart(
                series,
                chart_id=f"plot-leaders-{k + 1}",
                title=f"Leading runs per task: {metric}",
                x_title="task",
                y_title=metric,
                xlabels=[t.split(": ", 1)[-1] for t, _ in tasks],
                lo=lo,
                hi=hi,
            )
        )
    return charts


def family_charts(table: Table, name: str) -> list[str]:
    """Per measure (normalized MAE, Spearman), a bar chart of a family table: ``family_means``
    (one family per row) with the families along x; ``families`` (one run per row, a column
    pair per family) with the families along x and a bar per run, named in the legend."""
    charts = []
    for measure in ("normalized_mae", "spearman"):
        columns = [j for j, c in enumerate(table.columns) if c.name.endswith(measure)]
        if not columns:
            continue
        if len(columns) == 1:
            (j,) = columns
            xlabels = [label for label, _ in table.rows]
            series = [Series(measure, tuple(_number(cells[j]) for _, cells in table.rows))]
        else:
            xlabels = [table.columns[j].name.removesuffix(measure).strip() for j in columns]
            series = [
                Series(label, tuple(_number(cells[j]) for j in columns))
                for label, cells in table.rows
            ]
        lo, hi = value_range([v for s in series for v in s.values])
        arrow = " ↓" if measure == "normalized_mae" else " ↑"
        charts.append(
            bar_chart(
                series,
                chart_id=f"plot-{slug(name)}-{measure}",
                title=f"{'Family means' if len(columns) == 1 else 'Families per run'}: "
                f"{measure}{arrow}",
                x_title=table.row_header if len(columns) == 1 else "family",
                y_title=measure,
                xlabels=xlabels,
                lo=lo,
                hi=hi,
            )
        )
    return charts


def summary_charts(tables: Mapping[str, Table], names: Sequence[str]) -> str:
    """The charts of the named summary tables, in a wrapping row of figures ("" when none)."""
    charts: list[str] = []
    for name in names:
        table = tables.get(name)
        if table is None or not table.rows:
            continue
        if name == "task_leaders":
            charts += saved_leader_charts(table)
        elif name == "leaders":
            charts += recomputed_leader_charts(table)
        elif name in ("families", "family_means"):
            charts += family_charts(table, name)
    if not charts:
        return ""
    return "<div class='plots'>" + "".join(_figure(c) for c in charts) + "</div>"

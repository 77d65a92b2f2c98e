"""Charts for the report as inline SVG: a line chart and a grouped bar chart.

Each chart is self-describing: a title, axis titles, tick labels and a legend are drawn inside
the SVG (a chart saved on its own still says what it shows), every mark carries a ``<title>``
tooltip with its exact value. The output is a function of the arguments alone: coordinates are
written with one decimal, values in tooltips with six, ids come from the caller; no random or
time-dependent id. Series are told apart by colour and by dash pattern and marker (so two
curves that coincide, such as two formats of the same checkpoint, still show both legends'
styles, and a grey-scale print stays readable).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Colour-blind-safe palette (Okabe-Ito), then dash patterns, cycled independently.
COLORS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442")
DASHES = ("", "6 3", "2 3", "8 3 2 3")

WIDTH = 520
_LEFT, _RIGHT, _TOP, _PLOT_H = 64, 16, 34, 200
_LEGEND_ROW = 18


@dataclass(frozen=True)
class Series:
    """One named series: ``values[i]`` belongs to the i-th x label (None: not recorded)."""

    name: str
    values: tuple[float | None, ...]


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _ticks(lo: float, hi: float) -> list[float]:
    """Five evenly spaced ticks from ``lo`` to ``hi``.

    >>> _ticks(0.0, 1.0)
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    return [lo + (hi - lo) * i / 4 for i in range(5)]


def _tick_text(value: float) -> str:
    """A tick label: at most two decimals, no trailing zeros, no ``-0``.

    >>> [_tick_text(v) for v in (0.0, 0.25, 0.5, -1.0, -0.0)]
    ['0', '0.25', '0.5', '-1', '0']
    """
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _frame(
    chart_id: str,
    *,
    title: str,
    x_title: str,
    y_title: str,
    xlabels: Sequence[str],
    lo: float,
    hi: float,
    legend: Sequence[str],
    rotate: bool,
) -> tuple[list[str], float]:
    """The chart's opening tag, title, grid, axes and tick labels; returns (parts, height)."""
    shown = [_short(x) for x in xlabels]
    every = math.ceil(len(shown) / _MAX_TICKS)  # at most _MAX_TICKS labels, evenly spread
    longest = max((len(x) for x in shown), default=0)
    label_room = 18 + 4 * longest if rotate else 22
    height = _TOP + _PLOT_H + label_room + 20 + _LEGEND_ROW * len(legend) + 6
    bottom = _TOP + _PLOT_H
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{_e(chart_id)}" '
        f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>',
        f'<text class="ttl" x="{WIDTH / 2:.1f}" y="18" text-anchor="middle">{_e(title)}</text>',
    ]
    for tick in _ticks(lo, hi):
        y = bottom - (tick - lo) / (hi - lo) * _PLOT_H
        parts.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{WIDTH - _RIGHT}" y2="{y:.1f}" stroke="#e3e3e3"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick_text(tick)}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{_LEFT}" y1="{bottom}" x2="{WIDTH - _RIGHT}" y2="{bottom}" '
        f'stroke="#555"/><line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" '
        f'y2="{bottom}" stroke="#555"/>'
    )
    for i, label in enumerate(shown):
        if i % every:
            continue
        x = _x_center(i, len(xlabels))
        if rotate:
            parts.append(
                f'<text x="{x:.1f}" y="{bottom + 12}" text-anchor="end" '
                f'transform="rotate(-35 {x:.1f} {bottom + 12})">{_e(label)}</text>'
            )
        else:
            parts.append(
                f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{_e(label)}</text>'
            )
    x_title_y = bottom + label_room + 12
    mid_y = _TOP + _PLOT_H / 2
    parts.append(
        f'<text class="axis-title" x="{(_LEFT + WIDTH - _RIGHT) / 2:.1f}" y="{x_title_y}" '
        f'text-anchor="middle">{_e(x_title)}</text>'
        f'<text class="axis-title" x="16" y="{mid_y:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {mid_y:.1f})">{_e(y_title)}</text>'
    )
    return parts, x_title_y + 8


_MAX_TICKS = 30
_MAX_LABEL = 18


def _short(label: str) -> str:
    """A tick label cut to fit (the mark's tooltip keeps the whole name).

    >>> _short("a_rather_long_clip_name.wav")
    'a_rather_long_cli…'
    """
    return label if len(label) <= _MAX_LABEL else label[: _MAX_LABEL - 1] + "…"


def _x_center(i: int, n: int) -> float:
    """The centre of the i-th of n equal slots along the x axis."""
    return _LEFT + (WIDTH - _LEFT - _RIGHT) * (i + 0.5) / max(n, 1)


def legend_names(series: Sequence[Series]) -> list[str]:
    """Legend entries; a series with the same values as an earlier one says so (its line or
    bars are drawn over the earlier one's and would otherwise hide them unsaid).

    >>> legend_names([Series("a", (0.5,)), Series("b", (0.5,)), Series("c", (0.2,))])
    ['a', 'b (same values as a)', 'c']
    """
    names = []
    for c, s in enumerate(series):
        twin = next((t.name for t in series[:c] if t.values == s.values), None)
        names.append(s.name if twin is None else f"{s.name} (same values as {twin})")
    return names


def _legend(parts: list[str], top: float, names: Sequence[str], *, bars: bool) -> None:
    for c, name in enumerate(names):
        y = top + _LEGEND_ROW * c + 12
        color, dash = COLORS[c % len(COLORS)], DASHES[(c // len(COLORS) + c) % len(DASHES)]
        if bars:
            sample = f'<rect x="{_LEFT}" y="{y - 9}" width="22" height="10" fill="{color}"/>'
        else:
            sample = (
                f'<line x1="{_LEFT}" y1="{y - 4}" x2="{_LEFT + 22}" y2="{y - 4}" stroke="{color}" '
                f'stroke-width="2"{_dash(dash)}/>'
            )
        parts.append(
            f'<g class="legend-entry">{sample}<text x="{_LEFT + 30}" y="{y}">{_e(name)}</text></g>'
        )


def _dash(dash: str) -> str:
    return f' stroke-dasharray="{dash}"' if dash else ""


def _y(value: float, lo: float, hi: float) -> float:
    clipped = min(max(value, lo), hi)
    return _TOP + _PLOT_H - (clipped - lo) / (hi - lo) * _PLOT_H


def line_chart(
    series: Sequence[Series],
    *,
    chart_id: str,
    title: str,
    x_title: str,
    y_title: str,
    xlabels: Sequence[str],
    lo: float = 0.0,
    hi: float = 1.0,
) -> str:
    """Lines with markers, one per series, over categorical x labels; values clipped to
    ``[lo, hi]`` (the tooltip keeps the exact value).

    >>> svg = line_chart([Series("a", (0.5, 1.0))], chart_id="c", title="T", x_title="k",
    ...                  y_title="r@k", xlabels=["1", "2"])
    >>> svg.count("<polyline"), svg.count("<circle"), "legend-entry" in svg
    (1, 2, True)
    """
    parts, legend_top = _frame(
        chart_id,
        title=title,
        x_title=x_title,
        y_title=y_title,
        xlabels=xlabels,
        lo=lo,
        hi=hi,
        legend=[s.name for s in series],
        rotate=False,
    )
    for c, s in enumerate(series):
        color, dash = COLORS[c % len(COLORS)], DASHES[(c // len(COLORS) + c) % len(DASHES)]
        points = [
            (_x_center(i, len(xlabels)), _y(v, lo, hi), v, xlabels[i])
            for i, v in enumerate(s.values)
            if v is not None and math.isfinite(v)
        ]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)
        parts.append(
            f'<g class="series"><polyline fill="none" stroke="{color}" stroke-width="2"'
            f'{_dash(dash)} points="{coords}"/>'
        )
        parts += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}">'
            f"<title>{_e(s.name)}, {_e(label)}: {v:.6f}</title></circle>"
            for x, y, v, label in points
        ]
        parts.append("</g>")
    _legend(parts, legend_top, legend_names(series), bars=False)
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    series: Sequence[Series],
    *,
    chart_id: str,
    title: str,
    x_title: str,
    y_title: str,
    xlabels: Sequence[str],
    lo: float = 0.0,
    hi: float = 1.0,
) -> str:
    """Grouped bars: one group per x label, one bar per series in it, from ``max(lo, 0)``
    (or ``lo`` when it is above 0); labels are rotated when there are many or long ones.

    >>> svg = bar_chart([Series("a", (0.5, None)), Series("b", (1.0, 0.0))], chart_id="c",
    ...                 title="T", x_title="bin", y_title="fraction", xlabels=["1", "2"])
    >>> svg.count("<rect"), svg.count("legend-entry")
    (5, 2)
    """
    rotate = len(xlabels) > 12 or max((len(x) for x in xlabels), default=0) > 6
    parts, legend_top = _frame(
        chart_id,
        title=title,
        x_title=x_title,
        y_title=y_title,
        xlabels=xlabels,
        lo=lo,
        hi=hi,
        legend=[s.name for s in series],
        rotate=rotate,
    )
    slot = (WIDTH - _LEFT - _RIGHT) / max(len(xlabels), 1)
    bar = max((slot * 0.8) / max(len(series), 1), 1.0)
    base = _y(min(max(0.0, lo), hi), lo, hi)
    for c, s in enumerate(series):
        color = COLORS[c % len(COLORS)]
        parts.append('<g class="series">')
        for i, v in enumerate(s.values):
            if v is None or not math.isfinite(v):
                continue
            x = _LEFT + slot * i + slot * 0.1 + bar * c
            top = _y(v, lo, hi)
            y, h = min(top, base), abs(base - top)
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{color}"><title>{_e(s.name)}, {_e(xlabels[i])}: {v:.6f}</title></rect>'
            )
        parts.append("</g>")
    _legend(parts, legend_top, legend_names(series), bars=True)
    parts.append("</svg>")
    return "".join(parts)

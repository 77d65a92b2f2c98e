"""The DET curve as speaker papers draw it: miss rate against false-alarm rate, both on probit
(normal deviate) axes, as inline SVG, with operating points marked.

The curve is the trials' operating points (:func:`audiorepro.metrics.verification.operating_points`,
ties accepted together), joined as a staircase; rates are clipped to the axes' range (0.05% to
60%), points that fall on the same tenth of a pixel are drawn once (a million trials draw in a
few thousand points), and each mark's ``<title>`` tooltip carries its exact rates. The output
is a function of the arguments alone.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

#: The axes' range (probabilities) and their ticks, as speaker-verification papers label them.
LO, HI = 0.0005, 0.6
TICKS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4)
SIZE, MARGIN = 300, 56
MARK_COLORS = ("#d55e00", "#009e73", "#cc79a7", "#e69f00")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pixels(rates: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Probabilities to pixel offsets along an axis (0 at ``LO``, ``SIZE`` at ``HI``)."""
    lo, hi = float(ndtri(LO)), float(ndtri(HI))
    deviates: npt.NDArray[np.float64] = ndtri(np.clip(rates, LO, HI))
    return (deviates - lo) / (hi - lo) * SIZE


def _tick(p: float) -> str:
    return f"{p * 100:g}%"


def det_chart(
    p_fa: npt.ArrayLike,
    p_miss: npt.ArrayLike,
    marks: Sequence[tuple[str, float, float]],
    *,
    chart_id: str,
    title: str,
) -> str:
    """The DET curve of the rates ``(p_fa[k], p_miss[k])`` (operating points in order) with
    ``marks`` (name, false-alarm rate, miss rate) drawn as labelled dots.

    >>> svg = det_chart([0.0, 0.25, 0.5, 1.0], [1.0, 0.5, 0.25, 0.0], [("EER", 0.3, 0.3)],
    ...                 chart_id="d", title="DET")
    >>> svg.count("<polyline"), svg.count("<circle"), "EER: false alarms 30.0000%" in svg
    (1, 1, True)
    """
    fa = np.asarray(p_fa, dtype=np.float64)
    miss = np.asarray(p_miss, dtype=np.float64)
    # a staircase: from each point, across to the next false-alarm rate, then down
    xs = np.repeat(fa, 2)[1:]
    ys = np.repeat(miss, 2)[:-1]
    x = np.round(MARGIN + _pixels(xs), 1)
    y = np.round(MARGIN + SIZE - _pixels(ys), 1)
    keep = np.r_[True, (np.diff(x) != 0) | (np.diff(y) != 0)]
    coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(x[keep], y[keep], strict=True))
    height = MARGIN + SIZE + 44 + 16 * len(marks)
    width = MARGIN + SIZE + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart det" id="{_e(chart_id)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>',
        f'<text class="ttl" x="{width / 2:.1f}" y="18" text-anchor="middle">{_e(title)}</text>',
    ]
    for t, px in zip(TICKS, _pixels(np.asarray(TICKS)), strict=True):
        gx, gy = MARGIN + px, MARGIN + SIZE - px
        parts.append(
            f'<line x1="{gx:.1f}" y1="{MARGIN}" x2="{gx:.1f}" y2="{MARGIN + SIZE}" '
            f'stroke="#e3e3e3"/><line x1="{MARGIN}" y1="{gy:.1f}" x2="{MARGIN + SIZE}" '
            f'y2="{gy:.1f}" stroke="#e3e3e3"/>'
            f'<text x="{gx:.1f}" y="{MARGIN + SIZE + 14}" text-anchor="middle">{_tick(t)}</text>'
            f'<text x="{MARGIN - 4}" y="{gy + 4:.1f}" text-anchor="end">{_tick(t)}</text>'
        )
    parts.append(
        f'<rect x="{MARGIN}" y="{MARGIN}" width="{SIZE}" height="{SIZE}" fill="none" '
        f'stroke="#555"/><text class="axis-title" x="{MARGIN + SIZE / 2}" '
        f'y="{MARGIN + SIZE + 32}" text-anchor="middle">false-alarm rate (probit)</text>'
        f'<text class="axis-title" x="14" y="{MARGIN + SIZE / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {MARGIN + SIZE / 2})">miss rate (probit)</text>'
        f'<polyline fill="none" stroke="#0072b2" stroke-width="2" points="{coords}"/>'
    )
    for i, (name, f, m) in enumerate(marks):
        color = MARK_COLORS[i % len(MARK_COLORS)]
        cx = MARGIN + float(_pixels(np.asarray([f]))[0])
        cy = MARGIN + SIZE - float(_pixels(np.asarray([m]))[0])
        label_y = MARGIN + SIZE + 50 + 16 * i
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{color}"><title>{_e(name)}: false '
            f"alarms {f:.4%}, misses {m:.4%}</title></circle>"
            f'<rect x="{MARGIN}" y="{label_y - 9}" width="10" height="10" fill="{color}"/>'
            f'<text x="{MARGIN + 16}" y="{label_y}">{_e(name)}: false alarms {f:.2%}, misses '
            f"{m:.2%}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)

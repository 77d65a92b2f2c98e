"""A confusion matrix as an inline SVG heatmap (the companion of :mod:`audiorepro.render.plots`).

Each cell is shaded by its share of its true class's row (0 white, 1 the palette's blue), the
count written inside and in a ``<title>`` tooltip; rows are true labels, columns predicted
labels. The output is a function of the arguments alone (one decimal per coordinate, ids from
the caller), so the same matrix always gives the same bytes.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

CELL = 34
_LEFT, _TOP = 96, 44


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _shade(share: float) -> str:
    """White to #0072b2 by ``share`` in [0, 1].

    >>> _shade(0.0), _shade(1.0)
    ('#ffffff', '#0072b2')
    """
    share = min(max(share, 0.0), 1.0)
    rgb = [round(255 + (c - 255) * share) for c in (0x00, 0x72, 0xB2)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def heatmap(
    labels: Sequence[str],
    counts: Sequence[Sequence[float | None]],
    *,
    chart_id: str,
    title: str,
) -> str:
    """A square confusion heatmap: ``counts[i][j]`` true ``labels[i]`` predicted ``labels[j]``
    (None: not recorded, drawn hatched grey).

    >>> svg = heatmap(["a", "b"], [[3, 1], [0, 4]], chart_id="h", title="T")
    >>> svg.count("<rect"), "true a, predicted b: 1" in svg
    (5, True)
    """
    n = len(labels)
    # Wide enough for the title (about 7 px a character at 12 px): a saved chart says what it is.
    width, height = max(_LEFT + CELL * n + 8, 7 * len(title) + 8), _TOP + CELL * n + 8
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{_e(chart_id)}" class="chart heatmap" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>'
        f'<rect width="{width}" height="{height}" fill="#fff"/>'
        f'<text x="4" y="14" font-size="12" font-weight="bold">{_e(title)}</text>'
        f'<text x="{_LEFT}" y="30" font-size="10">predicted →</text>'
    ]
    for j, label in enumerate(labels):
        x = _LEFT + CELL * j + CELL / 2
        parts.append(
            f'<text x="{x:.1f}" y="{_TOP - 3}" font-size="9" '
            f'text-anchor="middle">{_e(label[:6])}</text>'
        )
    for i, row in enumerate(counts):
        y = _TOP + CELL * i
        parts.append(
            f'<text x="{_LEFT - 4}" y="{y + CELL / 2 + 3:.1f}" font-size="9" '
            f'text-anchor="end">{_e(labels[i][:14])}</text>'
        )
        total = sum(v for v in row if v is not None)
        for j, value in enumerate(row):
            x = _LEFT + CELL * j
            fill = "#ddd" if value is None else _shade(value / total if total else 0.0)
            text = "–" if value is None else f"{value:g}"
            ink = "#fff" if value is not None and total and value / total > 0.55 else "#000"
            parts.append(
                f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{fill}" '
                f'stroke="#fff"><title>true {_e(labels[i])}, predicted {_e(labels[j])}: '
                f"{_e(text)}</title></rect>"
                f'<text x="{x + CELL / 2:.1f}" y="{y + CELL / 2 + 4:.1f}" font-size="10" '
                f'text-anchor="middle" fill="{ink}">{_e(text)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)

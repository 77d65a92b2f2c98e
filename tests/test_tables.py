"""Tables: best-per-column marking by direction, missing values, and the three renderings."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from pathlib import Path

import pytest

from audiorepro.render.html import table_html
from audiorepro.render.tables import (
    MISSING_TEXT,
    NOT_APPLICABLE,
    NOT_APPLICABLE_TEXT,
    Column,
    Table,
    to_csv,
    to_latex,
    to_markdown,
)

TABLE = Table(
    "AudioCaps, text to audio",
    (Column("r@1", True), Column("mean_rank", False), Column("n_clips")),
    (
        ("laion/clap_htsat-fused", (0.23197492163009403, 12.5, 957)),
        ("laion/clap-htsat-unfused", (0.3343782654127482, 12.5, 957)),
        ("broken", (None, 40.0, 957)),
    ),
)


def test_best_follows_each_metrics_direction_and_ties() -> None:
    assert TABLE.best() == [{1}, {0, 1}, set()]


def test_csv_keeps_full_precision_and_leaves_missing_empty() -> None:
    rows = list(csv.reader(io.StringIO(to_csv(TABLE))))
    assert rows[0] == ["model", "r@1", "mean_rank", "n_clips"]
    assert float(rows[1][1]) == 0.23197492163009403
    assert rows[3][1] == ""


def test_markdown_marks_best_and_says_missing() -> None:
    md = to_markdown(TABLE)
    assert "| laion/clap-htsat-unfused | **0.3344** | **12.5000** | 957 |" in md
    assert f"| broken | {MISSING_TEXT} | 40.0000 | 957 |" in md
    assert "r@1 ↑" in md and "mean_rank ↓" in md
    assert " 0 " not in md.replace("0.", "")


def test_latex_is_booktabs_escaped_and_marks_best() -> None:
    tex = to_latex(TABLE)
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"laion/clap\_htsat-fused" in tex
    assert r"\textbf{0.3344}" in tex
    assert "broken & --- & 40.0000 & 957" in tex


def test_a_cell_without_a_value_by_design_is_a_dash_not_missing() -> None:
    t = Table(
        "t",
        (Column("r@1", True), Column("baseline", True)),
        (("m", (0.5, NOT_APPLICABLE)), ("n", (None, 0.75))),
    )
    assert t.best() == [{0}, {1}]  # the marker is no number: never best, never compared
    assert to_csv(t).splitlines()[1:] == ["m,0.5,", "n,,0.75"]
    md = to_markdown(t)
    assert f"| m | **0.5000** | {NOT_APPLICABLE_TEXT} |" in md
    assert f"| n | {MISSING_TEXT} | **0.7500** |" in md
    assert r"m & \textbf{0.5000} &  \\" in to_latex(t)
    page = table_html(t, "t")
    assert f'<td class="na" data-value="">{NOT_APPLICABLE_TEXT}</td>' in page
    assert page.count(MISSING_TEXT) == 1


def test_renderings_are_deterministic() -> None:
    for render in (to_csv, to_markdown, to_latex):
        assert render(TABLE) == render(TABLE)


def test_latex_compiles(tmp_path: Path) -> None:
    engine = shutil.which("pdflatex") or shutil.which("lualatex")
    if engine is None:
        pytest.skip("no TeX engine on this machine (pdflatex/lualatex): LaTeX not compiled")
    doc = tmp_path / "t.tex"
    doc.write_text(
        "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n"
        + to_latex(TABLE)
        + "\\end{document}\n"
    )
    result = subprocess.run(
        [engine, "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]

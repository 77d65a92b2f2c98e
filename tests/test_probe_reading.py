"""The probe report read from the top (issue 27, item 6): the verdict, then the leaders and the
summaries with their charts, then the per-run panels, then saved vs recomputed summarized per
run with every compared number on demand; no long table in the reader's way; a dash (with its
legend) where a cell has no value by design, "Not recorded / undefined" where one was expected."""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.render.html import LONG_TABLE_ROWS
from audiorepro.render.tables import MISSING_TEXT, NOT_APPLICABLE_TEXT
from audiorepro.runner.demo import prepare_probe_demo
from tests.conftest import ROOT

LAYOUT_STUDY = ROOT / "studies" / "probe_published_layout.toml"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("demo")
    out = tmp / "out"
    assert main(["reproduce", str(prepare_probe_demo(tmp / "work")), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("layout") / "out"
    with pytest.MonkeyPatch.context() as mp:  # the report shows its time: a fixed one
        mp.setenv("SOURCE_DATE_EPOCH", EPOCH)
        assert main(["reproduce", str(LAYOUT_STUDY), "--out", str(out)]) == 0
    return out


#: the report time of the layout study's runs here (the report shows it; SOURCE_DATE_EPOCH
#: makes two runs' reports byte-identical)
EPOCH = "1791331200"


def _tables(page: str) -> list[tuple[int, str, int]]:
    """(position, id, body rows) of every table of the page."""
    return [
        (m.start(), m.group(1), m.group(2).count("<tr>"))
        for m in re.finditer(r"<table[^>]*id=\"([^\"]+)\".*?<tbody>(.*?)</tbody>", page, re.S)
    ]


def _collapsed(page: str, at: int) -> bool:
    """Whether position ``at`` is inside a <details> element (they do not nest here)."""
    return page.rfind("<details", 0, at) > page.rfind("</details>", 0, at)


@pytest.mark.parametrize("which", ["demo", "layout"])
def test_the_report_opens_with_the_verdict_then_the_leaders_with_charts(
    which: str, request: pytest.FixtureRequest
) -> None:
    page = (request.getfixturevalue(which) / "report.html").read_text()
    verdict = page.index('id="summary"')
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", page)
    assert headings[:2] == ["Task leaders", "Family means"], headings
    assert verdict < page.index("<h2")
    first_table = _tables(page)[0]
    assert first_table[1] == "table-task_leaders" and verdict < first_table[0]
    # The leader values against the baselines are charted before any per-run panel.
    charts = re.findall(r'<svg[^>]*class="chart" id="(plot-task-leaders-\d+)"', page)
    assert charts and page.index(charts[-1]) < page.index("<h2>Per-run panels</h2>")
    assert 'id="plot-families-normalized_mae"' in page
    if "<h2 id='parity'>" in page:  # the layout study has no predictions to compare
        assert page.index("<h2>Per-run panels</h2>") < page.index("<h2 id='parity'>")


def test_the_heatmaps_and_history_curves_come_with_the_summaries(layout: Path) -> None:
    """Issue 27 item 6: the confusion heatmaps and the validation-history curves sit with the
    summaries (after the leaders and family means), before the per-run panels; not among the
    study's prose at the end."""
    page = (layout / "report.html").read_text()
    families = page.index("<h2 id='summaries'>Family means</h2>")
    panels = page.index("<h2>Per-run panels</h2>")
    heatmaps = [m.start() for m in re.finditer('class="chart heatmap"', page)]
    history = page.index('id="history"')
    assert heatmaps and all(families < at < panels for at in heatmaps)
    assert page.index("<h2 id='leaders'>") < families < history < panels
    titles = re.findall(r"<h2 id='figure-\d+' class='figure'>(.*?)</h2>", page)
    assert titles == ["Validation history", "Confusion matrices (heatmaps)"]
    assert page.index(f">{titles[0]}</h2>") < history
    # The same inputs, the same page: the moved figures keep the report byte-deterministic.
    again = layout.parent / "again"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOURCE_DATE_EPOCH", EPOCH)
        assert main(["reproduce", str(LAYOUT_STUDY), "--out", str(again)]) == 0
    assert (again / "report.html").read_bytes() == (layout / "report.html").read_bytes()


@pytest.mark.parametrize("which", ["demo", "layout"])
def test_no_long_table_stands_in_the_readers_way(
    which: str, request: pytest.FixtureRequest
) -> None:
    page = (request.getfixturevalue(which) / "report.html").read_text()
    tables = _tables(page)
    first_result = tables[0][0]
    assert all(rows <= 100 for at, _, rows in tables if at <= first_result)
    long = [(at, name) for at, name, rows in tables if rows > LONG_TABLE_ROWS]
    assert long, "the fixture should have a long table to collapse"
    assert [name for at, name in long if not _collapsed(page, at)] == []
    # Every table scrolls in its own box: none can widen the page.
    assert page.count("<table") == page.count("<div class='scroll'><table")


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _agree(out: Path) -> list[dict[str, str]]:
    """The per-run summary's counts are the full list's, group by group."""
    full = _csv(out / "tables" / "metric_parity.csv")
    summary = _csv(out / "tables" / "metric_parity_summary.csv")
    compared = Counter((r["run"], r["split"]) for r in full)
    failed = Counter((r["run"], r["split"]) for r in full if r["status"] == "FAIL")
    assert {(r["run"], r["split"]): int(r["compared"]) for r in summary} == dict(compared)
    assert {(r["run"], r["split"]): int(r["failed"]) for r in summary} == {
        k: failed[k] for k in compared
    }
    for r in summary:
        deltas = [
            float(c["abs_delta"])
            for c in full
            if (c["run"], c["split"]) == (r["run"], r["split"]) and c["abs_delta"]
        ]
        if not deltas:  # every comparison undefined: no largest difference (a dash)
            assert r["largest abs_delta"] == ""
            continue
        assert float(r["largest abs_delta"]) == pytest.approx(max(deltas), rel=1e-2, abs=0)
    return summary


def test_the_comparison_is_summarized_per_run_and_listed_in_full_on_demand(demo: Path) -> None:
    summary = _agree(demo)
    assert {r["result"] for r in summary} <= {"all equal", "all within tolerance"}
    page = (demo / "report.html").read_text()
    full = len(_csv(demo / "tables" / "metric_parity.csv"))
    assert full > 1000  # the demo's 1,153 numbers, no longer in the reader's way
    summary_at = page.index('id="table-metric_parity_summary"')
    full_at = page.index('id="table-metric_parity"')
    assert not _collapsed(page, summary_at) and _collapsed(page, full_at)
    assert f"Every compared number ({full} rows;" in page
    assert page.index("<h2>Per-run panels</h2>") < summary_at
    assert page.index("<a href='#parity'>") < page.index("<h2")  # the verdict points to it


def test_a_refuted_number_is_named_in_its_runs_summary(tmp_path: Path) -> None:
    study = prepare_probe_demo(tmp_path / "work", tampered=True)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 1
    summary = _agree(tmp_path / "out")
    failing = [r for r in summary if r["result"].endswith("FAIL")]
    full = _csv(tmp_path / "out" / "tables" / "metric_parity.csv")
    bad = [c for c in full if c["status"] == "FAIL"]
    assert len(failing) == len({(c["run"], c["split"]) for c in bad}) >= 1
    assert failing[0]["first failure or largest delta at"] == bad[0]["metric"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.index('class="fail"') < page.index("<h2")  # the verdict says it first


def test_a_dash_where_no_value_is_expected_and_missing_only_where_one_is(demo: Path) -> None:
    leaders = (demo / "tables" / "task_leaders.md").read_text()
    # Each baseline run is compared on one task only: the others are a dash, explained.
    assert NOT_APPLICABLE_TEXT in leaders and MISSING_TEXT not in leaders
    assert "a baseline the task does not compare" in leaders
    # The CSV keeps such a cell empty, as a missing one (numbers unchanged).
    rows = _csv(demo / "tables" / "task_leaders.csv")
    assert any(v == "" for r in rows for v in r.values())
    # A task every run leaves undefined still says so ("expected, not recorded / undefined").
    recomputed = (demo / "tables" / "leaders.md").read_text()
    undefined = next(line for line in recomputed.splitlines() if "emotion_21" in line)
    assert MISSING_TEXT in undefined and NOT_APPLICABLE_TEXT not in undefined
    page = (demo / "report.html").read_text()
    assert page.count(MISSING_TEXT) < 190  # the demo's count before this change

"""The retrieval report shows what the study asked first: the verdict, published against
reproduced, every requested profile beside canonical (in the report and in ``tables/``), the
plots of all models of a dataset outside the collapsed panels, each definition once without
markup; checked in a real headless browser at 1400 px (no horizontal overflow, every plot
drawn), byte-identical on a rerun."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.render import html as report_html
from audiorepro.runner.demo import prepare_probe_demo
from tests.conftest import ROOT
from tests.test_outputs_folder import _study

ARTIFACTS = Path(os.environ.get("AUDIOREPRO_TEST_ARTIFACTS", ROOT / "test-artifacts"))
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
PROFILES = 'profiles = ["canonical", "laion-clap", "trec"]\n'


def open_browser() -> Any:
    """Debian's chromium through its chromedriver, headless; skips where they are missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed (.ci/run installs them)"
        )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # As root, without the background-networking flags Chromium keeps dialling out, refused.
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def check_layout(
    browser: Any, page: Path, plot_ids: list[str], screenshot: Path, *, tables_fit: bool = True
) -> None:
    """At 1400 px: no horizontal overflow of the page (nor of a table, with ``tables_fit``:
    a wide table scrolls in its own box), every plot drawn without opening anything (axis
    titles, a legend entry per series), no console error; saves a full-page screenshot."""
    from selenium.webdriver.common.by import By

    browser.set_window_size(1400, 1000)
    browser.get(page.as_uri())
    width = browser.execute_script("return document.documentElement.clientWidth")
    scroll = browser.execute_script("return document.documentElement.scrollWidth")
    assert scroll <= width, f"the page overflows: {scroll} px wide in a {width} px window"
    wide = browser.execute_script(
        "return Array.from(document.querySelectorAll('.scroll'))"
        ".filter(e => e.scrollWidth > e.clientWidth).map(e => e.firstElementChild.id)"
    )
    assert not tables_fit or wide == [], f"tables wider than the page: {wide}"
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert sorted(c.get_attribute("id") for c in charts) == sorted(plot_ids)
    for chart in charts:
        name = chart.get_attribute("id")
        assert chart.is_displayed(), f"plot {name} is not shown"
        assert chart.size["width"] >= 400 and chart.size["height"] >= 200, (name, chart.size)
        assert chart.find_elements(By.XPATH, "ancestor::details") == [], f"{name} in a panel"
        assert len(chart.find_elements(By.CSS_SELECTOR, "text.axis-title")) == 2, name
        marks = chart.find_elements(By.CSS_SELECTOR, "g.series polyline, g.series rect")
        legend = chart.find_elements(By.CSS_SELECTOR, "g.legend-entry")
        assert marks and legend, f"plot {name} has no marks or no legend"
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, height + 100)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(screenshot))
    errors = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == [], errors
    assert screenshot.stat().st_size > 20_000


def _profile_study(tmp_path: Path, title: str | None = None) -> Path:
    path = _study(tmp_path)
    head = 'name = "synthetic"\n'
    extra = PROFILES + (f'title = "{title}"\n' if title else "")
    path.write_text(path.read_text().replace(head, head + extra, 1))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("profiles")
    out = tmp / "out"
    assert main(["reproduce", str(_profile_study(tmp)), "--out", str(out)]) == 0
    return out


def _bundle(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    return data


def _h2_ids(page: str) -> list[str]:
    return re.findall(r"<h2 id='([^']+)'>", page)


def test_published_table_follows_the_verdict(run: Path) -> None:
    page = (run / "report.html").read_text()
    body = page[page.index("<body>") :]
    assert _h2_ids(page)[:2] == ["published", "results"]
    assert body.index('id="summary"') < body.index("id='published'") < body.index("id='results'")
    assert "<h1>synthetic</h1>" in page and "<title>synthetic</title>" in page


def test_every_requested_profile_beside_canonical(run: Path) -> None:
    bundle = _bundle(run)
    five = next(c for c in bundle["cells"] if c["id"] == "five")
    with (run / "tables" / "synthetic-5cap_t2a_profiles.csv").open() as f:
        rows = {(r["model"], r["profile"]): r for r in csv.DictReader(f)}
    assert set(rows) == {("synthetic", p) for p in ("canonical", "laion-clap", "trec")}
    # Each row holds the bundle's number under that profile's own name, at full precision.
    assert float(rows["synthetic", "canonical"]["R@1"]) == five["metrics"]["t2a"]["r@1"]
    laion = five["profiles"]["laion-clap"]["text_to_audio_R@1"]
    assert float(rows["synthetic", "laion-clap"]["R@1"]) == laion
    assert float(rows["synthetic", "trec"]["mAP"]) == five["profiles"]["trec"]["t2a/map"]
    assert rows["synthetic", "laion-clap"]["MRR"] == ""  # laion-clap has no MRR: empty, not 0
    assert laion != five["metrics"]["t2a"]["r@1"]  # what a reader came to see differs
    for name in ("synthetic-5cap_a2t_profiles", "synthetic-1cap_t2a_profiles"):
        for suffix in (".csv", ".md", ".tex"):
            assert (run / "tables" / f"{name}{suffix}").is_file()
    page = (run / "report.html").read_text()
    assert 'id="table-synthetic-5cap_t2a_profiles"' in page
    assert f'data-value="{laion!r}"' in page


def test_the_report_opens_with_an_index_of_the_folder(run: Path) -> None:
    page = (run / "report.html").read_text()
    index = page[page.index("id='files'") : page.index("</details>", page.index("id='files'"))]
    assert page.index('id="summary"') < page.index("id='files'") < page.index("id='published'")
    for entry in run.iterdir():
        assert f"<code>{entry.name}{'/' if entry.is_dir() else ''}</code>" in index, entry.name
    for table in (run / "tables").glob("*.csv"):
        assert f"<code>{table.stem}</code>" in index, table.name


def test_a_study_without_other_profiles_has_no_profile_tables(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", str(_study(tmp_path)), "--out", str(out)]) == 0
    assert not list((out / "tables").glob("*_profiles.*"))
    assert "_profiles" not in (out / "report.html").read_text()


def test_definitions_once_without_markup(run: Path) -> None:
    page = (run / "report.html").read_text()
    section = page[page.index("id='definitions'") : page.index("id='provenance'")]
    assert section.count("fraction of queries with at least one relevant item") == 1
    assert "<code>r@1</code>, <code>r@5</code>, <code>r@10</code>" in section
    text = re.sub(r"<[^>]+>", "", page)
    assert "``" not in text and not re.search(r"\bNone\b", text)
    probe = report_html._probe_definitions()
    assert "``" not in probe and not re.search(r"\bNone\b", probe) and "<code>" in probe


def test_plots_are_outside_the_panels_with_titles_and_legends(run: Path) -> None:
    page = (run / "report.html").read_text()
    for panel in re.findall(r"<details.*?</details>", page, flags=re.S):
        assert "<svg" not in panel
    for dataset in ("synthetic-5cap", "synthetic-1cap"):
        for kind in ("rk", "ranks"):
            for d in ("t2a", "a2t"):
                chart = re.search(rf'<svg[^>]*id="plot-{kind}-{dataset}-{d}".*?</svg>', page)
                assert chart is not None, (kind, dataset, d)
                assert chart.group(0).count('class="axis-title"') == 2
                assert chart.group(0).count('class="legend-entry"') == 1  # one model each


def test_title_is_the_studys_and_a_rerun_is_byte_identical(tmp_path: Path) -> None:
    study = _profile_study(tmp_path, title="Two synthetic dumps")
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["reproduce", str(study), "--out", str(first)]) == 0
    assert main(["reproduce", str(study), "--out", str(second)]) == 0
    names = ["report.html", *(f"tables/{p.name}" for p in sorted((first / "tables").iterdir()))]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    page = (first / "report.html").read_text()
    assert "<h1>Two synthetic dumps</h1>" in page and "audiorepro report:" not in page


def test_report_at_1400px_in_a_headless_browser(run: Path) -> None:
    plots = [
        f"plot-{kind}-{dataset}-{d}"
        for dataset in ("synthetic-5cap", "synthetic-1cap")
        for kind in ("rk", "ranks")
        for d in ("t2a", "a2t")
    ]
    browser = open_browser()
    try:
        check_layout(browser, run / "report.html", plots, ARTIFACTS / "report-profiles-1400.png")
    finally:
        browser.quit()


def test_identity_charts_name_their_clips() -> None:
    block = {
        "hf_checkpoint": "hf-model",
        "control": "laion-model",
        "clip_ids": ["tone_440.wav", "a_rather_long_clip_name_indeed.wav"],
        "audio_embedding_cosine_per_clip": [0.99, -0.25],
        "text_embedding_cosine_per_clip": [1.0, 0.5, 0.25, 0.0],
    }
    page = report_html._identity_plots([block])
    audio = re.search(r'<svg[^>]*id="plot-identity-1-audio".*?</svg>', page)
    text = re.search(r'<svg[^>]*id="plot-identity-1-text".*?</svg>', page)
    assert audio is not None and text is not None
    assert ">tone_440.wav</text>" in audio.group(0)  # the clip's name under its bar
    assert "a_rather_long_clip_name_indeed.wav: -0.250000</title>" in audio.group(0)
    assert audio.group(0).count("<rect") == 2 + 1 and text.group(0).count("<rect") == 4 + 1
    assert "fixture caption" in text.group(0) and "cosine similarity" in text.group(0)
    assert "no checkpoint-identity check" in report_html._identity_plots([])


def test_probe_report_does_not_overflow_the_page(tmp_path: Path) -> None:
    """Wide probe tables (a column per speaker set or target) scroll in their own box."""
    out = tmp_path / "out"
    assert main(["reproduce", str(prepare_probe_demo(tmp_path / "work")), "--out", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "<h1>audiorepro demo: a synthetic probe study" in page
    # The leaders' and the families' charts, drawn outside every panel (issue 27).
    plots = re.findall(r'<svg[^>]*class="chart" id="([^"]+)"', page)
    assert [p for p in plots if p.startswith("plot-task-leaders-")] and len(plots) >= 8
    browser = open_browser()
    try:
        check_layout(
            browser, out / "report.html", plots, ARTIFACTS / "probe-1400.png", tables_fit=False
        )
    finally:
        browser.quit()

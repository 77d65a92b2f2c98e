"""The runner end to end: the demo study, byte-identical reruns, verify, failures, the report
in a real headless browser."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from tests.conftest import FIXTURES, GOLDEN, ROOT, foreign_lines, outputs
from tests.goldens import demo_data
from tests.test_report_html import check_layout, open_browser

pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")

ARTIFACTS = Path(os.environ.get("AUDIOREPRO_TEST_ARTIFACTS", ROOT / "test-artifacts"))
DETERMINISTIC = ("report.html", "bundle.json.gz", "verification.json")


def _outputs(out: Path) -> dict[str, str]:
    return outputs(out, DETERMINISTIC)


def test_demo_writes_every_output(demo: Path) -> None:
    for name in (*DETERMINISTIC, "manifest.json"):
        assert (demo / name).is_file(), name
    tables = {p.name for p in (demo / "tables").iterdir()}
    for stem in ("synthetic-5cap_t2a", "fixture-audio_a2t", "parity", "identity", "published"):
        assert {f"{stem}.csv", f"{stem}.md", f"{stem}.tex"} <= tables
    # The default run shows both study kinds: the probe demo is written beside it.
    for name in (*DETERMINISTIC, "manifest.json", "tables/leaders.md"):
        assert (demo / "probe" / name).is_file(), name
    manifest = json.loads((demo / "manifest.json").read_text())
    # ... and the top-level manifest, written last, covers it (issue 14).
    assert {"probe/manifest.json", "probe/verification.json"} <= set(manifest["outputs"])


def test_verification_keeps_the_published_structure(demo: Path) -> None:
    ours = json.loads((demo / "verification.json").read_text())
    reference = json.loads(
        (FIXTURES / "reference" / "published-verification-output.json").read_text()
    )
    assert set(reference) <= set(ours)
    assert set(reference["checkpoint_identity"]) <= set(ours["checkpoint_identity"])
    assert set(reference["metric_parity"]) <= set(ours["metric_parity"])
    row_keys = set(reference["metric_parity"]["cells"][0]["rows"][0])
    assert row_keys <= set(ours["metric_parity"]["cells"][0]["rows"][0])
    assert ours["metric_parity_passed"] is True and ours["failures"] == []
    assert ours["checkpoint_identity"]["verdict"] == "identical"
    assert ours["cross_pipeline_comparable"] is True
    assert ours["golden"]["counts"] == {"PASS": 8, "FAIL": 0, "NOT VERIFIED": 0}


def test_bundle_is_canonical_and_free_of_time_host_and_path(demo: Path) -> None:
    raw = (demo / "bundle.json.gz").read_bytes()
    assert raw[4:8] == b"\0\0\0\0", "gzip mtime must be 0"
    text = gzip.decompress(raw).decode()
    bundle = json.loads(text)
    assert text == json.dumps(bundle, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    texts = [text, (demo / "report.html").read_text(), (demo / "verification.json").read_text()]
    for forbidden in (str(demo.parent), socket.gethostname(), "2026-"):
        assert all(forbidden not in t for t in texts), forbidden
    cell = next(c for c in bundle["cells"] if c["id"] == "synthetic/5cap")
    low, high = cell["intervals"]["t2a"]["r@1"]
    assert low <= cell["metrics"]["t2a"]["r@1"] <= high
    assert bundle["paired_bootstrap"], "the demo compares models on the same queries"


def test_demo_published_values_are_the_fixture_goldens() -> None:
    import yaml

    from audiorepro.synthetic.dumps import golden_5cap

    golden = yaml.safe_load((GOLDEN / "fixtures" / "synthetic_5cap.yml").read_text())
    expected = {
        f"{d}/{m}": golden["metrics"][d][m]
        for d in ("t2a", "a2t")
        for m in ("r@1", "r@5", "r@10", "map")
    }
    assert golden_5cap() == expected


def test_rerun_is_byte_identical_with_another_thread_count(demo: Path, tmp_path: Path) -> None:
    second = tmp_path / "second"
    # Reuse the prepared inputs and tiny models (their bytes are covered by the study's hashes
    # and the registries'), not the extraction cache: embeddings are recomputed.
    shutil.copytree(demo / "cache" / "demo", second / "cache" / "demo")
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", SOURCE_DATE_EPOCH="0")
    result = subprocess.run(
        [sys.executable, "-m", "audiorepro", "reproduce", "--out", str(second)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert _outputs(second) == _outputs(demo)
    assert main(["diff", str(demo), str(second)]) == 0  # identical: issue 26's first check
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["time"] == {"utc": "1970-01-01T00:00:00Z", "source": "SOURCE_DATE_EPOCH"}
    assert manifest["environment"]["thread_variables"]["OMP_NUM_THREADS"] == "1"
    for rel, digest in manifest["outputs"].items():
        assert hashlib.sha256((second / rel).read_bytes()).hexdigest() == digest
    assert (
        manifest["study"]["sha256"]
        == hashlib.sha256((second / "cache" / "demo" / "study.toml").read_bytes()).hexdigest()
    )


def _synthetic_study(tmp_path: Path, value: float | None = None, drop_dump: bool = False) -> Path:
    """A models-free study over two fixture dumps, with the 5cap goldens as published values."""
    from audiorepro.synthetic.dumps import golden_5cap

    shutil.copy(FIXTURES / "dumps" / "synthetic_5cap.npz", tmp_path / "a.npz")
    shutil.copy(FIXTURES / "dumps" / "synthetic_1cap.npz", tmp_path / "b.npz")
    values = golden_5cap()
    if value is not None:
        values["t2a/r@1"] = value
    sha = {n: hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in ("a.npz", "b.npz")}
    if drop_dump:
        (tmp_path / "a.npz").unlink()
    body = "\n".join(
        [
            'schema = "audiorepro.study/1"',
            'name = "synthetic"',
            "[[cell]]",
            'id = "five"',
            'model = "synthetic"',
            'dataset = "synthetic-5cap"',
            'dump = "a.npz"',
            f'sha256 = "{sha["a.npz"]}"',
            "[[cell]]",
            'id = "one"',
            'model = "synthetic"',
            'dataset = "synthetic-1cap"',
            'dump = "b.npz"',
            f'sha256 = "{sha["b.npz"]}"',
            "[[published]]",
            'cell = "five"',
            "tolerance = 1e-12",
            'provenance = "test"',
            "values = { " + ", ".join(f'"{k}" = {v!r}' for k, v in values.items()) + " }",
        ]
    )
    path = tmp_path / "study.toml"
    path.write_text(body + "\n")
    return path


def test_verify_study_passes_and_names_a_tampered_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(_synthetic_study(tmp_path))]) == 0
    assert "8 passed, 0 failed, 0 not verified" in capsys.readouterr().out
    tampered = tmp_path / "t"
    tampered.mkdir()
    assert main(["verify", str(_synthetic_study(tampered, value=0.5))]) == 1
    out = capsys.readouterr().out
    assert "FAIL         five  t2a/r@1  published 0.5" in out
    assert "7 passed, 1 failed" in out


def test_verify_missing_dump_is_not_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(_synthetic_study(tmp_path, drop_dump=True))]) == 1
    out = capsys.readouterr().out
    assert "NOT VERIFIED five  8 values (t2a/r@1, " in out and "is not available here" in out
    assert "0 passed, 0 failed, 8 not verified" in out


def test_broken_study_is_exit_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _synthetic_study(tmp_path)
    path.write_text(path.read_text().replace('dataset = "synthetic-5cap"', 'datset = "x"'))
    for command in (["reproduce", str(path), "--out", str(tmp_path / "o")], ["verify", str(path)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "cell[0].datset" in err and "unknown key" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_failing_study_still_reports_and_says_so_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", str(_synthetic_study(tmp_path, value=0.5)), "--out", str(out)]) == 1
    assert "FAILED (1 problem(s))" in capsys.readouterr().out
    report = (out / "report.html").read_text()
    body = report[report.index("<body>") :]
    assert body.index("FAILED") < body.index("<h2")
    assert "published five t2a/r@1: FAIL" in body
    verification = json.loads((out / "verification.json").read_text())
    assert verification["failures"] == ["published five t2a/r@1: FAIL"]
    # verify on the output folder re-reads the checks and the manifest's hashes.
    assert main(["verify", str(out)]) == 1
    capsys.readouterr()
    (out / "tables" / "parity.csv").write_text("tampered\n")
    assert main(["verify", str(out)]) == 1
    assert "output  tables/parity.csv" in capsys.readouterr().out


def test_report_in_a_headless_browser(demo: Path) -> None:
    """Sorting works, the panels open, and at 1400 px the page does not overflow and every
    plot (r@k and ranks of each dataset, the identity cosines) is drawn outside the panels."""
    from selenium.webdriver.common.by import By

    datasets = ("synthetic-5cap", "synthetic-1cap", "fixture-audio")
    plots = [
        f"plot-{k}-{ds}-{d}" for ds in datasets for k in ("rk", "ranks") for d in ("t2a", "a2t")
    ]
    browser = open_browser()
    try:
        check_layout(
            browser,
            demo / "report.html",
            [*plots, "plot-identity-1-audio", "plot-identity-1-text"],
            ARTIFACTS / "report.png",
        )
        browser.get((demo / "report.html").as_uri())
        table = browser.find_element(By.ID, "table-fixture-audio_t2a")

        def column(index: int) -> list[str]:
            return [
                row.find_elements(By.TAG_NAME, "td")[index].get_attribute("data-value") or ""
                for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")
            ]

        before = column(1)  # r@1
        header = table.find_elements(By.TAG_NAME, "th")[1]
        header.click()
        ascending = column(1)
        header.click()
        descending = column(1)
        assert ascending == sorted(before, key=float) and descending == sorted(
            before, key=float, reverse=True
        )
        # The requested profiles sit beside canonical: laion-clap's rows are in the page.
        profiles = browser.find_element(By.ID, "table-synthetic-5cap_t2a_profiles")
        assert "laion-clap" in profiles.text and "trec" in profiles.text
        panel = browser.find_element(By.CSS_SELECTOR, "details.cell")
        assert panel.get_attribute("open") is None
        panel.find_element(By.TAG_NAME, "summary").click()
        assert panel.get_attribute("open") is not None
        assert panel.find_element(By.TAG_NAME, "table").is_displayed()
    finally:
        browser.quit()


def test_demo_golden(demo: Path, tiered_regression: Any) -> None:
    """Every retrieval number of the demo, in its tier, and its identity verdict.

    The synthetic cells' exact-engine numbers are tier a; the tiny-model cells' numbers and the
    laion-clap profile's (torch float32) are tier b, each within its derived tolerance.
    """
    tiered_regression(demo_data(demo), GOLDEN / "demo" / "demo.yml")


def test_a_demo_run_prints_only_audiorepro_lines(demo: Path) -> None:
    """The demo, run as a user runs it (its own process, stage lines on): stderr holds only
    audiorepro's lines, none of torch's, torchaudio's or laion-clap's (filtered where they are
    made: audiorepro.models.quiet). The shared demo kept its stderr beside its output."""
    stderr = (demo.parent / "stderr.txt").read_text()
    assert "extract: started" in stderr  # the stage lines are there, so the check has teeth
    assert foreign_lines(stderr) == []

"""What ``reproduce`` and ``evaluate`` print when a run ends: per study, its verdict and where
the report is, its failures, then the headline numbers
(:func:`audiorepro.render.summary.results_table`), so that a log ends with the numbers."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from audiorepro.render.summary import results_table
from audiorepro.runner.outputs import Outcome
from audiorepro.specs.study import Study


def say_results(results: Sequence[tuple[Study, Path, Outcome]], say: Callable[[str], None]) -> bool:
    """Print every study's closing lines; returns whether every study passed."""
    passed = True
    for study, folder, result in results:
        status = "PASSED" if result["passed"] else f"FAILED ({len(result['failures'])} problem(s))"
        say(f"{study.name}: {status}; report {folder / 'report.html'}")
        for failure in result["failures"]:
            say(f"  {failure}")
        bundle_path = folder / "bundle.json.gz"
        if bundle_path.is_file():
            for line in results_table(json.loads(gzip.decompress(bundle_path.read_bytes()))):
                say(f"  {line}")
        passed = passed and bool(result["passed"])
    return passed

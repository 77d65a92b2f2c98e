"""What ``reproduce`` and ``evaluate`` print when a run ends: per study, its verdict and where
the report is, its failures, then the headline numbers
(:func:`audiorepro.render.summary.results_table`), so that a log ends with the numbers; and
what ``verify OUT`` prints after its verdict: the same table, per study of the folder."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiorepro.checks.verdict import NOTHING_CHECKED
from audiorepro.core.errors import UserError
from audiorepro.render.summary import results_table
from audiorepro.runner.output.folder import OUT_TO_CHECK, recorded_nothing

if TYPE_CHECKING:
    from audiorepro.runner.output.outputs import Outcome
    from audiorepro.specs.study import Study


def say_results(results: Sequence[tuple[Study, Path, Outcome]], say: Callable[[str], None]) -> bool:
    """Print every study's closing lines; returns whether every study passed."""
    passed = True
    for study, folder, result in results:
        ok = bool(result["passed"])
        status = "PASSED" if ok else f"FAILED ({len(result['failures'])} problem(s))"
        nothing = ok and recorded_nothing(folder)
        if nothing:  # never PASSED of nothing (as verify OUT says of the same folder)
            status, ok = NOTHING_CHECKED, False
        say(f"{study.name}: {status}; report {folder / 'report.html'}")
        for failure in result["failures"]:
            say(f"  {failure}")
        if nothing:
            say(f"  {OUT_TO_CHECK}")
        bundle_path = folder / "bundle.json.gz"
        if bundle_path.is_file():
            for line in results_table(json.loads(gzip.decompress(bundle_path.read_bytes()))):
                say(f"  {line}")
        passed = passed and ok
    return passed


def _read_bundle(path: Path) -> Any:
    """A bundle's content, or None when it cannot be read as one (``verify`` has already
    said what is wrong with a damaged output; the table is then left out). Bounded as diff
    reads it (:func:`~audiorepro.checks.diff_load.parse_bundle`): a small gzip holding a
    million numbers is left out, not walked."""
    # diff's reader and its kinds: imported only where a bundle is there to read.
    from audiorepro.checks.diff_load import MAX_BUNDLE_BYTES, parse_bundle

    try:
        with gzip.open(path, "rb") as f:
            data = f.read(MAX_BUNDLE_BYTES + 1)
        if len(data) > MAX_BUNDLE_BYTES:
            return None
        return parse_bundle(data, path)
    except (OSError, EOFError, zlib.error, UserError):
        return None


def say_folder_results(out: Path, say: Callable[[str], None]) -> None:
    """``verify OUT``'s closing table: for the folder's study and each nested one (a folder
    of OUT with its own bundle), its name and headline numbers, read from its bundle."""
    folders = [out, *sorted(p.parent for p in out.glob("*/bundle.json.gz"))]
    for folder in folders:
        path = folder / "bundle.json.gz"
        if path.is_symlink() or not path.is_file():
            continue
        bundle = _read_bundle(path)
        if not isinstance(bundle, dict):
            continue
        try:
            lines = results_table(bundle)
        except (AttributeError, TypeError, KeyError, ValueError):  # a bundle of another shape
            continue
        if not lines:  # no headline numbers: no empty table
            continue
        study = bundle.get("study")
        name = study.get("name") if isinstance(study, dict) else None
        rel = folder.relative_to(out).as_posix()
        where = "" if rel == "." else f"{rel}/"
        say(f"{name or rel}: results ({where}bundle.json.gz)")
        for line in lines:
            say(f"  {line}")

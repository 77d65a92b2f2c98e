"""Tolerances that mean something (issue 24, item 3): in every published-value format (a
published-values file, published probe values, a study's ``[[published]]``, a zero-shot
study's), a tolerance at or beyond its metric's range (``1e308`` on ``r@1``, which let
``r@1 = 123456`` pass), a negative one, or a value outside its metric's range is refused at
load: exit 2, one line naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_hostile import (
    _fresh,
    _one_line,
    _probe_study_with_saved,
    _run,
    _valid_published,
    _valid_study,
    _zeroshot_study,
)


def _published(folder: Path) -> tuple[str, str, str, Callable[[Path, Path], list[str]]]:
    """A published-values file: its text, the tolerance and value as written, the command."""
    return (
        _valid_published(folder), "tolerance = 1e-9", '"t2a/r@1" = 0.5',
        lambda f, t: ["verify", "--golden", str(f), "--dumps", str(f.parent)],
    )  # fmt: skip


def _study(folder: Path) -> tuple[str, str, str, Callable[[Path, Path], list[str]]]:
    return (
        _valid_study(folder), "tolerance = 1e-9", '"t2a/r@1" = 0.5',
        lambda f, t: ["verify", str(f)],
    )  # fmt: skip


def _probe_published(folder: Path) -> tuple[str, str, str, Callable[[Path, Path], list[str]]]:
    study, _ = _probe_study_with_saved(folder)
    text = (
        'schema = "audiorepro.probe-published/1"\n[[run]]\nrun = "r"\ntolerance = 5e-5\n'
        'values = { "test/frame_f1" = 0.5 }\n'
    )
    return (
        text,
        "tolerance = 5e-5",
        '"test/frame_f1" = 0.5',
        (lambda f, t: ["verify", str(study), "--golden", str(f)]),
    )


def _zeroshot(folder: Path) -> tuple[str, str, str, Callable[[Path, Path], list[str]]]:
    from tests.test_esc50 import esc50_csv, esc50_rows

    (folder / "esc50.csv").write_text(esc50_csv(esc50_rows()), encoding="utf-8")
    text = _zeroshot_study(folder).read_text(encoding="utf-8")
    text += (
        '[[published]]\ncell = "m"\ntolerance = 1e-3\nprovenance = "p"\n'
        'values = { "accuracy" = 0.5 }\n'
    )
    return text, "tolerance = 1e-3", '"accuracy" = 0.5', lambda f, t: ["verify", str(f)]


FORMATS = {
    "published": _published,
    "probe-published": _probe_published,
    "study": _study,
    "zeroshot-study": _zeroshot,
}
#: name -> (the tolerance written, the value written (None: as is), what stderr names).
CLASSES: dict[str, tuple[str, str | None, str]] = {
    "tolerance-1e308": ("tolerance = 1e308", None, "tolerance"),
    "tolerance-the-range-width": ("tolerance = 1.0", None, "tolerance"),
    "tolerance-negative": ("tolerance = -1e-3", None, "tolerance"),
    "value-outside-the-range": ("tolerance = 0.0", "123456.0", "123456"),
}
CASES = [(fmt, case) for fmt in sorted(FORMATS) for case in sorted(CLASSES)]


@pytest.mark.parametrize(("fmt", "case"), CASES)
def test_a_tolerance_that_passes_anything_is_refused_at_load(
    tmp_path: Path, fmt: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _fresh(tmp_path / "in")
    text, tolerance, value, argv = FORMATS[fmt](folder)
    new_tolerance, new_value, names = CLASSES[case]
    assert tolerance in text and value in text
    text = text.replace(tolerance, new_tolerance)
    if new_value is not None:
        text = text.replace(value, value.rsplit("=", 1)[0] + "= " + new_value)
    path = folder / "bad.toml"
    path.write_text(text, encoding="utf-8")
    code, err = _run(argv(path, tmp_path), capsys)
    assert code == 2, err
    _one_line(err, "bad.toml", names)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_meaningful_tolerance_loads(fmt: str, tmp_path: Path) -> None:
    """The base of the classes: the format with its ordinary tolerance loads (the command may
    then pass, fail or not verify; it does not refuse the file)."""
    from audiorepro.cli import main

    folder = _fresh(tmp_path / "in")
    text, _, _, argv = FORMATS[fmt](folder)
    path = folder / "ok.toml"
    path.write_text(text, encoding="utf-8")
    assert main(argv(path, tmp_path)) in (0, 1)


def test_the_ranges_of_the_metric_names() -> None:
    """Every metric name a format declares has a range the rule can use."""
    from audiorepro.metrics.retrieval import DIRECTIONS, METRICS
    from audiorepro.metrics.zeroshot import METRICS as ZEROSHOT
    from audiorepro.specs.published import metric_range, profile_metrics

    names = [f"{d}/{m}" for d in DIRECTIONS for m in METRICS]
    names += [n for v in profile_metrics().values() for n in v] + list(ZEROSHOT)
    for name in names:
        lo, hi = metric_range(name)
        assert lo is not None, name
        assert (lo, hi) == (
            (1.0, None) if name.endswith(("mean_rank", "median_rank")) else (0.0, 1.0)
        ), name

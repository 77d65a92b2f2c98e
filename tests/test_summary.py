"""The closing results table: the bundle's own numbers, by study kind."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.render.summary import results_table
from tests.test_outputs_folder import _study


def test_the_table_prints_the_bundles_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study(tmp_path)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    lines = results_table(bundle)
    assert lines[0].split()[0] == "cell" and len(lines) == 1 + len(bundle["cells"])
    for cell, line in zip(bundle["cells"], lines[1:], strict=True):
        fields = line.split()
        assert fields[0] == cell["id"]
        assert fields[1] == f"{cell['metrics']['t2a']['r@1']:.4f}"
        assert fields[6] == f"{cell['metrics']['a2t']['map@10']:.4f}"


def test_zeroshot_probe_and_failed_cells() -> None:
    zs = {
        "schema": "audiorepro.zeroshot-bundle/1",
        "study": {"tie_policy": "optimistic"},
        "cells": [{"id": "m/esc", "metrics": {"canonical": {
            "optimistic": {"accuracy": 0.5, "top5_accuracy": 1.0, "balanced_accuracy": 0.25},
            "pessimistic": {"accuracy": 0.0, "top5_accuracy": 0.0, "balanced_accuracy": 0.0},
        }}}],
    }  # fmt: skip
    assert results_table(zs)[1].split() == ["m/esc", "0.5000", "1.0000", "0.2500"]
    probe = {"kind": "probe", "leaders": [
        {"task": "Valence", "metric": "MAE", "ranking": [{"model": "a", "value": 0.125}]},
        {"task": "Empty", "metric": "MAE", "ranking": []},
    ]}  # fmt: skip
    lines = results_table(probe)
    assert lines[1].split() == ["Valence", "MAE", "a", "0.1250"]
    assert lines[2].split() == ["Empty", "MAE", "-", "-"]
    failed = {"schema": "audiorepro.bundle/1", "cells": [{"id": "x", "error": "dump missing"}]}
    assert results_table(failed)[1].split() == ["x", *["-"] * 6]

"""``audiorepro explain``: every difference from the canonical value is named with its cause."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from audiorepro.checks.explain import explain
from audiorepro.cli import main
from audiorepro.formats.dump import load_dump, make_dump
from tests.conftest import DUMPS, FIXTURES


@pytest.mark.parametrize("path", DUMPS, ids=[p.stem for p in DUMPS])
def test_every_difference_is_explained(path: Path) -> None:
    report = explain(load_dump(path))
    for direction, block in report["directions"].items():
        for row in block["rows"]:
            for profile, cell in row["profiles"].items():
                differs = abs(cell["value"] - row["canonical"]) > 1e-12
                named = [
                    d
                    for d in block["differences"]
                    if d["profile"] == profile and d["concept"] == row["concept"]
                ]
                assert differs == bool(named), (direction, row["concept"], profile)
        for d in block["differences"]:
            assert " because " in d["text"] and d["text"].endswith(".")


def test_tie_differences_lie_within_the_canonical_bounds() -> None:
    report = explain(load_dump(FIXTURES / "dumps" / "synthetic_ties.npz"))
    for block in report["directions"].values():
        for d in block["differences"]:
            if d["text"].count("ties:"):
                row = next(r for r in block["rows"] if r["concept"] == d["concept"])
                lo, hi = sorted(row["tie_bounds"])
                value = row["profiles"][d["profile"]]["value"]
                assert lo - 1e-12 <= value <= hi + 1e-12


def test_dcase_is_text_to_audio_only_and_laion_clap_skips_three_captions() -> None:
    report = explain(load_dump(FIXTURES / "dumps" / "synthetic_ties.npz"))
    a2t = report["directions"]["a2t"]["rows"]
    assert all("dcase" not in r["profiles"] for r in a2t)
    assert "laion-clap" in report["skipped"]


def test_laion_clap_unsorted_map_is_named() -> None:
    pytest.importorskip("torch")
    # Clip 0's captions, in caption order, rank 2, 1, 3, 4, 5 (as directions, since laion-clap
    # normalizes): caption order differs from rank order.
    audio = np.eye(3, dtype=np.float32)
    own = [[1, 0.2, 0], [1, 0, 0], [1, 0.3, 0], [1, 0.4, 0], [1, 0.5, 0]]
    text = np.array(own + [[0, 1, 0]] * 5 + [[0, 0, 1]] * 5, np.float32)
    dump = make_dump(audio, text, np.repeat(np.arange(3), 5))
    diffs = explain(dump)["directions"]["a2t"]["differences"]
    (d,) = [d for d in diffs if d["profile"] == "laion-clap" and d["concept"] == "mAP@10"]
    assert "caption order instead of rank order" in d["text"] and d["delta"] > 0


def test_explain_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "e.json"
    assert (
        main(["explain", str(FIXTURES / "dumps" / "synthetic_5cap.npz"), "--json", str(out)]) == 0
    )
    text = capsys.readouterr().out
    assert "t2a:" in text and "a2t:" in text
    doc = json.loads(out.read_text())
    assert set(doc["directions"]) == {"t2a", "a2t"}


def test_dcase_value_interval_and_canonical_side_by_side(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dump = FIXTURES / "dumps" / "synthetic_ties.npz"
    report = explain(load_dump(dump))
    assert "can move between machines" in report["dcase"]["machine_dependence"]
    assert report["dcase"]["queries_affected"] > 0
    cells = [r for r in report["directions"]["t2a"]["rows"] if "dcase" in r["profiles"]]
    assert {r["concept"] for r in cells} == {"R@1", "R@5", "R@10", "mAP@10"}
    for r in cells:
        optimistic, pessimistic = r["profiles"]["dcase"]["interval"]
        assert pessimistic <= r["profiles"]["dcase"]["value"] <= optimistic
    named = [d for d in report["directions"]["t2a"]["differences"] if d["profile"] == "dcase"]
    assert named and all("float32" in d["text"] for d in named)
    assert main(["explain", str(dump)]) == 0
    text = capsys.readouterr().out
    assert "dcase over every tie order" in text
    assert "why a DCASE number can move between machines" in text


def test_dcase_cause_names_ties_or_rounding() -> None:
    from audiorepro.checks.explain import _cause

    tied = _cause("dcase", "R@1", "t2a", 0.5, 0.4, (0.6, 0.4), [0.6, 0.4])
    assert "numpy.argsort" in tied and "[0.4, 0.6]" in tied
    rounded = _cause("dcase", "R@1", "t2a", 0.5, 0.4, (0.4, 0.4), [0.5, 0.5])
    assert "round near-equal exact scores" in rounded and "[0.5, 0.5]" in rounded

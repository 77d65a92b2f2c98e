"""The command line as users and scripts see it: outputs, structure, exit codes, determinism."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from tests.conftest import DUMPS, FIXTURES

METRIC_KEYS = {
    "r@1",
    "r@5",
    "r@10",
    "recall@1",
    "recall@5",
    "recall@10",
    "map",
    "map@10",
    "mrr",
    "mean_rank",
    "median_rank",
}


def _structure(obj: Any) -> Any:
    """Keys and value kinds, recursively; lists reduced to the structure of their first item."""
    if isinstance(obj, dict):
        return {k: _structure(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_structure(obj[0])] if obj else []
    if isinstance(obj, bool) or obj is None:
        return type(obj).__name__
    if isinstance(obj, (int, float)):
        return "number"
    return type(obj).__name__


def test_metrics_json_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    dump = FIXTURES / "dumps" / "synthetic_5cap.npz"
    assert main(["metrics", str(dump), "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "synthetic_5cap.npz: 40 clips, 200 captions (5 per clip)" in table
    doc = json.loads(out.read_text())
    assert doc["schema"] == "audiorepro.metrics/1"
    assert doc["source"] == "synthetic_5cap.npz" and len(doc["sha256"]) == 64
    assert (doc["n_clips"], doc["n_captions"], doc["captions_per_clip"]) == (40, 200, 5)
    assert doc["multi_positive"] is True and doc["tie_policy"] == "pessimistic"
    for direction in ("t2a", "a2t"):
        assert set(doc["metrics"][direction]) == METRIC_KEYS
        ties = doc["ties"][direction]
        assert isinstance(ties["queries_affected"], int)
        for name, (lo, hi) in ties["bounds"].items():
            assert name in METRIC_KEYS and lo != hi
    # Bounds agree with a run under the other policy.
    out2 = tmp_path / "o.json"
    assert main(["metrics", str(dump), "--tie-policy", "optimistic", "--json", str(out2)]) == 0
    opt = json.loads(out2.read_text())
    for name, (lo, hi) in doc["ties"]["t2a"]["bounds"].items():
        assert opt["metrics"]["t2a"][name] == lo and doc["metrics"]["t2a"][name] == hi
    assert out.read_text().endswith("\n") and list(doc) == sorted(doc)


def test_parity_keeps_published_structure(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    assert main(["parity", *map(str, DUMPS), "--json", str(out)]) == 0
    ours = json.loads(out.read_text())
    published = json.loads(
        (FIXTURES / "reference" / "published-verification-output.json").read_text()
    )
    assert _structure(ours) == _structure({"metric_parity": published["metric_parity"]})
    block = ours["metric_parity"]
    assert block["n_cells"] == len(DUMPS) and block["passed"] is True
    assert block["cells_with_multi_positive_ap"] == sum(c["multi_positive"] for c in block["cells"])
    for cell in block["cells"]:
        metrics = {(r["direction"], r["metric"]) for r in cell["rows"]}
        for d in ("t2a", "a2t"):
            assert {(d, m) for m in ("r@1", "r@5", "r@10", "map")} <= metrics
        assert cell["worst_abs_delta"] == 0.0


def test_parity_failure_exits_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import audiorepro.checks.parity as parity

    real = parity.reference_retrieval_metrics

    def off_by_a_little(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        out["a2t"]["map"] += 1e-6
        return out

    monkeypatch.setattr(parity, "reference_retrieval_metrics", off_by_a_little)
    out = tmp_path / "p.json"
    assert main(["parity", str(DUMPS[0]), "--json", str(out)]) == 1
    assert "FAIL" in capsys.readouterr().out
    doc = json.loads(out.read_text())["metric_parity"]
    assert doc["passed"] is False and doc["worst_abs_delta"] == pytest.approx(1e-6, rel=1e-3)
    # A looser tolerance passes.
    assert main(["parity", str(DUMPS[0]), "--tolerance", "1e-5"]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["metrics"],
        ["metrics", "x.npz", "--tie-policy", "random"],
        ["parity"],
        ["parity", "x.npz", "--tolerance", "-1"],
        ["metrics", "x.npz", "--profile", "nope"],
        ["verify"],
        ["verify", "--golden", "x.toml", "--dumps", "/no/such/folder"],
        ["nosuchcommand"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith("audiorepro: error: ") and "--help" in err


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "audiorepro", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_json_bytes_identical_across_runs_and_threads(tmp_path: Path) -> None:
    dump = str(FIXTURES / "dumps" / "synthetic_ties.npz")
    outs = []
    for i, threads in enumerate(["1", "2", "2"]):
        out = tmp_path / f"{i}.json"
        proc = _cli(
            "metrics",
            dump,
            "--json",
            str(out),
            "--chunk-rows",
            str(7 + 30 * i),
            env={
                "NUMBA_NUM_THREADS": threads,
                "OMP_NUM_THREADS": threads,
                "OPENBLAS_NUM_THREADS": threads,
            },
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]


def test_console_errors_have_no_traceback(tmp_path: Path) -> None:
    proc = _cli("metrics", str(tmp_path / "missing.npz"))
    assert proc.returncode == 2 and proc.stderr.startswith("audiorepro: error: ")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_help_and_version() -> None:
    assert _cli("--help").returncode == 0
    proc = _cli("--version")
    assert proc.returncode == 0 and "0.1.0" in proc.stdout


def test_tie_intervals_print_low_then_high(capsys: pytest.CaptureFixture[str]) -> None:
    """The report keeps [optimistic, pessimistic] (mean rank: low then high, r@k: high then
    low); printed, every interval reads [low, high] and says so."""
    assert main(["metrics", str(FIXTURES / "dumps" / "synthetic_ties.npz")]) == 0
    ties = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ties ")]
    assert ties and all("[low, high]" in line for line in ties)
    for line in ties:
        intervals = re.findall(r"(\S+) in \[([-0-9.e]+), ([-0-9.e]+)\]", line)
        assert intervals, line
        assert all(float(lo) <= float(hi) for _, lo, hi in intervals), line
        assert any(float(lo) < float(hi) for _, lo, hi in intervals), line

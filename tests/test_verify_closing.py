"""``verify OUT`` shows the headline numbers of each study of the folder, as ``reproduce``
does (:func:`audiorepro.cli.closing.say_folder_results`), above its verdict: the last line is
the verdict (``| tail -1``), as docs/studies.md says."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from audiorepro.cli import main
from tests.test_core_install import _dump_study


def _verify(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(["verify", str(out)])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_verify_ends_with_its_verdict_after_the_results_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", str(_dump_study(tmp_path)), "--out", str(out)]) == 0
    code, lines, _ = _verify(out, capsys)
    assert code == 0
    assert lines[-1].startswith("PASS  ")
    table = lines.index("core: results (bundle.json.gz)")
    assert (
        lines[table + 1].split()
        == "cell t2a R@1 t2a R@10 t2a mAP@10 a2t R@1 a2t R@10 a2t mAP@10".split()
    )
    metrics = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))["cells"][0][
        "metrics"
    ]
    expected = [f"{metrics[d][m]:.4f}" for d in ("t2a", "a2t") for m in ("r@1", "r@10", "map@10")]
    assert lines[table + 2].split() == ["s/1cap", *expected]
    assert table + 3 <= len(lines) - 1


def test_a_damaged_bundle_fails_verify_without_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", str(_dump_study(tmp_path)), "--out", str(out)]) == 0
    (out / "bundle.json.gz").write_bytes(b"\x1f\x8b not a gzip stream")
    code, lines, err = _verify(out, capsys)
    assert code == 1 and "Traceback" not in err
    assert any(line.startswith("FAIL") and "bundle.json.gz" in line for line in lines)
    assert not any(": results (" in line for line in lines)

"""``audiorepro verify``: PASS / FAIL / NOT VERIFIED per published value, and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.formats.dump import load_dump
from audiorepro.metrics.retrieval import compute_retrieval
from audiorepro.specs.published import load_published
from tests.conftest import FIXTURES, GOLDEN

DUMP = FIXTURES / "dumps" / "synthetic_5cap.npz"


def test_published_file_holds_the_seed_kit_values() -> None:
    cells = load_published(GOLDEN / "published" / "clap_retrieval.toml")
    ref = json.loads((FIXTURES / "reference" / "published-verification-output.json").read_text())
    assert [c.dump for c in cells] == [c["source"] for c in ref["metric_parity"]["cells"]]
    for cell, src in zip(cells, ref["metric_parity"]["cells"], strict=True):
        assert (cell.n_clips, cell.n_captions) == (src["n_clips"], src["n_captions"])
        assert cell.values == {f"{r['direction']}/{r['metric']}": r["harness"] for r in src["rows"]}
        assert cell.sha256 is None  # to be filled on first verified download, never invented


def test_missing_dumps_are_not_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "verify",
            "--golden",
            str(GOLDEN / "published" / "clap_retrieval.toml"),
            "--dumps",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    # One line per cell (8 values each, one reason) and the verdict: never FAIL, never PASS.
    assert out.count("NOT VERIFIED") == 5 and out.count(" 8 values (") == 4
    assert out.splitlines()[-1] == "NOT VERIFIED  0 passed, 0 failed, 32 not verified"
    assert " PASS " not in out and "FAIL" not in out


def _golden(tmp_path: Path, values: dict[str, float], **extra: str) -> Path:
    lines = [
        'schema = "audiorepro.published/1"',
        "[[cell]]",
        f'dump = "{DUMP.name}"',
        'profile = "canonical"',
        "tolerance = 1e-12",
    ]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    lines.append("[cell.values]")
    lines += [f'"{k}" = {v!r}' for k, v in values.items()]
    path = tmp_path / "golden.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _reproduced() -> dict[str, float]:
    m = compute_retrieval(load_dump(DUMP)).metrics()
    return {f"{d}/{k}": m[d][k] for d in m for k in ("r@1", "r@5", "map", "median_rank")}


def test_reproduced_values_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = _golden(tmp_path, _reproduced(), n_clips="40", n_captions="200")
    out_json = tmp_path / "v.json"
    assert (
        main(
            [
                "verify",
                "--golden",
                str(golden),
                "--dumps",
                str(DUMP.parent),
                "--json",
                str(out_json),
            ]
        )
        == 0
    )
    assert "8 passed, 0 failed, 0 not verified" in capsys.readouterr().out
    assert json.loads(out_json.read_text())["passed"] is True


def test_tampered_value_fails_naming_the_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = _reproduced()
    values["a2t/map"] += 1e-6
    golden = _golden(tmp_path, values)
    assert main(["verify", "--golden", str(golden), "--dumps", str(DUMP.parent)]) == 1
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("FAIL ") and "a2t/map" in x]
    assert DUMP.name in line and "delta -1e-06" in line


def test_other_dump_is_not_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = _golden(tmp_path, _reproduced(), sha256=f'"{"0" * 64}"')
    assert main(["verify", "--golden", str(golden), "--dumps", str(DUMP.parent)]) == 1
    assert "differs from the recorded" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text,key",
    [
        (
            'schema = "audiorepro.published/1"\n[[cell]]\ndump = "x.npz"\nprofile = "canonical"\n'
            'tolerance = 0.1\nmodle = "typo"\n[cell.values]\n"t2a/r@1" = 0.5\n',
            "cell[0].modle",
        ),
        (
            'schema = "audiorepro.published/1"\n[[cell]]\ndump = "x.npz"\nprofile = "canonical"\n'
            'tolerance = 0.1\n[cell.values]\n"t2a/R@1" = 0.5\n',
            "cell[0].values.t2a/R@1",
        ),
        (
            'schema = "audiorepro.published/1"\n[[cell]]\ndump = "x.npz"\nprofile = "nope"\n'
            'tolerance = 0.1\n[cell.values]\n"t2a/r@1" = 0.5\n',
            "cell[0].profile",
        ),
        (
            'schema = "audiorepro.published/1"\n[[cell]]\nprofile = "canonical"\n'
            'tolerance = 0.1\n[cell.values]\n"t2a/r@1" = 0.5\n',
            "cell[0].dump",
        ),
        ('schema = "other/1"\n', "schema"),
    ],
)
def test_broken_published_file_exits_2(
    text: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["verify", "--golden", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"key '{key}'" in err and "Traceback" not in err


def test_not_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("this is [not toml")
    assert main(["verify", "--golden", str(path)]) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_golden_file_checks_a_zeroshot_dump_under_laion_clap_zeroshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A class-relevance dump (version 2) whose every clip embeds exactly as its class prompt:
    by definition each clip's class ranks first, so R@1 = 1 and mean_rank = 1; a published
    value of 0.5 fails. The profile that `metrics --profile` accepts was refused as unknown in
    a published-values file."""
    import numpy as np

    prompts = np.eye(3, 4, dtype=np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2])
    np.savez(
        tmp_path / "zs.npz",
        audio_embeds=prompts[labels],
        text_embeds=prompts,
        relevance_indptr=np.arange(7),
        relevance_indices=labels,
        format_version=np.int64(2),
    )
    golden = tmp_path / "g.toml"
    golden.write_text(
        'schema = "audiorepro.published/1"\n[[cell]]\ndump = "zs.npz"\n'
        'profile = "laion-clap-zeroshot"\ntolerance = 0.0\n'
        'values = { "R@1" = 1.0, mean_rank = 1.0 }\n'
    )
    assert main(["verify", "--golden", str(golden), "--dumps", str(tmp_path)]) == 0
    golden.write_text(golden.read_text().replace('"R@1" = 1.0', '"R@1" = 0.5'))
    assert main(["verify", "--golden", str(golden), "--dumps", str(tmp_path)]) == 1
    golden.write_text(golden.read_text().replace('"R@1" = 0.5', '"R@50" = 1.0'))
    capsys.readouterr()
    assert main(["verify", "--golden", str(golden), "--dumps", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "g.toml" in err and "R@50" in err and err.count("\n") == 1

"""`audiorepro list`: registered checkpoints, datasets, profiles and studies, with their state."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from audiorepro.checks.catalog import catalog
from audiorepro.cli import main
from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.fetch.datasets import bundled_datasets, read_datasets
from audiorepro.metrics.profiles import PROFILES, ZEROSHOT_PROFILES
from audiorepro.models.registry import load_registry
from tests.conftest import ROOT


def _by_name(rows: list) -> dict:
    return {r.name: r for r in rows}


def test_datasets_list_every_registered_dataset_with_its_fetch_command(tmp_path: Path) -> None:
    rows = _by_name(catalog("datasets", data=tmp_path))
    assert {"clotho-eval", "audiocaps-test", "esc50"} <= set(rows)
    assert set(rows) == set(read_datasets(bundled_datasets()))
    expected = f"not fetched: audiorepro fetch clotho-eval --data {tmp_path}"
    assert rows["clotho-eval"].state == expected
    assert rows["audiocaps-test"].state.endswith("--audio YOUR_CLIPS")
    # The pins count the files with a published hash: esc50's archive has none.
    assert "files hashed 3/3" in rows["clotho-eval"].pins
    assert "files hashed 0/1" in rows["esc50"].pins


def test_a_prepared_dataset_is_listed_as_prepared(tmp_path: Path) -> None:
    (tmp_path / "clotho-eval").mkdir()
    (tmp_path / "clotho-eval" / "dataset.json").write_text("{}")
    rows = _by_name(catalog("datasets", data=tmp_path))
    assert rows["clotho-eval"].state == f"prepared in {tmp_path / 'clotho-eval'}"
    assert rows["esc50"].state.startswith("not fetched")


def test_checkpoints_fetched_only_when_the_pinned_revision_has_every_weight(
    tmp_path: Path,
) -> None:
    specs = load_registry([])
    rows = _by_name(catalog("checkpoints", cache=tmp_path))
    assert set(rows) == set(specs)
    clap = {n: r for n, r in rows.items() if specs[n].user is None}
    assert all(r.state == f"not fetched: audiorepro fetch {n}" for n, r in clap.items())
    # The bundled resemblyzer entry is an encoder inside this package: nothing to fetch.
    assert rows["resemblyzer"].description == "py encoder"
    spec = specs["laion/clap-htsat-fused"]
    snap = tmp_path / "models--laion--clap-htsat-fused" / "snapshots"
    # Another revision's snapshot does not count.
    (snap / ("0" * 40)).mkdir(parents=True)
    for name in spec.weights:
        (snap / ("0" * 40) / name).write_bytes(b"x")
    assert _by_name(catalog("checkpoints", cache=tmp_path))[spec.name].state.startswith("not")
    (snap / str(spec.revision)).mkdir()
    for name in spec.weights:
        (snap / str(spec.revision) / name).write_bytes(b"x")
    rows = _by_name(catalog("checkpoints", cache=tmp_path))
    assert rows[spec.name].state == "fetched"
    assert rows["laion/clap-htsat-unfused"].state.startswith("not fetched")
    known = sum(1 for h in spec.weights.values() if h != PLACEHOLDER)
    assert f"weights hashed {known}/{len(spec.weights)}" in rows[spec.name].pins
    assert str(spec.revision)[:12] in rows[spec.name].pins


def test_profiles_are_the_package_profiles() -> None:
    rows = catalog("profiles")
    assert [r.name for r in rows] == [*PROFILES, *ZEROSHOT_PROFILES]


def test_studies_lists_the_demo_the_shipped_studies_and_says_why_one_is_broken(
    tmp_path: Path,
) -> None:
    rows = catalog("studies", studies=ROOT / "studies")
    assert rows[0].name == "demo"
    assert len(rows) == 1 + len(list((ROOT / "studies").glob("*.toml")))
    (tmp_path / "broken.toml").write_text("schema = 'audiorepro.study/1'\nname = [\n")
    rows = _by_name(catalog("studies", studies=tmp_path))
    assert rows["broken"].state.startswith("cannot be read: ")


def test_list_json_and_bad_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "list.json"
    assert main(["list", "profiles", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "audiorepro.list/1" and doc["what"] == "profiles"
    assert [e["name"] for e in doc["entries"]] == [*PROFILES, *ZEROSHOT_PROFILES]
    capsys.readouterr()
    assert main(["list", "nothing"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nothing" in err[0]


def test_list_without_what_lists_all_four(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "all.json"
    assert main(["list", "--data", str(tmp_path), "--json", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line.endswith(":")] == [
        "checkpoints:", "datasets:", "profiles:", "studies:",
    ]  # fmt: skip
    doc = json.loads(out.read_text())
    assert sorted(doc["entries"]) == ["checkpoints", "datasets", "profiles", "studies"]
    assert [e["name"] for e in doc["entries"]["profiles"]] == [*PROFILES, *ZEROSHOT_PROFILES]


def _readme_list_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^audiorepro list [^\n]*$", text, re.M)


@pytest.mark.parametrize("line", _readme_list_lines())
def test_readme_list_commands_as_written(line: str, tmp_path: Path) -> None:
    argv = shlex.split(line)
    assert argv[0] == "audiorepro"
    result = subprocess.run(
        [sys.executable, "-m", "audiorepro", *argv[1:]],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_CACHE": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() and not result.stderr.strip()


def test_readme_lists_every_kind() -> None:
    assert {line.split()[2] for line in _readme_list_lines()} == {
        "checkpoints", "datasets", "profiles", "studies",
    }  # fmt: skip

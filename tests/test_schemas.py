"""The JSON Schemas in docs/schemas/ are current, and say what the validators accept."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from audiorepro.core.errors import UserError
from audiorepro.runner.kinds.hear import HEAR_BUNDLE
from audiorepro.runner.kinds.linear_probe import LINEAR_PROBE_BUNDLE
from audiorepro.runner.kinds.speaker_verification import SPEAKER_BUNDLE
from audiorepro.runner.kinds.zeroshot import ZEROSHOT_BUNDLE
from audiorepro.runner.output.outputs import PROBE_BUNDLE, RETRIEVAL_BUNDLE
from audiorepro.specs.published import PublishedFile
from audiorepro.specs.registry import RegistryFile
from audiorepro.specs.schema import validate
from tests.conftest import GOLDEN, ROOT

TOOL = ROOT / "tools" / "schemas.py"


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("schemas_tool", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_schemas_are_current() -> None:
    """Regenerate with `python tools/schemas.py` after changing a format."""
    built = _tool().build()
    assert sorted(built) == sorted(p.name for p in (ROOT / "docs" / "schemas").glob("*.json"))
    for name, text in built.items():
        assert (ROOT / "docs" / "schemas" / name).read_text() == text, name


def test_check_mode_fails_on_a_stale_schema(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    tool = _tool()
    tool.OUT = tmp_path  # an empty folder: every schema is missing
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0 and tool.main(["--check"]) == 0


def test_every_format_has_a_schema_with_its_id() -> None:
    stems = {p.name.removesuffix(".schema.json") for p in (ROOT / "docs/schemas").glob("*")}
    assert stems == {
        "study",
        "published",
        "probe-published",
        "registry",
        "metrics",
        "measurements",
        "verification",
        "bundle",
        "diff",
    }
    for stem in stems:
        doc = json.loads((ROOT / "docs" / "schemas" / f"{stem}.schema.json").read_text())
        assert doc["$schema"].endswith("2020-12/schema") and doc["$id"].endswith(
            stem + ".schema.json"
        )


def test_each_bundle_shape_has_its_own_schema_id() -> None:
    """Two shapes under one id (the probe bundle once said audiorepro.bundle/1) cannot be
    told apart by a reader; the schema pins each id to its shape."""
    assert RETRIEVAL_BUNDLE != PROBE_BUNDLE
    doc = json.loads((ROOT / "docs" / "schemas" / "bundle.schema.json").read_text())
    consts = {
        doc["$defs"][ref["$ref"].rpartition("/")[2]]["properties"]["schema"]["const"]
        for ref in doc["anyOf"]
    }
    bundles = {
        RETRIEVAL_BUNDLE,
        PROBE_BUNDLE,
        ZEROSHOT_BUNDLE,
        LINEAR_PROBE_BUNDLE,
        SPEAKER_BUNDLE,
        HEAR_BUNDLE,
    }
    assert consts == bundles
    assert len(bundles) == 6


def test_the_bundled_files_validate() -> None:
    from audiorepro.models.registry import bundled_registry
    from audiorepro.runner.kinds.probe.published import load_probe_published
    from audiorepro.specs.published import load_published
    from audiorepro.specs.study import load_study

    validate(RegistryFile, tomllib.loads(bundled_registry().read_text()), source="bundled")
    assert load_published(GOLDEN / "published" / "clap_retrieval.toml")
    assert load_probe_published(GOLDEN / "published" / "probe_demo.toml")
    assert load_study(ROOT / "studies" / "clap_retrieval.toml", strict=False).name
    assert load_study(ROOT / "studies" / "speaker_verification.toml").kind == "speaker-verification"


def _registry(entry: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "audiorepro.checkpoints/1", "checkpoints": {"m": entry}}


HASH = {"a": "0" * 64}


@pytest.mark.parametrize(
    ("doc", "key", "message"),
    [
        ({"schema": "audiorepro.checkpoints/1", "checkpoints": {}}, "checkpoints", "is empty"),
        (
            _registry({"format": "hf", "repo": 5, "weights": HASH}),
            "checkpoints.m.repo",
            "is 5; expected a hub repository",
        ),
        (
            _registry({"format": "hf", "wieghts": {}}),
            "checkpoints.m.wieghts",
            "unknown key; expected some of architecture, description, factory, file, files, format",
        ),
    ],
)
def test_one_error_style(doc: dict[str, Any], key: str, message: str) -> None:
    """File, key path, what was expected: one line, whatever the format."""
    with pytest.raises(UserError) as info:
        validate(RegistryFile, doc, source="r.toml")
    assert info.value.key == key and message in str(info.value)
    assert str(info.value).startswith(f"r.toml: key '{key}': ") and "\n" not in str(info.value)


def test_a_union_key_is_named_as_written() -> None:
    """pydantic names a union's member (``provenance.str``); the user wrote ``provenance``."""
    doc = {"schema": "audiorepro.published/1", "provenance": 5, "cell": []}
    with pytest.raises(UserError) as info:
        validate(PublishedFile, doc, source="p.toml")
    assert info.value.key == "provenance"
    assert "is 5; expected where the values were published" in str(info.value)

"""The checkpoint registry: parsing, specs, hash verification before any loading."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.models.registry import (
    bundled_registry,
    load_registry,
    read_registry,
    resolve_spec,
    verify_weights,
)
from audiorepro.specs.settings import Preprocessing, parse_overrides

PUBLIC = {
    "laion/clap-htsat-fused": ("hf", True),
    "laion/clap-htsat-unfused": ("hf", False),
    "630k-best": ("laion", False),
    "630k-audioset-best": ("laion", False),
    "630k-fusion-best": ("laion", True),
    "630k-audioset-fusion-best": ("laion", True),
}


def test_bundled_registry_names_the_public_checkpoints_without_invented_hashes() -> None:
    registry = read_registry(bundled_registry())
    assert set(PUBLIC) <= set(registry)
    for name, (fmt, fusion) in PUBLIC.items():
        spec = registry[name]
        assert spec.format == fmt
        assert spec.architecture.enable_fusion is fusion
        assert spec.architecture.amodel == "HTSAT-tiny" and spec.architecture.tmodel == "roberta"
        # Nothing here could be computed from a verified download: every value says so.
        assert set(spec.weights.values()) == {PLACEHOLDER}
        if fmt == "hf":
            assert spec.revision == PLACEHOLDER


def test_unverified_public_entry_refuses_to_load() -> None:
    spec = load_registry()["laion/clap-htsat-fused"]
    with pytest.raises(UserError, match="no verified revision"):
        verify_weights(spec)


def _write(tmp_path: Path, body: str, weights: bytes = b"weights") -> Path:
    (tmp_path / "ckpt.pt").write_bytes(weights)
    path = tmp_path / "registry.toml"
    path.write_text('schema = "audiorepro.checkpoints/1"\n' + body)
    return path


def _laion_entry(digest: str, extra: str = "") -> str:
    return (
        '[checkpoints.mine]\nformat = "laion"\nfile = "ckpt.pt"\n' + extra + "\n"
        f'[checkpoints.mine.weights]\n"ckpt.pt" = "{digest}"\n'
    )


def test_matching_hash_verifies(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"weights").hexdigest()
    spec = read_registry(_write(tmp_path, _laion_entry(digest)))["mine"]
    assert verify_weights(spec) == {"ckpt.pt": digest}


def test_wrong_hash_is_refused_before_loading(tmp_path: Path) -> None:
    spec = read_registry(_write(tmp_path, _laion_entry("0" * 64)))["mine"]
    with pytest.raises(UserError, match="refusing to load") as info:
        verify_weights(spec)
    assert hashlib.sha256(b"weights").hexdigest() in str(info.value)
    assert info.value.key == "checkpoints.mine.weights.ckpt.pt"


def test_placeholder_hash_prints_the_hash_found(tmp_path: Path) -> None:
    spec = read_registry(_write(tmp_path, _laion_entry(PLACEHOLDER)))["mine"]
    with pytest.raises(UserError, match=hashlib.sha256(b"weights").hexdigest()):
        verify_weights(spec)


def test_missing_checkpoint_file(tmp_path: Path) -> None:
    spec = read_registry(_write(tmp_path, _laion_entry("0" * 64)))["mine"]
    (tmp_path / "ckpt.pt").unlink()
    with pytest.raises(UserError, match="checkpoint file not found"):
        verify_weights(spec)


@pytest.mark.parametrize(
    "body, key, message",
    [
        ('[checkpoints.m]\nformat = "onnx"\n', "checkpoints.m.format", "expected 'hf' or 'laion'"),
        ('[checkpoints.m]\nformat = "laion"\nfiles = "x"\n', "checkpoints.m.files", "unknown key"),
        (
            '[checkpoints.m]\nformat = "laion"\n[checkpoints.m.weights]\n"c.pt" = "'
            + "0" * 64
            + '"\n',
            "checkpoints.m.file",
            "needs 'file'",
        ),
        (
            '[checkpoints.m]\nformat = "hf"\nrepo = "a/b"\n[checkpoints.m.weights]\n"x" = "'
            + "0" * 64
            + '"\n',
            "checkpoints.m.revision",
            "full commit revision",
        ),
        (
            '[checkpoints.m]\nformat = "laion"\nfile = "c.pt"\n'
            '[checkpoints.m.weights]\n"c.pt" = "abc"\n',
            "checkpoints.m.weights.c.pt",
            "64 hex digits",
        ),
        (
            '[checkpoints.m]\nformat = "laion"\nfile = "c.pt"\n[checkpoints.m.weights]\n"c.pt" = "'
            + "0" * 64
            + '"\n[checkpoints.m.preprocessing]\nfrequency_mn = 1\n',
            "frequency_mn",
            "unknown preprocessing setting",
        ),
        (
            '[checkpoints.m]\nformat = "laion"\nfile = "c.pt"\n[checkpoints.m.weights]\n"c.pt" = "'
            + "0" * 64
            + '"\n[checkpoints.m.architecture]\nenable_fusion = "yes"\n',
            "checkpoints.m.architecture.enable_fusion",
            "expected a bool",
        ),
    ],
)
def test_bad_registry_entries(tmp_path: Path, body: str, key: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        read_registry(_write(tmp_path, body))
    assert info.value.key == key
    assert str(tmp_path / "registry.toml") in str(info.value)


def test_registry_schema_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('schema = "other/1"\n')
    with pytest.raises(UserError, match=re.escape("expected 'audiorepro.checkpoints/1'")):
        read_registry(path)


def test_spec_forms(tmp_path: Path) -> None:
    registry = load_registry()
    assert resolve_spec("630k-best", registry).name == "630k-best"
    folder = tmp_path / "model"
    folder.mkdir()
    spec = resolve_spec(f"hf:{folder}", registry)
    assert spec.format == "hf" and spec.location == str(folder.resolve()) and not spec.is_hub
    spec = resolve_spec("hf:laion/clap-htsat-fused@" + "a" * 40, registry)
    assert spec.is_hub and spec.revision == "a" * 40
    assert resolve_spec(f"laion:{tmp_path / 'x.pt'}", registry).format == "laion"
    with pytest.raises(UserError, match="full 40-hex commit revision"):
        resolve_spec("hf:laion/clap-htsat-fused@main", registry)
    with pytest.raises(UserError, match=re.escape("neither a registry name")):
        resolve_spec("clap", registry)


def test_settings_overrides_are_validated() -> None:
    assert parse_overrides(["is_longer=extractor", "batch_size=3"], source="--set") == {
        "is_longer": "extractor",
        "batch_size": 3,
    }
    for bad, message in [
        ("is_longer=random", "expected one of length, extractor"),
        ("batch_size=0", "expected an integer >= 1"),
        ("int16_roundtrip=maybe", "expected true or false"),
        ("frequency_min", "is not KEY=VALUE"),
        ("colour=red", "unknown preprocessing setting"),
    ]:
        with pytest.raises(UserError, match=message):
            parse_overrides([bad], source="--set")
    prep = Preprocessing(frequency_min=0.0).resolved(
        Preprocessing(frequency_min=50.0, padding="pad")
    )
    assert (prep.frequency_min, prep.padding) == (0.0, "pad")

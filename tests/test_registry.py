"""The checkpoint registry: parsing, specs, hash verification before any loading."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from audiorepro.cli import cli
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


# The public pins (Hugging Face file pages' LFS details, commit histories, third-party pins that
# agree; see the registry's provenance): revision and weight SHA-256, None where none was found.
PINS = {
    "laion/clap-htsat-fused": (
        "cca9e288ab447cee67d9ada1f85ddb46500f1401",
        {"pytorch_model.bin": "1ed5d0215d887551ddd0a49ce7311b21429ebdf1e6a129d4e68f743357225253"},
    ),
    "laion/clap-htsat-unfused": (
        "8fa0f1c6d0433df6e97c127f64b2a1d6c0dcda8a",
        {"pytorch_model.bin": "1cd3c601bc4afe0fa87be3de4c13dd2cfadd249fac1e29acf74a9b296c3219bb"},
    ),
    "630k-best": ("bc020633ac5bc0bb364febd3b97401ca42816cea", {"630k-best.pt": None}),
    "630k-audioset-best": (
        "bc020633ac5bc0bb364febd3b97401ca42816cea",
        {
            "630k-audioset-best.pt": (
                "8053c9775516af2f4902e1e8281e356cc1bf7a85e8b761908170767b77c3f037"
            )
        },
    ),
    "630k-fusion-best": ("bc020633ac5bc0bb364febd3b97401ca42816cea", {"630k-fusion-best.pt": None}),
    "630k-audioset-fusion-best": (
        "bc020633ac5bc0bb364febd3b97401ca42816cea",
        {
            "630k-audioset-fusion-best.pt": (
                "fb171dd9b608aebdac3d89286cd7615c5100af4cc7dc37797c7fb8d3cc15e3a5"
            )
        },
    ),
}


def test_bundled_registry_carries_the_public_pins_and_invents_nothing() -> None:
    registry = read_registry(bundled_registry())
    assert set(PUBLIC) <= set(registry)
    for name, (fmt, fusion) in PUBLIC.items():
        spec = registry[name]
        assert spec.format == fmt
        assert spec.architecture.enable_fusion is fusion
        assert spec.architecture.amodel == "HTSAT-tiny" and spec.architecture.tmodel == "roberta"
        revision, weights = PINS[name]
        assert spec.revision == revision
        assert spec.weights == {k: v or PLACEHOLDER for k, v in weights.items()}
        # HF weights are pytorch_model.bin: the pinned revisions have no model.safetensors.
        assert not any(f.endswith(".safetensors") for f in {**spec.weights, **spec.files})
    fused, unfused = registry["laion/clap-htsat-fused"], registry["laion/clap-htsat-unfused"]
    # no file hash of the fused repo was found; the unfused ones are corroborated
    assert set(fused.files.values()) == {PLACEHOLDER}
    assert PLACEHOLDER not in unfused.files.values() and len(unfused.files) == 7
    assert unfused.sizes["pytorch_model.bin"] == 614_525_833


def test_provenance_says_how_sure_each_pin_is() -> None:
    import tomllib

    doc = tomllib.loads(bundled_registry().read_text())
    for name in PUBLIC:
        provenance = doc["checkpoints"][name]["provenance"]
        assert "upstream" in provenance or "corroborated" in provenance
    assert "corroborated" in doc["checkpoints"]["630k-audioset-fusion-best"]["provenance"]
    assert "corroborated" in doc["checkpoints"]["laion/clap-htsat-unfused"]["provenance"]


def test_support_repos_pin_the_text_models_laion_clap_loads() -> None:
    from audiorepro.models.registry import load_support

    support = load_support()
    assert {s.repo: s.revision for s in support.values()} == {
        "roberta-base": "e2da8e2f811d1448a5b465c236feacd80ffbac7b",
        "bert-base-uncased": "86b5e0934494bd15c9632b12f734a8a67f723594",
        "facebook/bart-base": "aadd2ab0ae0c8268c7c9693540e9904811f36177",
    }
    for name in ("630k-best", "630k-audioset-fusion-best"):
        assert set(load_registry()[name].support) == set(support)


def test_public_entry_not_in_the_cache_refuses_to_load_and_never_downloads() -> None:
    spec = load_registry()["laion/clap-htsat-fused"]
    with pytest.raises(UserError, match=r"not in the local hub cache \(audiorepro never downloads"):
        verify_weights(spec)


def test_public_entry_without_a_published_hash_refuses_to_load(tmp_path: Path) -> None:
    import dataclasses

    (tmp_path / "630k-best.pt").write_bytes(b"x")
    spec = dataclasses.replace(
        load_registry()["630k-best"], location=str(tmp_path / "630k-best.pt")
    )
    with pytest.raises(UserError, match=r"no verified hash for 630k-best\.pt yet"):
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
        (
            '[checkpoints.m]\nformat = "onnx"\n',
            "checkpoints.m.format",
            "expected 'hf', 'laion', 'py' or 'hear'",
        ),
        (
            '[checkpoints.m]\nformat = "laion"\nweight = "x"\n',
            "checkpoints.m.weight",
            "unknown key",
        ),
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
    """A file that is not a registry fails as it is read; an entry of a well-formed file that
    cannot be used fails the commands naming it (``resolve_spec``), not the file's others."""
    path = _write(tmp_path, body)
    try:
        registry = read_registry(path)
    except UserError as exc:
        error = exc
    else:
        assert set(registry.broken) == {"m"} and "m" not in registry
        with pytest.raises(UserError) as info:
            resolve_spec("m", registry)
        error = info.value
    assert re.search(message, str(error)) and error.key == key
    assert str(tmp_path / "registry.toml") in str(error)


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
    for unpinned in ("@main", "@" + "a" * 39, ""):  # a branch, a short hash, no revision
        with pytest.raises(UserError, match="full 40-hex commit revision"):
            resolve_spec("hf:laion/clap-htsat-fused" + unpinned, registry)
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


def test_the_documented_hf_form_requires_the_commit() -> None:
    """The README, docs/models.md and the command-line help state the hub form as
    ``@COMMIT``, required, never as an optional ``[@REV]`` that the loader then refuses."""
    from tests.conftest import ROOT

    for page in (ROOT / "README.md", ROOT / "docs" / "models.md"):
        text = page.read_text()
        assert "[@" not in text.replace("r@", ""), page
        assert "40-hex" in text, page
    result = CliRunner().invoke(cli, ["extract", "--help"])
    assert "hf:<repo>@<40-hex commit>" in " ".join(result.output.split())

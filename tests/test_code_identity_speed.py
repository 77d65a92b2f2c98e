"""An encoder's code identity and the recorded library versions are read once per process (the
largest costs of a short extraction: docs/benchmarks.md); a name the map lacks afresh."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest

from audiorepro.models import codehash
from audiorepro.models.encoder_specs import UserSpec, code_identity


def test_distributions_are_looked_up_once_and_afresh_for_a_new_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[int] = []
    real = metadata.distributions

    def counted() -> Iterable[metadata.Distribution]:
        calls.append(1)
        return real()

    monkeypatch.setattr(metadata, "distributions", counted)
    monkeypatch.setattr(codehash, "_LOOKED_AFRESH", set())
    codehash._index.cache_clear()
    try:
        user = UserSpec("py", "audiorepro.models.resemblyzer", "voice_encoder")
        first = code_identity(user)
        assert len(calls) == 1
        assert code_identity(user) == first and len(calls) == 1
        assert first["package"] == "audiorepro" and first["version"] is not None
        # A module of no known distribution: looked up afresh (one installed meanwhile),
        # once: a second miss of the same name reads nothing again.
        site = tmp_path / "site"
        (site / "fresh_codeid").mkdir(parents=True)
        (site / "fresh_codeid" / "__init__.py").write_text("")
        monkeypatch.syspath_prepend(str(site))
        assert code_identity(UserSpec("py", "fresh_codeid", "make"))["package"] is None
        assert len(calls) == 2
        info = site / "fresh_codeid-2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fresh_codeid\nVersion: 2.0\n")
        (info / "RECORD").write_text("fresh_codeid/__init__.py,,\n")
        assert code_identity(UserSpec("py", "fresh_codeid", "make"))["package"] is None
        assert len(calls) == 2  # looked up afresh once per process, not on every call
        monkeypatch.setattr(codehash, "_LOOKED_AFRESH", set())  # a new process
        codehash._index.cache_clear()
        fresh = code_identity(UserSpec("py", "fresh_codeid", "make"))
        assert (fresh["package"], fresh["version"]) == ("fresh_codeid", "2.0")
    finally:
        codehash._index.cache_clear()


def test_library_versions_are_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from audiorepro.models import extract

    calls: list[str] = []

    def counted(name: str) -> str:
        calls.append(name)
        return "1.0"

    monkeypatch.setattr(metadata, "version", counted)
    extract._library_versions.cache_clear()
    try:
        first = extract.library_versions()
        first["numpy"] = "changed by a caller"
        second = extract.library_versions()
        assert second["numpy"] == "1.0"  # each call gets its own dict
        assert len(calls) == len(extract.VERSIONED)
    finally:
        extract._library_versions.cache_clear()


def test_upgrading_a_wrapped_package_changes_the_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """resemblyzer's encoder lives inside audiorepro (``audiorepro.models.resemblyzer``) and
    wraps the installed ``resemblyzer``: a new resemblyzer under the same audiorepro source is
    new code, so the extraction cache's key changes (never the old version's embeddings)."""
    from audiorepro.models.registry import load_registry, resolve_spec
    from audiorepro.runner import cache

    spec = resolve_spec("resemblyzer", load_registry([]))
    pytest.importorskip("resemblyzer", reason="resemblyzer is not installed (extra `models`)")
    real_version = metadata.version
    installed = {"resemblyzer": "0.1.4"}
    monkeypatch.setattr(metadata, "version", lambda name: installed.get(name) or real_version(name))
    monkeypatch.setattr(cache, "weight_hashes", lambda spec: {"pretrained.pt": "0" * 64})

    def key() -> dict[str, object]:
        return cache.model_key("resemblyzer", spec, {}, "cpu")

    before = key()
    assert before["code"]["distributions"]["resemblyzer"]["version"] == "0.1.4"  # type: ignore[index]
    assert key() == before
    installed["resemblyzer"] = "0.2.0"
    after = key()
    assert after["code"]["distributions"]["resemblyzer"]["version"] == "0.2.0"  # type: ignore[index]
    assert after["code"]["source_sha256"] == before["code"]["source_sha256"]  # type: ignore[index]
    assert after != before

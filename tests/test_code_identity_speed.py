"""An encoder's code identity looks installed distributions up once per process (it was the
largest cost of a short extraction: docs/benchmarks.md), and afresh for a name it lacks."""

from __future__ import annotations

from importlib import metadata

import pytest

from audiorepro.models import encoder_specs
from audiorepro.models.encoder_specs import UserSpec, code_identity


def test_distributions_are_looked_up_once_and_afresh_for_a_new_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    installed = {"audiorepro": ["audiorepro"]}

    def counted() -> dict[str, list[str]]:
        calls.append(1)
        return dict(installed)

    monkeypatch.setattr(metadata, "packages_distributions", counted)
    encoder_specs._packages_distributions.cache_clear()
    try:
        user = UserSpec("py", "audiorepro.models.resemblyzer", "voice_encoder")
        first = code_identity(user)
        assert code_identity(user) == first and len(calls) == 1
        assert first["package"] == "audiorepro" and first["version"] is not None
        # A module of no known distribution: looked up afresh (one installed meanwhile).
        installed["json"] = ["json-dist"]
        assert code_identity(UserSpec("py", "json", "loads"))["package"] == "json-dist"
        assert len(calls) == 2
    finally:
        encoder_specs._packages_distributions.cache_clear()

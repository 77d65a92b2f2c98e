"""Shared test set-up: offline, deterministic hypothesis profiles, fixture paths."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from audiorepro.models.offline import activate_hub_cache, build_tokenizer_cache

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# laion-clap loads three tokenizers when imported: give it the tiny stand-ins, in a cache that
# the suite builds itself, before anything imports huggingface_hub (it reads this at import).
_HUB_CACHE = Path(tempfile.mkdtemp(prefix="audiorepro-hub-"))
atexit.register(shutil.rmtree, _HUB_CACHE, ignore_errors=True)
os.environ["HF_HOME"] = str(_HUB_CACHE)
# Point the hub at the cache first: building the text stand-in imports huggingface_hub.
activate_hub_cache(_HUB_CACHE)
# With the model stack installed, also the roberta-base text stand-in laion-clap builds from.
build_tokenizer_cache(_HUB_CACHE, text_model=importlib.util.find_spec("transformers") is not None)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DUMPS = sorted((FIXTURES / "dumps").glob("*.npz"))
GOLDEN = ROOT / "golden"

# "ci": derandomized, part of the default suite. "fuzz": long runs in `tox -e fuzz`.
settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    max_examples=3000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def fixture_dumps() -> list[Path]:
    assert DUMPS, "no fixture dumps in fixtures/dumps (run tools/make_fixtures.py)"
    return DUMPS


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled demo study, reproduced once per session with the local executor."""
    pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
    pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")
    from audiorepro.cli import main

    out = tmp_path_factory.mktemp("demo") / "out"
    assert main(["reproduce", "--out", str(out)]) == 0
    return out


def outputs(out: Path, names: tuple[str, ...]) -> dict[str, str]:
    """SHA-256 of the named outputs of a reproduce run and of every table."""
    import hashlib

    files = [*names, *(f"tables/{p.name}" for p in sorted((out / "tables").iterdir()))]
    return {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in files}

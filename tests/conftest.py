"""Shared test set-up: offline, deterministic hypothesis profiles, fixture paths."""

from __future__ import annotations

import atexit
import importlib.util
import ipaddress
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from audiorepro.models.offline import activate_hub_cache, build_tokenizer_cache
from tests.goldens import tiered_regression  # noqa: F401 (a fixture)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# Tests read stderr line by line (one line per error): no stage lines there, except in
# tests/test_progress.py, which turns them on for its own runs.
os.environ["AUDIOREPRO_PROGRESS"] = "off"
# The demo's tiny models are cached per user (audiorepro.runner.demo.model_cache): the suite
# gets its own cache, built once per session and removed at its end, never the user's.
_XDG_CACHE = Path(tempfile.mkdtemp(prefix="audiorepro-xdg-"))
atexit.register(shutil.rmtree, _XDG_CACHE, ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = str(_XDG_CACHE)
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


#: The layer of every test module (markers declared in pyproject.toml): ``unit`` tests one
#: module (in memory or on fixture files), ``integration`` several layers together (the
#: command line in process, the runner on dumps, tiny models), ``e2e`` the kit as a user runs
#: it (the demo study, a fresh virtualenv, a container, Slurm, a real browser). Doctests are
#: unit tests. Select with ``-m unit``, ``-m "not e2e"``; the default runs everything.
LAYERS = {
    "unit": {
        "test_audio_inputs.py", "test_bootstrap.py", "test_cache.py", "test_container.py",
        "test_dump_validation.py",
        "test_exact_ranks.py", "test_golden.py", "test_layout.py", "test_locks.py",
        "test_probe_human.py", "test_probe_invariance.py", "test_probe_metrics.py",
        "test_profiles.py", "test_profile_registry.py",
        "test_project.py", "test_relevance.py", "test_registry.py", "test_retrieval_definitions.py",
        "test_retrieval_fuzz.py", "test_schemas.py", "test_schema_agreement.py", "test_study.py",
        "test_tables.py",
        "test_trec_oracle.py", "test_trec_eval.py", "test_tiers.py", "test_profile_dcase.py",
        "test_zeroshot_metrics.py", "test_engine_stats.py", "test_tie_averaged_ndcg.py",
    },
    "integration": {
        "test_cli.py", "test_core_install.py", "test_explain.py", "test_fetch.py", "test_models.py",
        "test_probe_saved.py", "test_probe_study.py", "test_probe_report.py",
        "test_probe_files.py", "test_probe_layout.py", "test_probe_reading.py",
        "test_probe_content.py",
        "test_profile_laion_clap.py", "test_retrieval_cutoffs.py",
        "test_selfcheck.py", "test_verify.py", "test_outputs_folder.py", "test_hostile.py",
        "test_publish_concurrency.py", "test_verdicts.py", "test_provenance.py",
        "test_selection.py",
        "test_profile_laion_clap_zeroshot.py", "test_esc50.py", "test_audiocaps_protocol.py",
        "test_sign.py",
        "test_diff.py", "test_diff_runs.py", "test_hostile_diff.py",
        "test_catalog.py", "test_api.py", "test_summary.py", "test_progress.py",
        "test_demo_cache.py", "test_index.py", "test_verify_closing.py",
        "test_documented_commands.py",
        "test_hostile_fetch.py", "test_hostile_json.py", "test_hostile_tolerance.py",
        "test_hostile_minors.py", "test_trec_quicktest.py", "test_hostile_trec.py",
        "test_trec_eval_binary.py",
        "test_empty_queries.py", "test_graded_relevance.py", "test_float_gains.py",
        "test_study_kinds.py", "test_hostile_layout.py",
    },
    "e2e": {
        "test_readme.py", "test_reproduce.py", "test_scaleout.py", "test_crosscpu.py",
        "test_hpc_readme.py", "test_evaluate.py", "test_report_html.py", "test_number_view.py",
    },
}  # fmt: skip
#: Modules whose tests take seconds each (models, the demo, Slurm): ``-m "not slow"`` is the
#: quick loop while editing.
SLOW = {
    "test_models.py", "test_reproduce.py", "test_scaleout.py", "test_crosscpu.py",
    "test_diff_runs.py",
    "test_evaluate.py", "test_number_view.py",
}  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every test with its layer; ``crosscpu`` tests (minutes) run only when asked for
    by name (``-m crosscpu``, ``tox -e crosscpu``)."""
    if "crosscpu" not in (config.option.markexpr or ""):
        keep = [i for i in items if i.get_closest_marker("crosscpu") is None]
        if len(keep) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in keep])
            items[:] = keep
    layer_of = {module: layer for layer, modules in LAYERS.items() for module in modules}
    for item in items:
        name = item.path.name
        if not name.startswith("test_"):
            item.add_marker("unit")  # a doctest of the package or of docs/
            continue
        if name not in layer_of:
            raise pytest.UsageError(f"tests/{name} has no layer: add it to LAYERS in conftest.py")
        item.add_marker(layer_of[name])
        if name in SLOW:
            item.add_marker("slow")


def _loopback(host: Any) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _network_free(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests are network-free unless marked ``network``: a connection to anything but this
    machine fails at once (in this process; subprocesses of network tests are theirs)."""
    if request.node.get_closest_marker("network"):
        return
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        family = sock.family
        if family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            raise OSError(f"network-free test tried to reach {address!r}: mark it network")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)

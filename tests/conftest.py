"""Shared test set-up: offline, deterministic hypothesis profiles, fixture paths."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.util
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
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
#: pip's cache of the user who runs the suite, taken before XDG_CACHE_HOME is moved below:
#: the fresh-virtualenv tests install from it, as a second install on the same machine does.
PIP_CACHE = Path(
    os.environ.get("PIP_CACHE_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip"
)
# What the whole run builds once and shares, read-only (the tiny models, the demo's output):
# one folder per run, made by the first process and removed at its end. pytest-xdist's workers
# inherit the controller's environment and find it there; each builds what is missing under a
# file lock (shared_once), so two workers never build the same thing.
if "PYTEST_XDIST_WORKER" not in os.environ or "AUDIOREPRO_SUITE_SHARED" not in os.environ:
    _SHARED = Path(tempfile.mkdtemp(prefix="audiorepro-suite-"))
    atexit.register(shutil.rmtree, _SHARED, ignore_errors=True)
    os.environ["AUDIOREPRO_SUITE_SHARED"] = str(_SHARED)
SHARED = Path(os.environ["AUDIOREPRO_SUITE_SHARED"])
# The demo's tiny models are cached per user (audiorepro.runner.demo.model_cache): the suite
# gets its own cache, built once per run (by whichever worker needs it first: the cache
# builds a folder whole and renames it into place) and removed at its end, never the user's.
_XDG_CACHE = SHARED / "xdg"
_XDG_CACHE.mkdir(exist_ok=True)
os.environ["XDG_CACHE_HOME"] = str(_XDG_CACHE)
# The per-user embedding cache (audiorepro.runner.cache.shared_store) off: each test's output
# folder extracts what it needs, as the tests that count extractions or damage a cache entry
# expect; tests/test_embedding_cache.py turns it on in a store of its own.
os.environ["AUDIOREPRO_EMBEDDING_CACHE"] = "off"
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


def tree_digest(folder: Path) -> str:
    """SHA-256 over every file's relative path and bytes under ``folder``."""
    import hashlib

    digest = hashlib.sha256()
    files = [Path(d) / f for d, _, names in os.walk(folder, followlinks=True) for f in names]
    for path in sorted(files):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_once(name: str, build: Callable[[Path], None]) -> Path:
    """``SHARED/name``, built by ``build(folder)`` once per run (across xdist workers too: the
    first one builds under a file lock, the others wait and reuse it). Tests read it and
    never write into it: :func:`check_untouched` fails a run whose tests changed it."""
    folder, done = SHARED / name, SHARED / f"{name}.sha256"
    with _exclusive(SHARED / f"{name}.lock"):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a build that died half-way
            folder.mkdir(parents=True)
            build(folder)
            done.write_text(tree_digest(folder))
    return folder


def check_untouched(name: str) -> None:
    """Fails when a test wrote into a shared folder (it must copy it first)."""
    folder, done = SHARED / name, SHARED / f"{name}.sha256"
    assert tree_digest(folder) == done.read_text(), (
        f"a test changed the shared {folder}: copy it (shutil.copytree) before changing it"
    )


@pytest.fixture(scope="session")
def demo() -> Iterator[Path]:
    """The bundled demo study, reproduced once per run with the local executor and shared
    read-only by every test (and every xdist worker) that asks for it."""
    pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
    pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")

    def build(folder: Path) -> None:
        # As a user runs it (a process of its own, stage lines on): its stderr is kept for
        # tests/test_reproduce.py, which checks that only audiorepro's own lines are there.
        env = {k: v for k, v in os.environ.items() if k != "AUDIOREPRO_PROGRESS"}
        proc = subprocess.run(
            [sys.executable, "-m", "audiorepro", "reproduce", "--out", str(folder / "out")],
            env=env, capture_output=True, text=True, check=False, timeout=1800,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        (folder / "stderr.txt").write_text(proc.stderr)

    yield shared_once("demo", build) / "out"
    check_untouched("demo")


#: A line audiorepro itself writes to stderr: its errors and notes (``audiorepro: ...``) and
#: its progress lines (``STAGE: started ...``, ``STAGE: NN% ...``, ``STAGE: done ...``).
OWN_LINE = re.compile(r"^(audiorepro\b.*|[^:]+: (started|done|\d+%)\b.*)$")


def foreign_lines(stderr: str) -> list[str]:
    r"""The lines of ``stderr`` that audiorepro did not write (a library's warning or print).

    >>> foreign_lines("extract: started, 2 batches\nUserWarning: x\naudiorepro: error: y\n")
    ['UserWarning: x']
    """
    return [line for line in stderr.splitlines() if line.strip() and not OWN_LINE.match(line)]


@pytest.fixture(scope="session")
def tiny_models() -> Iterator[Callable[..., Path]]:
    """``tiny_models(seed=0, fusion=True)``: the registry of the tiny tiny-hf and tiny-laion
    pair (``audiorepro tiny-models``), built once per run for each seed and fusion and shared
    read-only (a test that changes a checkpoint copies the folder first)."""
    pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
    pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")
    from audiorepro.models.tiny import build_tiny_models
    from audiorepro.runner.demo import place_models

    used: set[str] = set()

    def get(seed: int = 0, fusion: bool = True) -> Path:
        name = f"tiny-seed{seed}-{'fusion' if fusion else 'plain'}"

        def build(folder: Path) -> None:
            if fusion:  # the demo's own models (its per-user cache, here the run's): one build
                place_models(folder / "models", seed, build_tiny_models)
            else:
                build_tiny_models(folder / "models", seed=seed, fusion=False)

        used.add(name)
        # Resolved: the fused ones are a link into the demo's cache, and a command names the
        # real path of a checkpoint it was given.
        return (shared_once(name, build) / "models").resolve() / "registry.toml"

    yield get
    for name in sorted(used):
        check_untouched(name)


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
# The toy kind's module registers its kind when imported: the doctest collection of tests/
# (--doctest-modules) would import it once for the whole session, and every later registry
# check would see it. tests/test_study_kinds.py imports it from a temporary folder per test.
collect_ignore = ["toy_kind.py"]

LAYERS = {
    "unit": {
        "test_audio_inputs.py", "test_bootstrap.py", "test_cache.py", "test_container.py",
        "test_dump_validation.py",
        "test_exact_ranks.py", "test_golden.py", "test_layout.py", "test_locks.py",
        "test_kind_homes.py",
        "test_probe_human.py", "test_probe_invariance.py", "test_probe_metrics.py",
        "test_profiles.py", "test_profile_registry.py",
        "test_project.py", "test_relevance.py", "test_registry.py", "test_retrieval_definitions.py",
        "test_retrieval_fuzz.py", "test_schemas.py", "test_schema_agreement.py", "test_study.py",
        "test_tables.py",
        "test_trec_oracle.py", "test_trec_eval.py", "test_tiers.py", "test_profile_dcase.py",
        "test_trec_prefs.py", "test_trec_prefs_native.py",
        "test_zeroshot_metrics.py", "test_engine_stats.py", "test_tie_averaged_ndcg.py",
        "test_verification.py", "test_speech_fixtures.py", "test_code_identity_speed.py",
        "test_hear_scores.py", "test_hear_tasks.py", "test_hear_events.py",
        "test_verification_definitions.py", "test_trial_formats.py", "test_score_norm.py",
        "test_verification_bootstrap.py",
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
        "test_documented_commands.py", "test_explain_trials.py", "test_verification_study.py",
        "test_hostile_fetch.py", "test_hostile_json.py", "test_hostile_tolerance.py",
        "test_hostile_minors.py", "test_trec_quicktest.py", "test_hostile_trec.py",
        "test_trec_eval_binary.py", "test_trec_native.py", "test_trec_light.py",
        "test_empty_queries.py", "test_graded_relevance.py", "test_float_gains.py",
        "test_study_kinds.py", "test_hostile_layout.py", "test_hostile_round4.py",
        "test_hostile_round6.py", "test_hostile_round7.py", "test_hostile_round8.py",
        "test_hostile_round9.py",
        "test_encoders.py", "test_code_identity.py", "test_embedding_cache.py",
        "test_hostile_round5.py",
        "test_linear_probe.py", "test_linear_probe_study.py", "test_speaker_probe.py",
        "test_cli_startup.py",
        "test_hear_command.py",
        "test_hear_mlp.py",
        "test_hear_maestro.py",
        "test_hear_networks.py",
        "test_hear_saved.py",
        "test_hear_cache.py",
        "test_hear_saved_embeddings.py",
    },
    "e2e": {
        "test_readme.py", "test_reproduce.py", "test_scaleout.py", "test_crosscpu.py",
        "test_hpc_readme.py", "test_evaluate.py", "test_report_html.py", "test_number_view.py",
        "test_speech_study.py", "test_user_code.py", "test_hear_bench.py",
    },
}  # fmt: skip
#: Modules whose tests take seconds each (models, the demo, Slurm): ``-m "not slow"`` is the
#: quick loop while editing.
SLOW = {
    "test_models.py", "test_reproduce.py", "test_scaleout.py", "test_crosscpu.py",
    "test_diff_runs.py",
    "test_evaluate.py", "test_number_view.py", "test_encoders.py", "test_speech_study.py",
    "test_linear_probe_study.py", "test_speaker_probe.py", "test_code_identity.py",
    "test_embedding_cache.py", "test_user_code.py", "test_hear_bench.py",
}  # fmt: skip


#: The lock the ``locked`` tests hold the installed packages to (tox's py311 installs it).
DEV_LOCK = ROOT / "requirements" / "dev-linux-x86_64.txt"


def locked_skip_reason(lock: Path = DEV_LOCK) -> str | None:
    """Why a ``locked`` test cannot hold here, or None: the installed packages are not the ones
    ``lock`` pins (an unpinned ``pip install -e '.[test,models]'``, the README's quick loop).
    Where the lock must be installed (tox and ``.ci/run`` set ``AUDIOREPRO_LOCKED=1``) they
    always run, and fail on a difference rather than skip."""
    if os.environ.get("AUDIOREPRO_LOCKED") == "1":
        return None
    from audiorepro.checks.locks import environment_differences, read_lock

    differences = environment_differences(lock)
    if not differences:
        return None
    name = lock.relative_to(ROOT) if lock.is_relative_to(ROOT) else lock
    return (
        f"needs the locked environment: {len(differences)} of {len(read_lock(lock)[0])} "
        f"installed packages differ from {name} "
        f"(first: {differences[0]}); tox -e py311 and .ci/run install the lock and run it"
    )


def heareval_skip_reason() -> str | None:
    """Why a ``heareval`` test cannot run here, or None: heareval 2021.1.3 (the HEAR reference)
    does not import. ``tox -e hear`` installs it and sets AUDIOREPRO_HEAREVAL=1, so that there
    the tests fail on a missing or broken install rather than skip."""
    if os.environ.get("AUDIOREPRO_HEAREVAL") == "1":
        return None
    try:
        import heareval.score  # noqa: F401
    except ImportError as exc:
        return (
            f"needs heareval 2021.1.3, the HEAR reference ({exc}); `tox -e py311,hear` "
            "installs requirements/hear-linux-x86_64.txt beside py311 and runs these tests"
        )
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every test with its layer; ``crosscpu`` tests (minutes) run only when asked for
    by name (``-m crosscpu``, ``tox -e crosscpu``); ``locked`` tests skip, saying why, where
    the installed packages are not the dev lock's (see :func:`locked_skip_reason`), and
    ``heareval`` tests where heareval is absent (see :func:`heareval_skip_reason`)."""
    locked = [i for i in items if i.get_closest_marker("locked") is not None]
    reason = locked_skip_reason() if locked else None
    for item in locked if reason else []:
        item.add_marker(pytest.mark.skip(reason=reason))
    hear = [i for i in items if i.get_closest_marker("heareval") is not None]
    hear_reason = heareval_skip_reason() if hear else None
    for item in hear if hear_reason else []:
        item.add_marker(pytest.mark.skip(reason=hear_reason))
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

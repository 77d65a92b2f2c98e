"""``manifest.json``: hashes of every input and output, and where and how they were made.

The manifest is the one output that may differ between two runs of the same study: it holds
the time (``SOURCE_DATE_EPOCH`` when set, else the clock) and the host. Everything else in it,
and every other output, is a function of the inputs. Recorded: SHA-256 of the study file, of
every dump and of every output file; Python and key package versions; platform, CPU and GPU;
the BLAS numpy was built with and the thread pools in use; determinism settings; the git
commit and dirty flag of the audiorepro source, when it runs from a checkout.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import json
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, NotRequired

import numpy as np
from typing_extensions import TypedDict

from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, json_dumps
from audiorepro.core.threads import cpu_threads, cublas_workspace_config
from audiorepro.formats.dump import Dump
from audiorepro.runner.output.index import write_index
from audiorepro.runner.output.publish import run_files

SCHEMA = "audiorepro.manifest/1"
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)
DETERMINISM_VARIABLES = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "SOURCE_DATE_EPOCH")


class RunTime(TypedDict):
    """The manifest's ``time``: when the run was (UTC, ISO 8601) and where that came from."""

    utc: str
    source: str  #: ``SOURCE_DATE_EPOCH`` or ``clock``


class GpuRecord(TypedDict):
    name: str
    capability: list[int]


class CudaRecord(TypedDict):
    """The CUDA toolkit after the GPUs of :func:`environment`'s ``gpus``."""

    cuda: str | None
    cudnn: int | None


#: A thread pool as threadpoolctl reports it (architecture, internal_api, num_threads,
#: user_api, version).
ThreadPool = dict[str, str | int | None]


class BlasRecord(TypedDict, total=False):
    """The BLAS and LAPACK numpy was built with, and the thread pools in use (None: no
    threadpoolctl)."""

    numpy_blas: str | None
    numpy_lapack: str | None
    threadpools: list[ThreadPool] | None


class CpuDispatch(TypedDict):
    """The CPU's vector features and the code paths in force (:func:`cpu_dispatch`)."""

    isa_flags: list[str]
    numpy_cpu_features: list[str]
    torch_cpu_capability: str | None
    variables: dict[str, str | None]


class ContainerRecord(TypedDict):
    """The image a run ran in (:func:`container`)."""

    base_image: str
    base_image_pinned: bool
    base_image_note: str | None
    lock: str | None
    lock_sha256: str | None


class Environment(TypedDict):
    """The manifest's ``environment``: Python, platform, CPU and GPUs, package versions,
    BLAS, CPU dispatch, the thread and determinism variables, the image."""

    python: str
    implementation: str
    platform: str
    machine: str
    cpu: str | None
    cpu_count: int | None
    gpus: list[GpuRecord | CudaRecord]
    packages: dict[str, str | None]
    blas: BlasRecord
    cpu_dispatch: CpuDispatch
    thread_variables: dict[str, str | None]
    determinism_variables: dict[str, str | None]
    container: ContainerRecord | None


class GitProvenance(TypedDict):
    """The manifest's ``git``: the commit and dirty flag of the audiorepro source, and where
    they come from (``source``), or a ``note`` saying there is none."""

    commit: str | None
    dirty: bool | None
    source: NotRequired[str]
    note: NotRequired[str]


class SelectionRecord(TypedDict):
    """``--cells``/``--device`` of a run of part of a study (:class:`Selection`)."""

    cells: str | None
    device: str | None
    ran: list[str]
    of: list[str]


def timestamp() -> RunTime:
    """The run's time: ``SOURCE_DATE_EPOCH`` when set (reproducible builds), else now (UTC)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and epoch.strip().isdigit():
        when = dt.datetime.fromtimestamp(int(epoch), tz=dt.UTC)
        source = "SOURCE_DATE_EPOCH"
    else:
        when = dt.datetime.now(tz=dt.UTC).replace(microsecond=0)
        source = "clock"
    return {"utc": when.isoformat().replace("+00:00", "Z"), "source": source}


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _gpus() -> list[GpuRecord | CudaRecord]:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return []
    gpus: list[GpuRecord | CudaRecord] = [
        GpuRecord(
            name=torch.cuda.get_device_name(i),
            capability=list(torch.cuda.get_device_capability(i)),
        )
        for i in range(torch.cuda.device_count())
    ]
    return [*gpus, CudaRecord(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())]


def _blas() -> BlasRecord:
    info: BlasRecord = {}
    try:
        show_config: Any = np.show_config  # numpy >= 1.25 returns a dict with mode="dicts"
        config = show_config(mode="dicts")
        # numpy's own (untyped) build configuration, read where it is parsed
        deps = config.get("Build Dependencies", {}) if isinstance(config, dict) else {}
        info["numpy_blas"] = deps.get("blas", {}).get("name")
        info["numpy_lapack"] = deps.get("lapack", {}).get("name")
    except (TypeError, AttributeError):
        info["numpy_blas"] = None
    try:
        from threadpoolctl import threadpool_info

        info["threadpools"] = sorted(
            (
                {
                    k: p.get(k)
                    for k in ("architecture", "internal_api", "num_threads", "user_api", "version")
                }
                for p in threadpool_info()
            ),
            key=lambda p: (str(p["user_api"]), str(p["internal_api"])),
        )
    except ImportError:
        info["threadpools"] = None
    return info


#: Environment variables that select CPU code paths (``tox -e crosscpu`` sets them).
DISPATCH_VARIABLES = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
    "NPY_ENABLE_CPU_FEATURES",
)
_ISA_FLAG = re.compile(
    r"^(sse\d\w*|ssse3|avx\w*|fma\w*|f16c|amx\w*|asimd\w*|sve\w*|neon|bf16|i8mm)$"
)


def _isa_flags() -> list[str]:
    """The CPU's vector-instruction features, from /proc/cpuinfo (Linux), sorted."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return sorted({f for f in line.split(":", 1)[1].split() if _ISA_FLAG.match(f)})
    except OSError:
        pass
    return []


def _torch() -> Any:
    """torch when it is installed, imported if no model loaded it: a run served from the cache
    records the same capability (and torch's thread pools) as one that extracted (it recorded
    None, which ``diff`` read as another machine). None where torch is not installed."""
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
        torch = importlib.import_module("torch")
        # The thread count every extraction fixes (models.pipelines.configure_determinism):
        # torch's OpenMP pool is then recorded as a run that loaded a model records it (at
        # its default count it was one pool more or less than the extracting run's).
        torch.set_num_threads(cpu_threads())
    return sys.modules.get("torch")


def cpu_dispatch() -> CpuDispatch:
    """The CPU's features and the code paths in force: two outputs whose tier-b numbers
    differ (docs/tiers.md, "What bit-identical covers") can be told apart by this block."""
    features: dict[str, bool] = {}
    for name in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        try:
            features = importlib.import_module(name).__cpu_features__
            break
        except (ImportError, AttributeError):
            continue
    torch = _torch()
    return {
        "isa_flags": _isa_flags(),
        "numpy_cpu_features": sorted(k for k, on in features.items() if on),
        "torch_cpu_capability": (
            torch.backends.cpu.get_cpu_capability() if torch is not None else None
        ),
        "variables": {k: os.environ.get(k) for k in DISPATCH_VARIABLES},
    }


#: The package's own folder (``.../audiorepro``), where the provenance is looked up from.
PACKAGE = Path(__file__).resolve().parents[2]


def _run_git(root: Path, *args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def checkout_of(package: Path) -> Path | None:
    """The git checkout ``package`` runs from (an editable install, ``PYTHONPATH=src``): the
    nearest folder above it with ``.git`` (a folder, or a file in a worktree) whose
    ``src/audiorepro`` is this package, or None (a wheel in site-packages inside some other
    repository is not that repository's code)."""
    for folder in package.parents:
        if (folder / ".git").exists():
            return folder if (folder / "src" / "audiorepro") == package else None
    return None


def git_provenance(package: Path = PACKAGE) -> GitProvenance:
    """The commit and dirty flag of the audiorepro source, and where they come from: the
    checkout it runs from; else the stamp a wheel build wrote (``_build_info.json``,
    ``setup.py``); else the image's ``REVISION`` build argument (``AUDIOREPRO_REVISION``);
    else none, "not from a git checkout"."""
    root = checkout_of(package)
    if root is not None:
        commit = _run_git(root, "rev-parse", "HEAD")
        status = _run_git(root, "status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None else bool(status)
        return {"commit": commit, "dirty": dirty, "source": "checkout"}
    stamp = package / "_build_info.json"
    if stamp.is_file():
        try:
            info = json.loads(stamp.read_text())
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict) and isinstance(info.get("commit"), str):
            return {"commit": info["commit"], "dirty": info.get("dirty"), "source": "wheel build"}
    revision = os.environ.get("AUDIOREPRO_REVISION", "")
    if revision and revision != "unknown":
        return {"commit": revision, "dirty": None, "source": "image REVISION"}
    return {"commit": None, "dirty": None, "note": "not from a git checkout"}


def determinism_variables() -> dict[str, str | None]:
    """The determinism variables in force: ``CUBLAS_WORKSPACE_CONFIG`` as every extraction
    sets it (:func:`~audiorepro.core.threads.cublas_workspace_config`), recorded whether or
    not a model loaded in this run (a run served from the cache recorded None)."""
    values = {k: os.environ.get(k) for k in DETERMINISM_VARIABLES}
    values["CUBLAS_WORKSPACE_CONFIG"] = cublas_workspace_config()
    return values


def environment() -> Environment:
    # The extraction module (the model stack's embedders and registry) loads when a manifest
    # is written, not when the runner's kinds are imported to read a bundle (diff, verify OUT).
    from audiorepro.models.extract import library_versions

    _torch()  # loaded (and its threads fixed) before the thread pools are listed
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpus": _gpus(),
        "packages": library_versions(),
        "blas": _blas(),
        "cpu_dispatch": cpu_dispatch(),
        "thread_variables": {k: os.environ.get(k) for k in THREAD_VARIABLES},
        "determinism_variables": determinism_variables(),
        "container": container(),
    }


def container() -> ContainerRecord | None:
    """The image this runs in (set by the Dockerfile), or None outside it.

    ``base_image_pinned`` is true only when the base image is named by digest; until
    ``tools/pin-base-image`` has run where a registry is reachable it says "base image unpinned".
    """
    base = os.environ.get("AUDIOREPRO_BASE_IMAGE")
    if base is None:
        return None
    lock = os.environ.get("AUDIOREPRO_LOCK")
    lock_path = Path(lock) if lock else None
    pinned = "@sha256:" in base
    return {
        "base_image": base,
        "base_image_pinned": pinned,
        "base_image_note": None if pinned else "base image unpinned",
        "lock": lock,
        "lock_sha256": sha256_file(lock_path) if lock_path and lock_path.is_file() else None,
    }


def output_hashes(out: Path) -> dict[str, str]:
    """SHA-256 of every file a run wrote under ``out`` (relative path, sorted): nested
    studies' outputs and manifests included (the top-level manifest is written last and
    covers them), without the top-level manifest and the cache (:func:`.publish.run_files`)."""
    return {rel: sha256_file(out / rel) for rel in run_files(out)}


class StudyFileRecord(TypedDict):
    name: str
    file: str
    sha256: str


class Manifest(TypedDict):
    """``manifest.json``: SHA-256 of every input and output, environment, time and host (the
    one output that may differ between two runs of the same study)."""

    schema: str
    study: StudyFileRecord
    #: input file name -> SHA-256 (None: a dump made in memory, never a file)
    inputs: dict[str, str | None]
    #: output path (relative, sorted) -> SHA-256
    outputs: dict[str, str]
    environment: Environment
    git: GitProvenance
    time: RunTime
    host: str
    #: ``--cells``/``--device`` when given (absent: the whole study, its own devices)
    selection: NotRequired[SelectionRecord]


def write_manifest(
    out: Path, study: Any, dumps: list[Dump], *, inputs: dict[str, str] | None = None
) -> Manifest:
    write_index(out, study)  # README.txt: written first, so the manifest lists it
    manifest: Manifest = {
        "schema": SCHEMA,
        "study": {
            "name": study.name,
            "file": study.source.name,
            "sha256": sha256_file(study.source),
        },
        "inputs": {**{d.source: d.sha256 for d in dumps}, **(inputs or {})},
        "outputs": output_hashes(out),
        "environment": environment(),
        "git": git_provenance(),
        "time": timestamp(),
        "host": socket.gethostname(),
    }
    selection = getattr(study, "selection", None)
    if selection is not None:  # a run of part of a study, or on another device
        manifest["selection"] = {
            "cells": selection.cells,
            "device": selection.device,
            "ran": list(selection.ran),
            "of": list(selection.of),
        }
    atomic_write_bytes(out / "manifest.json", json_dumps(manifest).encode())
    return manifest

#!/usr/bin/env python3
"""Build the image with podman, check it, and emulate apptainer.def: ``tox -e container``.

Steps of ``check`` (each printed with its time):

1. **base**: no registry is reachable on the machines this runs on in CI, so the stand-in base
   image is Debian bookworm (``debootstrap --variant=minbase`` with python3, python3-venv,
   python3-pip, ca-certificates), imported as ``localhost/audiorepro-base:bookworm``; its
   tarball is cached under ``$XDG_CACHE_HOME/audiorepro/container``. With
   ``AUDIOREPRO_CONTAINER_BASE=IMAGE`` the real base (or any other) is used instead.
2. **build**: ``podman build`` of the Dockerfile on that base, with the host's CA bundle mounted
   read-only into the build (never baked in) so that pip can reach the package index, and this
   machine's pip cache at ``/opt/pip-cache`` (the pip layer, rebuilt when a lock changes, then
   installs the pinned files the tox envs already downloaded); podman reuses the layers whose
   inputs did not change. The build ends with the image's own ``audiorepro selfcheck
   --strict-environment``.
3. **inspect**: OCI labels, non-root user, entrypoint, determinism environment.
4. **apptainer**: ``apptainer.def`` read strictly and emulated (see ``tools/apptainer_def.py``):
   built on the image, then ``%test`` and ``%runscript`` (``--version``, and ``reproduce`` of
   the demo study into a bound folder) run as an unknown non-root uid on a read-only root file
   system with a fresh /tmp, as ``apptainer run --containall --cleanenv`` would. Reported as
   "emulated, not an apptainer build".
5. **trec-eval**: in the same emulated SIF, the first ``trec-eval`` of a fresh container answers
   from the kernels compiled into the image's wheel: numba is never imported and its cache (an
   empty read-only bind) stays empty; the CPU seconds are printed (issue 48). The image's
   ``audiorepro trec-eval`` command line execs the native program installed by its wheel
   (``audiorepro/core/trec-eval``): the answer comes from it, and the Python path never
   returns (a probe after ``main()`` prints nothing).

How the CI image differs from the real one: only in its base. The real base (Dockerfile's
``BASE_IMAGE``) is a CUDA PyTorch image that already holds the torch trio the lock pins; the
stand-in holds Debian's Python 3.11 and nothing else, so the trio (PyPI's 2.9.1 wheels, with
their nvidia-* CUDA wheels on x86_64) comes from the same lock as everything else. Every other
package, and audiorepro, is installed by the same Dockerfile lines from the same lock.

Where podman is missing the check is skipped with the reason (exit 0); ``.ci/run`` installs it
when it runs as root. podman's defaults fail on these machines (the nofile and nproc limits,
crun and hybrid cgroups), so a ``containers.conf`` with runc, cgroupfs and explicit ulimits is
written and selected with ``CONTAINERS_CONF``.

Usage::

    python tools/container.py check      # everything above
    python tools/container.py base       # only the stand-in base image
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import apptainer_def  # noqa: E402

T = TypeVar("T")

BASE_TAG = "localhost/audiorepro-base:bookworm"
IMAGE = "localhost/audiorepro:ci"
EMULATED = "localhost/audiorepro-sif-emulated:ci"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"
CONTAINERS_CONF = """\
# Written by tools/container.py: podman's defaults fail on the CI machines (raising the nofile
# limit, the nproc limit, crun on hybrid cgroups).
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""
#: Environment the Dockerfile must set (determinism, offline, the lock).
IMAGE_ENV = (
    "PYTHONHASHSEED=0",
    "CUBLAS_WORKSPACE_CONFIG=:4096:8",
    "OMP_NUM_THREADS=1",
    "MKL_NUM_THREADS=1",
    "OPENBLAS_NUM_THREADS=1",
    "AUDIOREPRO_CPU_THREADS=1",
    "HF_HUB_OFFLINE=1",
    "AUDIOREPRO_LOCK=/opt/audiorepro/lock.txt",
)
#: Running like ``apptainer run --containall --cleanenv`` as an HPC user: a uid the image does
#: not know, a read-only root file system (a SIF is read-only), a fresh /tmp, HOME in it.
APPTAINER_LIKE = [
    "--user",
    "4242:4242",
    "--read-only",
    "--tmpfs",
    "/tmp:rw,exec",
    "-e",
    "HOME=/tmp",
]


class Failed(RuntimeError):
    pass


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "audiorepro" / "container"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run(cmd: list[str], *, capture: bool = False, **kw: object) -> subprocess.CompletedProcess[str]:
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, text=True, capture_output=capture, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        detail = (proc.stdout or "")[-3000:] + (proc.stderr or "")[-3000:] if capture else ""
        raise Failed(f"exit {proc.returncode}: {' '.join(cmd)}\n{detail}")
    return proc


def podman(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    return run(["podman", *args], capture=capture)


def skip_reason() -> str | None:
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman buildah runc fuse-overlayfs uidmap)"
    return None


def setup_podman() -> None:
    conf = cache_dir() / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    os.environ["CONTAINERS_CONF"] = str(conf)


def ensure_base() -> str:
    """The stand-in base image (or $AUDIOREPRO_CONTAINER_BASE); returns its reference."""
    if os.environ.get("AUDIOREPRO_CONTAINER_BASE"):
        return os.environ["AUDIOREPRO_CONTAINER_BASE"]
    if subprocess.run(["podman", "image", "exists", BASE_TAG], check=False).returncode == 0:
        return BASE_TAG
    tarball = cache_dir() / f"base-bookworm-{platform.machine()}.tar"
    if not tarball.is_file():
        if shutil.which("debootstrap") is None or os.geteuid() != 0:
            raise Failed(
                "the stand-in base needs root and debootstrap (apt-get install debootstrap)"
            )
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            rootfs = Path(tmp) / "rootfs"
            run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm",
                 str(rootfs), DEBIAN_MIRROR], capture=True)  # fmt: skip
            partial = tarball.with_suffix(".tar.partial")
            run(["tar", "-C", str(rootfs), "-cf", str(partial), "."])
            partial.replace(tarball)
    run(["podman", "import", str(tarball), BASE_TAG], capture=True)
    return BASE_TAG


def git_revision() -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def pip_cache() -> Path:
    """This machine's pip cache (what the tox envs installed through): ``PIP_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/pip``, else ``~/.cache/pip``."""
    if os.environ.get("PIP_CACHE_DIR"):
        return Path(os.environ["PIP_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip"


def build(base: str) -> None:
    args = ["build", "--file", str(ROOT / "Dockerfile"), "--tag", IMAGE]
    args += ["--build-arg", f"BASE_IMAGE={base}", "--build-arg", f"REVISION={git_revision()}"]
    if base.startswith("localhost/"):
        args.append("--pull=never")
    if CA_BUNDLE.is_file():
        args += ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"]
    # The pip layer (about 4 GB of pinned wheels, hash-checked as always) is rebuilt only when
    # a lock changes; then its files come from this machine's pip cache, not the index again.
    cache = pip_cache()
    cache.mkdir(parents=True, exist_ok=True)
    args += ["--volume", f"{cache}:/opt/pip-cache"]
    podman(*args, str(ROOT))


def inspect() -> list[str]:
    info = json.loads(podman("image", "inspect", IMAGE, capture=True).stdout)[0]
    config = info["Config"]
    labels = config.get("Labels") or {}
    problems = []
    for key in ("source", "revision", "version", "base.name"):
        if not labels.get(f"org.opencontainers.image.{key}"):
            problems.append(f"label org.opencontainers.image.{key} missing")
    if config.get("User") in (None, "", "root", "0"):
        problems.append(f"runs as root (User={config.get('User')!r})")
    if config.get("Entrypoint") != ["audiorepro"]:
        problems.append(f"entrypoint is {config.get('Entrypoint')!r}, not ['audiorepro']")
    env = set(config.get("Env") or [])
    problems += [f"environment lacks {item}" for item in IMAGE_ENV if item not in env]
    return problems


def emulate_apptainer(out: Path) -> None:
    definition = apptainer_def.load(ROOT / "apptainer.def")
    print(
        f"apptainer.def: Bootstrap {definition.header['Bootstrap']} From "
        f"{definition.header['From']}; sections "
        + ", ".join(f"%{s}" for s in definition.sections)
        + f"; emulated on {IMAGE} (the image that From names)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        apptainer_def.containerfile(definition, IMAGE, Path(tmp))
        podman("build", "--pull=never", "--tag", EMULATED, tmp)

    def action(script: str, *args: str, binds: tuple[str, ...] = ()) -> str:
        volumes = [x for b in binds for x in ("--volume", b)]
        cmd = ["run", "--rm", *APPTAINER_LIKE, *volumes, "--entrypoint", "/bin/sh", EMULATED]
        proc = podman(*cmd, "-c", apptainer_def.ACTION, script, *args, capture=True)
        print(proc.stdout.rstrip())
        return proc.stdout

    print("%test:")
    action("/.singularity.d/test")
    print("%runscript --version:")
    if "audiorepro, version" not in action("/.singularity.d/runscript", "--version"):
        raise Failed("%runscript --version did not print audiorepro's version")
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o777)  # the unknown uid writes here, as an HPC user into their own folder
    print("%runscript reproduce --out /out/demo (the bundled demo study):")
    action("/.singularity.d/runscript", "reproduce", "--out", "/out/demo", binds=(f"{out}:/out",))
    for name in ("report.html", "bundle.json.gz", "verification.json", "manifest.json"):
        if not (out / "demo" / name).is_file():
            raise Failed(f"%runscript reproduce wrote no {name}")
        # To compare by hand with a run elsewhere (`sha256sum reproduce-demo/...`).
        digest = hashlib.sha256((out / "demo" / name).read_bytes()).hexdigest()
        print(f"  {digest}  demo/{name}")


#: What a build of the image needs free on podman's storage: its ~8 GB pip layer is on disk three
#: times while podman commits it (the container's diff, the blob in /var/tmp, the stored layer).
BUILD_NEEDS_GB = 26


def disk_report() -> str:
    """Free space where the build writes, and whether it is enough (one line)."""
    proc = subprocess.run(
        ["podman", "info", "--format", "{{.Store.GraphRoot}}"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    places = {Path(proc.stdout.strip() or "/var/lib/containers"), Path("/var/tmp")}
    free = {}
    for place in sorted(places):
        existing = next(p for p in (place, *place.parents) if p.exists())
        free[str(place)] = shutil.disk_usage(existing).free / 1e9
    where = ", ".join(f"{gb:.0f} GB free at {p}" for p, gb in free.items())
    if min(free.values()) >= BUILD_NEEDS_GB:
        return f"disk: {where} (the build needs about {BUILD_NEEDS_GB} GB)"
    return (
        f"disk: {where}; LOW: the build needs about {BUILD_NEEDS_GB} GB (its pip layer is stored "
        "three times while podman commits it): remove old images (podman image prune -a) and "
        "temporary files"
    )


#: The first trec-eval in a fresh container, in-process: what it printed, loaded and cost.
TREC_PROBE = """\
import json, sys, time
t = time.process_time()
from audiorepro.cli import main
code = main(["trec-eval", "-m", "map", "-m", "ndcg_cut.10", "/data/qrels", "/data/run"])
cpu = time.process_time() - t
jit = sorted({m.split(".")[0] for m in sys.modules} & {"numba", "llvmlite"})
print(json.dumps({"code": code, "cpu": round(cpu, 3), "jit": jit}), file=sys.stderr)
"""
TREC_EXPECTED = "map                   \tall\t0.7500\nndcg_cut_10           \tall\t0.8155\n"


def first_trec_eval() -> None:
    """The image's first trec-eval compiles nothing and writes nothing (see the docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        (data / "qrels").write_text("1 0 a 1\n1 0 b 0\n2 0 c 2\n")
        (data / "run").write_text("1 Q0 a 1 0.5 r\n1 Q0 b 2 0.9 r\n2 Q0 c 1 1.0 r\n")
        (data / "probe.py").write_text(TREC_PROBE)
        (data / "numba").mkdir()
        for path in (data, *data.iterdir()):
            path.chmod(0o555 if path.is_dir() else 0o444)
        cmd = ["podman", "run", "--rm", *APPTAINER_LIKE, "--volume", f"{data}:/data:ro"]
        cmd += ["-e", "NUMBA_CACHE_DIR=/data/numba", "--entrypoint", "python", EMULATED]
        proc = subprocess.run([*cmd, "/data/probe.py"], capture_output=True, text=True,
                              check=False)  # fmt: skip
        try:
            report = json.loads(proc.stderr.strip().splitlines()[-1])
        except (IndexError, ValueError):
            report = {}
        if proc.returncode or proc.stdout != TREC_EXPECTED or report.get("jit") != []:
            raise Failed(f"the first trec-eval in the image: {proc.stdout!r} {proc.stderr[-400:]}")
        if list((data / "numba").iterdir()):
            raise Failed("the first trec-eval in the image wrote to numba's cache")
        print(f"first trec-eval in a fresh container: {report['cpu']} s CPU, numba not imported")


#: A real ``audiorepro trec-eval`` command line: the native program replaces the process, so
#: the line after ``main()`` is printed only where it did not run.
NATIVE_PROBE = """\
import sys
sys.argv = ["audiorepro", "trec-eval", "-m", "map", "-m", "ndcg_cut.10", "/data/qrels", "/data/run"]
from audiorepro.cli import main
code = main()
print("the Python path answered", code, file=sys.stderr)
"""


def native_trec_eval() -> None:
    """The image's trec-eval command line execs the native program of its wheel."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        (data / "qrels").write_text("1 0 a 1\n1 0 b 0\n2 0 c 2\n")
        (data / "run").write_text("1 Q0 a 1 0.5 r\n1 Q0 b 2 0.9 r\n2 Q0 c 1 1.0 r\n")
        (data / "probe.py").write_text(NATIVE_PROBE)
        for path in (data, *data.iterdir()):
            path.chmod(0o555 if path.is_dir() else 0o444)
        cmd = ["podman", "run", "--rm", *APPTAINER_LIKE, "--volume", f"{data}:/data:ro"]
        cmd += ["--entrypoint", "python", EMULATED, "/data/probe.py"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode or proc.stdout != TREC_EXPECTED or proc.stderr:
            raise Failed(f"the image's trec-eval did not exec its native program: "
                         f"{proc.stdout!r} {proc.stderr[-400:]}")  # fmt: skip
        print("trec-eval in a fresh container: answered by the native program")


def _bench_python() -> str:
    """A Python with audiorepro's dependencies, for the benchmark's host side (this tox env
    installs nothing): ``AUDIOREPRO_CONTAINER_BENCH_PYTHON``, else tox's py311 env, which
    .ci/run builds before this one."""
    named = os.environ.get("AUDIOREPRO_CONTAINER_BENCH_PYTHON")
    py311 = ROOT / ".tox" / "py311" / "bin" / "python"
    if named:
        return named
    if py311.is_file():
        return str(py311)
    raise Failed(
        "the start-up benchmark needs a Python with audiorepro's dependencies: run tox -e "
        "py311 first or set AUDIOREPRO_CONTAINER_BENCH_PYTHON"
    )


def startup_benchmark() -> None:
    """benchmarks/startup.py's documented container line, as written (every documented
    command is tested), on the image just built; narrowed to ``--version`` by the benchmark's
    own variable (its output says so): each call a fresh container."""
    doc = (ROOT / "benchmarks" / "startup.py").read_text()
    (line,) = [x.strip() for x in doc.splitlines() if x.strip().endswith(f"--container {IMAGE}")]
    argv = line.split()
    if argv[:2] != ["python", "benchmarks/startup.py"]:
        raise Failed(f"benchmarks/startup.py documents {line!r}")
    env = dict(os.environ, AUDIOREPRO_STARTUP_ROWS="--version")
    proc = subprocess.run([_bench_python(), *argv[1:]], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False, timeout=1800)  # fmt: skip
    rows = [x for x in proc.stdout.splitlines() if x.startswith("| --version |")]
    if proc.returncode or f"In fresh containers of {IMAGE}" not in proc.stdout or len(rows) != 2:
        raise Failed(f"{line}: exit {proc.returncode}: {(proc.stdout + proc.stderr)[-600:]}")
    print(f"{line} (narrowed to --version): {rows[-1]}")


def check_image() -> None:
    problems = inspect()
    if problems:
        raise Failed("image: " + "; ".join(problems))


def emulate_apptainer_in_tmp() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        emulate_apptainer(Path(tmp) / "out")


def check() -> int:
    reason = skip_reason()
    if reason:
        print(f"SKIPPED container check: {reason}")
        return 0
    setup_podman()
    timings: dict[str, float] = {}

    def timed(name: str, step: Callable[[], T]) -> T:
        print(f"== {name}", flush=True)
        start = time.monotonic()
        result = step()
        timings[name] = time.monotonic() - start
        return result

    try:
        # Dangling images of earlier builds hold whole layers; the tagged ones keep the cache.
        podman("image", "prune", "--force", capture=True)
        print(disk_report(), flush=True)
        base = timed("base", ensure_base)
        print(f"base image: {base}")
        timed("build", lambda: build(base))
        timed("inspect", check_image)
        # No separate `podman run IMAGE selfcheck`: the build ends with it, and %test below
        # runs the same selfcheck in a fresh container (unknown uid, read-only root).
        timed("apptainer", emulate_apptainer_in_tmp)
        timed("trec-eval", first_trec_eval)
        timed("native trec-eval", native_trec_eval)
        timed("start-up benchmark", startup_benchmark)
    except (Failed, apptainer_def.DefinitionError) as exc:
        print(f"container check FAILED: {exc}", file=sys.stderr)
        print(disk_report(), file=sys.stderr)
        return 1
    print(
        "container check passed: image built from the Dockerfile (stand-in base "
        f"{base}), selfcheck passed in it; apptainer.def emulated, not an apptainer build "
        "(%test and %runscript passed). Seconds: "
        + ", ".join(f"{k} {v:.0f}" for k, v in timings.items())
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["check", "base"])
    args = parser.parse_args(argv)
    if args.command == "base":
        reason = skip_reason()
        if reason:
            print(f"cannot: {reason}", file=sys.stderr)
            return 1
        setup_podman()
        print(ensure_base())
        return 0
    return check()


if __name__ == "__main__":
    raise SystemExit(main())

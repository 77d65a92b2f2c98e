"""The hashed lock files in ``requirements/``: what they pin, and checks against them.

``tools/lock.py`` writes the locks (with uv, from the abstract dependencies in pyproject.toml);
this module defines them, reads them and checks them offline: that a lock still agrees with
pyproject.toml (``check_lock``, used by the tests and ``tools/lock.py --check``) and that an
installed environment is the one a lock pinned (``environment_differences``, used by
``audiorepro selfcheck``).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

__all__ = [
    "LOCKS",
    "LockSpec",
    "check_lock",
    "environment_differences",
    "lock_header",
    "lock_inputs",
    "read_lock",
]


@dataclass(frozen=True)
class LockSpec:
    """One lock: the platform it resolves for and which requirements of pyproject it covers."""

    platform: str  # uv's --python-platform
    machine: str  # platform_machine for environment markers
    extras: tuple[str, ...]
    with_dependencies: bool = True  # the package's own [project] dependencies too
    with_build_system: bool = False  # [build-system] requires: to build the package offline
    python: str = "3.11"
    # Pin exactly the listed packages, not their dependencies (uv --no-deps): for a reference
    # tool whose own metadata cannot be resolved on this Python (heareval's numpy==1.19.2); it
    # is installed with --no-deps beside a lock that holds what it imports.
    no_deps: bool = False


LOCKS: dict[str, LockSpec] = {
    "dev-linux-x86_64.txt": LockSpec(
        "x86_64-manylinux_2_28", "x86_64", ("test", "models", "slurm", "type", "bench", "speech")
    ),
    "lint.txt": LockSpec("x86_64-manylinux_2_28", "x86_64", ("lint",), with_dependencies=False),
    "type.txt": LockSpec("x86_64-manylinux_2_28", "x86_64", ("type",)),
    # The documentation build alone (tox -e docs): Sphinx and MyST, not the package.
    "docs.txt": LockSpec("x86_64-manylinux_2_28", "x86_64", ("docs",), with_dependencies=False),
    # The image installs this first and then builds everything (sdists in the image lock, and
    # audiorepro) with --no-build-isolation: no build step fetches an unhashed backend.
    "build.txt": LockSpec(
        "x86_64-manylinux_2_28", "x86_64", (), with_dependencies=False, with_build_system=True
    ),
    "image-linux-x86_64.txt": LockSpec("x86_64-manylinux_2_28", "x86_64", ("models",)),
    # heareval 2021.1.3 and what its code imports beyond the dev lock (tox -e hear installs it
    # with --no-deps --target beside py311's environment).
    "hear-linux-x86_64.txt": LockSpec(
        "x86_64-manylinux_2_28",
        "x86_64",
        ("hear-reference",),
        with_dependencies=False,
        no_deps=True,
    ),
    "image-linux-aarch64.txt": LockSpec("aarch64-manylinux_2_28", "aarch64", ("models",)),
}


def lock_inputs(pyproject: Path, spec: LockSpec) -> list[str]:
    """The requirement strings of pyproject.toml that ``spec`` locks, in file order."""
    data = tomllib.loads(pyproject.read_text())
    project = data["project"]
    inputs = list(project["dependencies"]) if spec.with_dependencies else []
    if spec.with_build_system:
        inputs += data["build-system"]["requires"]
    for extra in spec.extras:
        inputs += project["optional-dependencies"][extra]
    return inputs


def _inputs_sha256(inputs: list[str]) -> str:
    return hashlib.sha256("\n".join(inputs).encode()).hexdigest()


def lock_header(name: str, spec: LockSpec, inputs: list[str]) -> str:
    """The header ``tools/lock.py`` writes: what the lock covers and a hash of its inputs."""
    parts = ["dependencies"] if spec.with_dependencies else []
    parts += [f"extra {e}" for e in spec.extras]
    parts += ["build-system requires"] if spec.with_build_system else []
    scope = ", ".join(parts)
    return (
        f"# {name}: written by `python tools/lock.py` (uv pip compile --generate-hashes); "
        "do not edit.\n"
        f"# covers: {scope} of pyproject.toml\n"
        f"# platform: {spec.platform}, python {spec.python}\n"
        f"# inputs-sha256: {_inputs_sha256(inputs)}\n"
    )


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def read_lock(path: Path) -> tuple[dict[str, str], dict[str, list[str]], str | None]:
    """Read a lock: ``({name: version}, {name: [sha256, ...]}, inputs_sha256)``.

    Names are canonical (PEP 503). A line that is neither a pin, a hash, a comment nor blank is
    an error, so that an unpinned requirement cannot slip into a lock.
    """
    pins: dict[str, str] = {}
    hashes: dict[str, list[str]] = {}
    inputs_sha = None
    current = None
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip().rstrip("\\").strip()
        if line.startswith("# inputs-sha256:"):
            inputs_sha = line.split(":", 1)[1].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--hash=sha256:") and current is not None:
            hashes[current].append(line.removeprefix("--hash=sha256:"))
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"{path}:{lineno}: expected `name==version` or a hash, got {line!r}")
        current = canonicalize_name(match.group(1))
        pins[current] = match.group(2)
        hashes[current] = []
    return pins, hashes, inputs_sha


def check_lock(pyproject: Path, path: Path, spec: LockSpec) -> list[str]:
    """Ways in which the lock at ``path`` disagrees with pyproject.toml (empty: it agrees)."""
    if not path.is_file():
        return ["missing; run `python tools/lock.py`"]
    inputs = lock_inputs(pyproject, spec)
    try:
        pins, hashes, inputs_sha = read_lock(path)
    except ValueError as exc:
        return [str(exc)]
    problems = []
    if inputs_sha != _inputs_sha256(inputs):
        problems.append(
            "pyproject.toml's requirements changed since this lock was written; "
            "run `python tools/lock.py`"
        )
    problems += [f"{name}=={pins[name]} has no --hash" for name in pins if not hashes[name]]
    env = {
        "python_version": spec.python,
        "python_full_version": f"{spec.python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": spec.machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    for text in inputs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        if name not in pins:
            problems.append(f"{text!r} from pyproject.toml is not pinned")
        elif not req.specifier.contains(pins[name], prereleases=True):
            problems.append(
                f"{text!r} from pyproject.toml is not satisfied by {name}=={pins[name]}"
            )
    return problems


def environment_differences(path: Path) -> list[str]:
    """Packages whose installed version is not the one the lock at ``path`` pins.

    A local version label is ignored, as PEP 440 ``==`` matching does: the CUDA build
    ``2.9.1+cu128`` of a base image satisfies a pin of ``2.9.1``.
    """
    pins, _, _ = read_lock(path)
    differences = []
    for name, pinned in sorted(pins.items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            differences.append(f"{name}: pinned {pinned}, not installed")
            continue
        if Version(installed).public != Version(pinned).public:
            differences.append(f"{name}: pinned {pinned}, installed {installed}")
    return differences

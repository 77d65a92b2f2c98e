#!/usr/bin/env python3
"""Write the hashed lock files in ``requirements/`` from the abstract dependencies in pyproject.

Every lock pins every package (the whole dependency closure) to one version with the SHA-256 of
every file PyPI offers for it, resolved by ``uv pip compile --generate-hashes`` for Python 3.11
on one platform. ``pip install -r LOCK`` then runs in hash-checking mode: a file that differs
from the one locked is refused.

Locks (see ``audiorepro.checks.locks.LOCKS``):

- ``dev-linux-x86_64.txt``: the test/dev environment of this kind of machine (all tox envs but
  lint): the package's dependencies and the extras ``test``, ``models``, ``slurm``, ``type``,
  ``bench``;
- ``lint.txt``: ruff alone, for ``tox -e lint``; ``type.txt``: the package's dependencies and
  mypy, for ``tox -e type`` (both lean, so that CI does not install the model stack thrice);
- ``image-linux-x86_64.txt`` and ``image-linux-aarch64.txt``: the GPU image, per architecture
  (the package's dependencies and the extra ``models``);
- ``hear-linux-x86_64.txt``: heareval 2021.1.3 and what its code imports beyond the dev lock,
  each pinned alone (``--no-deps``: heareval's own metadata pins numpy==1.19.2), for
  ``tox -e hear``;
- ``build.txt``: the build backend of pyproject's ``[build-system]`` (pure Python), which the
  image installs first, so that it builds the lock's source distributions and audiorepro with
  ``--no-build-isolation`` and fetches nothing unhashed.

Each lock starts with a header naming its inputs and their SHA-256; ``tests/test_locks.py``
fails when pyproject.toml and a lock disagree (inputs changed, a requirement not satisfied by
its pin, a pin without a hash). Re-locking needs the network and keeps every pin that still
satisfies pyproject.toml (uv prefers the versions of the lock it rewrites), so that adding a
requirement adds only its closure; ``--upgrade`` picks the newest releases instead. Commit the
result with a line in CHANGELOG.md.

Usage::

    python tools/lock.py            # rewrite every lock, keeping its pins (needs uv and PyPI)
    python tools/lock.py --upgrade  # rewrite every lock with the newest releases
    python tools/lock.py --check    # offline: do the locks agree with pyproject.toml?
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from audiorepro.checks.locks import LOCKS, check_lock, lock_header, lock_inputs  # noqa: E402


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        sys.exit("lock: uv not found; install it with `python3 -m pip install uv`")
    return uv


def compile_lock(name: str, *, upgrade: bool = False) -> str:
    """Resolve one lock with uv and return its text, header included."""
    spec = LOCKS[name]
    inputs = lock_inputs(ROOT / "pyproject.toml", spec)
    with tempfile.TemporaryDirectory() as tmp:
        req_in = Path(tmp) / "requirements.in"
        req_in.write_text("\n".join(inputs) + "\n")
        # uv keeps the pins of an existing output file where they still satisfy the inputs:
        # adding one requirement adds its closure and moves nothing else (--upgrade: newest).
        out = Path(tmp) / "lock.txt"
        current = ROOT / "requirements" / name
        if current.is_file() and not upgrade:
            shutil.copy(current, out)
        cmd = [
            _uv(),
            "pip",
            "compile",
            str(req_in),
            "--generate-hashes",
            "--no-header",
            "--python-version",
            "3.11",
            "--python-platform",
            spec.platform,
            "--index-url",
            "https://pypi.org/simple",
            "--quiet",
            "--output-file",
            str(out),
        ]
        if spec.no_deps:
            cmd.append("--no-deps")
        # Only PyPI: this machine's pip configuration adds local indexes that uv must not see.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            sys.exit(f"lock: uv failed for {name}:\n{proc.stderr}")
        body = out.read_text().replace(str(req_in), "pyproject.toml")
    return lock_header(name, spec, inputs) + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="check the locks, offline")
    parser.add_argument(
        "--upgrade", action="store_true", help="resolve anew: the newest releases, not the pins"
    )
    args = parser.parse_args(argv)
    pyproject = ROOT / "pyproject.toml"
    failed = False
    for name, spec in LOCKS.items():
        path = ROOT / "requirements" / name
        if args.check:
            problems = check_lock(pyproject, path, spec)
            for p in problems:
                print(f"{path.relative_to(ROOT)}: {p}", file=sys.stderr)
            failed |= bool(problems)
            if not problems:
                print(f"{path.relative_to(ROOT)}: agrees with pyproject.toml")
            continue
        text = compile_lock(name, upgrade=args.upgrade)
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)} ({text.count('--hash=')} hashes)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

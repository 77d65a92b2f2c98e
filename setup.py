"""Build hook.

1. The compiled trec-eval kernels (``src/audiorepro/core/_trec.c``): a plain C shared library
   (no ``Python.h``) built by setuptools as an ``Extension`` and loaded with ctypes by
   ``audiorepro.core.native``, so the wheel carries them (``cp311-...-linux_x86_64``) and no
   command compiles anything at run time. Floating point as trec_eval's: no fast-math and no
   contraction into fused multiply-adds (``-ffp-contract=off``), whatever CFLAGS add.
2. Stamp the git commit and dirty flag of the checkout a wheel is built from into the package
   (``audiorepro/_build_info.json``), so that a wheel install's manifests record it
   (``audiorepro.runner.output.manifest``). Deterministic: the file holds the commit and the
   flag only, and is left out when the build does not run in a git checkout (an sdist).
3. The compiled exact rank counts of the retrieval metrics (``metrics/_rankcount.c``, loaded by
   ``audiorepro.metrics._exact_kernels``), built as 1. and with the same flags."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


class StampedBuildPy(build_py):
    def run(self) -> None:
        super().run()
        commit = _git("rev-parse", "HEAD") if (ROOT / ".git").exists() else None
        if not commit:
            return
        status = _git("status", "--porcelain", "--untracked-files=no")
        info = {"commit": commit, "dirty": None if status is None else bool(status)}
        target = Path(self.build_lib) / "audiorepro" / "_build_info.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(info, sort_keys=True) + "\n")


TREC_KERNELS = Extension(
    "audiorepro.core._trec",
    # _trec_prefs.c: the preference measures (-R prefs, qrels_prefs), one library with the
    # kernels it calls; core/native.py loads both.
    sources=["src/audiorepro/core/_trec.c", "src/audiorepro/core/_trec_prefs.c"],
    depends=["src/audiorepro/core/_trec.h"],
    # -g0: no debug information, so the library's bytes do not depend on the build folder.
    extra_compile_args=["-O2", "-g0", "-std=c99", "-fno-fast-math", "-ffp-contract=off"],
    libraries=["m"],
)

RANK_COUNT_KERNELS = Extension(
    "audiorepro.metrics._rankcount",
    sources=["src/audiorepro/metrics/_rankcount.c"],
    # -O3: vectorized counting loops (integer sums of comparisons: no floating-point change),
    # a third less CPU than -O2 on the chunk passes.
    extra_compile_args=["-O3", "-g0", "-std=c99", "-fno-fast-math", "-ffp-contract=off"],
    libraries=["m", "pthread"],
)

setup(cmdclass={"build_py": StampedBuildPy}, ext_modules=[TREC_KERNELS, RANK_COUNT_KERNELS])

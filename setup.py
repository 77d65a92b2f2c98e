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
   ``audiorepro.metrics._exact_kernels``), built as 1. and with the same flags.
4. The native ``trec-eval`` program (``core/_trec_main.c`` with the sources of 1.), linked as
   an executable into the package folder (``audiorepro/core/trec-eval``, exec bit kept in the
   wheel): ``audiorepro trec-eval`` execs it (``cli/entry.py``), so a plain run holds no
   Python interpreter (trec_eval's own peak memory is below CPython's floor on 100 queries).
   Same compiler and flags as 1. (``-g0``: the bytes do not depend on the build folder). Built
   by ``build_ext``, so ``python setup.py build_ext --inplace`` builds it in a checkout too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
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


#: The flags of every compiled part: floating point as trec_eval's (no fast-math, no FMA
#: contraction), no debug information.
C_FLAGS = ["-O2", "-g0", "-std=c99", "-fno-fast-math", "-ffp-contract=off"]
#: The native trec-eval program: its sources (the library's and its main) and its name in
#: the package folder.
TREC_PROGRAM_SOURCES = [
    "src/audiorepro/core/_trec.c",
    "src/audiorepro/core/_trec_prefs.c",
    "src/audiorepro/core/_trec_main.c",
]
TREC_PROGRAM = "trec-eval"


class BuildExtWithProgram(build_ext):
    """The Extensions, then the native trec-eval program beside the kernels' library (in the
    build folder for a wheel, in the source folder with ``--inplace``)."""

    def run(self) -> None:
        super().run()
        library = Path(self.get_ext_fullpath("audiorepro.core._trec"))
        objects = self.compiler.compile(
            TREC_PROGRAM_SOURCES,
            output_dir=self.build_temp,
            extra_postargs=C_FLAGS,
            depends=["src/audiorepro/core/_trec.h"],
        )
        self.compiler.link_executable(
            objects, TREC_PROGRAM, output_dir=str(library.parent), libraries=["m"]
        )

    def get_outputs(self) -> list[str]:
        library = Path(self.get_ext_fullpath("audiorepro.core._trec"))
        return [*super().get_outputs(), str(library.parent / TREC_PROGRAM)]


TREC_KERNELS = Extension(
    "audiorepro.core._trec",
    # _trec_prefs.c: the preference measures (-R prefs, qrels_prefs), one library with the
    # kernels it calls; core/native.py loads both.
    sources=["src/audiorepro/core/_trec.c", "src/audiorepro/core/_trec_prefs.c"],
    depends=["src/audiorepro/core/_trec.h"],
    # -g0: no debug information, so the library's bytes do not depend on the build folder.
    extra_compile_args=C_FLAGS,
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

setup(
    cmdclass={"build_py": StampedBuildPy, "build_ext": BuildExtWithProgram},
    ext_modules=[TREC_KERNELS, RANK_COUNT_KERNELS],
)

"""The command line's entry point (``audiorepro``, ``python -m audiorepro``).

A ``trec-eval`` command line first execs the native trec-eval program
(``audiorepro/core/trec-eval``, built by setup.py from ``core/_trec_main.c``; see
docs/architecture.md, "Compiled kernels"): one process, which holds no Python interpreter
once it runs (CPython's floor alone is above trec_eval's peak memory on 100 queries). So
nothing is imported before the exec but what the interpreter has already loaded (``os``,
``sys``). The program reads what the Python path reads and hands anything else back to it
(``$AUDIOREPRO_PYTHON -m audiorepro trec-eval ...`` with :data:`NATIVE_ENV` ``=0``). Where the
program is missing, not executable or cannot be exec'ed (a ``noexec`` mount), or where
``AUDIOREPRO_TREC_NATIVE=0`` is set, the Python path runs here as before: a plain command line
without importing click (:mod:`.trec_fast`: click with the command group is a third of its
start-up on 100 queries); every other goes through :func:`audiorepro.cli.app.main`, the click
group."""

from __future__ import annotations

import os
import sys

# typing is imported for the type checker only: it costs a megabyte of memory and 7 ms,
# and `audiorepro trec-eval` execs its native program from here (cli/entry.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: ``0`` turns the native trec-eval program off (the Python path answers; tests compare both).
NATIVE_ENV = "AUDIOREPRO_TREC_NATIVE"
#: The sources the program is built from (a checkout rebuilds it when one is newer).
PROGRAM_SOURCES = ("_trec.c", "_trec_main.c", "_trec_prefs.c", "_trec.h")


def native_program() -> str | None:
    """The native trec-eval program's path, or None where there is no runnable one. In a source
    checkout (``src/audiorepro`` beside ``setup.py``) it is built in place first where it is
    missing or older than a source (:func:`audiorepro.core.native.build_in_place`); an
    installed wheel's is used as it is. Plain ``os`` calls: this runs before every trec-eval."""
    core = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "core")
    program = os.path.join(core, "trec-eval")
    root = os.path.dirname(os.path.dirname(os.path.dirname(core)))
    if os.path.basename(os.path.dirname(os.path.dirname(core))) == "src" and os.path.isfile(
        os.path.join(root, "setup.py")
    ):
        sources = [os.path.join(core, name) for name in PROGRAM_SOURCES]
        newest = max(os.stat(s).st_mtime for s in sources if os.path.exists(s))
        built = os.stat(program).st_mtime if os.path.exists(program) else 0.0
        if newest > built:
            from audiorepro.core.native import build_in_place

            build_in_place(program)
    return program if os.access(program, os.X_OK) else None


def exec_native(args: list[str]) -> None:
    """Replace this process by the native program on ``trec-eval``'s arguments ``args``;
    returns only where that cannot be done (then the Python path runs)."""
    if os.environ.get(NATIVE_ENV) == "0":
        return
    program = native_program()
    if program is None:
        return
    os.environ["AUDIOREPRO_PYTHON"] = sys.executable
    try:
        os.execv(program, [program, *args])
    except OSError:  # noexec mount, wrong architecture: the Python path answers
        del os.environ["AUDIOREPRO_PYTHON"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit code. Only a real
    command line (``argv`` None) execs the native trec-eval: a caller's own process is never
    replaced."""
    args = sys.argv[1:] if argv is None else list(argv)
    if argv is None and args[:1] == ["trec-eval"]:
        exec_native(args[1:])
    from audiorepro.cli import trec_fast

    options = trec_fast.parse(args)
    if options is not None:
        return trec_fast.run(options)
    from audiorepro.cli.app import main as click_main

    return click_main(argv)


def group_attribute(name: str) -> Any:
    """``audiorepro.cli.cli`` (the click group), imported when it is asked for."""
    if name != "cli":
        raise AttributeError(f"module 'audiorepro.cli' has no attribute {name!r}")
    from audiorepro.cli.app import cli

    return cli

"""``audiorepro trec-eval`` started without click: the command line's first step (see
:func:`audiorepro.cli.main`). Importing click and the command group costs about 30 ms, a
third of trec_eval's whole run on 100 queries, and trec-eval is called in loops (one per run
file). So a plain ``trec-eval`` command line, the options trec_eval users write, is read here
and handed to :func:`audiorepro.cli.trec_work.trec_eval` with the values click would give;
anything else (``--help``, an unknown or grouped option, a value click would check or refuse,
``-`` for standard input, ``--``) returns None and goes through click, which answers it as
before. Tests hold the two to the same values on every command line of the recorded cases.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

#: Short options that take a value (trec_eval's letters; cli/trec.py declares them for click).
VALUED = {"-m": "measures", "-M": "max_ret", "-l": "level", "-N": "num_docs", "-D": "debug",
          "-R": "rel_format", "-T": "results_format", "-Z": "zscore_file"}  # fmt: skip
FLAGS = {"-q": "per_query", "-c": "complete", "-n": "no_summary", "-J": "judged_only",
         "--tie-bounds": "tie_bounds"}  # fmt: skip
#: Integers as click's INT reads them where int() and these agree (others go through click).
_INTEGER = re.compile(r"-?[0-9]{1,18}")


def defaults() -> dict[str, Any]:
    """The values click gives an option not on the command line (cli/trec.py)."""
    return {"per_query": False, "measures": (), "complete": False, "max_ret": None,
            "level": 1, "no_summary": False, "num_docs": 0, "judged_only": False,
            "debug": None, "rel_format": "qrels", "results_format": "trec_results",
            "zscore_file": None, "tie_bounds": False}  # fmt: skip


def _value(name: str, text: str) -> Any:
    """The option's value as click converts it, or None where click should judge it."""
    if name in ("max_ret", "level", "num_docs"):
        if not _INTEGER.fullmatch(text):
            return None
        number = int(text)
        return None if name == "max_ret" and number < 1 else number  # IntRange(min=1)
    if not text:
        return None
    return Path(text) if name == "zscore_file" else text


def parse(argv: list[str]) -> dict[str, Any] | None:
    """``trec-eval``'s keyword arguments from ``argv`` (``trec-eval`` first), or None.

    >>> parse(["trec-eval", "-q", "-mmap", "-m", "P.5", "-l2", "q", "r"])["measures"]
    ('map', 'P.5')
    >>> parse(["trec-eval", "-qc", "q", "r"]) is None  # grouped flags: click reads them
    True
    """
    if not argv or argv[0] != "trec-eval":
        return None
    options, files, measures = defaults(), [], []
    args = iter(argv[1:])
    for arg in args:
        if arg in FLAGS:
            options[FLAGS[arg]] = True
            continue
        if arg[:2] in VALUED and not arg.startswith("--"):
            text = arg[2:] or next(args, "-")
            if text.startswith("-") and len(arg) == 2:
                return None  # a value like an option: as click reads it
            value = _value(VALUED[arg[:2]], text)
            if value is None:
                return None
            if arg[:2] == "-m":
                measures.append(value)
            else:
                options[VALUED[arg[:2]]] = value
            continue
        if arg.startswith("-") or not arg:  # -h, --help, unknown, grouped, "-", "--"
            return None
        files.append(arg)
    if len(files) != 2:
        return None
    options["measures"] = tuple(measures)
    options["qrels"], options["run"] = Path(files[0]), Path(files[1])
    return options


def run(options: dict[str, Any]) -> int:
    """The command, with the entry point's handling of errors (:func:`audiorepro.cli.app.main`:
    a user error is one line and exit 2)."""
    from audiorepro.core.errors import EXIT_BAD_INPUT, EXIT_OK, WRITE_ERRNOS, UserError
    from audiorepro.core.progress import quiet_library_bars

    quiet_library_bars()
    try:
        from audiorepro.cli.trec_work import trec_eval

        trec_eval(**options)
    except UserError as exc:
        sys.stderr.write(f"audiorepro: error: {exc}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # click's Abort: a new line, then the entry point's line
        sys.stderr.write("\naudiorepro: aborted\n")
        return EXIT_BAD_INPUT
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(
            f"audiorepro: error: {where}cannot be accessed: {WRITE_ERRNOS[exc.errno]}\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_OK

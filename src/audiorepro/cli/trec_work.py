"""The work of ``audiorepro trec-eval`` (its options are :mod:`audiorepro.cli.trec`, which
imports this module when the command runs): trec_eval's evaluation of a TREC run, its output
lines, and tie bounds beyond it (the measures are in :mod:`audiorepro.metrics.trec`)."""

from __future__ import annotations

import errno
import gc
import math
import os
import sys
from pathlib import Path
from typing import Any

from audiorepro.core.errors import WRITE_ERRNOS, UserError
from audiorepro.formats.c_numbers import c_atof, c_atol
from audiorepro.metrics.trec_measures import (
    Chosen,
    Evaluation,
    Order,
    check_judgements,
    parse_measures,
)

# Only what the numpy-free path needs is imported above (no numpy: on 100 queries its import
# costs a third of trec_eval's whole run); -Z, the other judgement formats and files the light
# reader leaves (formats/trec_light.py) import the numpy path where they need it.

#: Evaluate ``-R qrels`` without numpy where the files and options allow (tests turn it off to
#: compare the two paths).
LIGHT = True


def c_float(value: float) -> str:
    """C's ``%6.4f``, NaN included (``nan``, or ``-nan`` when its sign bit is set).

    >>> c_float(0.25), c_float(float("nan")), c_float(-float("nan"))
    ('0.2500', '   nan', '  -nan')
    """
    if math.isnan(value):
        return ("-nan" if math.copysign(1.0, value) < 0 else "nan").rjust(6)
    return f"{value:6.4f}"


def _cell(value: float, count: bool, z: bool) -> str:
    return str(int(value)) if count and not z else c_float(value)


def _row(name: str, qid: str, cells: list[str], z: bool) -> str:
    """trec_eval's line: (``Z`` under ``-Z``) the name left-aligned in 22 columns, a tab, the
    qid, a tab, the value; with tie bounds two more columns (three for nDCG: its
    tie-averaged value last)."""
    return f"{'Z' if z else ''}{name:<22}\t{qid}\t" + "\t".join(cells)


def _columns(evaluations: list[Evaluation], name: str) -> list[Evaluation]:
    """The evaluations printed for ``name``: the tie-averaged one (4th) only for nDCG."""
    return evaluations if name.startswith("ndcg") else evaluations[:3]


def _query_lines(evaluations: list[Evaluation], z: bool) -> list[str]:
    main = evaluations[0]
    lines: list[str] = []
    skip = {"num_q", "gm_map", "gm_bpref", "runid"}
    for i, qid in enumerate(main.qids):
        for j, name in enumerate(main.names):
            owner = main.measure_of[j]
            if owner in skip:
                continue
            if owner == "relstring":
                lines.append(f"{name:<22}\t{qid}\t'{main.relstrings[i]}'")
                continue
            count = name in main.counts
            cells = [_cell(e.values[i, j], count, z) for e in _columns(evaluations, name)]
            lines.append(_row(name, qid, cells, z))
    return lines


def trec_lines(
    evaluations: list[Evaluation], *, per_query: bool, summary: bool = True, z: bool = False
) -> list[str]:
    """The output lines: per query (``-q``) in qid order, then ``all`` (unless ``-n``).
    ``evaluations`` is the trec order alone or followed by the pessimistic and optimistic
    bounds and the tie-averaged order (printed for nDCG only)."""
    main = evaluations[0]
    lines = _query_lines(evaluations, z) if per_query else []
    if not summary:
        return lines
    for j, name in enumerate(main.names):
        owner = main.measure_of[j]
        if owner == "relstring":
            continue
        if owner == "runid":
            lines.append(f"{'runid':<22}\tall\t{main.run_id}")
            continue
        count = name in main.counts
        cells = [_cell(e.summary[j], count, z) for e in _columns(evaluations, name)]
        lines.append(_row(name, "all", cells, z))
    return lines


def _zscores(path: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """trec_eval's ``-Z`` file: ``qid measure mean sd`` lines (numbers read by ``atof``).

    Checked as every other input is before it is opened: a FIFO, a folder or a device is
    refused (a FIFO would block), and so is a file over ``core.io.TEXT_MAX_BYTES`` (64 MiB; one
    line per query and measure is a few hundred kB for real ones; trec_eval also reads the
    whole file into memory)."""
    from audiorepro.core.io import read_text

    try:
        text = read_text(path, what="a -Z file (qid measure mean sd lines)")
    except OSError as exc:
        raise UserError(f"cannot be read ({exc.strerror}); expected qid measure mean sd lines",
                        source=path) from None  # fmt: skip
    table: dict[tuple[str, str], tuple[float, float]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 4:
            raise UserError(
                f"line {number} has {len(fields)} fields; expected 4 (qid measure mean sd)",
                source=path,
            )
        table[(fields[0], fields[1])] = (c_atof(fields[2]), c_atof(fields[3]))
    return table


def trec_eval(
    qrels: Path,
    run: Path,
    per_query: bool,
    measures: tuple[str, ...],
    complete: bool,
    max_ret: int | None,
    level: int,
    no_summary: bool,
    num_docs: int,
    judged_only: bool,
    debug: str | None,
    rel_format: str,
    results_format: str,
    zscore_file: Path | None,
    tie_bounds: bool,
) -> None:
    """Evaluate a TREC RUN file (``-``: standard input) against QRELS, printing trec_eval's
    lines. -D's debugging output is not printed (its QID filter is honoured)."""
    if results_format != "trec_results":
        raise UserError(
            f"run format {results_format!r} is not read here; expected trec_results", key="-T"
        )
    only = None
    if debug is not None:
        c_atol(debug)
        only = debug.partition(".")[2] or None
    chosen = parse_measures(list(measures))
    check_judgements(chosen, rel_format)
    zscores = _zscores(zscore_file) if zscore_file is not None else None
    if rel_format != "qrels":
        if tie_bounds:
            raise UserError(f"tie bounds are not defined for -R {rel_format} measures; "
                            "expected --tie-bounds with -R qrels", key="--tie-bounds")  # fmt: skip
        other = _other_format(qrels, run, rel_format, chosen, level, max_ret, complete,
                              judged_only, only, zscores)  # fmt: skip
        lines = trec_lines([other], per_query=per_query, summary=not no_summary,
                           z=zscores is not None)  # fmt: skip
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
        return
    bounded: tuple[Order, ...] = ("trec", "pessimistic", "optimistic", "average")
    orders = bounded if tie_bounds else bounded[:1]
    common: dict[str, Any] = {
        "measures": chosen, "level": level, "max_ret": max_ret, "complete": complete,
        "judged_only": judged_only, "num_docs": num_docs, "only_query": only,
    }  # fmt: skip
    evaluations = None
    if LIGHT and zscores is None and str(run) != "-":  # standard input cannot be read twice
        evaluations = _light_evaluations(qrels, run, orders, common)
    if evaluations is None:
        from audiorepro.formats.trec import read_table
        from audiorepro.metrics.trec import evaluate

        judged, ranked = read_table(qrels, run=False), read_table(run, run=True)
        evaluations = [
            evaluate(judged, ranked, order=order, zscores=zscores, **common) for order in orders
        ]
    lines = trec_lines(
        evaluations, per_query=per_query, summary=not no_summary, z=zscores is not None
    )
    if tie_bounds and lines:
        # The extra columns are not trec_eval's: a header says which is which.
        averaged = any(line.startswith("ndcg") for line in lines)
        header = f"{'measure':<22}\tquery\ttrec\tpessimistic\toptimistic"
        lines.insert(0, header + ("\ttie-averaged (ndcg)" if averaged else ""))
    if lines:
        _print_out("\n".join(lines) + "\n")


def _print_out(text: str) -> None:
    """Write ``text`` to standard output, as the native program does: one that cannot be
    written (closed, ``>&-``; a pipe whose reader has gone, ``| head -1``) is one line
    naming why, exit 2, never a traceback. The descriptor is then pointed at /dev/null, so
    that the interpreter's own flush at exit does not fail a second time."""
    stream = sys.stdout
    try:
        if stream is None:  # fd 1 closed when the interpreter started
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        stream.flush()
        try:
            fd = stream.fileno()
        except (AttributeError, ValueError, OSError):  # a caller's in-memory stream
            fd = -1
        if fd < 0:
            stream.write(text)
            stream.flush()
        else:  # os.write: CPython's buffered writer drops the rest of a partial write to a
            # pipe whose reader has gone and exits 0; the loop meets the EPIPE every time
            data = memoryview(text.encode(stream.encoding, stream.errors or "strict"))
            while data:
                data = data[os.write(fd, data) :]
    except OSError as exc:
        if exc.errno in WRITE_ERRNOS:
            raise  # the entry point's message for a full or read-only device
        if stream is not None and exc.errno == errno.EPIPE:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, stream.fileno())
            os.close(null)
        raise UserError(f"cannot be accessed: {os.strerror(exc.errno or errno.EIO)}") from None


def _other_format(
    qrels: Path,
    run: Path,
    rel_format: str,
    chosen: dict[str, Chosen],
    level: int,
    max_ret: int | None,
    complete: bool,
    judged_only: bool,
    only: str | None,
    zscores: dict[tuple[str, str], tuple[float, float]] | None,
) -> Evaluation:
    """The evaluation under ``-R prefs``, ``qrels_prefs`` or ``qrels_jg``."""
    # These readers make a few Python objects per judgement (hundreds of thousands, none in a
    # reference cycle): the cyclic collector's passes over them cost a tenth of the run, and
    # collect nothing. Reference counting still frees everything.
    gc.disable()
    try:
        return _other_evaluation(qrels, run, rel_format, chosen, level, max_ret, complete,
                                 judged_only, only, zscores)  # fmt: skip
    finally:
        gc.enable()


def _other_evaluation(
    qrels: Path,
    run: Path,
    rel_format: str,
    chosen: dict[str, Chosen],
    level: int,
    max_ret: int | None,
    complete: bool,
    judged_only: bool,
    only: str | None,
    zscores: dict[tuple[str, str], tuple[float, float]] | None,
) -> Evaluation:
    if rel_format == "qrels_jg" and LIGHT and zscores is None and str(run) != "-":
        light = _light_groups(qrels, run, measures=chosen, level=level, max_ret=max_ret,
                              complete=complete, judged_only=judged_only,
                              only_query=only)  # fmt: skip
        if light is not None:
            return light
    if rel_format != "qrels_jg" and LIGHT and zscores is None and str(run) != "-":
        light = _light_prefs(qrels, run, qrels_form=rel_format == "qrels_prefs",
                             measures=chosen, max_ret=max_ret, complete=complete,
                             only_query=only)  # fmt: skip
        if light is not None:
            return light
    from audiorepro.formats.trec import read_table
    from audiorepro.formats.trec_prefs import read_prefs, read_qrels_jg
    from audiorepro.metrics.trec_groups import evaluate_groups
    from audiorepro.metrics.trec_prefs import evaluate_prefs

    if rel_format == "qrels_jg":
        groups = read_qrels_jg(qrels, number=c_atol)
        return evaluate_groups(groups, read_table(run, run=True), measures=chosen, level=level,
                               max_ret=max_ret, complete=complete, judged_only=judged_only,
                               only_query=only, zscores=zscores)  # fmt: skip
    prefs = read_prefs(qrels, qrels_form=rel_format == "qrels_prefs", number=c_atof)
    ranked = read_table(run, run=True)
    return evaluate_prefs(prefs, ranked, measures=chosen, max_ret=max_ret, complete=complete,
                          only_query=only, zscores=zscores)  # fmt: skip


def _light_prefs(qrels: Path, run: Path, **options: Any) -> Evaluation | None:
    """``-R prefs`` and ``qrels_prefs`` by the compiled preference measures (the judgements
    read by the C), or None (as :func:`_light_evaluations`)."""
    from audiorepro.formats.trec_light import Unusual, read_light
    from audiorepro.metrics.trec_light import evaluate_prefs_light

    try:
        ranked = read_light(run, run=True)
    except Unusual:
        return None
    return evaluate_prefs_light(str(qrels), ranked, **options)


def _light_evaluations(
    qrels: Path, run: Path, orders: tuple[Order, ...], common: dict[str, Any]
) -> list[Evaluation] | None:
    """The evaluations by the numpy-free path (:mod:`audiorepro.metrics.trec_light`), or None
    where a file needs the numpy path's reader (it refuses it with its message, or reads it)."""
    from audiorepro.formats.trec_light import Unusual, read_light
    from audiorepro.metrics.trec_light import evaluate_light

    try:
        judged, ranked = read_light(qrels, run=False), read_light(run, run=True)
    except Unusual:
        return None
    return [evaluate_light(judged, ranked, order=order, **common) for order in orders]


def _light_groups(qrels: Path, run: Path, **options: Any) -> Evaluation | None:
    """``-R qrels_jg`` by the numpy-free path, or None (as :func:`_light_evaluations`)."""
    from audiorepro.formats.trec_light import Unusual, read_light
    from audiorepro.metrics.trec_light import evaluate_groups_light

    try:
        groups, ranked = read_light(qrels, run=False, groups_of=2), read_light(run, run=True)
    except Unusual:
        return None
    return evaluate_groups_light(groups, ranked, **options)

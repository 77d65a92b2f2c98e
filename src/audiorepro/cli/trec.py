"""``audiorepro trec-eval``: its options and help, with click alone (``trec-eval --help``
loads no numeric stack); the evaluation and its output lines are
:mod:`audiorepro.cli.trec_work`, imported when the command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from audiorepro.cli.app import cli


@cli.command("trec-eval")
@click.argument("qrels", type=click.Path(path_type=Path))
@click.argument("run", type=click.Path(path_type=Path, allow_dash=True))
@click.option("-q", "per_query", is_flag=True, help="Also print every query's values.")
@click.option(
    "-m",
    "measures",
    multiple=True,
    help="Measure: NAME, NAME.params (cutoffs, level=gain pairs), official (default), "
    "all_trec or set; a measure takes the first parameters given for it.",
)
@click.option(
    "-c", "complete", is_flag=True, help="Average over every query of the qrels (absent: 0)."
)
@click.option(
    "-M", "max_ret", type=click.IntRange(min=1), default=None, help="Documents kept per query."
)
@click.option(
    "-l", "level", type=int, default=1, show_default=True,
    help="Lowest judged level that counts as relevant for binary measures.",
)  # fmt: skip
@click.option("-n", "no_summary", is_flag=True, help="Print no 'all' lines.")
@click.option("-N", "num_docs", type=int, default=0, help="Documents in the collection (utility).")
@click.option("-J", "judged_only", is_flag=True, help="Drop retrieved documents not judged.")
@click.option("-D", "debug", default=None, help="LEVEL[.QID]: evaluate query QID alone.")
@click.option(
    "-R", "rel_format", default="qrels", show_default=True,
    help="Judgement format: qrels, prefs, qrels_prefs (preference measures) or qrels_jg "
    "(judgement groups).",
)  # fmt: skip
@click.option("-T", "results_format", default="trec_results", help="Run format: trec_results.")
@click.option("-Z", "zscore_file", type=click.Path(path_type=Path), default=None,
              help="Print z-scores against this 'qid measure mean sd' file.")  # fmt: skip
@click.option(
    "--tie-bounds",
    is_flag=True,
    help="Add two columns: the pessimistic and optimistic value over all orders of ties "
    "(nDCG: a third, its tie-averaged value).",
)
def trec_eval_command(**options: Any) -> None:
    """Evaluate a TREC RUN file (``-``: standard input) against QRELS, printing trec_eval's
    lines. -D's debugging output is not printed (its QID filter is honoured)."""
    from audiorepro.cli.trec_work import trec_eval

    trec_eval(**options)

"""``audiorepro trec-eval``: trec_eval's evaluation of a TREC run, its output lines, and tie
bounds beyond it (argument parsing and printing only; the measures are in
:mod:`audiorepro.metrics.trec`)."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.commands import cli
from audiorepro.formats.trec import load_qrels, load_run
from audiorepro.metrics.trec import MEASURES, Evaluation, Order, evaluate, parse_measures


def _value(value: float, count: bool) -> str:
    return f"{int(value)}" if count else f"{value:6.4f}"


def _line(name: str, qid: str, values: list[float], count: bool) -> str:
    """trec_eval's line: the name left-aligned in 22 columns, a tab, the qid, a tab, the value
    (``%6.4f``, or an integer for a count); with tie bounds two more columns follow (three
    for nDCG: its tie-averaged value last)."""
    return f"{name:<22}\t{qid}\t" + "\t".join(_value(v, count) for v in values)


def _names(values: dict[str, float]) -> list[str]:
    """trec_eval's order: the measures' table order, cutoffs ascending (as computed)."""
    order = {m.name: i for i, m in enumerate(MEASURES)}
    return sorted(values, key=lambda n: order[n if n in order else n.rsplit("_", 1)[0]])


def _columns(evaluations: list[Evaluation], name: str) -> list[Evaluation]:
    """The evaluations printed for ``name``: the tie-averaged one (4th) only for nDCG."""
    return evaluations if name.startswith("ndcg") else evaluations[:3]


def trec_lines(evaluations: list[Evaluation], *, per_query: bool, runid: bool) -> list[str]:
    """The output lines: per query (``-q``) in qid order, then ``all``. ``evaluations`` is the
    trec order alone or followed by the pessimistic and optimistic bounds and the
    tie-averaged order (printed for nDCG only)."""
    main = evaluations[0]
    lines: list[str] = []
    if per_query:
        for qid, values in main.queries.items():
            for name in _names(values):
                row = [e.queries[qid][name] for e in _columns(evaluations, name)]
                lines.append(_line(name, qid, row, name in main.counts))
    names = _names(main.all)
    if runid:
        lines.append(_line("runid", "all", [], False) + main.run_id)
    for name in names:
        row = [e.all[name] for e in _columns(evaluations, name)]
        lines.append(_line(name, "all", row, name in main.counts))
    return lines


@cli.command("trec-eval")
@click.argument("qrels", type=click.Path(path_type=Path))
@click.argument("run", type=click.Path(path_type=Path))
@click.option("-q", "per_query", is_flag=True, help="Also print every query's values.")
@click.option(
    "-m",
    "measures",
    multiple=True,
    help="Measure to print: NAME, NAME.k1,k2 (cutoffs), official (default) or all_trec.",
)
@click.option(
    "-c", "complete", is_flag=True, help="Average over every query of the qrels (absent: 0)."
)
@click.option(
    "-M", "max_ret", type=click.IntRange(min=1), default=None, help="Documents kept per query."
)
@click.option(
    "-l",
    "level",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Lowest judged level that counts as relevant for binary measures.",
)
@click.option(
    "--tie-bounds",
    is_flag=True,
    help="Add two columns: the pessimistic and optimistic value over all orders of ties "
    "(nDCG: a third, its tie-averaged value).",
)
def trec_eval_command(
    qrels: Path,
    run: Path,
    per_query: bool,
    measures: tuple[str, ...],
    complete: bool,
    max_ret: int | None,
    level: int,
    tie_bounds: bool,
) -> None:
    """Evaluate a TREC RUN file against QRELS, printing trec_eval's lines."""
    chosen = parse_measures(list(measures))
    judged, ranked = load_qrels(qrels), load_run(run)
    bounded: tuple[Order, ...] = ("trec", "pessimistic", "optimistic", "average")
    orders = bounded if tie_bounds else bounded[:1]
    evaluations = [
        evaluate(
            judged,
            ranked,
            measures=chosen,
            level=level,
            max_ret=max_ret,
            complete=complete,
            order=order,
        )
        for order in orders
    ]
    lines = trec_lines(evaluations, per_query=per_query, runid="runid" in chosen)
    if tie_bounds:
        # The extra columns are not trec_eval's: a header says which is which.
        averaged = any(line.startswith("ndcg") for line in lines)
        header = f"{'measure':<22}\tquery\ttrec\tpessimistic\toptimistic"
        lines.insert(0, header + ("\ttie-averaged (ndcg)" if averaged else ""))
    click.echo("\n".join(lines))

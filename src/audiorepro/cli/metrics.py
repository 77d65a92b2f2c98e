"""``metrics``, ``parity``, ``explain`` and ``probe-metrics``: the numbers of a dump or of a
probe's predictions, on the command line (argument parsing and printing; the definitions are
in :mod:`audiorepro.metrics`, imported when a command runs, never for its ``--help``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import BUILT_IN_PROFILES, EMPTY_POLICIES, TIE_POLICIES, json_option

if TYPE_CHECKING:
    from collections.abc import Iterable

    from audiorepro.formats.dump import EmptyPolicy
    from audiorepro.metrics.retrieval import MetricsReport, TiePolicy

TIE_CHOICE = click.Choice(TIE_POLICIES)


def cutoffs_option(help_text: str) -> Any:
    """The ``--k K[,K...]`` option of metrics, parity and explain (checked by parse_cutoffs)."""
    return click.option(
        "--k", "cutoffs", default=None, callback=parse_cutoffs, metavar="K[,K...]", help=help_text
    )


def empty_queries_option() -> Any:
    """``--empty-queries skip|zero`` of metrics and parity: accept queries without a relevant
    item (refused without it) and say how they enter the means."""
    return click.option(
        "--empty-queries",
        type=click.Choice(EMPTY_POLICIES),
        default=None,
        help="Accept queries without a relevant item (a clip without a text, a text relevant "
        "to no clip; refused without this option): skip leaves them out of every mean "
        "(trec_eval), zero counts them as 0 (scikit-learn); mean_rank and median_rank are "
        "always over the queries with a relevant item. Recorded in the JSON.",
    )


def _fmt(value: float | None) -> str:
    if value is None:
        return "undefined"
    if float(value).is_integer() and abs(value) >= 1:
        return f"{value:.1f}"
    return f"{value:.6f}"


def _metrics_table(report: MetricsReport) -> str:
    from audiorepro.metrics.retrieval import metric_by_name

    cpc = report["captions_per_clip"]
    per = f"{cpc} per clip" if cpc is not None else "varying per clip"
    # A relevance dump (format version 2) holds texts such as class prompts, not captions.
    texts = "texts" if report.get("format_version", 1) != 1 else "captions"
    names = list(report["metrics"]["t2a"])
    width = max(14, *(len(n) + 3 for n in names))  # 14 for 1.0's names, as always
    lines = [
        f"{report['source']}: {report['n_clips']} clips, {report['n_captions']} {texts} "
        f"({per}); tie policy {report['tie_policy']}",
        f"{'metric':<{width}}{'t2a':>12}{'a2t':>12}",
    ]
    for name in names:
        arrow = "^" if metric_by_name(name).higher_is_better else "v"
        t2a, a2t = report["metrics"]["t2a"][name], report["metrics"]["a2t"][name]
        lines.append(f"{name + ' ' + arrow:<{width}}{_fmt(t2a):>12}{_fmt(a2t):>12}")
    if "empty_queries" in report:
        empty = report["empty_queries"]
        lines.append(
            f"queries without a relevant item: t2a {empty['t2a']}, a2t {empty['a2t']}; "
            f"policy {empty['policy']}"
        )
    for direction, ties in report["ties"].items():
        if ties["queries_affected"]:
            # The report keeps [optimistic, pessimistic]; an interval reads low then high.
            bounds = ", ".join(
                f"{m} in [{_fmt(min(ends))}, {_fmt(max(ends))}]"
                for m, ends in ties["bounds"].items()
            )
            lines.append(
                f"ties {direction}: {ties['queries_affected']} queries affected; "
                f"interval over every tie order [low, high]: {bounds or 'no metric changes'}"
            )
    return "\n".join(lines)


def profile_help(profiles: Iterable[tuple[str, str]] | None = None) -> str:
    """``metrics --profile``'s help: every registered profile (or each of ``profiles``, name
    and hint), each with its hint."""
    if profiles is None:
        from audiorepro.metrics.profiles import registered_profiles

        profiles = [(p.name, p.hint) for p in registered_profiles()]
    names = [f"{name} ({hint})" if hint else name for name, hint in profiles]
    listed = ", ".join(names[:-1]) + f", or {names[-1]}" if len(names) > 1 else names[0]
    return f"Whose definitions and names: {listed}."


def parse_cutoffs(ctx: Any, param: Any, value: str | None) -> tuple[int, ...] | None:
    """``--k 1,5,10,50`` -> (1, 5, 10, 50): ints >= 1, unique, ascending (else exit 2)."""
    if value is None:
        return None
    from audiorepro.metrics.retrieval import cutoff_problem

    try:
        cutoffs = [int(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"expected ints >= 1 separated by commas (e.g. 1,5,10,50), got {value!r}"
        ) from None
    problem = cutoff_problem(cutoffs)
    if problem is not None:
        raise click.BadParameter(f"{problem} (e.g. 1,5,10,50)")
    return tuple(cutoffs)


@cli.command()
@click.argument("dump", type=click.Path(path_type=Path))
@click.option(
    "--tie-policy",
    type=TIE_CHOICE,
    default="pessimistic",
    show_default=True,
    help="Where relevant items go among tied scores.",
)
@json_option("Write the audiorepro.metrics/1 JSON here.")
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=1),
    default=None,
    help="Captions per similarity chunk (memory bound); results never depend on it.",
)
@click.option(
    "--profile",
    default="canonical",
    show_default=True,
    help=profile_help((name, hint) for name, _, hint in BUILT_IN_PROFILES),
)
@cutoffs_option(
    "Cutoffs, ascending (e.g. 1,5,10,50): report r@k, recall@k, precision@k, map@k, "
    "mrr@k, ndcg@k at each, and map, mrr, ndcg, r_precision, mean_rank, median_rank "
    "(definitions 1.1). Without it: the 1.0 report."
)
@empty_queries_option()
def metrics(
    dump: Path,
    tie_policy: TiePolicy,
    json_out: Path | None,
    chunk_rows: int | None,
    profile: str,
    cutoffs: tuple[int, ...] | None,
    empty_queries: EmptyPolicy | None,
) -> None:
    """Every retrieval metric of DUMP, both directions, with tie bounds (canonical), or
    under a peer's own definitions and names (--profile)."""
    from audiorepro.core.io import write_json
    from audiorepro.formats.dump import load_dump
    from audiorepro.metrics.profile_registry import is_canonical
    from audiorepro.metrics.profiles import compute_profile, profile_names, registered_profiles
    from audiorepro.metrics.retrieval import compute_retrieval, metrics_report

    names = profile_names()
    if profile not in names:
        raise click.BadParameter(
            f"{profile!r} is not one of {', '.join(names)}", param_hint="'--profile'"
        )
    with_cutoffs = [p.name for p in registered_profiles() if p.cutoffs]
    if cutoffs is not None and profile not in with_cutoffs:
        raise click.BadParameter(
            f"applies to the {' and '.join(with_cutoffs)} profiles; {profile}'s cutoffs "
            "are its peer's own",
            param_hint="'--k'",
        )
    if empty_queries is not None and not is_canonical(profile):
        raise click.BadParameter(
            f"applies to the canonical profile; {profile}'s peer refuses such queries",
            param_hint="'--empty-queries'",
        )
    d = load_dump(dump, empty_queries=empty_queries)
    result = compute_retrieval(d, chunk_rows=chunk_rows)
    if not is_canonical(profile):
        prof = compute_profile(d, profile, result=result, cutoffs=cutoffs)
        click.echo(f"{d.source}: profile {profile}")
        for name, value in prof.metrics.items():
            click.echo(f"{name:<24}{_fmt(value):>12}")
        for note in prof.notes:
            click.echo(f"note: {note}")
        if json_out is not None:
            write_json(json_out, prof.to_json(d))
        return
    report = metrics_report(d, result, tie_policy=tie_policy, cutoffs=cutoffs)
    click.echo(_metrics_table(report))
    if json_out is not None:
        write_json(json_out, report)


@cli.command()
@click.argument("dumps", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--tolerance", type=click.FloatRange(min=0.0), default=1e-9, show_default=True)
@click.option("--tie-policy", type=TIE_CHOICE, default="pessimistic", show_default=True)
@json_option("Write the metric_parity JSON here.")
@cutoffs_option("Cutoffs, ascending: check definitions 1.1's metrics at them (as metrics --k).")
@empty_queries_option()
def parity(
    dumps: tuple[Path, ...],
    tolerance: float,
    tie_policy: TiePolicy,
    json_out: Path | None,
    cutoffs: tuple[int, ...] | None,
    empty_queries: EmptyPolicy | None,
) -> None:
    """Check the fast harness against the independent reference on each DUMP.

    Exit 0 when every metric agrees within the tolerance, 1 otherwise.
    """
    from audiorepro.checks.parity import parity_report
    from audiorepro.core.errors import EXIT_CHECK_FAILED
    from audiorepro.core.io import write_json
    from audiorepro.formats.dump import load_dump

    loaded = [load_dump(p, empty_queries=empty_queries) for p in dumps]
    report = parity_report(loaded, tolerance=tolerance, tie_policy=tie_policy, cutoffs=cutoffs)
    block = report["metric_parity"]
    for cell in block["cells"]:
        status = "PASS" if cell["passed"] else "FAIL"
        click.echo(
            f"{status}  {cell['source']}: {len(cell['rows'])} metrics, "
            f"worst |harness - reference| = {cell['worst_abs_delta']:.3g}"
        )
    verdict = "PASS" if block["passed"] else "FAIL"
    click.echo(
        f"{verdict}  {block['n_cells']} dumps, tolerance {block['tolerance']:g}, "
        f"worst delta {block['worst_abs_delta']:.3g}"
    )
    if json_out is not None:
        write_json(json_out, report)
    if not block["passed"]:
        raise SystemExit(EXIT_CHECK_FAILED)


@cli.command("explain")
@click.argument("dump", type=click.Path(path_type=Path))
@json_option("Write the explanation as JSON here.")
@cutoffs_option("Cutoffs, ascending: explain definitions 1.1's measures at them (as metrics --k).")
@click.option(
    "--trials",
    "trials",
    type=click.Path(path_type=Path),
    default=None,
    help="A speaker-verification trial list (CSV, VoxCeleb or NIST key): every EER, minDCF, "
    "actDCF, Cllr and minCllr definition of DUMP's clip embeddings over it instead.",
)
def explain_cmd(
    dump: Path, json_out: Path | None, cutoffs: tuple[int, ...] | None, trials: Path | None
) -> None:
    """Each metric of DUMP under every profile side by side, and why each differs."""
    from audiorepro.core.errors import UserError
    from audiorepro.core.io import write_json

    if trials is not None:
        if cutoffs is not None:
            raise UserError("applies to retrieval dumps; expected --k or --trials, not both",
                            key="--k")  # fmt: skip
        from audiorepro.checks.explain_verification import explain_trials, explain_trials_text

        by_definition = explain_trials(dump, trials)
        click.echo(explain_trials_text(by_definition))
        if json_out is not None:
            write_json(json_out, by_definition.values)
        return
    from audiorepro.checks.explain import explain, explain_text
    from audiorepro.formats.dump import load_dump

    d = load_dump(dump)
    report = explain(d, cutoffs=cutoffs)
    click.echo(explain_text(report))
    if json_out is not None:
        write_json(json_out, report)


@cli.command("probe-metrics")
@click.argument("predictions", type=click.Path(path_type=Path))
@json_option("Write the audiorepro.probe/1 JSON here.")
def probe_metrics(predictions: Path, json_out: Path | None) -> None:
    """Every probe metric that PREDICTIONS (.npz) supports: regression, classification, events."""
    from audiorepro.core.io import json_dumps, write_json
    from audiorepro.metrics.probe import probe_report_file

    report = probe_report_file(predictions)
    if json_out is not None:
        write_json(json_out, report)
    else:
        click.echo(json_dumps(report), nl=False)

"""The ``audiorepro`` command line.

Exit codes: 0 success, 1 a check failed, 2 bad input or usage (one line on stderr, no
traceback).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from audiorepro import __version__
from audiorepro.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, UserError

TIE_CHOICE = click.Choice(["pessimistic", "optimistic"])


def json_option(help_text: str) -> Any:
    """The ``--json OUT`` option every command shares (written atomically, sorted keys)."""
    return click.option(
        "--json", "json_out", type=click.Path(path_type=Path), default=None, help=help_text
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="audiorepro")
def cli() -> None:
    """Re-derive published audio-embedding benchmark numbers and prove they still hold."""


def _fmt(value: float | None) -> str:
    if value is None:
        return "undefined"
    if float(value).is_integer() and abs(value) >= 1:
        return f"{value:.1f}"
    return f"{value:.6f}"


def _metrics_table(report: dict[str, Any]) -> str:
    from audiorepro.metrics.retrieval import METRICS

    cpc = report["captions_per_clip"]
    per = f"{cpc} per clip" if cpc is not None else "varying per clip"
    lines = [
        f"{report['source']}: {report['n_clips']} clips, {report['n_captions']} captions "
        f"({per}); tie policy {report['tie_policy']}",
        f"{'metric':<14}{'t2a':>12}{'a2t':>12}",
    ]
    for name, metric in METRICS.items():
        arrow = "^" if metric.higher_is_better else "v"
        t2a, a2t = report["metrics"]["t2a"][name], report["metrics"]["a2t"][name]
        lines.append(f"{name + ' ' + arrow:<14}{_fmt(t2a):>12}{_fmt(a2t):>12}")
    for direction, ties in report["ties"].items():
        if ties["queries_affected"]:
            bounds = ", ".join(
                f"{m} in [{_fmt(lo)}, {_fmt(hi)}]" for m, (lo, hi) in ties["bounds"].items()
            )
            lines.append(
                f"ties {direction}: {ties['queries_affected']} queries affected; "
                f"optimistic/pessimistic: {bounds or 'no metric changes'}"
            )
    return "\n".join(lines)


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
    help="Whose definitions and names: canonical, trec or dcase.",
)
def metrics(
    dump: Path, tie_policy: str, json_out: Path | None, chunk_rows: int | None, profile: str
) -> None:
    """Every retrieval metric of DUMP, both directions, with tie bounds (canonical), or
    under a peer's own definitions and names (--profile)."""
    from audiorepro.dump import load_dump
    from audiorepro.io import write_json
    from audiorepro.metrics.profiles import PROFILES, compute_profile
    from audiorepro.metrics.retrieval import compute_retrieval, metrics_report

    if profile not in PROFILES:
        raise click.BadParameter(
            f"{profile!r} is not one of {', '.join(PROFILES)}", param_hint="'--profile'"
        )
    d = load_dump(dump)
    result = compute_retrieval(d, chunk_rows=chunk_rows)
    if profile != "canonical":
        prof = compute_profile(d, profile, result=result)
        click.echo(f"{d.source}: profile {profile}")
        for name, value in prof.metrics.items():
            click.echo(f"{name:<24}{_fmt(value):>12}")
        for note in prof.notes:
            click.echo(f"note: {note}")
        if json_out is not None:
            write_json(json_out, prof.to_json(d))
        return
    report = metrics_report(d, result, tie_policy=tie_policy)  # type: ignore[arg-type]
    click.echo(_metrics_table(report))
    if json_out is not None:
        write_json(json_out, report)


@cli.command()
@click.argument("dumps", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--tolerance", type=click.FloatRange(min=0.0), default=1e-9, show_default=True)
@click.option("--tie-policy", type=TIE_CHOICE, default="pessimistic", show_default=True)
@json_option("Write the metric_parity JSON here.")
def parity(
    dumps: tuple[Path, ...], tolerance: float, tie_policy: str, json_out: Path | None
) -> None:
    """Check the fast harness against the independent reference on each DUMP.

    Exit 0 when every metric agrees within the tolerance, 1 otherwise.
    """
    from audiorepro.dump import load_dump
    from audiorepro.io import write_json
    from audiorepro.parity import parity_report

    loaded = [load_dump(p) for p in dumps]
    report = parity_report(loaded, tolerance=tolerance, tie_policy=tie_policy)  # type: ignore[arg-type]
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
def explain_cmd(dump: Path, json_out: Path | None) -> None:
    """Each metric of DUMP under every profile side by side, and why each differs."""
    from audiorepro.dump import load_dump
    from audiorepro.explain import explain, explain_text
    from audiorepro.io import write_json

    d = load_dump(dump)
    report = explain(d)
    click.echo(explain_text(report))
    if json_out is not None:
        write_json(json_out, report)


@cli.command("probe-metrics")
@click.argument("predictions", type=click.Path(path_type=Path))
@json_option("Write the audiorepro.probe/1 JSON here.")
def probe_metrics(predictions: Path, json_out: Path | None) -> None:
    """Every probe metric that PREDICTIONS (.npz) supports: regression, classification, events."""
    from audiorepro.io import json_dumps, write_json
    from audiorepro.probe import probe_report_file

    report = probe_report_file(predictions)
    if json_out is not None:
        write_json(json_out, report)
    else:
        click.echo(json_dumps(report), nl=False)


@cli.command()
@click.option(
    "--golden",
    "golden",
    type=click.Path(path_type=Path),
    required=True,
    help="Published-values file (audiorepro.published/1 TOML).",
)
@click.option(
    "--dumps",
    "dumps_dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Folder holding the dumps the cells name.",
)
@json_option("Write the verification rows as JSON here.")
def verify(golden: Path, dumps_dir: Path, json_out: Path | None) -> None:
    """Recompute each published value and print PASS, FAIL or NOT VERIFIED per value.

    Exit 0 only when every value passes; 1 when any fails or cannot be verified here.
    """
    from audiorepro.io import write_json
    from audiorepro.verify import load_published, verify_lines, verify_published

    report = verify_published(load_published(golden), dumps_dir)
    for line in verify_lines(report):
        click.echo(line)
    if json_out is not None:
        write_json(json_out, report)
    if not report["passed"]:
        raise SystemExit(EXIT_CHECK_FAILED)


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the CLI and turns user errors into one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="audiorepro", standalone_mode=False)
    except UserError as exc:
        click.echo(f"audiorepro: error: {exc}", err=True)
        return EXIT_BAD_INPUT
    except click.exceptions.Abort:
        click.echo("audiorepro: aborted", err=True)
        return EXIT_BAD_INPUT
    except click.UsageError as exc:
        # One line, like every other user error, with where to look for the right usage.
        where = exc.ctx.command_path if exc.ctx is not None else "audiorepro"
        click.echo(f"audiorepro: error: {exc.format_message()} (see '{where} --help')", err=True)
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        click.echo(f"audiorepro: error: {exc.format_message()}", err=True)
        return EXIT_BAD_INPUT
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_BAD_INPUT
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``reproduce`` and ``verify``: a study run into an output folder, and its published values
checked (argument parsing and printing; the runner is imported when a command runs, never for
its ``--help``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import (
    PROBE_PUBLISHED_SCHEMA,
    cells_option,
    executor_options,
    json_option,
    slurm_settings,
    study_device_option,
)

if TYPE_CHECKING:
    from audiorepro.checks.verdict import Summary
    from audiorepro.runner.output.keys import SigningKey, TrustedKey


@cli.command()
@click.argument("target", required=False, type=click.Path(path_type=Path))
@click.option(
    "--golden",
    "golden",
    type=click.Path(path_type=Path),
    default=None,
    help="Published-values file (audiorepro.published/1 TOML), checked against --dumps.",
)
@click.option(
    "--dumps",
    "dumps_dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=Path("."),
    show_default=True,
    help="Folder holding the dumps the --golden cells name.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A trusted Ed25519 public key (PEM or ssh-ed25519 line) that must have signed OUT "
    "(repeatable).",
)
@click.option(
    "--trusted-keys",
    type=click.Path(path_type=Path),
    default=None,
    help="A file of trusted public keys, one per line (ssh-ed25519 lines or PEM blocks).",
)
@json_option("Write the verification rows as JSON here.")
@cells_option
@study_device_option
def verify(
    target: Path | None,
    golden: Path | None,
    dumps_dir: Path,
    keys: tuple[Path, ...],
    trusted_keys: Path | None,
    json_out: Path | None,
    cells: str | None,
    run_device: str | None,
) -> None:
    """Check published values: one line per value, PASS, FAIL or NOT VERIFIED.

    TARGET is a study file (its published values are recomputed from its dumps) or the output
    folder of `reproduce` (its recorded checks are re-read and every output file is checked
    against the manifest's hashes); or give --golden FILE with --dumps DIR. With a published
    probe values file (audiorepro.probe-published/1), give --golden FILE and the probe STUDY:
    each value is compared with the study's saved measurements. Exit 0 only when every value
    passes; 1 when any fails or cannot be verified here, or when there was nothing to check
    (NOTHING CHECKED: no published value and no recorded check); 2 for bad input. The last
    line is the verdict (for OUT, the headline numbers come above it).

    For OUT, one line says whether it is signed (`audiorepro sign`) and by which key; with
    --key or --trusted-keys the signature must verify under a trusted key and the signed files
    must be exactly OUT's files, unchanged (each problem a FAIL line).
    """
    from audiorepro.runner.output.folder import trusted_keys_of

    if target is None and golden is None:
        raise click.UsageError("give a study file or a reproduce output folder, or --golden FILE")
    if (cells or run_device) and (target is None or target.is_dir()):
        raise click.UsageError("--cells and --device apply to a STUDY file")
    trusted = trusted_keys_of(keys, trusted_keys)
    if trusted is not None and not (target is not None and target.is_dir()):
        raise click.UsageError("--key and --trusted-keys check a reproduce output folder: give OUT")
    report = _verify_report(target, golden, dumps_dir, trusted, cells, run_device)
    _say_verdict(report, json_out)


def _verify_report(
    target: Path | None,
    golden: Path | None,
    dumps_dir: Path,
    trusted: list[TrustedKey] | None,
    cells: str | None,
    run_device: str | None,
) -> Summary:
    """The verification rows of what ``verify`` was given (a study, OUT or --golden)."""
    from audiorepro.checks.verdict import settle
    from audiorepro.core.errors import UserError

    if golden is not None and _is_probe_published(golden):
        # Published probe values: checked against a probe study's saved measurements.
        if target is None or target.is_dir():
            raise click.UsageError(
                f"{golden} holds published probe values: give the probe study file as TARGET"
            )
        from audiorepro.runner.kinds.probe.published import load_probe_published
        from audiorepro.runner.kinds.probe.runs import verify_probe_saved
        from audiorepro.runner.kinds.probe.spec import ProbeStudy
        from audiorepro.specs.study import load_study

        probe_study = load_study(target, strict=True)
        if not isinstance(probe_study, ProbeStudy):
            raise UserError(
                "is a retrieval study; published probe values need a probe study",
                source=target,
            )
        report = verify_probe_saved(probe_study, load_probe_published(golden), source=golden)
    elif golden is not None and target is not None:
        raise click.UsageError("--golden FILE (retrieval values) takes --dumps DIR, not TARGET")
    elif golden is not None:
        from audiorepro.checks.verify import verify_published
        from audiorepro.specs.published import load_published

        report = verify_published(load_published(golden), dumps_dir)
    elif target is not None and target.is_dir():
        report = _verify_folder(target, trusted)
    else:
        assert target is not None
        report = _verify_study(target, cells, run_device)
    if "checks" not in report:
        report = settle(report)  # no value and no other check: NOTHING CHECKED, exit 1
    return report


def _is_probe_published(golden: Path) -> bool:
    """Whether a published-values file is the probe kind's, by its ``schema`` line alone."""
    from audiorepro.core.io import parse_toml, read_text

    doc = parse_toml(read_text(golden, what="a published-values .toml"), source=golden)
    return doc.get("schema") == PROBE_PUBLISHED_SCHEMA


def _verify_folder(target: Path, trusted: list[TrustedKey] | None) -> Summary:
    """``verify OUT``: its recorded checks re-read, its files against the manifest."""
    from audiorepro.checks.verdict import settle, summarize
    from audiorepro.cli.closing import say_folder_results
    from audiorepro.runner.output.attest import check_signature
    from audiorepro.runner.output.folder import OUT_TO_CHECK, verify_output_dir

    folder = verify_output_dir(target)
    signature = check_signature(target, trusted)
    click.echo(signature.line)
    report = summarize(folder["rows"] + signature.rows)
    if "checked" in folder:
        report["checked"] = folder["checked"]
    report = settle(report, folder.get("checks", 0), folder.get("to_check", OUT_TO_CHECK))
    # The headline numbers first: the last line is the verdict (`| tail -1`).
    say_folder_results(target, click.echo)
    return report


def _verify_study(target: Path, cells: str | None, run_device: str | None) -> Summary:
    """``verify STUDY``: its published values recomputed from its dumps."""
    import tempfile

    from audiorepro.runner.study import verify_study
    from audiorepro.specs.selection import select
    from audiorepro.specs.study import load_study

    study = select(load_study(target, strict=False), cells=cells, device=run_device)
    with tempfile.TemporaryDirectory(prefix="audiorepro-verify-") as cache:
        return verify_study(study, Path(cache))


def _say_verdict(report: Summary, json_out: Path | None) -> None:
    """One line per value, the verdict last; exit 1 unless every value passed."""
    from audiorepro.checks.verdict import verify_lines
    from audiorepro.core.errors import EXIT_CHECK_FAILED
    from audiorepro.core.io import write_json

    for line in verify_lines(report):
        click.echo(line)
    if json_out is not None:
        write_json(json_out, report)
    if not report["passed"]:
        raise SystemExit(EXIT_CHECK_FAILED)


@cli.command()
@click.argument("study_file", required=False, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Output folder (default: reproduce-<study name>).",
)
@executor_options("Where extraction runs: here, or as Slurm job arrays (submitit).")
@cells_option
@study_device_option
@click.option(
    "--sign-key",
    type=click.Path(path_type=Path),
    default=None,
    help="Sign OUT as it is published (see `audiorepro sign`): an Ed25519 private key.",
)
@click.option(
    "--against",
    type=click.Path(path_type=Path),
    default=None,
    help="Then diff the run against this baseline (a bundle.json.gz or an output folder).",
)
def reproduce(
    study_file: Path | None,
    out: Path | None,
    executor: str,
    slurm_folder: Path | None,
    wait_timeout: float | None,
    cells: str | None,
    run_device: str | None,
    sign_key: Path | None,
    against: Path | None,
    **slurm_kw: Any,
) -> None:
    """Regenerate every table, the report, the bundle and the manifest of a study.

    Without STUDY it runs the bundled demo study. Exit 0 when every check holds, 1 when any
    fails (the report is still written, failure first). With --executor slurm, extraction runs
    as job arrays first; a failed task is reported (exit 1) and a rerun submits only what is
    missing. With --sign-key KEY, OUT/attestation.intoto.json is signed in staging, so the
    folder is never visible unsigned. With --against, the run is then compared with a
    baseline as `audiorepro diff` does (exit 1 when a number changed).
    """
    from audiorepro.checks.diff_load import check_baseline, load_run
    from audiorepro.checks.diff_report import run_diff
    from audiorepro.core.errors import EXIT_CHECK_FAILED, EXIT_OK
    from audiorepro.runner.kinds import diff_kinds
    from audiorepro.runner.output.keys import load_signing_key
    from audiorepro.runner.output.publish import check_out, claim
    from audiorepro.runner.study import folder_problem
    from audiorepro.specs.selection import select
    from audiorepro.specs.study import load_study

    signer = load_signing_key(sign_key) if sign_key is not None else None  # before any work
    # bad: exit 2 before any work
    baseline = load_run(against, diff_kinds()) if against is not None else None
    target = out
    if study_file is None:
        target = out or Path("reproduce-demo")
    else:
        target = out or Path(f"reproduce-{load_study(study_file).name}")
    if baseline is not None:  # a baseline of another study: exit 2 before the run, not after
        name, kind = ("demo", "retrieval") if study_file is None else _name_kind(study_file)
        check_baseline(baseline, name, kind)
    if study_file is not None:  # --cells/--device checked before OUT is touched
        select(load_study(study_file), cells=cells, device=run_device)
    with claim(target):  # one run per OUT, held before the demo writes OUT/cache
        check_out(target)  # before any work: the demo prepares its inputs in OUT/cache
        selection = {"cells": cells, "device": run_device}
        passed = _reproduce_into(
            target, study_file, executor, slurm_folder, wait_timeout, slurm_kw, selection, signer
        )
    changed = (
        against is not None
        and run_diff(against, target, say=click.echo, check=folder_problem, kinds=diff_kinds())
        != EXIT_OK
    )
    if not passed or changed:
        raise SystemExit(EXIT_CHECK_FAILED)


def _name_kind(study_file: Path) -> tuple[str, str]:
    from audiorepro.specs.study import load_study

    study = load_study(study_file)
    return study.name, study.kind


def _reproduce_into(
    target: Path,
    study_file: Path | None,
    executor: str,
    slurm_folder: Path | None,
    wait_timeout: float | None,
    slurm_kw: dict[str, Any],
    selection: dict[str, str | None],
    signer: SigningKey | None,
) -> bool:
    """``reproduce`` with OUT claimed: run, publish, say each study's outcome. The demo's
    nested probe study (no cells, no models) runs whole."""
    from audiorepro.cli.closing import say_results
    from audiorepro.core.errors import EXIT_CHECK_FAILED
    from audiorepro.runner.demo import prepare_demo, prepare_probe_demo
    from audiorepro.runner.output.publish import ATTESTATION
    from audiorepro.runner.study import run_studies
    from audiorepro.specs.selection import select
    from audiorepro.specs.study import load_study

    jobs: list[tuple[Path, str]] = []
    if study_file is None:
        # The demo: a retrieval study in OUT and a probe study in OUT/probe.
        jobs.append((prepare_demo(target / "cache" / "demo", say=click.echo), "."))
        jobs.append((prepare_probe_demo(target / "cache" / "probe-demo"), "probe"))
    else:
        jobs.append((study_file, "."))
    studies = [(load_study(path), rel) for path, rel in jobs]  # validate all first
    studies = [
        (s if rel != "." and s.kind == "probe" else select(s, **selection), rel)
        for s, rel in studies
    ]
    slurm = None
    if executor == "slurm":
        slurm = slurm_settings(slurm_kw, folder=slurm_folder, wait_timeout_s=wait_timeout)
    ran = run_studies(studies, target, slurm=slurm, say=click.echo, sign_key=signer)
    if signer is not None and not any(r.get("executor_failed") for _, _, r in ran):
        click.echo(f"signed {target / ATTESTATION} with key {signer.keyid}")
    for study, _, result in ran:
        if result.get("executor_failed"):
            click.echo(f"{study.name}: FAILED ({len(result['failures'])} array task(s)):")
            for line in result["failures"]:
                click.echo(f"  {line}")
            click.echo("  rerun the same command to submit only the missing parts")
            raise SystemExit(EXIT_CHECK_FAILED)
    return say_results(ran, click.echo)

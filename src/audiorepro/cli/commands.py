"""The ``audiorepro`` command line.

Exit codes: 0 success, 1 a check failed, 2 bad input or usage (one line on stderr, no
traceback).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from audiorepro.checks.diff_load import check_baseline, load_run
from audiorepro.checks.diff_report import run_diff
from audiorepro.checks.explain import explain, explain_text
from audiorepro.checks.explain_verification import explain_trials, explain_trials_text
from audiorepro.checks.parity import parity_report
from audiorepro.checks.selfcheck import run_selfcheck
from audiorepro.checks.verify import settle, summarize, verify_lines, verify_published
from audiorepro.cli.app import cli
from audiorepro.cli.closing import say_folder_results, say_results
from audiorepro.cli.options import OutputFile, device_option, json_option, registry_option
from audiorepro.core.errors import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    UserError,
)
from audiorepro.core.io import json_dumps, write_json
from audiorepro.fetch import run_fetch
from audiorepro.formats.captions import load_inputs
from audiorepro.formats.dump import EMPTY_POLICIES, EmptyPolicy, load_dump, save_dump
from audiorepro.metrics.probe import probe_report_file
from audiorepro.metrics.profile_registry import is_canonical
from audiorepro.metrics.profiles import compute_profile, profile_names, registered_profiles
from audiorepro.metrics.retrieval import (
    TIE_POLICIES,
    MetricsReport,
    TiePolicy,
    compute_retrieval,
    cutoff_problem,
    metric_by_name,
    metrics_report,
)
from audiorepro.models import identity as ident
from audiorepro.models.extract import audio_inputs, parse_shard
from audiorepro.models.extract import extract as run_extract
from audiorepro.models.extract import merge as run_merge
from audiorepro.models.extract_jobs import extract_in_processes
from audiorepro.models.preflight import preflight
from audiorepro.models.registry import (
    USER_FORMATS,
    load_registry,
    resolve_spec,
    with_architecture,
)
from audiorepro.models.tiny import build_tiny_models
from audiorepro.runner.demo import prepare_demo, prepare_probe_demo
from audiorepro.runner.executors.extraction import StudyExtraction
from audiorepro.runner.executors.slurm import SlurmOptions, extract_part, sbatch_script
from audiorepro.runner.kinds import diff_kinds
from audiorepro.runner.kinds.probe.runs import verify_probe_saved
from audiorepro.runner.kinds.probe.spec import ProbeStudy
from audiorepro.runner.output.attest import check_signature
from audiorepro.runner.output.keys import SigningKey, load_signing_key, load_trusted_keys
from audiorepro.runner.output.publish import ATTESTATION, check_out, claim
from audiorepro.runner.study import (
    OUT_TO_CHECK,
    folder_problem,
    run_studies,
    study_extraction,
    verify_output_dir,
    verify_study,
)
from audiorepro.specs.probe_published import is_probe_published, load_probe_published
from audiorepro.specs.published import load_published
from audiorepro.specs.selection import check_device, select
from audiorepro.specs.settings import parse_overrides
from audiorepro.specs.study import load_study

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


def profile_help() -> str:
    """``metrics --profile``'s help: every registered profile, each with its hint."""
    names = [f"{p.name} ({p.hint})" if p.hint else p.name for p in registered_profiles()]
    listed = ", ".join(names[:-1]) + f", or {names[-1]}" if len(names) > 1 else names[0]
    return f"Whose definitions and names: {listed}."


def parse_cutoffs(ctx: Any, param: Any, value: str | None) -> tuple[int, ...] | None:
    """``--k 1,5,10,50`` -> (1, 5, 10, 50): ints >= 1, unique, ascending (else exit 2)."""
    if value is None:
        return None
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
    help=profile_help(),
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
    if trials is not None:
        if cutoffs is not None:
            raise UserError("applies to retrieval dumps; expected --k or --trials, not both",
                            key="--k")  # fmt: skip
        by_definition = explain_trials(dump, trials)
        click.echo(explain_trials_text(by_definition))
        if json_out is not None:
            write_json(json_out, by_definition.values)
        return
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
    report = probe_report_file(predictions)
    if json_out is not None:
        write_json(json_out, report)
    else:
        click.echo(json_dumps(report), nl=False)


def _device_flag(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--device`` checked as it is parsed: before any study loads or any model is built."""
    return None if value is None else check_device(value)


cells_option = click.option(
    "--cells",
    metavar="PATTERN",
    default=None,
    help="Run only the cells whose id matches this glob (e.g. 'laion/*/clotho5'); recorded.",
)
study_device_option = click.option(
    "--device",
    "run_device",
    metavar="cpu|cuda|cuda:N",
    default=None,
    callback=_device_flag,
    help="Run every model of the study on this device instead of the study's; recorded.",
)


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
    if target is None and golden is None:
        raise click.UsageError("give a study file or a reproduce output folder, or --golden FILE")
    if (cells or run_device) and (target is None or target.is_dir()):
        raise click.UsageError("--cells and --device apply to a STUDY file")
    trusted = load_trusted_keys(keys, trusted_keys) if keys or trusted_keys else None
    if trusted is not None and not (target is not None and target.is_dir()):
        raise click.UsageError("--key and --trusted-keys check a reproduce output folder: give OUT")
    if golden is not None and is_probe_published(golden):
        # Published probe values: checked against a probe study's saved measurements.
        if target is None or target.is_dir():
            raise click.UsageError(
                f"{golden} holds published probe values: give the probe study file as TARGET"
            )
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
        report = verify_published(load_published(golden), dumps_dir)
    elif target is not None and target.is_dir():
        folder = verify_output_dir(target)
        signature = check_signature(target, trusted)
        click.echo(signature.line)
        report = summarize(folder["rows"] + signature.rows)
        if "checked" in folder:
            report["checked"] = folder["checked"]
        report = settle(report, folder.get("checks", 0), folder.get("to_check", OUT_TO_CHECK))
        # The headline numbers first: the last line is the verdict (`| tail -1`).
        say_folder_results(target, click.echo)
    else:
        assert target is not None
        study = select(load_study(target, strict=False), cells=cells, device=run_device)
        with tempfile.TemporaryDirectory(prefix="audiorepro-verify-") as cache:
            report = verify_study(study, Path(cache))
    if "checks" not in report:
        report = settle(report)  # no value and no other check: NOTHING CHECKED, exit 1
    for line in verify_lines(report):
        click.echo(line)
    if json_out is not None:
        write_json(json_out, report)
    if not report["passed"]:
        raise SystemExit(EXIT_CHECK_FAILED)


def _spec(name: str, registries: tuple[Path, ...], items: tuple[str, ...], option: str) -> Any:
    """Resolve a model spec and split KEY=VALUE items into architecture and preprocessing."""
    spec = resolve_spec(name, load_registry(registries))
    preflight(spec)  # a corrupt checkpoint: one line before any model is built
    arch_items = tuple(i for i in items if i.partition("=")[0].strip() in ARCH_KEYS)
    if arch_items and spec.format in USER_FORMATS:
        raise UserError(
            f"is a CLAP architecture setting; a {spec.format} encoder takes only seed and "
            "batch_size",
            source=option,
            key=arch_items[0].partition("=")[0].strip(),
        )
    spec = with_architecture(spec, arch_items, source=option)
    rest = tuple(i for i in items if i not in arch_items)
    return spec, parse_overrides(rest, source=option)


ARCH_KEYS = ("enable_fusion", "amodel", "tmodel")


@cli.command("tiny-models")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), required=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--fusion/--no-fusion", default=True, show_default=True, help="Fused (aff_2d) or unfused."
)
def tiny_models(out: Path, seed: int, fusion: bool) -> None:
    """Write one random tiny CLAP model in both formats, a local hub cache and DIR/registry.toml.

    The registry names them tiny-hf and tiny-laion, so every command can be tried offline.
    """
    path = build_tiny_models(out, seed=seed, fusion=fusion)
    click.echo(f"wrote tiny-hf and tiny-laion (seed {seed}); registry: {path}")


@cli.command()
@click.option(
    "--model",
    "model",
    required=True,
    help="Registry name, hf:<repo>@<40-hex commit>, hf:<dir>, laion:<path>, py:MODULE:FACTORY, "
    "py:PATH.py:FACTORY, hear:MODULE[:WEIGHTS] or an encoder plugin's name.",
)
@click.option(
    "--audio",
    type=click.Path(path_type=Path),
    required=True,
    help="Folder of audio files, or a list file.",
)
@click.option(
    "--captions",
    type=click.Path(path_type=Path),
    default=None,
    help="Clotho or long caption CSV (without: an audio-only dump of every clip).",
)
@click.option("--out", type=OutputFile(), required=True)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a preprocessing setting, or (hf:/laion: specs) enable_fusion, amodel, tmodel.",
)
@click.option(
    "--shard", default=None, metavar="I/N", help="Write part I of N (whole batches) for merge."
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Local processes over whole batches, merged like shards (same bytes as one).",
)
@registry_option
@device_option
def extract(
    model: str,
    audio: Path,
    captions: Path | None,
    out: Path,
    settings: tuple[str, ...],
    shard: str | None,
    jobs: int,
    registries: tuple[Path, ...],
    device: str,
) -> None:
    """Embed every clip and caption with one model and write the dump format (.npz)."""
    if jobs > 1:
        if shard is not None:
            raise click.UsageError("--jobs and --shard do not go together")
        _check_inputs(captions, audio)  # once here, not in every process
        _spec(model, registries, settings, "--set")  # and the checkpoint preflight
        args = ["--model", model, "--audio", str(audio)]
        args += [] if captions is None else ["--captions", str(captions)]
        args += [f"--set={s}" for s in settings] + ["--device", device]
        args += [f"--registry={r}" for r in registries]
        extract_in_processes(args, out, jobs)
        click.echo(f"wrote dump {out} ({jobs} processes, merged)")
        return
    part = parse_shard(shard)
    _check_inputs(captions, audio)  # bad captions or clips: one line before anything loads
    spec, overrides = _spec(model, registries, settings, "--set")
    meta = run_extract(
        spec, audio, captions, out, overrides=overrides, device=device, shard=part, progress=True
    )
    what = (
        ("part " + shard if shard else "dump")
        if captions
        else "audio-only " + ("part " + shard if shard else "dump")
    )
    texts = "" if captions is None else f", {meta['inputs']['n_captions']} captions"
    click.echo(
        f"wrote {what} {out}: {meta['inputs']['n_clips']} clips{texts}, model {meta['model']} "
        f"on {device}"
    )


def _check_inputs(captions: Path | None, audio: Path) -> None:
    """The caption file and clips (or, without captions, every clip) before any model."""
    if captions is None:
        audio_inputs(audio)
    else:
        load_inputs(captions, audio)


@cli.command()
@click.argument("parts", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", type=OutputFile(), required=True)
def merge(parts: tuple[Path, ...], out: Path) -> None:
    """Join the parts of one sharded extraction (extract --shard i/n) into one dump."""
    meta = run_merge(list(parts), out)
    click.echo(f"merged {len(parts)} parts into {out} ({meta['inputs']['n_clips']} clips)")


def _unrecorded_difference(block: ident.IdentityBlock) -> str:
    """Why the verdict is "preprocessing differs" when no setting does: what each side runs
    between its weights and its embeddings differs where no setting records it (the
    encoder's code, its rate, how clips are decoded), named where the record shows it."""
    a, b = block["a"], block["b"]
    shown = []
    for key, label in (
        ("encoder_code", "encoder code"),
        ("encoder", "encoder (name, rate)"),
        ("audio_loader", "audio loading"),
    ):
        if a.get(key) != b.get(key):
            shown.append(label)
    where = f" ({', '.join(shown)} differ)" if shown else ""
    return (
        "the preprocessing differs outside the recorded settings (none of them differs): "
        f"the code between weights and embeddings{where}"
    )


def _identity_lines(block: ident.IdentityBlock) -> list[str]:
    lines = [
        f"{block['hf_checkpoint']} vs {block['control']} on {block['fixture']} ({block['n']} clips)"
    ]
    w = block["weights"]
    if w.get("compared_by") == "sha256":
        lines.append(f"weights: {w['status']} (compared by the files' SHA-256)")
    else:
        lines.append(
            f"weights: {w['status']} "
            f"({w['tensors_identical']}/{w['tensors_compared']} tensors identical"
            + (f", max abs diff {w['max_abs_diff']:.3g}" if w["tensors_differing"] else "")
            + ")"
        )
    audio, text = block["audio_embedding_cosine_per_clip"], block["text_embedding_cosine_per_clip"]
    if audio and not text:
        lines.append(f"embeddings: audio cosine min {min(audio):.6f} (audio only)")
    elif audio:
        lines.append(
            f"embeddings: audio cosine min {min(audio):.6f}, text cosine min {min(text):.6f}, "
            f"similarity correlation {block['similarity_matrix_correlation']:.6f}, "
            f"max abs diff {block['similarity_matrix_max_abs_diff']:.3g}"
        )
    diagnosis = block.get("diagnosis")
    if diagnosis:
        for row in diagnosis["tried"]:
            if row.get("changed_side"):
                lines.append(
                    f"  tried {row['changed_side']}: {row['set']} -> min cosine "
                    f"{row['min_cosine']:.6f}{' (closes the gap)' if row['closes_gap'] else ''}"
                )
        if not diagnosis["differing_settings"]:
            lines.append(f"  {_unrecorded_difference(block)}")
    verdict = block["verdict"]
    if diagnosis and diagnosis.get("closing_setting"):
        verdict += f" ({diagnosis['closing_setting']})"
    lines.append(f"verdict: {verdict}")
    return lines


@cli.command()
@click.option("--a", "a_name", required=True, help="The model under test (spec or registry name).")
@click.option(
    "--b", "b_name", default=None, help="The control to compare with (not with --golden)."
)
@click.option("--a-set", multiple=True, metavar="KEY=VALUE", help="Override a setting of --a.")
@click.option("--b-set", multiple=True, metavar="KEY=VALUE", help="Override a setting of --b.")
@click.option(
    "--audio",
    type=click.Path(path_type=Path),
    default=None,
    help="Fixture clips (default: bundled).",
)
@click.option(
    "--captions", type=click.Path(path_type=Path), default=None, help="Fixture captions CSV."
)
@click.option(
    "--golden",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Compare --a with stored reference embeddings instead of with --b.",
)
@click.option(
    "--write-golden",
    type=OutputFile(),
    default=None,
    help="Store --a's fixture embeddings as a golden reference file.",
)
@click.option(
    "--min-cosine",
    type=float,
    default=0.99999,
    show_default=True,
    help="Golden threshold (--write-golden).",
)
@click.option(
    "--max-abs-diff",
    type=float,
    default=1e-4,
    show_default=True,
    help="Golden threshold (--write-golden).",
)
@registry_option
@device_option
@json_option("Write the identity report as JSON here.")
def identity(
    a_name: str,
    b_name: str | None,
    a_set: tuple[str, ...],
    b_set: tuple[str, ...],
    audio: Path | None,
    captions: Path | None,
    golden: Path | None,
    write_golden: Path | None,
    min_cosine: float,
    max_abs_diff: float,
    registries: tuple[Path, ...],
    device: str,
    json_out: Path | None,
) -> None:
    """Are two checkpoints the same? Weights tensor by tensor, then fixture embeddings.

    Verdict: identical / same weights, preprocessing differs (naming the setting that closes
    the gap) / different checkpoints. Exit 0 only for identical (or a golden match).
    """
    modes = sum(x is not None for x in (b_name, golden, write_golden))
    if modes != 1:
        raise click.UsageError("give exactly one of --b, --golden or --write-golden")
    fixture = ident.load_fixture(audio, captions)  # bad inputs: one line before any model
    a_spec, a_over = _spec(a_name, registries, a_set, "--a-set")
    if write_golden is not None:
        save_dump(
            write_golden,
            ident.golden_dump(a_spec, fixture, a_over, device, min_cosine, max_abs_diff),
        )
        click.echo(f"wrote golden embeddings of {a_name} on {fixture.name} to {write_golden}")
        return
    if golden is not None:
        report = ident.compare_golden(
            a_spec, golden, fixture=fixture, overrides=a_over, device=device
        )
        g = report["golden_identity"]
        click.echo(
            f"{a_name} vs golden {g['golden']} on {g['fixture']}: min cosine {g['min_cosine']:.6f} "
            f"(>= {g['thresholds']['min_cosine']}), max abs diff {g['max_abs_diff']:.3g} "
            f"(<= {g['thresholds']['max_abs_diff']})"
        )
        click.echo(f"verdict: {g['verdict']}")
    else:
        assert b_name is not None
        b_spec, b_over = _spec(b_name, registries, b_set, "--b-set")
        identity = ident.compare(
            a_spec, b_spec, fixture, a_overrides=a_over, b_overrides=b_over, device=device
        )
        for line in _identity_lines(identity["checkpoint_identity"]):
            click.echo(line)
        report = {
            "checkpoint_identity": identity["checkpoint_identity"],
            "passed": identity["passed"],
        }
    passed = report.pop("passed")
    if json_out is not None:
        write_json(json_out, report)
    if not passed:
        raise SystemExit(EXIT_CHECK_FAILED)


def slurm_options(func: Any) -> Any:
    """The scheduler options shared by ``reproduce --executor slurm`` and ``slurm-template``."""
    options = [
        click.option(
            "--shards", type=click.IntRange(min=1), default=1, show_default=True,
            help="Array tasks per cell (extract --shard i/n).",
        ),
        click.option("--partition", default=None, help="Slurm partition."),
        click.option("--account", default=None, help="Slurm account (project to charge)."),
        click.option(
            "--time", "time_min", type=click.IntRange(min=1), default=60, show_default=True,
            help="Time limit per task, minutes.",
        ),
        click.option("--gpus-per-task", type=click.IntRange(min=0), default=None),
        click.option("--cpus-per-task", type=click.IntRange(min=1), default=None),
        click.option("--mem", default=None, help="Memory per node, e.g. 32G."),
        click.option(
            "--array-parallelism", type=click.IntRange(min=1), default=64, show_default=True,
            help="Array tasks running at once.",
        ),
        click.option(
            "--container", type=click.Path(path_type=Path, dir_okay=False), default=None,
            help="Run each task as `apptainer exec --nv --containall --cleanenv ... SIF`.",
        ),
        click.option(
            "--bind", "binds", multiple=True, metavar="SRC[:DST[:ro]]",
            help="More apptainer binds (the study's inputs are bound read-only already).",
        ),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def _slurm(kw: dict[str, Any], **extra: Any) -> Any:
    names = ("shards", "partition", "account", "time_min", "gpus_per_task", "cpus_per_task",
             "mem", "array_parallelism", "container", "binds")  # fmt: skip
    return SlurmOptions(**{n: kw[n] for n in names}, **extra)


@cli.command()
@click.argument("study_file", required=False, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Output folder (default: reproduce-<study name>).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "slurm"]),
    default="local",
    show_default=True,
    help="Where extraction runs: here, or as Slurm job arrays (submitit).",
)
@slurm_options
@click.option(
    "--slurm-folder",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="submitit's job files and logs (default: OUT/slurm).",
)
@click.option(
    "--wait-timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds to wait for the array tasks (default: --time plus ten minutes).",
)
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
        slurm = _slurm(slurm_kw, folder=slurm_folder, wait_timeout_s=wait_timeout)
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


def _extractable_study(path: Path) -> StudyExtraction:
    """The cells a study's kind extracts, as the executors see them (a kind that extracts
    nothing, a probe study: one line)."""
    study = load_study(path)
    extraction = study_extraction(study)
    if extraction is None:
        raise UserError(
            f"is a {study.kind} study, whose kind extracts nothing; only a study with cells "
            "to extract runs in parts",
            source=path,
        )
    return extraction


@cli.command("extract-part")
@click.argument("study_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--cell", "cell_id", required=True, help="The cell's id in the study.")
@click.option("--shard", required=True, help="i/n: which part of the cell's extraction.")
@click.option("--key", required=True, help="The cache key the submitter computed.")
@click.option("--out", type=OutputFile(), required=True)
def extract_part_cmd(study_file: Path, cell_id: str, shard: str, key: str, out: Path) -> None:
    """One array task of `reproduce --executor slurm` (and of `slurm-template` scripts): a
    shard of a cell's extraction, written atomically with a SHA-256 record."""
    parsed = parse_shard(shard)
    assert parsed is not None
    extract_part(_extractable_study(study_file), cell_id, parsed, key, out)
    click.echo(f"wrote {out}")


@cli.command("slurm-template")
@click.argument("study_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The study's output folder (default: reproduce-<study name>).",
)
@slurm_options
def slurm_template(study_file: Path, out: Path | None, **slurm_kw: Any) -> None:
    """Print an sbatch array script that extracts what STUDY still needs, for users who
    submit by hand; then `reproduce STUDY --out OUT --executor slurm` merges and reports."""
    extraction = _extractable_study(study_file)
    extraction.preflight()  # a corrupt checkpoint: one line, not a script that fails on nodes
    target = out or Path(f"reproduce-{extraction.name}")
    if target.exists() and not target.is_dir():  # a FIFO, a device: no folder to run into
        raise UserError("is not a folder; expected an output folder (--out)", source=target)
    click.echo(sbatch_script(extraction, target, _slurm(slurm_kw)), nl=False)


@cli.command()
@click.option(
    "--lock",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Compare the installed packages with this lock (default: $AUDIOREPRO_LOCK).",
)
@click.option(
    "--strict-environment",
    is_flag=True,
    help="Fail when an installed version differs from the lock (the image's own check).",
)
def selfcheck(lock: Path | None, strict_environment: bool) -> None:
    """Check this installation: golden values, harness vs reference, tiny-model identity, and
    the installed packages against the lock. Under a minute on a CPU, offline.
    """
    checks = run_selfcheck(lock, strict_environment=strict_environment)
    for check in checks:
        click.echo(check.line())
    failed = [c.name for c in checks if c.passed is False]
    click.echo(f"selfcheck: {'FAILED (' + ', '.join(failed) + ')' if failed else 'passed'}")
    if failed:
        raise SystemExit(EXIT_CHECK_FAILED)


@cli.command()
@click.argument("names", nargs=-1, required=True)
@registry_option
@click.option(
    "--cache",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Hugging Face hub cache folder (what HF_HUB_CACHE names; default: the standard one).",
)
@click.option(
    "--mirror", default=None, help="Replace the scheme and host of dataset URLs with this URL."
)
@click.option(
    "--data",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("data"),
    show_default=True,
    help="Where datasets are downloaded and prepared (DATA/<name>/).",
)
@click.option(
    "--audio",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="audiocaps-test: the folder of the clips you have.",
)
@click.option(
    "--caption-selection",
    default="all",
    show_default=True,
    help="audiocaps-test: all, first-id (one per clip: the lowest audiocap_id, the published "
    "protocol's count) or ids:FILE (the audiocap_id values to keep, one per line).",
)
def fetch(
    names: tuple[str, ...],
    registries: tuple[Path, ...],
    cache: Path | None,
    mirror: str | None,
    data: Path,
    audio: Path | None,
    caption_selection: str,
) -> None:
    """Download checkpoints (at their pinned hub commit) and datasets, and check every file's
    hash before reporting success; the only command that downloads."""
    code = run_fetch(names, registries, cache, mirror, data, audio, click.echo, caption_selection)
    if code:
        raise SystemExit(code)

"""``identity``: are two checkpoints the same, weights tensor by tensor and then embeddings
of a fixture (:mod:`audiorepro.models.identity`, imported when the command runs, never for
its ``--help``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import (
    OutputFile,
    device_option,
    json_option,
    model_spec,
    registry_option,
)

if TYPE_CHECKING:
    from audiorepro.models.identity_block import IdentityBlock


def _unrecorded_difference(block: IdentityBlock) -> str:
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


def _identity_lines(block: IdentityBlock) -> list[str]:
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
    from audiorepro.core.errors import EXIT_CHECK_FAILED
    from audiorepro.core.io import write_json
    from audiorepro.formats.dump import save_dump
    from audiorepro.models import identity as ident

    modes = sum(x is not None for x in (b_name, golden, write_golden))
    if modes != 1:
        raise click.UsageError("give exactly one of --b, --golden or --write-golden")
    fixture = ident.load_fixture(audio, captions)  # bad inputs: one line before any model
    a_spec, a_over = model_spec(a_name, registries, a_set, "--a-set")
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
        b_spec, b_over = model_spec(b_name, registries, b_set, "--b-set")
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

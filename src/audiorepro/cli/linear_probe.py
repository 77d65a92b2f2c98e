"""``audiorepro linear-probe DUMP --labels CSV``: the ``linear-v1`` probe on a dump you have."""

from __future__ import annotations

import math
from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import json_option
from audiorepro.core.errors import UserError


def _positive_c(text: str) -> float:
    """``--C`` as a float > 0, or one line naming the option.

    >>> _positive_c("0.5")
    0.5
    """
    try:
        value = float(text)
    except ValueError:
        raise UserError(
            f"is {text!r}; expected a number > 0 (the inverse L2 strength)", key="--C"
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"is {text!r}; expected a finite number > 0", key="--C")
    return value


@cli.command("linear-probe")
@click.argument("dump", type=click.Path(path_type=Path))
@click.option(
    "--labels",
    "labels",
    type=click.Path(path_type=Path),
    required=True,
    help="file_name,label[,fold] CSV (file_name matches the dump's audio_ids), "
    "or ESC-50's meta/esc50.csv.",
)
@click.option(
    "--folds",
    "fold_column",
    default="fold",
    show_default=True,
    help="The labels file's fold column: each fold is held out once.",
)
@click.option(
    "--C",
    "c_text",
    default="1.0",
    show_default=True,
    metavar="C",
    help="The inverse L2 strength of linear-v1's logistic regression.",
)
@json_option("Write the audiorepro.linear-probe/1 JSON here.")
def linear_probe(
    dump: Path, labels: Path, fold_column: str, c_text: str, json_out: Path | None
) -> None:
    """The linear-v1 probe (docs/linear-probe.md) on DUMP's audio_embeds, leaving one fold of
    LABELS out at a time: accuracy per fold and their mean."""
    from audiorepro.cli.linear_probe_work import linear_probe_dump
    from audiorepro.core.io import write_json

    c = _positive_c(c_text)
    report = linear_probe_dump(dump, labels, fold_column=fold_column, c=c)
    if json_out is not None:
        write_json(json_out, report)
    width = max(len(str(f["fold"])) for f in report["folds"])
    click.echo(
        f"linear-v1 (C={c:g}) on {dump.name}: {report['dump']['n_clips']} clips, "
        f"{len(report['labels']['classes'])} classes"
    )
    for f in report["folds"]:
        click.echo(
            f"fold {f['fold']:<{width}}  accuracy {f['accuracy']:.4f}  "
            f"({f['n_test']} test, {f['n_train']} train)"
        )
    click.echo(f"mean accuracy {report['mean_accuracy']:.4f} over {len(report['folds'])} folds")

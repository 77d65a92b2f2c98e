"""``audiorepro evaluate``: one model on prepared datasets, in one command."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.closing import say_results
from audiorepro.cli.commands import cli, device_option
from audiorepro.core.errors import EXIT_CHECK_FAILED, UserError
from audiorepro.core.io import atomic_write_bytes
from audiorepro.metrics.profile_registry import canonical_profile, is_canonical
from audiorepro.metrics.profiles import profile_names
from audiorepro.runner.evaluate import prepare_evaluate
from audiorepro.runner.output.publish import check_out, claim
from audiorepro.runner.study import run_studies
from audiorepro.specs.study import load_study


class RetrievalProfile(click.Choice):  # type: ignore[type-arg]
    """The registered retrieval profiles, read when a value is converted (a profile
    registered after import is a choice too)."""

    def __init__(self) -> None:
        super().__init__(profile_names("retrieval"))

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> object:
        self.choices = profile_names("retrieval")
        return super().convert(value, param, ctx)


def _snapshot(work: Path) -> dict[Path, bytes]:
    """The study files already in ``work`` (a previous evaluate's), to restore on refusal."""
    return {p: p.read_bytes() for p in sorted(work.glob("*.toml"))} if work.is_dir() else {}


def _restore(work: Path, before: dict[Path, bytes], *, stop: Path) -> None:
    """Put ``work`` back as :func:`_snapshot` found it: the study files this run wrote
    removed, the previous ones rewritten, and the folders it made (up to ``stop``) removed
    when empty."""
    for path in sorted(work.glob("*.toml")) if work.is_dir() else []:
        if path not in before:
            path.unlink()
    for path, data in before.items():
        if not path.is_file() or path.read_bytes() != data:
            atomic_write_bytes(path, data)
    folder = work
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _default_out(model: str) -> Path:
    return Path("evaluate-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in model))


@cli.command("evaluate")
@click.argument("model")
@click.argument("datasets", nargs=-1, required=True)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    type=RetrievalProfile(),
    help="A metric profile to report beside canonical (repeatable; retrieval datasets).",
)
@device_option
@click.option(
    "--registry",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="A checkpoint registry TOML adding to the bundled one.",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("data"),
    show_default=True,
    help="Where `fetch --data` prepared the registry datasets (DATA/<name>/).",
)
@click.option(
    "--task",
    type=click.Choice(["zeroshot", "linear-probe"]),
    default="zeroshot",
    show_default=True,
    help="What ESC-50 runs: zero-shot classification, or the linear-v1 probe on the clips' "
    "embeddings (each of its five folds held out once).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The output folder (default: evaluate-<model>).",
)
def evaluate(
    model: str,
    datasets: tuple[str, ...],
    profiles: tuple[str, ...],
    device: str,
    registry: Path | None,
    data: Path,
    task: str,
    out: Path | None,
) -> None:
    """Evaluate MODEL (hf:ORG/NAME@COMMIT with its 40-hex hub commit, laion:PATH, a registry
    name or a local folder) on DATASETs (clotho-eval, audiocaps-test, esc50 as `fetch --data
    DATA` prepared them, or a prepared folder): the same output folder as a study (report,
    tables, bundle, manifest), and the study file it ran in OUT/cache/evaluate/, to rerun
    and verify."""
    target = out or _default_out(model)
    wanted = (canonical_profile(), *(p for p in profiles if not is_canonical(p)))
    with claim(target):  # one run per OUT, held before the study files go into OUT/cache
        check_out(target)
        work = target / "cache" / "evaluate"
        before = _snapshot(work)
        try:
            jobs = prepare_evaluate(
                model,
                datasets,
                work,
                data=data,
                profiles=wanted,
                device=device,
                registry=registry,
                task=task,
            )
            studies = [(load_study(path), rel) for path, rel in jobs]
            passed = say_results(run_studies(studies, target, say=click.echo), click.echo)
        except UserError:
            # Refused (exit 2): OUT keeps what it held, nothing half-written (the README).
            _restore(work, before, stop=target)
            raise
    click.echo(f"rerun: audiorepro reproduce {jobs[0][0]} --out {target}")
    click.echo(f"check: audiorepro verify {target}")
    if not passed:
        raise SystemExit(EXIT_CHECK_FAILED)

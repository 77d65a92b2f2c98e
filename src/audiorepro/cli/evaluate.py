"""``audiorepro evaluate``: one model on prepared datasets, in one command."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import BUILT_IN_PROFILES, device_option
from audiorepro.core.errors import EXIT_CHECK_FAILED, UserError


class RetrievalProfile(click.Choice):  # type: ignore[type-arg]
    """The registered retrieval profiles, read when a value is converted (a profile
    registered after import is a choice too); ``--help`` lists the built-in ones without
    importing the registry."""

    def __init__(self) -> None:
        super().__init__([name for name, kind, _ in BUILT_IN_PROFILES if kind == "retrieval"])

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> object:
        from audiorepro.metrics.profiles import profile_names

        self.choices = profile_names("retrieval")
        return super().convert(value, param, ctx)


def _snapshot(work: Path) -> dict[Path, bytes]:
    """The study files already in ``work`` (a previous evaluate's), to restore on refusal."""
    return {p: p.read_bytes() for p in sorted(work.glob("*.toml"))} if work.is_dir() else {}


def _restore(work: Path, before: dict[Path, bytes], *, stop: Path) -> None:
    """Put ``work`` back as :func:`_snapshot` found it: the study files this run wrote
    removed, the previous ones rewritten, and the folders it made (up to ``stop``) removed
    when empty."""
    from audiorepro.core.io import atomic_write_bytes

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
    """``evaluate-<model>`` for a model spec of letters, digits, ``.``, ``_`` and ``-`` (a
    registry name); any other spec's other characters become ``_`` and a ``+`` and 16 hex
    digits of its SHA-256 follow, so that two specs never share a default folder
    (``laion:a/b.pt`` and ``laion:a_b.pt`` gave one, and the second run replaced the first's
    results). ``+`` is never in the first form, so the two forms cannot meet either; a name
    over 100 bytes is cut to 60 characters before its digest (a folder name holds 255 bytes).

    >>> _default_out("tiny-hf"), _default_out("laion:a/b.pt") == _default_out("laion:a_b.pt")
    (PosixPath('evaluate-tiny-hf'), False)
    """
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in model)
    if name != model or len(name.encode("utf-8", "surrogatepass")) > 100:
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = name[:60] + "+" + digest  # 60 characters: at most 240 bytes, a file name's 255
    return Path("evaluate-" + name)


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
    help="The output folder (default: evaluate-<model>; a model spec with other characters "
    "than letters, digits, . _ -: those as _, then + and 16 hex digits of its SHA-256).",
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
    from audiorepro.metrics.profile_registry import canonical_profile, is_canonical
    from audiorepro.runner.output.publish import check_out, claim

    target = out or _default_out(model)
    wanted = (canonical_profile(), *(p for p in profiles if not is_canonical(p)))
    fresh = not target.exists()
    with claim(target):  # one run per OUT, held before the study files go into OUT/cache
        check_out(target)
        work = target / "cache" / "evaluate"
        before = _snapshot(work)
        try:
            with _removed_on_failure(work if fresh else None):
                jobs, passed = _run(
                    model, datasets, work, target, data, wanted, device, registry, task
                )
        except UserError:
            # Refused (exit 2): OUT keeps what it held, nothing half-written (the README).
            _restore(work, before, stop=target)
            raise
    click.echo(f"rerun: audiorepro reproduce {jobs[0][0]} --out {target}")
    click.echo(f"check: audiorepro verify {target}")
    if not passed:
        raise SystemExit(EXIT_CHECK_FAILED)


@contextlib.contextmanager
def _removed_on_failure(work: Path | None) -> Iterator[None]:
    """A run that fails (a clip refused at extraction: a 1 Hz sample rate) in an OUT it
    created leaves no study files behind, so that ``claim`` removes OUT again: bad input
    writes nothing."""
    try:
        yield
    except BaseException:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
            with contextlib.suppress(OSError):
                work.parent.rmdir()  # OUT/cache, when nothing else is in it
        raise


def _run(
    model: str,
    datasets: tuple[str, ...],
    work: Path,
    target: Path,
    data: Path,
    wanted: tuple[str, ...],
    device: str,
    registry: Path | None,
    task: str,
) -> tuple[list[tuple[Path, str]], bool]:
    """Write the study files into ``work`` and run them: (the studies, whether all passed)."""
    from audiorepro.cli.closing import say_results
    from audiorepro.runner.evaluate import prepare_evaluate
    from audiorepro.runner.study import run_studies
    from audiorepro.specs.study import load_study

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
    return jobs, say_results(run_studies(studies, target, say=click.echo), click.echo)

"""``extract`` and ``merge``: one model's embeddings of clips and captions written as a dump,
whole, in parts or in local processes (the model stack is imported when a command runs, never
for its ``--help``)."""

from __future__ import annotations

from pathlib import Path

import click

from audiorepro.cli.app import cli
from audiorepro.cli.options import OutputFile, device_option, model_spec, registry_option


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
    from audiorepro.models.extract import extract as run_extract
    from audiorepro.models.extract import parse_shard

    if jobs > 1:
        if shard is not None:
            raise click.UsageError("--jobs and --shard do not go together")
        _check_inputs(captions, audio)  # once here, not in every process
        model_spec(model, registries, settings, "--set")  # and the checkpoint preflight
        args = ["--model", model, "--audio", str(audio)]
        args += [] if captions is None else ["--captions", str(captions)]
        args += [f"--set={s}" for s in settings] + ["--device", device]
        args += [f"--registry={r}" for r in registries]
        from audiorepro.models.extract_jobs import extract_in_processes

        extract_in_processes(args, out, jobs)
        click.echo(f"wrote dump {out} ({jobs} processes, merged)")
        return
    part = parse_shard(shard)
    _check_inputs(captions, audio)  # bad captions or clips: one line before anything loads
    spec, overrides = model_spec(model, registries, settings, "--set")
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
    from audiorepro.formats.captions import load_inputs
    from audiorepro.models.extract import audio_inputs

    if captions is None:
        audio_inputs(audio)
    else:
        load_inputs(captions, audio)


@cli.command()
@click.argument("parts", nargs=-1, type=click.Path(path_type=Path))
@click.option("--out", type=OutputFile(), required=True)
def merge(parts: tuple[Path, ...], out: Path) -> None:
    """Join the parts of one sharded extraction (extract --shard i/n) into one dump."""
    from audiorepro.models.extract import merge as run_merge

    meta = run_merge(list(parts), out)
    click.echo(f"merged {len(parts)} parts into {out} ({meta['inputs']['n_clips']} clips)")

"""``audiorepro fetch``: the one command that downloads.

Checkpoints come from the Hugging Face hub at their pinned commit (:mod:`.hub`), datasets
through pooch with their published hashes (:mod:`.datasets`). Every file is checked before the
command reports success; afterwards every other command runs with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import signal
import threading
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from audiorepro.core.errors import EXIT_CHECK_FAILED, EXIT_OK, UserError
from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.core.io import read_text
from audiorepro.fetch import hub
from audiorepro.fetch.datasets import SCHEMA as DATASETS_SCHEMA
from audiorepro.fetch.datasets import (
    Dataset,
    Say,
    bundled_datasets,
    parse_caption_selection,
    prepare_audiocaps,
    prepare_clotho,
    prepare_esc50,
    read_datasets,
)
from audiorepro.models.registry import load_registry, load_support

__all__ = ["run_fetch"]


def _split_registries(paths: tuple[Path, ...]) -> tuple[list[Path], list[Path]]:
    """``--registry`` files by schema: checkpoint registries and datasets registries."""
    models: list[Path] = []
    datasets: list[Path] = []
    for path in paths:
        try:
            schema = tomllib.loads(read_text(path, what="a registry .toml")).get("schema")
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"is not valid TOML ({exc})", source=path) from None
        (datasets if schema == DATASETS_SCHEMA else models).append(path)
    return models, datasets


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM as SIGINT: an exception, so that every partial download is removed on the way
    out (the command line reports it in one line, exit 2)."""
    raise KeyboardInterrupt


def run_fetch(
    names: tuple[str, ...],
    registries: tuple[Path, ...],
    cache: Path | None,
    mirror: str | None,
    data: Path,
    audio: Path | None,
    say: Say,
    caption_selection: str = "all",
) -> int:
    """Fetch every name (checkpoints and datasets); returns the exit code."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupted) if main_thread else None
    try:
        return _run_fetch(names, registries, cache, mirror, data, audio, say, caption_selection)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _mirror_parts(mirror: str | None) -> SplitResult | None:
    """``--mirror`` as URL parts, or one line saying what was expected."""
    if not mirror:
        return None
    expected = "expected an http(s) URL such as https://mirror.example.org/zenodo"
    try:
        parts = urlsplit(mirror)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        raise UserError(f"is {mirror!r} ({exc}); {expected}", key="--mirror") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"is {mirror!r}; {expected}", key="--mirror")
    return parts


def _run_fetch(
    names: tuple[str, ...],
    registries: tuple[Path, ...],
    cache: Path | None,
    mirror: str | None,
    data: Path,
    audio: Path | None,
    say: Say,
    caption_selection: str,
) -> int:
    model_files, dataset_files = _split_registries(registries)
    models = load_registry(model_files)
    support = load_support(model_files)
    datasets: dict[str, Dataset] = read_datasets(bundled_datasets())
    for path in dataset_files:
        datasets.update(read_datasets(path))
    for name in names:
        if name in models.broken and name not in datasets:
            raise models.broken[name]  # an entry that cannot be used here: its own line
    unknown = [n for n in names if n not in models and n not in datasets]
    if unknown:
        raise UserError(
            f"is neither a checkpoint ({', '.join(sorted(models))}) nor a dataset "
            f"({', '.join(sorted(datasets))})",
            key=unknown[0],
        )
    _mirror_parts(mirror)
    if audio is not None and "audiocaps" not in {datasets[n].kind for n in names if n in datasets}:
        raise UserError("is only for an audiocaps dataset", key="--audio")
    selection = parse_caption_selection(caption_selection)
    if selection.rule != "all" and audio is None:
        raise UserError(
            "selects the captions prepared from your clips: give --audio DIR too",
            key="--caption-selection",
        )
    unverified: list[str] = []
    wanted_support: list[str] = []
    if any(n in models for n in names):
        hub.allow_downloads(cache)
    for name in names:
        if name in datasets:
            ds = datasets[name]
            say(f"{name}: downloading {len(ds.files)} file(s) into {data / name}")
            record: dict[str, Any] | None
            if ds.kind == "clotho":
                record = prepare_clotho(ds, data, mirror, say)
            elif ds.kind == "esc50":
                record = prepare_esc50(ds, data, mirror, say)
                unverified += record["unverified"]
            else:
                record = prepare_audiocaps(ds, data, mirror, audio, say, selection)
            if record is not None:
                say(
                    f"{name}: {record['clips_present']} of {record['clips_expected']} clips "
                    f"present, {record['clips_missing']} missing, {record['extra_files']} "
                    f"extra file(s); present-list sha256 {record['present_sha256']}; "
                    f"prepared {data / name}"
                )
                if "caption_selection" in record:
                    sel = record["caption_selection"]
                    say(
                        f"{name}: caption selection {sel['rule']}: {sel['captions']} caption(s), "
                        f"caption-id list sha256 {sel['caption_ids_sha256']}"
                    )
            continue
        spec = models[name]
        for fetched in hub.fetch_model(spec, cache):
            say(hub.summary_line(fetched))
            if fetched.file in spec.weights and spec.weights[fetched.file] == PLACEHOLDER:
                unverified.append(
                    f"{name}: {fetched.file} has no published SHA-256 in the registry; this "
                    f"download's is {fetched.sha256}: once verified, record it in a registry "
                    "file (extract refuses it until then)"
                )
        for s in spec.support:
            if s not in support:
                raise UserError(
                    f"names support repository {s!r}, which no registry defines",
                    source=spec.registry,
                    key=f"checkpoints.{name}.support",
                )
            if s not in wanted_support:
                wanted_support.append(s)
    for s in wanted_support:
        files = hub.fetch_support(support[s], cache)
        say(
            f"{s}: {support[s].repo}@{support[s].revision[:12]}: {len(files)} file(s) "
            "(pinned by revision; refs/main set to it for laion-clap's unpinned loads)"
        )
    for line in unverified:
        say(f"UNVERIFIED {line}")
    if unverified:
        return EXIT_CHECK_FAILED
    say("fetch: done; every file with a published hash matched it")
    return EXIT_OK

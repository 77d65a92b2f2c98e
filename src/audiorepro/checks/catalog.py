"""What can be evaluated here: the registered checkpoints, datasets, profiles and studies, each
with its pins and whether it is on this machine (``audiorepro list``).

Nothing here downloads or loads a model: a checkpoint counts as fetched when every weight file
of its pinned revision is in the hub cache (or, for a laion file, where the registry or
``AUDIOREPRO_CHECKPOINT_DIR`` puts it), a dataset when ``DATA/<name>/dataset.json`` exists.
The SHA-256 of a file is not checked here (``fetch`` and every load do that): ``list`` says
what is present, not that it is intact.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.fetch.datasets import Dataset, bundled_datasets, read_datasets
from audiorepro.formats.coverage import RECORD_NAME
from audiorepro.metrics.profiles import registered_profiles
from audiorepro.models.encoder_specs import (
    code_identity,
    missing_imports,
    plugin_names,
    plugin_spec,
)
from audiorepro.models.registry import ModelSpec, load_registry, weight_files
from audiorepro.specs.study import load_study

#: What ``audiorepro list`` can list, in the order of its help text.
WHAT = ("checkpoints", "datasets", "profiles", "studies")


@dataclass(frozen=True)
class CatalogEntry:
    """One line of ``audiorepro list``: a name, what it is, how it is pinned, and its state
    here (with the command that gets it when it is not here)."""

    name: str
    description: str
    pins: str
    state: str

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "description": self.description,
            "pins": self.pins,
            "state": self.state,
        }


def _known(hashes: Iterable[str]) -> tuple[int, int]:
    values = list(hashes)
    return sum(1 for h in values if h != PLACEHOLDER), len(values)


def hub_cache(cache: Path | None) -> Path:
    """The hub cache folder huggingface_hub reads (``--cache``, ``HF_HUB_CACHE``,
    ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``)."""
    if cache is not None:
        return cache
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(Path.home(), ".cache", "huggingface")
    return Path(home) / "hub"


def _snapshot(cache: Path, repo: str, revision: str | None) -> Path:
    return cache / f"models--{repo.replace('/', '--')}" / "snapshots" / str(revision)


def checkpoint_present(spec: ModelSpec, cache: Path) -> bool:
    if spec.format == "laion":
        if Path(spec.location).is_file():
            return True
        if spec.hub_repo is None:
            return False
        return (_snapshot(cache, spec.hub_repo, spec.revision) / Path(spec.location).name).is_file()
    if not spec.is_hub:
        return Path(spec.location).is_dir()
    folder = _snapshot(cache, spec.location, spec.revision)
    names = list(spec.weights) or ["config.json"]
    return all((folder / name).is_file() for name in names)


def encoder_entry(spec: ModelSpec) -> CatalogEntry:
    """A registered user encoder (``py``, ``hear``): its module or file, factory and how many
    weight files it pins; present when its module is found (nothing is imported) and every
    weight file the entry locates is here."""
    weights = _known(spec.weights.values())
    target = Path(spec.location).name if spec.location.endswith(".py") else spec.location
    pins = target + (f":{spec.factory}" if spec.factory else "")
    pins += f"; weights hashed {weights[0]}/{weights[1]}"
    return CatalogEntry(spec.name, f"{spec.format} encoder", pins, _encoder_state(spec))


def _encoder_state(spec: ModelSpec) -> str:
    """Here when its source is found, every module it imports is installed (nothing is
    imported: resemblyzer's wrapper ships with the kit, resemblyzer itself may not) and every
    weight file the entry locates is here."""
    try:
        user = spec.user
        assert user is not None
        code_identity(user)  # the source is found without importing it
        missing = missing_imports(user)
        if missing:
            return f"not here: it imports {', '.join(missing)}, which is not installed"
        here = all(p.is_file() for p in weight_files(spec).values())
    except UserError:
        here = False
    return "here" if here else "not here: install its module or put its files in place"


def plugin_entry(name: str) -> CatalogEntry:
    """An installed encoder plugin (entry point group ``audiorepro.encoders``)."""
    try:
        user = plugin_spec(name)
    except UserError as exc:
        return CatalogEntry(name, "encoder plugin", "", f"cannot be used: {exc}")
    assert user is not None
    pins = f"{user.target}:{user.factory}; weights named by the encoder"
    spec = ModelSpec(name, "py", user.target, factory=user.factory, plugin=name)
    return CatalogEntry(name, "encoder plugin", pins, _encoder_state(spec))


def checkpoint_entry(spec: ModelSpec, cache: Path) -> CatalogEntry:
    """A registered checkpoint: its revision, how many of its files have a published SHA-256,
    and whether its weights are here (a user's encoder: :func:`encoder_entry`)."""
    if spec.user is not None:
        return encoder_entry(spec)
    weights = _known(spec.weights.values())
    files = _known(spec.files.values())
    where = spec.location
    if spec.format == "laion":
        file = Path(spec.location).name
        where = file if spec.hub_repo is None else f"{spec.hub_repo}/{file}"
    revision = "" if spec.revision is None else f" @{spec.revision[:12]}"
    pins = f"{where}{revision}; "
    pins += f"weights hashed {weights[0]}/{weights[1]}"
    if files[1]:
        pins += f", other files {files[0]}/{files[1]}"
    state = (
        "fetched"
        if checkpoint_present(spec, cache)
        else f"not fetched: audiorepro fetch {spec.name}"
    )
    return CatalogEntry(spec.name, spec.format + " checkpoint", pins, state)


def dataset_entry(ds: Dataset, data: Path) -> CatalogEntry:
    """A registered dataset: its size, how many of its files have a published hash, and
    whether it is prepared under ``data``."""
    known, total = _known(f.hash for f in ds.files)
    size = "" if ds.clips is None else f"{ds.clips} clips"
    if ds.captions_per_clip is not None:
        size += f" x {ds.captions_per_clip} captions"
    pins = f"{size}; files hashed {known}/{total}" if size else f"files hashed {known}/{total}"
    if ds.commit is not None:
        pins += f"; source commit {ds.commit[:12]}"
    prepared = (data / ds.name / RECORD_NAME).is_file()
    command = f"audiorepro fetch {ds.name} --data {data}"
    if ds.kind == "audiocaps":
        # One caption per clip: the published AudioCaps protocol (fetch's default is all five).
        command += " --audio YOUR_CLIPS --caption-selection first-id"
    state = f"prepared in {data / ds.name}" if prepared else f"not fetched: {command}"
    return CatalogEntry(ds.name, f"{ds.kind} dataset", pins, state)


def profile_entries() -> list[CatalogEntry]:
    """Every metric profile, with the dumps it applies to."""
    applies = {"retrieval": "retrieval dumps", "zeroshot": "zero-shot dumps"}
    # Retrieval ones first, then zero-shot, each in registration order.
    ordered = (*registered_profiles("retrieval"), *registered_profiles("zeroshot"))
    return [CatalogEntry(p.name, applies[p.kind], "", p.origin) for p in ordered]


def study_entries(folder: Path) -> list[CatalogEntry]:
    """The bundled demo and every ``*.toml`` study in ``folder`` (a broken one says why)."""
    rows = [CatalogEntry("demo", "bundled demo study", "", "audiorepro reproduce")]
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            study = load_study(path, strict=False)
        except UserError as exc:
            rows.append(CatalogEntry(path.stem, "study", "", f"cannot be read: {exc}"))
            continue
        rows.append(
            CatalogEntry(
                study.name, f"{study.kind} study", str(path), f"audiorepro reproduce {path}"
            )
        )
    return rows


def catalog(
    what: str,
    *,
    registries: tuple[Path, ...] = (),
    cache: Path | None = None,
    data: Path = Path("data"),
    studies: Path = Path("studies"),
) -> list[CatalogEntry]:
    """The entries of one of :data:`WHAT`, sorted by name (the demo first among studies)."""
    if what == "checkpoints":
        hub = hub_cache(cache)
        specs = load_registry(list(registries))
        rows = {name: checkpoint_entry(spec, hub) for name, spec in specs.items()}
        for name, exc in specs.broken.items():
            rows[name] = CatalogEntry(name, "registry entry", "", f"cannot be used: {exc}")
        for name in plugin_names():
            if name not in rows:  # a registry entry of that name wins, as resolve_spec has it
                rows[name] = plugin_entry(name)
        return [rows[name] for name in sorted(rows)]
    if what == "datasets":
        datasets = read_datasets(bundled_datasets())
        return [dataset_entry(datasets[name], data) for name in sorted(datasets)]
    if what == "profiles":
        return profile_entries()
    if what == "studies":
        return study_entries(studies)
    raise UserError(f"is {what!r}; expected one of {', '.join(WHAT)}", key="WHAT")

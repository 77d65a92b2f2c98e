"""The checkpoint registry: which weights a model name means, proven by SHA-256.

A registry is a TOML file (schema ``audiorepro.checkpoints/1``). The bundled one
(``audiorepro/data/checkpoints.toml``) names the public CLAP checkpoints; ``--registry FILE``
adds entries (``audiorepro tiny-models`` writes one). An entry::

    [checkpoints."tiny-hf"]
    format = "hf"                     # or "laion"
    path = "tiny-hf"                  # hf: a local folder (relative to this file) ...
    # repo = "laion/clap-htsat-fused" # ... or a hub repo with a full commit revision
    # revision = "<40 hex digits>"
    hub_cache = "hub"                 # optional: tokenizers / text stand-ins for offline use
    [checkpoints."tiny-hf".weights]   # every file whose bytes matter -> SHA-256
    "model.safetensors" = "9f86d0..."
    [checkpoints."tiny-hf".architecture]
    enable_fusion = true
    amodel = "HTSAT-tiny"
    tmodel = "roberta"
    [checkpoints."tiny-hf".preprocessing]
    frequency_min = 50.0              # any setting of audiorepro.specs.settings

A laion entry names its checkpoint with ``file`` (relative to the registry's folder, or to
``$AUDIOREPRO_CHECKPOINT_DIR``) and its hash in ``weights``; with ``repo`` and ``revision`` it
is also found in the hub cache, where ``audiorepro fetch`` puts it. Optional tables:
``files`` (the other files a model needs, each with its SHA-256 or the placeholder: pinned by
the revision only), ``sizes`` (bytes), and ``support`` (names of top-level ``[support.NAME]``
hub repositories the model's library loads by itself, fetched at their pinned revision; see
:func:`read_support`). A hash (or revision) not yet
known is written as :data:`PLACEHOLDER`; such an entry cannot be loaded until someone records
the value of a verified download. Loading hashes every listed file first and refuses any
mismatch.

A ``py`` entry names a user's encoder (:mod:`audiorepro.models.encoder_specs`): ``module``
(an importable module) or ``path`` (a ``.py`` file relative to the registry), and ``factory``;
its ``weights`` are the SHA-256 of the files its ``weight_files()`` names (by file name),
checked once the factory returns, before any clip is embedded. A ``hear`` entry names a HEAR
2021 module with ``module`` and its weights with ``file`` (given to ``load_model``), hashed
and checked before the module is imported::

    [checkpoints."my-encoder"]
    format = "py"
    path = "my_encoder.py"            # or module = "mypkg.encoders"
    factory = "make"
    [checkpoints."my-encoder".weights]
    "my_encoder.npz" = "3c1f..."

Specs on the command line: a registry name, ``hf:<repo>@<40-hex commit>`` (a hub model: the
commit is required, so that the weights are pinned), ``hf:<local folder>``,
``laion:<checkpoint path>`` (architecture and preprocessing then come from the defaults and
options; the hashes are computed and recorded, not verified), ``py:MODULE:FACTORY``,
``py:PATH.py:FACTORY``, ``hear:MODULE[:WEIGHTS]`` or an installed encoder plugin's name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.core.io import read_toml
from audiorepro.core.paths import check_relative, relative_name, repo_error
from audiorepro.models.encoder_specs import UserSpec, parse_user_spec, plugin_spec
from audiorepro.models.offline import require_hub_cache_in_container
from audiorepro.specs.registry import SCHEMA, EntrySpec, RegistryFile
from audiorepro.specs.schema import validate
from audiorepro.specs.settings import Preprocessing, parse_bool, preprocessing_from_table

FORMATS = ("hf", "laion", "py", "hear")
#: The formats whose encoder is a user's code (:mod:`audiorepro.models.user_encoders`).
USER_FORMATS = ("py", "hear")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class Architecture:
    enable_fusion: bool = False
    amodel: str = "HTSAT-tiny"
    tmodel: str = "roberta"

    def to_json(self) -> dict[str, Any]:
        return {"enable_fusion": self.enable_fusion, "amodel": self.amodel, "tmodel": self.tmodel}


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: where its files are, what they must hash to, how to preprocess."""

    name: str
    format: str
    location: str
    revision: str | None = None
    weights: dict[str, str] = field(default_factory=dict)
    architecture: Architecture = field(default_factory=Architecture)
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    hub_cache: Path | None = None
    registry: str | None = None
    #: Other files the model needs (config, tokenizer, preprocessor): SHA-256 or PLACEHOLDER.
    files: dict[str, str] = field(default_factory=dict)
    #: Sizes in bytes, where known.
    sizes: dict[str, int] = field(default_factory=dict)
    #: ``[support.NAME]`` repositories the model's library loads by itself.
    support: tuple[str, ...] = ()
    #: A laion checkpoint's hub repository (its ``revision`` pins the commit), for fetch.
    hub_repo: str | None = None
    #: ``py``: the factory in the module (``location``: a module name or a ``.py`` path).
    factory: str | None = None
    #: ``hear``: the weights file given to ``load_model`` (absolute), if any.
    hear_weights: str | None = None
    #: The entry point's name, for an installed encoder plugin.
    plugin: str | None = None

    @property
    def user(self) -> UserSpec | None:
        """The user's encoder this spec names (``py``, ``hear``), or None for CLAP."""
        if self.format == "py":
            return UserSpec("py", self.location, self.factory, plugin=self.plugin)
        if self.format == "hear":
            return UserSpec("hear", self.location, weights=self.hear_weights)
        return None

    @property
    def is_hub(self) -> bool:
        return self.format == "hf" and not Path(self.location).exists()


def bundled_registry() -> Path:
    return Path(str(resources.files("audiorepro") / "data" / "checkpoints.toml"))


def _user_entry(name: str, entry: EntrySpec, *, source: Path) -> ModelSpec:
    """A ``py`` or ``hear`` entry: its module or file, factory and weights (checked here
    without importing anything)."""

    def fail(key: str, message: str) -> UserError:
        return UserError(message, source=str(source), key=f"checkpoints.{name}.{key}")

    base = source.parent
    if entry.format == "py":
        if (entry.module is None) == (entry.path is None) or entry.factory is None:
            raise fail("factory", "a py entry needs 'factory' and one of 'module' or 'path'")
        target = f"{entry.module}" if entry.path is None else str(base / entry.path)
        text = f"py:{target}:{entry.factory}"
    else:
        if entry.module is None or entry.factory is not None or entry.path is not None:
            raise fail("module", "a hear entry needs 'module' (and 'file', its weights), only")
        text = f"hear:{entry.module}" + ("" if entry.file is None else f":{base / entry.file}")
    try:
        user = parse_user_spec(text)
    except UserError as exc:
        raise fail("module" if entry.path is None else "path", str(exc)) from None
    assert user is not None
    return ModelSpec(
        name=name,
        format=entry.format,
        location=user.target,
        weights=dict(entry.weights),
        preprocessing=preprocessing_from_table(
            dict(entry.preprocessing), source=f"{source}: checkpoints.{name}.preprocessing"
        ),
        registry=str(source),
        factory=user.factory,
        hear_weights=user.weights,
    )


def _entry(name: str, entry: EntrySpec, *, source: Path) -> ModelSpec:
    src = str(source)

    def fail(key: str, message: str) -> UserError:
        return UserError(message, source=src, key=f"checkpoints.{name}.{key}")

    if entry.format in USER_FORMATS:
        return _user_entry(name, entry, source=source)
    if entry.module is not None or entry.factory is not None:
        raise fail("module", "'module' and 'factory' belong to py and hear entries")
    base = source.parent
    if entry.repo is not None:
        tables: dict[str, dict[str, Any]] = {
            "weights": entry.weights,
            "files": entry.files,
            "sizes": entry.sizes,
        }
        _check_hub_names(entry.repo, tables, fail)
    if entry.format == "hf":
        if (entry.repo is None) == (entry.path is None):
            raise fail("repo", "an hf entry needs exactly one of 'repo' (hub) or 'path' (folder)")
        if entry.repo is not None:
            location = entry.repo
            if entry.revision is None:
                raise fail(
                    "revision", "a hub entry needs the full commit revision it was verified at"
                )
        else:
            assert entry.path is not None
            location = str((base / entry.path).resolve())
    else:
        if entry.file is None:
            raise fail("file", "a laion entry needs 'file', the checkpoint's file name or path")
        location = _laion_file(entry.file, base)
        if entry.repo is not None and not (entry.revision and _COMMIT.match(entry.revision)):
            raise fail("revision", "a laion entry with a hub 'repo' needs its 40-hex commit")
    prep = preprocessing_from_table(
        dict(entry.preprocessing), source=f"{src}: checkpoints.{name}.preprocessing"
    )
    arch = entry.architecture
    return ModelSpec(
        name=name,
        format=entry.format,
        location=location,
        revision=entry.revision,
        weights=dict(entry.weights),
        architecture=Architecture(arch.enable_fusion, arch.amodel, arch.tmodel),
        preprocessing=prep,
        hub_cache=None if entry.hub_cache is None else (base / entry.hub_cache).resolve(),
        registry=src,
        files=dict(entry.files),
        sizes=dict(entry.sizes),
        support=tuple(entry.support),
        hub_repo=entry.repo if entry.format == "laion" else None,
    )


def _check_hub_names(
    repo: str, tables: dict[str, dict[str, Any]], fail: Callable[[str, str], UserError]
) -> None:
    """A hub entry's repository id and file names become paths in the hub cache: each must
    stay inside it (no ``..``, no absolute path)."""
    why = repo_error(repo)
    if why is not None:
        raise fail("repo", f"is {repo!r}, which {why}")
    for table, names in tables.items():
        for name in sorted(names):
            why = relative_name(name)
            if why is not None:
                raise fail(
                    f"{table}.{name}",
                    f"file name {name!r} {why}; expected a relative path inside the repository",
                )


def _laion_file(file: str, base: Path) -> str:
    candidate = base / file
    env_dir = os.environ.get("AUDIOREPRO_CHECKPOINT_DIR")
    if not candidate.exists() and env_dir:
        candidate = Path(env_dir) / Path(file).name
    return str(candidate.resolve())


class Registry(dict[str, ModelSpec]):
    """The registry's entries by name, and its ``broken`` ones: an entry that cannot be used
    here (its module is not importable, a required key is missing) fails only the commands
    that name it, with its one line; the file's other entries stay usable."""

    def __init__(self, entries: dict[str, ModelSpec] | None = None) -> None:
        super().__init__(entries or {})
        self.broken: dict[str, UserError] = {}

    def add(self, other: Registry) -> None:
        """``other``'s entries over these (a later file's entry, broken or not, wins)."""
        for name in other:
            self.broken.pop(name, None)
        for name in other.broken:
            self.pop(name, None)
        self.update(other)
        self.broken.update(other.broken)


def read_registry(path: str | Path) -> Registry:
    """A registry file's entries; the file itself (TOML, schema, keys) is checked whole, each
    entry's own problems are kept for the commands that use it (:class:`Registry`)."""
    path = Path(path)
    data = read_toml(path, what="a checkpoint registry .toml", schema=SCHEMA)
    spec = validate(RegistryFile, data, source=str(path))
    out = Registry()
    for name, entry in spec.checkpoints.items():
        try:
            out[name] = _entry(name, entry, source=path)
        except UserError as exc:
            out.broken[name] = exc
    return out


@dataclass(frozen=True)
class SupportRepo:
    """A hub repository a model's library loads by itself (laion-clap's text models)."""

    name: str
    repo: str
    revision: str
    allow: tuple[str, ...]
    weights_one_of: tuple[str, ...] = ()
    provenance: str = ""
    registry: str | None = None


def read_support(path: str | Path) -> dict[str, SupportRepo]:
    """The ``[support.NAME]`` tables of a registry file (each: repo, 40-hex revision, allow
    patterns, optional ``weights_one_of``: the first of these names the revision has)."""
    path = Path(path)
    data = read_toml(path, what="a checkpoint registry .toml", schema=SCHEMA)
    spec = validate(RegistryFile, data, source=str(path))
    for name, s in spec.support.items():
        why = repo_error(s.repo)
        if why is not None:
            raise UserError(f"is {s.repo!r}, which {why}", source=path, key=f"support.{name}.repo")
        for i, w in enumerate(s.weights_one_of):
            check_relative(
                w, what="file name", source=path, key=f"support.{name}.weights_one_of[{i}]"
            )
    return {
        name: SupportRepo(
            name=name,
            repo=s.repo,
            revision=s.revision,
            allow=tuple(s.allow),
            weights_one_of=tuple(s.weights_one_of),
            provenance=s.provenance or "",
            registry=str(path),
        )
        for name, s in spec.support.items()
    }


def load_support(extra: list[Path] | tuple[Path, ...] = ()) -> dict[str, SupportRepo]:
    """The bundled ``[support.*]`` repositories, then each ``--registry`` file's."""
    support = read_support(bundled_registry())
    for path in extra:
        support.update(read_support(path))
    return support


def load_registry(extra: list[Path] | tuple[Path, ...] = ()) -> Registry:
    """The bundled registry, then each ``--registry`` file (later entries win)."""
    registry = read_registry(bundled_registry())
    for path in extra:
        registry.add(read_registry(path))
    return registry


def _from_user(spec: str, user: UserSpec) -> ModelSpec:
    return ModelSpec(
        name=spec,
        format=user.format,
        location=user.target,
        factory=user.factory,
        hear_weights=user.weights,
        plugin=user.plugin,
    )


def resolve_spec(spec: str, registry: dict[str, ModelSpec]) -> ModelSpec:
    """A registry name, ``hf:<repo>@<40-hex commit>``, ``hf:<folder>``, ``laion:<path>``,
    ``py:MODULE:FACTORY``, ``py:PATH.py:FACTORY``, ``hear:MODULE[:WEIGHTS]`` or an installed
    encoder plugin's name (checked without importing the user's code)."""
    if spec in registry:
        return registry[spec]
    broken = getattr(registry, "broken", {})
    if spec in broken:
        raise broken[spec]
    user = parse_user_spec(spec)
    if user is not None:
        return _from_user(spec, user)
    kind, sep, rest = spec.partition(":")
    if sep and kind == "hf" and rest:
        location, revision = rest, None
        if "@" in rest:
            location, _, revision = rest.rpartition("@")
        path = Path(location)
        if os.path.lexists(path):  # a symlink loop too: the preflight names it
            return ModelSpec(name=spec, format="hf", location=_absolute(path), revision=revision)
        if revision is None or not _COMMIT.match(revision):
            raise UserError(
                "a hub model needs its full 40-hex commit revision (hf:<repo>@<commit>) so that "
                "the weights are pinned; a local folder of that name does not exist either",
                key=spec,
            )
        return ModelSpec(name=spec, format="hf", location=location, revision=revision)
    if sep and kind == "laion" and rest:
        return ModelSpec(name=spec, format="laion", location=_absolute(Path(rest)))
    plugin = None if sep else plugin_spec(spec)
    if plugin is not None:
        return _from_user(spec, plugin)
    known = ", ".join(sorted(registry))
    raise UserError(
        f"is neither a registry name ({known}), an installed encoder plugin, "
        "hf:<repo>@<40-hex commit>, hf:<folder>, laion:<checkpoint path>, py:MODULE:FACTORY, "
        "py:PATH.py:FACTORY nor hear:MODULE[:WEIGHTS]",
        key=spec,
    )


def _absolute(path: Path) -> str:
    """``path`` resolved; a symlink loop (which ``resolve`` raises on) kept as it is, absolute,
    for the checkpoint preflight to refuse in one line."""
    try:
        return str(path.resolve())
    except (RuntimeError, OSError):
        return str(path.absolute())


def with_architecture(spec: ModelSpec, items: tuple[str, ...], *, source: str) -> ModelSpec:
    """Apply ``enable_fusion=...``, ``amodel=...``, ``tmodel=...`` items to a spec."""
    changes: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if key == "enable_fusion":
            try:
                changes[key] = parse_bool(value)
            except ValueError as exc:
                raise UserError(f"{value!r} is not valid: {exc}", source=source, key=key) from None
        else:
            changes[key] = value
    if not changes:
        return spec
    return replace(spec, architecture=replace(spec.architecture, **changes))


def weight_files(spec: ModelSpec) -> dict[str, Path]:
    """The local files of a spec's weights (hub snapshots from the local cache only; a
    ``hear`` spec's weights file; a ``py`` encoder names its own, once built)."""
    if spec.format == "hear":
        path = None if spec.hear_weights is None else Path(spec.hear_weights)
        return {} if path is None else {path.name: path}
    if spec.format == "py":
        # A registry entry's weights beside the registry file, checked before the module
        # is imported; the others (inside an installed package) once the factory names them.
        base = None if spec.registry is None else Path(spec.registry).parent
        here = {n: base / n for n in spec.weights if base is not None and (base / n).is_file()}
        return dict(sorted(here.items()))
    if spec.format == "laion":
        path = Path(spec.location)
        if not path.is_file() and spec.hub_repo is not None:
            require_hub_cache_in_container(spec.name, spec.hub_cache)
            path = _laion_from_hub_cache(spec) or path
        if not path.is_file():
            raise UserError(
                "checkpoint file not found (set AUDIOREPRO_CHECKPOINT_DIR or give laion:<path>)",
                source=path,
                key=spec.name,
            )
        return {path.name: path}
    if spec.is_hub:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        require_hub_cache_in_container(spec.name, spec.hub_cache)
        try:
            folder = Path(
                snapshot_download(spec.location, revision=spec.revision, local_files_only=True)
            )
        except (LocalEntryNotFoundError, OSError, ValueError) as exc:
            raise UserError(
                f"revision {spec.revision} of {spec.location} is not in the local hub cache "
                f"(audiorepro never downloads; {type(exc).__name__})",
                key=spec.name,
            ) from None
    else:
        folder = Path(spec.location)
        if not folder.is_dir():
            raise UserError("model folder not found", source=folder, key=spec.name)
    names = {**spec.weights, **spec.files} or {
        p.name: ""
        for p in folder.iterdir()
        if p.is_file() and p.suffix in (".safetensors", ".json", ".bin", ".txt")
    }
    return {name: folder / name for name in sorted(names)}


def _laion_from_hub_cache(spec: ModelSpec) -> Path | None:
    """Where ``fetch`` put a laion checkpoint: the hub cache's snapshot of its pinned commit."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        spec.hub_repo or "", Path(spec.location).name, revision=spec.revision
    )
    return Path(found) if isinstance(found, str) else None


def verify_weights(spec: ModelSpec) -> dict[str, str]:
    """SHA-256 of every weight file; a mismatch with the registry is an error, before loading."""
    if spec.revision == PLACEHOLDER:
        raise UserError(
            f"the registry has no verified revision yet ({PLACEHOLDER!r}): record the commit "
            "of a verified download in a registry file and pass --registry",
            source=spec.registry,
            key=f"checkpoints.{spec.name}.revision",
        )
    return check_recorded(spec, weight_files(spec))


def check_recorded(spec: ModelSpec, files: dict[str, Path]) -> dict[str, str]:
    """SHA-256 of each of ``files`` (by name), checked against the entry's recorded
    ``files`` and ``weights``: a file it records and ``files`` lacks, or another hash, is one
    line. A spec outside a registry records nothing: its hashes are computed and kept."""
    hashes: dict[str, str] = {}
    for name, path in files.items():
        if not path.is_file():
            raise UserError(
                "weight file listed in the registry is missing", source=path, key=spec.name
            )
        hashes[name] = sha256_file(path)
    for table, recorded in (("files", spec.files), ("weights", spec.weights)):
        absent = sorted(set(recorded) - set(hashes))
        if absent:
            raise UserError(
                f"records {absent[0]!r}, which is not among the model's weight files "
                f"({', '.join(sorted(hashes)) or 'none'})",
                source=spec.registry,
                key=f"checkpoints.{spec.name}.{table}.{absent[0]}",
            )
    for name, expected in spec.files.items():
        # Files without a published hash are pinned by the revision alone.
        if expected not in (PLACEHOLDER, hashes[name]):
            raise UserError(
                f"SHA-256 of {files[name]} is {hashes[name]}, the registry expects {expected}",
                source=spec.registry,
                key=f"checkpoints.{spec.name}.files.{name}",
            )
    for name, expected in spec.weights.items():
        got = hashes[name]
        if expected == PLACEHOLDER:
            raise UserError(
                f"the registry has no verified hash for {name} yet ({PLACEHOLDER!r}); its SHA-256 "
                f"here is {got}: once this download is verified, record it in a registry file "
                "and pass --registry",
                source=spec.registry,
                key=f"checkpoints.{spec.name}.weights.{name}",
            )
        if got != expected:
            raise UserError(
                f"SHA-256 of {files[name]} is {got}, the registry expects {expected}: refusing "
                "to load a checkpoint that is not the registered one",
                source=spec.registry,
                key=f"checkpoints.{spec.name}.weights.{name}",
            )
    return hashes

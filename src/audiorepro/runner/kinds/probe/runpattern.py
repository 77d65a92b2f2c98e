"""Probe runs declared by a pattern over the study's tree (``[[runs]]``), not one by one.

A study that keeps its runs as folders of one layout (the published probe module's
``probes/{phase}/{model}/{variant}``) declares them once::

    root = "tree"                                   # the tree, relative to the study file

    [[runs]]
    pattern = "probes/{phase}/{model}/{variant}"    # a run's folder under root, named parts
    id = "probe/{phase}/{model}/{variant}"          # templates over the parts
    model = "{model.label} / {variant}"             # {part.label}: the part's label
    values = { phase = ["legacy", "gemini"], variant = ["linear", "mlp"] }
    models = { part = "model", file = "study.json", list = "models", field = "id" }
    labels = { model = { clapv2_s = "CLAPv2 S" } }  # part -> value -> label
    attributes = { phase = "{phase}", kind = "frozen probe", head = "{variant}" }
    config = ["config.json", "COMPLETE.json"]       # several files, merged (first key wins)
    [runs.metrics]                                  # split -> file in the run's folder
    test = "test_metrics.json"
    validation = { file = "validation_metrics.json", optional = true }
    public = { file = "../../../bench/public_scores.json", at = "models.{size}" }

Every combination of the parts' values is a run, in the pattern's order (the first part
outermost). A part's values come from ``values`` or, for ``models.part``, from a file of the
tree (``study.json``'s ``models[].id``): data a pipeline wrote, so a value that could leave
its folder (``/``, ``..``) is refused naming that file. No SHA-256 is typed: the files found
are hashed when read, recorded in the manifest, and pinned by a lock file (``audiorepro
lock``) where the study keeps one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.core.paths import is_inside
from audiorepro.formats.keypath import KeyPathError, locate
from audiorepro.runner.kinds.probe.measurements import rename_steps
from audiorepro.specs.schema import Spec

_PART = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(\.label)?\}")


class FileAt(Spec):
    """A saved file of each run: its path in the run's folder, optionally a sub-table of it."""

    file: str = Field(description="a path relative to the run's folder (a template)")
    at: str | None = Field(None, description="a key path to the sub-table the split reads")
    optional: bool = Field(False, description="true: a run without this file lacks the split")
    rename: dict[str, str] = Field(
        default_factory=dict,
        description="key path (``*``: every key, ``[*]``: every item) -> the key's new name",
    )


class ModelList(Spec):
    """Where a part's values are kept in the tree: a list of tables in a JSON file."""

    part: str = Field(description="the pattern's part these values fill")
    file: str = Field(description="a JSON file, relative to root")
    list: str = Field(description="a key path to the list in that file")
    field: str = Field(description="the field of each item that is the part's value")


class RunPatternSpec(Spec):
    """``[[runs]]``: a family of runs, one per combination of the pattern's parts."""

    pattern: str = Field(description="a run folder under root, with {part} names")
    id: str = Field(description="the run id, a template over the parts")
    model: str = Field(description="the table row, a template ({part} or {part.label})")
    family: str | None = Field(None, description="the model family, a template")
    values: dict[str, list[str]] = Field(
        default_factory=dict, description="a table of part -> its values"
    )
    models: ModelList | None = Field(None, description="a part's values from a file of the tree")
    labels: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="a table of part -> value -> label"
    )
    attributes: dict[str, str] = Field(
        default_factory=dict, description="a table of attribute -> template"
    )
    metrics: dict[str, str | FileAt] = Field(
        default_factory=dict, description="a table of split -> file (or {file, at, optional})"
    )
    config: list[str] = Field(default_factory=list, description="a list of config JSON files")


@dataclass(frozen=True)
class PatternFile:
    """One saved file of an expanded run (not hashed yet: the loader hashes what it finds)."""

    path: Path
    at: str | None = None
    rename: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PatternRun:
    """One run a ``[[runs]]`` pattern declares."""

    id: str
    model: str
    family: str
    attributes: dict[str, str]
    metrics: dict[str, PatternFile]
    config: tuple[Path, ...]


def fill(template: str, parts: dict[str, str], labels: dict[str, dict[str, str]]) -> str:
    """A template with each ``{part}`` replaced by its value, ``{part.label}`` by its label
    (the value where none is given).

    >>> fill("{m.label} / {v}", {"m": "s", "v": "mlp"}, {"m": {"s": "CLAPv2 S"}})
    'CLAPv2 S / mlp'
    """

    def one(m: re.Match[str]) -> str:
        value = parts[m[1]]
        return labels.get(m[1], {}).get(value, value) if m[2] else value

    return _PART.sub(one, template)


def _model_values(root: Path, base: Path, spec: ModelList, source: Path, key: str) -> list[str]:
    path = in_root(root, base / spec.file, source, f"{key}.models.file")
    doc = parse_json(read_text(path, what="a JSON file of the study's tree"), source=path)
    try:
        found = locate(doc, spec.list)
    except KeyPathError as exc:
        raise UserError(str(exc), source=path, key=spec.list) from None
    items = None if found is None else found[1]
    if not isinstance(items, list):
        raise UserError(f"is not a list; expected a list of {{{spec.field}: ...}} tables",
                        source=path, key=spec.list)  # fmt: skip
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise UserError(f"is {type(item).__name__}; expected a table with {spec.field!r}",
                            source=path, key=f"{spec.list}[{i}]")  # fmt: skip
        value = item.get(spec.field)
        where = f"{spec.list}[{i}].{spec.field}"
        if not isinstance(value, str):
            raise UserError(f"is {type(value).__name__}; expected a name (a folder of the tree)",
                            source=path, key=where)  # fmt: skip
        if not _safe(value):
            raise UserError("expected a name without '/' (a folder of the tree)", source=path,
                            key=where)  # fmt: skip
        out.append(value)
    return out


def _safe(value: str) -> bool:
    return bool(value) and "/" not in value and "\\" not in value and value not in (".", "..")


def _check_parts(spec: RunPatternSpec, source: Path, key: str) -> list[str]:
    """The pattern's parts, in order; every template names only these (exit 2 otherwise)."""
    parts = [m[1] for m in _PART.finditer(spec.pattern)]
    given = set(spec.values) | ({spec.models.part} if spec.models else set())
    for part in parts:
        if part not in given:
            raise UserError(f"names part {{{part}}}, which has no values (values or models)",
                            source=source, key=f"{key}.pattern")  # fmt: skip
    templates = {"id": spec.id, "model": spec.model, "family": spec.family or ""}
    templates |= {f"attributes.{k}": v for k, v in spec.attributes.items()}
    templates |= {f"metrics.{k}": v if isinstance(v, str) else v.file + (v.at or "")
                  for k, v in spec.metrics.items()}  # fmt: skip
    for where, text in templates.items():
        for m in _PART.finditer(text):
            if m[1] not in parts:
                raise UserError(f"names part {{{m[1]}}}, which the pattern does not have",
                                source=source, key=f"{key}.{where}")  # fmt: skip
    for split, ref in spec.metrics.items():
        for path, new in ref.rename.items() if isinstance(ref, FileAt) else []:
            try:
                rename_steps(path)
            except ValueError as exc:
                where = f"{key}.metrics.{split}.rename"
                raise UserError(str(exc), source=source, key=where) from None
            if not new or "." in new:
                raise UserError(f"renames {path!r} to {new!r}; expected a key without dots",
                                source=source, key=f"{key}.metrics.{split}.rename")  # fmt: skip
    for part, values in spec.values.items():
        for j, value in enumerate(values):
            if not _safe(value):
                raise UserError("expected a name without '/' (a folder of the tree)",
                                source=source, key=f"{key}.values.{part}[{j}]")  # fmt: skip
    return parts


def in_root(root: Path, path: Path, source: Path, key: str) -> Path:
    """``path`` resolved, if it stays inside the study's ``root`` (symbolic links followed);
    else one line: a tree sent for audit must not make audiorepro read, hash and copy into its
    output a file from elsewhere on the machine (``root`` can name a folder that holds both)."""
    resolved = path.resolve()
    if not is_inside(root, resolved):
        raise UserError(
            f"{path} leads to {resolved}, outside the study's root {root.resolve()}; refused "
            "(a root above both holds it)",
            source=source,
            key=key,
        )
    return resolved


def expand(
    spec: RunPatternSpec,
    root: Path,
    source: Path,
    key: str,
    *,
    base: Path | None = None,
    implied: Mapping[str, str] | None = None,
    renames: Mapping[str, Mapping[str, str]] | None = None,
) -> list[PatternRun]:
    """Every run of one ``[[runs]]`` table, in the pattern's order. ``base``: the folder the
    pattern and the model list are relative to (``study_dir``; default root); ``implied``:
    split -> file every run reads unless its metrics name the split (an ``[[acted]]`` adapter's
    ``<corpus>_matched_adapter.json``); ``renames``: split -> the study-wide renames
    of that split's files (a file's own rename wins)."""
    base = root if base is None else base
    names = _check_parts(spec, source, key)
    choices = {part: list(values) for part, values in spec.values.items()}
    if spec.models is not None:
        choices[spec.models.part] = _model_values(root, base, spec.models, source, key)
    declared: dict[str, str | FileAt] = {
        **{s: FileAt(file=f) for s, f in (implied or {}).items()},
        **spec.metrics,
    }
    runs = []
    for combo in itertools.product(*(choices[p] for p in names)):
        parts = dict(zip(names, combo, strict=True))
        folder = base / fill(spec.pattern, parts, {})
        metrics = {}
        for split, given in declared.items():
            ref = FileAt(file=given) if isinstance(given, str) else given
            wide = dict((renames or {}).get(split, {}))
            if wide:
                ref = ref.model_copy(update={"rename": {**wide, **ref.rename}})
            path = in_root(
                root, folder / fill(ref.file, parts, {}), source, f"{key}.metrics.{split}"
            )
            if ref.optional and not path.exists():
                continue
            at = None if ref.at is None else fill(ref.at, parts, {})
            metrics[split] = PatternFile(path, at, tuple(ref.rename.items()))
        model = fill(spec.model, parts, spec.labels)
        runs.append(
            PatternRun(
                id=fill(spec.id, parts, spec.labels),
                model=model,
                family=model if spec.family is None else fill(spec.family, parts, spec.labels),
                attributes={k: fill(v, parts, spec.labels) for k, v in spec.attributes.items()},
                metrics=metrics,
                config=tuple(
                    in_root(root, folder / fill(c, parts, {}), source, f"{key}.config")
                    for c in spec.config
                ),
            )
        )
    return runs

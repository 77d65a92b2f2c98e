"""The zero-shot kind's spec: the ``kind = "zeroshot"`` study file's tables, their checks, and
the study they load into (the frame it shares with every kind: :mod:`audiorepro.specs.study`).

A zero-shot classification study has one ``[dataset]`` (an audio folder, ESC-50's metadata file
with the folds to use, the prompt template) and ``[[cell]]`` tables of models; each clip is
ranked against one prompt per class, and its published values are zero-shot metrics (profile
``zeroshot``: accuracy, top5_accuracy, balanced_accuracy) or laion-clap's names (profile
``laion-clap-zeroshot``: mean_rank, median_rank, R@1, R@5, R@10, mAP@10)::

    kind = "zeroshot"
    [dataset]
    name = "esc50-fold1"                # the table's dataset name
    audio = "data/esc50/audio"          # relative to the study file
    metadata = "data/esc50/esc50.csv"   # ESC-50's meta/esc50.csv
    folds = [1]                         # the folds evaluated
    template = "This is a sound of {class}"   # one prompt per class: {class} once

    [[cell]]
    id = "630k-audioset-best/esc50-fold1"
    model = "630k-audioset-best"        # a model spec or registry name
    registry = "registry.toml"          # optional
    settings = { batch_size = 8 }       # optional: architecture and preprocessing
    device = "cuda"                     # optional, default cpu
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from audiorepro.core.errors import UserError
from audiorepro.metrics.profile_registry import find_profile, is_canonical, reported_profiles
from audiorepro.metrics.retrieval import TiePolicy
from audiorepro.specs.published import Number
from audiorepro.specs.schema import KeyProblem, Spec, distinct_file_names, validate
from audiorepro.specs.settings import check_settings
from audiorepro.specs.study import (
    DEVICE_PATTERN,
    Published,
    RelativePath,
    Selection,
    StudyFile,
    ZeroshotCell,
    check_tolerance,
    required_path,
    study_path,
)

#: The canonical zero-shot metrics (:mod:`audiorepro.metrics.zeroshot`); a peer's zero-shot
#: profile names its own (the profile registry's ``metric_names``).
CANONICAL_ZEROSHOT_METRICS = ("accuracy", "top5_accuracy", "balanced_accuracy")


def zeroshot_profiles() -> tuple[str, ...]:
    """The profiles a zero-shot study's published values may name: the canonical one, then
    every zero-shot profile of the registry."""
    return reported_profiles("zeroshot")


def zeroshot_metrics(profile: str) -> tuple[str, ...]:
    """The metric names of a zero-shot profile (empty for a name the registry lacks)."""
    if is_canonical(profile):
        return CANONICAL_ZEROSHOT_METRICS
    found = find_profile(profile)
    return tuple(found.metric_names or ()) if found is not None else ()


def _zeroshot_profiles_schema(schema: dict[str, Any]) -> None:
    schema["enum"] = list(zeroshot_profiles())


def _known_zeroshot_profile(value: str) -> str:
    """A zero-shot profile name, or a ValueError naming the known ones."""
    names = zeroshot_profiles()
    if value not in names:
        raise ValueError(f"unknown profile {value!r}; expected one of {', '.join(names)}")
    return value


CLASS_FIELD = "{class}"


class ZeroshotDatasetSpec(Spec):
    """The clips and classes: an audio folder, ESC-50's metadata, folds, a prompt template."""

    name: str = Field(description="the dataset's name (the table's title)")
    audio: RelativePath
    metadata: RelativePath = Field(description="ESC-50's meta/esc50.csv (relative path)")
    folds: list[int] = Field(min_length=1, description="a list of folds, each 1..5")
    template: str = Field(description="the prompt template, with {class} exactly once")


class ZeroshotCellSpec(Spec):
    """One model: the spec or registry name, and how to run it."""

    id: str = Field(description="a unique cell id")
    model: str = Field(description="a model spec or registry name")
    registry: RelativePath | None = None
    settings: dict[str, Any] = Field(
        default_factory=dict, description="a table of architecture and preprocessing settings"
    )
    device: str = Field("cpu", pattern=DEVICE_PATTERN, description="cpu, cuda or cuda:N")


class ZeroshotPublishedSpec(Spec):
    """Published zero-shot values of one cell, with their tolerance and provenance."""

    cell: str = Field(description="the id of a cell of this study")
    profile: str = Field(
        "zeroshot",
        description="zeroshot or a registered zero-shot profile",
        json_schema_extra=_zeroshot_profiles_schema,
    )
    tie_policy: TiePolicy | None = Field(None, description="the tie policy of the values")
    tolerance: float = Field(ge=0, allow_inf_nan=False, description="a tolerance >= 0")
    provenance: str = Field(description="where the value was published")
    values: dict[str, Number] = Field(
        min_length=1, description="a table of metric -> published value"
    )

    _profile = field_validator("profile")(_known_zeroshot_profile)


class ZeroshotStudyFile(StudyFile):
    """A zero-shot classification study: a dataset of classes, model cells, published values."""

    kind: Literal["zeroshot"] = Field(description="the study kind")
    dataset: ZeroshotDatasetSpec
    cell: list[ZeroshotCellSpec] = Field(min_length=1, description="at least one [[cell]]")
    published: list[ZeroshotPublishedSpec] = Field(
        default_factory=list, description="a list of [[published]] tables"
    )

    @model_validator(mode="after")
    def _no_bootstrap(self) -> ZeroshotStudyFile:
        # Inherited from the common study table, but a zero-shot run computes no intervals:
        # a table given here would be silently ignored.
        if "bootstrap" in self.model_fields_set:
            raise KeyProblem(
                ("bootstrap",),
                "is not used by a zero-shot study (it computes no bootstrap intervals); "
                "expected no bootstrap table",
            )
        return self


@dataclass(frozen=True)
class ZeroshotDataset:
    name: str
    audio: Path
    metadata: Path
    folds: tuple[int, ...]
    template: str


@dataclass(frozen=True)
class ZeroshotStudy:
    """A zero-shot classification study, loaded."""

    name: str
    title: str
    source: Path
    tie_policy: TiePolicy
    dataset: ZeroshotDataset
    cells: tuple[ZeroshotCell, ...]
    published: tuple[Published, ...]
    kind: Literal["zeroshot"] = "zeroshot"
    selection: Selection | None = None

    def selected(self, selection: Selection) -> ZeroshotStudy:
        """The cells ``selection`` ran, on its device."""
        device, ran = selection.device, selection.ran
        kept = tuple(
            c if device is None else dataclasses.replace(c, device=device)
            for c in self.cells
            if c.id in ran
        )
        published = tuple(p for p in self.published if p.cell in ran)
        return dataclasses.replace(self, cells=kept, published=published, selection=selection)


def prompt(template: str, class_name: str) -> str:
    """The prompt of one class.

    >>> prompt("This is a sound of {class}", "chirping birds")
    'This is a sound of chirping birds'
    """
    return template.replace(CLASS_FIELD, class_name)


def parse_zeroshot(doc: dict[str, Any], source: Path, strict: bool) -> ZeroshotStudy:
    spec = validate(ZeroshotStudyFile, doc, source=str(source))
    d = spec.dataset
    if d.template.count(CLASS_FIELD) != 1:
        raise UserError(
            f"is {d.template!r}; expected a template with {CLASS_FIELD} exactly once",
            source=source,
            key="dataset.template",
        )
    if any(not c.isprintable() for c in d.template):
        # A prompt is one line of text: numpy's string arrays drop trailing NULs, so the dump's
        # captions would not be what was embedded.
        raise UserError(
            f"is {d.template!r}; expected printable text (no control characters)",
            source=source,
            key="dataset.template",
        )
    for i, fold in enumerate(d.folds):
        if not 1 <= fold <= 5 or fold in d.folds[:i]:
            raise UserError(
                f"is {fold}; expected distinct folds 1..5", source=source, key=f"dataset.folds[{i}]"
            )
    dataset = ZeroshotDataset(
        name=d.name,
        audio=required_path(source, "dataset.audio", d.audio, must_exist=strict),
        metadata=required_path(source, "dataset.metadata", d.metadata, must_exist=strict),
        folds=tuple(d.folds),
        template=d.template,
    )
    distinct_file_names([("dataset.name", d.name)], source=str(source), what="a dataset name")
    cells = []
    seen: set[str] = set()
    for i, c in enumerate(spec.cell):
        if c.id in seen:
            raise UserError(f"repeats cell id {c.id!r}", source=source, key=f"cell[{i}].id")
        seen.add(c.id)
        check_settings(c.settings, source=f"{source}: cell[{i}].settings")
        cells.append(
            ZeroshotCell(
                id=c.id,
                model=c.model,
                registry=study_path(source, f"cell[{i}].registry", c.registry, must_exist=True),
                settings=dict(c.settings),
                device=c.device,
            )
        )
    distinct_file_names(
        [(f"cell[{i}].id", c.id) for i, c in enumerate(cells)],
        source=str(source),
        what="a cell id",
    )
    published = []
    for i, p in enumerate(spec.published):
        where = f"published[{i}]"
        if p.cell not in seen:
            raise UserError(
                f"names {p.cell!r}, which is not a cell of this study",
                source=source,
                key=f"{where}.cell",
            )
        for metric in p.values:
            if metric not in zeroshot_metrics(p.profile):
                raise UserError(
                    f"unknown metric of profile {p.profile}; expected one of "
                    f"{', '.join(zeroshot_metrics(p.profile))}",
                    source=source,
                    key=f"{where}.values.{metric}",
                )
        check_tolerance(dict(p.values), p.tolerance, source=source, where=where)
        published.append(
            Published(
                cell=p.cell,
                profile=p.profile,
                tie_policy=p.tie_policy or spec.tie_policy,
                tolerance=p.tolerance,
                provenance=p.provenance,
                values=dict(p.values),
            )
        )
    return ZeroshotStudy(
        name=spec.name,
        title=spec.title if spec.title is not None else spec.name,
        source=source,
        tie_policy=spec.tie_policy,
        dataset=dataset,
        cells=tuple(cells),
        published=tuple(published),
    )

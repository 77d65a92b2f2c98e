"""The linear-probe kind's spec: the ``kind = "linear-probe"`` study file's tables, their checks,
and the study they load into (the frame it shares with every kind:
:mod:`audiorepro.specs.study`).

A linear-probe study trains a probe on clip embeddings fold by fold; each ``[[cell]]`` names its
embeddings (a dump, or an extraction of an audio folder by any encoder), a labels file and the
protocol; its published values are ``mean_accuracy``, ``fold/<fold>/accuracy`` and
``pooled/<accuracy|balanced_accuracy|macro_f1>``::

    kind = "linear-probe"
    [[cell]]
    id = "630k-audioset-best/esc50"
    model = "630k-audioset-best"        # the table row
    extract = { model = "630k-audioset-best", audio = "data/esc50/audio" }  # or dump, sha256
    labels = "data/esc50/meta/esc50.csv"
    labels_sha256 = "<64 hex>"
    protocol = "leave-one-fold-out"     # or { train = [...], test = [...] }
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.specs.cells import cell_published, check_hashes, dump_or_extract, unique_cells
from audiorepro.specs.published import DumpSha256, Number
from audiorepro.specs.schema import Spec, validate
from audiorepro.specs.settings import check_settings
from audiorepro.specs.study import (
    DEVICE_PATTERN,
    Bootstrap,
    FileSha256,
    Published,
    RelativePath,
    Selection,
    StudyFile,
    ZeroshotCell,
    required_path,
    study_path,
)

#: The published names of a linear-probe cell: the mean over the splits, each split's
#: accuracy (``fold/<name>/accuracy``), and the pooled predictions' classification metrics.
LINEAR_PROBE_METRIC = re.compile(
    r"^(mean_accuracy|fold/[^/]+/accuracy|pooled/(accuracy|balanced_accuracy|macro_f1))$"
)


class DeclaredSplitSpec(Spec):
    """A declared train/test split: the folds of each side (distinct, none on both)."""

    train: list[str] = Field(min_length=1, description="a list of the training folds")
    test: list[str] = Field(min_length=1, description="a list of the test folds")


class LinearProbeExtractSpec(Spec):
    """How to make a cell's clip embeddings: any model (audio is enough) over every clip of an
    audio folder or list file, through the extraction cache as an audio-only dump."""

    model: str = Field(description="a model spec or registry name")
    audio: RelativePath
    registry: RelativePath | None = None
    settings: dict[str, Any] = Field(
        default_factory=dict, description="a table of architecture and preprocessing settings"
    )
    device: str = Field("cpu", pattern=DEVICE_PATTERN, description="cpu, cuda or cuda:N")


class LinearProbeCellSpec(Spec):
    """One probe: clip embeddings (a dump, or an extraction), labels, protocol, definition."""

    id: str = Field(description="a unique cell id")
    model: str = Field(description="the model's name (the table row)")
    dump: RelativePath | None = Field(None, description="a dump with audio_embeds, audio_ids")
    sha256: FileSha256 | None = None
    extract: LinearProbeExtractSpec | None = None
    labels: RelativePath = Field(
        description="a labels CSV (file_name,label[,fold]) or ESC-50's meta/esc50.csv"
    )
    labels_sha256: DumpSha256 = Field(
        description=f"the labels file's SHA-256: 64 lowercase hex digits, or {PLACEHOLDER!r}"
    )
    folds: str = Field("fold", description="the labels file's fold column")
    protocol: Literal["leave-one-fold-out"] | DeclaredSplitSpec = Field(
        "leave-one-fold-out", description="'leave-one-fold-out' or a table {train, test}"
    )
    definition: Literal["linear-v1"] = Field("linear-v1", description="the probe definition")
    C: float = Field(1.0, gt=0, allow_inf_nan=False, description="the inverse L2 strength > 0")
    C_grid: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = Field(
        None, min_length=1, description="a grid of C chosen by inner stratified 5-fold"
    )


class LinearProbePublishedSpec(Spec):
    """Published values of one linear-probe cell, with their tolerance and provenance."""

    cell: str = Field(description="the id of a cell of this study")
    tolerance: float = Field(ge=0, allow_inf_nan=False, description="a tolerance >= 0")
    provenance: str = Field(description="where the value was published")
    values: dict[str, Number] = Field(
        min_length=1,
        description="metric -> published value: mean_accuracy, fold/<fold>/accuracy, "
        "pooled/<accuracy|balanced_accuracy|macro_f1>",
    )


class LinearProbeStudyFile(StudyFile):
    """A linear-probe study: probes trained on clip embeddings, fold by fold."""

    kind: Literal["linear-probe"] = Field(description="the study kind")
    cell: list[LinearProbeCellSpec] = Field(min_length=1, description="at least one [[cell]]")
    published: list[LinearProbePublishedSpec] = Field(
        default_factory=list, description="a list of [[published]] tables"
    )


@dataclass(frozen=True)
class LinearProbeCell:
    id: str
    model: str
    dump: Path | None
    sha256: str | None
    extract: ZeroshotCell | None  #: the model to extract with (audio, metadata: the labels)
    audio: Path | None
    labels: Path
    labels_sha256: str
    folds: str
    #: None: leave one fold out; else the declared (train folds, test folds)
    split: tuple[tuple[str, ...], tuple[str, ...]] | None
    definition: str
    c: float
    grid: tuple[float, ...] | None


@dataclass(frozen=True)
class LinearProbeStudy:
    """A linear-probe study, loaded."""

    name: str
    title: str
    source: Path
    bootstrap: Bootstrap
    cells: tuple[LinearProbeCell, ...]
    published: tuple[Published, ...]
    kind: Literal["linear-probe"] = "linear-probe"
    selection: Selection | None = None


def _lp_cell(c: LinearProbeCellSpec, i: int, source: Path, strict: bool) -> LinearProbeCell:
    where = f"cell[{i}]"
    dump_or_extract(c.dump, c.sha256, c.extract is not None, source, where)
    labels = required_path(source, f"{where}.labels", c.labels, must_exist=strict)
    dump = study_path(source, f"{where}.dump", c.dump, must_exist=False)
    if strict and c.labels_sha256 == PLACEHOLDER and labels.is_file():
        raise UserError(
            f"has no verified SHA-256 for {labels.name} yet ({PLACEHOLDER!r}); the "
            f"file here hashes to {sha256_file(labels)}: record it once verified",
            source=source,
            key=f"{where}.labels_sha256",
        )
    if strict:
        files = ((labels, c.labels_sha256, "labels_sha256"), (dump, c.sha256, "sha256"))
        check_hashes(files, source, where)
    split = None
    if isinstance(c.protocol, DeclaredSplitSpec):
        tr, te = c.protocol.train, c.protocol.test
        both = sorted(set(tr) & set(te))
        if both or len(set(tr)) != len(tr) or len(set(te)) != len(te):
            raise UserError(
                f"names fold {both[0] if both else 'twice'!r} on both sides or "
                "twice; expected distinct train and test folds",
                source=source,
                key=f"{where}.protocol",
            )
        split = (tuple(tr), tuple(te))
    extract = None
    if c.extract is not None:
        e = c.extract
        check_settings(e.settings, source=f"{source}: {where}.extract.settings")
        registry = study_path(source, f"{where}.extract.registry", e.registry, must_exist=True)
        extract = ZeroshotCell(c.id, e.model, registry, dict(e.settings), e.device)
    audio = (
        None
        if c.extract is None
        else required_path(source, f"{where}.extract.audio", c.extract.audio, must_exist=strict)
    )
    grid = None if c.C_grid is None else tuple(sorted(set(c.C_grid)))
    return LinearProbeCell(
        c.id,
        c.model,
        dump,
        c.sha256,
        extract,
        audio,
        labels,
        c.labels_sha256,
        c.folds,
        split,
        c.definition,
        c.C,
        grid,
    )


def _linear_probe_metric(metric: str) -> str | None:
    if LINEAR_PROBE_METRIC.match(metric):
        return None
    return (
        "unknown linear-probe metric; expected mean_accuracy, fold/<fold>/accuracy or "
        "pooled/<accuracy|balanced_accuracy|macro_f1>"
    )


def parse_linear_probe(doc: dict[str, Any], source: Path, strict: bool) -> LinearProbeStudy:
    spec = validate(LinearProbeStudyFile, doc, source=str(source))
    cells = unique_cells(source, spec.cell, lambda c, i: _lp_cell(c, i, source, strict))
    ids = {c.id for c in cells}
    published = cell_published(
        source, spec.published, ids, _linear_probe_metric, "linear-v1", spec.tie_policy
    )
    b = spec.bootstrap
    return LinearProbeStudy(
        name=spec.name,
        title=spec.title if spec.title is not None else spec.name,
        source=source,
        bootstrap=Bootstrap(b.resamples, b.seed, b.level),
        cells=tuple(cells),
        published=published,
    )

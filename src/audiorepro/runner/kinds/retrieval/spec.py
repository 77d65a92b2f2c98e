"""The retrieval kind's spec: the retrieval study file's tables (the kind of a study without a
``kind`` key), their checks, and the study they load into (the frame it shares with every
kind: :mod:`audiorepro.specs.study`; a cell's dump or extraction,
:class:`~audiorepro.specs.study.Cell`, stays in the frame: the extraction cache and the
executors, below the kinds, key on it).

A retrieval study is cells of model x dataset, identity checks, and published values to
verify::

    schema = "audiorepro.study/1"
    name = "demo"                       # [A-Za-z0-9._-]+
    title = "A short description"       # optional
    profiles = ["canonical", "laion-clap"]   # optional, default ["canonical"]
    tie_policy = "pessimistic"          # optional
    bootstrap = { resamples = 1000, seed = 0, level = 0.95 }   # optional

    [[cell]]
    id = "tiny-laion/fixture"           # unique
    model = "tiny-laion"                # the table row
    dataset = "fixture"                 # one table per dataset and direction
    dump = "dumps/x.npz"                # relative to the study file ...
    sha256 = "<64 hex>"                 # ... with the hash it must have
    # or, instead of dump/sha256, how to make it:
    # extract = { model = "tiny-laion", audio = "audio/", captions = "captions.csv",
    #             registry = "registry.toml", settings = { batch_size = 2 } }

    [[identity]]
    a = "tiny-hf"
    b = "tiny-laion"
    registry = "registry.toml"          # optional

    [[published]]
    cell = "tiny-laion/fixture"
    profile = "canonical"               # optional, default canonical
    tolerance = 1e-9
    provenance = "paper, table, URL, or the verification output it was copied from"
    values = { "t2a/r@1" = 0.5 }
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.formats.captions import load_inputs
from audiorepro.formats.coverage import dataset_record
from audiorepro.formats.dump import EmptyPolicy
from audiorepro.metrics.profile_registry import canonical_profile, is_canonical
from audiorepro.metrics.retrieval import TiePolicy, cutoff_problem
from audiorepro.specs.published import (
    DumpSha256,
    known_profile,
    profile_metric_problem,
    profiles_items_schema,
)
from audiorepro.specs.schema import Spec, distinct_file_names, validate
from audiorepro.specs.settings import check_settings
from audiorepro.specs.study import (
    DEVICE_PATTERN,
    Bootstrap,
    Cell,
    Extraction,
    Published,
    PublishedSpec,
    RelativePath,
    Selection,
    StudyFile,
    published_table,
    required_path,
    study_path,
)

VERDICTS = ("identical", "same weights, preprocessing differs", "different checkpoints")
Verdict = Literal["identical", "same weights, preprocessing differs", "different checkpoints"]


def _known_profiles(value: list[str] | None) -> list[str] | None:
    for p in value or ():
        known_profile(p)
    return value


class ExtractSpec(Spec):
    """How to make a cell's dump: model, audio folder, captions, registry, settings."""

    model: str = Field(description="a model spec or registry name")
    audio: RelativePath
    captions: RelativePath
    registry: RelativePath | None = None
    settings: dict[str, Any] = Field(
        default_factory=dict, description="a table of preprocessing settings"
    )
    device: str = Field("cpu", pattern=DEVICE_PATTERN, description="cpu, cuda or cuda:N")
    caption_selection: Literal["all", "first-id", "ids"] | None = Field(
        None,
        description="the caption selection the prepared captions must have been made with "
        "(fetch audiocaps-test --caption-selection; recorded in their dataset.json)",
    )


class CellSpec(Spec):
    """One model x dataset: a dump with its SHA-256, or how to extract it."""

    id: str = Field(description="a unique cell id")
    model: str = Field(description="the model's name (the table row)")
    dataset: str = Field(description="the dataset's name (one table per dataset)")
    dump: RelativePath | None = None
    sha256: DumpSha256 | None = None
    extract: ExtractSpec | None = None
    profiles: list[str] | None = Field(
        None, description="a list of profiles", json_schema_extra=profiles_items_schema
    )

    _profiles = field_validator("profiles")(_known_profiles)


class IdentitySpec(Spec):
    """A checkpoint-identity check between two model specs."""

    a: str = Field(description="a model spec")
    b: str = Field(description="a model spec")
    registry: RelativePath | None = None
    a_settings: dict[str, Any] = Field(default_factory=dict, description="a table")
    b_settings: dict[str, Any] = Field(default_factory=dict, description="a table")
    audio: RelativePath | None = None
    captions: RelativePath | None = None
    expect: Verdict | None = Field(None, description=f"one of {', '.join(VERDICTS)}")


class RetrievalStudyFile(StudyFile):
    """A retrieval study: cells of model x dataset, identity checks, published values."""

    kind: Literal["retrieval"] = Field("retrieval", description="the study kind")
    profiles: list[str] = Field(
        default_factory=lambda: ["canonical"],
        description="a list of profiles",
        json_schema_extra=profiles_items_schema,
    )
    cell: list[CellSpec] = Field(min_length=1, description="at least one [[cell]]")
    identity: list[IdentitySpec] = Field(
        default_factory=list, description="a list of [[identity]] tables"
    )
    published: list[PublishedSpec] = Field(
        default_factory=list, description="a list of [[published]] tables"
    )
    k: list[int] | None = Field(
        None,
        description="a list of cutoffs, ints >= 1, unique, ascending: the metrics are then "
        "definitions 1.1's at these cutoffs (r@k, recall@k, precision@k, map@k, mrr@k, ndcg@k, "
        "and ndcg, r_precision)",
        json_schema_extra={"items": {"minimum": 1}, "minItems": 1, "uniqueItems": True},
    )
    empty_queries: EmptyPolicy | None = Field(
        None,
        description="accept queries without a relevant item in the cells' dumps (refused "
        "without it): skip leaves them out of every mean, zero counts them as 0 (canonical "
        "profile only; as metrics --empty-queries)",
    )

    _profiles = field_validator("profiles")(_known_profiles)

    @field_validator("k")
    @classmethod
    def _cutoffs(cls, value: list[int] | None) -> list[int] | None:
        problem = None if value is None else cutoff_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


@dataclass(frozen=True)
class IdentityCheck:
    a: str
    b: str
    registry: Path | None = None
    a_settings: dict[str, Any] = field(default_factory=dict)
    b_settings: dict[str, Any] = field(default_factory=dict)
    audio: Path | None = None
    captions: Path | None = None
    #: The verdict the study requires; another verdict is a failure. None: record only.
    expect: str | None = None


@dataclass(frozen=True)
class RetrievalStudy:
    """A retrieval study, loaded: cells, identity checks, published values."""

    name: str
    title: str
    source: Path
    profiles: tuple[str, ...]
    tie_policy: TiePolicy
    bootstrap: Bootstrap
    cells: tuple[Cell, ...]
    identity: tuple[IdentityCheck, ...]
    published: tuple[Published, ...]
    kind: Literal["retrieval"] = "retrieval"
    selection: Selection | None = None
    #: The study's ``k``: None for definitions 1.0's metrics, else 1.1's at these cutoffs.
    cutoffs: tuple[int, ...] | None = None
    #: The study's ``empty_queries``: the policy for queries without a relevant item (None:
    #: such dumps are refused).
    empty_queries: EmptyPolicy | None = None

    def cell(self, cell_id: str) -> Cell:
        return next(c for c in self.cells if c.id == cell_id)

    def selected(self, selection: Selection) -> RetrievalStudy:
        """The cells ``selection`` ran, their extractions on its device."""
        device, ran = selection.device, selection.ran
        kept = tuple(
            c
            if device is None or c.extract is None
            else dataclasses.replace(c, extract=dataclasses.replace(c.extract, device=device))
            for c in self.cells
            if c.id in ran
        )
        published = tuple(p for p in self.published if p.cell in ran)
        return dataclasses.replace(self, cells=kept, published=published, selection=selection)


def _cell(spec: CellSpec, i: int, source: Path, profiles: tuple[str, ...], strict: bool) -> Cell:
    where = f"cell[{i}]"
    if (spec.dump is None) == (spec.extract is None):
        raise UserError(
            "give exactly one of 'dump' (with 'sha256') or 'extract'",
            source=source,
            key=f"{where}.dump",
        )
    extraction = None
    if spec.dump is not None and spec.sha256 is None:
        raise UserError(
            "is missing; expected the dump's SHA-256 (64 hex digits)",
            source=source,
            key=f"{where}.sha256",
        )
    if spec.extract is not None:
        e, at = spec.extract, f"{where}.extract"
        extraction = Extraction(
            model=e.model,
            audio=required_path(source, f"{at}.audio", e.audio, must_exist=strict),
            captions=required_path(source, f"{at}.captions", e.captions, must_exist=strict),
            registry=study_path(source, f"{at}.registry", e.registry, must_exist=True),
            settings=dict(e.settings),
            device=e.device,
            caption_selection=e.caption_selection,
        )
        check_settings(extraction.settings, source=f"{source}: {at}.settings")
        _check_inputs(extraction.captions, extraction.audio, strict)
        _check_selection(extraction, source, f"{at}.caption_selection", strict)
    return Cell(
        id=spec.id,
        model=spec.model,
        dataset=spec.dataset,
        dump=study_path(source, f"{where}.dump", spec.dump, must_exist=strict),
        sha256=spec.sha256 if spec.dump is not None else None,
        extract=extraction,
        profiles=tuple(spec.profiles or ()) or profiles,
    )


def _check_selection(e: Extraction, source: Path, key: str, strict: bool) -> None:
    """A declared caption selection must be the one the prepared captions were made with
    (their ``dataset.json``): a dump of all five AudioCaps captions per clip never stands in
    for the one-per-clip protocol. Checked when the captions are here (always when strict)."""
    if e.caption_selection is None or not (strict or e.captions.exists()):
        return
    record = dataset_record(e.captions)
    made = record.get("caption_selection") if record else None
    rule = made.get("rule") if isinstance(made, dict) else None
    if rule != e.caption_selection:
        found = f"were prepared with {rule!r}" if rule else "record no caption selection"
        raise UserError(
            f"is {e.caption_selection!r}, but the captions {e.captions} {found}: prepare them "
            f"with audiorepro fetch audiocaps-test --caption-selection {e.caption_selection} "
            "--data DATA --audio DIR",
            source=source,
            key=key,
        )


def _check_inputs(captions: Path | None, audio: Path | None, strict: bool) -> None:
    """An extraction's captions and clips, checked when the study loads (before any model
    work): a malformed caption file or clip is exit 2 naming it, not a failure recorded
    halfway through a run. ``verify`` (not strict) checks the inputs that are here."""
    if captions is None or audio is None:
        return
    if strict or (captions.exists() and audio.exists()):
        load_inputs(captions, audio)


def parse_retrieval(doc: dict[str, Any], source: Path, strict: bool) -> RetrievalStudy:
    spec = validate(RetrievalStudyFile, doc, source=str(source))
    profiles = tuple(spec.profiles)
    cells = tuple(_cell(c, i, source, profiles, strict) for i, c in enumerate(spec.cell))
    seen: set[str] = set()
    for i, c in enumerate(cells):
        if c.id in seen:
            raise UserError(f"repeats cell id {c.id!r}", source=source, key=f"cell[{i}].id")
        seen.add(c.id)
    distinct_file_names(
        [(f"cell[{i}].dataset", c.dataset) for i, c in enumerate(cells)],
        source=str(source),
        what="a dataset name",
    )
    identity = tuple(
        IdentityCheck(
            a=ir.a,
            b=ir.b,
            registry=study_path(source, f"identity[{i}].registry", ir.registry, must_exist=True),
            a_settings=dict(ir.a_settings),
            b_settings=dict(ir.b_settings),
            audio=study_path(source, f"identity[{i}].audio", ir.audio, must_exist=True),
            captions=study_path(source, f"identity[{i}].captions", ir.captions, must_exist=True),
            expect=ir.expect,
        )
        for i, ir in enumerate(spec.identity)
    )
    for check in identity:
        _check_inputs(check.captions, check.audio, strict)
    published = tuple(
        published_table(
            p, i, source, seen, spec.tie_policy, what="cell", metric_problem=profile_metric_problem
        )
        for i, p in enumerate(spec.published)
    )
    b = spec.bootstrap
    study = RetrievalStudy(
        name=spec.name,
        title=spec.title if spec.title is not None else spec.name,
        source=source,
        profiles=profiles,
        tie_policy=spec.tie_policy,
        bootstrap=Bootstrap(resamples=b.resamples, seed=b.seed, level=b.level),
        cells=cells,
        identity=identity,
        published=published,
        cutoffs=None if spec.k is None else tuple(spec.k),
        empty_queries=spec.empty_queries,
    )
    _check_empty_queries(study)
    if strict:
        check_dump_hashes(study)
    return study


def _check_empty_queries(study: RetrievalStudy) -> None:
    """``empty_queries`` is a policy of the canonical definitions: a peer's profile has none."""
    if study.empty_queries is None:
        return
    for i, cell in enumerate(study.cells):
        other = [p for p in cell.profiles if not is_canonical(p)]
        if other:
            raise UserError(
                f"is {other!r} with empty_queries = {study.empty_queries!r}; expected only "
                f"{canonical_profile()!r} (a peer's profile has no policy for queries without a "
                "relevant item)",
                source=str(study.source),
                key=f"cell[{i}].profiles",
            )
    for i, pub in enumerate(study.published):
        if not is_canonical(pub.profile):
            raise UserError(
                f"is {pub.profile!r} with empty_queries = {study.empty_queries!r}; expected "
                f"{canonical_profile()!r}",
                source=str(study.source),
                key=f"published[{i}].profile",
            )


def check_dump_hashes(study: RetrievalStudy) -> None:
    """Every dump the study names must have the SHA-256 the study states."""
    for i, cell in enumerate(study.cells):
        if cell.dump is None:
            continue
        got = sha256_file(cell.dump)
        if cell.sha256 == PLACEHOLDER:
            raise UserError(
                f"has no verified SHA-256 for dump {cell.dump.name} yet ({PLACEHOLDER!r}); the "
                f"file here hashes to {got}: record it once the dump is verified",
                source=study.source,
                key=f"cell[{i}].sha256",
            )
        if got != cell.sha256:
            raise UserError(
                f"dump {cell.dump.name} has SHA-256 {got}, the study expects {cell.sha256}",
                source=study.source,
                key=f"cell[{i}].sha256",
            )

"""Published-values files (``audiorepro.published/1``, TOML): values to check against dumps.

A published-values file lists cells: a dump file name, what it holds, the profile and tie
policy the values were computed under, a tolerance, and the values by metric name (``t2a/r@1``
for canonical metrics, the peer's own names for other profiles). :mod:`audiorepro.checks.verify`
recomputes and compares them. The format is declared once, as :class:`PublishedFile`
(JSON Schema in ``docs/schemas/published.schema.json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.core.io import read_toml
from audiorepro.metrics.profiles import (
    DCASE_METRICS,
    PROFILES,
    TREC_MEASURES,
    ZEROSHOT_PROFILES,
)
from audiorepro.metrics.retrieval import DIRECTIONS, METRICS, TiePolicy
from audiorepro.specs.schema import KeyProblem, Spec, validate

SCHEMA = "audiorepro.published/1"
#: A published value: a finite number (TOML's inf and nan are refused).
Number = Annotated[float, Field(allow_inf_nan=False)]
DumpSha256 = Annotated[
    str,
    Field(
        pattern=rf"^([0-9a-f]{{64}}|{PLACEHOLDER})$",
        description=f"the dump's SHA-256: 64 lowercase hex digits, or {PLACEHOLDER!r}",
    ),
]
PROFILES_SCHEMA: JsonDict = {"enum": list(PROFILES)}
#: A published-values file also takes laion-clap's zero-shot profile (a class-relevance dump,
#: as `metrics --profile` does); a study's retrieval cells keep to :data:`PROFILES`.
FILE_PROFILES = (*PROFILES, *ZEROSHOT_PROFILES)
FILE_PROFILES_SCHEMA: JsonDict = {"enum": list(FILE_PROFILES)}


def known_profile(value: str) -> str:
    """A profile name, or a ValueError naming the known ones."""
    if value not in PROFILES:
        raise ValueError(f"unknown profile {value!r}; expected one of {', '.join(PROFILES)}")
    return value


def known_file_profile(value: str) -> str:
    """A profile name of a published-values file, or a ValueError naming the known ones."""
    if value not in FILE_PROFILES:
        raise ValueError(f"unknown profile {value!r}; expected one of {', '.join(FILE_PROFILES)}")
    return value


#: The metric names of the profiles whose names are fixed (laion-clap's are its own keys).
PROFILE_METRICS: dict[str, tuple[str, ...]] = {
    "trec": tuple(f"{d}/{m}" for d in DIRECTIONS for m in TREC_MEASURES),
    "dcase": DCASE_METRICS,
    "laion-clap-zeroshot": ("mean_rank", "median_rank", "R@1", "R@5", "R@10", "mAP@10"),
}


def profile_metric_problem(profile: str, metric: str) -> str | None:
    """Why ``metric`` is not a metric of ``profile``, or None (checked when a study or a
    published-values file loads, before any work: a misspelled name was NOT VERIFIED later).

    >>> profile_metric_problem("dcase", "R1") is None
    True
    >>> profile_metric_problem("dcase", "R@1")
    'unknown dcase metric; expected one of R1, R5, R10, mAP10'
    """
    if profile == "canonical":
        return canonical_metric_problem(metric)
    names = PROFILE_METRICS.get(profile)
    if names is None or metric in names:
        return None
    return f"unknown {profile} metric; expected one of {', '.join(names)}"


def canonical_metric_problem(metric: str) -> str | None:
    """Why ``metric`` is not a canonical metric name (``t2a/r@1``), or None.

    >>> canonical_metric_problem("t2a/r@1") is None
    True
    >>> canonical_metric_problem("up/r@1")[:14]
    'unknown metric'
    """
    direction, _, name = metric.partition("/")
    if direction in DIRECTIONS and name in METRICS:
        return None
    return (
        f"unknown metric; expected <direction>/<metric> with direction in "
        f"{', '.join(DIRECTIONS)} and metric in {', '.join(METRICS)}"
    )


def _profile_names_schema() -> JsonDict:
    """The metric names each profile allows, as JSON Schema ``if``/``then`` per profile: the
    same rule as :func:`profile_metric_problem` (laion-clap's names are its own keys)."""
    names: dict[str, list[str]] = {
        "canonical": [f"{d}/{m}" for d in DIRECTIONS for m in METRICS],
        **{p: list(v) for p, v in PROFILE_METRICS.items()},
    }
    return {
        "allOf": [
            {
                "if": {"properties": {"profile": {"const": p}}, "required": ["profile"]},
                "then": {"properties": {"values": {"propertyNames": {"enum": list(v)}}}},
            }
            for p, v in names.items()
        ]
    }


class PublishedCellSpec(Spec):
    """Published values of one dump, with the profile and tie policy they were computed under."""

    model_config = ConfigDict(json_schema_extra=_profile_names_schema())

    dump: str = Field(description="the dump's file name (in --dumps)")
    model: str | None = Field(None, description="the model's name")
    dataset: str | None = Field(None, description="the dataset's name")
    n_clips: int | None = Field(None, ge=1, description="the number of clips in the dump")
    n_captions: int | None = Field(None, ge=1, description="the number of captions in the dump")
    sha256: DumpSha256 | None = None
    profile: str = Field(description="a profile name", json_schema_extra=FILE_PROFILES_SCHEMA)
    tie_policy: TiePolicy = Field("pessimistic", description="the tie policy of the values")
    tolerance: float = Field(ge=0, allow_inf_nan=False, description="a tolerance >= 0")
    values: dict[str, Number] = Field(
        min_length=1, description="a table of metric -> published value"
    )

    _profile = field_validator("profile")(known_file_profile)


class PublishedFile(Spec):
    """A published-values file (``audiorepro.published/1``)."""

    schema_: str = Field(alias="schema", pattern=f"^{SCHEMA}$", description=repr(SCHEMA))
    provenance: str | dict[str, str] | None = Field(
        None, description="where the values were published (text, or a table of texts)"
    )
    cell: list[PublishedCellSpec] = Field(min_length=1, description="at least one [[cell]]")
    finding: dict[str, Any] | None = Field(
        None, description="recorded findings, not values to verify (free-form tables)"
    )

    @model_validator(mode="after")
    def _canonical_names(self) -> PublishedFile:
        for i, c in enumerate(self.cell):
            for metric in c.values:
                problem = profile_metric_problem(c.profile, metric)
                if problem is not None:
                    raise KeyProblem(("cell", i, "values", metric), problem)
        return self


@dataclass(frozen=True)
class PublishedCell:
    dump: str
    profile: str
    tie_policy: TiePolicy
    tolerance: float
    values: dict[str, float]
    n_clips: int | None = None
    n_captions: int | None = None
    sha256: str | None = None
    model: str | None = None
    dataset: str | None = None


def load_published(path: str | Path) -> list[PublishedCell]:
    """Read and validate a published-values file; problems name the file and the key."""
    path = Path(path)
    doc = read_toml(path, what="a published-values .toml", schema=SCHEMA)
    spec = validate(PublishedFile, doc, source=str(path))
    return [
        PublishedCell(
            dump=c.dump,
            profile=c.profile,
            tie_policy=c.tie_policy,
            tolerance=c.tolerance,
            values=dict(c.values),
            n_clips=c.n_clips,
            n_captions=c.n_captions,
            sha256=None if c.sha256 in (None, PLACEHOLDER) else c.sha256,
            model=c.model,
            dataset=c.dataset,
        )
        for c in spec.cell
    ]

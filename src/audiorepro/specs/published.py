"""Published-values files (``audiorepro.published/1``, TOML): values to check against dumps.

A published-values file lists cells: a dump file name, what it holds, the profile and tie
policy the values were computed under, a tolerance, and the values by metric name (``t2a/r@1``
for canonical metrics, the peer's own names for other profiles). :mod:`audiorepro.checks.verify`
recomputes and compares them. The format is declared once, as :class:`PublishedFile`
(JSON Schema in ``docs/schemas/published.schema.json``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER
from audiorepro.core.io import read_toml
from audiorepro.metrics.profile_registry import is_canonical
from audiorepro.metrics.profiles import (
    CANONICAL_NAME_PATTERN as CANONICAL_NAME_PATTERN,
)
from audiorepro.metrics.profiles import (
    TREC_NAME_PATTERN as TREC_NAME_PATTERN,
)
from audiorepro.metrics.profiles import (
    canonical_metric_problem as canonical_metric_problem,
)
from audiorepro.metrics.profiles import find_profile, profile_names, registered_profiles
from audiorepro.metrics.retrieval import TiePolicy
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


def _enum(schema: JsonDict, names: tuple[str, ...]) -> None:
    schema["enum"] = list(names)


def profiles_schema(schema: JsonDict) -> None:
    """A study's retrieval profiles as a JSON Schema enum, read from the registry when the
    schema is generated (a callable ``json_schema_extra``: a registered profile appears)."""
    _enum(schema, profile_names("retrieval"))


def file_profiles_schema(schema: JsonDict) -> None:
    """A published-values file's profiles: every registered one (retrieval and zero-shot,
    as `metrics --profile` takes them); a study's retrieval cells keep to the retrieval ones."""
    _enum(schema, profile_names())


def profiles_items_schema(schema: JsonDict) -> None:
    """A list of :func:`profiles_schema` names."""
    schema["items"] = {"enum": list(profile_names("retrieval"))}


def known_profile(value: str) -> str:
    """A profile name, or a ValueError naming the known ones."""
    names = profile_names("retrieval")
    if value not in names:
        raise ValueError(f"unknown profile {value!r}; expected one of {', '.join(names)}")
    return value


def known_file_profile(value: str) -> str:
    """A profile name of a published-values file, or a ValueError naming the known ones."""
    names = profile_names()
    if value not in names:
        raise ValueError(f"unknown profile {value!r}; expected one of {', '.join(names)}")
    return value


def profile_metrics() -> dict[str, tuple[str, ...]]:
    """The metric names of the profiles whose names are a fixed list (laion-clap's are its
    own keys; canonical's and trec's follow a rule)."""
    return {p.name: p.metric_names for p in registered_profiles() if p.metric_names is not None}


def profile_metric_problem(profile: str, metric: str) -> str | None:
    """Why ``metric`` is not a metric of ``profile``, or None (checked when a study or a
    published-values file loads, before any work: a misspelled name was NOT VERIFIED later).

    >>> profile_metric_problem("dcase", "R1") is None
    True
    >>> profile_metric_problem("dcase", "R@1")
    'unknown dcase metric; expected one of R1, R5, R10, mAP10'
    """
    found = find_profile(profile)
    if found is None or found.metric_problem is None:
        return None
    return found.metric_problem(metric)


#: What range each metric's values lie in, by the last part of its name (the peers' prefixes
#: ``text_to_audio_``/``audio_to_text_`` removed): rates, precisions, accuracies, F1, average
#: precisions and equal error rates in [0, 1] (heareval's ``*_acc``, ``mAP``, ``aucroc`` and
#: event F-measures ``*_fms`` too; its ``d_prime`` has no bound); correlations and cosines in
#: [-1, 1]; ranks from 1, with no upper bound known here (the number of items); errors (and
#: heareval's error rate ``*_er``), losses and counts from 0, unbounded.
_UNIT = re.compile(
    r"^(r@?\d+|recall[@_]?\d*|map(@?\d+|_cut_\d+)?|mrr(@\d+)?|recip_rank|success[_@]\d+"
    r"|p_\d+|precision(@\d+)?|ndcg(@\d+|_cut_\d+)?|r_?prec(ision)?|\w*accuracy|\w*f1|eer"
    r"|\w*_acc|aucroc|\w*_fms|eer_\w+|min_dcf[\w.]*|min_cllr)$"
)
_SIGNED_UNIT = re.compile(r"^\w*(pearson|spearman|cosine|ccc)$")
_RANK = re.compile(r"^(mean|median)_rank$")


def metric_range(metric: str) -> tuple[float | None, float | None]:
    """The lowest and highest value ``metric`` can have (None: no bound known).

    >>> [metric_range(m) for m in ["t2a/r@1", "text_to_audio_mean_rank", "test/frame_f1", "eer"]]
    [(0.0, 1.0), (1.0, None), (0.0, 1.0), (0.0, 1.0)]
    >>> [metric_range(m) for m in ["regression/v/pearson", "test/per_score/v/raw_mae"]]
    [(-1.0, 1.0), (0.0, None)]
    >>> hear = ["top1_acc", "event_onset_200ms_fms", "segment_1s_er", "d_prime"]
    >>> [metric_range(m) for m in hear]
    [(0.0, 1.0), (0.0, 1.0), (0.0, None), (None, None)]
    """
    leaf = re.sub(r"^(text_to_audio|audio_to_text)_", "", metric.rsplit("/", 1)[-1]).lower()
    if _UNIT.match(leaf):
        return 0.0, 1.0
    if _SIGNED_UNIT.match(leaf):
        return -1.0, 1.0
    if _RANK.match(leaf):
        return 1.0, None
    if re.match(r"^(\w*_)?(mae|rmse|loss|n|mae_s|matched|clips|events|er)(_\w*)?$", leaf) or (
        re.match(r"^(cllr|act_dcf[\w.]*)$", leaf)  # a miscalibrated system's cost exceeds 1
    ):
        return 0.0, None
    return None, None


def tolerance_problem(values: dict[str, float], tolerance: float) -> tuple[str, str] | None:
    """Why ``tolerance`` (or a value) means nothing for these metrics: ``(key, problem)``,
    ``key`` ``"tolerance"`` or ``"values.<metric>"``; None when all is well.

    The rule: a published value lies in its metric's range; for a bounded metric the interval
    ``value +- tolerance`` does not cover the whole range (0.5 +- 0.5 on a value in [0, 1]
    passes anything, as does a tolerance of 1); for a metric without an upper bound (ranks,
    errors) it is smaller than the published value's magnitude, or than 1 for a value within 1
    (a tolerance as large as the value passes everything from nothing to twice it).

    >>> tolerance_problem({"t2a/r@1": 0.3}, 1e-3) is None
    True
    >>> tolerance_problem({"t2a/r@1": 0.3}, 1e308)[1][:60]
    'is 1e+308: 0.3 +- 1e+308 covers the whole range of t2a/r@1 ['
    >>> tolerance_problem({"eer_rocch": 0.5}, 0.5)[1][:45]  # any EER from 0 to 1 would pass
    'is 0.5: 0.5 +- 0.5 covers the whole range of '
    >>> tolerance_problem({"t2a/r@1": 123456.0}, 0.0)
    ('values.t2a/r@1', 'is 123456.0, outside the range of t2a/r@1 [0.0, 1.0]')
    >>> tolerance_problem({"t2a/mean_rank": 3.5}, 0.5) is None
    True
    """
    for metric in sorted(values):
        value = values[metric]
        lo, hi = metric_range(metric)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            shown = f"[{lo}, {hi if hi is not None else 'inf'}]"
            return f"values.{metric}", f"is {value}, outside the range of {metric} {shown}"
        if lo is not None and hi is not None:
            reach = max(value - lo, hi - value)  # the farthest value the range holds
            if tolerance >= reach:
                return "tolerance", (
                    f"is {tolerance}: {value} +- {tolerance} covers the whole range of {metric} "
                    f"[{lo}, {hi}], so such a tolerance passes any value. Expected a "
                    f"tolerance >= 0 and below {reach:g}"
                )
        elif tolerance >= max(abs(value), 1.0):
            return "tolerance", (
                f"is {tolerance}, as large as the published {metric} ({value}) or more; such a "
                f"tolerance passes any value from 0 to twice it. Expected a tolerance >= 0 and "
                f"below {max(abs(value), 1.0)}"
            )
    return None


def profile_names_schema(schema: JsonDict) -> None:
    """The metric names each profile allows, as JSON Schema ``if``/``then`` per profile: the
    same rule as :func:`profile_metric_problem` (laion-clap's names are its own keys).
    Canonical first, then the peers with a fixed list of names, then those with a rule, each
    group in registration order."""
    rules: list[tuple[str, JsonDict]] = [
        (p.name, dict(p.names_schema)) for p in registered_profiles() if p.names_schema
    ]
    canonical = [r for r in rules if is_canonical(r[0])]
    fixed = [r for r in rules if not is_canonical(r[0]) and "enum" in r[1]]
    ruled = [r for r in rules if r not in canonical and r not in fixed]
    schema["allOf"] = [
        {
            "if": {"properties": {"profile": {"const": name}}, "required": ["profile"]},
            "then": {"properties": {"values": {"propertyNames": rule}}},
        }
        for name, rule in (*canonical, *fixed, *ruled)
    ]


class PublishedCellSpec(Spec):
    """Published values of one dump, with the profile and tie policy they were computed under."""

    model_config = ConfigDict(json_schema_extra=profile_names_schema)

    dump: str = Field(description="the dump's file name (in --dumps)")
    model: str | None = Field(None, description="the model's name")
    dataset: str | None = Field(None, description="the dataset's name")
    n_clips: int | None = Field(None, ge=1, description="the number of clips in the dump")
    n_captions: int | None = Field(None, ge=1, description="the number of captions in the dump")
    sha256: DumpSha256 | None = None
    profile: str = Field(description="a profile name", json_schema_extra=file_profiles_schema)
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
    for i, c in enumerate(spec.cell):
        # Checked by the loader: a JSON Schema cannot relate a tolerance to its values.
        bad = tolerance_problem(dict(c.values), c.tolerance)
        if bad is not None:
            raise UserError(bad[1], source=path, key=f"cell[{i}].{bad[0]}")
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

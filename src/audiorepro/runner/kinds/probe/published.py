"""Published probe values (``audiorepro.probe-published/1``, TOML): numbers a probe study
published, checked against the study's saved measurements.

The retrieval published-values file (:mod:`audiorepro.specs.published`) names dumps and
recomputes from them; a probe study's published numbers come from its saved metric files
(``[run.metrics.<split>]``, ``docs/measurements.md``). This file names runs of a probe study and
each value by its saved-measurement path, ``<split>/<field>/...``: ``test/frame_f1``,
``test/per_score/<score>/raw_mae``, ``test/speaker_cosine/identity/mean``,
``test/family/<family>/normalized_mae``, ``public/<benchmark>/<cut>/mean_prompt_spearman``,
``adapter_crema/metrics/accuracy``::

    schema = "audiorepro.probe-published/1"
    provenance = "report of 7 October, leader table"

    [[run]]
    run = "probe/legacy/m1/linear"      # a run id of the study
    tolerance = 5e-5                    # |saved - published| <= tolerance passes
    provenance = "table 2"              # optional, per run
    values = { "test/frame_f1" = 0.7182, "public/emo/min_2_raters/mean_prompt_spearman" = 0.41 }

``audiorepro verify --golden FILE STUDY`` compares each value (PASS, FAIL, or NOT VERIFIED when
the saved files do not hold it); exit 0 only when every value passes. The format is declared
once, as :class:`ProbePublishedFile` (JSON Schema in
``docs/schemas/probe-published.schema.json``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, model_validator

from audiorepro.core.errors import UserError
from audiorepro.core.io import read_toml
from audiorepro.formats import keypath
from audiorepro.specs.published import Number, tolerance_problem
from audiorepro.specs.schema import KeyProblem, Spec, validate

SCHEMA = "audiorepro.probe-published/1"
#: ``<split>/<field>/...``: a split and at least one more part, no empty part; or
#: ``<split>:<key path>`` (:mod:`audiorepro.formats.keypath`), a number anywhere in the file.
SAVED_PATH = r"^([^/:]+(/[^/]+)+|[^/:]+:.+)$"


def saved_path_problem(metric: str) -> str | None:
    """Why ``metric`` is not a saved-measurement path, or None.

    >>> saved_path_problem("test/per_score/valence/raw_mae") is None
    True
    >>> saved_path_problem("frame_f1")[:35]
    'is not a saved-measurement path; ex'
    """
    split, colon, rest = metric.partition(":")
    if colon and "/" not in split and re.match(SAVED_PATH, metric):
        try:
            keypath.parse(rest)
        except keypath.KeyPathError as exc:
            return f"{exc}; expected '<split>:<key path>'"
        return None
    parts = metric.split("/")
    if re.match(SAVED_PATH, metric) and len(parts) >= 4 and parts[1] in ("per_score", "family"):
        if parts[-1] == "score":
            return (
                f"names the {parts[1]} field 'score', the target's name, not a measurement; "
                "expected a number field (raw_mae, normalized_mae, pearson, spearman, n)"
            )
    if re.match(SAVED_PATH, metric):
        return None
    return (
        "is not a saved-measurement path; expected '<split>/<field>/...' (test/frame_f1, "
        "test/per_score/<score>/raw_mae, public/<benchmark>/<cut>/<field>) or "
        "'<split>:<key path>'"
    )


class ProbePublishedRun(Spec):
    """Published values of one run, by saved-measurement path."""

    run: str = Field(description="a run id of the probe study")
    tolerance: float = Field(ge=0, allow_inf_nan=False, description="a tolerance >= 0")
    provenance: str | None = Field(None, description="where these values were published")
    values: dict[str, Number] = Field(
        min_length=1,
        description="a table of saved-measurement path -> published value",
        json_schema_extra={"propertyNames": {"pattern": SAVED_PATH}},
    )


class ProbePublishedFile(Spec):
    """A published probe values file (``audiorepro.probe-published/1``)."""

    schema_: str = Field(alias="schema", pattern=f"^{SCHEMA}$", description=repr(SCHEMA))
    provenance: str | None = Field(None, description="where the values were published")
    run: list[ProbePublishedRun] = Field(min_length=1, description="at least one [[run]]")

    @model_validator(mode="after")
    def _paths(self) -> ProbePublishedFile:
        for i, r in enumerate(self.run):
            for metric in r.values:
                problem = saved_path_problem(metric)
                if problem is not None:
                    raise KeyProblem(("run", i, "values", metric), problem)
        return self


@dataclass(frozen=True)
class ProbePublished:
    run: str
    tolerance: float
    provenance: str | None
    values: dict[str, float]


def load_probe_published(path: str | Path) -> list[ProbePublished]:
    """Read and validate a published probe values file (one-line errors, exit 2)."""
    path = Path(path)
    doc = read_toml(path, what="a published probe values .toml", schema=SCHEMA)
    spec = validate(ProbePublishedFile, doc, source=str(path))
    for i, r in enumerate(spec.run):
        # Checked by the loader: a JSON Schema cannot relate a tolerance to its values.
        bad = tolerance_problem(dict(r.values), r.tolerance)
        if bad is not None:
            raise UserError(bad[1], source=path, key=f"run[{i}].{bad[0]}")
    return [
        ProbePublished(
            run=r.run,
            tolerance=r.tolerance,
            provenance=r.provenance if r.provenance is not None else spec.provenance,
            values=dict(r.values),
        )
        for r in spec.run
    ]

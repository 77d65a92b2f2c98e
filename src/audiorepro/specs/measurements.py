"""Saved probe measurements (JSON): the metric files a probe study reads instead of predictions.

A probe run's ``[run.metrics.<split>]`` tables name JSON files its training or scoring code
saved. The split's name says which of three shapes the file has (every field is documented in
``docs/measurements.md``; JSON Schema in ``docs/schemas/measurements.schema.json``):

- ``public``: public-benchmark scores, :class:`PublicFile` (benchmark -> label cut -> numbers);
- a name starting with ``adapter`` (``adapter_crema``): a supervised adapter's result,
  :class:`AdapterFile`;
- any other name (``test``, ``validation``, ``pre_finetune``, ``p3_test``...): held-out
  measurements of the run's own targets, :class:`HeldOutFile`.

Every number may be ``null`` (not recorded or undefined, never 0). Unknown keys are errors, as
in every file a user gives: a misspelled ``frame_f1`` would otherwise silently read as "not
recorded". :func:`load_measurements` reports the first problem in one line (file, key path,
what was expected), exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.specs.schema import KeyProblem, Spec, validate

Value = Annotated[
    float | None,
    Field(allow_inf_nan=False, description="a number, or null when not recorded or undefined"),
]
Count = Annotated[int | None, Field(ge=0, description="a count >= 0, or null")]
IOU_LEVELS = ("0.1", "0.3", "0.5")


class ScoreMetrics(Spec):
    """One scalar target's agreement on the evaluated clips."""

    score: str = Field(description="the target's exact name (its family is a name prefix)")
    n: Count = None
    raw_mae: Value = None
    normalized_mae: Value = None
    pearson: Value = None
    spearman: Value = None


class SpeakerVectors(Spec):
    """One named speaker-vector set: mean cosine over its valid clips."""

    mean: Value = None
    n: Count = None


class Localization(Spec):
    """Event localization at one interval-IoU threshold."""

    precision: Value = None
    recall: Value = None
    f1: Value = None
    matched: Count = None


class EventClassMetrics(Spec):
    """One event class: its reference events and the oracle-span accuracy within them."""

    name: str = Field(description="the class's name")
    support: Count = None
    oracle_span_accuracy: Value = None


class HeldOutFile(Spec):
    """Held-out measurements of a run's own targets (``test_metrics.json`` and the like)."""

    clips: Count = None
    loss: Value = None
    per_score: list[ScoreMetrics] = Field(
        default_factory=list, description="a list of {score, n, raw_mae, ...} tables"
    )
    speaker_cosine: dict[str, SpeakerVectors] = Field(
        default_factory=dict, description="a table of set name -> {mean, n}"
    )
    burst_localization: dict[str, Localization] = Field(
        default_factory=dict,
        description="a table of IoU threshold -> {precision, recall, ...}",
        json_schema_extra={"propertyNames": {"enum": list(IOU_LEVELS)}},
    )
    frame_f1: Value = None
    cps_raw_mae: Value = None
    burst_class_oracle_span_accuracy: Value = None
    burst_class_events: Count = None
    burst_matched_event_class_accuracy: Value = None
    burst_matched_event_class_n: Count = None
    burst_start_mae_s: Value = None
    burst_end_mae_s: Value = None
    burst_per_class: list[EventClassMetrics] = Field(
        default_factory=list, description="a list of {name, support, oracle_span_accuracy}"
    )

    @model_validator(mode="after")
    def _unique_scores(self) -> HeldOutFile:
        seen: set[str] = set()
        for i, s in enumerate(self.per_score):
            if s.score in seen:
                raise KeyProblem(("per_score", i, "score"), f"repeats score {s.score!r}")
            seen.add(s.score)
        names: set[str] = set()
        for i, c in enumerate(self.burst_per_class):
            if c.name in names:
                raise KeyProblem(("burst_per_class", i, "name"), f"repeats class {c.name!r}")
            names.add(c.name)
        for level in self.burst_localization:
            if level not in IOU_LEVELS:
                raise KeyProblem(
                    ("burst_localization", level),
                    f"is an unknown IoU threshold; expected one of {', '.join(IOU_LEVELS)}",
                )
        return self


class PromptMetrics(Spec):
    """One prompt (question) of a human benchmark."""

    prompt: str = Field(description="the prompt's text or id")
    n: Count = None
    spearman: Value = None
    balanced_accuracy_oracle: Value = None


class DimensionMetrics(Spec):
    """One dimension (category) of a human benchmark: its prompts together."""

    dimension: str = Field(description="the dimension's name")
    n: Count = None
    prompts: Count = None
    mean_prompt_spearman: Value = None
    balanced_accuracy_oracle_per_prompt: Value = None


class CutMetrics(Spec):
    """One label cut of a public benchmark (``repo_min_2_raters``): every field optional."""

    n: Count = None
    prompts: Count = None
    positive_rate: Value = None
    mean_prompt_spearman: Value = None
    balanced_accuracy_oracle_per_prompt: Value = None
    balanced_accuracy_oracle_overall: Value = None
    balanced_accuracy_5fold_clip_grouped: Value = None
    mae: Value = None
    rmse: Value = None
    pearson: Value = None
    spearman: Value = None
    per_prompt: list[PromptMetrics] = Field(
        default_factory=list, description="a list of {prompt, n, spearman, ...} tables"
    )
    per_dimension: list[DimensionMetrics] = Field(
        default_factory=list, description="a list of {dimension, n, prompts, ...} tables"
    )


class CategoryMetrics(Spec):
    """One category of a benchmark's per-category list (``per_emotion``)."""

    category: str = Field(description="the category's name")
    n: Count = None
    mae: Value = None
    rmse: Value = None
    pearson: Value = None
    spearman: Value = None


def _per_keys_are_lists(schema: dict[str, Any]) -> None:
    # The loader's rule (:func:`_public`): a key starting with ``per_`` holds a per-category
    # list, every other key a cut's numbers.
    cut, categories = schema["additionalProperties"]["anyOf"]
    schema["patternProperties"] = {"^per_": categories}
    schema["additionalProperties"] = cut


#: benchmark -> cut name -> its numbers, or a per-category list (a key starting with ``per_``)
PublicFile = dict[
    str,
    Annotated[
        dict[str, CutMetrics | list[CategoryMetrics]],
        Field(json_schema_extra=_per_keys_are_lists),
    ],
]


class AdapterMetrics(Spec):
    """A supervised adapter's outer-fold result."""

    accuracy: Value = None
    balanced_accuracy: Value = None
    macro_f1: Value = None
    n: Count = None


class AdapterFile(Spec):
    """A supervised adapter's result (``crema_matched_adapter.json``)."""

    metrics: AdapterMetrics = Field(description="a table {accuracy, balanced_accuracy, ...}")
    classes: list[str] = Field(default_factory=list, description="a list of class names")


def kind_of(split: str) -> str:
    """The shape a split's file has, by the split's name.

    >>> [kind_of(s) for s in ("test", "public", "adapter_crema")]
    ['held-out', 'public', 'adapter']
    """
    if split == "public":
        return "public"
    if split.startswith("adapter"):
        return "adapter"
    return "held-out"


def _public(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise UserError("is not a JSON object; expected benchmark -> cut tables", source=source)
    out: dict[str, Any] = {}
    for bench, cuts in data.items():
        if not isinstance(cuts, dict):
            raise UserError("is not a table; expected cut -> numbers", source=source, key=bench)
        out[bench] = {}
        for cut, value in cuts.items():
            at = f"{bench}.{cut}"
            if cut.startswith("per_"):
                if not isinstance(value, list):
                    raise UserError(
                        "is not a list; expected per-category tables", source=source, key=at
                    )
                out[bench][cut] = [
                    validate(CategoryMetrics, v, source=source, where=(bench, cut, i)).model_dump(
                        mode="json"
                    )
                    for i, v in enumerate(value)
                ]
            else:
                out[bench][cut] = validate(
                    CutMetrics, value, source=source, where=(bench, cut)
                ).model_dump(mode="json")
    return out


def parse_measurements(data: Any, split: str, *, source: str) -> dict[str, Any]:
    """A parsed JSON document as the split's shape, defaults filled in (plain JSON values)."""
    kind = kind_of(split)
    if kind == "public":
        return _public(data, source)
    model = AdapterFile if kind == "adapter" else HeldOutFile
    return validate(model, data, source=source).model_dump(mode="json")


def load_measurements(path: Path, split: str) -> dict[str, Any]:
    """Read and check one saved-measurement JSON file (UserError, exit 2, when malformed)."""
    text = read_text(path, what="a saved-measurement JSON file")
    # A key twice would be resolved silently (the last wins): PASS or FAIL by key order.
    data = parse_json(text, source=path)
    return parse_measurements(data, split, source=str(path))

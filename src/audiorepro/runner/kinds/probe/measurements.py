"""Saved probe measurements (JSON): the metric files a probe study reads instead of predictions.

A probe run's ``[run.metrics.<split>]`` tables name JSON files its training or scoring code
saved. The split's name says which of three shapes the file has (every field is documented in
``docs/measurements.md``; JSON Schema in ``docs/schemas/measurements.schema.json``):

- ``public``: public-benchmark scores, :class:`PublicFile` (benchmark -> label cut -> numbers);
- a name starting with ``adapter`` (``adapter_crema``): a supervised adapter's result,
  :class:`AdapterFile`;
- any other name (``test``, ``validation``, ``pre_finetune``, ``p3_test``...): held-out
  measurements of the run's own targets, :class:`HeldOutFile`.

Every number may be ``null`` (not recorded or undefined, never 0). A saved file is data a
pipeline wrote, not an instruction: the keys these shapes know are checked (a wrong type, NaN,
a repeated score is exit 2, one line naming file, key path and what was expected), every other
key is kept as it is. :func:`read_measurements` returns both: the known part (what the tables
read) and the whole document, in which every number is addressable by a key path
(:mod:`audiorepro.formats.keypath`), with the paths no shape knows listed
(:attr:`Measurements.unknown`) so that the report can say what no table used. A ``.jsonl``
file (one JSON object a line, a training history) has no shape: the list of its lines,
addressed by key path only (``[epoch=3].val_loss``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.formats.keypath import KeyPathError, locate
from audiorepro.runner.kinds.probe.measured import Measurements
from audiorepro.specs.schema import KeyProblem, validate


class Spec(BaseModel):
    """A table of a saved file: its known keys checked (types, no NaN), unknown keys kept."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, allow_inf_nan=False)


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
    # The loader's rule (:func:`_public`): a key starting with ``per_`` holds a list, of
    # categories where an item has a ``category`` (then every item must be one), else of data;
    # any other key holds a cut's numbers where it is an object, and is data where it is not.
    cut, categories = schema["additionalProperties"]["anyOf"]
    data_items = {"type": "array", "items": {"not": {"type": "object", "required": ["category"]}}}
    schema["patternProperties"] = {"^per_": {"anyOf": [categories, data_items]}}
    schema["additionalProperties"] = {"anyOf": [cut, {"not": {"type": "object"}}]}


def _benches_may_be_data(schema: dict[str, Any]) -> None:
    # A benchmark whose value is not an object is data (kept, listed as unused).
    bench = schema["additionalProperties"]
    schema["additionalProperties"] = {"anyOf": [bench, {"not": {"type": "object"}}]}


#: benchmark -> cut name -> its numbers, or a per-category list (a key starting with ``per_``)
PublicFile = Annotated[
    dict[
        str,
        Annotated[
            dict[str, CutMetrics | list[CategoryMetrics]],
            Field(json_schema_extra=_per_keys_are_lists),
        ],
    ],
    Field(json_schema_extra=_benches_may_be_data),
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


def known(value: Any) -> Any:
    """A validated document as plain JSON values, the keys its shape knows only (unknown keys
    are in the document, not here), defaults filled in."""
    if isinstance(value, BaseModel):
        return {name: known(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, list):
        return [known(v) for v in value]
    if isinstance(value, dict):
        return {k: known(v) for k, v in value.items()}
    return value


def _categories(value: list[Any], source: str, where: tuple[str, str]) -> list[Any] | None:
    """A ``per_`` list as categories, or None where it is data (no item has a ``category``)."""
    if not any(isinstance(v, dict) and "category" in v for v in value):
        return None
    return [
        known(validate(CategoryMetrics, v, source=source, where=(*where, i)))
        for i, v in enumerate(value)
    ]


def _public(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise UserError("is not a JSON object; expected benchmark -> cut tables", source=source)
    out: dict[str, Any] = {}
    for bench, cuts in data.items():
        if not isinstance(cuts, dict):
            continue  # data, not a benchmark's cuts: kept in the document
        found: dict[str, Any] = {}
        for cut, value in cuts.items():
            if cut.startswith("per_"):
                if not isinstance(value, list):
                    raise UserError(
                        "is not a list; expected per-category tables", source=source,
                        key=f"{bench}.{cut}",
                    )  # fmt: skip
                listed = _categories(value, source, (bench, cut))
                if listed is not None:
                    found[cut] = listed
            elif isinstance(value, dict):
                numbers = validate(CutMetrics, value, source=source, where=(bench, cut))
                if set(value) & set(CutMetrics.model_fields):
                    found[cut] = known(numbers)
        if found:
            out[bench] = found
    return out


def parse_measurements(data: Any, split: str, *, source: str) -> dict[str, Any]:
    """A parsed JSON document as the split's shape: the keys it knows, checked, defaults
    filled in (plain JSON values)."""
    kind = kind_of(split)
    if kind == "public":
        return _public(data, source)
    model = AdapterFile if kind == "adapter" else HeldOutFile
    return known(validate(model, data, source=source))  # type: ignore[no-any-return]


def _unknown(
    doc: Any, shape: Any, where: tuple[int | str, ...] = ()
) -> list[tuple[int | str, ...]]:
    """Where ``doc`` holds what ``shape`` (its known part) does not: the first such key of each
    branch (its whole value is unknown)."""
    out: list[tuple[int | str, ...]] = []
    if isinstance(doc, dict) and isinstance(shape, dict):
        for key, value in doc.items():
            if key in shape:
                out += _unknown(value, shape[key], (*where, key))
            else:
                out.append((*where, key))
    elif isinstance(doc, list) and isinstance(shape, list) and len(doc) == len(shape):
        for i, (value, part) in enumerate(zip(doc, shape, strict=True)):
            out += _unknown(value, part, (*where, i))
    return out


def _jsonl(text: str, path: Path) -> list[Any]:
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            lines.append(parse_json(line, source=path, key=f"line {n}"))
    return lines


#: one step of a rename's key path: a key or ``*`` (every key), then ``[*]`` (every item)
_RENAME_STEP = re.compile(r"(?P<key>[^.\[\]*]+|\*)(?P<items>\[\*\])?")


def rename_steps(path: str) -> list[tuple[str, bool]]:
    """A rename's key path as (key or ``*``, every list item) steps; ValueError when it does
    not parse (``a.*.per_prompt[*].rho``; the last step a plain key).

    >>> rename_steps("*.*.per_prompt[*].rho")
    [('*', False), ('*', False), ('per_prompt', True), ('rho', False)]
    """
    steps = _steps(path)
    if steps[-1] != (steps[-1][0], False) or steps[-1][0] == "*":
        raise ValueError(f"rename key path {path!r} must end in a plain key")
    return steps


def matches(doc: Any, path: str) -> list[tuple[str, tuple[str, ...], Any]]:
    """Every place a wildcard key path (``*.*.per_family``: ``*`` every key, ``[*]`` every
    item) leads in ``doc``: (its key path, the keys ``*`` took, the value), in file order.

    >>> matches({"e": {"c1": {"f": [1]}, "c2": {"g": 2}}}, "e.*.f")
    [('e.c1.f', ('c1',), [1])]
    """
    found: list[tuple[str, tuple[str, ...], Any]] = []

    def walk(node: Any, steps: list[tuple[str, bool]], at: str, took: tuple[str, ...]) -> None:
        if not steps:
            found.append((at, took, node))
            return
        (key, items), rest = steps[0], steps[1:]
        if not isinstance(node, dict):
            return
        for k in list(node) if key == "*" else [key] if key in node else []:
            where, wild = (f"{at}.{k}" if at else k), took + ((k,) if key == "*" else ())
            if items:
                for i, item in enumerate(node[k] if isinstance(node[k], list) else []):
                    walk(item, rest, f"{where}[{i}]", wild)
            else:
                walk(node[k], rest, where, wild)

    walk(doc, [(k, i) for k, i in _steps(path)], "", ())
    return found


def _steps(path: str) -> list[tuple[str, bool]]:
    steps = []
    for part in path.split("."):
        m = _RENAME_STEP.fullmatch(part)
        if m is None:
            raise ValueError(f"cannot read key path {path!r} at {part!r}")
        steps.append((m["key"], m["items"] is not None))
    return steps


def apply_renames(doc: Any, renames: tuple[tuple[str, str], ...], source: str) -> Any:
    """``doc`` with keys renamed as a study declares (``emolia_emo`` -> ``emolia-emo``,
    ``*.*.per_prompt[*].rho`` -> ``spearman``): the module's spellings read as the kit's. A
    key renamed beside the one it becomes (the file has both spellings) is one line naming
    the file and the key, exit 2: which one holds the number would be a guess.

    >>> apply_renames({"a": [{"rho": 1}]}, (("a[*].rho", "spearman"),), "f")
    {'a': [{'spearman': 1}]}
    """
    out = json.loads(json.dumps(doc))  # a copy: the byte copy and hash stay the file's
    for path, new in renames:
        _rename(out, rename_steps(path), new, source, "")
    return out


def _rename(node: Any, steps: list[tuple[str, bool]], new: str, source: str, at: str) -> None:
    (key, items), rest = steps[0], steps[1:]
    if not isinstance(node, dict):
        return
    if not rest:
        if key in node:
            if new in node and new != key:
                raise UserError(
                    f"holds both {key!r} and {new!r}, which the study's rename makes one key",
                    source=source,
                    key=at + key,
                )
            # In place: the key keeps its position (tables list benchmarks in file order).
            pairs = list(node.items())
            node.clear()
            node.update((new if k == key else k, v) for k, v in pairs)
        return
    for k in list(node) if key == "*" else [key] if key in node else []:
        value = node[k]
        if items:
            for i, item in enumerate(value if isinstance(value, list) else []):
                _rename(item, rest, new, source, f"{at}{k}[{i}].")
        else:
            _rename(value, rest, new, source, f"{at}{k}.")


def read_measurements(
    path: Path, split: str, *, at: str | None = None, rename: tuple[tuple[str, str], ...] = ()
) -> Measurements:
    """Read one saved file as it is: a JSON file checked against its split's shape (what the
    shape knows; UserError, exit 2, when that is malformed), a ``.jsonl`` file line by line.
    ``at``: a key path to the sub-table that is the split (``models.base``: one file keeps
    every model size); key paths and the unused list are then from that sub-table."""
    text = read_text(path, what="a saved-measurement JSON file")
    if path.suffix == ".jsonl":
        return Measurements(None, _jsonl(text, path), ((),), str(path))
    # A key twice would be resolved silently (the last wins): PASS or FAIL by key order.
    data = parse_json(text, source=path)
    if at is not None:
        try:
            found = locate(data, at)
        except KeyPathError as exc:
            raise UserError(str(exc), source=path, key=at) from None
        if found is None:
            raise UserError(f"is missing; the study reads split {split!r} here", source=path,
                            key=at)  # fmt: skip
        data = apply_renames(found[1], rename, f"{path} (at {at})") if rename else found[1]
        path_text = f"{path} (at {at})"
        shape = parse_measurements(data, split, source=path_text)
        return Measurements(shape, data, tuple(_unknown(data, shape)), path_text)
    data = apply_renames(data, rename, str(path)) if rename else data
    shape = parse_measurements(data, split, source=str(path))
    return Measurements(shape, data, tuple(_unknown(data, shape)), str(path))


def load_measurements(path: Path, split: str) -> dict[str, Any]:
    """Read and check one saved-measurement JSON file: the known part (UserError, exit 2,
    when malformed)."""
    shape = read_measurements(path, split).shape
    if shape is None:
        raise UserError("is a JSONL file; expected a JSON object", source=path)
    return shape


def number_at(saved: Measurements, path: str) -> float | int | None:
    """The number a key path names in a saved file; None where the file does not record it
    (a missing key, a null). Anything else there (text, a table, NaN) is what a study uses
    wrongly: UserError naming the file and the key path, exit 2.

    >>> m = Measurements(None, [{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": None}], ())
    >>> [number_at(m, p) for p in ("[epoch=1].loss", "[epoch=2].loss",
    ...                       "[epoch=3].loss")]
    [0.5, None, None]
    """
    try:
        found = locate(saved.document, path)
    except KeyPathError as exc:
        raise UserError(str(exc), source=saved.source, key=path) from None
    value = None if found is None else found[1]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(
            f"is {type(value).__name__} {str(value)[:40]!r}; expected a number, or null",
            source=saved.source,
            key=path,
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(
            f"is {value}; expected a finite number, or null", source=saved.source, key=path
        )
    return value

"""The probe report's records (``audiorepro.probe/1``, :mod:`audiorepro.metrics.probe`) and
its sections' (regression, classification, events, human agreement, speaker vectors), apart
from the metrics that compute them: a probe bundle's records (``runner.kinds.probe.records``)
hold them and are read (``diff``, ``verify OUT``, the JSON Schemas) without importing the
metrics, and pydantic resolves them from here (the metrics' modules import them too)."""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict

__all__ = [
    "ClassScores",
    "ClassSpan",
    "ClassificationReport",
    "DimensionReport",
    "EventsReport",
    "HumanCutReport",
    "HumanReport",
    "IouScores",
    "ProbeReport",
    "PromptReport",
    "RegressionReport",
    "VectorsReport",
]


class RegressionReport(TypedDict):
    """Every regression metric of one target (:func:`regression_report`)."""

    n: int
    mae: float | None
    normalized_mae: float | None
    rmse: float | None
    pearson: float | None
    spearman: float | None


class ClassScores(TypedDict):
    recall: float | None
    precision: float | None


class ClassificationReport(TypedDict):
    """Every classification metric of one set of predictions (:func:`classification_report`)."""

    n: int
    accuracy: float | None
    balanced_accuracy: float | None
    macro_f1: float | None
    per_class: dict[str, ClassScores]  #: class name -> recall and precision
    confusion_matrix: list[list[int]]  #: [true][predicted] counts
    #: with groups: the group-bootstrap 95% interval of the accuracy (None: undefined)
    accuracy_ci95_group_bootstrap: NotRequired[list[float] | None]


class IouScores(TypedDict):
    """Event detection at one IoU threshold."""

    matched: int
    precision: float | None
    recall: float | None
    f1: float | None


class ClassSpan(TypedDict):
    """One event class: its reference spans and the oracle-span accuracy over them."""

    support: int
    oracle_span_accuracy: float | None


class EventsReport(TypedDict):
    """The events section of a probe report: :func:`event_scores`, then what the probe
    report adds from the frame and class arrays it has."""

    iou: dict[str, IouScores]  #: IoU threshold (as a string) -> scores
    start_mae_s: float | None
    end_mae_s: float | None
    frame_f1: NotRequired[float | None]
    oracle_span_class_accuracy: NotRequired[float | None]
    classes: NotRequired[dict[str, ClassSpan]]  #: class index -> support and accuracy
    detected_span_class_accuracy: NotRequired[float | None]


class PromptReport(TypedDict):
    """One prompt of a human-benchmark cut."""

    n: int
    spearman: float | None
    balanced_accuracy_oracle: float | None


class DimensionReport(TypedDict):
    """One dimension of a human-benchmark cut (its prompts alone)."""

    n: int
    prompts: int
    mean_prompt_spearman: float | None
    balanced_accuracy_oracle_per_prompt: float | None


class HumanCutReport(TypedDict):
    """Every human-benchmark number of one label cut (:func:`human_benchmark_report`)."""

    n: int
    prompts: int
    positive_rate: float | None
    mean_prompt_spearman: float | None
    balanced_accuracy_oracle_per_prompt: float | None
    balanced_accuracy_oracle_overall: float | None
    balanced_accuracy_5fold_clip_grouped: float | None
    per_prompt: dict[str, PromptReport]  #: prompt -> its numbers (first-seen order)
    per_dimension: NotRequired[dict[str, DimensionReport]]  #: with the items' dimensions


#: benchmark -> label cut (``all`` and each named cut) -> its numbers
HumanReport = dict[str, dict[str, HumanCutReport]]


class VectorsReport(TypedDict):
    """Speaker vectors: the valid pairs and their mean cosine."""

    n: int
    mean_cosine: float | None


class ProbeReport(TypedDict):
    """The ``audiorepro.probe/1`` document: a section for each kind of array the file has."""

    schema: str
    source: str
    sha256: str | None
    regression: NotRequired[dict[str, RegressionReport]]  #: target -> its metrics
    classification: NotRequired[ClassificationReport]
    events: NotRequired[EventsReport]
    human: NotRequired[HumanReport]
    vectors: NotRequired[VectorsReport]
    speaker_sets: NotRequired[dict[str, VectorsReport]]  #: named speaker-vector set -> cosine

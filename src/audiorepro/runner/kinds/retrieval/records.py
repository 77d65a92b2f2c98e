"""The retrieval kind's records: ``verification.json`` and ``bundle.json.gz`` (schema id
:data:`~audiorepro.runner.output.outputs.RETRIEVAL_BUNDLE`) of a retrieval study, typed."""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from audiorepro.checks.parity import ParityBlock
from audiorepro.checks.verify import Summary
from audiorepro.core.io import JsonValue
from audiorepro.formats.dump import EmptyPolicy, GainLevels
from audiorepro.metrics.retrieval import TiePolicy, TieSummary
from audiorepro.models.identity_block import IdentityBlock
from audiorepro.runner.output.outputs import BootstrapRecord
from audiorepro.specs.selection import SelectionRecord


class RetrievalVerification(TypedDict):
    """``verification.json`` of a retrieval study (the published structure, then ours)."""

    metric_parity: ParityBlock
    #: The first identity check (the published structure has one), or None.
    checkpoint_identity: IdentityBlock | None
    checkpoint_identities: list[IdentityBlock]
    metric_parity_passed: bool
    cross_pipeline_comparable: bool
    failures: list[str]
    golden: Summary


class RetrievalStudyRecord(TypedDict):
    name: str
    title: str
    sha256: str
    tie_policy: TiePolicy
    bootstrap: BootstrapRecord
    #: the study's cutoffs ``k`` (absent: none given, definitions 1.0's metrics)
    k: NotRequired[list[int]]
    #: the study's policy for queries without a relevant item (absent: none, they are refused)
    empty_queries: NotRequired[EmptyPolicy]


class RankHistogram(TypedDict):
    """Counts of queries by the position of their first relevant item, in bins."""

    bins: list[str]
    counts: list[int]


class PairedRecord(TypedDict):
    """A paired bootstrap of model ``a`` against ``b`` (the dataset's first cell) on the same
    queries: ``metric(a) - metric(b)``, its interval and the fraction of resamples in which
    ``a`` is not better."""

    dataset: str
    a: str
    b: str
    direction: str
    metric: str
    difference: float
    low: float
    high: float
    fraction_not_better: float


class BundleCell(TypedDict):
    """One cell: its identity, and (when its dump was there) every number of it."""

    id: str
    model: str
    dataset: str
    error: str | None
    dump_sha256: NotRequired[str | None]
    n_clips: NotRequired[int]
    n_captions: NotRequired[int]
    captions_per_clip: NotRequired[int | None]
    model_meta: NotRequired[dict[str, JsonValue]]
    #: direction -> hit rate at k = 1..10
    curves: NotRequired[dict[str, list[float]]]
    #: direction -> queries by the rank of their first relevant item
    rank_histogram: NotRequired[dict[str, RankHistogram]]
    #: direction -> metric -> value
    metrics: NotRequired[dict[str, dict[str, float]]]
    ties: NotRequired[dict[str, TieSummary]]
    #: only for a graded dump (``relevance_gains``): the gains' kind and the number of
    #: relevance entries at each gain (absent for binary relevance)
    graded_relevance: NotRequired[GainLevels]
    #: profile -> metric -> value
    profiles: NotRequired[dict[str, dict[str, float]]]
    #: direction -> metric -> [low, high] (95% bootstrap)
    intervals: NotRequired[dict[str, dict[str, list[float]]]]


class BundleStatus(TypedDict):
    passed: bool
    counts: dict[str, int]
    statuses: list[str]


class RetrievalBundle(TypedDict):
    """``bundle.json.gz`` of a retrieval study: every number and every input's identity."""

    schema: Literal["audiorepro.bundle/1"]
    definitions_version: int
    #: with a study's ``k`` only: 1 (definitions 1.1, which add measures and cutoffs)
    definitions_minor: NotRequired[int]
    study: RetrievalStudyRecord
    cells: list[BundleCell]
    paired_bootstrap: list[PairedRecord]
    verification: RetrievalVerification
    status: BundleStatus
    #: ``--cells``/``--device`` of a run of part of the study (absent: the whole study)
    selection: NotRequired[SelectionRecord]

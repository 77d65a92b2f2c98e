"""Metric parity: the fast harness against the independent reference, cell by cell.

The output keeps the structure that existing readers of CLAP verification files use::

    {"metric_parity": {"cells": [{"source", "n_clips", "n_captions", "captions_per_clip",
      "multi_positive", "worst_abs_delta", "passed", "rows": [{"direction", "metric",
      "harness", "independent", "abs_delta"}]}], "n_cells", "cells_with_multi_positive_ap",
      "tolerance", "worst_abs_delta", "passed"}}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired

from typing_extensions import TypedDict

from audiorepro.core.errors import param_error
from audiorepro.formats.dump import Dump, EmptyPolicy
from audiorepro.metrics.retrieval import DIRECTIONS, TiePolicy, compute_retrieval, metric_names
from audiorepro.reference import reference_retrieval_metrics

DEFAULT_TOLERANCE = 1e-9


class ParityRow(TypedDict):
    """One metric of one dump, from the harness and from the independent reference."""

    direction: str
    metric: str
    harness: float
    independent: float
    abs_delta: float


class ParityCell(TypedDict):
    """Every canonical metric of one dump, harness against reference."""

    source: str
    n_clips: int
    n_captions: int
    captions_per_clip: int | None
    multi_positive: bool
    worst_abs_delta: float
    passed: bool
    rows: list[ParityRow]
    #: The study cell's id, in a reproduce run's verification.
    cell: NotRequired[str]
    #: Only for a dump read with a policy for queries without a relevant item (skip, zero).
    empty_queries: NotRequired[EmptyPolicy]


class ParityBlock(TypedDict):
    """The ``metric_parity`` block of ``verification.json`` and ``audiorepro parity``."""

    cells: list[ParityCell]
    n_cells: int
    cells_with_multi_positive_ap: int
    tolerance: float
    worst_abs_delta: float
    passed: bool


class ParityReport(TypedDict):
    metric_parity: ParityBlock


def parity_cell(
    dump: Dump,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    tie_policy: TiePolicy = "pessimistic",
    cutoffs: Sequence[int] | None = None,
) -> ParityCell:
    """Every canonical metric of one dump from the harness and from the reference (with
    ``cutoffs``: definitions 1.1's at those cutoffs)."""
    harness = compute_retrieval(dump).metrics(tie_policy, cutoffs)
    if dump.relevance_csr is None:
        independent = reference_retrieval_metrics(
            dump.audio_embeds,
            dump.text_embeds,
            dump.text_to_audio,
            tie_policy=tie_policy,
            cutoffs=cutoffs,
            empty_queries=dump.empty_queries,
        )
    else:  # the relevance as the file gives it (not as the harness's engine reads it)
        independent = reference_retrieval_metrics(
            dump.audio_embeds,
            dump.text_embeds,
            relevance_indptr=dump.relevance_csr.indptr,
            relevance_indices=dump.relevance_csr.indices,
            relevance_gains=dump.gains,
            tie_policy=tie_policy,
            cutoffs=cutoffs,
            empty_queries=dump.empty_queries,
        )
    rows: list[ParityRow] = []
    deltas: list[float] = []
    for direction in DIRECTIONS:
        for name in metric_names(cutoffs):
            h, r = harness[direction][name], independent[direction][name]
            deltas.append(abs(h - r))
            rows.append(
                {
                    "direction": direction,
                    "metric": name,
                    "harness": h,
                    "independent": r,
                    "abs_delta": deltas[-1],
                }
            )
    worst = max(deltas)
    cell: ParityCell = {
        "source": dump.source,
        "n_clips": dump.n_clips,
        "n_captions": dump.n_captions,
        "captions_per_clip": dump.captions_per_clip,
        "multi_positive": dump.multi_positive,
        "worst_abs_delta": worst,
        "passed": worst <= tolerance,
        "rows": rows,
    }
    if dump.empty_queries is not None:
        cell["empty_queries"] = dump.empty_queries
    return cell


def parity_report(
    dumps: Sequence[Dump],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    tie_policy: TiePolicy = "pessimistic",
    cutoffs: Sequence[int] | None = None,
) -> ParityReport:
    """The ``metric_parity`` block for several dumps."""
    if not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise param_error("tolerance", "parity_report", "a float >= 0", tolerance)
    cells = [
        parity_cell(d, tolerance=tolerance, tie_policy=tie_policy, cutoffs=cutoffs) for d in dumps
    ]
    worst = max((c["worst_abs_delta"] for c in cells), default=0.0)
    return {
        "metric_parity": {
            "cells": cells,
            "n_cells": len(cells),
            "cells_with_multi_positive_ap": sum(1 for c in cells if c["multi_positive"]),
            "tolerance": tolerance,
            "worst_abs_delta": worst,
            "passed": all(c["passed"] for c in cells),
        }
    }

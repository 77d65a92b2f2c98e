"""The closing table of ``reproduce`` and ``evaluate``: the headline numbers of a run, per cell,
read from the bundle it wrote (like lm-evaluation-harness' closing table).

Retrieval cells show R@1, R@10 and mAP@10 in both directions (canonical definitions, the
study's tie policy); zero-shot cells accuracy, top-5 accuracy and balanced accuracy; probe
studies each task's leader; speaker-verification cells their equal error rate. Values are
printed to 4 decimals (the bundle keeps full precision). A cell without numbers shows why.

>>> bundle = {"schema": "audiorepro.bundle/1", "cells": [{"id": "m/clotho", "error": None,
...     "metrics": {"t2a": {"r@1": 0.25, "r@10": 0.75, "map@10": 0.4},
...                 "a2t": {"r@1": 0.5, "r@10": 1.0, "map@10": 0.3}}}]}
>>> print("\\n".join(results_table(bundle)))
cell      t2a R@1  t2a R@10  t2a mAP@10  a2t R@1  a2t R@10  a2t mAP@10
m/clotho   0.2500    0.7500      0.4000   0.5000    1.0000      0.3000
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: (column title, direction, canonical metric name) of a retrieval cell's headline.
RETRIEVAL_HEADLINE = (
    ("t2a R@1", "t2a", "r@1"),
    ("t2a R@10", "t2a", "r@10"),
    ("t2a mAP@10", "t2a", "map@10"),
    ("a2t R@1", "a2t", "r@1"),
    ("a2t R@10", "a2t", "r@10"),
    ("a2t mAP@10", "a2t", "map@10"),
)
#: (column title, canonical zero-shot metric name) of a zero-shot cell's headline.
ZEROSHOT_HEADLINE = (
    ("accuracy", "accuracy"),
    ("top-5", "top5_accuracy"),
    ("balanced", "balanced_accuracy"),
)


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return f"{value:.4f}"


def _columns(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned first column, right-aligned numbers, two spaces apart."""
    table = [list(header), *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    out = []
    for row in table:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        out.append("  ".join(cells).rstrip())
    return out


def _retrieval(bundle: Mapping[str, Any]) -> list[str]:
    rows = []
    for cell in bundle.get("cells", []):
        if cell.get("error"):
            rows.append([str(cell["id"]), *["-"] * len(RETRIEVAL_HEADLINE)])
            continue
        metrics = cell.get("metrics", {})
        rows.append(
            [str(cell["id"])]
            + [_fmt(metrics.get(d, {}).get(name)) for _, d, name in RETRIEVAL_HEADLINE]
        )
    return _columns(["cell", *(t for t, _, _ in RETRIEVAL_HEADLINE)], rows)


def _zeroshot(bundle: Mapping[str, Any]) -> list[str]:
    tie = bundle.get("study", {}).get("tie_policy", "pessimistic")
    rows = []
    for cell in bundle.get("cells", []):
        canonical = cell.get("metrics", {}).get("canonical", {}).get(tie, {})
        rows.append([str(cell["id"])] + [_fmt(canonical.get(n)) for _, n in ZEROSHOT_HEADLINE])
    return _columns(["cell", *(t for t, _ in ZEROSHOT_HEADLINE)], rows)


def _probe(bundle: Mapping[str, Any]) -> list[str]:
    """The leaders recomputed from predictions, then each saved-measurement task's leader
    (the best observed run among the candidates' best and the baselines, and its value); no
    table at all where a study has neither (an empty header says nothing)."""
    rows = []
    for lead in bundle.get("leaders", []):
        ranking = lead.get("ranking") or []
        best = ranking[0] if ranking else {}
        task, metric = str(lead.get("task")), str(lead.get("metric"))
        rows.append([task, metric, str(best.get("model", "-")), _fmt(best.get("value"))])
    for lead in bundle.get("task_leaders", []):
        win = lead.get("highest_measured_run")
        values = {lead.get("best_candidate_run"): lead.get("best_candidate_value")}
        values.update(lead.get("baselines") or {})
        value = values.get(win)
        if lead.get("percent") and isinstance(value, int | float):
            value = 100 * value
        arrow = " ↑" if lead.get("higher_is_better") else " ↓"
        metric = str(lead.get("label") or lead.get("metric")) + (
            " (%)" if lead.get("percent") else ""
        )
        rows.append([str(lead.get("task")), metric + arrow, str(win or "-"), _fmt(value)])
    return _columns(["task", "metric", "leader", "value"], rows) if rows else []


def _linear_probe(bundle: Mapping[str, Any]) -> list[str]:
    rows = []
    for cell in bundle.get("cells", []):
        folds = " ".join(_fmt(f.get("accuracy")) for f in cell.get("folds", []))
        rows.append([str(cell["id"]), _fmt(cell.get("mean_accuracy")), folds])
    return _columns(["cell", "mean accuracy", "accuracy per fold"], rows)


def _speaker_verification(bundle: Mapping[str, Any]) -> list[str]:
    """Each cell's trial counts and equal error rate (lower is better).

    >>> cell = {"id": "m/speech", "target_trials": 3, "nontarget_trials": 9, "eer": 0.125}
    >>> print("\\n".join(_speaker_verification({"cells": [cell]})))
    cell      target trials  non-target trials   EER ↓
    m/speech              3                  9  0.1250
    """
    rows = [
        [str(c["id"]), str(c.get("target_trials", "-")), str(c.get("nontarget_trials", "-")),
         _fmt(c.get("eer"))]
        for c in bundle.get("cells", [])
    ]  # fmt: skip
    return _columns(["cell", "target trials", "non-target trials", "EER ↓"], rows)


def _hear(bundle: Mapping[str, Any]) -> list[str]:
    """Each cell's task and leaderboard scores (the test split's, or the mean over folds).

    >>> cell = {"id": "m-words", "task": "words-v1-full", "leaderboard": {"top1_acc": 0.5}}
    >>> print("\\n".join(_hear({"cells": [cell]})))
    cell              task     score   value
    m-words  words-v1-full  top1_acc  0.5000
    """
    rows = [
        [str(c["id"]), str(c.get("task")), name, _fmt(value)]
        for c in bundle.get("cells", [])
        for name, value in (c.get("leaderboard") or {}).items()
    ]
    return _columns(["cell", "task", "score", "value"], rows)


def results_table(bundle: Mapping[str, Any]) -> list[str]:
    """The headline lines of one study's bundle (decompressed), by its kind."""
    schema = str(bundle.get("schema", ""))
    if bundle.get("kind") == "probe":
        return _probe(bundle)
    if schema.startswith("audiorepro.zeroshot-bundle/"):
        return _zeroshot(bundle)
    if schema.startswith("audiorepro.linear-probe-bundle/"):
        return _linear_probe(bundle)
    if schema.startswith("audiorepro.speaker-verification-bundle/"):
        return _speaker_verification(bundle)
    if schema.startswith("audiorepro.hear-bundle/"):
        return _hear(bundle)
    return _retrieval(bundle)

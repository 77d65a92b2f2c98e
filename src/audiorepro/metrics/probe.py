"""The probe report (``audiorepro.probe/1``): every metric a prediction file supports.

The prediction file format is :mod:`audiorepro.formats.predictions`; the metric definitions
are in :mod:`~audiorepro.metrics.regression`, :mod:`~audiorepro.metrics.classification`,
:mod:`~audiorepro.metrics.events` and :mod:`~audiorepro.metrics.vectors`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.hashing import sha256_file
from audiorepro.formats.predictions import load_predictions, speaker_sets
from audiorepro.metrics.classification import classification_report
from audiorepro.metrics.events import (
    detected_span_class_accuracy,
    event_scores,
    frame_f1,
    span_class_accuracy,
    span_class_support,
)
from audiorepro.metrics.probe_human import human_benchmark_report
from audiorepro.metrics.probe_records import HumanReport, ProbeReport
from audiorepro.metrics.regression import regression_report
from audiorepro.metrics.vectors import mean_cosine

SCHEMA = "audiorepro.probe/1"


def probe_report(
    arrays: dict[str, npt.NDArray[Any]], *, source: str, sha256: str | None
) -> ProbeReport:
    """Every metric that the file supports, as the ``audiorepro.probe/1`` document."""
    out: ProbeReport = {"schema": SCHEMA, "source": source, "sha256": sha256}
    if "reg_names" in arrays:
        out["regression"] = {
            str(name): regression_report(
                arrays["reg_pred"][:, k],
                arrays["reg_true"][:, k],
                train_sd=float(arrays["reg_train_sd"][k]),
            )
            for k, name in enumerate(arrays["reg_names"].tolist())
        }
    if "cls_names" in arrays:
        out["classification"] = classification_report(
            arrays["cls_true"],
            arrays["cls_pred"],
            class_names=[str(x) for x in arrays["cls_names"].tolist()],
            groups=arrays.get("cls_group"),
        )
    if "ev_ref" in arrays:
        events = event_scores(
            arrays["ev_ref"], arrays["ev_ref_clip"], arrays["ev_pred"], arrays["ev_pred_clip"]
        )
        events["frame_f1"] = frame_f1(arrays["frame_true"], arrays["frame_prob"])
        if "ev_ref_class" in arrays and "ev_oracle_class" in arrays:
            events["oracle_span_class_accuracy"] = span_class_accuracy(
                arrays["ev_ref_class"], arrays["ev_oracle_class"]
            )
            # Per class, keyed by the class index (names are the study's, event_classes).
            events["classes"] = {
                str(c): {"support": v["support"], "oracle_span_accuracy": v["accuracy"]}
                for c, v in span_class_support(
                    arrays["ev_ref_class"], arrays["ev_oracle_class"]
                ).items()
            }
        if "ev_ref_class" in arrays and "ev_pred_class" in arrays:
            events["detected_span_class_accuracy"] = detected_span_class_accuracy(
                arrays["ev_ref"],
                arrays["ev_ref_clip"],
                arrays["ev_ref_class"],
                arrays["ev_pred"],
                arrays["ev_pred_clip"],
                arrays["ev_pred_class"],
            )
        out["events"] = events
    if "hb_score" in arrays:
        out["human"] = human_report(arrays)
    if "spk_pred" in arrays:
        out["vectors"] = {
            "n": int(np.count_nonzero(arrays["spk_valid"])),
            "mean_cosine": mean_cosine(arrays["spk_pred"], arrays["spk_ref"], arrays["spk_valid"]),
        }
    named = speaker_sets(arrays)
    if named:
        out["speaker_sets"] = {
            name: {
                "n": int(np.count_nonzero(arrays[f"spk_valid__{name}"])),
                "mean_cosine": mean_cosine(
                    arrays[f"spk_pred__{name}"],
                    arrays[f"spk_ref__{name}"],
                    arrays[f"spk_valid__{name}"],
                ),
            }
            for name in named
        }
    return out


def human_report(arrays: dict[str, npt.NDArray[Any]]) -> HumanReport:
    """benchmark -> cut -> :func:`~audiorepro.metrics.probe_human.human_benchmark_report`:
    the cut ``all`` (every item of the benchmark) and each named cut, in the file's order."""
    bench = arrays["hb_bench"]
    names = [str(x) for x in arrays["hb_cut_names"].tolist()] if "hb_cut_names" in arrays else []
    out: HumanReport = {}
    for b in dict.fromkeys(str(x) for x in bench.tolist()):
        cuts = {"all": bench == b}
        cuts.update({name: (bench == b) & arrays["hb_cut"][:, j] for j, name in enumerate(names)})
        out[b] = {
            cut: human_benchmark_report(
                arrays["hb_score"][keep],
                arrays["hb_label"][keep],
                arrays["hb_prompt"][keep],
                arrays["hb_clip"][keep],
                dimensions=arrays["hb_dimension"][keep] if "hb_dimension" in arrays else None,
            )
            for cut, keep in cuts.items()
        }
    return out


def family_mean(per_score: list[dict[str, Any]], prefix: str, field: str) -> float | None:
    """The equal-weight mean of ``field`` over the targets whose name starts with ``prefix``.

    Formula: ``mean = (1/|V|) * sum_{s in V} s[field]``, V = the targets whose name starts
    with ``prefix`` and whose ``field`` is not null; None when V is empty. Each valid target
    counts once, whatever its clip count (a family mean averages targets, not clips). Ties: no
    ranking is involved.

    >>> scores = [{"score": "emo_a", "spearman": 0.2}, {"score": "emo_b", "spearman": None},
    ...           {"score": "emo_c", "spearman": 0.4}, {"score": "vn_a", "spearman": 0.9}]
    >>> round(family_mean(scores, "emo_", "spearman"), 12)
    0.3
    >>> family_mean(scores, "dnsmos:", "spearman") is None
    True
    """
    values = [
        float(s[field])
        for s in per_score
        if s["score"].startswith(prefix) and s.get(field) is not None
    ]
    return math.fsum(values) / len(values) if values else None


def probe_report_file(path: str | Path) -> ProbeReport:
    """Read and validate a prediction file, then report every metric it supports."""
    arrays = load_predictions(path)
    return probe_report(arrays, source=Path(path).name, sha256=sha256_file(path))

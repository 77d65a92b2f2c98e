"""``audiorepro explain``: one metric under every profile, side by side, and why they differ.

Rows are concepts (R@k, recall@k, mAP@10, mAP, MRR, mean and median rank); columns are the
canonical value (with its optimistic/pessimistic tie bounds) and each profile's value under
the peer's own name. Every difference from the canonical value gets one plain-language line
with its cause. The DCASE value comes with its interval over every order of the clips tied in
its float32 scores, beside the canonical value and bounds, and the report says why a DCASE
number can move between machines (:data:`DCASE_MOVES`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.formats.dump import Dump
from audiorepro.metrics.profiles import PROFILES, ProfileResult, compute_profile
from audiorepro.metrics.retrieval import RetrievalResult, compute_retrieval, metric_names

#: concept -> (canonical name, {profile: peer name template with {d} = direction word})
CONCEPTS: dict[str, tuple[str, dict[str, str]]] = {
    "R@1": ("r@1", {"laion-clap": "{long}_R@1", "trec": "{d}/success_1", "dcase": "R1"}),
    "R@5": ("r@5", {"laion-clap": "{long}_R@5", "trec": "{d}/success_5", "dcase": "R5"}),
    "R@10": ("r@10", {"laion-clap": "{long}_R@10", "trec": "{d}/success_10", "dcase": "R10"}),
    "recall@1": ("recall@1", {"trec": "{d}/recall_1"}),
    "recall@5": ("recall@5", {"trec": "{d}/recall_5"}),
    "recall@10": ("recall@10", {"trec": "{d}/recall_10"}),
    "mAP@10": ("map@10", {"laion-clap": "{long}_mAP@10", "trec": "{d}/map_cut_10",
                          "dcase": "mAP10"}),
    "mAP": ("map", {"trec": "{d}/map"}),
    "MRR": ("mrr", {"trec": "{d}/recip_rank"}),
    "mean rank": ("mean_rank", {"laion-clap": "{long}_mean_rank"}),
    "median rank": ("median_rank", {"laion-clap": "{long}_median_rank"}),
}  # fmt: skip
LONG = {"t2a": "text_to_audio", "a2t": "audio_to_text"}
#: Definitions 1.1's families with a cutoff: family -> (concept label, trec measure prefix).
_CUTOFF_CONCEPTS = {
    "r": ("R@{k}", "success_{k}"),
    "recall": ("recall@{k}", "recall_{k}"),
    "precision": ("P@{k}", "P_{k}"),
    "map": ("mAP@{k}", "map_cut_{k}"),
    "mrr": ("MRR@{k}", None),
    "ndcg": ("nDCG@{k}", "ndcg_cut_{k}"),
}
#: Definitions 1.1's measures without a cutoff: name -> (concept label, trec measure).
_UNCUT_CONCEPTS = {
    "map": ("mAP", "map"),
    "mrr": ("MRR", "recip_rank"),
    "ndcg": ("nDCG", "ndcg"),
    "r_precision": ("R-precision", "Rprec"),
    "mean_rank": ("mean rank", None),
    "median_rank": ("median rank", None),
}


def concept_of(name: str) -> str:
    """The concept a canonical metric name denotes (``ndcg@50`` -> ``nDCG@50``), the row label
    of :func:`explain`.

    >>> concept_of("r@1"), concept_of("ndcg@50"), concept_of("r_precision")
    ('R@1', 'nDCG@50', 'R-precision')
    """
    if name in _UNCUT_CONCEPTS:
        return _UNCUT_CONCEPTS[name][0]
    family, _, k = name.partition("@")
    if family not in _CUTOFF_CONCEPTS or not k:
        raise ValueError(f"unknown canonical metric {name!r}")
    return _CUTOFF_CONCEPTS[family][0].format(k=k)


def concepts(cutoffs: Sequence[int] | None = None) -> dict[str, tuple[str, dict[str, str]]]:
    """The rows of :func:`explain`: :data:`CONCEPTS` without cutoffs; with them, every measure
    of definitions 1.1 at those cutoffs (:func:`metric_names`), each with the peers' names
    where the peer reports it (laion-clap and dcase at their own cutoffs only)."""
    if cutoffs is None:
        return CONCEPTS
    legacy = {canon: peers for canon, peers in CONCEPTS.values()}
    out: dict[str, tuple[str, dict[str, str]]] = {}
    for name in metric_names(cutoffs):
        peers = dict(legacy.get(name, {}))
        family, _, k = name.partition("@")
        trec = _CUTOFF_CONCEPTS[family][1] if k else _UNCUT_CONCEPTS[name][1]
        if trec is not None:
            peers["trec"] = "{d}/" + trec.format(k=k)
        out[concept_of(name)] = (name, peers)
    return out


TIE_RULES = {
    "laion-clap": "torch.argsort(descending=True), which is not stable",
    "trec": "document id in decreasing string order",
    "dcase": "numpy.argsort(scores)[::-1]",
}
EPS = 1e-12
DCASE_MOVES = (
    "why a DCASE number can move between machines: where a caption's clip ties another clip "
    "in the float32 scores, numpy.argsort(scores)[::-1], which is not stable, decides its "
    "position, and numpy orders ties by its sort kernel (numpy 1.26 with AVX-512 sorting "
    "orders them unlike numpy 1.23.5, the organizers' pin, or a CPU without AVX-512); the "
    "float32 scores come from torch's dot kernel, whose last bits can follow the CPU and its "
    "BLAS and so make or break ties. The interval over every tie order holds wherever the "
    "float32 scores are the same; the canonical value (exact scores) holds on every machine."
)
#: Profiles whose peer evaluates text-to-audio retrieval only.
T2A_ONLY = {"dcase"}


def _peer_name(template: str, direction: str) -> str:
    return template.format(d=direction, long=LONG[direction])


def _cause(
    profile: str,
    concept: str,
    direction: str,
    value: float,
    canonical: float,
    bounds: tuple[float, float],
    interval: list[float] | None = None,
) -> str:
    lo, hi = min(bounds), max(bounds)
    if profile == "dcase" and interval is not None:
        dlo, dhi = min(interval), max(interval)
        if dlo != dhi:
            how = (
                "numpy.argsort(scores)[::-1] puts the clips tied in its float32 scores in the "
                "order this numpy build and CPU give them"
            )
        else:
            how = (
                "its float32 scores round near-equal exact scores together or "
                "apart, so they order some clips unlike the exact scores"
            )
        return (
            f"{how}; over every order of the float32 ties the DCASE value lies in "
            f"[{dlo:.6g}, {dhi:.6g}], the canonical value (exact scores) in [{lo:.6g}, {hi:.6g}]"
        )
    in_bounds = lo - EPS <= value <= hi + EPS
    tie = (
        f"ties: {profile} orders tied scores by {TIE_RULES[profile]}; the canonical value "
        f"puts relevant items after tied ones (pessimistic); the value lies within the "
        f"canonical tie bounds [{lo:.6g}, {hi:.6g}]"
    )
    if profile == "laion-clap" and concept == "mAP@10" and direction == "a2t":
        return (
            "its code gives the relevant captions the precision numerators 1, 2, ... in "
            "caption order instead of rank order (the docstring says the ranks are "
            "sorted; the code does not sort them), then divides by 5"
            + ("; ties add to it" if lo != hi else "")
        )
    if profile == "laion-clap" and concept == "median rank":
        if canonical != math.floor(canonical) and value == math.floor(canonical):
            return "it takes floor(median of rank - 1) + 1, so a median ending in .5 goes down"
    if in_bounds:
        return tie
    return (
        f"{profile} defines {concept} differently from the canonical definition "
        "(see docs/metrics.md)"
    )


def explain(
    dump: Dump,
    *,
    result: RetrievalResult | None = None,
    profiles: tuple[str, ...] = PROFILES,
    cutoffs: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Per direction: rows of every concept under every profile, and the differences (with
    ``cutoffs``: definitions 1.1's concepts at those cutoffs, :func:`concepts`)."""
    if result is None:
        result = compute_retrieval(dump)
    pes, opt = result.metrics("pessimistic", cutoffs), result.metrics("optimistic", cutoffs)
    rows_of = concepts(cutoffs)
    by_profile: dict[str, ProfileResult] = {}
    skipped: dict[str, str] = {}
    for p in profiles:
        if p == "canonical":
            continue
        try:
            by_profile[p] = compute_profile(
                dump, p, result=result, cutoffs=cutoffs if p == "trec" else None
            )
        except UserError as exc:  # laion-clap on 3 captions per clip, or without torch
            skipped[p] = str(exc)
    out: dict[str, Any] = {
        "source": dump.source,
        "sha256": dump.sha256,
        "skipped": skipped,
        "directions": {},
    }
    dcase = by_profile.get("dcase")
    if dcase is not None and dcase.ties is not None:
        scores = next(n for n in dcase.notes if n.startswith(("scores:", "FALLBACK")))
        out["dcase"] = {
            "queries_affected": dcase.ties["t2a"]["queries_affected"],
            "n_queries": dump.n_captions,
            "scores": scores,
            "machine_dependence": DCASE_MOVES,
        }
    for direction in ("t2a", "a2t"):
        rows = []
        differences = []
        for concept, (canon_name, peers) in rows_of.items():
            canonical = pes[direction][canon_name]
            bounds = (opt[direction][canon_name], canonical)
            row: dict[str, Any] = {
                "concept": concept,
                "canonical": canonical,
                "canonical_name": canon_name,
                "tie_bounds": list(bounds),
                "profiles": {},
            }
            for p, res in by_profile.items():
                template = peers.get(p)
                if template is None or (p in T2A_ONLY and direction != "t2a"):
                    continue
                name = _peer_name(template, direction)
                if name not in res.metrics:
                    continue
                value = res.metrics[name]
                row["profiles"][p] = {"name": name, "value": value}
                interval = None
                if res.ties is not None and name in res.ties[direction]["bounds"]:
                    # [optimistic, pessimistic] over every tie order, as tie_bounds.
                    interval = list(res.ties[direction]["bounds"][name])
                    row["profiles"][p]["interval"] = interval
                delta = value - canonical
                if abs(delta) > EPS:
                    cause = _cause(p, concept, direction, value, canonical, bounds, interval)
                    word = "exceeds" if delta > 0 else "is below"
                    differences.append(
                        {
                            "profile": p,
                            "concept": concept,
                            "name": name,
                            "delta": delta,
                            "text": f"{p} {direction} {concept} ({name}) {word} the canonical "
                            f"value by {abs(delta):.3g} because {cause}.",
                        }
                    )
            rows.append(row)
        out["directions"][direction] = {"rows": rows, "differences": differences}
    return out


def explain_text(report: dict[str, Any]) -> str:
    lines = [f"{report['source']}"]
    for direction, block in report["directions"].items():
        profiles = sorted({p for r in block["rows"] for p in r["profiles"]})
        lines.append("")
        lines.append(
            f"{direction}: {'concept':<12}{'canonical':>12}" + "".join(f"{p:>12}" for p in profiles)
        )
        for r in block["rows"]:
            cells = "".join(
                f"{r['profiles'][p]['value']:>12.6f}" if p in r["profiles"] else f"{'-':>12}"
                for p in profiles
            )
            lines.append(f"     {r['concept']:<12}{r['canonical']:>12.6f}{cells}")
        dcase_rows = [r for r in block["rows"] if "interval" in r["profiles"].get("dcase", {})]
        if dcase_rows and "dcase" in report:
            info = report["dcase"]
            lines.append(
                f"     dcase over every tie order ({info['queries_affected']} of "
                f"{info['n_queries']} captions tie their clip in the float32 scores):"
            )
            lines.append(
                f"     {'concept':<12}{'dcase':>12}  {'interval':<24}{'canonical':>12}  bounds"
            )
            for r in dcase_rows:
                cell = r["profiles"]["dcase"]
                lo, hi = sorted(cell["interval"])
                clo, chi = sorted(r["tie_bounds"])
                lines.append(
                    f"     {r['concept']:<12}{cell['value']:>12.6f}  "
                    f"{f'[{lo:.6f}, {hi:.6f}]':<24}{r['canonical']:>12.6f}  "
                    f"[{clo:.6f}, {chi:.6f}]"
                )
        for d in block["differences"]:
            lines.append(f"  - {d['text']}")
        if not block["differences"]:
            lines.append("  - every profile agrees with the canonical value")
    if "dcase" in report:
        lines.append("")
        lines.append(f"dcase {report['dcase']['scores']}")
        lines.append(f"dcase: {report['dcase']['machine_dependence']}")
    for p, why in report["skipped"].items():
        lines.append(f"{p}: not applicable here ({why})")
    return "\n".join(lines)

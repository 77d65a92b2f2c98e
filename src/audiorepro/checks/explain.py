"""``audiorepro explain``: one metric under every profile, side by side, and why they differ.

Rows are concepts (R@k, recall@k, mAP@10, mAP, MRR, mean and median rank); columns are the
canonical value (with its optimistic/pessimistic tie bounds) and each profile's value under
the peer's own name. Every difference from the canonical value gets one plain-language line
with its cause. The DCASE value comes with its interval over every order of the clips tied in
its float32 scores, beside the canonical value and bounds, and the report says why a DCASE
number can move between machines (:data:`DCASE_MOVES`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.formats.dump import Dump
from audiorepro.metrics.profile_registry import is_canonical
from audiorepro.metrics.profiles import (
    DCASE_MOVES as DCASE_MOVES,  # why a DCASE number can move (declared with its profile)
)
from audiorepro.metrics.profiles import (
    Cause,
    Profile,
    ProfileResult,
    compute_profile,
    find_profile,
    profile_names,
    registered_profiles,
)
from audiorepro.metrics.retrieval import RetrievalResult, compute_retrieval, metric_names

#: concept -> canonical name: the rows without cutoffs (each profile declares its own names,
#: ``Profile.concepts`` in :mod:`audiorepro.metrics.profile_registry`).
CONCEPTS: dict[str, str] = {
    "R@1": "r@1", "R@5": "r@5", "R@10": "r@10",
    "recall@1": "recall@1", "recall@5": "recall@5", "recall@10": "recall@10",
    "mAP@10": "map@10", "mAP": "map", "MRR": "mrr",
    "mean rank": "mean_rank", "median rank": "median_rank",
}  # fmt: skip
LONG = {"t2a": "text_to_audio", "a2t": "audio_to_text"}
#: Definitions 1.1's families with a cutoff: family -> concept label.
_CUTOFF_CONCEPTS = {
    "r": "R@{k}",
    "recall": "recall@{k}",
    "precision": "P@{k}",
    "map": "mAP@{k}",
    "mrr": "MRR@{k}",
    "ndcg": "nDCG@{k}",
}
#: Definitions 1.1's measures without a cutoff: name -> concept label.
_UNCUT_CONCEPTS = {
    "map": "mAP",
    "mrr": "MRR",
    "ndcg": "nDCG",
    "r_precision": "R-precision",
    "mean_rank": "mean rank",
    "median_rank": "median rank",
}


def concept_of(name: str) -> str:
    """The concept a canonical metric name denotes (``ndcg@50`` -> ``nDCG@50``), the row label
    of :func:`explain`.

    >>> concept_of("r@1"), concept_of("ndcg@50"), concept_of("r_precision")
    ('R@1', 'nDCG@50', 'R-precision')
    """
    if name in _UNCUT_CONCEPTS:
        return _UNCUT_CONCEPTS[name]
    family, _, k = name.partition("@")
    if family not in _CUTOFF_CONCEPTS or not k:
        raise ValueError(f"unknown canonical metric {name!r}")
    return _CUTOFF_CONCEPTS[family].format(k=k)


def concepts(cutoffs: Sequence[int] | None = None) -> dict[str, tuple[str, dict[str, str]]]:
    """The rows of :func:`explain`: concept -> (canonical name, {profile: its name template}),
    the concepts of :data:`CONCEPTS` without cutoffs; with them, every measure of definitions
    1.1 at those cutoffs (:func:`metric_names`), each with the names of the profiles that report
    it (a profile without ``cutoffs``, laion-clap and dcase, at its own cutoffs only)."""
    names = list(CONCEPTS.values()) if cutoffs is None else metric_names(cutoffs)
    peers: dict[str, Mapping[str, str]] = {}
    for p in registered_profiles("retrieval"):
        at = p.concepts_at
        peers[p.name] = at(cutoffs) if cutoffs is not None and at is not None else p.concepts
    return {
        concept_of(name): (name, {p: m[name] for p, m in peers.items() if name in m})
        for name in names
    }


EPS = 1e-12


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
    """Why ``profile``'s value of a concept differs from the canonical one: the profile's own
    cause where it declares one, else its tie rule within the canonical tie bounds."""
    declared = find_profile(profile)
    if declared is None:
        raise ValueError(f"unknown profile {profile!r}")
    if declared.cause is not None:
        own = declared.cause(Cause(concept, direction, value, canonical, bounds, interval))
        if own is not None:
            return own
    lo, hi = min(bounds), max(bounds)
    if lo - EPS <= value <= hi + EPS:
        return (
            f"ties: {profile} orders tied scores by {declared.tie_rule}; the canonical value "
            f"puts relevant items after tied ones (pessimistic); the value lies within the "
            f"canonical tie bounds [{lo:.6g}, {hi:.6g}]"
        )
    return (
        f"{profile} defines {concept} differently from the canonical definition "
        "(see docs/metrics.md)"
    )


def peer_name(profile: str, concept: str, direction: str) -> str | None:
    """``profile``'s name of ``concept`` (a label of :data:`CONCEPTS`) in ``direction``, or
    None where the profile does not report it (the study tables' profile rows).

    >>> peer_name("trec", "MRR", "t2a"), peer_name("dcase", "R@1", "a2t")
    ('t2a/recip_rank', None)
    """
    declared = find_profile(profile)
    template = declared.concepts.get(CONCEPTS[concept]) if declared is not None else None
    if declared is None or template is None or (declared.t2a_only and direction != "t2a"):
        return None
    return _peer_name(template, direction)


def explain(
    dump: Dump,
    *,
    result: RetrievalResult | None = None,
    profiles: tuple[str, ...] | None = None,
    cutoffs: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Per direction: rows of every concept under every profile (default: every registered
    retrieval profile), and the differences (with ``cutoffs``: definitions 1.1's concepts at
    those cutoffs, :func:`concepts`)."""
    if result is None:
        result = compute_retrieval(dump)
    pes, opt = result.metrics("pessimistic", cutoffs), result.metrics("optimistic", cutoffs)
    rows_of = concepts(cutoffs)
    by_profile: dict[str, tuple[Profile, ProfileResult]] = {}
    skipped: dict[str, str] = {}
    for p in profiles if profiles is not None else profile_names("retrieval"):
        declared = find_profile(p)
        if is_canonical(p) or declared is None:
            continue
        try:
            res = compute_profile(
                dump, p, result=result, cutoffs=cutoffs if declared.cutoffs else None
            )
        except UserError as exc:  # laion-clap on 3 captions per clip, or without torch
            skipped[p] = str(exc)
        else:
            by_profile[p] = (declared, res)
    out: dict[str, Any] = {
        "source": dump.source,
        "sha256": dump.sha256,
        "skipped": skipped,
        "directions": {},
    }
    for p, (declared, res) in by_profile.items():
        if declared.machine_dependence is not None and res.ties is not None:
            scores = next(n for n in res.notes if n.startswith(("scores:", "FALLBACK")))
            out[p] = {
                "queries_affected": res.ties["t2a"]["queries_affected"],
                "n_queries": dump.n_captions,
                "scores": scores,
                "machine_dependence": declared.machine_dependence,
            }
    for direction in ("t2a", "a2t"):
        rows = []
        differences: list[dict[str, Any]] = []
        for concept, (canon_name, peers) in rows_of.items():
            canonical = pes[direction][canon_name]
            row: dict[str, Any] = {
                "concept": concept,
                "canonical": canonical,
                "canonical_name": canon_name,
                "tie_bounds": [opt[direction][canon_name], canonical],
                "profiles": {},
            }
            for p, (declared, res) in by_profile.items():
                template = peers.get(p)
                if template is None or (declared.t2a_only and direction != "t2a"):
                    continue
                diff = _cell(row, declared, res, _peer_name(template, direction), direction)
                if diff is not None:
                    differences.append(diff)
            rows.append(row)
        out["directions"][direction] = {"rows": rows, "differences": differences}
    return out


def _cell(
    row: dict[str, Any], declared: Profile, res: ProfileResult, name: str, direction: str
) -> dict[str, Any] | None:
    """Fill ``row``'s cell of one profile (when it reports ``name``); its difference, if any."""
    if name not in res.metrics:
        return None
    p, concept, canonical = declared.name, row["concept"], row["canonical"]
    value = res.metrics[name]
    row["profiles"][p] = {"name": name, "value": value}
    interval = None
    if res.ties is not None and name in res.ties[direction]["bounds"]:
        # [optimistic, pessimistic] over every tie order, as tie_bounds.
        interval = list(res.ties[direction]["bounds"][name])
        row["profiles"][p]["interval"] = interval
    delta = value - canonical
    if abs(delta) <= EPS:
        return None
    bounds = (row["tie_bounds"][0], row["tie_bounds"][1])
    cause = _cause(p, concept, direction, value, canonical, bounds, interval)
    word = "exceeds" if delta > 0 else "is below"
    return {
        "profile": p,
        "concept": concept,
        "name": name,
        "delta": delta,
        "text": f"{p} {direction} {concept} ({name}) {word} the canonical "
        f"value by {abs(delta):.3g} because {cause}.",
    }


def _tie_interval_lines(report: dict[str, Any], block: dict[str, Any]) -> list[str]:
    """The table of each profile whose value has an interval over tie orders (dcase)."""
    lines = []
    for p in profile_names("retrieval"):
        tie_rows = [r for r in block["rows"] if "interval" in r["profiles"].get(p, {})]
        if not tie_rows or p not in report:
            continue
        info = report[p]
        lines.append(
            f"     {p} over every tie order ({info['queries_affected']} of "
            f"{info['n_queries']} captions tie their clip in the float32 scores):"
        )
        lines.append(f"     {'concept':<12}{p:>12}  {'interval':<24}{'canonical':>12}  bounds")
        for r in tie_rows:
            cell = r["profiles"][p]
            lo, hi = sorted(cell["interval"])
            clo, chi = sorted(r["tie_bounds"])
            lines.append(
                f"     {r['concept']:<12}{cell['value']:>12.6f}  "
                f"{f'[{lo:.6f}, {hi:.6f}]':<24}{r['canonical']:>12.6f}  "
                f"[{clo:.6f}, {chi:.6f}]"
            )
    return lines


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
        lines += _tie_interval_lines(report, block)
        for d in block["differences"]:
            lines.append(f"  - {d['text']}")
        if not block["differences"]:
            lines.append("  - every profile agrees with the canonical value")
    for p in profile_names("retrieval"):
        if p in report:
            lines.append("")
            lines.append(f"{p} {report[p]['scores']}")
            lines.append(f"{p}: {report[p]['machine_dependence']}")
    for p, why in report["skipped"].items():
        lines.append(f"{p}: not applicable here ({why})")
    return "\n".join(lines)

"""Reproducibility tiers: which numbers are equal to the last bit on every machine, and which
agree within a tolerance derived from float32 rounding.

- **Tier a** (exact): every value the exact engine computes from a dump's stored vectors
  (ranks, every rank-based metric, tie bounds, parity). Given the same dump file it is
  bit-identical on every machine, BLAS, instruction set and thread count; golden files compare
  it exactly.
- **Tier b** (float): every value computed with floating point from embedding values: the
  embeddings a CPU or GPU extracts, the ``laion-clap`` profile (torch float32 logits, its loss
  and its rankings), cosines. Each such value is compared within a tolerance computed from
  the data by :func:`tier_b_tolerance`, and the golden file records the value, its tier and
  its tolerance.
- **Tier c** (same machine): all outputs of a rerun on the same machine and software are
  byte-identical (not a per-value property; the runner tests check it).

Scores computed in float32 differ from the exact scores of the same vectors by at most
``(2D + 10) u s |a| |t|`` (``u = 2**-24``, ``D`` the dimension, ``s`` the logit scale: ``D u``
for any summation order or FMA, twice that for a re-normalization of both vectors, the rest
for the scaling), and a CPU extraction differs from another CPU's by at most a relative
``EMBEDDING_REL_TOLERANCE`` per vector (stated, with its measurement, below), which moves a
score by at most ``2 e s |a| |t|``. A query is *fragile* when one of its relevant items is
within the sum of two such bounds of another item: only a fragile query's rank can move. This
holds for any number of relevant items per query in either direction (a class prompt relevant
to many clips, format version 2): :func:`fragility` takes a relevance matrix. So:

- a per-query value in [0, 1] (``r@k``, ``recall@k``, ``map``, ``mrr``, the peers' ``R@k``,
  ``mAP@10``, ``P_k``, ...) moves by at most ``fragile / queries``;
- ``mean_rank`` by at most ``sum over queries of the items in band / queries``; ``median_rank``
  by at most the largest such count;
- the laion-clap ``cumulative_loss`` (a mean of cross-entropies, each 1-Lipschitz in the
  largest logit change, twice) by at most ``2 max(bound) + (N + 10) u (2 max|logit| + 2 loss)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from audiorepro.formats.dump import Dump
from audiorepro.metrics.profiles import find_profile

Tier = Literal["a", "b"]
Array = npt.NDArray[Any]
Direction = Literal["t2a", "a2t"]

U32 = 2.0**-24
#: Largest relative difference (|x - y| / |x| per embedding vector) accepted between CPU
#: extractions of the same clips with the same weights on different CPUs or code paths.
#: Measured with ``tox -e crosscpu`` on the demo's tiny models: at most 3.8e-5 over every
#: dispatch variant (the largest under MKL_ENABLE_INSTRUCTIONS=AVX2); stated with a margin.
EMBEDDING_REL_TOLERANCE = 1e-4

LEGEND = {
    "a": "exact engine over a shipped dump's stored vectors: equal to the last bit on every "
    "machine (plain numbers in this file)",
    "b": "float arithmetic over embedding values (CPU-extracted embeddings, torch float32 "
    "logits): equal within the recorded tolerance, derived in audiorepro.checks.tiers",
}

_UNIT_METRIC = re.compile(r"(r@|recall@|recall_|success_|P_|R@|mAP@|map|mrr|recip_rank)")


@dataclass(frozen=True)
class Fragility:
    """How many queries of one direction could change their ranks, and by how much."""

    queries: int
    fragile: int
    shifts: int  # sum over queries of the items within the band of a relevant item
    max_shift: int


def score_bound(
    audio: Array,
    text: Array,
    *,
    scale: float = 1.0,
    float32_scores: bool,
    embedding_rel_error: float,
) -> Array:
    """Bound on the error of each score ``[clip, caption]`` (see the module docstring).

    Embeddings each off by at most ``e |x|`` move a dot product by at most
    ``(2e + e**2) |a| |t|``.

    >>> a = np.array([[1.0, 0.0]]); t = np.array([[0.6, 0.8]])
    >>> float(score_bound(a, t, float32_scores=False, embedding_rel_error=0.0)[0, 0])
    0.0
    >>> b = score_bound(a, t, float32_scores=True, embedding_rel_error=0.0)[0, 0]
    >>> float(b) == 14 * 2.0**-24
    True
    """
    rel = 2 * embedding_rel_error + embedding_rel_error**2
    if float32_scores:
        rel += (2 * audio.shape[1] + 10) * U32
    norms_a = np.linalg.norm(audio.astype(np.float64), axis=1)
    norms_t = np.linalg.norm(text.astype(np.float64), axis=1)
    return np.asarray(abs(scale) * rel * np.outer(norms_a, norms_t))


def relevance_matrix(relevance: Array, shape: tuple[int, ...]) -> Array:
    """A dense boolean ``[clip, caption]`` relevance from ``text_to_audio`` (1-D: the clip of
    each caption) or from a boolean matrix of that shape, returned as is.

    >>> relevance_matrix(np.array([1, 0, 1]), (2, 3)).astype(int).tolist()
    [[0, 1, 0], [1, 0, 1]]
    """
    if relevance.ndim == 2:
        return np.asarray(relevance, dtype=bool)
    relevant = np.zeros(shape, dtype=bool)
    relevant[relevance, np.arange(len(relevance))] = True
    return relevant


def dump_relevance_matrix(dump: Dump) -> Array:
    """The dump's relevance as a dense boolean ``[clip, caption]`` matrix (either version)."""
    relevant = np.zeros((dump.n_clips, dump.n_captions), dtype=bool)
    rel = dump.relevance
    relevant[rel.clip_of_each_entry(), rel.indices] = True
    return relevant


def fragility(
    scores: Array,
    bound: Array,
    relevance: Array,
    direction: Direction,
    *,
    among_relevant: bool = False,
) -> Fragility:
    """Count the fragile queries of ``direction`` (scores and bound: ``[clip, caption]``).

    ``relevance`` is ``text_to_audio`` or a boolean ``[clip, caption]`` matrix
    (:func:`relevance_matrix`): a t2a query (caption) may then have several relevant clips,
    and is fragile when any of them is within the band of a non-relevant clip. Only a relevant
    item against a non-relevant one can move a rank-based metric, unless ``among_relevant``:
    laion-clap's a2t ``mAP@10`` takes the captions in their table order, so two relevant
    captions that swap change it too. With several relevant items the position of the first
    relevant one moves by at most the number of non-relevant items in band with any relevant
    one (a minimum over the relevant items, each of which moves by at most its own count), so
    the rules of the module docstring hold unchanged.

    >>> s = np.array([[1.0, 0.0], [0.999, 0.5]]); b = np.full((2, 2), 0.001)
    >>> fragility(s, b, np.array([0, 1]), "t2a")
    Fragility(queries=2, fragile=1, shifts=1, max_shift=1)
    >>> both = np.array([[True, False], [True, True]])  # caption 0 is relevant to both clips
    >>> fragility(s, b, both, "t2a")
    Fragility(queries=2, fragile=0, shifts=0, max_shift=0)
    """
    relevant = relevance_matrix(relevance, scores.shape)
    if direction == "t2a":  # queries are captions: work on the transpose
        scores, bound, relevant = scores.T, bound.T, relevant.T
    fragile = shifts = max_shift = 0
    for q in range(scores.shape[0]):
        rel = np.flatnonzero(relevant[q])
        gap = np.abs(scores[q][None, :] - scores[q][rel][:, None])
        band = gap <= bound[q][None, :] + bound[q][rel][:, None]
        if among_relevant:
            band[np.arange(len(rel)), rel] = False  # an item is not its own competitor
        else:
            band[:, rel] = False
        count = int(band.any(axis=0).sum())
        fragile += count > 0
        shifts += count
        max_shift = max(max_shift, count)
    return Fragility(scores.shape[0], fragile, shifts, max_shift)


def _direction(path: str) -> Direction | None:
    if "t2a" in path or "text_to_audio" in path:
        return "t2a"
    if "a2t" in path or "audio_to_text" in path:
        return "a2t"
    return None


def rank_tolerance(name: str, frag: Fragility) -> float:
    """The tolerance of one rank-based metric ``name`` given its direction's fragility.

    >>> f = Fragility(queries=20, fragile=2, shifts=3, max_shift=2)
    >>> rank_tolerance("r@5", f), rank_tolerance("mean_rank", f), rank_tolerance("median_rank", f)
    (0.1, 0.15, 2.0)
    """
    if "median_rank" in name:
        return float(frag.max_shift)
    if "mean_rank" in name:
        return frag.shifts / frag.queries
    if _UNIT_METRIC.search(name):
        return frag.fragile / frag.queries
    raise ValueError(f"no tolerance rule for metric {name!r}")


def loss_tolerance(bound: Array, logits: Array, loss: float) -> float:
    """Tolerance of laion-clap's ``cumulative_loss`` (see the module docstring).

    >>> loss_tolerance(np.zeros((2, 2)), np.zeros((2, 2)), 0.0)
    0.0
    """
    n = logits.shape[0]
    return float(2 * bound.max() + (n + 10) * U32 * (2 * np.abs(logits).max() + 2 * abs(loss)))


def laion_scores(audio: Array, text: Array, scale: float, cpc: int) -> Array:
    """The laion-clap profile's logits ``[clip, caption]`` in float64 (re-normalized for 5)."""
    a = audio.astype(np.float64)
    t = text.astype(np.float64)
    if cpc == 5:
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        t = t / np.linalg.norm(t, axis=1, keepdims=True)
    return np.asarray(scale * (a @ t.T))


def tier_b_tolerance(
    path: str,
    value: float,
    *,
    audio: Array,
    text: Array,
    relevance: Array,
    scale: float,
    float32_scores: bool,
    extracted: bool,
) -> float:
    """Tolerance of one tier-b value named by ``path`` (a metric name with its direction).

    ``relevance``: ``text_to_audio`` or a boolean ``[clip, caption]`` matrix (version-2 dumps,
    where a caption may be relevant to several clips)."""
    relevant = relevance_matrix(relevance, (audio.shape[0], text.shape[0]))
    if float32_scores:  # the laion-clap profile: its own logits and normalization
        cpc = int(relevant.sum(axis=1).max())
        scores = laion_scores(audio, text, scale, cpc)
    else:
        scores = audio.astype(np.float64) @ text.astype(np.float64).T
    bound = score_bound(
        audio,
        text,
        scale=scale,
        float32_scores=float32_scores,
        embedding_rel_error=EMBEDDING_REL_TOLERANCE if extracted else 0.0,
    )
    if path.endswith("cumulative_loss"):
        return loss_tolerance(bound, scores, value)
    direction = _direction(path)
    if direction is None:
        raise ValueError(f"no direction in metric path {path!r}")
    among_relevant = float32_scores and path.endswith("audio_to_text_mAP@10")
    frag = fragility(scores, bound, relevant, direction, among_relevant=among_relevant)
    return rank_tolerance(path.rsplit("/", 1)[-1], frag)


def tiered(value: float, tolerance: float) -> dict[str, Any]:
    """A tier-b leaf as golden files record it."""
    return {"tier": "b", "tolerance": tolerance, "value": value}


def _leaves(data: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(data, Mapping) and set(data) != {"tier", "tolerance", "value"}:
        for key in sorted(data):
            yield from _leaves(data[key], f"{path}/{key}" if path else str(key))
    else:
        yield path, data


def compare(golden: Any, obtained: Any) -> list[str]:
    """Every difference between two tiered golden structures, one line each.

    Plain values (tier a) must be equal, type included; a tier-b leaf must lie within the
    larger of the two recorded tolerances.

    >>> g = {"x": 1.0, "y": tiered(2.0, 0.1)}
    >>> compare(g, {"x": 1.0, "y": tiered(2.05, 0.1)})
    []
    >>> bad = {"x": 1.0000000000000002, "y": tiered(2.5, 0.1)}
    >>> compare(g, bad)  # doctest: +NORMALIZE_WHITESPACE
    ['x: tier a: golden 1.0, obtained 1.0000000000000002 (must be equal)',
     'y: tier b: golden 2.0, obtained 2.5, |delta| 0.5 > tolerance 0.1']
    """
    want = dict(_leaves(golden))
    got = dict(_leaves(obtained))
    problems = [f"{k}: missing" for k in sorted(set(want) - set(got))]
    problems += [f"{k}: not in the golden file" for k in sorted(set(got) - set(want))]
    for key in sorted(set(want) & set(got)):
        w, g = want[key], got[key]
        if isinstance(w, Mapping) and isinstance(g, Mapping):
            tol = max(float(w["tolerance"]), float(g["tolerance"]))
            delta = abs(float(g["value"]) - float(w["value"]))
            if not delta <= tol:  # NaN fails too
                problems.append(
                    f"{key}: tier b: golden {w['value']!r}, obtained {g['value']!r}, "
                    f"|delta| {delta:.3g} > tolerance {tol:.3g}"
                )
        elif type(w) is not type(g) or w != g:
            problems.append(f"{key}: tier a: golden {w!r}, obtained {g!r} (must be equal)")
    return problems


def tier_cell(
    metrics: Mapping[str, Mapping[str, float]],
    profiles: Mapping[str, Mapping[str, float]],
    dump: Dump,
    *,
    extracted: bool,
) -> dict[str, Any]:
    """One cell's canonical metrics and profiles with each value in its tier.

    Exact-engine values (``metrics``, every profile but ``laion-clap``) are tier a for a
    shipped dump and tier b for an ``extracted`` one (its vectors follow the CPU);
    ``laion-clap`` values are tier b always (torch float32 logits), but for ``num_samples``:
    the registry's ``float32_scores`` (:mod:`audiorepro.metrics.profile_registry`) says which.
    """
    inputs = {
        "audio": dump.audio_embeds,
        "text": dump.text_embeds,
        "relevance": dump_relevance_matrix(dump),
    }

    def one(path: str, value: Any, *, float32_scores: bool, scale: float) -> Any:
        if not (float32_scores or extracted) or isinstance(value, int):
            return value
        tol = tier_b_tolerance(
            path, value, scale=scale, float32_scores=float32_scores, extracted=extracted, **inputs
        )
        return tiered(value, tol)

    out: dict[str, Any] = {
        "metrics": {
            d: {k: one(f"{d}/{k}", v, float32_scores=False, scale=1.0) for k, v in m.items()}
            for d, m in metrics.items()
        },
        "profiles": {},
    }
    scale = float(dump.meta.get("logit_scale", dump.meta.get("logit_scale_a", 1.0)))
    for name, values in profiles.items():
        declared = find_profile(name)  # its tier rule: float32 scores of its own, scaled
        own = declared is not None and declared.float32_scores
        out["profiles"][name] = {
            k: one(k, v, float32_scores=own, scale=scale if own else 1.0) for k, v in values.items()
        }
    return out

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

import math
import re
from collections.abc import Callable, Iterator, Mapping
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


# ----------------------------------------------------------- numbers of two embeddings compared

#: float64 rounding of a dot product, a norm or a cosine of float32 values of up to ``2**20``
#: dimensions (``D * 2**-53``), relative to the product of the norms.
F64_DOT = 2.0**-33
#: The identity check's numbers that are settings or read from files, not computed from
#: embeddings: equal to the last bit on every machine (weights compare stored tensors).
_EXACT_NAMES = frozenset(
    {"match_cosine", "max_abs_diff", "min_cosine_threshold", "cpu_threads", "n", "n_captions"}
)


@dataclass(frozen=True)
class EmbeddingScale:
    """What bounds a comparison of two extractions of one fixture (each side extracted on the
    machine at hand): the largest norm of an audio and of a text vector over both sides, and
    the smaller standard deviation of the two similarity matrices (None: not recorded)."""

    audio_norm: float | None
    text_norm: float | None
    similarity_std: float | None


def _asin(x: float) -> float:
    return math.asin(min(1.0, max(0.0, x)))


def comparison_tolerance(
    name: str, scale: EmbeddingScale, e: float = EMBEDDING_REL_TOLERANCE
) -> float | None:
    """Tolerance of one number of a comparison of two embeddings of a fixture (the identity
    check, :func:`audiorepro.models.identity.compare_embeddings`), each side extracted on
    this CPU and so each vector off by at most ``e |x|`` (``EMBEDDING_REL_TOLERANCE``); None
    when the scale it needs was not recorded. Derivation (docs/tiers.md):

    - a **cosine** of two vectors (per clip, ``min_cosine``): each vector turns by at most
      ``asin(e)``, so the angle between them by ``2 asin(e)``, and a cosine is 1-Lipschitz
      in the angle: ``2 asin(e)`` plus its float64 rounding;
    - a **max-abs-diff** of two float32 vectors: each component moves by at most ``e |x|``
      on each side: an absolute ``2 e N`` (``N`` the largest norm), whatever the difference
      itself is (a difference of 1e-6 may move by 1e-6: it is not a relative quantity);
    - a **max-abs-diff of two similarity matrices**: each dot product moves by at most
      ``(2e + e^2) N_a N_t``, on each side;
    - the **correlation** of the two similarity matrices: a Pearson correlation is the cosine
      of the centred matrices; centring does not lengthen the perturbation (at most
      ``delta sqrt(M)`` over ``M`` entries, ``delta`` the per-entry bound) while the centred
      matrix has length ``sigma sqrt(M)``: each side turns by at most ``asin(delta / sigma)``;
    - a **norm** moves by ``e N``, a **standard deviation** of similarities by ``delta``
      (it is 1-Lipschitz in the root-mean-square of the change);
    - a setting or a value read from files (``match_cosine``, the weights' ``max_abs_diff``,
      counts): 0.

    >>> s = EmbeddingScale(1.0, 1.0, 0.1)
    >>> comparison_tolerance("audio_embedding_cosine_per_clip", s) > 2e-4
    True
    >>> round(comparison_tolerance("audio_max_abs_diff", s), 8)  # 2e, and float64 rounding
    0.0002
    >>> comparison_tolerance("similarity_matrix_max_abs_diff", EmbeddingScale(None, 1.0, None))
    >>> comparison_tolerance("match_cosine", s)
    0.0
    """
    delta = None
    if scale.audio_norm is not None and scale.text_norm is not None:
        delta = (2 * e + e**2 + 2 * F64_DOT) * scale.audio_norm * scale.text_norm
    if "cosine" in name and name != "match_cosine":
        return 2 * _asin(e) + 8 * F64_DOT
    if name in ("audio_max_abs_diff", "text_max_abs_diff", "audio_max_norm", "text_max_norm"):
        norm = scale.audio_norm if name.startswith("audio") else scale.text_norm
        if norm is None:
            return None
        sides = 1 if name.endswith("norm") else 2
        return sides * (e + F64_DOT) * norm
    if name == "similarity_matrix_max_abs_diff":
        return None if delta is None else 2 * delta
    if name == "similarity_matrix_std":
        return delta
    if name == "similarity_matrix_correlation":
        if delta is None or scale.similarity_std is None:
            return None
        if scale.similarity_std <= 0:
            return 2.0  # no spread to correlate: any value in [-1, 1]
        return 2 * _asin(delta / scale.similarity_std) + 8 * F64_DOT
    if name in _EXACT_NAMES:
        return 0.0
    return None


_IDENTITY_BLOCK = re.compile(r"^(.*?checkpoint_identit(?:y|ies/\d+))/(.*)$")


def identity_number_tolerance(path: str, value_at: Callable[[str], float | None]) -> float | None:
    """The tolerance of a number of an identity check in a run's bundle, named by its
    ``path`` (``verification/checkpoint_identities/0/embeddings/similarity_matrix_max_abs_diff``),
    with ``value_at`` reading the run's other numbers (the block's recorded scale); None when
    ``path`` is no such number or its scale is not recorded.

    >>> vals = {"v/checkpoint_identity/embeddings/audio_max_norm": 1.0}
    >>> tol = identity_number_tolerance("v/checkpoint_identity/embeddings/audio_max_abs_diff",
    ...                                 vals.get)
    >>> round(tol, 8)
    0.0002
    >>> identity_number_tolerance("v/checkpoint_identity/text_embedding_cosine_per_clip/3",
    ...                           vals.get) > 0
    True
    >>> identity_number_tolerance("cells/x/metrics/t2a/r@1", vals.get) is None
    True
    """
    found = _IDENTITY_BLOCK.match(path)
    if found is None:
        return None
    block, rest = found.groups()
    parts = rest.split("/")
    if parts[0] in ("weights", "determinism") or parts[0] in _EXACT_NAMES:
        return 0.0  # read from the weight files; settings
    name = next((p for p in reversed(parts) if not p.isdigit()), "")
    if parts[0] == "diagnosis" and name != "min_cosine":
        return 0.0  # the settings tried (sample rates, lengths): not computed from embeddings
    emb = f"{block}/embeddings"
    scale = EmbeddingScale(
        value_at(f"{emb}/audio_max_norm"),
        value_at(f"{emb}/text_max_norm"),
        value_at(f"{emb}/similarity_matrix_std"),
    )
    return comparison_tolerance(name, scale)

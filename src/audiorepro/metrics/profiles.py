"""Published definitions ("profiles"): each peer's own metric names, formulas and tie rules.

The same names mean different things in different peers. A profile computes what one peer
computes, under that peer's names, so that a published number can be reproduced under the
definition that produced it and compared with the canonical value (:mod:`.retrieval`).

- ``canonical``: audiorepro's definitions (version 1), see :mod:`audiorepro.metrics.retrieval`.
- ``laion-clap``: what laion-clap 1.1.7 computes in ``training/train.py``: ``get_metrics`` for
  one caption per clip, ``evaluate_clotho_audiocaps`` for five, with the same torch operations
  (so ties fall as its ``torch.argsort`` puts them on the same torch build), the logits
  multiplied by the model's logit scale when the dump's metadata carries one
  (``logit_scale``). Where its code does not do what its docstring says, the code is
  reproduced (it produced the published numbers) and the difference is reported in ``notes``.
- ``trec``: pytrec_eval / trec_eval semantics. Qrels from the dump's relevance (either format
  version: a caption may have several relevant clips), the run from the exact scores; ties
  broken by document id in *decreasing* string order, as trec_eval sorts;
  per-query values in trec_eval's double arithmetic, the mean as pytrec_eval aggregates
  (``compute_aggregated_measure``: ``numpy.mean`` of the values in query-id order).
- ``dcase``: the DCASE language-based audio retrieval evaluation (t2a only: ``R1``, ``R5``,
  ``R10``, ``mAP10``) as its organizers' code computes it (DCASE 2022 Task 6B baseline
  ``utils/eval_utils.py`` ``measure()``, 2023 ``postprocessing/xmodal_retrieval.py``
  ``measure()``; repositories and commits in ``docs/metrics.md``): scores from their score
  function, ``torch.dot`` of the float32 embeddings (a numpy float32 fallback without torch,
  marked in ``notes``); candidates in order of first appearance in the caption table; ranking
  by ``numpy.argsort(scores)[::-1]``, which is not stable, so under ties the value follows the
  numpy build and the CPU; ``Rk = [pos <= k]``, ``mAP10 = 1/pos`` within the top 10; means
  with ``numpy.mean`` in caption order. Because that value is not defined under ties, the
  profile also reports, per metric, the interval over every order of the tied float32 scores
  (``ties``) and how many captions have their clip tied.

General relevance (format version 2 dumps, e.g. class prompts):

- ``canonical`` and ``trec`` apply as defined: any number of relevant items per query in both
  directions (trec_eval's qrels have no limit; tied relevant items are ordered by trec_eval's
  document-id rule among themselves too).
- ``laion-clap`` and ``dcase`` accept a relevance dump whose every text is relevant to exactly
  one clip (it is then a ``text_to_audio`` dump written differently, with the same values), and
  refuse a text relevant to several clips in one line (:func:`one_clip_per_text`): their t2a
  code locates *the* clip of each caption (``torch.where(ranking == ground_truth)``,
  ``measure()``'s one target), which has no meaning for several. A zero-shot classification
  variant of laion-clap's evaluation is a separate definition (issue 18, second half).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.threads import cpu_threads
from audiorepro.formats.dump import Dump
from audiorepro.metrics._exact import (
    RankCounts,
    _gamma,
    _unit_roundoff,
    exact_dot_difference_sign,
)

# The registry's API, re-exported: importing it from here also registers the built-in
# profiles (the end of this module), so that no reader sees an empty registry.
from audiorepro.metrics.profile_registry import SCHEMA as SCHEMA
from audiorepro.metrics.profile_registry import Cause as Cause
from audiorepro.metrics.profile_registry import Profile as Profile
from audiorepro.metrics.profile_registry import ProfileRequest as ProfileRequest
from audiorepro.metrics.profile_registry import ProfileResult as ProfileResult
from audiorepro.metrics.profile_registry import find_profile as find_profile
from audiorepro.metrics.profile_registry import profile_names as profile_names
from audiorepro.metrics.profile_registry import register_profile as register_profile
from audiorepro.metrics.profile_registry import registered_profiles as registered_profiles
from audiorepro.metrics.profile_registry import unregister_profile as unregister_profile
from audiorepro.metrics.retrieval import (
    CUTOFF_FAMILIES,
    DIRECTIONS,
    UNCUT_METRICS,
    RetrievalResult,
    TiePolicy,
    compute_retrieval,
    is_metric_name,
    metric_names,
)
from audiorepro.metrics.zeroshot import laion_clap_zeroshot

#: The built-in retrieval profiles (declared at the end of this module; the registry,
#: :func:`.profile_registry.profile_names`, also holds any registered later).
PROFILES = ("canonical", "laion-clap", "trec", "dcase")
TREC_MEASURES = (
    "success_1", "success_5", "success_10", "recall_1", "recall_5", "recall_10",
    "P_1", "P_5", "P_10", "map", "map_cut_10", "recip_rank",
)  # fmt: skip
#: trec_eval's measures with a cutoff (``<measure>_<k>``), as the trec profile reports them
#: at a study's or ``--k``'s cutoffs, and those without one.
TREC_CUTOFF_MEASURES = ("success", "recall", "P", "map_cut", "ndcg_cut")
TREC_UNCUT_MEASURES = ("map", "recip_rank", "ndcg", "Rprec")
_TREC_NAME = re.compile(rf"^({'|'.join(TREC_CUTOFF_MEASURES)})_([1-9][0-9]{{0,8}})$")


def trec_measures(cutoffs: Sequence[int] | None = None) -> tuple[str, ...]:
    """The trec profile's measures: :data:`TREC_MEASURES` without cutoffs; with them, every
    measure of :data:`TREC_CUTOFF_MEASURES` at each cutoff and :data:`TREC_UNCUT_MEASURES`.

    >>> trec_measures([1, 50])[-6:]
    ('ndcg_cut_1', 'ndcg_cut_50', 'map', 'recip_rank', 'ndcg', 'Rprec')
    """
    if cutoffs is None:
        return TREC_MEASURES
    cut = tuple(f"{m}_{k}" for m in TREC_CUTOFF_MEASURES for k in cutoffs)
    return (*cut, *TREC_UNCUT_MEASURES)


def trec_cutoffs(names: Sequence[str], cutoffs: Sequence[int] | None) -> tuple[int, ...] | None:
    """The cutoffs at which the trec profile must run to report ``names`` (``<d>/<measure>``,
    e.g. a study's published values) beside ``cutoffs``: None (the 1.0 measures) when no
    cutoffs are asked for and every name is one of :data:`TREC_MEASURES`.

    >>> trec_cutoffs(["t2a/P_1"], None), trec_cutoffs(["t2a/ndcg_cut_20", "a2t/Rprec"], [5])
    (None, (5, 20))
    """
    leaves = [n.rpartition("/")[2] for n in names]
    if cutoffs is None and all(leaf in TREC_MEASURES for leaf in leaves):
        return None
    found = {int(m.group(2)) for leaf in leaves if (m := _TREC_NAME.match(leaf)) is not None}
    return tuple(sorted(found | set(cutoffs if cutoffs is not None else (1, 5, 10))))


def is_trec_measure(name: str) -> bool:
    """Whether ``name`` is a measure the trec profile can report (at some cutoff).

    >>> is_trec_measure("ndcg_cut_50"), is_trec_measure("P_0"), is_trec_measure("Rprec")
    (True, False, True)
    """
    return name in TREC_UNCUT_MEASURES or _TREC_NAME.match(name) is not None


def compute_profile(
    dump: Dump,
    profile: str,
    *,
    result: RetrievalResult | None = None,
    tie_policy: TiePolicy = "pessimistic",
    cutoffs: Sequence[int] | None = None,
) -> ProfileResult:
    """The metrics of ``dump`` under ``profile`` (any registered one,
    :mod:`.profile_registry`); ``result`` reuses the exact rank counts.

    ``tie_policy`` applies to ``canonical`` only: every other profile has its peer's tie rule.
    ``cutoffs`` (a study's ``k``, ``--k``) apply to ``canonical`` and ``trec``; the other
    peers' cutoffs are their own.
    """
    binary_only(dump, profile)
    found = find_profile(profile)
    if found is None:
        names = profile_names("retrieval")
        raise UserError(f"unknown profile {profile!r}; expected one of {', '.join(names)}")
    return found.compute(ProfileRequest(dump, result, tie_policy, cutoffs))


def published_cutoffs(
    profile: str, names: Sequence[str], cutoffs: Sequence[int] | None
) -> tuple[int, ...] | None:
    """The cutoffs ``profile`` must run at to report the published ``names`` beside a study's
    ``cutoffs`` (None: its own; see :func:`trec_cutoffs`).

    >>> published_cutoffs("trec", ["t2a/P_20"], None), published_cutoffs("dcase", ["R1"], [5])
    ((1, 5, 10, 20), None)
    """
    found = find_profile(profile)
    if found is None or found.published_cutoffs is None:
        return None
    return found.published_cutoffs(names, cutoffs)


def _retrieval(request: ProfileRequest) -> RetrievalResult:
    return request.result if request.result is not None else compute_retrieval(request.dump)


def _canonical_profile(request: ProfileRequest) -> ProfileResult:
    result, tie_policy = _retrieval(request), request.tie_policy
    flat = {
        f"{d}/{name}": value
        for d, metrics in result.metrics(tie_policy, request.cutoffs).items()
        for name, value in metrics.items()
    }
    return ProfileResult("canonical", flat, [f"canonical definitions, {tie_policy} ties"])


def _laion_clap_profile(request: ProfileRequest) -> ProfileResult:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserError(
            "the laion-clap profile needs torch, which is not installed "
            "(pip install 'audiorepro[models]')"
        ) from None
    return _laion_clap(request.dump)  # its own torch arithmetic: no exact counts needed


# --- shared: exact scores of relevant pairs, names ----------------------------------------


def _order_relevant(
    dump: Dump, direction: str, query: int, relevant: Sequence[int]
) -> dict[int, dict[int, int]]:
    """Exact pairwise comparisons of a query's relevant items: ``cmp[r1][r2]`` = sign(s1 - s2)
    (a2t: a clip's captions; t2a: the clips a caption is relevant to, version-2 dumps)."""
    if direction == "a2t":
        q, items = dump.audio_embeds[query], dump.text_embeds
    else:
        q, items = dump.text_embeds[query], dump.audio_embeds
    cmp: dict[int, dict[int, int]] = defaultdict(dict)
    for x in range(len(relevant)):
        for y in range(x + 1, len(relevant)):
            c1, c2 = relevant[x], relevant[y]
            s = exact_dot_difference_sign(items[c1], q, items[c2], q)
            cmp[c1][c2], cmp[c2][c1] = s, -s
    return cmp


def check_profile_applies(dump: Dump, profile: str) -> None:
    """Raise the one-line :class:`UserError` of :func:`one_clip_per_text` when ``profile``'s
    definition cannot apply to the dump's relevance (a runner checks this before it computes).

    >>> from audiorepro.formats.dump import make_dump
    >>> e = np.eye(2, dtype=np.float32)
    >>> d = make_dump(e, e[:1], relevance_indptr=[0, 1, 2], relevance_indices=[0, 0])
    >>> check_profile_applies(d, "trec")
    >>> check_profile_applies(d, "dcase")
    Traceback (most recent call last):
    ...
    audiorepro.core.errors.UserError: <memory>: key 'relevance_indices': makes text row 0 \
relevant to several clips; the dcase profile's text-to-audio definition has exactly one \
relevant clip per caption (use the canonical or trec profile)
    """
    found = find_profile(profile)
    if found is not None and found.one_clip_per_text:
        one_clip_per_text(dump, profile)
    binary_only(dump, profile)


def binary_only(dump: Dump, profile: str) -> None:
    """A graded dump (``relevance_gains``) has the canonical profile's graded nDCG only: a
    peer's profile here is binary, and would silently drop the grades.

    >>> from audiorepro.formats.dump import make_dump
    >>> e = np.eye(2, dtype=np.float32)
    >>> d = make_dump(e, e, relevance_indptr=[0, 1, 2], relevance_indices=[0, 1],
    ...               relevance_gains=[2, 1])
    >>> binary_only(d, "trec")
    Traceback (most recent call last):
    ...
    audiorepro.core.errors.UserError: <memory>: key 'relevance_gains': holds graded relevance; \
the trec profile's definitions are binary (use the canonical profile)
    """
    found = find_profile(profile)
    if dump.gains is not None and (found is None or not found.graded):
        raise UserError(
            f"holds graded relevance; the {profile} profile's definitions are binary (use the "
            "canonical profile)",
            source=dump.source,
            key="relevance_gains",
        )


def one_clip_per_text(dump: Dump, profile: str) -> npt.NDArray[np.int64]:
    """The clip of each text, for a profile whose peer defines t2a with exactly one relevant
    clip per caption (``laion-clap``, ``dcase``); a relevance dump with a text relevant to
    several clips is refused in one line (the peer's definition has no such case).

    >>> from audiorepro.formats.dump import make_dump
    >>> e = np.eye(2, dtype=np.float32)
    >>> d = make_dump(e, e, relevance_indptr=[0, 1, 2], relevance_indices=[1, 0])
    >>> one_clip_per_text(d, "dcase").tolist()
    [1, 0]
    """
    if dump.text_to_audio is not None:
        return dump.text_to_audio
    t2a = dump.relevance.one_clip_per_text()
    if t2a is None:
        text = int(np.argmax(dump.relevance.clips_per_text > 1))
        raise UserError(
            f"makes text row {text} relevant to several clips; the {profile} profile's "
            "text-to-audio definition has exactly one relevant clip per caption (use the "
            "canonical or trec profile)",
            source=dump.source,
            key="relevance_indices",
        )
    return t2a


def _clip_names(dump: Dump) -> list[str]:
    return (
        list(dump.audio_ids)
        if dump.audio_ids is not None
        else [str(j) for j in range(dump.n_clips)]
    )


# --- trec -------------------------------------------------------------------------------


def _trec_positions(dump: Dump, counts: RankCounts, direction: str) -> list[list[int]]:
    """Per query, the 1-based positions of its relevant items under trec_eval's order."""
    clip_names = _clip_names(dump)
    caption_names = [str(i) for i in range(dump.n_captions)]
    item_names = clip_names if direction == "t2a" else caption_names
    assert counts.relevant is not None
    tied: dict[int, list[int]] = defaultdict(list)
    for entry, item in counts.tied.tolist():
        tied[entry].append(item)
    out: list[list[int]] = []
    for q in range(counts.n_queries):
        entries = range(int(counts.ptr[q]), int(counts.ptr[q + 1]))
        rel = [int(counts.relevant[e]) for e in entries]
        cmp = _order_relevant(dump, direction, q, rel) if len(rel) > 1 else {}
        positions = []
        for e, r in zip(entries, rel, strict=True):
            name = item_names[r]
            before = int(counts.greater[e])
            before += sum(1 for j in tied.get(e, ()) if item_names[j] > name)
            for r2 in rel:
                if r2 != r:
                    s = cmp[r2][r]
                    before += s > 0 or (s == 0 and item_names[r2] > name)
            positions.append(before + 1)
        out.append(sorted(positions))
    return out


def _trec_query(
    pos: list[int], n_rel: int, cutoffs: Sequence[int] | None = None
) -> dict[str, float]:
    """trec_eval's per-query arithmetic (doubles, accumulated in rank order)."""
    m: dict[str, float] = {}
    if cutoffs is not None:
        return _trec_query_at(pos, n_rel, cutoffs)
    for k in (1, 5, 10):
        hits = sum(1 for p in pos if p <= k)
        m[f"success_{k}"] = 1.0 if hits else 0.0
        m[f"recall_{k}"] = hits / n_rel
        m[f"P_{k}"] = hits / k
    total = 0.0
    cut = 0.0
    for i, p in enumerate(pos):
        precision = (i + 1) / p
        total += precision
        if p <= 10:
            cut += precision
    m["map"] = total / n_rel
    m["map_cut_10"] = cut / n_rel
    m["recip_rank"] = 1.0 / pos[0]
    return m


def _trec_query_at(pos: list[int], n_rel: int, cutoffs: Sequence[int]) -> dict[str, float]:
    """trec_eval's arithmetic at any cutoffs (m_P.c, m_recall.c, m_success.c, m_map_cut.c,
    m_ndcg_cut.c, m_map.c, m_recip_rank.c, m_ndcg.c, m_Rprec.c; binary gains): doubles,
    accumulated in rank order, the discount ``gain / log2(rank + 1)`` in C's log2."""
    m: dict[str, float] = {}
    precision = [(i + 1) / p for i, p in enumerate(pos)]
    discount = [1.0 / math.log2(p + 1) for p in pos]
    ideal = [1.0 / math.log2(i + 2) for i in range(n_rel)]
    for k in cutoffs:
        hits = sum(1 for p in pos if p <= k)
        m[f"success_{k}"] = 1.0 if hits else 0.0
        m[f"recall_{k}"] = hits / n_rel
        m[f"P_{k}"] = hits / k
        m[f"map_cut_{k}"] = _rank_order_sum(precision[:hits]) / n_rel
        ideal_k = _rank_order_sum(ideal[:k])
        m[f"ndcg_cut_{k}"] = _rank_order_sum(discount[:hits]) / ideal_k
    m["map"] = _rank_order_sum(precision) / n_rel
    m["recip_rank"] = 1.0 / pos[0]
    m["ndcg"] = _rank_order_sum(discount) / _rank_order_sum(ideal)
    m["Rprec"] = sum(1 for p in pos if p <= n_rel) / n_rel
    return m


def _rank_order_sum(values: Sequence[float]) -> float:
    """A double accumulated left to right, as trec_eval's loops add (not math.fsum)."""
    total = 0.0
    for v in values:
        total += v
    return total


def _trec(
    dump: Dump, result: RetrievalResult, cutoffs: Sequence[int] | None = None
) -> ProfileResult:
    clip_names = _clip_names(dump)
    metrics: dict[str, float] = {}
    for direction in ("t2a", "a2t"):
        counts = result.counts[direction]
        positions = _trec_positions(dump, counts, direction)
        qids = [str(i) for i in range(dump.n_captions)] if direction == "t2a" else clip_names
        per_query = [_trec_query(p, len(p), cutoffs) for p in positions]
        order = sorted(range(len(qids)), key=lambda q: qids[q])
        for measure in trec_measures(cutoffs):
            values = [per_query[q][measure] for q in order]
            # pytrec_eval.compute_aggregated_measure: numpy.mean over the per-query values.
            metrics[f"{direction}/{measure}"] = float(np.mean(values))
    notes = [
        "ties broken by document id in decreasing string order, as trec_eval sorts",
        "document ids: clip ids from audio_ids (else clip indices) for t2a, "
        "caption indices for a2t",
        "recall_k is the fraction of relevant items in the top k (at most 1/5 at k = 1 with five "
        "captions per clip); success_k is what CLAP papers call R@k",
    ]
    if cutoffs is not None:
        notes.append(
            f"cutoffs {', '.join(map(str, cutoffs))}; ndcg and ndcg_cut_k with binary gains, "
            "gain / log2(rank + 1) summed in rank order in doubles, as trec_eval"
        )
    return ProfileResult("trec", metrics, notes)


# --- dcase ------------------------------------------------------------------------------

DCASE_METRICS = ("R1", "R5", "R10", "mAP10")
SCORES_TORCH = "torch.dot"
SCORES_NUMPY = "numpy float32 matmul (fallback: torch not installed)"
_F32_NORMAL = float(np.finfo(np.float32).tiny)  # below it (but not 0): subnormal
_F32_MAX = float(np.finfo(np.float32).max)
_DCASE_CHUNK = 1024


@dataclass(frozen=True)
class DcaseRanks:
    """Per caption (in caption-table order), where the organizers' ranking puts its clip.

    ``position`` is the 1-based position under ``numpy.argsort(scores)[::-1]`` on this numpy
    build; ``greater`` and ``equal`` count the other candidate clips whose float32 score is
    above, and equal to, the caption's clip's: every tie order gives a position in
    ``[greater + 1, greater + equal + 1]``. ``scores`` names the score function used.
    """

    position: npt.NDArray[np.int64]
    greater: npt.NDArray[np.int64]
    equal: npt.NDArray[np.int64]
    scores: str


def dcase_candidates(dump: Dump) -> npt.NDArray[np.int64]:
    """The clips in order of first appearance in the caption table, as the organizers list
    their candidates (their score table is built clip by clip from the captions' file ids).

    >>> from audiorepro.formats.dump import make_dump
    >>> d = make_dump(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32)[[2, 0, 2, 1]],
    ...               [2, 0, 2, 1])
    >>> dcase_candidates(d).tolist()
    [2, 0, 1]
    """
    t2a = one_clip_per_text(dump, "dcase")
    _, first = np.unique(t2a, return_index=True)
    out: npt.NDArray[np.int64] = t2a[np.sort(first)].astype(np.int64)
    return out


def dcase_metrics_from_positions(positions: npt.ArrayLike) -> dict[str, float]:
    """DCASE ``R1``, ``R5``, ``R10``, ``mAP10`` from each caption's 1-based position of its clip.

    Formula, per caption (one relevant clip): ``Rk = [pos <= k]``, ``mAP10 = 1 / pos`` if
    ``pos <= 10`` else 0 (the organizers' ``measure()`` divides the precisions ``i / pos_i`` of
    the relevant clips in the top 10 by their number, which is at most one here); each metric is
    ``numpy.mean`` of the per-caption values in the order given (caption-table order), as theirs.
    Tie policy: none here; the positions carry it (the organizers' ``numpy.argsort`` order, or
    one end of the tie interval).

    >>> dcase_metrics_from_positions([1, 3, 12])
    {'R1': 0.3333333333333333, 'R5': 0.6666666666666666, 'R10': 0.6666666666666666, \
'mAP10': 0.4444444444444444}
    """
    pos = np.asarray(positions, dtype=np.int64)
    out = {f"R{k}": float(np.mean((pos <= k).astype(np.float64))) for k in (1, 5, 10)}
    # One IEEE division per caption, as numpy.divide in measure(); 0.0 outside the top 10.
    ap = np.where(pos <= 10, 1.0 / np.maximum(pos, 1), 0.0)
    out["mAP10"] = float(np.mean(ap))
    return out


def _float32_embeddings(dump: Dump) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The embeddings as the organizers' float32 models hold them (float64 dumps cast)."""
    out = []
    for key, arr in (("audio_embeds", dump.audio_embeds), ("text_embeds", dump.text_embeds)):
        if arr.size and float(np.max(np.abs(arr))) > _F32_MAX:
            raise UserError(
                "has values beyond the float32 range; the dcase profile scores float32 "
                "embeddings, as the organizers' models produce them",
                source=dump.source,
                key=key,
            )
        out.append(np.ascontiguousarray(arr, dtype=np.float32))
    return out[0], out[1]


def _components(center: npt.NDArray[np.float64], radius: npt.NDArray[np.float64]) -> Any:
    """Label the entries whose intervals ``center +- radius`` chain into overlapping groups of
    two or more (same label); an entry whose interval touches no other one gets -1."""
    order = np.argsort(center - radius, kind="stable")
    lo, hi = (center - radius)[order], (center + radius)[order]
    reach = np.maximum.accumulate(hi)
    starts = np.concatenate(([True], lo[1:] > reach[:-1]))
    label = np.cumsum(starts) - 1
    size = np.bincount(label)
    label[size[label] == 1] = -1
    out = np.empty_like(label)
    out[order] = label
    return out


def _torch_dots(
    row: npt.NDArray[np.float64],
    done: npt.NDArray[np.bool_],
    mask: npt.NDArray[np.bool_],
    audio_rows: Sequence[Any],
    text_i: Any,
) -> None:
    """Replace ``row[mask]`` by the organizers' score, ``torch.dot(audio, text).item()``."""
    for j in np.flatnonzero(mask & ~done).tolist():
        row[j] = audio_rows[j].dot(text_i).item()
    done |= mask


def dcase_ranks(dump: Dump, *, exhaustive: bool = False) -> DcaseRanks:
    """Rank every caption's candidates as the organizers do and locate its clip.

    Scores: the organizers' score function is ``torch.dot(audio_embed, text_embed)`` on float32
    vectors, one pair at a time, ``.item()`` to a Python float. Their ranking is
    ``numpy.argsort(scores)[::-1]`` on the float64 array those floats make, with the candidates
    in first-appearance order (:func:`dcase_candidates`).

    Calling ``torch.dot`` for every pair costs ~2.4 us each (13 s on a Clotho-sized dump), but
    only near-ties need it: every float32 dot product lies within
    ``gamma_D * sum_i |a_i t_i|`` (+ underflow) of the exact value, whatever the kernel's
    summation order. Scores whose intervals touch no other are ordered by float64 products
    alone; the caption's clip's group of touching intervals is computed with ``torch.dot``;
    where the clip then ties exactly, so is every group of the row, so that the row handed to
    ``numpy.argsort`` compares exactly as the organizers' row does (a comparison sort's
    permutation depends only on the comparisons). ``exhaustive=True`` calls ``torch.dot`` for
    every pair (the tests check that both agree), as do subnormal inputs and scores near the
    float32 overflow, where the bound does not hold. Without torch: a numpy float32 matrix
    product, whose last bits can differ from ``torch.dot``'s (``scores`` says so).
    """
    a32, t32 = _float32_embeddings(dump)
    cand = dcase_candidates(dump)
    a32 = np.ascontiguousarray(a32[cand])
    slot = np.empty(dump.n_clips, dtype=np.int64)
    slot[cand] = np.arange(len(cand))
    targets = slot[one_clip_per_text(dump, "dcase")]
    n = dump.n_captions
    position = np.empty(n, dtype=np.int64)
    greater = np.empty(n, dtype=np.int64)
    equal = np.empty(n, dtype=np.int64)

    def locate(i: int, row: npt.NDArray[np.float64]) -> None:
        # float64 input, as measure() sorts a list of Python floats: numpy picks its sort
        # kernel by dtype (float32 and float64 agreed on ties here, which nothing promises).
        desc = np.argsort(row, axis=-1)[::-1]
        tgt = int(targets[i])
        position[i] = int(np.flatnonzero(desc == tgt)[0]) + 1
        greater[i] = int(np.count_nonzero(row > row[tgt]))
        equal[i] = int(np.count_nonzero(row == row[tgt])) - 1

    try:
        import torch
    except ImportError:
        for start in range(0, n, _DCASE_CHUNK):
            block = (t32[start : start + _DCASE_CHUNK] @ a32.T).astype(np.float64)
            for r, row in enumerate(block):
                locate(start + r, row)
        return DcaseRanks(position, greater, equal, SCORES_NUMPY)

    # A kernel that treats subnormal inputs as zero loses whole products, which no relative
    # bound covers: then every pair goes through torch.dot.
    exhaustive = exhaustive or any(
        bool(np.any((x != 0) & (np.abs(x) < _F32_NORMAL))) for x in (a32, t32)
    )
    dim = a32.shape[1]
    # The bound the exact rank counts use (Higham eq. 3.5 plus underflow), with sum |a_i t_i|.
    u, eta = _unit_roundoff(np.dtype(np.float32))
    gamma = _gamma(dim, u)
    audio_rows = torch.from_numpy(a32.copy()).unbind(0)
    text = torch.from_numpy(t32.copy())
    a64 = a32.astype(np.float64)
    abs_a = np.abs(a64)
    previous = torch.get_num_threads()
    torch.set_num_threads(cpu_threads())  # fixed, as for embeddings: no thread-split bits
    try:
        for start in range(0, n, _DCASE_CHUNK):
            t64 = t32[start : start + _DCASE_CHUNK].astype(np.float64)
            approx = t64 @ a64.T
            size = np.abs(t64) @ abs_a.T  # bounds every product and partial sum
            # Factor 2 covers the float64 products' own error and the bound's rounding.
            radius = 2.0 * (gamma * size + 2 * dim * eta)
            for r in range(len(t64)):
                i = start + r
                text_i = text[i]
                row = approx[r].copy()
                done = np.zeros(len(row), dtype=bool)
                if exhaustive or float(np.max(size[r])) > _F32_MAX / 2:
                    # A float32 sum may overflow to inf (ties that float64 does not see), and
                    # the bound means nothing there: every pair with torch.dot.
                    _torch_dots(row, done, np.ones(len(row), dtype=bool), audio_rows, text_i)
                else:
                    label = _components(approx[r], radius[r])
                    tgt = int(targets[i])
                    if label[tgt] >= 0:
                        _torch_dots(row, done, label == label[tgt], audio_rows, text_i)
                        if np.count_nonzero(row[done] == row[tgt]) > 1:
                            # The clip ties: argsort's order then follows the whole row.
                            _torch_dots(row, done, label >= 0, audio_rows, text_i)
                locate(i, row)
    finally:
        torch.set_num_threads(previous)
    return DcaseRanks(position, greater, equal, SCORES_TORCH)


def _dcase(dump: Dump, result: RetrievalResult) -> ProfileResult:
    """t2a as the DCASE organizers' evaluation computes it, with the interval over tie orders."""
    ranks = dcase_ranks(dump)
    metrics = dcase_metrics_from_positions(ranks.position)
    optimistic = dcase_metrics_from_positions(ranks.greater + 1)
    pessimistic = dcase_metrics_from_positions(ranks.greater + ranks.equal + 1)
    tied = int(np.count_nonzero(ranks.equal))
    bounds = {m: [optimistic[m], pessimistic[m]] for m in DCASE_METRICS}
    canonical_ties = result.ties()["t2a"]["queries_affected"]
    if ranks.scores == SCORES_TORCH:
        scores = (
            "scores: torch.dot of the float32 embeddings, one clip-caption pair at a time, as "
            "the organizers' score function (float64 dumps are cast to float32 first)"
        )
    else:
        scores = (
            "FALLBACK: torch is not installed, so the scores are a numpy float32 matrix "
            "product, not the organizers' torch.dot; its last bits can differ, which moves "
            "ties and near-ties (install torch for the organizers' scores)"
        )
    interval = ", ".join(f"{m} [{lo!r}, {hi!r}]" for m, (lo, hi) in bounds.items())
    notes = [
        "text-to-audio only: the DCASE task evaluates no audio-to-text retrieval",
        scores,
        "candidates: the clips in order of first appearance in the caption table, as the "
        "organizers build their score table; with tied scores the order changes the result",
        "ranking: numpy.argsort(scores)[::-1], which is not stable: tied clips fall as this "
        "numpy build and CPU sort them (numpy 1.26 with AVX-512 sorting orders ties unlike "
        "numpy 1.23.5, the version the organizers' baseline pins), so under ties a DCASE "
        "number can move between machines",
        f"ties: {tied} of {dump.n_captions} captions have their clip's float32 score equal to "
        f"another clip's (exact scores: {canonical_ties}); over every order of the tied clips "
        f"(optimistic, pessimistic): {interval}",
        "Rk = [pos <= k] and mAP10 = 1/pos within the top 10 (one relevant clip per caption); "
        "means with numpy.mean in caption order, as the organizers' measure()",
        "the 2022 eval_script.py matches captions by their text (duplicate captions merge) and "
        "prints a jackknife estimate of the mean; this profile keeps every caption and reports "
        "the plain mean, as the organizers' measure() does",
    ]
    ties = {"t2a": {"queries_affected": tied, "bounds": bounds}}
    return ProfileResult("dcase", metrics, notes, ties)


# --- laion-clap -------------------------------------------------------------------------


def laion_clap_inputs(dump: Dump) -> tuple[Any, Any, Any, int, list[str]]:
    """Features as laion-clap's evaluation holds them: captions grouped by clip, in clip order
    (``get_metrics``: caption i <-> clip i; ``evaluate_clotho_audiocaps``: captions
    ``5d .. 5d+4`` <-> clip d), as torch tensors, and the logit scale."""
    import torch

    t2a = one_clip_per_text(dump, "laion-clap")
    cpc = dump.captions_per_clip
    if cpc not in (1, 5):
        raise UserError(
            "the laion-clap profile needs 1 or 5 captions per clip (its get_metrics and "
            f"evaluate_clotho_audiocaps), got {cpc if cpc is not None else 'a varying number'}",
            source=dump.source,
            key="text_to_audio" if dump.text_to_audio is not None else "relevance_indices",
        )
    notes: list[str] = []
    order = np.argsort(t2a, kind="stable")
    if not np.array_equal(order, np.arange(dump.n_captions)):
        notes.append("captions reordered by clip (stable), as laion-clap's evaluation expects")
    audio = torch.from_numpy(np.array(dump.audio_embeds))
    text = torch.from_numpy(np.array(dump.text_embeds[order]))
    scale = dump.meta.get("logit_scale", dump.meta.get("logit_scale_a"))
    if scale is None:
        notes.append(
            "no logit_scale in the dump's metadata: logits are the plain dot products "
            "(rankings unchanged; cumulative_loss depends on the scale)"
        )
        scale = 1.0
    if not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise UserError(
            f"has logit_scale {scale!r}, expected a positive number",
            source=dump.source,
            key="meta_json",
        )
    return audio, text, torch.tensor(float(scale), dtype=torch.float32), cpc, notes


def _laion_clap(dump: Dump) -> ProfileResult:
    import torch

    audio, text, scale, cpc, notes = laion_clap_inputs(dump)
    # The loss is a torch reduction whose last bits follow the CPU thread split: compute it
    # with the fixed thread count extraction uses, whatever ran before in this process.
    previous = torch.get_num_threads()
    torch.set_num_threads(cpu_threads())
    try:
        if cpc == 1:
            metrics = _laion_get_metrics(audio, text, scale)
        else:
            metrics = _laion_clotho_audiocaps(audio, text, scale)
    finally:
        torch.set_num_threads(previous)
    if cpc == 1:
        notes.append("one caption per clip: laion-clap's get_metrics")
    else:
        notes.append(
            "five captions per clip: laion-clap's evaluate_clotho_audiocaps, which "
            "L2-normalizes the features again (F.normalize) before the logits"
        )
        notes.append(
            "audio_to_text_mAP@10: the docstring says the five caption ranks are sorted and "
            "averaged over the ranks below 10, but the code neither sorts them (precision i / "
            "rank uses the caption order) nor averages (it divides by 5); the code is reproduced"
        )
    notes.append(
        "text_to_audio_mAP@10 is the reciprocal rank truncated at 10 (one relevant clip per "
        "caption), not an average precision over several relevant items"
    )
    notes.append(
        "median_rank is floor(numpy.median(rank - 1)) + 1: a median ending in .5 is rounded down"
    )
    notes.append("ties are broken by torch.argsort(descending=True), which is not stable")
    return ProfileResult("laion-clap", metrics, notes)


def _laion_get_metrics(audio: Any, text: Any, scale: Any) -> dict[str, float]:
    """laion-clap 1.1.7 ``get_metrics`` (mlp_loss=False), operation by operation."""
    import torch
    import torch.nn.functional as F

    metrics: dict[str, float] = {}
    logits_per_audio = (scale * audio @ text.t()).detach().cpu()
    logits_per_text = logits_per_audio.t().detach().cpu()
    labels = torch.arange(audio.shape[0]).long()
    total_loss = (
        F.cross_entropy(logits_per_audio, labels) + F.cross_entropy(logits_per_text, labels)
    ) / 2
    metrics["cumulative_loss"] = total_loss.item()
    metrics["num_samples"] = audio.shape[0]
    logits = {"audio_to_text": logits_per_audio, "text_to_audio": logits_per_text}
    ground_truth = torch.arange(len(text)).view(-1, 1)
    for name, logit in logits.items():
        ranking = torch.argsort(logit, descending=True)
        preds: Any = torch.where(ranking == ground_truth)[1]
        preds = preds.detach().cpu().numpy()
        metrics[f"{name}_mean_rank"] = float(preds.mean() + 1)
        metrics[f"{name}_median_rank"] = float(np.floor(np.median(preds)) + 1)
        for k in (1, 5, 10):
            metrics[f"{name}_R@{k}"] = float(np.mean(preds < k))
        metrics[f"{name}_mAP@10"] = float(np.mean(np.where(preds < 10, 1 / (preds + 1), 0.0)))
    return metrics


def _laion_clotho_audiocaps(audio: Any, text: Any, scale: Any) -> dict[str, float]:
    """laion-clap 1.1.7 ``evaluate_clotho_audiocaps``, from the features on, op by op."""
    import torch
    import torch.nn.functional as F

    # It L2-normalizes what the model returned (again: CLAP's outputs are already unit vectors).
    audio = F.normalize(audio, dim=-1)
    text = F.normalize(text, dim=-1)
    logits_per_audio = (scale * audio @ text.t()).detach().cpu()
    logits_per_text = logits_per_audio.t().detach().cpu()
    metrics: dict[str, float] = {}
    num_samples = audio.shape[0]
    metrics["num_samples"] = num_samples
    labels = torch.arange(audio.shape[0]).long()
    audio_to_text_loss = [
        F.cross_entropy(logits_per_audio.reshape(num_samples, num_samples, 5)[:, :, d], labels)
        for d in range(5)
    ]
    text_to_audio_loss = [
        F.cross_entropy(logits_per_text.reshape(num_samples, 5, num_samples)[:, d, :], labels)
        for d in range(5)
    ]
    total_loss = (np.mean(audio_to_text_loss) + np.mean(text_to_audio_loss)) / 2
    metrics["cumulative_loss"] = total_loss.item()
    pred_text = []
    for d in range(5):
        logit = logits_per_text.reshape(num_samples, 5, num_samples)[:, d, :]
        ground_truth = torch.arange(len(logit)).view(-1, 1)
        ranking = torch.argsort(logit, descending=True)
        preds = torch.where(ranking == ground_truth)[1]
        pred_text.append(preds.detach().cpu().numpy())
    pred_text_concat = np.concatenate(pred_text, axis=0)
    metrics["text_to_audio_mean_rank"] = float(pred_text_concat.mean() + 1)
    metrics["text_to_audio_median_rank"] = float(np.floor(np.median(pred_text_concat)) + 1)
    for k in (1, 5, 10):
        metrics[f"text_to_audio_R@{k}"] = float(np.mean(pred_text_concat < k))
    metrics["text_to_audio_mAP@10"] = float(
        np.mean(np.where(pred_text_concat < 10, 1 / (pred_text_concat + 1), 0.0))
    )
    map_all = []
    pred_audio_all = []
    for d in range(num_samples):
        logit_single = logits_per_audio[d, :]
        ranking = torch.argsort(logit_single, descending=True)
        ground_truth = torch.arange(d * 5, d * 5 + 5)[None]
        all_pred = torch.where(torch.stack([ranking] * 5) == ground_truth.view(-1, 1))[1]
        min_pred = torch.min(all_pred)
        pred_audio_all.append(min_pred.detach().cpu().numpy())
        all_pred_filter = all_pred[all_pred < 10].detach().cpu().numpy()
        map_single = np.sum(np.arange(1, len(all_pred_filter) + 1) / (all_pred_filter + 1)) / 5
        map_all.append(map_single)
    metrics["audio_to_text_mAP@10"] = float(np.mean(map_all))
    for k in (1, 5, 10):
        metrics[f"audio_to_text_R@{k}"] = float(np.mean(np.array(pred_audio_all) < k))
    return metrics


# --- laion-clap's zero-shot check (a dump with class relevance) ------------------------------

#: The built-in profiles of zero-shot dumps (one relevant text, the class prompt, per clip).
#: Kept apart from :data:`PROFILES`, whose every member ``explain`` runs on retrieval dumps.
ZEROSHOT_PROFILES = ("laion-clap-zeroshot",)


def zeroshot_labels(dump: Dump) -> npt.NDArray[np.int64]:
    """Each clip's class: its one relevant text row (a UserError when a clip has another
    number of relevant texts)."""
    rel = dump.relevance
    counts = rel.texts_per_clip
    if not bool(np.all(counts == 1)):
        bad = int(np.flatnonzero(counts != 1)[0])
        raise UserError(
            f"clip {bad} has {int(counts[bad])} relevant texts; the laion-clap-zeroshot profile "
            "needs exactly one (its class prompt) per clip",
            source=dump.source,
        )
    return np.asarray(rel.indices, dtype=np.int64)


def laion_clap_zeroshot_profile(dump: Dump) -> ProfileResult:
    """laion-clap's zero-shot ESC-50 check (:func:`audiorepro.metrics.zeroshot.
    laion_clap_zeroshot`) on a dump whose clips each have one relevant text."""
    labels = zeroshot_labels(dump)
    metrics = laion_clap_zeroshot(dump.audio_embeds, dump.text_embeds, labels)
    return ProfileResult(
        "laion-clap-zeroshot",
        metrics,
        [
            "laion-clap README's zero-shot check: torch.argsort of float32 audio @ text.T, "
            "no logit scale, ties as that sort puts them",
            "median_rank = floor(median of 0-based positions) + 1, not the median rank",
        ],
    )


# --- the built-in profiles, declared once (:mod:`.profile_registry`) ---------------------


def canonical_metric_problem(metric: str) -> str | None:
    """Why ``metric`` is not a canonical metric name (``t2a/r@1``), or None.

    >>> canonical_metric_problem("t2a/r@1") is None
    True
    >>> canonical_metric_problem("up/r@1")[:14]
    'unknown metric'
    """
    direction, _, name = metric.partition("/")
    if direction in DIRECTIONS and is_metric_name(name):
        return None
    return (
        f"unknown metric; expected <direction>/<metric> with direction in "
        f"{', '.join(DIRECTIONS)} and metric in {', '.join(UNCUT_METRICS)} or <family>@<k> "
        f"(family in {', '.join(CUTOFF_FAMILIES)}, k an int >= 1)"
    )


def trec_metric_problem(metric: str) -> str | None:
    """Why ``metric`` is not a trec profile name (``t2a/P_5``), or None.

    >>> trec_metric_problem("a2t/ndcg_cut_50") is None, trec_metric_problem("t2a/P5")[:19]
    (True, 'unknown trec metric')
    """
    direction, _, name = metric.partition("/")
    if direction in DIRECTIONS and is_trec_measure(name):
        return None
    return (
        f"unknown trec metric; expected <direction>/<measure> with direction in "
        f"{', '.join(DIRECTIONS)} and measure in {', '.join(TREC_UNCUT_MEASURES)} or "
        f"<measure>_<k> (measure in {', '.join(TREC_CUTOFF_MEASURES)}, k an int >= 1)"
    )


def names_problem(profile: str, names: Sequence[str]) -> Any:
    """A ``metric_problem`` for a profile whose metric names are the fixed list ``names``.

    >>> names_problem("dcase", DCASE_METRICS)("R@1")
    'unknown dcase metric; expected one of R1, R5, R10, mAP10'
    """

    def problem(metric: str) -> str | None:
        if metric in names:
            return None
        return f"unknown {profile} metric; expected one of {', '.join(names)}"

    return problem


#: trec profile names as a JSON Schema pattern: the same rule as :func:`is_trec_measure`.
TREC_NAME_PATTERN = (
    rf"^({'|'.join(DIRECTIONS)})/(({'|'.join(TREC_UNCUT_MEASURES)})"
    rf"|({'|'.join(TREC_CUTOFF_MEASURES)})_[1-9][0-9]{{0,8}})$"
)
#: Canonical names as a JSON Schema pattern: the same rule as ``metric_by_name``.
CANONICAL_NAME_PATTERN = (
    rf"^({'|'.join(DIRECTIONS)})/(({'|'.join(UNCUT_METRICS)})"
    rf"|({'|'.join(CUTOFF_FAMILIES)})@[1-9][0-9]{{0,8}})$"
)
#: The trec measure of each family of definitions 1.1 (``explain``'s rows at cutoffs).
_TREC_FAMILIES = {
    "r": "success_{k}",
    "recall": "recall_{k}",
    "precision": "P_{k}",
    "map": "map_cut_{k}",
    "ndcg": "ndcg_cut_{k}",
}
_TREC_UNCUT = {"map": "map", "mrr": "recip_rank", "ndcg": "ndcg", "r_precision": "Rprec"}
_TREC_CONCEPTS = {
    **{f"r@{k}": f"{{d}}/success_{k}" for k in (1, 5, 10)},
    **{f"recall@{k}": f"{{d}}/recall_{k}" for k in (1, 5, 10)},
    "map@10": "{d}/map_cut_10",
    "map": "{d}/map",
    "mrr": "{d}/recip_rank",
}


def trec_concepts_at(cutoffs: Sequence[int]) -> dict[str, str]:
    """The trec names of definitions 1.1's measures at ``cutoffs`` (``explain --k``).

    >>> trec_concepts_at([50])["ndcg@50"], "mrr@50" in trec_concepts_at([50])
    ('{d}/ndcg_cut_50', False)
    """
    out = dict(_TREC_CONCEPTS)
    for name in metric_names(cutoffs):
        family, _, k = name.partition("@")
        template = _TREC_FAMILIES.get(family) if k else _TREC_UNCUT.get(name)
        if template is not None:
            out[name] = "{d}/" + template.format(k=k)
    return out


DCASE_MOVES = (
    "why a DCASE number can move between machines: where a caption's clip ties another clip "
    "in the float32 scores, numpy.argsort(scores)[::-1], which is not stable, decides its "
    "position, and numpy orders ties by its sort kernel (numpy 1.26 with AVX-512 sorting "
    "orders them unlike numpy 1.23.5, the organizers' pin, or a CPU without AVX-512); the "
    "float32 scores come from torch's dot kernel, whose last bits can follow the CPU and its "
    "BLAS and so make or break ties. The interval over every tie order holds wherever the "
    "float32 scores are the same; the canonical value (exact scores) holds on every machine."
)


def _dcase_cause(c: Cause) -> str | None:
    """Why a DCASE value differs: its float32 ties, or its float32 rounding."""
    if c.interval is None:
        return None
    lo, hi = min(c.bounds), max(c.bounds)
    dlo, dhi = min(c.interval), max(c.interval)
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


def _laion_clap_cause(c: Cause) -> str | None:
    """laion-clap's own definitions: its a2t mAP@10 and its median rank."""
    if c.concept == "mAP@10" and c.direction == "a2t":
        return (
            "its code gives the relevant captions the precision numerators 1, 2, ... in "
            "caption order instead of rank order (the docstring says the ranks are "
            "sorted; the code does not sort them), then divides by 5"
            + ("; ties add to it" if min(c.bounds) != max(c.bounds) else "")
        )
    if c.concept == "median rank":
        if c.canonical != math.floor(c.canonical) and c.value == math.floor(c.canonical):
            return "it takes floor(median of rank - 1) + 1, so a median ending in .5 goes down"
    return None


def _trec_profile(request: ProfileRequest) -> ProfileResult:
    return _trec(request.dump, _retrieval(request), request.cutoffs)


def _dcase_profile(request: ProfileRequest) -> ProfileResult:
    return _dcase(request.dump, _retrieval(request))


LAION_CLAP_ZEROSHOT_METRICS = ("mean_rank", "median_rank", "R@1", "R@5", "R@10", "mAP@10")
_LONG = "{long}_"
BUILT_IN = (
    Profile(
        "canonical",
        "retrieval",
        _canonical_profile,
        graded=True,
        cutoffs=True,
        metric_problem=canonical_metric_problem,
        names_schema={"pattern": CANONICAL_NAME_PATTERN},
    ),
    Profile(
        "laion-clap",
        "retrieval",
        _laion_clap_profile,
        one_clip_per_text=True,
        concepts={
            **{f"r@{k}": f"{_LONG}R@{k}" for k in (1, 5, 10)},
            "map@10": f"{_LONG}mAP@10",
            "mean_rank": f"{_LONG}mean_rank",
            "median_rank": f"{_LONG}median_rank",
        },
        tie_rule="torch.argsort(descending=True), which is not stable",
        cause=_laion_clap_cause,
        float32_scores=True,
    ),
    Profile(
        "trec",
        "retrieval",
        _trec_profile,
        cutoffs=True,
        metric_problem=trec_metric_problem,
        names_schema={"pattern": TREC_NAME_PATTERN},
        metric_names=tuple(f"{d}/{m}" for d in DIRECTIONS for m in TREC_MEASURES),
        concepts=_TREC_CONCEPTS,
        concepts_at=trec_concepts_at,
        published_cutoffs=trec_cutoffs,
        tie_rule="document id in decreasing string order",
    ),
    Profile(
        "dcase",
        "retrieval",
        _dcase_profile,
        one_clip_per_text=True,
        metric_problem=names_problem("dcase", DCASE_METRICS),
        names_schema={"enum": list(DCASE_METRICS)},
        metric_names=DCASE_METRICS,
        concepts={"r@1": "R1", "r@5": "R5", "r@10": "R10", "map@10": "mAP10"},
        tie_rule="numpy.argsort(scores)[::-1]",
        cause=_dcase_cause,
        t2a_only=True,
        machine_dependence=DCASE_MOVES,
    ),
    Profile(
        "laion-clap-zeroshot",
        "zeroshot",
        lambda request: laion_clap_zeroshot_profile(request.dump),
        metric_problem=names_problem("laion-clap-zeroshot", LAION_CLAP_ZEROSHOT_METRICS),
        names_schema={"enum": list(LAION_CLAP_ZEROSHOT_METRICS)},
        metric_names=LAION_CLAP_ZEROSHOT_METRICS,
        hint="a dump with one relevant text, the class prompt, per clip",
    ),
)
for _profile in BUILT_IN:
    register_profile(_profile)

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
- ``trec``: pytrec_eval / trec_eval semantics. Qrels from ``text_to_audio``, the run from the
  exact scores; ties broken by document id in *decreasing* string order, as trec_eval sorts;
  per-query values in trec_eval's double arithmetic, the mean as pytrec_eval aggregates
  (``compute_aggregated_measure``: ``numpy.mean`` of the values in query-id order).
- ``dcase``: the DCASE language-based audio retrieval evaluation (t2a only: R@1, R@5, R@10,
  mAP@10), as its organizers' baseline computes it: per caption, items ranked by
  ``numpy.argsort(scores)[::-1]``; R@k = number of relevant clips in the top k, mAP@10 =
  ``sum_i i / pos_i`` over relevant clips in the top 10 (not divided by the number of relevant
  clips); the mean with ``numpy.mean``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audiorepro.core.errors import UserError
from audiorepro.core.threads import cpu_threads
from audiorepro.formats.dump import Dump
from audiorepro.metrics._exact import RankCounts, exact_dot_difference_sign
from audiorepro.metrics.retrieval import RetrievalResult, TiePolicy, compute_retrieval

PROFILES = ("canonical", "laion-clap", "trec", "dcase")
SCHEMA = "audiorepro.profile/1"
TREC_MEASURES = (
    "success_1", "success_5", "success_10", "recall_1", "recall_5", "recall_10",
    "P_1", "P_5", "P_10", "map", "map_cut_10", "recip_rank",
)  # fmt: skip


@dataclass(frozen=True)
class ProfileResult:
    """One profile's metrics under the peer's own names, and notes on what it does."""

    profile: str
    metrics: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def to_json(self, dump: Dump) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "profile": self.profile,
            "source": dump.source,
            "sha256": dump.sha256,
            "n_clips": dump.n_clips,
            "n_captions": dump.n_captions,
            "captions_per_clip": dump.captions_per_clip,
            "metrics": self.metrics,
            "notes": self.notes,
        }


def compute_profile(
    dump: Dump,
    profile: str,
    *,
    result: RetrievalResult | None = None,
    tie_policy: TiePolicy = "pessimistic",
) -> ProfileResult:
    """The metrics of ``dump`` under ``profile``; ``result`` reuses the exact rank counts.

    ``tie_policy`` applies to ``canonical`` only: every other profile has its peer's tie rule.
    """
    if profile not in PROFILES:
        raise UserError(f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")
    if profile == "laion-clap":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UserError(
                "the laion-clap profile needs torch, which is not installed "
                "(pip install 'audiorepro[models]')"
            ) from None
        return _laion_clap(dump)  # its own torch arithmetic: no exact counts needed
    if result is None:
        result = compute_retrieval(dump)
    if profile == "canonical":
        flat = {
            f"{d}/{name}": value
            for d, metrics in result.metrics(tie_policy).items()
            for name, value in metrics.items()
        }
        return ProfileResult("canonical", flat, [f"canonical definitions, {tie_policy} ties"])
    if profile == "trec":
        return _trec(dump, result)
    return _dcase(dump, result)


# --- shared: exact scores of relevant pairs, names ----------------------------------------


def _order_relevant(dump: Dump, clip: int, captions: Sequence[int]) -> dict[int, dict[int, int]]:
    """Exact pairwise comparisons of a clip's captions: ``cmp[c1][c2]`` = sign(s1 - s2)."""
    a = dump.audio_embeds[clip]
    t = dump.text_embeds
    cmp: dict[int, dict[int, int]] = defaultdict(dict)
    for x in range(len(captions)):
        for y in range(x + 1, len(captions)):
            c1, c2 = captions[x], captions[y]
            s = exact_dot_difference_sign(t[c1], a, t[c2], a)
            cmp[c1][c2], cmp[c2][c1] = s, -s
    return cmp


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
        cmp = _order_relevant(dump, q, rel) if direction == "a2t" and len(rel) > 1 else {}
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


def _trec_query(pos: list[int], n_rel: int) -> dict[str, float]:
    """trec_eval's per-query arithmetic (doubles, accumulated in rank order)."""
    m: dict[str, float] = {}
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


def _trec(dump: Dump, result: RetrievalResult) -> ProfileResult:
    clip_names = _clip_names(dump)
    metrics: dict[str, float] = {}
    for direction in ("t2a", "a2t"):
        counts = result.counts[direction]
        positions = _trec_positions(dump, counts, direction)
        qids = [str(i) for i in range(dump.n_captions)] if direction == "t2a" else clip_names
        per_query = [_trec_query(p, len(p)) for p in positions]
        order = sorted(range(len(qids)), key=lambda q: qids[q])
        for measure in TREC_MEASURES:
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
    return ProfileResult("trec", metrics, notes)


# --- dcase ------------------------------------------------------------------------------


def _dcase(dump: Dump, result: RetrievalResult) -> ProfileResult:
    """t2a as the DCASE organizers' baseline evaluates it."""
    a = dump.audio_embeds.astype(np.float64)
    t = dump.text_embeds.astype(np.float64)
    r1: list[float] = []
    r5: list[float] = []
    r10: list[float] = []
    map10: list[float] = []
    for start in range(0, dump.n_captions, 1024):
        scores = t[start : start + 1024] @ a.T
        for row, clip in zip(scores, dump.text_to_audio[start : start + 1024], strict=True):
            desc = np.argsort(row, axis=-1)[::-1]
            preds = desc[:10] == clip
            r1.append(float(np.sum(preds[:1], dtype=float)))
            r5.append(float(np.sum(preds[:5], dtype=float)))
            r10.append(float(np.sum(preds[:10], dtype=float)))
            positions = np.arange(1, len(preds) + 1, dtype=float)[preds > 0]
            if len(positions) > 0:
                precisions = np.divide(np.arange(1, len(positions) + 1, dtype=float), positions)
                map10.append(float(np.sum(precisions, dtype=float)))
            else:
                map10.append(0.0)
    metrics = {
        "R1": float(np.mean(r1)),
        "R5": float(np.mean(r5)),
        "R10": float(np.mean(r10)),
        "mAP10": float(np.mean(map10)),
    }
    canonical_ties = result.ties()["t2a"]["queries_affected"]
    notes = [
        "text-to-audio only: the DCASE task evaluates no audio-to-text retrieval",
        "scores are float64 dot products; ties are broken by numpy.argsort(...)[::-1] as in the "
        f"baseline, so their order depends on numpy's sort ({canonical_ties} captions have a tie "
        "with their clip)",
        "mAP10 sums i/pos over relevant clips in the top 10 without dividing by their number",
    ]
    return ProfileResult("dcase", metrics, notes)


# --- laion-clap -------------------------------------------------------------------------


def laion_clap_inputs(dump: Dump) -> tuple[Any, Any, Any, int, list[str]]:
    """Features as laion-clap's evaluation holds them: captions grouped by clip, in clip order
    (``get_metrics``: caption i <-> clip i; ``evaluate_clotho_audiocaps``: captions
    ``5d .. 5d+4`` <-> clip d), as torch tensors, and the logit scale."""
    import torch

    cpc = dump.captions_per_clip
    if cpc not in (1, 5):
        raise UserError(
            "the laion-clap profile needs 1 or 5 captions per clip (its get_metrics and "
            f"evaluate_clotho_audiocaps), got {cpc if cpc is not None else 'a varying number'}",
            source=dump.source,
            key="text_to_audio",
        )
    notes: list[str] = []
    order = np.argsort(dump.text_to_audio, kind="stable")
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

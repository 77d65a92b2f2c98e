"""The peers that audiorepro's retrieval harness is timed against, on the same inputs.

Each peer takes ``(audio, text, text_to_audio)`` and computes t2a/a2t R@1/5/10 and an mAP the
way that peer is normally used. They are timing peers: numeric agreement with peers is tested
in the test suite (and, for the exact peer definitions, by the profiles of issue 3).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def floor_matmul(audio: np.ndarray, text: np.ndarray, t2a: np.ndarray, chunk_rows: int) -> None:
    """The float32 similarity matrix alone, chunked into one reused buffer (the floor)."""
    n = audio.shape[0]
    flat = np.empty(n * chunk_rows, dtype=audio.dtype)
    for c0 in range(0, text.shape[0], chunk_rows):
        c1 = min(text.shape[0], c0 + chunk_rows)
        np.matmul(audio, text[c0:c1].T, out=flat[: n * (c1 - c0)].reshape(n, c1 - c0))


def floor_plain(audio: np.ndarray, text: np.ndarray, t2a: np.ndarray) -> None:
    """``text @ audio.T`` in one call, as most evaluation scripts compute it."""
    _ = text @ audio.T


def laion_clap(audio: np.ndarray, text: np.ndarray, t2a: np.ndarray) -> dict[str, float]:
    """laion-clap 1.1.7's metric code path, transcribed op by op from ``training/train.py``
    (``evaluate_clotho_audiocaps`` for five captions per clip, ``get_metrics`` otherwise):
    a full ``torch.argsort`` per query and ``torch.where`` against the ground truth."""
    import torch
    import torch.nn.functional as F

    a = torch.from_numpy(audio)
    t = torch.from_numpy(text)
    logits_per_audio = (a @ t.t()).detach().cpu()
    logits_per_text = logits_per_audio.t().detach().cpu()
    n = a.shape[0]
    m: dict[str, float] = {}
    labels = torch.arange(n).long()
    if t.shape[0] == n:
        loss = (
            F.cross_entropy(logits_per_audio, labels) + F.cross_entropy(logits_per_text, labels)
        ) / 2
        m["cumulative_loss"] = float(loss)
        for name, logit in (
            ("audio_to_text", logits_per_audio),
            ("text_to_audio", logits_per_text),
        ):
            ground_truth = torch.arange(len(t)).view(-1, 1)
            ranking = torch.argsort(logit, descending=True)
            preds = torch.where(ranking == ground_truth)[1].numpy()
            for k in (1, 5, 10):
                m[f"{name}_R@{k}"] = float(np.mean(preds < k))
            m[f"{name}_mAP@10"] = float(np.mean(np.where(preds < 10, 1 / (preds + 1), 0.0)))
        return m
    a2t_loss = [
        F.cross_entropy(logits_per_audio.reshape(n, n, 5)[:, :, d], labels) for d in range(5)
    ]
    t2a_loss = [
        F.cross_entropy(logits_per_text.reshape(n, 5, n)[:, d, :], labels) for d in range(5)
    ]
    m["cumulative_loss"] = float((np.mean(a2t_loss) + np.mean(t2a_loss)) / 2)
    pred_text = []
    for d in range(5):
        logit = logits_per_text.reshape(n, 5, n)[:, d, :]
        ground_truth = torch.arange(len(logit)).view(-1, 1)
        ranking = torch.argsort(logit, descending=True)
        pred_text.append(torch.where(ranking == ground_truth)[1].numpy())
    preds = np.concatenate(pred_text)
    for k in (1, 5, 10):
        m[f"text_to_audio_R@{k}"] = float(np.mean(preds < k))
    map_all, pred_audio_all = [], []
    for d in range(n):
        logit_single = logits_per_audio[d, :]
        ranking = torch.argsort(logit_single, descending=True)
        ground_truth = torch.arange(d * 5, d * 5 + 5)[None]
        all_pred = torch.where(torch.stack([ranking] * 5) == ground_truth.view(-1, 1))[1]
        pred_audio_all.append(int(torch.min(all_pred)))
        flt = all_pred[all_pred < 10].numpy()
        map_all.append(np.sum(np.arange(1, len(flt) + 1) / (flt + 1)) / 5)
    m["audio_to_text_mAP@10"] = float(np.mean(map_all))
    for k in (1, 5, 10):
        m[f"audio_to_text_R@{k}"] = float(np.mean(np.array(pred_audio_all) < k))
    return m


def _qrels_runs(audio: np.ndarray, text: np.ndarray, t2a: np.ndarray) -> Any:
    scores = text.astype(np.float64) @ audio.astype(np.float64).T
    n = audio.shape[0]
    q_t2a = {f"q{i}": {f"d{int(j)}": 1} for i, j in enumerate(t2a)}
    r_t2a = {
        f"q{i}": {f"d{j}": float(s) for j, s in enumerate(row)} for i, row in enumerate(scores)
    }
    q_a2t = {f"q{j}": {f"d{i}": 1 for i in np.flatnonzero(t2a == j)} for j in range(n)}
    r_a2t = {
        f"q{j}": {f"d{i}": float(s) for i, s in enumerate(col)} for j, col in enumerate(scores.T)
    }
    return (q_t2a, r_t2a), (q_a2t, r_a2t)


def pytrec_eval(audio: np.ndarray, text: np.ndarray, t2a: np.ndarray) -> dict[str, float]:
    """pytrec_eval with run dictionaries of every (query, item) score, both directions."""
    import pytrec_eval as pe

    out = {}
    for direction, (qrels, run) in zip(("t2a", "a2t"), _qrels_runs(audio, text, t2a), strict=True):
        res = pe.RelevanceEvaluator(qrels, {"success.1,5,10", "map"}).evaluate(run)
        for measure in ("success_1", "success_5", "success_10", "map"):
            out[f"{direction}_{measure}"] = float(np.mean([r[measure] for r in res.values()]))
    return out


def ranx(audio: np.ndarray, text: np.ndarray, t2a: np.ndarray) -> dict[str, float]:
    """ranx Qrels/Run built from dictionaries of every score, both directions."""
    from ranx import Qrels, Run, evaluate

    out = {}
    for direction, (qrels, run) in zip(("t2a", "a2t"), _qrels_runs(audio, text, t2a), strict=True):
        res = evaluate(Qrels(qrels), Run(run), ["hit_rate@1", "hit_rate@5", "hit_rate@10", "map"])
        out.update({f"{direction}_{k}": float(v) for k, v in res.items()})
    return out


def torchmetrics(audio: np.ndarray, text: np.ndarray, t2a: np.ndarray) -> dict[str, float]:
    """torchmetrics' functional retrieval metrics, one call per query, both directions."""
    import torch
    from torchmetrics.functional.retrieval import retrieval_average_precision, retrieval_hit_rate

    scores = torch.from_numpy(text) @ torch.from_numpy(audio).T
    n = audio.shape[0]
    t2a_t = torch.from_numpy(t2a)
    out: dict[str, list[float]] = {}
    for direction, mat, targets in (
        ("t2a", scores, [t2a_t[i : i + 1] for i in range(len(t2a))]),
        ("a2t", scores.T, [torch.nonzero(t2a_t == j)[:, 0] for j in range(n)]),
    ):
        for q in range(mat.shape[0]):
            target = torch.zeros(mat.shape[1], dtype=torch.bool)
            target[targets[q]] = True
            for k in (1, 5, 10):
                out.setdefault(f"{direction}_hit@{k}", []).append(
                    float(retrieval_hit_rate(mat[q], target, top_k=k))
                )
            out.setdefault(f"{direction}_map", []).append(
                float(retrieval_average_precision(mat[q], target))
            )
    return {k: float(np.mean(v)) for k, v in out.items()}

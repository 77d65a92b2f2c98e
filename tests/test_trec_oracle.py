"""External oracle: pytrec_eval agrees where its definitions coincide with ours, without ties.

Mapping: ``r@k`` = ``success_k``, ``recall@k`` = ``recall_k``, ``map`` = ``map``,
``map@10`` = ``map_cut_10``, ``mrr`` = ``recip_rank``. trec_eval sums in its own order, so the
comparison allows 1e-12 (its float sums), never a different ranking.
"""

from __future__ import annotations

import numpy as np
import pytest

from audiorepro.formats.dump import make_dump
from audiorepro.metrics.retrieval import compute_retrieval

pytrec_eval = pytest.importorskip("pytrec_eval")

MAPPING = {
    "r@1": "success_1",
    "r@5": "success_5",
    "r@10": "success_10",
    "recall@1": "recall_1",
    "recall@5": "recall_5",
    "recall@10": "recall_10",
    "map": "map",
    "map@10": "map_cut_10",
    "mrr": "recip_rank",
}
MEASURES = {"success.1,5,10", "recall.1,5,10", "map", "map_cut.10", "recip_rank"}


def _trec(scores: np.ndarray, relevant: list[set[int]]) -> dict[str, float]:
    qrels = {f"q{q}": {f"d{j}": 1 for j in rel} for q, rel in enumerate(relevant)}
    run = {f"q{q}": {f"d{j}": float(s) for j, s in enumerate(row)} for q, row in enumerate(scores)}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    return {
        ours: float(np.mean([per_query[q][theirs] for q in sorted(per_query)]))
        for ours, theirs in MAPPING.items()
    }


@pytest.mark.parametrize("seed,n,cpc", [(0, 30, 1), (1, 25, 5), (2, 40, 3)])
def test_pytrec_eval_agrees_without_ties(seed: int, n: int, cpc: int) -> None:
    rng = np.random.default_rng(seed)
    audio = rng.standard_normal((n, 16))
    t2a = np.repeat(np.arange(n), cpc)
    text = audio[t2a] + 1.5 * rng.standard_normal((n * cpc, 16))
    scores = text @ audio.T
    gaps = np.diff(np.sort(scores, axis=1), axis=1)
    assert gaps.min() > 1e-9  # no ties or near-ties: definitions coincide
    ours = compute_retrieval(make_dump(audio, text, t2a)).metrics()
    t2a_trec = _trec(scores, [{int(j)} for j in t2a])
    a2t_trec = _trec(scores.T, [set(np.flatnonzero(t2a == j).tolist()) for j in range(n)])
    for direction, theirs in (("t2a", t2a_trec), ("a2t", a2t_trec)):
        for name, value in theirs.items():
            assert ours[direction][name] == pytest.approx(value, abs=1e-12), (direction, name)


@pytest.mark.parametrize("seed", [3, 4])
def test_pytrec_eval_agrees_on_class_relevance_without_ties(seed: int) -> None:
    """Format version 2: class prompts, each relevant to every clip of its class (t2a queries
    with many relevant clips), some clips in two classes (a2t queries with two texts)."""
    rng = np.random.default_rng(seed)
    n_classes, per = 6, 7
    centers = rng.standard_normal((n_classes, 16))
    label = np.arange(n_classes * per) % n_classes
    audio = centers[label] + 1.5 * rng.standard_normal((len(label), 16))
    prompts = centers + 0.3 * rng.standard_normal(centers.shape)
    relevant = [{int(label[j])} | ({int(label[j] + 1) % n_classes} if j < 4 else set())
                for j in range(len(label))]  # fmt: skip
    indptr = np.cumsum([0, *map(len, relevant)])
    indices = [i for r in relevant for i in sorted(r)]
    scores = prompts @ audio.T
    assert np.diff(np.sort(scores, axis=1), axis=1).min() > 1e-9
    assert np.diff(np.sort(scores.T, axis=1), axis=1).min() > 1e-9
    dump = make_dump(audio, prompts, relevance_indptr=indptr, relevance_indices=indices)
    ours = compute_retrieval(dump).metrics()
    t2a_trec = _trec(scores, [{j for j, r in enumerate(relevant) if i in r} for i in range(6)])
    a2t_trec = _trec(scores.T, relevant)
    for direction, theirs in (("t2a", t2a_trec), ("a2t", a2t_trec)):
        for name, value in theirs.items():
            assert ours[direction][name] == pytest.approx(value, abs=1e-12), (direction, name)

"""Hypothesis strategies for embedding dumps that stress ties and multi-positive queries."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st


@st.composite
def dumps(draw: Any, max_clips: int = 9, max_dim: int = 5) -> dict[str, Any]:
    """Random dumps with duplicated rows, exact ties and variable captions per clip.

    Values come from a small grid (multiples of 1/4 in [-1, 1]) most of the time, so exact ties
    are common; sometimes a tiny perturbation makes near-ties that only exact arithmetic orders.
    """
    n = draw(st.integers(1, max_clips))
    d = draw(st.integers(1, max_dim))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    extra = draw(st.lists(st.integers(0, n - 1), max_size=2 * n))
    t2a = np.array(list(range(n)) + extra, dtype=np.int64)
    perm = draw(st.permutations(range(len(t2a))))
    t2a = t2a[list(perm)]
    grid = st.integers(-4, 4).map(lambda v: v / 4)
    audio = np.array(draw(st.lists(st.lists(grid, min_size=d, max_size=d), min_size=n, max_size=n)))
    m = len(t2a)
    text = np.array(draw(st.lists(st.lists(grid, min_size=d, max_size=d), min_size=m, max_size=m)))
    # Duplicate some clips and captions exactly.
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        audio[a] = audio[b]
    if draw(st.booleans()):
        eps = draw(st.sampled_from([2.0**-20, 2.0**-30, 2.0**-45]))
        i = draw(st.integers(0, m - 1))
        text[i, 0] += eps
    return {
        "audio_embeds": audio.astype(dtype),
        "text_embeds": text.astype(dtype),
        "text_to_audio": t2a,
    }


@st.composite
def relevance_dumps(draw: Any, max_clips: int = 9, max_texts: int = 9, max_dim: int = 5) -> Any:
    """Random format-version-2 dumps: a random relevance (every clip relevant to at least one
    text and every text to at least one clip, any number otherwise, indices in random order
    within a clip), embeddings on the grid of :func:`dumps` with duplicated clips and texts
    (exact ties between relevant and non-relevant items) and sometimes a near-tie."""
    n = draw(st.integers(1, max_clips))
    m = draw(st.integers(1, max_texts))
    d = draw(st.integers(1, max_dim))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    flags = draw(st.lists(st.floats(0, 1), min_size=n * m, max_size=n * m))
    rel = np.array(flags).reshape(n, m) < density
    for j in np.flatnonzero(~rel.any(axis=1)).tolist():
        rel[j, draw(st.integers(0, m - 1))] = True
    for i in np.flatnonzero(~rel.any(axis=0)).tolist():
        rel[draw(st.integers(0, n - 1)), i] = True
    grid = st.integers(-4, 4).map(lambda v: v / 4)
    audio = np.array(draw(st.lists(st.lists(grid, min_size=d, max_size=d), min_size=n, max_size=n)))
    text = np.array(draw(st.lists(st.lists(grid, min_size=d, max_size=d), min_size=m, max_size=m)))
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        audio[a] = audio[b]
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.integers(0, m - 1)), draw(st.integers(0, m - 1))
        text[a] = text[b]
    if draw(st.booleans()):
        eps = draw(st.sampled_from([2.0**-20, 2.0**-30, 2.0**-45]))
        text[draw(st.integers(0, m - 1)), 0] += eps
    indptr = np.zeros(n + 1, np.int64)
    indptr[1:] = np.cumsum(rel.sum(axis=1))
    rows = [np.flatnonzero(rel[j]).tolist() for j in range(n)]
    indices = [i for row in rows for i in draw(st.permutations(row))]
    return {
        "audio_embeds": audio.astype(dtype),
        "text_embeds": text.astype(dtype),
        "relevance_indptr": indptr,
        "relevance_indices": np.array(indices, dtype=np.int64),
    }


# --- probe metrics (tests/test_probe_invariance.py) ---------------------------------------

#: Values on a grid of quarters: sums, shifts and affine maps stay exact, ties are common.
_grid = st.integers(-8, 8).map(lambda v: v / 4)
#: Class labels are 0 .. CLASSES - 1.
CLASSES = 4


@st.composite
def regression_pairs(draw: Any, max_items: int = 12) -> tuple[list[float], list[float]]:
    """(predictions, references); a reference may be NaN (not annotated)."""
    n = draw(st.integers(0, max_items))
    pred = draw(st.lists(_grid, min_size=n, max_size=n))
    true = draw(st.lists(_grid | st.just(float("nan")), min_size=n, max_size=n))
    return pred, true


@st.composite
def class_pairs(draw: Any, max_items: int = 12) -> tuple[list[int], list[int]]:
    """(references, predictions) as class indices in [0, CLASSES)."""
    n = draw(st.integers(0, max_items))
    labels = st.integers(0, CLASSES - 1)
    return draw(st.lists(labels, min_size=n, max_size=n)), draw(
        st.lists(labels, min_size=n, max_size=n)
    )


@st.composite
def frame_pairs(draw: Any, max_items: int = 16) -> tuple[list[int], list[float]]:
    """(0/1 frame labels, frame probabilities), probabilities on a grid that hits 0.5."""
    n = draw(st.integers(0, max_items))
    probs = st.integers(0, 8).map(lambda v: v / 8)
    return draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), draw(
        st.lists(probs, min_size=n, max_size=n)
    )


@st.composite
def vector_triples(draw: Any, max_items: int = 8, dim: int = 3) -> tuple[Any, Any, Any]:
    """(predicted vectors, reference vectors, valid flags); valid vectors are never zero."""
    n = draw(st.integers(1, max_items))
    rows = st.lists(_grid, min_size=dim, max_size=dim).map(lambda r: r if any(r) else [1.0, *r[1:]])
    pred = np.array(draw(st.lists(rows, min_size=n, max_size=n)))
    ref = np.array(draw(st.lists(rows, min_size=n, max_size=n)))
    valid = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return pred, ref, valid


#: Docnos whose byte order differs from their number order and from case-folded order
#: (trec_eval breaks score ties by docno, greater first).
TREC_DOCNOS = ("d1", "d10", "d2", "d9", "D3", "d3", "e", "a-1", "a_1", "zz")


@st.composite
def trec_pairs(
    draw: Any, max_queries: int = 4, max_docs: int = 8
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """(qrels, run) as ``{qid: {docno: level}}`` and ``{qid: {docno: score}}``: graded levels
    -1..3 (-1: pooled but unjudged), queries without a relevant document, run queries absent
    from the qrels and qrels queries absent from the run, retrieved documents nobody judged,
    partial retrieval, and scores on a coarse grid (many ties) or sometimes any float32. Every
    query of the qrels has a level >= 0: trec_eval leaves a query with only negative levels
    undefined (it keeps the previous query's count of levels; pytrec_eval can loop forever)."""
    qids = [f"q{i}" for i in range(draw(st.integers(1, max_queries)))]
    docs = st.lists(st.sampled_from(TREC_DOCNOS), unique=True, max_size=max_docs)
    qrels: dict[str, dict[str, int]] = {}
    for qid in qids:
        judged = draw(docs)
        levels = {d: draw(st.integers(-1, 3)) for d in judged} or {"d1": 0}
        if max(levels.values()) < 0:  # see the docstring: at least one level >= 0
            levels[next(iter(levels))] = 0
        qrels[qid] = levels
    coarse = st.integers(-2, 2).map(lambda v: v / 2)
    # float32 values: pytrec_eval keeps scores as float32 (trec_eval itself reads doubles), so
    # only scores that float32 holds exactly are ordered alike by both.
    fine = st.floats(-1e6, 1e6, width=32, allow_nan=False, allow_infinity=False)
    score = draw(st.sampled_from([coarse, st.one_of(coarse, fine)]))
    run: dict[str, dict[str, float]] = {}
    for qid in [*qids, "q-unjudged"]:
        retrieved = draw(docs) if draw(st.integers(0, 4)) else []
        if retrieved:  # else this query is not in the run (a run file has no empty query)
            run[qid] = {d: draw(score) for d in retrieved}
    if not any(run.get(q) for q in qids):
        run[qids[0]] = {"d1": 0.5}
    return qrels, run

"""Golden statistics of the exact engine: how many comparisons each stage decided.

:class:`audiorepro.metrics._exact.ExactStats` counts the comparisons, those the float32 band
sent to float64, and those float64 sent to exact arithmetic. The counts of ranks are checked
elsewhere (``test_exact_ranks``, ``test_relevance``, the metric goldens); these numbers say
that the bands themselves are unchanged (a wider band still gives the right ranks, only
slower), for the one-pass engine (one clip per caption, both directions from one chunked
product) and the general engine (any relevance, one direction at a time), on the shipped
fixture dumps and on a seeded near-tie case where float64 decides what float32 cannot.
Regenerate only on purpose (``--force-regen``), with the reason under "Changed numbers".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audiorepro.formats.dump import Relevance, load_dump
from audiorepro.metrics._exact import ExactStats, exact_rank_counts, exact_relevance_counts
from tests.conftest import DUMPS, GOLDEN
from tests.goldens import with_legend


def _stats(s: ExactStats) -> dict[str, int]:
    return {"comparisons": s.comparisons, "refined_float64": s.refined_float64, "exact": s.exact}


def near_ties(seed: int = 25) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """64 clips, two captions each (float32, 16 dims): every odd clip and its captions are
    the even one's plus noise of 1e-6 (inside float32's band, far outside float64's), and
    clip 5 is clip 4 exactly (a tie only exact arithmetic decides)."""
    rng = np.random.default_rng(seed)
    audio = rng.standard_normal((64, 16)).astype(np.float32)
    audio[1::2] = audio[0::2] + 1e-6 * rng.standard_normal((32, 16)).astype(np.float32)
    audio[5] = audio[4]
    t2a = np.repeat(np.arange(64), 2)
    text = (audio[t2a] + 0.5 * rng.standard_normal((128, 16))).astype(np.float32)
    text[2::4] = text[0::4] + 1e-6 * rng.standard_normal((32, 16)).astype(np.float32)
    return audio, text, t2a.astype(np.int64)


def _case(audio: Any, text: Any, one_clip: Any, rel: Relevance) -> dict[str, Any]:
    """Both engines' statistics at the default chunk, each checked against a chunk of 7
    rows (a comparison is decided in one chunk, so the statistics do not follow it)."""
    out: dict[str, Any] = {}
    if one_clip is not None:
        stats = [exact_rank_counts(audio, text, one_clip, chunk_rows=c)[2] for c in (None, 7)]
        assert stats[0] == stats[1]
        out["one_pass"] = _stats(stats[0])
    rel_t = rel.transpose()
    for name, args in (
        ("general_a2t", (audio, text, rel.indptr, rel.indices)),
        ("general_t2a", (text, audio, rel_t.indptr, rel_t.indices)),
    ):
        stats = [exact_relevance_counts(*args, chunk_rows=c)[1] for c in (None, 7)]
        assert stats[0] == stats[1]
        out[name] = _stats(stats[0])
    return out


def engine_data() -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for path in DUMPS:
        d = load_dump(path)
        rel = d.relevance
        one = d.text_to_audio if d.text_to_audio is not None else rel.one_clip_per_text()
        cases[path.stem] = _case(d.audio_embeds, d.text_embeds, one, rel)
    audio, text, t2a = near_ties()
    rel = Relevance.from_text_to_audio(t2a, n_clips=audio.shape[0])
    cases["near_ties"] = _case(audio, text, t2a, rel)
    return with_legend({"cases": cases})


def test_engine_statistics_golden(tiered_regression: Any) -> None:
    data = engine_data()
    near = data["cases"]["near_ties"]
    # The case does what it says: float64 decides some comparisons, exact arithmetic others.
    assert near["one_pass"]["refined_float64"] > near["one_pass"]["exact"] > 0
    tiered_regression(data, GOLDEN / "engine" / "stats.yml")


def test_both_engines_agree_on_one_clip_per_caption() -> None:
    """Where both apply, the one-pass engine's statistics are the general engine's two
    directions added up: the same bands, the same comparisons."""
    for name, case in engine_data()["cases"].items():
        if "one_pass" not in case:
            continue
        both = {k: case["general_a2t"][k] + case["general_t2a"][k] for k in case["one_pass"]}
        assert case["one_pass"] == both, name

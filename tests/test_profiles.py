"""Profiles reproduce their peers: trec against pytrec_eval itself, with ties.

(laion-clap's profile is checked against the installed package in
tests/test_profile_laion_clap.py; DCASE's evaluation is a script, not an importable package,
so its profile is checked against the organizers' own figures in tests/test_profile_dcase.py.)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.dump import Dump, load_dump, make_dump
from audiorepro.metrics.profiles import TREC_MEASURES, compute_profile
from tests.conftest import DUMPS

pytrec_eval = pytest.importorskip("pytrec_eval")


def _exact_scores(dump: Dump) -> list[list[float]]:
    """Correctly rounded float64 dot products: equal exactly when the exact scores are."""
    t = dump.text_embeds.astype(np.float64)
    a = dump.audio_embeds.astype(np.float64)
    return [[math.fsum((ti * aj).tolist()) for aj in a] for ti in t]


def _pytrec(dump: Dump) -> dict[str, float]:
    scores = _exact_scores(dump)
    clips = list(dump.audio_ids) if dump.audio_ids else [str(j) for j in range(dump.n_clips)]
    caps = [str(i) for i in range(dump.n_captions)]
    # The qrels from the relevance (either format version), as (clip, caption) pairs.
    rel = dump.relevance
    pairs = set(zip(rel.clip_of_each_entry().tolist(), rel.indices.tolist(), strict=True))
    directions = {
        "t2a": (
            {
                caps[i]: {clips[j]: 1 for j in range(len(clips)) if (j, i) in pairs}
                for i in range(dump.n_captions)
            },
            {
                caps[i]: {clips[j]: scores[i][j] for j in range(dump.n_clips)}
                for i in range(len(caps))
            },
        ),
        "a2t": (
            {
                clips[j]: {caps[i]: 1 for i in range(len(caps)) if (j, i) in pairs}
                for j in range(len(clips))
            },
            {
                clips[j]: {caps[i]: scores[i][j] for i in range(len(caps))}
                for j in range(len(clips))
            },
        ),
    }
    out = {}
    measures = {"success.1,5,10", "recall.1,5,10", "P.1,5,10", "map", "map_cut.10", "recip_rank"}
    for direction, (qrels, run) in directions.items():
        res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
        for m in TREC_MEASURES:
            values = [res[q][m] for q in sorted(res)]
            out[f"{direction}/{m}"] = pytrec_eval.compute_aggregated_measure(m, values)
    return out


@pytest.mark.parametrize("path", DUMPS, ids=[p.stem for p in DUMPS])
def test_trec_profile_is_pytrec_eval_bit_for_bit(path: Path) -> None:
    dump = load_dump(path)
    ours = compute_profile(dump, "trec").metrics
    theirs = _pytrec(dump)
    assert ours == theirs


def test_trec_breaks_ties_by_decreasing_document_id() -> None:
    # Three identical clips: the relevant one is ranked by its id among the tied ones.
    a = np.ones((3, 2), np.float32)
    t = np.ones((3, 2), np.float32)
    dump = make_dump(a, t, [0, 1, 2], audio_ids=["a", "b", "c"])
    m = compute_profile(dump, "trec").metrics
    # Query for clip "a" ranks it 3rd (c, b, a), "b" 2nd, "c" 1st.
    assert m["t2a/recip_rank"] == (1 / 3 + 1 / 2 + 1) / 3
    assert m == _pytrec(dump)


def test_dcase_profile_hand_computed() -> None:
    # Caption 0 ranks its clip 2nd; caption 1 ranks its clip 1st; caption 2 12th (out of top 10).
    n = 12
    a = np.eye(n, dtype=np.float32)
    t = np.zeros((n, n), np.float32)
    t[0, 0], t[0, 5] = 0.5, 0.9
    t[1, 1] = 1.0
    t[2, :] = 1.0
    t[2, 2] = 0.0
    for i in range(3, n):
        t[i, i] = 1.0
    m = compute_profile(make_dump(a, t, list(range(n))), "dcase")
    assert m.metrics["R1"] == pytest.approx((n - 2) / n)
    assert m.metrics["mAP10"] == pytest.approx((0.5 + 1 + 0 + (n - 3)) / n)
    assert any("text-to-audio only" in note for note in m.notes)


def test_profile_cli_json(tmp_path: Path) -> None:
    import json

    out = tmp_path / "trec.json"
    assert main(["metrics", str(DUMPS[0]), "--profile", "trec", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["profile"] == "trec" and doc["schema"] == "audiorepro.profile/1"
    assert "t2a/success_1" in doc["metrics"] and doc["notes"]
    assert main(["metrics", str(DUMPS[0]), "--profile", "nope"]) == 2


def test_laion_clap_profile_without_torch_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    assert main(["metrics", str(DUMPS[0]), "--profile", "laion-clap"]) == 2
    err = capsys.readouterr().err
    assert "needs torch" in err and "Traceback" not in err

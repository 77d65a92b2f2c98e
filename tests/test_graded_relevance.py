"""Graded relevance (issue 29, item 2): an optional ``relevance_gains`` beside the CSR
relevance, validated strictly; nDCG and nDCG@k use the gains, every other measure counts a
gain > 0 as relevant; harness and reference bit for bit, through metrics and parity."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.dump import dump_arrays, load_dump, make_dump, save_dump
from audiorepro.metrics.retrieval import compute_retrieval, metrics_report
from audiorepro.reference import reference_retrieval_metrics
from tests.strategies import relevance_dumps

TIES = st.sampled_from(["pessimistic", "optimistic"])
CUTOFFS = st.sampled_from([None, (1,), (1, 2, 5)])


@st.composite
def graded_dumps(draw: Any) -> dict[str, Any]:
    """Relevance dumps (ties between relevant items of different gains are common: the grid's
    duplicated rows) with gains 0..3, at least one positive; the policy ``skip`` or ``zero``
    accepts the queries whose gains are all 0."""
    d = dict(draw(relevance_dumps()))
    nnz = len(d["relevance_indices"])
    gains = np.array(draw(st.lists(st.integers(0, 3), min_size=nnz, max_size=nnz)), np.int64)
    gains[draw(st.integers(0, nnz - 1))] = draw(st.integers(1, 3))
    d["relevance_gains"] = gains
    return d


def _reference(d: dict[str, Any], ties: str, cutoffs: Any, policy: str) -> Any:
    return reference_retrieval_metrics(
        d["audio_embeds"],
        d["text_embeds"],
        relevance_indptr=d["relevance_indptr"],
        relevance_indices=d["relevance_indices"],
        relevance_gains=d["relevance_gains"],
        tie_policy=ties,
        cutoffs=cutoffs,
        empty_queries=policy,
    )


@given(graded_dumps(), TIES, CUTOFFS, st.sampled_from(["skip", "zero"]))
def test_graded_harness_equals_reference(
    d: dict[str, Any], ties: Any, cutoffs: Any, policy: Any
) -> None:
    got = compute_retrieval(make_dump(**d, empty_queries=policy)).metrics(ties, cutoffs)
    assert got == _reference(d, ties, cutoffs, policy)


@given(graded_dumps(), TIES)
def test_binary_measures_see_gain_above_zero_as_relevant(d: dict[str, Any], ties: Any) -> None:
    """Every measure but nDCG equals that of the binary dump of the entries with gain > 0."""
    keep = d["relevance_gains"] > 0
    clip = np.repeat(np.arange(len(d["relevance_indptr"]) - 1), np.diff(d["relevance_indptr"]))
    n = len(d["relevance_indptr"]) - 1
    binary = {
        "audio_embeds": d["audio_embeds"],
        "text_embeds": d["text_embeds"],
        "relevance_indptr": np.r_[0, np.cumsum(np.bincount(clip[keep], minlength=n))],
        "relevance_indices": d["relevance_indices"][keep],
    }
    graded = compute_retrieval(make_dump(**d, empty_queries="skip")).metrics(ties, (1, 3))
    plain = compute_retrieval(make_dump(**binary, empty_queries="skip")).metrics(ties, (1, 3))
    for direction in graded:
        for name, value in graded[direction].items():
            if not name.startswith("ndcg"):
                assert value == plain[direction][name], (direction, name)
    if bool(np.all(d["relevance_gains"][keep] == 1)):
        assert graded == plain  # gains of 1 are binary relevance


# One query (clip 0), texts scored 3, 2, 1 (texts 0, 1, 2) with gains 1, 3, 2.
AUDIO = np.array([[1.0, 0.0]])
TEXT = np.array([[3.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
GRADED = {"relevance_indptr": [0, 3], "relevance_indices": [0, 1, 2], "relevance_gains": [1, 3, 2]}


def test_graded_ndcg_by_hand() -> None:
    m = compute_retrieval(make_dump(AUDIO, TEXT, **GRADED)).metrics(cutoffs=(2,))["a2t"]
    dcg = 1 / math.log2(2) + 3 / math.log2(3) + 2 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert m["ndcg"] == pytest.approx(dcg / ideal, rel=1e-15)
    assert m["ndcg@2"] == pytest.approx((1 + 3 / math.log2(3)) / (3 + 2 / math.log2(3)), rel=1e-15)
    assert m["r@2"] == 1.0 and m["map"] == 1.0  # every text is relevant (gain > 0)


def test_tied_relevant_items_of_different_gains_are_bounded() -> None:
    """Texts 0 and 1 tie: pessimistic puts the lower gain first, optimistic the higher; only
    nDCG moves, and the tie bounds say so."""
    text = np.array([[2.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
    res = compute_retrieval(make_dump(AUDIO, text, **GRADED))
    lo = res.metrics("pessimistic", (1,))["a2t"]["ndcg"]
    hi = res.metrics("optimistic", (1,))["a2t"]["ndcg"]
    ideal = 3 + 2 / math.log2(3) + 1 / 2
    assert lo == pytest.approx((1 + 3 / math.log2(3) + 2 / 2) / ideal, rel=1e-15)
    assert hi == pytest.approx((3 + 1 / math.log2(3) + 2 / 2) / ideal, rel=1e-15)
    bounds = res.ties((1,))["a2t"]["bounds"]
    assert bounds == {"ndcg": [hi, lo], "ndcg@1": [1.0, 1 / 3]}


@pytest.mark.parametrize(
    "gains, message",
    [
        (np.array([1.0, 2.0, 3.0]), "has dtype float64, expected an integer dtype"),
        (np.array([1, 2]), "has shape (2,), expected (3,) (one gain per relevance_indices entry)"),
        (np.array([1, -1, 2]), "has value -1 at entry 1, expected an integer >= 0"),
        (np.array([[1, 2, 3]]), "has shape (1, 3), expected (3,)"),
    ],
)
def test_bad_gains_are_one_line(tmp_path: Path, gains: Any, message: str, capsys: Any) -> None:
    path = tmp_path / "bad.npz"
    arrays = dump_arrays(make_dump(AUDIO, TEXT, **GRADED))
    arrays["relevance_gains"] = gains
    np.savez(path, **arrays)
    assert main(["metrics", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "key 'relevance_gains'" in err and message in err


def test_gains_need_the_relevance_keys_and_a_positive_gain_per_query() -> None:
    with pytest.raises(UserError, match=r"relevance_gains.*without relevance_indptr"):
        make_dump(AUDIO, TEXT, [0, 0, 0], relevance_gains=[1, 1, 1])
    with pytest.raises(UserError, match=r"makes text row 1 relevant to no clip.*--empty-queries"):
        make_dump(AUDIO, TEXT, **{**GRADED, "relevance_gains": [1, 0, 2]})
    zero = make_dump(AUDIO, TEXT, **{**GRADED, "relevance_gains": [1, 0, 2]}, empty_queries="zero")
    assert compute_retrieval(zero).metrics()["t2a"]["r@1"] == 2 / 3  # text 1 counts as 0


def test_a_dump_without_gains_keeps_its_bytes_and_one_with_them_round_trips(tmp_path: Path) -> None:
    plain = make_dump(AUDIO, TEXT, relevance_indptr=[0, 3], relevance_indices=[0, 1, 2])
    assert "relevance_gains" not in dump_arrays(plain)
    graded = make_dump(AUDIO, TEXT, **GRADED)
    save_dump(tmp_path / "g.npz", graded)
    again = load_dump(tmp_path / "g.npz")
    assert again.gains is not None and again.gains.tolist() == [1, 3, 2]
    assert compute_retrieval(again).metrics() == compute_retrieval(graded).metrics()


def test_cli_metrics_parity_and_profiles(tmp_path: Path, capsys: Any) -> None:
    text = np.array([[2.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
    path, out = tmp_path / "g.npz", tmp_path / "m.json"
    save_dump(path, make_dump(AUDIO, text, **GRADED))
    assert main(["metrics", str(path), "--k", "1,2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["graded_relevance"] is True
    d = {"audio_embeds": AUDIO, "text_embeds": text, **GRADED}
    d["relevance_gains"] = np.array(GRADED["relevance_gains"])
    assert report["metrics"] == _reference(d, "pessimistic", (1, 2), None)  # type: ignore[arg-type]
    assert main(["parity", str(path), "--k", "1,2", "--tie-policy", "optimistic"]) == 0
    capsys.readouterr()
    assert main(["metrics", str(path), "--profile", "trec"]) == 2
    err = capsys.readouterr().err
    assert "key 'relevance_gains'" in err and "binary" in err
    plain = make_dump(AUDIO, text, relevance_indptr=[0, 3], relevance_indices=[0, 1, 2])
    assert "graded_relevance" not in metrics_report(plain, compute_retrieval(plain))

"""Declared float gains (issue 29, item 2): ``relevance_gains`` of dtype float64 with
``relevance_gains_kind = "float"``; validated strictly, kept exact (harness and reference bit
for bit), saved and loaded as declared; integer dumps unchanged."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.dump import GAINS_KIND_KEY, dump_arrays, load_dump, make_dump, save_dump
from audiorepro.metrics.retrieval import compute_retrieval
from audiorepro.reference import reference_retrieval_metrics
from tests.strategies import relevance_dumps

CUTOFFS = (1, 2, 5)
#: Float gains with ties among them and values no integer holds (0.1 is not dyadic: the
#: float64 nearest to it is what the engine must keep exactly).
FLOAT_GAINS = st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.25, 2.5, 3.0, 1e-3])


@st.composite
def float_graded_dumps(draw: Any) -> dict[str, Any]:
    d = dict(draw(relevance_dumps()))
    nnz = len(d["relevance_indices"])
    gains = np.array(draw(st.lists(FLOAT_GAINS, min_size=nnz, max_size=nnz)), np.float64)
    gains[draw(st.integers(0, nnz - 1))] = draw(FLOAT_GAINS.filter(lambda g: g > 0))
    d["relevance_gains"] = gains
    d["relevance_gains_kind"] = "float"
    return d


@settings(max_examples=60, deadline=None)
@given(float_graded_dumps(), st.sampled_from(["pessimistic", "optimistic", "average"]))
def test_float_gains_harness_equals_reference(d: dict[str, Any], ties: str) -> None:
    result = compute_retrieval(make_dump(**d, empty_queries="zero"))
    ref = reference_retrieval_metrics(
        d["audio_embeds"],
        d["text_embeds"],
        relevance_indptr=d["relevance_indptr"],
        relevance_indices=d["relevance_indices"],
        relevance_gains=d["relevance_gains"],
        tie_policy=ties,
        cutoffs=CUTOFFS,
        empty_queries="zero",
    )
    for direction in ("t2a", "a2t"):
        if ties == "average":
            got = {n: result.tie_averaged(direction, n) for n in ref[direction]}
        else:
            got = result.metrics(ties, CUTOFFS)[direction]  # type: ignore[arg-type]
        assert got == ref[direction], direction


def _small(**gains: Any) -> dict[str, Any]:
    e = np.eye(2)
    return {
        "audio_embeds": e,
        "text_embeds": e[[0, 0, 1]],
        "relevance_indptr": [0, 2, 3],
        "relevance_indices": [0, 1, 2],
        **gains,
    }


def test_integer_valued_float_gains_give_the_integer_values() -> None:
    as_int = compute_retrieval(make_dump(**_small(relevance_gains=[2, 1, 3])))
    as_float = compute_retrieval(
        make_dump(**_small(relevance_gains=[2.0, 1.0, 3.0], relevance_gains_kind="float"))
    )
    assert as_float.metrics("pessimistic", CUTOFFS) == as_int.metrics("pessimistic", CUTOFFS)
    assert as_float.ties(CUTOFFS) == as_int.ties(CUTOFFS)
    assert as_float.ties(CUTOFFS)["a2t"]["bounds"]["ndcg@1"]  # the gains tie: bounded


def test_float_gains_are_saved_as_declared_and_integers_as_before(tmp_path: Path) -> None:
    floats = make_dump(**_small(relevance_gains=[0.5, 0.1, 2.0], relevance_gains_kind="float"))
    save_dump(tmp_path / "f.npz", floats)
    back = load_dump(tmp_path / "f.npz")
    assert back.gains is not None and back.gains.dtype == np.float64
    assert back.gains.tolist() == [0.5, 0.1, 2.0]
    assert compute_retrieval(back).metrics() == compute_retrieval(floats).metrics()
    ints = dump_arrays(make_dump(**_small(relevance_gains=[2, 1, 3])))
    assert GAINS_KIND_KEY not in ints and ints["relevance_gains"].dtype == np.int64


@pytest.mark.parametrize(
    ("gains", "expected"),
    [
        ({"relevance_gains": [0.5, 1.0, 2.0]}, "float64 gains must be declared"),
        ({"relevance_gains": [1, 2, 3], "relevance_gains_kind": "float"}, "expected float64"),
        (
            {"relevance_gains": np.float32([1, 2, 3]), "relevance_gains_kind": "float"},
            "has dtype float32, expected float64",
        ),
        ({"relevance_gains": [1, 2, 3], "relevance_gains_kind": "real"}, "'integer' or 'float'"),
        (
            {"relevance_gains": [1.0, np.nan, 3.0], "relevance_gains_kind": "float"},
            "has value nan at entry 1, expected a finite gain",
        ),
        (
            {"relevance_gains": [1.0, -0.5, 3.0], "relevance_gains_kind": "float"},
            "has value -0.5 at entry 1, expected a float >= 0",
        ),
        (
            {"relevance_gains": [1.0, 2.0**60, 3.0], "relevance_gains_kind": "float"},
            "expected at most 2**53",
        ),
    ],
)
def test_float_gains_are_refused_unless_declared_and_valid(
    gains: dict[str, Any], expected: str
) -> None:
    with pytest.raises(UserError, match="relevance_gains") as info:
        make_dump(**_small(**gains))
    assert expected in str(info.value)


def test_a_kind_without_gains_is_refused() -> None:
    with pytest.raises(UserError, match=r"relevance_gains_kind.*without relevance_gains"):
        make_dump(**_small(relevance_gains_kind="float"))


def _graded_study(tmp_path: Path, gains: dict[str, Any]) -> Path:
    dump = tmp_path / "graded.npz"
    save_dump(dump, make_dump(**_small(**gains)))
    sha = hashlib.sha256(dump.read_bytes()).hexdigest()
    lines = [
        'schema = "audiorepro.study/1"',
        'name = "graded"',
        "k = [1, 2]",
        "[[cell]]",
        'id = "graded"',
        'model = "synthetic"',
        'dataset = "graded"',
        'dump = "graded.npz"',
        f'sha256 = "{sha}"',
    ]
    path = tmp_path / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("gains", "levels"),
    [
        ({"relevance_gains": [2, 1, 2]}, {"kind": "integer", "levels": {"1": 1, "2": 2}}),
        (
            {"relevance_gains": [0.5, 0.1, 0.5], "relevance_gains_kind": "float"},
            {"kind": "float", "levels": {"0.1": 1, "0.5": 2}},
        ),
        ({}, None),
    ],
)
def test_the_bundle_and_metrics_json_record_the_gain_levels(
    tmp_path: Path, gains: dict[str, Any], levels: Any
) -> None:
    """Item 3: an auditor sees from the bundle's cell (and the metrics JSON) that relevance was
    graded, of which kind, and how many entries hold each gain; binary: no such key."""
    out = tmp_path / "out"
    assert main(["reproduce", str(_graded_study(tmp_path, gains)), "--out", str(out)]) == 0
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    assert bundle["cells"][0].get("graded_relevance") == levels
    report = tmp_path / "m.json"
    assert main(["metrics", str(tmp_path / "graded.npz"), "--json", str(report)]) == 0
    doc = json.loads(report.read_text())
    assert doc.get("gain_levels") == levels
    assert doc.get("graded_relevance") == (True if levels else None)

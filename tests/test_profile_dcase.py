"""The dcase profile against the DCASE organizers' own figures, and its tie interval.

``fixtures/dcase/cases.json`` holds R1/R5/R10/mAP10 as the organizers' evaluation code computed
them on eight dumps, under three numpy builds (provenance in ``fixtures/dcase/PROVENANCE.md``).
Their value under ties follows numpy's argsort dispatch, so each run compares with the column
of the numpy build and CPU sort dispatch it runs on, and names that column in the test id.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.dump import Dump, load_dump, make_dump
from audiorepro.metrics.profiles import (
    DCASE_METRICS,
    SCORES_NUMPY,
    compute_profile,
    dcase_metrics_from_positions,
    dcase_ranks,
)
from audiorepro.metrics.retrieval import average_precision_per_query, compute_retrieval
from tests.conftest import FIXTURES, ROOT
from tests.strategies import dumps

DCASE = FIXTURES / "dcase"
CASES: list[dict[str, Any]] = json.loads((DCASE / "cases.json").read_text())["cases"]
SHARED = ROOT.parent / "shared" / "reference" / "dcase"
#: What disables numpy 1.26's AVX-512 argsort (the organizers' figures name the same list).
NO_AVX512 = "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
AVX512_COLUMN = "organizers_numpy_1_26_4_avx512_sort"
PLAIN_COLUMN = "organizers_numpy_1_26_4_without_avx512"


def _avx512_sort_active() -> bool:
    """numpy 1.26 sorts float64 with x86-simd-sort where AVX512_SKX is available and not
    switched off by NPY_DISABLE_CPU_FEATURES; ``__cpu_features__`` reflects both."""
    from numpy.core._multiarray_umath import __cpu_features__

    return bool(__cpu_features__.get("AVX512_SKX", False))


def organizers_column() -> tuple[str | None, str]:
    """The cases.json column for the running numpy build and sort dispatch, and why."""
    version = np.__version__
    if version == "1.23.5":
        return "organizers_numpy_1_23_5", "numpy 1.23.5 (no SIMD argsort)"
    if version == "1.26.4":
        if _avx512_sort_active():
            return AVX512_COLUMN, "numpy 1.26.4 with its AVX-512 argsort active"
        return PLAIN_COLUMN, "numpy 1.26.4 without AVX-512 argsort"
    return None, (
        f"cases.json has no column for numpy {version} (only 1.23.5 and 1.26.4): its tie order "
        "may differ, so the organizers' values under ties are unknown for it"
    )


COLUMN, WHY = organizers_column()


def _case_path(case: dict[str, Any]) -> Path:
    path = ROOT / case["dump"]
    return path if "/" in case["dump"] else DCASE / case["dump"]


def _case_id(case: dict[str, Any]) -> str:
    return f"{Path(case['dump']).stem}-{COLUMN or 'no-column'}"


def test_fixtures_are_the_hashed_copies() -> None:
    listed = {}
    for line in (DCASE / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        listed[name] = digest
    assert set(listed) == {p.name for p in DCASE.iterdir()} - {"SHA256SUMS", "PROVENANCE.md"}
    for name, digest in listed.items():
        assert hashlib.sha256((DCASE / name).read_bytes()).hexdigest() == digest, name
    for case in CASES:
        data = _case_path(case).read_bytes()
        assert hashlib.sha256(data).hexdigest() == case["sha256"], case["dump"]


def test_fixture_cases_are_the_shared_reference() -> None:
    if not (SHARED / "cases.json").is_file():
        pytest.skip(f"{SHARED} is not beside this checkout; the hashed fixtures stand alone")
    for name in (DCASE / "SHA256SUMS").read_text().split()[1::2]:
        assert (SHARED / name).read_bytes() == (DCASE / name).read_bytes(), name


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_dcase_profile_is_the_organizers_bit_for_bit(case: dict[str, Any]) -> None:
    pytest.importorskip("torch", reason="the organizers' scores are torch.dot")
    if COLUMN is None:
        pytest.skip(WHY)
    dump = load_dump(_case_path(case))
    assert (dump.n_clips, dump.n_captions) == (case["n_clips"], case["n_captions"])
    prof = compute_profile(dump, "dcase")
    expected = case[COLUMN]
    assert prof.metrics == expected, f"column {COLUMN} ({WHY}): {prof.metrics} != {expected}"
    assert prof.ties is not None
    for m in DCASE_METRICS:
        lo, hi = prof.ties["t2a"]["bounds"][m]
        assert hi <= prof.metrics[m] <= lo, (m, COLUMN)


@pytest.mark.parametrize("case", CASES, ids=[Path(c["dump"]).stem for c in CASES])
def test_torch_dot_only_near_ties_equals_every_pair(case: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    dump = load_dump(_case_path(case))
    fast, full = dcase_ranks(dump), dcase_ranks(dump, exhaustive=True)
    for name in ("position", "greater", "equal"):
        assert np.array_equal(getattr(fast, name), getattr(full, name)), name


def test_the_cases_tell_the_sort_dispatches_apart() -> None:
    # Without a dump whose value moves with the dispatch, the subprocess test proves nothing.
    assert any(c[AVX512_COLUMN] != c[PLAIN_COLUMN] for c in CASES)


def test_the_other_sort_dispatch_matches_its_column_too() -> None:
    """Switch numpy 1.26's AVX-512 argsort off in a child process: the plain column holds."""
    pytest.importorskip("torch")
    if np.__version__ != "1.26.4" or not _avx512_sort_active():
        pytest.skip(f"needs numpy 1.26.4 with AVX-512 argsort active here to switch it off ({WHY})")
    code = (
        "import json, sys\n"
        "from numpy.core._multiarray_umath import __cpu_features__ as f\n"
        "from audiorepro.formats.dump import load_dump\n"
        "from audiorepro.metrics.profiles import compute_profile\n"
        "out = {'avx512': bool(f.get('AVX512_SKX')), 'metrics': [\n"
        "    compute_profile(load_dump(p), 'dcase').metrics for p in sys.argv[1:]]}\n"
        "print(json.dumps(out))\n"
    )
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=NO_AVX512)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    paths = [str(_case_path(c)) for c in CASES]
    proc = subprocess.run(
        [sys.executable, "-c", code, *paths],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["avx512"] is False, "NPY_DISABLE_CPU_FEATURES did not switch AVX-512 off"
    for case, metrics in zip(CASES, out["metrics"], strict=True):
        assert metrics == case[PLAIN_COLUMN], f"column {PLAIN_COLUMN}: {case['dump']}"


# --- an independent transcription of the organizers' pipeline -----------------------------


def _organizers(dump: Dump) -> dict[str, float]:
    """Written from the organizers' description: a score table per clip (clips taken as the
    caption table first names them), one torch.dot per pair, then per caption a list of
    scores in that clip order, numpy.argsort(...)[::-1], and numpy.mean over captions."""
    import torch

    audio = torch.from_numpy(np.array(dump.audio_embeds, dtype=np.float32))
    text = torch.from_numpy(np.array(dump.text_embeds, dtype=np.float32))
    table: dict[int, dict[int, float]] = {}
    for clip in dump.text_to_audio.tolist():
        if clip not in table:
            table[clip] = {c: torch.dot(audio[clip], text[c]).item() for c in range(len(text))}
    values: dict[str, list[float]] = {m: [] for m in DCASE_METRICS}
    for c, own in enumerate(dump.text_to_audio.tolist()):
        clips = list(table)
        scores = [table[clip][c] for clip in clips]
        ranked = [clips[j] for j in np.argsort(scores)[::-1]]
        pos = ranked.index(own) + 1
        for k in (1, 5, 10):
            values[f"R{k}"].append(1.0 if pos <= k else 0.0)
        values["mAP10"].append(1.0 / pos if pos <= 10 else 0.0)
    return {m: float(np.mean(v)) for m, v in values.items()}


@given(dumps(max_clips=12, max_dim=4))
def test_dcase_profile_follows_the_organizers_pipeline(arrays: dict[str, Any]) -> None:
    # Captions come shuffled, so first appearance is not clip order; ties are common.
    pytest.importorskip("torch")
    dump = make_dump(**arrays)
    assert compute_profile(dump, "dcase").metrics == _organizers(dump)


@given(dumps(max_clips=12, max_dim=4))
def test_dcase_value_lies_in_its_tie_interval(arrays: dict[str, Any]) -> None:
    dump = make_dump(**arrays)
    prof = compute_profile(dump, "dcase")
    assert prof.ties is not None
    ranks = dcase_ranks(dump)
    assert prof.ties["t2a"]["queries_affected"] == int(np.count_nonzero(ranks.equal))
    for m in DCASE_METRICS:
        optimistic, pessimistic = prof.ties["t2a"]["bounds"][m]
        assert pessimistic <= prof.metrics[m] <= optimistic, m


@st.composite
def integer_dumps(draw: Any) -> Dump:
    """Integer embeddings: every float32 product and sum is exact (|score| < 2**24), so the
    float32 scores are the exact ones and canonical ranks are the float32 ranks."""
    n = draw(st.integers(1, 10))
    d = draw(st.integers(2, 5))
    extra = draw(st.lists(st.integers(0, n - 1), max_size=2 * n))
    t2a = draw(st.permutations(list(range(n)) + extra))
    cell = st.integers(-60, 60)
    audio = draw(st.lists(st.lists(cell, min_size=d, max_size=d), min_size=n, max_size=n))
    m = len(t2a)
    text = draw(st.lists(st.lists(cell, min_size=d, max_size=d), min_size=m, max_size=m))
    return make_dump(np.array(audio, np.float32), np.array(text, np.float32), t2a)


@given(integer_dumps())
def test_tie_free_interval_is_the_canonical_value(dump: Dump) -> None:
    ranks = dcase_ranks(dump)
    assume(not ranks.equal.any())
    prof = compute_profile(dump, "dcase")
    assert prof.ties is not None and prof.ties["t2a"]["queries_affected"] == 0
    canonical = compute_retrieval(dump)
    metrics = canonical.metrics()["t2a"]
    for m in DCASE_METRICS:
        lo, hi = prof.ties["t2a"]["bounds"][m]
        assert lo == hi == prof.metrics[m], m
    for k in (1, 5, 10):
        # 0/1 values: numpy.mean's pairwise sum is exact, like the canonical fsum.
        assert prof.metrics[f"R{k}"] == metrics[f"r@{k}"]
    ap = average_precision_per_query(canonical.ranking("t2a"), k=10)
    # The same per-caption values; only the summation differs (numpy.mean vs math.fsum).
    assert prof.metrics["mAP10"] == float(np.mean(ap))
    assert prof.metrics["mAP10"] == pytest.approx(metrics["map@10"], rel=1e-13, abs=0)


def test_metrics_from_positions_by_hand() -> None:
    # Positions 2, 1, 11: R1 = 1/3, R5 = R10 = 2/3, mAP10 = (1/2 + 1 + 0) / 3.
    m = dcase_metrics_from_positions([2, 1, 11])
    assert m == {"R1": 1 / 3, "R5": 2 / 3, "R10": 2 / 3, "mAP10": 0.5}


def test_three_tied_clips_interval_by_hand() -> None:
    # Every caption ties its clip with both others: positions 1..3 over the tie orders.
    dump = make_dump(np.ones((3, 2), np.float32), np.ones((3, 2), np.float32), [0, 1, 2])
    prof = compute_profile(dump, "dcase")
    assert prof.ties == {
        "t2a": {
            "queries_affected": 3,
            "bounds": {
                "R1": [1.0, 0.0],
                "R5": [1.0, 1.0],
                "R10": [1.0, 1.0],
                "mAP10": [1.0, 1 / 3],
            },
        }
    }


def test_float32_rounding_ties_that_exact_scores_separate() -> None:
    # Clip 1 beats clip 0 by 2**-30 in exact arithmetic; float32 scores tie them.
    audio = np.array([[1.0, 0.0], [1.0, 2.0**-30]], np.float64)
    text = np.array([[1.0, 1.0], [0.0, 1.0]], np.float64)
    dump = make_dump(audio, text, [0, 1])
    canonical = compute_retrieval(dump).metrics()["t2a"]
    assert canonical["r@1"] == 0.5  # caption 0's clip is second
    ties = compute_profile(dump, "dcase").ties
    assert ties is not None and ties["t2a"]["queries_affected"] == 1
    assert ties["t2a"]["bounds"]["R1"] == [1.0, 0.5]


# The canonical exact counts (computed alongside, for the notes) warn about the overflow.
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_scores_that_overflow_float32_tie_as_the_organizers_see_them() -> None:
    pytest.importorskip("torch")
    # Caption 0 scores 4.5e38 and 4.8e38 in float64, both inf in float32: a tie.
    audio = np.array([[1.5e19, 1.5e19], [1.6e19, 1.6e19], [0.0, 1.0]], np.float32)
    text = np.array([[1.5e19, 1.5e19], [1.0, 1.0], [0.0, 1.0]], np.float32)
    dump = make_dump(audio, text, [0, 1, 2])
    ranks = dcase_ranks(dump)
    assert ranks.equal[0] == 1 and ranks.greater[0] == 0
    full = dcase_ranks(dump, exhaustive=True)
    assert np.array_equal(ranks.position, full.position)
    assert compute_profile(dump, "dcase").metrics == _organizers(dump)


def test_subnormal_embeddings_score_as_the_organizers_see_them() -> None:
    pytest.importorskip("torch")
    tiny = np.float32(1e-40)  # subnormal: a kernel may flush it, beyond any relative bound
    audio = np.array([[1.0, tiny], [1.0, 0.0], [0.0, 1.0]], np.float32)
    text = np.array([[1.0, tiny], [1.0, 1.0], [0.5, 1.0]], np.float32)
    dump = make_dump(audio, text, [1, 0, 2])
    assert compute_profile(dump, "dcase").metrics == _organizers(dump)


def test_without_torch_the_fallback_is_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    case = next(c for c in CASES if c["dump"] == "gauss_60x5_d16.npz")
    prof = compute_profile(load_dump(_case_path(case)), "dcase")
    assert dcase_ranks(load_dump(_case_path(case))).scores == SCORES_NUMPY
    assert any(note.startswith("FALLBACK") for note in prof.notes)
    assert prof.ties is not None
    for m in DCASE_METRICS:
        lo, hi = prof.ties["t2a"]["bounds"][m]
        assert hi <= prof.metrics[m] <= lo
    # No caption's clip is within twice the float32 error bound of another clip's score, so
    # any float32 kernel ranks it the same, and the fallback gives the organizers' values.
    dump = load_dump(_case_path(case))
    a, t = dump.audio_embeds.astype(np.float64), dump.text_embeds.astype(np.float64)
    rows = np.arange(dump.n_captions)
    scores, size = t @ a.T, np.abs(t) @ np.abs(a).T
    gamma = a.shape[1] * 2.0**-24 / (1 - a.shape[1] * 2.0**-24)
    own = dump.text_to_audio
    gap = np.abs(scores - scores[rows, own][:, None])
    gap[rows, own] = np.inf
    assert np.all(gap > 4 * gamma * (size + size[rows, own][:, None]))
    assert prof.metrics == case["organizers_numpy_1_23_5"]


def test_dcase_json_adds_the_tie_interval(tmp_path: Path) -> None:
    out = tmp_path / "dcase.json"
    dump = DCASE / "ties_40x5_d4.npz"
    assert main(["metrics", str(dump), "--profile", "dcase", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "audiorepro.profile/1" and doc["profile"] == "dcase"
    assert set(doc["metrics"]) == set(DCASE_METRICS)
    t2a = doc["ties"]["t2a"]
    assert set(t2a["bounds"]) == set(DCASE_METRICS) and t2a["queries_affected"] > 0
    assert any(lo != hi for lo, hi in t2a["bounds"].values())


def test_float64_beyond_float32_is_a_clear_error() -> None:
    dump = make_dump(np.array([[1e39, 0.0]]), np.array([[1.0, 0.0]]), [0])
    with pytest.raises(UserError, match="float32 range"):
        compute_profile(dump, "dcase")

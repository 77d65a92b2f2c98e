"""Every speaker-verification definition (issue 47): hand-worked trials through the fast
functions and the twin, the fast functions equal to the twin on drawn trials, and each
toolkit's definition equal to the toolkit's own code on the same scores (speechbrain 1.1.2,
pyannote.metrics 4.2 and Kaldi's ``ComputeEer`` compiled from its source; they come with the
``test`` extra, and a test skips saying why only where one is absent)."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.metrics import verification as fast
from audiorepro.metrics import verification_toolkits as kits
from audiorepro.reference import verification as twin

Fn = Callable[..., float | None]

#: name -> (fast function, twin function); minDCF/actDCF at p_target 0.05 (VoxSRC).
IMPLS: dict[str, tuple[Fn, Fn]] = {
    "eer": (fast.equal_error_rate, twin.equal_error_rate),
    "eer_rocch": (fast.eer_rocch, twin.eer_rocch),
    "eer_pyannote": (kits.eer_pyannote, twin.eer_pyannote),
    "eer_speechbrain": (kits.eer_speechbrain, twin.eer_speechbrain),
    "eer_kaldi": (kits.eer_kaldi, twin.eer_kaldi),
    "min_dcf_p0.05": (
        lambda s, t: fast.min_dcf(s, t, p_target=0.05),
        lambda s, t: twin.min_dcf(s, t, p_target=0.05),
    ),
    "min_dcf_speechbrain_p0.05": (
        lambda s, t: kits.min_dcf_speechbrain(s, t, p_target=0.05),
        lambda s, t: twin.min_dcf_speechbrain(s, t, p_target=0.05),
    ),
    "act_dcf_p0.05": (
        lambda s, t: fast.act_dcf(s, t, p_target=0.05),
        lambda s, t: twin.act_dcf(s, t, p_target=0.05),
    ),
    "cllr": (fast.cllr, twin.cllr),
    "min_cllr": (fast.min_cllr, twin.min_cllr),
}
#: Definitions computed from integer counts in one exact step (or the toolkit's own float
#: steps): fast and twin agree to the last bit. The others sum logs or costs: 1e-12.
EXACT = {"eer", "eer_rocch", "eer_pyannote", "eer_speechbrain", "eer_kaldi",
         "min_dcf_speechbrain_p0.05"}  # fmt: skip

# The worked example: targets 0.8, 0.6, 0.3; non-targets 0.7, 0.4, 0.2, 0.1.
WORKED_SCORES = [0.8, 0.7, 0.6, 0.4, 0.3, 0.2, 0.1]
WORKED_TARGET = [True, False, True, False, True, False, False]
WORKED: dict[str, float] = {
    # ROC points (F, M) from the top: (0,1) (0,2/3) (1/4,2/3) (1/4,1/3) (1/2,1/3) (1/2,0)
    # (3/4,0) (1,0); the horizontal segment M = 1/3 crosses F = M at 1/3.
    "eer": 1 / 3,
    # BOSARIS rocch: labels by score ascending 0 0 1 0 1 0 1; PAV bins (tar, non) (0,1) (0,1)
    # (2,2) (1,0); (Pfa, Pmiss) at their edges (1,0) (3/4,0) (1/2,0) (0,2/3) (0,1); rocch2eer:
    # only the segment (1/2,0)-(0,2/3) slopes, its line M = 2/3 - 4/3 F meets F = M at 2/7.
    "eer_rocch": 2 / 7,
    # scikit-learn's ROC drops the point of score 0.2 (no bend); the first FPR > FNR is
    # (1/2, 1/3), after (1/4, 1/3): (1/4 + 1/2 + 1/3 + 1/3) / 4.
    "eer_pyannote": 0.25 * (0.25 + 0.5 + (1 - 2 / 3) + (1 - 2 / 3)),
    # speechbrain: at t = 0.4, FRR = 1/3 (float32), FAR = 1/4: the least |FAR - FRR| = 1/12.
    "eer_speechbrain": (float(np.float32(1 / 3)) + 0.25) / 2,
    # Kaldi: p = 0, q = 3: 0.7 < 0.3 no; p = 1, q = 4 - 1 - floor(4/3) = 2: 0.4 < 0.6, stop.
    "eer_kaldi": float(np.float32(1 / 3)),
    # the least of 0.05 M + 0.95 F is 0.05 * 1/3 + 0.95 * 0 ... at (0, 2/3): 1/30 ; / 0.05
    "min_dcf_p0.05": float(Fraction(2, 3)),
    # speechbrain's thresholds never accept everything; at t = 0.8 (nothing accepted) C =
    # 0.05: the least is at t = 0.7: FRR 2/3, FAR 0 in float32
    "min_dcf_speechbrain_p0.05": float(np.float32(np.float32(2 / 3) * np.float32(0.05))),
    # as LLRs every score is below log(0.95 / 0.05) = 2.94: nothing accepted, cost 0.05 / 0.05
    "act_dcf_p0.05": 1.0,
    # sum of log2(1 + exp(-x)) over targets / 3 and log2(1 + exp(x)) over non-targets / 4, / 2
    "cllr": (
        sum(math.log2(1 + math.exp(-x)) for x in (0.8, 0.6, 0.3)) / 3
        + sum(math.log2(1 + math.exp(x)) for x in (0.7, 0.4, 0.2, 0.1)) / 4
    )
    / 2,
    # only the bin (2, 2) costs: LLR log((2/2)(4/3)); (2 log2(1 + 3/4)) / 3 + (2 log2(1 + 4/3))
    # / 4, halved
    "min_cllr": (2 * math.log2(1.75) / 3 + 2 * math.log2(7 / 3) / 4) / 2,
}


@pytest.mark.parametrize("side", [0, 1], ids=["metrics", "reference"])
@pytest.mark.parametrize("name", WORKED)
def test_the_worked_example(name: str, side: int) -> None:
    got = IMPLS[name][side](WORKED_SCORES, WORKED_TARGET)
    assert got == pytest.approx(WORKED[name], rel=1e-15, abs=1e-15)


def test_the_worked_example_tells_the_definitions_apart() -> None:
    eers = {n: v for n, v in WORKED.items() if n.startswith("eer")}
    assert len(set(eers.values())) == 5  # Kaldi gives the ROC crossing's 1/3, as float32
    assert WORKED["eer_rocch"] < WORKED["eer"]  # the hull lies below the ROC


@pytest.mark.parametrize("side", [0, 1], ids=["metrics", "reference"])
@pytest.mark.parametrize("name", IMPLS)
def test_one_class_has_no_value(name: str, side: int) -> None:
    assert IMPLS[name][side]([0.1, 0.2], [True, True]) is None
    assert IMPLS[name][side]([0.1, 0.2], [False, False]) is None


def test_bad_costs_and_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="p_target must be in"):
        fast.min_dcf([0.1, 0.2], [True, False], p_target=1.0)
    with pytest.raises(ValueError, match="c_miss and c_fa"):
        fast.act_dcf([0.1, 0.2], [True, False], p_target=0.5, c_fa=0.0)
    with pytest.raises(ValueError, match="NaN"):
        kits.eer_kaldi([0.1, float("nan")], [True, False])


# Scores from a few levels (ties between targets and non-targets are common), sometimes
# float32 (speechbrain compares in the tensor's dtype), sometimes continuous.
_levels = st.integers(0, 6).map(lambda v: v / 3 - 1)
_trials = st.integers(2, 40).flatmap(
    lambda n: st.tuples(
        st.one_of(
            st.lists(_levels, min_size=n, max_size=n),
            st.lists(st.floats(-8, 8, allow_nan=False, width=32), min_size=n, max_size=n),
        ),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.booleans(),
    )
)


def _arrays(drawn: tuple[list[float], list[bool], bool]) -> tuple[Any, Any]:
    scores, target, f32 = drawn
    return np.asarray(scores, dtype=np.float32 if f32 else np.float64), np.asarray(target)


@given(_trials)
def test_metrics_equal_the_twin(drawn: tuple[list[float], list[bool], bool]) -> None:
    scores, target = _arrays(drawn)
    for name, (ours, theirs) in IMPLS.items():
        a, b = ours(scores, target), theirs(scores, target)
        if name in EXACT or a is None or b is None:
            assert a == b, name
        else:
            assert a == pytest.approx(b, rel=1e-12, abs=1e-12), name


@given(_trials)
def test_the_definitions_keep_their_order(drawn: tuple[list[float], list[bool], bool]) -> None:
    """The hull lies below the ROC; the best recalibration costs less than none; the least cost
    over thresholds is at most the cost at the Bayes threshold; all in range."""
    scores, target = _arrays(drawn)
    eer = fast.equal_error_rate(scores, target)
    if eer is None:
        return
    assert 0.0 <= (fast.eer_rocch(scores, target) or 0.0) <= eer <= 1.0
    assert (fast.min_cllr(scores, target) or 0.0) <= (fast.cllr(scores, target) or 0.0) + 1e-12
    for p in (0.01, 0.05, 0.5):
        least = fast.min_dcf(scores, target, p_target=p)
        assert least is not None and 0.0 <= least <= 1.0 + 1e-12
        assert least <= (fast.act_dcf(scores, target, p_target=p) or 0.0) + 1e-12


@given(_trials, st.integers(1, 5))
def test_rank_measures_ignore_a_monotone_rescaling(
    drawn: tuple[list[float], list[bool], bool], scale: int
) -> None:
    scores, target = _arrays(drawn)
    moved = np.asarray(scores, dtype=np.float64) * 2.0**scale  # exact: ties stay ties
    for f in (fast.equal_error_rate, fast.eer_rocch, fast.min_cllr, kits.eer_pyannote):
        assert f(moved, target) == f(np.asarray(scores, dtype=np.float64), target)


def test_the_twin_runs_at_voxceleb1_o_size() -> None:
    """The twin is O(n log n): 37,720 trials (VoxCeleb1-O's count) in seconds, equal to ours."""
    rng = np.random.default_rng(47)
    target = rng.random(37_720) < 0.5
    scores = np.round(rng.normal(size=target.size) + 1.5 * target, 3)  # ties at 3 decimals
    for name in ("eer", "eer_rocch", "eer_kaldi", "eer_pyannote"):
        ours, theirs = IMPLS[name]
        assert ours(scores, target) == theirs(scores, target), name


def test_calibrated_gaussian_llrs_meet_their_theory() -> None:
    """LLRs of N(2, 2^2) targets and N(-2, 2^2) non-targets are calibrated (llr(x) = x): the
    hull's EER tends to Phi(-1) and both Cllr and minCllr to E log2(1 + exp(-x)), x ~ N(2, 4),
    which the trapezoid rule gives here (0.514 in ROCAnalysis.jl's tests)."""
    rng = np.random.default_rng(2)
    tar, non = 2 + 2 * rng.standard_normal(200_000), -2 + 2 * rng.standard_normal(200_000)
    scores = np.concatenate((tar, non))
    target = np.arange(scores.size) < tar.size
    x = np.linspace(-30, 34, 200_001)
    density = np.exp(-((x - 2) ** 2) / 8) / math.sqrt(8 * math.pi)
    f = density * np.logaddexp(0, -x) / math.log(2)
    expected_cllr = float(((f[1:] + f[:-1]) / 2 * np.diff(x)).sum())  # the trapezoid rule
    phi = 0.5 * math.erfc(1 / math.sqrt(2))
    assert fast.eer_rocch(scores, target) == pytest.approx(phi, abs=3e-3)
    assert fast.cllr(scores, target) == pytest.approx(expected_cllr, abs=5e-3)
    assert fast.min_cllr(scores, target) == pytest.approx(expected_cllr, abs=5e-3)


# --- the toolkits' own code -----------------------------------------------------------------


#: speechbrain's own EER and minDCF over cases given as JSON, in a process of its own:
#: speechbrain fills sys.modules with lazy modules that import on any attribute access, which
#: breaks hypothesis' scan of loaded modules for every later test of the session.
SPEECHBRAIN = """
import json, sys
import numpy as np, torch
from speechbrain.utils.metric_stats import EER, minDCF
out = []
for scores, target, dtype in json.load(sys.stdin):
    s, t = np.asarray(scores, dtype=dtype), np.asarray(target, dtype=bool)
    pos, neg = torch.from_numpy(s[t]), torch.from_numpy(s[~t])
    out.append([EER(pos, neg)[0]] + [minDCF(pos, neg, p_target=p)[0] for p in (0.01, 0.05)])
json.dump(out, sys.stdout)
"""


def _against_speechbrain(cases: list[tuple[Any, Any]]) -> None:
    if importlib.util.find_spec("speechbrain") is None:
        pytest.skip("speechbrain is not installed (pip install -e '.[test]')")
    payload = [(s.tolist(), t.tolist(), s.dtype.name) for s, t in cases]
    run = subprocess.run([sys.executable, "-c", SPEECHBRAIN], input=json.dumps(payload),
                         capture_output=True, text=True, check=True)  # fmt: skip
    for (scores, target), (eer, dcf01, dcf05) in zip(cases, json.loads(run.stdout), strict=True):
        assert kits.eer_speechbrain(scores, target) == eer
        assert kits.min_dcf_speechbrain(scores, target, p_target=0.01) == dcf01
        assert kits.min_dcf_speechbrain(scores, target, p_target=0.05) == dcf05


def _pyannote() -> Any:
    return pytest.importorskip(
        "pyannote.metrics.binary_classification",
        reason="pyannote.metrics is not installed (pip install -e '.[test]')",
    )


def _against_pyannote(scores: Any, target: Any) -> None:
    det_curve = _pyannote().det_curve
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert kits.eer_pyannote(scores, target) == float(det_curve(target, scores)[3])


def _drawn_cases(seed: int, count: int) -> list[tuple[Any, Any]]:
    """Seeded small trial lists: scores from a few levels (ties) or continuous, float64 or
    float32 (speechbrain compares in the tensor's dtype), both classes present."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(count):
        n = int(rng.integers(2, 50))
        target = rng.random(n) < rng.uniform(0.1, 0.9)
        target[:2] = (True, False)
        scores = rng.integers(0, int(rng.integers(2, 12)), n) / 7 if i % 2 else rng.normal(size=n)
        cases.append((scores.astype(np.float32 if i % 3 == 0 else np.float64), target))
    return cases


def test_speechbrain_own_code() -> None:
    _against_speechbrain(_drawn_cases(47, 400))


@given(_trials)
def test_pyannote_own_code(drawn: tuple[list[float], list[bool], bool]) -> None:
    scores, target = _arrays(drawn)
    if target.all() or not target.any():
        return
    _against_pyannote(scores, target)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("decimals", [2, None])
def test_the_toolkits_on_larger_lists(dtype: Any, decimals: int | None) -> None:
    """2,000 trials (speechbrain's minDCF holds a thresholds x trials matrix): continuous
    scores and scores rounded to 2 decimals (many ties), float64 and float32."""
    rng = np.random.default_rng(0 if decimals is None else decimals)
    target = rng.random(2000) < 0.2
    scores = rng.normal(size=target.size) + 2.0 * target
    if decimals is not None:
        scores = np.round(scores, decimals)
    scores = scores.astype(dtype)
    _against_speechbrain([(scores, target)])
    _against_pyannote(scores, target)


KALDI_SOURCE = Path(__file__).parent / "standins" / "kaldi" / "compute_eer.cc"


@pytest.fixture(scope="module")
def kaldi_compute_eer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Kaldi's own ``ComputeEer`` (copied verbatim, see the file's header) built here."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++) to build Kaldi's ComputeEer")
    binary = tmp_path_factory.mktemp("kaldi") / "compute-eer"
    subprocess.run([compiler, "-O2", "-o", str(binary), str(KALDI_SOURCE)], check=True)
    return binary


def _kaldi(binary: Path, scores: Any, target: Any) -> float:
    lines = "".join(
        f"{float(np.float32(s))!r} {'target' if t else 'nontarget'}\n"
        for s, t in zip(scores.tolist(), target.tolist(), strict=True)
    )
    out = subprocess.run([str(binary)], input=lines, capture_output=True, text=True, check=True)
    return float(np.float32(float(out.stdout)))  # %.9g round-trips a float32


@pytest.mark.parametrize("seed", range(6))
def test_kaldi_own_code(kaldi_compute_eer: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    target = rng.random(n) < rng.uniform(0.05, 0.95)
    target[:2] = (True, False)
    scores = rng.normal(size=n) + rng.uniform(0, 3) * target
    if seed % 2:
        scores = np.round(scores, 1)  # ties
    assert kits.eer_kaldi(scores, target) == _kaldi(kaldi_compute_eer, scores, target)
    assert twin.eer_kaldi(scores, target) == _kaldi(kaldi_compute_eer, scores, target)


#: Each registered name and the public function it must equal.
PUBLIC: dict[str, Fn] = {
    "eer": fast.equal_error_rate,
    "eer_rocch": fast.eer_rocch,
    "eer_pyannote": kits.eer_pyannote,
    "eer_speechbrain": kits.eer_speechbrain,
    "eer_kaldi": kits.eer_kaldi,
    "min_dcf_p0.01": lambda s, t: fast.min_dcf(s, t, p_target=0.01),
    "min_dcf_p0.05": lambda s, t: fast.min_dcf(s, t, p_target=0.05),
    "min_dcf_speechbrain_p0.01": lambda s, t: kits.min_dcf_speechbrain(s, t, p_target=0.01),
    "min_dcf_speechbrain_p0.05": lambda s, t: kits.min_dcf_speechbrain(s, t, p_target=0.05),
    "act_dcf_p0.01": lambda s, t: fast.act_dcf(s, t, p_target=0.01),
    "act_dcf_p0.05": lambda s, t: fast.act_dcf(s, t, p_target=0.05),
    "cllr": fast.cllr,
    "min_cllr": fast.min_cllr,
}


@given(_trials)
def test_the_registry_shares_one_sort_and_gives_each_functions_value(
    drawn: tuple[list[float], list[bool], bool],
) -> None:
    scores, target = _arrays(drawn)
    assert [d.name for d in kits.DEFINITIONS] == list(PUBLIC)
    assert kits.compute_definitions(scores, target) == {
        name: f(scores, target) for name, f in PUBLIC.items()
    }


@given(_trials, st.sampled_from([0.01, 0.05, 0.5]))
def test_the_min_dcf_point_has_the_least_cost(
    drawn: tuple[list[float], list[bool], bool], p: float
) -> None:
    """The operating point the DET curve marks for minDCF costs minDCF (normalized)."""
    scores, target = _arrays(drawn)
    point = fast.min_dcf_point(fast.operating_points(scores, target), p)
    least = fast.min_dcf(scores, target, p_target=p)
    if least is None:
        assert point is None
        return
    assert point is not None
    p_fa, p_miss = point
    assert (p * p_miss + (1 - p) * p_fa) / min(p, 1 - p) == pytest.approx(least, abs=1e-12)

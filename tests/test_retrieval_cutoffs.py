"""Definitions 1.1: any cutoff (``metrics --k``, a study's ``k``), precision@k, mrr@k, nDCG,
nDCG@k, R-precision; checked by hand, against pytrec_eval, the reference, and the CLI/study."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from audiorepro.checks.explain import CONCEPTS, concept_of, explain
from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.dump import load_dump, make_dump
from audiorepro.metrics.profiles import compute_profile, trec_measures
from audiorepro.metrics.retrieval import (
    METRICS,
    compute_retrieval,
    metric_by_name,
    metric_names,
    metrics_report,
    ranking_from_scores,
)
from audiorepro.reference import reference_retrieval_metrics
from audiorepro.reference.retrieval import _cutoff_names, _query_metrics
from audiorepro.specs.published import (
    canonical_metric_problem,
    metric_range,
    profile_metric_problem,
)
from audiorepro.specs.study import load_study
from tests.conftest import FIXTURES

DUMP = FIXTURES / "dumps" / "synthetic_5cap.npz"
CLASSES = FIXTURES / "dumps" / "synthetic_classes.npz"

# One query, items 0..5 scored 6..1, relevant {1, 3, 4}: positions 2, 4, 5.
SCORES = [[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]]
RELEVANT = [[1, 3, 4]]
L2 = np.log2


def _by_hand() -> dict[str, float]:
    dcg = [1 / L2(3), 1 / L2(5), 1 / L2(6)]
    ideal = [1.0, 1 / L2(3), 1 / L2(4)]
    return {
        "precision@1": 0.0,
        "precision@4": 2 / 4,
        "precision@10": 3 / 10,
        "mrr@1": 0.0,
        "mrr@2": 1 / 2,
        "r_precision": 1 / 3,  # one of the top 3 is relevant
        "ndcg@1": 0.0,
        "ndcg@2": dcg[0] / (1 + 1 / L2(3)),
        "ndcg@4": (dcg[0] + dcg[1]) / sum(ideal),
        "ndcg": sum(dcg) / sum(ideal),
        "recall@4": 2 / 3,
        "r@2": 1.0,
        "map@4": (1 / 2 + 2 / 4) / 3,
    }


@pytest.mark.parametrize("name, want", sorted(_by_hand().items()))
def test_hand_computed_values_for_harness_and_reference(name: str, want: float) -> None:
    ranking = ranking_from_scores(SCORES, RELEVANT)
    got = metric_by_name(name)(ranking)
    assert got == pytest.approx(want, abs=1e-15)
    # The reference's per-query value from the same positions (2, 4, 5), as it computes them.
    names = _cutoff_names((int(name.partition("@")[2]),) if "@" in name else (1,))
    assert float(_query_metrics([2, 4, 5], names)[name]) == got


def test_every_new_measure_is_bounded_by_the_tie_policies() -> None:
    tied = [[0.5, 0.5, 0.5, 0.1]]  # the relevant item 2 ties with 0 and 1
    pes = ranking_from_scores(tied, [[2]], tie_policy="pessimistic")
    opt = ranking_from_scores(tied, [[2]], tie_policy="optimistic")
    for name in ("precision@1", "mrr@2", "ndcg@2", "ndcg", "r_precision"):
        assert metric_by_name(name)(pes) < metric_by_name(name)(opt), name


@pytest.mark.parametrize("name", ["ndcg@0", "precision@-1", "p@5", "ndcg@05", "r@", "mrr@1.5"])
def test_unknown_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="unknown retrieval metric"):
        metric_by_name(name)
    assert canonical_metric_problem(f"t2a/{name}") is not None


def test_new_names_are_published_names_in_the_unit_range() -> None:
    for name in ("ndcg@50", "precision@3", "mrr@10", "r_precision", "ndcg", "success@20"):
        assert canonical_metric_problem(f"t2a/{name}") is None
        assert metric_range(f"t2a/{name}") == (0.0, 1.0)


def test_the_1_0_report_is_unchanged_without_cutoffs() -> None:
    dump = load_dump(DUMP)
    result = compute_retrieval(dump)
    report = metrics_report(dump, result)
    assert "cutoffs" not in report and "definitions_minor" not in report
    assert list(report["metrics"]["t2a"]) == list(METRICS)
    assert metric_names() == tuple(METRICS)


# --- pytrec_eval, where its definitions coincide (no ties) ---------------------------------

pytrec_eval = pytest.importorskip("pytrec_eval")
TREC = {"P": "precision", "recall": "recall", "success": "r", "map_cut": "map", "ndcg_cut": "ndcg"}


@pytest.mark.parametrize("seed, cpc", [(0, 1), (1, 5), (2, 3)])
def test_pytrec_eval_agrees_at_other_cutoffs(seed: int, cpc: int) -> None:
    rng = np.random.default_rng(seed)
    n = 30
    audio = rng.standard_normal((n, 16))
    t2a = np.repeat(np.arange(n), cpc)
    text = audio[t2a] + 1.5 * rng.standard_normal((n * cpc, 16))
    scores = audio @ text.T  # a2t: clips query their captions
    assert np.diff(np.sort(scores, axis=1), axis=1).min() > 1e-9
    cutoffs = [2, 3, 20, 50]
    ours = compute_retrieval(make_dump(audio, text, t2a)).metrics("pessimistic", cutoffs)["a2t"]
    qrels = {f"q{j}": {f"d{i}": 1 for i in np.flatnonzero(t2a == j)} for j in range(n)}
    run = {f"q{j}": {f"d{i}": float(s) for i, s in enumerate(row)} for j, row in enumerate(scores)}
    spec = {f"{m}.{','.join(map(str, cutoffs))}" for m in TREC} | {"ndcg", "Rprec"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, spec).evaluate(run)

    def mean(measure: str) -> float:
        return float(np.mean([per_query[q][measure] for q in sorted(per_query)]))

    for theirs, family in TREC.items():
        for k in cutoffs:
            assert ours[f"{family}@{k}"] == pytest.approx(mean(f"{theirs}_{k}"), abs=1e-12)
    assert ours["ndcg"] == pytest.approx(mean("ndcg"), abs=1e-12)
    assert ours["r_precision"] == pytest.approx(mean("Rprec"), abs=1e-12)


# --- the command line ---------------------------------------------------------------------


def test_metrics_k_reports_every_measure_at_each_cutoff(tmp_path: Path) -> None:
    out, plain = tmp_path / "k.json", tmp_path / "plain.json"
    assert main(["metrics", str(CLASSES), "--k", "1,5,10,50", "--json", str(out)]) == 0
    assert main(["metrics", str(CLASSES), "--json", str(plain)]) == 0
    report, old = json.loads(out.read_text()), json.loads(plain.read_text())
    assert report["cutoffs"] == [1, 5, 10, 50] and report["definitions_minor"] == 1
    assert report["definitions_version"] == old["definitions_version"] == 1
    for direction in ("t2a", "a2t"):
        names = set(report["metrics"][direction])
        for family in ("r", "recall", "precision", "map", "mrr", "ndcg"):
            assert {f"{family}@{k}" for k in (1, 5, 10, 50)} <= names
        assert {"map", "mrr", "ndcg", "r_precision", "mean_rank", "median_rank"} <= names
        for name, value in old["metrics"][direction].items():
            assert report["metrics"][direction][name] == value  # 1.0's values unchanged


def test_parity_k_checks_the_new_measures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parity", str(DUMP), str(CLASSES), "--k", "2,7"]) == 0
    assert capsys.readouterr().out.count("36 metrics, worst |harness - reference| = 0") == 2


@pytest.mark.parametrize(
    "value, message",
    [
        ("5,1", "must be in ascending order, got [5, 1]"),
        ("0", "must hold ints >= 1 only, got 0"),
        ("1,1", "must not repeat a cutoff"),
        ("1,x", "expected ints >= 1 separated by commas"),
        ("", "expected ints >= 1 separated by commas"),
    ],
)
def test_a_bad_k_is_one_line_and_exit_2(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["metrics", str(DUMP), "--k", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'--k'" in err and message in err


def test_k_is_refused_for_a_profile_with_fixed_cutoffs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", str(DUMP), "--k", "3", "--profile", "dcase"]) == 2
    assert "its peer's own" in capsys.readouterr().err


# --- studies ------------------------------------------------------------------------------


def _study(tmp_path: Path, k: str, values: dict[str, float] | None = None) -> Path:
    shutil.copy(DUMP, tmp_path / "a.npz")
    sha = hashlib.sha256((tmp_path / "a.npz").read_bytes()).hexdigest()
    lines = [
        'schema = "audiorepro.study/1"',
        'name = "cutoffs"',
        *([f"k = {k}"] if k else []),
        "[[cell]]",
        'id = "five"',
        'model = "synthetic"',
        'dataset = "synthetic-5cap"',
        'dump = "a.npz"',
        f'sha256 = "{sha}"',
    ]
    if values:
        lines += [
            "[[published]]",
            'cell = "five"',
            "tolerance = 1e-12",
            'provenance = "the reference implementation"',
            "values = { " + ", ".join(f'"{n}" = {v!r}' for n, v in values.items()) + " }",
        ]
    path = tmp_path / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "k, message",
    [
        ("[5, 1]", "ascending order"),
        ("[0, 5]", ">= 1"),
        ("[1, 1]", "must not repeat"),
        ("[1.5]", "int"),
        ("[true]", "int"),
        ("[]", "non-empty"),
        ('"1,5"', "list"),
    ],
)
def test_a_bad_study_k_names_the_key(tmp_path: Path, k: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        load_study(_study(tmp_path, k))
    assert str(info.value.key).startswith("k")
    assert "\n" not in str(info.value)


def test_a_study_with_k_reports_all_four_cutoffs(tmp_path: Path) -> None:
    dump = load_dump(DUMP)
    ref = reference_retrieval_metrics(
        dump.audio_embeds, dump.text_embeds, dump.text_to_audio, cutoffs=[1, 5, 10, 50]
    )
    published = {"t2a/ndcg@50": ref["t2a"]["ndcg@50"], "a2t/precision@5": ref["a2t"]["precision@5"]}
    # mrr@3 is no cutoff of the study: computed by name, from the reference at k = 3.
    published["t2a/mrr@3"] = reference_retrieval_metrics(
        dump.audio_embeds, dump.text_embeds, dump.text_to_audio, cutoffs=[3]
    )["t2a"]["mrr@3"]
    out = tmp_path / "out"
    assert main(["reproduce", str(_study(tmp_path, "[1, 5, 10, 50]", published)),
                 "--out", str(out)]) == 0  # fmt: skip
    verification = json.loads((out / "verification.json").read_text())
    assert verification["failures"] == []
    assert verification["golden"]["counts"]["PASS"] == 3
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    assert bundle["study"]["k"] == [1, 5, 10, 50] and bundle["definitions_minor"] == 1
    metrics = bundle["cells"][0]["metrics"]
    assert metrics == ref
    header = (out / "tables" / "synthetic-5cap_t2a.csv").read_text().splitlines()[0]
    assert all(f"ndcg@{k}" in header for k in (1, 5, 10, 50))
    report = (out / "report.html").read_text()
    assert "Metric definitions (v1.1, pessimistic ties)" in report
    assert "<code>ndcg@50</code>" in report and "<code>r_precision</code>" in report


def test_a_study_with_k_fails_a_wrong_new_value(tmp_path: Path) -> None:
    out = tmp_path / "out"
    study = _study(tmp_path, "[1, 50]", {"t2a/ndcg@50": 0.123})
    assert main(["reproduce", str(study), "--out", str(out)]) == 1
    verification = json.loads((out / "verification.json").read_text())
    assert verification["failures"] == ["published five t2a/ndcg@50: FAIL"]


# --- the trec profile, explain and published names at the cutoffs -------------------------


@pytest.mark.parametrize("seed, cpc", [(3, 1), (4, 5)])
def test_the_trec_profile_at_cutoffs_is_pytrec_eval(seed: int, cpc: int) -> None:
    rng = np.random.default_rng(seed)
    n = 25
    audio = rng.standard_normal((n, 12))
    t2a = np.repeat(np.arange(n), cpc)
    text = audio[t2a] + 1.5 * rng.standard_normal((n * cpc, 12))
    dump = make_dump(audio, text, t2a)
    cutoffs = [2, 7, 30]
    ours = compute_profile(dump, "trec", cutoffs=cutoffs).metrics
    scores = text @ audio.T
    assert np.diff(np.sort(scores, axis=1), axis=1).min() > 1e-9  # no ties: same ranking
    for direction, s, rel in (
        ("t2a", scores, [{int(j)} for j in t2a]),
        ("a2t", scores.T, [set(np.flatnonzero(t2a == j).tolist()) for j in range(n)]),
    ):
        qrels = {str(q): {str(i): 1 for i in r} for q, r in enumerate(rel)}
        run = {str(q): {str(i): float(v) for i, v in enumerate(row)} for q, row in enumerate(s)}
        spec = {f"{m}.2,7,30" for m in ("success", "recall", "P", "map_cut", "ndcg_cut")}
        spec |= {"map", "recip_rank", "ndcg", "Rprec"}
        per_query = pytrec_eval.RelevanceEvaluator(qrels, spec).evaluate(run)
        for measure in trec_measures(cutoffs):
            want = float(np.mean([per_query[q][measure] for q in sorted(per_query)]))
            assert ours[f"{direction}/{measure}"] == pytest.approx(want, abs=1e-14), measure


def test_the_trec_profile_keeps_its_1_0_values_at_its_1_0_cutoffs() -> None:
    dump = load_dump(DUMP)
    old = compute_profile(dump, "trec").metrics
    new = compute_profile(dump, "trec", cutoffs=[1, 5, 10, 50]).metrics
    assert old.items() <= new.items()
    assert "t2a/ndcg_cut_50" in new and "a2t/Rprec" in new


def test_metrics_k_with_the_trec_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", str(CLASSES), "--profile", "trec", "--k", "3,50"]) == 0
    out = capsys.readouterr().out
    assert "t2a/ndcg_cut_50" in out and "a2t/P_3" in out and "t2a/success_10" not in out


def test_explain_maps_every_new_name_to_its_concept_and_trec_measure() -> None:
    dump = load_dump(DUMP)
    report = explain(dump, cutoffs=[3, 50])
    result = compute_retrieval(dump).metrics("pessimistic", [3, 50])
    for direction in ("t2a", "a2t"):
        rows = {r["canonical_name"]: r for r in report["directions"][direction]["rows"]}
        assert list(rows) == list(metric_names([3, 50]))
        for name, row in rows.items():
            assert row["concept"] == concept_of(name)
            assert row["canonical"] == result[direction][name]
        assert rows["ndcg@50"]["profiles"]["trec"]["name"] == f"{direction}/ndcg_cut_50"
        assert rows["r_precision"]["profiles"]["trec"]["name"] == f"{direction}/Rprec"
        assert "trec" not in rows["mrr@3"]["profiles"]  # trec_eval has no cut reciprocal rank
    # Without cutoffs, explain's rows are 1.0's, as before.
    assert [r["concept"] for r in explain(dump)["directions"]["t2a"]["rows"]] == list(CONCEPTS)


@pytest.mark.parametrize(
    "name, ok",
    [("t2a/ndcg_cut_50", True), ("a2t/P_3", True), ("t2a/Rprec", True), ("t2a/ndcg", True),
     ("t2a/P_0", False), ("t2a/ndcg@5", False), ("up/map", False), ("t2a/bpref", False)],
)  # fmt: skip
def test_trec_published_names_at_any_cutoff(name: str, ok: bool) -> None:
    assert (profile_metric_problem("trec", name) is None) == ok


def test_a_study_with_k_runs_the_trec_profile_at_its_cutoffs(tmp_path: Path) -> None:
    path = _study(tmp_path, "[1, 50]")
    path.write_text(
        path.read_text().replace(
            'name = "cutoffs"', 'name = "cutoffs"\nprofiles = ["canonical", "trec"]'
        )
    )
    out = tmp_path / "out"
    assert main(["reproduce", str(path), "--out", str(out)]) == 0
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    trec = bundle["cells"][0]["profiles"]["trec"]
    assert trec == compute_profile(load_dump(DUMP), "trec", cutoffs=[1, 50]).metrics
    assert "t2a/ndcg_cut_50" in trec and "t2a/success_5" not in trec

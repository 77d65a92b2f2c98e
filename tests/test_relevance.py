"""General audio-text relevance (format version 2): the exact engine against the independent
reference under hypothesis, and a ``text_to_audio`` dump against the same relevance written as
CSR, to the last bit, through both engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.core.errors import UserError
from audiorepro.formats.dump import Dump, load_dump, make_dump
from audiorepro.metrics import _exact_kernels as kernels
from audiorepro.metrics._exact import ExactStats, exact_rank_counts, exact_relevance_counts
from audiorepro.metrics.profiles import compute_profile
from audiorepro.metrics.retrieval import (
    RetrievalResult,
    compute_retrieval,
    mean_average_precision,
    metrics_report,
)
from audiorepro.reference import reference_retrieval_metrics
from tests.conftest import DUMPS, FIXTURES
from tests.strategies import dumps, relevance_dumps

POLICIES = st.sampled_from(["pessimistic", "optimistic"])
V1_DUMPS = [p for p in DUMPS if "text_to_audio" in np.load(p).files]


def _csr_twin(d: Dump) -> Dump:
    """The same dump with its relevance written as CSR (format version 2)."""
    return make_dump(
        d.audio_embeds,
        d.text_embeds,
        relevance_indptr=d.relevance.indptr,
        relevance_indices=d.relevance.indices,
        audio_ids=d.audio_ids,
        captions=d.captions,
        meta=d.meta,
        source=d.source,
        sha256=d.sha256,
    )


def _general(d: Dump, chunk_rows: int | None = None) -> RetrievalResult:
    """Both directions through the general engine, whatever the relevance."""
    rel, rel_t = d.relevance, d.relevance.transpose()
    a2t, _ = exact_relevance_counts(
        d.audio_embeds, d.text_embeds, rel.indptr, rel.indices, chunk_rows=chunk_rows
    )
    t2a, _ = exact_relevance_counts(
        d.text_embeds, d.audio_embeds, rel_t.indptr, rel_t.indices, chunk_rows=chunk_rows
    )
    return RetrievalResult(counts={"t2a": t2a, "a2t": a2t}, stats=ExactStats(0, 0, 0))


@given(relevance_dumps(), POLICIES, st.integers(1, 7))
def test_harness_equals_reference_under_general_relevance(
    d: dict[str, Any], policy: str, chunk_rows: int
) -> None:
    got = compute_retrieval(make_dump(**d), chunk_rows=chunk_rows).metrics(policy)  # type: ignore[arg-type]
    want = reference_retrieval_metrics(
        d["audio_embeds"],
        d["text_embeds"],
        relevance_indptr=d["relevance_indptr"],
        relevance_indices=d["relevance_indices"],
        tie_policy=policy,
    )
    assert got == want  # the rounding rule makes both bit-identical


@given(dumps(), st.integers(1, 7))
def test_general_engine_gives_the_one_pass_counts(d: dict[str, Any], chunk_rows: int) -> None:
    """On one-clip-per-caption relevance both engines give the same counts, entry by entry
    (ties, tied pairs and entry order included)."""
    t2a, a2t, _ = exact_rank_counts(d["audio_embeds"], d["text_embeds"], d["text_to_audio"])
    general = _general(make_dump(**d), chunk_rows).counts
    for name, one in (("t2a", t2a), ("a2t", a2t)):
        for f in ("ptr", "greater", "equal", "tied", "relevant"):
            assert np.array_equal(getattr(one, f), getattr(general[name], f)), (name, f)


@given(dumps())
def test_csr_twin_of_a_random_dump_is_identical(d: dict[str, Any]) -> None:
    v1 = make_dump(**d)
    twin = _csr_twin(v1)
    a, b, c = compute_retrieval(v1), compute_retrieval(twin), _general(twin)
    for policy in ("pessimistic", "optimistic"):
        assert a.metrics(policy) == b.metrics(policy) == c.metrics(policy)  # type: ignore[arg-type]
    assert a.ties() == b.ties() == c.ties()


@pytest.mark.parametrize("path", V1_DUMPS, ids=[p.stem for p in V1_DUMPS])
def test_csr_twin_of_a_fixture_gives_its_metrics_to_the_last_bit(path: Path) -> None:
    v1 = load_dump(path)
    twin = _csr_twin(v1)
    assert twin.format_version == 2 and twin.text_to_audio is None
    one, general = compute_retrieval(v1), _general(twin)
    for policy in ("pessimistic", "optimistic"):
        want = one.metrics(policy)  # type: ignore[arg-type]
        assert general.metrics(policy) == want  # type: ignore[arg-type]
        assert compute_retrieval(twin).metrics(policy) == want  # type: ignore[arg-type]
    assert general.ties() == one.ties()
    report = metrics_report(twin, compute_retrieval(twin))
    assert report.pop("format_version") == 2  # type: ignore[misc]
    assert report == metrics_report(v1, one)
    for profile in ("trec", "dcase"):
        assert compute_profile(twin, profile).metrics == compute_profile(v1, profile).metrics


@given(relevance_dumps(), st.randoms(use_true_random=False))
def test_permuting_clips_and_texts_changes_nothing(d: dict[str, Any], rnd: Any) -> None:
    dump = make_dump(**d)
    n, m = dump.n_clips, dump.n_captions
    clip_perm, text_perm = list(range(n)), list(range(m))
    rnd.shuffle(clip_perm)
    rnd.shuffle(text_perm)
    new_text = np.argsort(text_perm)  # old text row -> new row
    rel = dump.relevance
    rows = [
        sorted(new_text[rel.indices[rel.indptr[j] : rel.indptr[j + 1]]].tolist()) for j in clip_perm
    ]
    indptr = np.cumsum([0, *map(len, rows)])
    permuted = make_dump(
        d["audio_embeds"][clip_perm],
        d["text_embeds"][text_perm],
        relevance_indptr=indptr,
        relevance_indices=[i for r in rows for i in r],
    )
    a, b = compute_retrieval(dump), compute_retrieval(permuted)
    for policy in ("pessimistic", "optimistic"):
        assert a.metrics(policy) == b.metrics(policy)  # type: ignore[arg-type]
    assert a.ties() == b.ties()


def test_thread_count_and_chunks_change_nothing_under_general_relevance() -> None:
    rng = np.random.default_rng(7)
    n_classes, per = 40, 15
    centers = rng.standard_normal((n_classes, 24)).astype(np.float32)
    label = np.arange(n_classes * per) % n_classes
    audio = (centers[label] + 2 * rng.standard_normal((len(label), 24))).astype(np.float32)
    audio[5] = audio[17]  # a duplicated clip of another class: exact ties
    indptr = np.arange(len(label) + 1)
    d = make_dump(audio, centers, relevance_indptr=indptr, relevance_indices=label)
    try:
        kernels.set_threads(1)
        one = compute_retrieval(d, chunk_rows=7)
        kernels.set_threads(4)
        many = compute_retrieval(d)
    finally:
        kernels.set_threads(None)
    assert one.metrics() == many.metrics() and one.ties() == many.ties()
    assert one.stats.exact > 0  # the duplicated clip forced exact decisions
    # a2t: each clip's prompt against the 39 others; t2a: each prompt's 15 clips against 585.
    assert one.stats.comparisons == len(label) * (n_classes - 1) + n_classes * per * (
        len(label) - per
    )


def test_class_prompt_by_hand() -> None:
    """Prompt 0 is relevant to clips 0 and 1; clip 2 (not relevant) has clip 1's vector."""
    audio = np.array([[1.0, 0.0], [0.5, 0.5], [0.5, 0.5], [0.0, 1.0]])
    text = np.array([[1.0, 0.0], [0.0, 1.0]])
    # clip 0 -> prompt 0; clip 1 -> prompt 0; clip 2 -> prompt 1; clip 3 -> prompt 1
    d = make_dump(audio, text, relevance_indptr=[0, 1, 2, 3, 4], relevance_indices=[0, 0, 1, 1])
    r = compute_retrieval(d)
    # Prompt 0 scores clip 0 (1.0), clips 1 and 2 (0.5, tied), clip 3 (0.0). Relevant: 0, 1.
    assert r.ranking("t2a", "optimistic").pos.tolist()[:2] == [1, 2]
    assert r.ranking("t2a", "pessimistic").pos.tolist()[:2] == [1, 3]
    # Prompt 1 scores clip 3 (1.0), clips 1, 2 (0.5), clip 0 (0). Relevant: 2, 3.
    assert r.ranking("t2a", "optimistic").pos.tolist()[2:] == [1, 2]
    assert r.ranking("t2a", "pessimistic").pos.tolist()[2:] == [1, 3]
    opt, pes = r.metrics("optimistic")["t2a"], r.metrics("pessimistic")["t2a"]
    assert opt["map"] == 1.0 and pes["map"] == 5 / 6  # (1/1 + 2/3) / 2, rounded once
    assert opt["r@1"] == pes["r@1"] == 1.0  # a relevant clip is first either way
    assert pes["recall@1"] == 0.5 and pes["recall@5"] == 1.0
    assert pes["mean_rank"] == pes["median_rank"] == 1.0
    assert mean_average_precision(r.ranking("t2a", "pessimistic")) == pes["map"]
    assert r.ties()["t2a"]["queries_affected"] == 2


def test_the_classes_fixture_is_version_2_with_ties_in_both_directions() -> None:
    d = load_dump(FIXTURES / "dumps" / "synthetic_classes.npz")
    assert d.format_version == 2 and d.multi_positive and d.captions_per_clip is None
    assert int(d.relevance.clips_per_text.max()) > 1 and int(d.relevance.texts_per_clip.max()) > 1
    r = compute_retrieval(d)
    ties = r.ties()
    assert ties["t2a"]["queries_affected"] > 0 and ties["a2t"]["queries_affected"] > 0
    assert r.stats.exact > 0


@pytest.mark.parametrize("profile", ["laion-clap", "dcase"])
def test_one_clip_profiles_refuse_a_text_with_several_clips(profile: str) -> None:
    d = load_dump(FIXTURES / "dumps" / "synthetic_classes.npz")
    with pytest.raises(UserError, match="relevant to several clips") as exc:
        compute_profile(d, profile)
    assert "\n" not in str(exc.value) and "relevance_indices" in str(exc.value)


def test_metrics_cli_on_a_relevance_dump(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from audiorepro.cli import main

    path = FIXTURES / "dumps" / "synthetic_classes.npz"
    assert main(["metrics", str(path), "--json", str(tmp_path / "m.json")]) == 0
    assert "9 texts" in capsys.readouterr().out
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["format_version"] == 2
    assert doc["metrics"] == compute_retrieval(load_dump(path)).metrics()
    assert main(["metrics", str(path), "--profile", "dcase"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "relevant to several clips" in err
    assert main(["parity", str(path)]) == 0


def _class_study(tmp_path: Path, profiles: list[str]) -> Path:
    """One cell over the class-relevance fixture; its published values are the independent
    reference's (not the harness's)."""
    import hashlib
    import shutil

    dump = tmp_path / "classes.npz"
    shutil.copy(FIXTURES / "dumps" / "synthetic_classes.npz", dump)
    d = load_dump(dump)
    ref = reference_retrieval_metrics(
        d.audio_embeds,
        d.text_embeds,
        relevance_indptr=np.load(dump)["relevance_indptr"],
        relevance_indices=np.load(dump)["relevance_indices"],
    )
    values = {f"{k}/{m}": ref[k][m] for k in ("t2a", "a2t") for m in ("r@1", "map", "mean_rank")}
    lines = [
        'schema = "audiorepro.study/1"',
        'name = "classes"',
        "[[cell]]",
        'id = "classes"',
        'model = "synthetic"',
        'dataset = "synthetic-classes"',
        'dump = "classes.npz"',
        f'sha256 = "{hashlib.sha256(dump.read_bytes()).hexdigest()}"',
        "profiles = [" + ", ".join(f'"{p}"' for p in profiles) + "]",
        "[[published]]",
        'cell = "classes"',
        "tolerance = 0.0",
        'provenance = "the reference implementation, on the fixture"',
        "values = { " + ", ".join(f'"{k}" = {v!r}' for k, v in values.items()) + " }",
    ]
    path = tmp_path / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_study_on_a_relevance_dump_passes_with_its_reference_values(tmp_path: Path) -> None:
    import gzip
    import json

    from audiorepro.cli import main

    out = tmp_path / "out"
    assert (
        main(["reproduce", str(_class_study(tmp_path, ["canonical", "trec"])), "--out", str(out)])
        == 0
    )
    verification = json.loads((out / "verification.json").read_text())
    assert verification["golden"]["counts"]["PASS"] == 6 and verification["metric_parity_passed"]
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    (cell,) = bundle["cells"]
    assert cell["n_captions"] == 9 and cell["profiles"]["trec"]


def test_a_study_asking_a_one_clip_profile_of_class_relevance_fails_its_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from audiorepro.cli import main

    out = tmp_path / "out"
    assert (
        main(["reproduce", str(_class_study(tmp_path, ["canonical", "dcase"])), "--out", str(out)])
        == 1
    )
    failures = json.loads((out / "verification.json").read_text())["failures"]
    assert any("dcase profile" in f and "several clips" in f for f in failures), failures
    assert "Traceback" not in capsys.readouterr().err

"""Queries without a relevant item (issue 29, item 3): refused by default with a line that
names ``--empty-queries``; accepted under ``skip`` (left out of every mean) or ``zero``
(counted as 0), harness and reference bit for bit, the policy recorded in the output."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.dump import load_dump, make_dump, save_dump
from audiorepro.metrics.retrieval import compute_retrieval, metrics_report
from audiorepro.reference import reference_retrieval_metrics
from tests.strategies import dumps, relevance_dumps

POLICIES = st.sampled_from(["skip", "zero"])
TIES = st.sampled_from(["pessimistic", "optimistic"])
CUTOFFS = st.sampled_from([None, (1,), (1, 2, 5)])
RANK_MEASURES = ("mean_rank", "median_rank")


@st.composite
def empty_dumps(draw: Any) -> dict[str, Any]:
    """Dumps with queries without a relevant item in either direction: a version-1 dump with
    clips that no caption describes, or a relevance dump with relevance pairs dropped (clips
    without a text, texts relevant to no clip), at least one pair left."""
    if draw(st.booleans()):
        d = dict(draw(dumps()))
        t2a = d["text_to_audio"]
        n = len(d["audio_embeds"])
        extra = draw(st.integers(1, 3))  # clips no caption describes, anywhere in the order
        pad = draw(st.lists(st.integers(-4, 4), min_size=extra, max_size=extra))
        rows = np.array([[v / 4] * d["audio_embeds"].shape[1] for v in pad])
        d["audio_embeds"] = np.concatenate(
            [d["audio_embeds"], rows.astype(d["audio_embeds"].dtype)]
        )
        perm = np.array(draw(st.permutations(range(n + extra))))
        d["audio_embeds"] = d["audio_embeds"][perm]
        d["text_to_audio"] = np.argsort(perm)[t2a]
        return d
    d = dict(draw(relevance_dumps()))
    ptr, idx = d["relevance_indptr"], d["relevance_indices"]
    keep = np.array(draw(st.lists(st.booleans(), min_size=len(idx), max_size=len(idx))), bool)
    keep[draw(st.integers(0, len(idx) - 1))] = True
    clip = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    d["relevance_indptr"] = np.concatenate(
        [[0], np.cumsum(np.bincount(clip[keep], minlength=len(ptr) - 1))]
    )
    d["relevance_indices"] = idx[keep]
    return d


def _reference(d: dict[str, Any], policy: str, ties: str, cutoffs: Any) -> Any:
    return reference_retrieval_metrics(
        d["audio_embeds"],
        d["text_embeds"],
        d.get("text_to_audio"),
        relevance_indptr=d.get("relevance_indptr"),
        relevance_indices=d.get("relevance_indices"),
        tie_policy=ties,
        cutoffs=cutoffs,
        empty_queries=policy,
    )


@given(empty_dumps(), POLICIES, TIES, CUTOFFS)
def test_harness_equals_reference_with_empty_queries(
    d: dict[str, Any], policy: Any, ties: Any, cutoffs: Any
) -> None:
    got = compute_retrieval(make_dump(**d, empty_queries=policy)).metrics(ties, cutoffs)
    assert got == _reference(d, policy, ties, cutoffs)


@given(empty_dumps(), TIES)
def test_zero_is_skip_scaled_by_the_share_of_queries_with_a_relevant_item(
    d: dict[str, Any], ties: Any
) -> None:
    skip = compute_retrieval(make_dump(**d, empty_queries="skip"))
    zero = compute_retrieval(make_dump(**d, empty_queries="zero"))
    for direction, n_total in (("t2a", len(d["text_embeds"])), ("a2t", len(d["audio_embeds"]))):
        share = (n_total - skip.n_empty(direction)) / n_total
        s, z = skip.metrics(ties, (1, 3))[direction], zero.metrics(ties, (1, 3))[direction]
        for name in s:
            want = s[name] if name in RANK_MEASURES else s[name] * share
            assert z[name] == pytest.approx(want, rel=1e-12, abs=1e-15), (direction, name)


@given(dumps(), POLICIES, TIES)
def test_a_policy_changes_nothing_without_empty_queries(
    d: dict[str, Any], policy: Any, ties: Any
) -> None:
    plain, with_policy = make_dump(**d), make_dump(**d, empty_queries=policy)
    a, b = compute_retrieval(plain), compute_retrieval(with_policy)
    assert a.metrics(ties, (1, 4)) == b.metrics(ties, (1, 4))
    assert a.ties() == b.ties()
    report = metrics_report(with_policy, b)
    assert report["empty_queries"] == {"policy": policy, "t2a": 0, "a2t": 0}
    assert "empty_queries" not in metrics_report(plain, a)


# Clip 1 has no caption; captions 0 and 1 describe clip 0, caption 2 clip 2.
AUDIO = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
TEXT = np.array([[1.0, 0.0], [0.75, 0.25], [0.0, 1.0]])
T2A = np.array([0, 0, 2])


def test_by_hand() -> None:
    """a2t: clip 0 finds its captions at 1 and 2; clip 1 has none; clip 2 scores every
    caption 0.5, so pessimistic puts caption 2 at 3. t2a: every caption finds its clip first
    but caption 2 (clip 1 scores 1.0 > 0.5: position 2)."""
    skip = compute_retrieval(make_dump(AUDIO, TEXT, T2A, empty_queries="skip")).metrics()
    zero = compute_retrieval(make_dump(AUDIO, TEXT, T2A, empty_queries="zero")).metrics()
    assert skip["a2t"]["r@1"] == 1 / 2 and zero["a2t"]["r@1"] == 1 / 3
    assert skip["a2t"]["mrr"] == (1 + 1 / 3) / 2 and zero["a2t"]["mrr"] == (1 + 1 / 3) / 3
    assert skip["a2t"]["mean_rank"] == zero["a2t"]["mean_rank"] == 2.0
    assert skip["t2a"] == zero["t2a"]  # every caption has its clip
    assert skip["t2a"]["r@1"] == 2 / 3


def _files(tmp_path: Path) -> tuple[Path, Path]:
    v1, v2 = tmp_path / "v1.npz", tmp_path / "v2.npz"
    save_dump(v1, make_dump(AUDIO, TEXT, T2A, empty_queries="skip"))
    save_dump(
        v2,
        make_dump(
            AUDIO,
            TEXT,
            relevance_indptr=[0, 1, 1, 2],
            relevance_indices=[0, 2],
            empty_queries="zero",
        ),
    )
    return v1, v2


def test_refused_by_default_with_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, v2 = _files(tmp_path)
    for path, key, what in (
        (v1, "text_to_audio", "clip 1 no caption"),
        (v2, "relevance_indptr", "clip 1 no relevant text"),
    ):
        for command in (["metrics", str(path)], ["parity", str(path)]):
            assert main(command) == 2
            err = capsys.readouterr().err.strip()
            assert "\n" not in err and "Traceback" not in err
            assert f"key '{key}'" in err and what in err and "--empty-queries skip|zero" in err
    with pytest.raises(UserError, match=r"relevant to no clip.*--empty-queries"):
        make_dump(AUDIO, TEXT, relevance_indptr=[0, 1, 2, 3], relevance_indices=[0, 0, 2])


def test_cli_records_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, v2 = _files(tmp_path)  # clip 1 has no text; text 1 is relevant to no clip
    out, par = tmp_path / "m.json", tmp_path / "p.json"
    assert (
        main(["metrics", str(v2), "--empty-queries", "zero", "--k", "1,2", "--json", str(out)]) == 0
    )
    assert "queries without a relevant item: t2a 1, a2t 1; policy zero" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["empty_queries"] == {"policy": "zero", "t2a": 1, "a2t": 1}
    want = _reference(
        {"audio_embeds": AUDIO, "text_embeds": TEXT, "relevance_indptr": [0, 1, 1, 2],
         "relevance_indices": [0, 2]}, "zero", "pessimistic", (1, 2),
    )  # fmt: skip
    assert report["metrics"] == want
    assert main(["parity", str(v2), "--empty-queries", "skip", "--json", str(par)]) == 0
    cell = json.loads(par.read_text())["metric_parity"]["cells"][0]
    assert cell["empty_queries"] == "skip" and cell["passed"]


def test_policy_only_for_the_canonical_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, _ = _files(tmp_path)
    assert main(["metrics", str(v1), "--empty-queries", "skip", "--profile", "trec"]) == 2
    assert "'--empty-queries'" in capsys.readouterr().err
    assert main(["metrics", str(v1), "--empty-queries", "none"]) == 2


def test_no_pair_at_all_is_refused_even_with_a_policy() -> None:
    with pytest.raises(UserError, match=r"relevance_indices.*is empty"):
        make_dump(AUDIO, TEXT, relevance_indptr=[0, 0, 0, 0], relevance_indices=np.zeros(0, int),
                  empty_queries="skip")  # fmt: skip
    with pytest.raises(UserError, match="empty_queries"):
        make_dump(AUDIO, TEXT, T2A, empty_queries="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no relevant item and no policy"):
        reference_retrieval_metrics(AUDIO, TEXT, T2A)


def test_load_dump_takes_the_policy(tmp_path: Path) -> None:
    v1, _ = _files(tmp_path)
    assert load_dump(v1, empty_queries="zero").empty_queries == "zero"
    with pytest.raises(UserError, match="no caption"):
        load_dump(v1)


def _study(tmp_path: Path, policy: str | None, values: dict[str, float], profile: str = "") -> Path:
    _, v2 = _files(tmp_path)
    sha = hashlib.sha256(v2.read_bytes()).hexdigest()
    lines = [
        'schema = "audiorepro.study/1"',
        'name = "empty"',
        "k = [1, 2]",
        *([f'empty_queries = "{policy}"'] if policy else []),
        *([f'profiles = ["canonical", "{profile}"]'] if profile else []),
        "[[cell]]",
        'id = "sparse"',
        'model = "synthetic"',
        'dataset = "sparse"',
        'dump = "v2.npz"',
        f'sha256 = "{sha}"',
        "[[published]]",
        'cell = "sparse"',
        "tolerance = 1e-12",
        'provenance = "the reference implementation"',
        "values = { " + ", ".join(f'"{n}" = {v!r}' for n, v in values.items()) + " }",
    ]
    path = tmp_path / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _v2_reference(policy: str) -> Any:
    d = {"audio_embeds": AUDIO, "text_embeds": TEXT, "relevance_indptr": [0, 1, 1, 2],
         "relevance_indices": [0, 2]}  # fmt: skip
    return _reference(d, policy, "pessimistic", (1, 2))


@pytest.mark.parametrize("policy", ["skip", "zero"])
def test_a_study_applies_and_records_its_policy(tmp_path: Path, policy: str) -> None:
    ref = _v2_reference(policy)
    out = tmp_path / "out"
    study = _study(tmp_path, policy, {"a2t/r@1": ref["a2t"]["r@1"], "t2a/ndcg": ref["t2a"]["ndcg"]})
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    assert bundle["study"]["empty_queries"] == policy
    assert bundle["cells"][0]["metrics"] == ref
    verification = json.loads((out / "verification.json").read_text())
    assert verification["golden"]["counts"]["PASS"] == 2
    (cell,) = verification["metric_parity"]["cells"]
    assert cell["empty_queries"] == policy and cell["passed"]


def test_a_study_without_a_policy_refuses_such_a_dump(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert (
        main(["reproduce", str(_study(tmp_path, None, {"a2t/r@1": 0.5})), "--out", str(out)]) == 1
    )
    verification = json.loads((out / "verification.json").read_text())
    assert any("--empty-queries" in f for f in verification["failures"]), verification["failures"]


def test_a_study_policy_with_a_peer_profile_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study(tmp_path, "skip", {"a2t/r@1": 0.5}, profile="trec")
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cell[0].profiles" in err and "empty_queries" in err
    study.write_text(study.read_text().replace('empty_queries = "skip"', 'empty_queries = "drop"'))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out2")]) == 2
    assert "empty_queries" in capsys.readouterr().err

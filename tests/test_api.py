"""The Python API (`import audiorepro`): the same numbers and verdicts as the command line."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

import audiorepro
import audiorepro.api as api
from audiorepro.cli import main
from audiorepro.formats.dump import load_dump
from tests.conftest import FIXTURES
from tests.test_outputs_folder import _study

DUMPS = sorted((FIXTURES / "dumps").glob("*.npz"))


def test_the_package_exports_exactly_the_api() -> None:
    assert sorted(audiorepro.__all__) == sorted(["__version__", *api.__all__])
    for name in api.__all__:
        obj = getattr(audiorepro, name)
        assert obj is getattr(api, name)
        assert inspect.getdoc(obj), f"{name} has no docstring"
    with pytest.raises(AttributeError):
        _ = audiorepro.no_such_name  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.stem)
def test_retrieval_metrics_equal_the_cli_json(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    assert main(["metrics", str(path), "--json", str(out)]) == 0
    cli = json.loads(out.read_text())
    got = audiorepro.retrieval_metrics(load_dump(path)).to_dict()
    assert json.loads(json.dumps(got)) == cli


def test_arrays_and_relevance_lists_give_the_dump_numbers() -> None:
    dump = load_dump(FIXTURES / "dumps" / "synthetic_ties.npz")
    from_dump = audiorepro.retrieval_metrics(dump)
    from_arrays = audiorepro.retrieval_metrics(
        dump.audio_embeds, dump.text_embeds, text_to_audio=dump.text_to_audio
    )
    per_clip = [np.flatnonzero(dump.text_to_audio == c).tolist() for c in range(dump.n_clips)]
    from_lists = audiorepro.retrieval_metrics(
        dump.audio_embeds, dump.text_embeds, relevance=per_clip
    )
    assert from_dump.metrics == from_arrays.metrics == from_lists.metrics
    assert from_dump.bounds == from_arrays.bounds and from_dump.bounds, "the ties dump has ties"


def test_score_metrics_of_the_score_matrix_equal_the_embedding_metrics() -> None:
    dump = load_dump(FIXTURES / "dumps" / "synthetic_ties.npz")
    scores = dump.text_embeds.astype(np.float64) @ dump.audio_embeds.astype(np.float64).T
    t2a = audiorepro.score_metrics(scores, [[int(c)] for c in dump.text_to_audio])
    expected = audiorepro.retrieval_metrics(dump)
    for p in ("optimistic", "pessimistic"):
        assert (
            audiorepro.score_metrics(
                scores, [[int(c)] for c in dump.text_to_audio], tie_policy=p
            ).metrics
            == audiorepro.retrieval_metrics(dump, tie_policy=p).metrics["t2a"]
        )
    assert t2a.bounds == expected.bounds["t2a"]
    assert t2a.to_dict()["bounds"] == {k: list(v) for k, v in expected.bounds["t2a"].items()}


def test_parity_and_explain() -> None:
    dump = load_dump(FIXTURES / "dumps" / "synthetic_5cap.npz")
    result = audiorepro.parity(dump)
    assert result.passed and result.worst_abs_delta <= 1e-9
    assert result.to_dict()["rows"]
    report = audiorepro.explain(dump).to_dict()
    assert set(report["directions"]) == {"t2a", "a2t"}


def test_bad_arrays_raise_the_one_line_user_error() -> None:
    e = np.eye(2, dtype=np.float32)
    with pytest.raises(audiorepro.UserError, match="exactly one of"):
        audiorepro.retrieval_metrics(e, e)
    with pytest.raises(audiorepro.UserError, match="text_to_audio"):
        audiorepro.retrieval_metrics(e, e, text_to_audio=[0, 5])
    with pytest.raises(audiorepro.UserError, match="tie_policy"):
        audiorepro.score_metrics([[1.0]], [[0]], tie_policy="random")  # type: ignore[arg-type]
    dump = load_dump(FIXTURES / "dumps" / "synthetic_5cap.npz")
    with pytest.raises(audiorepro.UserError, match="not both"):
        audiorepro.parity(dump, e)


def test_reproduce_then_verify_a_folder(tmp_path: Path) -> None:
    study = _study(tmp_path)
    runs = audiorepro.reproduce(study, tmp_path / "out")
    assert [r.to_dict()["passed"] for r in runs] == [True]
    assert (tmp_path / "out" / "report.html").is_file()
    verdict = audiorepro.verify(tmp_path / "out")
    assert verdict.passed and verdict.to_dict()["passed"]
    (tmp_path / "out" / "report.html").write_text("edited")
    assert not audiorepro.verify(tmp_path / "out").passed
    (tmp_path / "out" / "verification.json").write_text("{}")
    with pytest.raises(audiorepro.UserError, match=r"verification\.json"):
        audiorepro.verify(tmp_path / "out")


def test_verify_a_study_file(tmp_path: Path) -> None:
    assert audiorepro.verify(_study(tmp_path)).passed
    assert not audiorepro.verify(_study(tmp_path, value=0.5)).passed

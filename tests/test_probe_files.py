"""Saved measurement files read as they are: key paths, unknown keys kept and listed, JSONL.

The shapes of ``docs/measurements.md`` are what the tables read; a real pipeline writes more
(the published probe module's ``per_family``, ``rho``, ``confusion``, ``folds``...). These
files are data: their unknown keys are kept, listed per file as unused, and addressable by a
key path; a key the shapes know, or a key path a study reads, is still checked (exit 2)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.keypath import KeyPathError, format_path, locate, parse
from audiorepro.runner.kinds.probe.measurements import read_measurements
from tests.test_probe_saved import _held_out, _saved_study, _sha

#: what the published module's held-out and adapter files hold beyond the shapes
EXTRA_HELD_OUT = {"protocol": "flash test", "per_score_extra": [{"score": "x", "v": 1}]}
ADAPTER = {
    "metrics": {
        "accuracy": 0.5,
        "n": 12,
        "accuracy_actor_bootstrap_95ci": [0.4, 0.6],
        "per_class": [{"class": "angry", "support": 6, "recall": 0.5, "precision": 0.75}],
        "confusion": {"angry": {"angry": 3, "sad": 3}, "sad": {"angry": 3, "sad": 3}},
    },
    "classes": ["angry", "sad"],
    "protocol": "nested actor-disjoint MLP",
    "parameters": 12742,
    "folds": [{"fold": 0, "outer_accuracy": 0.5, "trials": [{"lr": 0.001, "epochs": 20}]}],
}
PUBLIC = {
    "emolia-emo": {
        "repo_min_2_raters": {
            "n": 5,
            "mean_prompt_spearman": 0.3,
            "per_family": [{"family": "joy", "n": 5, "mean_prompt_rho": 0.3}],
            "per_prompt": [{"prompt": "joy | 2", "n": 5, "rho": 0.2, "balanced_accuracy": 0.6}],
        }
    },
    # the fixed-mapping result the module keeps inside the public file
    "crema": {
        "n": 12,
        "accuracy": 0.25,
        "per_class": [{"class": "angry", "support": 6, "recall": 0.5}],
        "confusion": {"angry": {"angry": 3}},
    },
}


def _write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "path, steps",
    [
        (
            "per_score[score=emo_anger].normalized_mae",
            ["per_score", "score=emo_anger", "normalized_mae"],
        ),
        ("[epoch=3].val_loss", ["epoch=3", "val_loss"]),
        ('burst_localization["0.5"].f1', ["burst_localization", "0.5", "f1"]),
        ("folds[0].trials[1].lr", ["folds", "0", "trials", "1", "lr"]),
    ],
)
def test_key_path_steps(path: str, steps: list[str]) -> None:
    got = [
        s.key
        if s.key is not None
        else str(s.index)
        if s.index is not None
        else f"{s.field}={s.value}"
        for s in parse(path)
    ]
    assert got == steps


@pytest.mark.parametrize("path", ["", ".a", "a..b", "a[", "a[x]", "a]b"])
def test_malformed_key_paths(path: str) -> None:
    with pytest.raises(KeyPathError):
        parse(path)


def test_locate_and_format_round_trip() -> None:
    doc = {"per_score": [{"score": "a", "n": 1}, {"score": "b", "n": 2}], "l": {"0.5": {"f1": 3}}}
    assert locate(doc, "per_score[score=b].n") == (("per_score", 1, "n"), 2)
    assert locate(doc, "per_score[1].n") == (("per_score", 1, "n"), 2)
    assert locate(doc, "l.0.5.f1") == (("l", "0.5", "f1"), 3)
    assert locate(doc, "per_score[score=c].n") is None and locate(doc, "l.f1") is None
    for where in (("per_score", 1, "n"), ("l", "0.5", "f1")):
        assert locate(doc, format_path(doc, where)) == (where, 2 if where[0] == "per_score" else 3)
    with pytest.raises(KeyPathError, match="matches 2 items"):
        locate({"x": [{"k": 1}, {"k": 1}]}, "x[k=1]")


def test_unknown_keys_are_kept_and_listed(tmp_path: Path) -> None:
    plain = read_measurements(_write(tmp_path / "a.json", _held_out(1.0)), "test")
    extra = read_measurements(
        _write(tmp_path / "b.json", {**_held_out(1.0), **EXTRA_HELD_OUT}), "test"
    )
    assert extra.shape == plain.shape and plain.unknown_paths() == []
    assert extra.unknown_paths() == ["protocol", "per_score_extra"]
    adapter = read_measurements(_write(tmp_path / "c.json", ADAPTER), "adapter_crema")
    assert adapter.shape == {
        "metrics": {"accuracy": 0.5, "balanced_accuracy": None, "macro_f1": None, "n": 12},
        "classes": ["angry", "sad"],
    }
    assert adapter.unknown_paths() == [
        "metrics.accuracy_actor_bootstrap_95ci",
        "metrics.per_class",
        "metrics.confusion",
        "protocol",
        "parameters",
        "folds",
    ]
    public = read_measurements(_write(tmp_path / "d.json", PUBLIC), "public")
    assert set(public.shape or {}) == {"emolia-emo"}  # crema holds no benchmark cut
    assert public.unknown_paths() == [
        "emolia-emo.repo_min_2_raters.per_family",
        "emolia-emo.repo_min_2_raters.per_prompt[prompt=joy | 2].rho",
        "emolia-emo.repo_min_2_raters.per_prompt[prompt=joy | 2].balanced_accuracy",
        "crema",
    ]


@pytest.mark.parametrize(
    "doc, split, key, message",
    [
        ({**EXTRA_HELD_OUT, "frame_f1": "high"}, "test", "frame_f1", "expected a number"),
        (
            {"crema": {"per_class": [{"category": 1}]}},
            "public",
            "crema.per_class[0].category",
            "category.s name",
        ),
        (
            {"metrics": {"accuracy": float("nan")}, "folds": []},
            "adapter_x",
            "metrics.accuracy",
            "finite",
        ),
    ],
)
def test_what_the_shapes_know_is_still_checked(
    tmp_path: Path, doc: Any, split: str, key: str, message: str
) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match=message) as info:
        read_measurements(path, split)
    assert info.value.key == key and str(path) in str(info.value)


HISTORY = [{"epoch": e, "update": 10 * e, "val_loss": 1.0 / e} for e in (1, 2, 3)]


def _study_with_extras(root: Path, leader_metric: str) -> Path:
    """The saved-only study of test_probe_saved, its test files holding extra keys (hashes
    updated), a JSONL history per run, and a leader reading ``leader_metric``."""
    study = _saved_study(root)
    text = study.read_text()
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        test = folder / "test_metrics.json"
        old = _sha(test)
        doc = json.loads(test.read_text())
        test.write_text(json.dumps({**doc, **EXTRA_HELD_OUT, "n_params": len(folder.name)}))
        text = text.replace(old, _sha(test))
        history = folder / "metrics.jsonl"
        history.write_text("".join(json.dumps(h) + "\n" for h in HISTORY))
        entry = f'file = "{test.relative_to(root)}"\nsha256 = "{_sha(test)}"\n'
        text = text.replace(
            entry,
            entry
            + f'[run.metrics.history]\nfile = "{history.relative_to(root)}"\n'
            + f'sha256 = "{_sha(history)}"\n',
        )
    text = text.replace(
        "[completion]",
        f'[[leaders]]\ntask = "Extra"\nmetric = "{leader_metric}"\ndirection = "lower"\n'
        'candidates = { kind = "frozen probe" }\nbaselines = ["whisper/tuned/base"]\n\n'
        "[completion]",
    )
    study.write_text(text)
    return study


def test_a_study_reads_extra_keys_and_jsonl_by_key_path(tmp_path: Path) -> None:
    plain = _saved_study(tmp_path / "plain")
    assert main(["reproduce", str(plain), "--out", str(tmp_path / "plain-out")]) == 0
    study = _study_with_extras(tmp_path / "in", "test:n_params")
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    extra = next(t for t in bundle["task_leaders"] if t["task"] == "Extra")
    # n_params is the folder name's length: probe_tuned_a_linear (20) < probe_legacy_... (21)
    assert extra["best_candidate_run"] == "probe/tuned/a/linear"
    assert extra["best_candidate_value"] == 20
    assert extra["baselines"] == {"whisper/tuned/base": 18}
    run = bundle["runs"][0]
    # n_params is read by the leader, so not listed; the rest of the extras and the history are.
    assert run["unused"] == {
        "test": ["protocol", "per_score_extra"],
        "history": ["(the whole file)"],
    }
    copy = out / "measurements" / "probe_legacy_a_linear" / "history.jsonl"
    assert (
        copy.read_bytes()
        == (tmp_path / "in" / "probe_legacy_a_linear" / "metrics.jsonl").read_bytes()
    )
    assert "Saved keys no table used" in (out / "report.html").read_text()
    # Every other table is what the same study without extras gives.
    ours = {p.name: p.read_bytes() for p in (out / "tables").iterdir()}
    theirs = {p.name: p.read_bytes() for p in (tmp_path / "plain-out" / "tables").iterdir()}
    assert {n for n in set(ours) - set(theirs)} == {"unused_keys.csv", "unused_keys.md"} or all(
        n.startswith("unused_keys") for n in set(ours) - set(theirs)
    )
    for name in theirs:
        if not name.startswith("task_leaders"):  # ours has the Extra task too
            assert ours[name] == theirs[name], name


def test_a_history_series_by_line_selector(tmp_path: Path) -> None:
    study = _study_with_extras(tmp_path / "in", "history:[epoch=3].val_loss")
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    extra = next(t for t in bundle["task_leaders"] if t["task"] == "Extra")
    assert extra["best_candidate_value"] == pytest.approx(1 / 3)
    # The history's other lines, and the other keys of the line read, are listed.
    assert bundle["runs"][0]["unused"] == {
        "test": ["protocol", "per_score_extra", "n_params"],
        "history": ["[epoch=1]", "[epoch=2]", "[epoch=3].epoch", "[epoch=3].update"],
    }


@pytest.mark.parametrize(
    "metric, key, message",
    [
        ("test:protocol", "protocol", "expected a number"),
        ("test:per_score_extra[score=x]", "per_score_extra[score=x]", "expected a number"),
        ("history:[update=10].val_loss[", None, "cannot read key path"),
    ],
)
def test_a_key_path_to_a_non_number_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str, key: str | None, message: str
) -> None:
    study = _study_with_extras(tmp_path / "in", metric)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    if key is not None:  # the saved file and the key path in it
        assert "test_metrics.json" in err[0] and f"key '{key}'" in err[0]
    else:  # what the user wrote: the study and its key
        assert "study.toml" in err[0] and "leaders[2].metric" in err[0]
    assert not (tmp_path / "out" / "report.html").exists()


def test_a_malformed_jsonl_line_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study_with_extras(tmp_path / "in", "history:[epoch=1].val_loss")
    history = tmp_path / "in" / "probe_legacy_a_linear" / "metrics.jsonl"
    old = _sha(history)
    history.write_text(history.read_text() + '{"epoch": 4,\n')
    study.write_text(study.read_text().replace(old, _sha(history), 1))  # run[0]'s, the first
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "metrics.jsonl: key 'line 4'" in err[0]

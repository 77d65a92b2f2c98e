"""Hostile JSON (issue 24): one reader (:func:`audiorepro.core.io.parse_json`) for every JSON
file a user gives or verify reads back, so that a key given twice, a 5000-digit integer, deep
nesting or a lone surrogate is one line naming the file (and the key) in each of them, never
a silent choice (the last duplicate won: PASS or FAIL by key order) or a traceback.

The classes are edits of a valid document, run against every command that reads it, as in
:mod:`tests.test_hostile`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from tests.test_hostile import (
    _dataset_record,
    _dump_with,
    _fresh,
    _meta,
    _one_line,
    _probe_study_with_saved,
    _run,
    _valid_inputs,
)


def _first_key(text: str) -> str:
    return next(iter(json.loads(text)))


def _duplicate(text: str) -> str:
    """The first key given twice, the second time with another value (``null``)."""
    return "{" + json.dumps(_first_key(text)) + ": null, " + text.lstrip()[1:]


def _prepend(member: str) -> Callable[[str], str]:
    return lambda text: "{" + member + ", " + text.lstrip()[1:]


def _surrogate(text: str) -> str:
    """The first string value starts with a lone high surrogate (``\\ud800``)."""
    return re.sub(r'(:\s*")', lambda m: m.group(1) + "\\ud800", text, count=1)


#: Edits of a valid JSON document: name -> (edit, what stderr names besides the file).
JSON_EDITS: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "duplicate-key": (_duplicate, _first_key),
    "huge-integer": (_prepend('"zz": 1' + "0" * 5000), lambda t: "5001 digits"),
    "deep-nesting-in-a-value": (
        _prepend('"zz": ' + "[" * 5000 + "]" * 5000), lambda t: "nested",
    ),
    "lone-surrogate": (_surrogate, lambda t: "surrogate"),
}  # fmt: skip


def _edit(path: Path, case: str) -> str:
    edit, names = JSON_EDITS[case]
    text = path.read_text(encoding="utf-8")
    path.write_text(edit(text), encoding="utf-8")
    return names(text)


JSON_CASES = [
    (case, command)
    for case in sorted(JSON_EDITS)
    for command in ("reproduce", "verify", "verify-out-verification", "verify-out-manifest")
]


@pytest.mark.parametrize(("case", "command"), JSON_CASES)
def test_every_hostile_json_is_one_line_for_every_command(
    tmp_path: Path, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _fresh(tmp_path / "in")
    out = tmp_path / "out"
    if command.startswith("verify-out"):
        study, _ = _probe_study_with_saved(folder)
        assert main(["reproduce", str(study), "--out", str(out)]) == 0
        bad = out / ("verification.json" if command.endswith("verification") else "manifest.json")
        names = _edit(bad, case)
        argv, outputs = (
            ["verify", str(out), "--json", str(tmp_path / "v.json")],
            [tmp_path / "v.json"],
        )
    else:
        study, bad = _probe_study_with_saved(folder, lambda p: _edit_fixture(p, case))
        names = JSON_EDITS[case][1](_fixture_text())
        argv = ["reproduce", str(study), "--out", str(out)] if command == "reproduce" else []
        argv = argv or ["verify", str(study)]
        outputs = [out, tmp_path / ".out.staging"]
    capsys.readouterr()
    code, err = _run(argv, capsys)
    assert code == 2, err
    _one_line(err, bad.name, names)
    assert not any(p.exists() for p in outputs)


def _fixture_text() -> str:
    from tests.conftest import FIXTURES

    return (FIXTURES / "probe" / "clap-linear__crema-like__test.json").read_text(encoding="utf-8")


def _edit_fixture(path: Path, case: str) -> None:
    path.write_text(JSON_EDITS[case][0](_fixture_text()), encoding="utf-8")


@pytest.mark.parametrize("case", sorted(JSON_EDITS))
def test_a_hostile_dataset_json_is_one_line_for_extract(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dataset.json`` beside the captions (what fetch prepared) is read by extract."""
    captions, audio = _valid_inputs(_fresh(tmp_path / "in"))
    _dataset_record(captions, captions_per_clip=5)
    record = captions.parent / "dataset.json"
    names = _edit(record, case)
    out = tmp_path / "d.npz"
    argv = ["extract", "--model", "m", "--audio", str(audio), "--captions", str(captions)]
    code, err = _run([*argv, "--out", str(out)], capsys)
    assert code == 2, err
    _one_line(err, "dataset.json", names)
    assert not out.exists()


#: meta_json of a dump: name -> (its text, what stderr names).
META_CASES = {
    "duplicate-key": ('{"logit_scale": 1.0, "logit_scale": 2.0}', "logit_scale"),
    "lone-surrogate": ('{"model": "\\ud800"}', "surrogate"),
}


@pytest.mark.parametrize("case", sorted(META_CASES))
def test_a_hostile_meta_json_is_one_line(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text, names = META_CASES[case]
    dump = _dump_with(tmp_path / "d.npz", meta_json=_meta(text))
    code, err = _run(["metrics", str(dump), "--json", str(tmp_path / "m.json")], capsys)
    assert code == 2, err
    _one_line(err, "d.npz", "meta_json", names)
    assert not (tmp_path / "m.json").exists()


def test_the_one_reader_keeps_what_valid_json_says() -> None:
    """The base of the classes: ordinary documents read as :func:`json.loads` reads them."""
    from audiorepro.core.io import parse_json

    for text in ['{"a": [1, -2, 3.5e-3, null, true], "b": {"c": "\\u00e9\\ud83d\\ude00"}}', "[]"]:
        assert parse_json(text, source="x.json") == json.loads(text)
    assert parse_json("[" * 64 + "]" * 64, source="x.json") is not None
    assert np.isnan(parse_json('{"a": NaN}', source="x.json")["a"])  # a pipeline's NaN: as is

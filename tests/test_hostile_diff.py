"""Hostile inputs of ``audiorepro diff`` (and ``reproduce --against``): each is exit 2, one
line on stderr naming the file, no traceback, and nothing written."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from audiorepro.cli import main
from tests.test_outputs_folder import _study as synthetic_study


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile-diff")
    assert main(["reproduce", str(synthetic_study(tmp)), "--out", str(tmp / "out")]) == 0
    return tmp / "out"


def _bundle(run: Path) -> dict[str, object]:
    return dict(json.loads(gzip.decompress((run / "bundle.json.gz").read_bytes())))


def _gz(path: Path, doc: object) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
    return path


def _other_study(run: Path, tmp: Path) -> Path:
    shutil.copytree(run, tmp / "other")
    bundle = _bundle(run)
    bundle["study"] = {**bundle["study"], "name": "another"}  # type: ignore[dict-item]
    _gz(tmp / "other" / "bundle.json.gz", bundle)
    manifest = json.loads((tmp / "other" / "manifest.json").read_text())  # as its run wrote it
    digest = hashlib.sha256((tmp / "other" / "bundle.json.gz").read_bytes()).hexdigest()
    manifest["outputs"]["bundle.json.gz"] = digest
    (tmp / "other" / "manifest.json").write_text(json.dumps(manifest))
    return tmp / "other"


def _other_schema(run: Path, tmp: Path) -> Path:
    return _gz(tmp / "b.json.gz", {**_bundle(run), "schema": "audiorepro.bundle/9"})


def _truncated(run: Path, tmp: Path) -> Path:
    data = (run / "bundle.json.gz").read_bytes()
    (tmp / "t.json.gz").write_bytes(data[: len(data) // 2])
    return tmp / "t.json.gz"


def _probe_kind(run: Path, tmp: Path) -> Path:
    probe = {"schema": "audiorepro.probe-bundle/1", "kind": "probe", "runs": [], "leaders": []}
    return _gz(tmp / "p.json.gz", {**probe, "study": {"name": "synthetic"}})


def _not_gzip(run: Path, tmp: Path) -> Path:
    (tmp / "plain.json.gz").write_text(json.dumps(_bundle(run)))
    return tmp / "plain.json.gz"


def _no_bundle(run: Path, tmp: Path) -> Path:
    (tmp / "empty").mkdir()
    (tmp / "empty" / "manifest.json").write_text("{}")
    return tmp / "empty"


def _missing(run: Path, tmp: Path) -> Path:
    return tmp / "nowhere"


def _not_json(run: Path, tmp: Path) -> Path:
    (tmp / "x.json.gz").write_bytes(gzip.compress(b"\xff\xfe not json"))
    return tmp / "x.json.gz"


def _array(run: Path, tmp: Path) -> Path:
    return _gz(tmp / "a.json.gz", [1, 2])


def _no_cells(run: Path, tmp: Path) -> Path:
    bundle = _bundle(run)
    del bundle["cells"]
    return _gz(tmp / "c.json.gz", bundle)


def _bad_cell(run: Path, tmp: Path) -> Path:
    bundle = _bundle(run)
    bundle["cells"] = [{"id": "five", "metrics": [1, 2]}]
    return _gz(tmp / "c.json.gz", bundle)


def _bad_manifest(run: Path, tmp: Path) -> Path:
    shutil.copytree(run, tmp / "m")
    (tmp / "m" / "manifest.json").write_text("{not json")
    return tmp / "m"


def _million_numbers(run: Path, tmp: Path) -> Path:
    """Round 4 (issue 35): a few KiB of gzip holding a million numbers took diff 86 s and
    2.4 GB (the decompressed-size cap bounded nothing useful)."""
    bundle = _bundle(run)
    bundle["cells"][0]["per_query"] = [0.5] * 1_000_000  # type: ignore[index]
    path = _gz(tmp / "n.json.gz", bundle)
    assert path.stat().st_size < 16 << 10
    return path


def _huge_integer(run: Path, tmp: Path) -> Path:
    """Round 4: a 5000-digit integer (Python's int() refuses above 4300) was a traceback."""
    text = json.dumps(_bundle(run)).replace('"n_clips": ', '"n_clips": 1' + "0" * 4999 + ", "
                                            '"x": ', 1)  # fmt: skip
    path = tmp / "i.json.gz"
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return path


def _deep(run: Path, tmp: Path) -> Path:
    text = '{"zz": ' + "[" * 5000 + "]" * 5000 + ", " + json.dumps(_bundle(run))[1:]
    (tmp / "d.json.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
    return tmp / "d.json.gz"


def _manifest_huge_integer(run: Path, tmp: Path) -> Path:
    shutil.copytree(run, tmp / "mi")
    text = (tmp / "mi" / "manifest.json").read_text()
    (tmp / "mi" / "manifest.json").write_text('{"zz": 1' + "0" * 4999 + ", " + text.lstrip()[1:])
    return tmp / "mi"


def _nested_loop(run: Path, tmp: Path) -> Path:
    """Round 4 (issue 35): a nested study's folder that links back to the run was followed
    40 levels deep."""
    import hashlib

    shutil.copytree(run, tmp / "loop")
    (tmp / "loop" / "again").symlink_to(".")
    manifest = json.loads((tmp / "loop" / "manifest.json").read_text())
    sha = hashlib.sha256((run / "bundle.json.gz").read_bytes()).hexdigest()
    manifest["outputs"]["again/bundle.json.gz"] = sha
    (tmp / "loop" / "manifest.json").write_text(json.dumps(manifest))
    return tmp / "loop"


#: class -> (make the hostile B, what the one line says)
CLASSES: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    "a folder of another study": (_other_study, "of study 'another'"),
    "a bundle of another schema": (_other_schema, "schema is 'audiorepro.bundle/9'"),
    "a truncated bundle": (_truncated, "is truncated"),
    "mismatched kinds": (_probe_kind, "a probe run"),
    "a non-gzip file": (_not_gzip, "is not gzip"),
    "a directory without bundle": (_no_bundle, "holds no bundle.json.gz"),
    "a missing path": (_missing, "does not exist"),
    "gzip of no JSON": (_not_json, "is not valid JSON"),
    "a JSON array": (_array, "is a JSON list"),
    "a bundle without cells": (_no_cells, "is not a well-formed audiorepro.bundle/1 bundle"),
    "a cell of the wrong shape": (_bad_cell, "is not a well-formed audiorepro.bundle/1 bundle"),
    "a malformed manifest": (_bad_manifest, "manifest.json: is not valid JSON"),
    "a bundle of a million numbers": (_million_numbers, "more than 500000 numbers"),
    "a nested study linking back": (_nested_loop, "again: is a symbolic link"),
    "a 5000-digit integer in a bundle": (_huge_integer, "5000 digits"),
    "a bundle nested 5000 deep": (_deep, "nested more than 64 levels"),
    "a 5000-digit integer in a manifest": (_manifest_huge_integer, "5000 digits"),
}


@pytest.mark.parametrize("name", sorted(CLASSES))
@pytest.mark.parametrize("side", ["a", "b"])
def test_hostile_run_is_one_line_exit_2_and_nothing_written(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, side: str
) -> None:
    make, says = CLASSES[name]
    hostile = make(run, tmp_path)
    a, b = (hostile, run) if side == "a" else (run, hostile)
    capsys.readouterr()
    out = tmp_path / "d.json"
    assert (
        main(["diff", str(a), str(b), "--json", str(out), "--html", str(tmp_path / "d.html")]) == 2
    )
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("audiorepro: error: ") and says in err and "Traceback" not in err
    assert not out.exists() and not (tmp_path / "d.html").exists()


@pytest.mark.parametrize(
    "name",
    ["a truncated bundle", "a non-gzip file", "a missing path", "a folder of another study",
     "a bundle of another schema", "a bundle of a million numbers"],
)  # fmt: skip
def test_a_hostile_baseline_stops_reproduce_before_any_work(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    make, says = CLASSES[name]
    baseline = make(run, tmp_path)
    study = synthetic_study(tmp_path)
    capsys.readouterr()
    args = ["reproduce", str(study), "--out", str(tmp_path / "o"), "--against", str(baseline)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err
    assert not (tmp_path / "o").exists()

"""The ``linear-probe`` study kind end to end: a study over a dump and a labels file reruns
byte-identically, passes ``verify OUT``, writes prediction files that ``probe-metrics`` reads
unchanged, reproduces every fold as scikit-learn computed here, and is seen by the typed
number view and ``diff``; an extraction cell (the tiny seeded model on an ESC-50-form folder)
and ``evaluate MODEL esc50 --task linear-probe`` run through the extraction cache.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from tests.test_linear_probe import blobs, sklearn_linear_v1, write_dump, write_labels
from tests.test_number_view import _view


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_study(folder: Path, published: str = "") -> tuple[Path, Any, Any, Any]:
    """A dump of generated embeddings (9 classes, 5 folds of unequal size) and a study of
    two cells: leave one fold out with C = 1, a declared split with a grid of C. The seed is
    one where scikit-learn's grid search chooses C = 0.1 on the training folds (1-3) and
    C = 0.01 on every fold, so that a C chosen with the test folds is seen."""
    folder.mkdir(parents=True, exist_ok=True)
    x, y = blobs(seed=989, n=270, k=9, d=20, noise=2.0)
    folds = np.random.default_rng(31).integers(1, 6, len(y))
    ids = [f"{i:03d}.wav" for i in range(len(y))]
    write_dump(folder / "emb.npz", x, ids)
    write_labels(
        folder / "labels.csv", [[ids[i], f"class-{y[i]}", str(folds[i])] for i in range(len(y))]
    )
    dump, labels = _sha(folder / "emb.npz"), _sha(folder / "labels.csv")
    common = (
        f'model = "gen"\ndump = "emb.npz"\nsha256 = "{dump}"\nlabels = "labels.csv"\n'
        f'labels_sha256 = "{labels}"\n'
    )
    text = (
        'schema = "audiorepro.study/1"\nkind = "linear-probe"\nname = "lp-test"\n'
        "bootstrap = { resamples = 200, seed = 3 }\n"
        f'[[cell]]\nid = "gen/lofo"\n{common}'
        f'[[cell]]\nid = "gen/split"\n{common}'
        'protocol = { train = ["1", "2", "3"], test = ["4", "5"] }\n'
        "C_grid = [0.01, 1.0, 0.1]\n" + published
    )
    (folder / "study.toml").write_text(text)
    return folder / "study.toml", x, y, folds


def _bundle(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    return data


def _files(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "manifest.json" and "cache" not in p.parts
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any, Any, Any]:
    tmp = tmp_path_factory.mktemp("lp")
    study, x, y, folds = make_study(tmp / "study")
    out = tmp / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    return study, out, x, y, folds


def test_every_fold_is_scikit_learns_and_the_files_are_prediction_files(run: Any) -> None:
    _, out, x, y, folds = run
    cell = _bundle(out)["cells"][0]
    assert cell["id"] == "gen/lofo" and cell["protocol"] == "leave-one-fold-out"
    expected = []
    for f in sorted(set(folds.tolist())):
        tr, te = folds != f, folds == f
        expected.append(float(np.mean(sklearn_linear_v1(x[tr], y[tr], x[te]) == y[te])))
    assert [fold["accuracy"] for fold in cell["folds"]] == expected
    assert cell["mean_accuracy"] == pytest.approx(float(np.mean(expected)), abs=1e-15)
    # Each split's file is a prediction file: probe-metrics reads it unchanged.
    for fold in cell["folds"]:
        report = out / "pm.json"
        assert main(["probe-metrics", str(out / fold["predictions"]), "--json", str(report)]) == 0
        assert json.loads(report.read_text())["classification"]["accuracy"] == fold["accuracy"]
        report.unlink()
    assert cell["pooled"]["accuracy_ci_fold_bootstrap"] is not None


def _grid_search_c(x: Any, y: Any, grid: list[float]) -> float:
    """scikit-learn's own choice of C, independent of the package's: ``GridSearchCV`` over a
    ``StandardScaler`` + ``LogisticRegression`` pipeline (the scaler fitted on each inner
    training part), 5 unshuffled stratified folds, accuracy; of equal mean scores it takes the
    first C of the grid, here sorted, so the smallest (docs/linear-probe.md)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(
        StandardScaler(), LogisticRegression(solver="lbfgs", max_iter=1000, tol=1e-6)
    )
    search = GridSearchCV(
        model, {"logisticregression__C": sorted(grid)}, scoring="accuracy",
        cv=StratifiedKFold(n_splits=5, shuffle=False), refit=False,
    )  # fmt: skip
    search.fit(np.asarray(x, np.float64), y)
    return float(search.best_params_["logisticregression__C"])


def test_the_declared_split_chooses_c_on_the_training_folds_only(run: Any) -> None:
    _, out, x, y, folds = run
    cell = _bundle(out)["cells"][1]
    assert cell["probe"]["grid"] == [0.01, 0.1, 1.0]
    (fold,) = cell["folds"]
    tr, te = np.isin(folds, [1, 2, 3]), np.isin(folds, [4, 5])
    on_training_folds = _grid_search_c(x[tr], y[tr], [0.01, 0.1, 1.0])
    # The data separate the two rules: with the test folds, scikit-learn chooses another C.
    assert (on_training_folds, _grid_search_c(x, y, [0.01, 0.1, 1.0])) == (0.1, 0.01)
    assert fold["C"] == on_training_folds
    pred = sklearn_linear_v1(x[tr], y[tr], x[te], c=fold["C"])
    assert fold["accuracy"] == float(np.mean(pred == y[te]))


def test_a_rerun_is_byte_identical_and_verify_out_passes(run: Any, tmp_path: Path) -> None:
    study, out, *_ = run
    again = tmp_path / "again"
    assert main(["reproduce", str(study), "--out", str(again)]) == 0
    assert _files(again) == _files(out)
    assert main(["verify", str(out)]) == 0
    assert main(["diff", str(out), str(again)]) == 0
    verification = json.loads((out / "verification.json").read_text())
    assert verification["metric_parity_passed"] is True
    rows = verification["metric_parity"]["cells"][0]["rows"]
    assert all(r["passed"] and r["predictions_file_accuracy"] == r["accuracy"] for r in rows)


def test_a_changed_prediction_file_fails_verify_out(run: Any, tmp_path: Path) -> None:
    import shutil

    _, out, *_ = run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    fold = _bundle(copy)["cells"][0]["folds"][0]
    (copy / fold["predictions"]).write_bytes((copy / fold["predictions"]).read_bytes()[:-1] + b"\1")
    assert main(["verify", str(copy)]) == 1


def test_published_values_pass_or_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study, *_ = make_study(tmp_path / "a")
    out = tmp_path / "first"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    cell = _bundle(out)["cells"][0]
    fold1 = cell["folds"][0]["accuracy"]
    good = (
        '[[published]]\ncell = "gen/lofo"\ntolerance = 1e-12\nprovenance = "the first run"\n'
        f'values = {{ mean_accuracy = {cell["mean_accuracy"]!r}, "fold/1/accuracy" = {fold1!r} }}\n'
    )
    study, *_ = make_study(tmp_path / "b", good)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "good")]) == 0
    assert main(["verify", str(study)]) == 0
    bad = good.replace(f"mean_accuracy = {cell['mean_accuracy']!r}", "mean_accuracy = 0.01")
    study, *_ = make_study(tmp_path / "c", bad)
    capsys.readouterr()
    assert main(["reproduce", str(study), "--out", str(tmp_path / "bad")]) == 1
    assert main(["verify", str(study)]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_the_typed_view_covers_every_number(run: Any) -> None:
    _, out, *_ = run
    bundle = _bundle(out)
    view = _view("linear-probe", bundle)
    acc = view["cells/gen/lofo/folds/0/accuracy"]
    assert (acc.direction, acc.tier) == ("higher", "b")
    assert acc.identities.dump == bundle["cells"][0]["dump_sha256"]
    assert view["cells/gen/lofo/folds/0/n_test"].tier is None


def _edit_labels(folder: Path, text: str, change: Any) -> str:
    """Rewrite the labels file with ``change`` (over its rows) and give the study its hash."""
    lines = (folder / "labels.csv").read_text().splitlines()
    (folder / "labels.csv").write_text("\n".join([lines[0], *change(lines[1:])]) + "\n")
    old = text.split('labels_sha256 = "')[1][:64]
    return text.replace(old, _sha(folder / "labels.csv"))


BAD_STUDY = {
    "a wrong labels hash": (
        lambda t, d: t.replace(t.split('labels_sha256 = "')[1][:64], "0" * 64),
        "key 'cell[0].labels_sha256'",
    ),
    "labels missing a clip": (
        lambda t, d: _edit_labels(d, t, lambda rows: rows[1:]),
        "labels.csv: key 'file_name': has no row for 1 clip(s)",
    ),
    "labels of one class": (
        lambda t, d: _edit_labels(
            d, t, lambda rows: [",".join([r.split(",")[0], "same", r.split(",")[2]]) for r in rows]
        ),
        "labels.csv: key 'label': gives the clips one class",
    ),
    "a non-numeric C": (
        lambda t, d: t.replace("C_grid = [0.01, 1.0, 0.1]", 'C_grid = ["a"]'),
        "key 'cell[1].C_grid",
    ),
    "a fold on both sides": (
        lambda t, d: t.replace('test = ["4", "5"]', 'test = ["3"]'),
        "key 'cell[1].protocol'",
    ),
    "an unknown fold": (
        lambda t, d: t.replace('test = ["4", "5"]', 'test = ["9"]'),
        "labels.csv: key 'fold': has no fold '9'",
    ),
    "a bad fold column": (
        lambda t, d: t.replace("protocol = {", 'folds = "split"\nprotocol = {'),
        "labels.csv: key 'split': has no fold column 'split'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_STUDY), ids=list(BAD_STUDY))
def test_bad_study_input_is_one_line_exit_2_and_out_untouched(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, message = BAD_STUDY[case]
    study, *_ = make_study(tmp_path / "s")
    study.write_text(edit(study.read_text(), tmp_path / "s"))
    capsys.readouterr()
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and message in err, err
    assert not out.exists() or [p.name for p in out.iterdir()] == []


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")
    from audiorepro.models.tiny import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny"), seed=0, fusion=False)


def test_an_extraction_cell_and_evaluate_task_linear_probe(tiny: Path, tmp_path: Path) -> None:
    """The tiny seeded model embeds an ESC-50-form folder through the cache; the probe is
    scikit-learn's on the dump it wrote, with ESC-50's own folds; `evaluate --task
    linear-probe` writes and runs the same study."""
    from tests.test_evaluate import _esc50_form

    esc = _esc50_form(tmp_path / "data" / "esc50")
    study = tmp_path / "lp.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nkind = "linear-probe"\nname = "lp-tiny"\n'
        f'[[cell]]\nid = "tiny-hf/esc50"\nmodel = "tiny-hf"\nlabels = "{esc / "esc50.csv"}"\n'
        f'labels_sha256 = "{_sha(esc / "esc50.csv")}"\n'
        f'extract = {{ model = "tiny-hf", audio = "{esc / "audio"}", registry = "{tiny}" }}\n'
    )
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    cell = _bundle(out)["cells"][0]
    assert [f["fold"] for f in cell["folds"]] == ["1", "2"] and cell["n_clips"] == 9
    with np.load(out / cell["dump"], allow_pickle=False) as z:
        x, ids = z["audio_embeds"], z["audio_ids"].tolist()
    meta = (esc / "esc50.csv").read_text().splitlines()[1:]
    rows = {r.split(",")[0]: r.split(",") for r in meta}
    y = np.array([int(rows[i][2]) for i in ids])
    fold = np.array([int(rows[i][1]) for i in ids])
    for f in cell["folds"]:
        k = int(f["fold"])
        pred = sklearn_linear_v1(x[fold != k], y[fold != k], x[fold == k])
        assert f["accuracy"] == float(np.mean(pred == y[fold == k]))
    assert main(["verify", str(out)]) == 0
    _sharded_like_slurm(study, cell["id"], out / cell["dump"], tmp_path)
    # evaluate: the same study, written for the prepared folder.
    evaluated = tmp_path / "evaluated"
    argv = ["evaluate", "tiny-hf", str(esc), "--registry", str(tiny), "--task", "linear-probe"]
    assert main([*argv, "--out", str(evaluated)]) == 0
    again = _bundle(evaluated)["cells"][0]
    assert again["dump_sha256"] == cell["dump_sha256"]
    assert [f["accuracy"] for f in again["folds"]] == [f["accuracy"] for f in cell["folds"]]
    assert main(["verify", str(evaluated)]) == 0
    # diff of two extracted runs reads each cell's extraction meta (weights, encoder code,
    # preprocessing, software): the same command twice is identical.
    rerun = tmp_path / "rerun"
    assert main(["reproduce", str(study), "--out", str(rerun)]) == 0
    assert main(["diff", str(out), str(rerun)]) == 0


def test_the_bundled_esc50_linear_probe_study_loads_and_states_no_invented_value() -> None:
    from audiorepro.core.hashing import PLACEHOLDER
    from audiorepro.specs.study import LinearProbeStudy, load_study

    study = load_study(
        Path(__file__).parent.parent / "studies" / "esc50_linear_probe.toml", strict=False
    )
    assert isinstance(study, LinearProbeStudy)
    assert study.published == ()
    assert {c.labels_sha256 for c in study.cells} == {PLACEHOLDER}
    assert [c.extract.model for c in study.cells if c.extract] == [
        "630k-audioset-fusion-best",
        "630k-audioset-best",
    ]


def _sharded_like_slurm(study: Path, cell_id: str, local: Path, tmp_path: Path) -> None:
    """The kind's extractions as the executors see them: two array tasks (``extract-part``,
    as a Slurm array runs them) merge into the very bytes of the local extraction."""
    from audiorepro.runner.executors.slurm import SlurmOptions, sbatch_script
    from audiorepro.runner.study import study_extraction
    from audiorepro.specs.study import load_study

    extraction = study_extraction(load_study(study))
    assert extraction is not None and [c.cell for c in extraction.cells] == [cell_id]
    script = sbatch_script(extraction, tmp_path / "slurm", SlurmOptions(shards=2))
    assert script.count("extract-part") == 2
    cell = extraction.cell(cell_id)
    key, parts = cell.key(), []
    for i in range(2):
        part = tmp_path / f"p{i}.part.npz"
        argv = ["extract-part", str(study), "--cell", cell_id, "--shard", f"{i}/2"]
        assert main([*argv, "--key", key, "--out", str(part)]) == 0
        parts.append(part)
    cell.merge(parts, key, tmp_path / "merged.npz")
    assert (tmp_path / "merged.npz").read_bytes() == local.read_bytes()


def test_the_bundle_is_what_its_typed_records_declare(run: Any) -> None:
    """The bundle validates against the schema generated from its typed records (the
    classification reports, the probe's definition, the pooled report)."""
    import jsonschema

    schema = json.loads(
        (Path(__file__).parent.parent / "docs/schemas/bundle.schema.json").read_text()
    )
    bundle = _bundle(run[1])
    jsonschema.validate(bundle, {"$defs": schema["$defs"], "$ref": "#/$defs/LinearProbeBundle"})


def test_diff_of_two_runs_names_the_changed_probe_definition(
    run: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43 item 5: the second run's split cell searches another grid of C: diff gives
    every moved number of that cell with its cause, the cell's probe definition, and
    nothing of the other cell; its counts of clips and fold sizes (which no C moves) stay
    identical, and no bound is derived from the dump as if it were a retrieval dump."""
    study, out, *_ = run
    folder = tmp_path / "study"
    shutil.copytree(study.parent, folder)
    text = (folder / "study.toml").read_text()
    (folder / "study.toml").write_text(text.replace("C_grid = [0.01, 1.0, 0.1]", "C_grid = [1e-4]"))
    assert main(["reproduce", str(folder / "study.toml"), "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert main(["diff", str(out), str(tmp_path / "b"), "--json", str(tmp_path / "d.json")]) == 1
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["verdict"] == "changed, explained"
    moved = {n["path"]: n for n in doc["numbers"] if n["verdict"] != "identical"}
    assert moved and all(n["cell"] == "gen/split" for n in moved.values()), set(moved)
    assert any(p.endswith("/accuracy") for p in moved)
    assert {c for n in moved.values() for c in n["causes"]} == {"gen/split:definitions"}
    assert not any(p.rpartition("/")[2] in ("n_clips", "n_train", "n_test") for p in moved)
    assert {c["cell"]: c["verdict"] for c in doc["cells"]}["gen/lofo"] == "identical"
    (cause,) = [c for c in doc["causes"] if c["numbers"]]
    assert cause["kind"] == "definitions" and "0.0001" in cause["b"]
    assert "DEFECT" not in capsys.readouterr().out

"""The ``linear-v1`` probe: the definition against scikit-learn called here as the docs say,
the SciPy twin, ``ridge-v1``, the command ``linear-probe`` and its bad inputs.

The embeddings are drawn here from a seeded generator (class centres plus noise) that nobody
tuned: the expected numbers are never typed in, they are computed in the test.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler

from audiorepro.cli import main
from audiorepro.core.io import npz_bytes
from audiorepro.metrics.linear_probe import (
    NEAR_TIE,
    TWIN_BAND,
    choose_c,
    fit_linear_v1,
    fit_ridge_v1,
    top_two_margin,
)
from audiorepro.reference.linear_probe import reference_linear_v1, reference_ridge_v1


def blobs(seed: int, n: int, k: int, d: int, noise: float = 1.5) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    x = rng.normal(size=(k, d))[y] + noise * rng.normal(size=(n, d))
    return x.astype(np.float32), y


def sklearn_linear_v1(xtr: Any, ytr: Any, xte: Any, c: float = 1.0) -> Any:
    """The definition as docs/linear-probe.md writes it, with scikit-learn's own scaler."""
    scaler = StandardScaler().fit(np.asarray(xtr, np.float64))  # population SD, zero SD -> 1
    model = LogisticRegression(C=c, solver="lbfgs", max_iter=1000, tol=1e-6, fit_intercept=True)
    model.fit(scaler.transform(np.asarray(xtr, np.float64)), ytr)
    return model.predict(scaler.transform(np.asarray(xte, np.float64)))


def write_dump(path: Path, x: Any, ids: list[str], **extra: Any) -> None:
    arrays = {"audio_embeds": x, "audio_ids": np.asarray(ids), **extra}
    path.write_bytes(npz_bytes(arrays))


def write_labels(
    path: Path, rows: list[list[str]], header: tuple[str, ...] = ("file_name", "label", "fold")
) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


@pytest.fixture
def dump_and_labels(tmp_path: Path) -> tuple[Path, Path, Any, Any, Any]:
    x, y = blobs(seed=20261203, n=240, k=6, d=24)
    rng = np.random.default_rng(5)
    folds = rng.integers(1, 5, len(y))  # four folds of unequal size
    names = [f"c{i}" for i in range(6)]
    ids = [f"{i:04d}.wav" for i in range(len(y))]
    write_dump(tmp_path / "d.npz", x, ids, text_embeds=np.zeros((1, 24), np.float32))
    order = rng.permutation(len(y))  # the labels file in another order than the dump
    write_labels(tmp_path / "labels.csv", [[ids[i], names[y[i]], str(folds[i])] for i in order])
    return tmp_path / "d.npz", tmp_path / "labels.csv", x, y, folds


def test_the_command_gives_scikit_learns_accuracy_per_fold_and_mean(
    dump_and_labels: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump, labels, x, y, folds = dump_and_labels
    out = tmp_path / "lp.json"
    assert (
        main(["linear-probe", str(dump), "--labels", str(labels), "--C", "0.5", "--json", str(out)])
        == 0
    )
    report = json.loads(out.read_text())
    expected = []
    for f in (1, 2, 3, 4):
        tr, te = folds != f, folds == f
        expected.append(float(np.mean(sklearn_linear_v1(x[tr], y[tr], x[te], c=0.5) == y[te])))
    assert [r["fold"] for r in report["folds"]] == ["1", "2", "3", "4"]
    assert [r["accuracy"] for r in report["folds"]] == expected
    assert report["mean_accuracy"] == pytest.approx(sum(expected) / 4, abs=1e-15)
    assert report["probe"]["C"] == 0.5 and report["probe"]["definition"] == "linear-v1"
    printed = capsys.readouterr().out
    assert f"mean accuracy {report['mean_accuracy']:.4f} over 4 folds" in printed
    # Deterministic formatting: a second run writes the same bytes.
    again = tmp_path / "again.json"
    assert (
        main(
            ["linear-probe", str(dump), "--labels", str(labels), "--C", "0.5", "--json", str(again)]
        )
        == 0
    )
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize(("k", "d", "n"), [(2, 8, 150), (5, 16, 300), (12, 40, 600)])
def test_the_twin_agrees_outside_its_band(k: int, d: int, n: int) -> None:
    x, y = blobs(seed=k * 1000 + d, n=n, k=k, d=d)
    tr = np.arange(n) % 4 != 0
    fit = fit_linear_v1(x[tr], y[tr], x[~tr])
    pred, scores = reference_linear_v1(x[tr], y[tr], x[~tr])
    band = top_two_margin(scores) < TWIN_BAND
    assert np.all((np.asarray(pred) == fit.pred) | band)
    acc, twin = np.mean(fit.pred == y[~tr]), np.mean(np.asarray(pred) == y[~tr])
    assert abs(acc - twin) <= band.mean()
    # The same objective: decision values close (scikit-learn stops at tol=1e-6).
    assert np.abs(scores - fit.decision).max() < TWIN_BAND


def test_two_classes_predict_like_scikit_learn_and_labels_need_not_start_at_zero() -> None:
    x, y = blobs(seed=3, n=120, k=2, d=6)
    y = np.where(y == 1, 7, 3)
    tr = np.arange(120) % 3 != 0
    fit = fit_linear_v1(x[tr], y[tr], x[~tr])
    assert fit.classes == (3, 7)
    assert fit.pred.tolist() == sklearn_linear_v1(x[tr], y[tr], x[~tr]).tolist()


def test_blas_threads_and_feature_order_do_not_move_the_probe() -> None:
    """The observation docs/linear-probe.md states for the tier: 1 vs 2 BLAS threads and a
    permutation of the features move decision values by far less than NEAR_TIE."""
    from threadpoolctl import threadpool_limits

    x, y = blobs(seed=11, n=500, k=10, d=64)
    tr = np.arange(500) % 5 != 0
    with threadpool_limits(1):
        one = fit_linear_v1(x[tr], y[tr], x[~tr])
    with threadpool_limits(2):
        two = fit_linear_v1(x[tr], y[tr], x[~tr])
    perm = np.random.default_rng(0).permutation(64)
    permuted = fit_linear_v1(x[tr][:, perm], y[tr], x[~tr][:, perm])
    for other in (two, permuted):
        assert np.abs(other.decision - one.decision).max() < NEAR_TIE
        assert other.pred.tolist() == one.pred.tolist()


def test_the_grid_is_chosen_by_inner_stratified_folds_of_the_training_items() -> None:
    x, y = blobs(seed=8, n=200, k=4, d=30, noise=3.0)
    grid = [0.001, 0.01, 0.1, 1.0, 10.0]
    z = (x - x.mean(0)) / x.std(0)
    got = choose_c(z.astype(np.float64), y, grid)
    scores = []
    for c in grid:  # the definition, computed here
        accs = []
        for tr, te in StratifiedKFold(n_splits=5, shuffle=False).split(z, y):
            accs.append(np.mean(sklearn_linear_v1(z[tr], y[tr], z[te], c=c) == y[te]))
        scores.append(np.mean(accs))
    best = max(scores)
    assert got == min(c for c, s in zip(grid, scores, strict=True) if s == best)
    fit = fit_linear_v1(x, y, x[:5], grid=grid)
    assert fit.c == choose_c(((x - x.mean(0)) / x.std(0)).astype(np.float64), y, grid)


def test_ridge_v1_is_scikit_learns_ridge_and_the_twins() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(80, 10))
    x[:, 3] = 2.0  # a constant feature: its SD counts as 1
    y = x @ rng.normal(size=10) + 0.1 * rng.normal(size=80)
    got = fit_ridge_v1(x[:60], y[:60], x[60:], alpha=2.0)
    scaler = StandardScaler().fit(x[:60])
    expected = (
        Ridge(alpha=2.0).fit(scaler.transform(x[:60]), y[:60]).predict(scaler.transform(x[60:]))
    )
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        reference_ridge_v1(x[:60], y[:60], x[60:], alpha=2.0), got, rtol=1e-9, atol=1e-10
    )


def test_esc50_metadata_serves_as_labels_with_its_own_folds(tmp_path: Path) -> None:
    x, _ = blobs(seed=1, n=30, k=3, d=5)
    names = [f"{f}-{i}-A-{i % 3}.wav" for i, f in zip(range(30), [1, 2, 3] * 10, strict=True)]
    write_dump(tmp_path / "d.npz", x, names)
    meta = "filename,fold,target,category,esc10,src_file,take\n" + "".join(
        f"{n},{n[0]},{i % 3},{['dog', 'rain', 'sea_waves'][i % 3]},False,{i},A\n"
        for i, n in enumerate(names)
    )
    (tmp_path / "esc50.csv").write_text(meta)
    out = tmp_path / "o.json"
    assert (
        main(
            [
                "linear-probe",
                str(tmp_path / "d.npz"),
                "--labels",
                str(tmp_path / "esc50.csv"),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert report["labels"]["classes"] == ["dog", "rain", "sea waves"]
    assert [f["fold"] for f in report["folds"]] == ["1", "2", "3"]


BAD = {
    "labels miss a clip": ("missing", "labels.csv: key 'file_name': has no row for 1 clip(s)"),
    "labels name a clip the dump lacks": ("extra", "labels.csv: key 'file_name': labels 1 clip(s)"),
    "one class": ("one-class", "labels.csv: key 'label': gives the clips one class"),
    "no such fold column": ("fold-column", "labels.csv: key 'split': has no fold column 'split'"),
    "one fold": ("one-fold", "labels.csv: key 'fold': has 1 fold(s)"),
    "a non-numeric C": ("c", "'--C': is 'abc'; expected a number > 0"),
    "a negative C": ("c-neg", "'--C': is '-1'; expected a finite number > 0"),
    "a dump without audio_ids": ("no-ids", "d.npz: key 'audio_ids': is missing"),
    "an empty label": ("empty", "labels.csv: key 'row 2.label': is empty"),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fault, message = BAD[case]
    x, y = blobs(seed=2, n=40, k=2, d=4)
    ids = [f"{i}.wav" for i in range(40)]
    rows = [[ids[i], f"k{y[i]}", str(i % 4)] for i in range(40)]
    extra = {}
    if fault == "missing":
        rows = rows[1:]
    elif fault == "extra":
        rows.append(["ghost.wav", "k0", "0"])
    elif fault == "one-class":
        rows = [[r[0], "k0", r[2]] for r in rows]
    elif fault == "one-fold":
        rows = [[r[0], r[1], "0"] for r in rows]
    elif fault == "empty":
        rows[0][1] = ""
    write_labels(tmp_path / "labels.csv", rows)
    write_dump(tmp_path / "d.npz", x, ids, **extra)
    if fault == "no-ids":
        (tmp_path / "d.npz").write_bytes(npz_bytes({"audio_embeds": x}))
    args = ["linear-probe", str(tmp_path / "d.npz"), "--labels", str(tmp_path / "labels.csv")]
    args += {"fold-column": ["--folds", "split"], "c": ["--C", "abc"], "c-neg": ["--C", "-1"]}.get(
        fault, []
    )
    out = tmp_path / "out.json"
    assert main([*args, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message in err, err
    assert not out.exists()


def test_a_constant_feature_counts_sd_1_even_when_its_mean_is_rounded() -> None:
    """0.1 a hundred times has a computed SD of 2.8e-17, not 0: dividing by it made the
    feature a constant +-1 in training and 7e15 on a test value of 0.3. The definition
    decides "zero" on the values (every one equal), as scikit-learn's StandardScaler does
    for a constant feature."""
    x, y = blobs(seed=9, n=140, k=3, d=5)
    x = np.hstack([x.astype(np.float64), np.full((140, 2), 0.1)])  # 0.1 as float64
    x[100:, 5] = 0.3  # constant in the training split only
    tr = np.arange(140) < 100
    fit = fit_linear_v1(x[tr], y[tr], x[~tr])
    assert fit.pred.tolist() == sklearn_linear_v1(x[tr], y[tr], x[~tr]).tolist()
    twin, _ = reference_linear_v1(x[tr], y[tr], x[~tr])
    assert twin == fit.pred.tolist()

"""Hostile round 5 (issue 44): linear-probe and speaker-verification input, trec-eval number
reading and ``-Z``, ``evaluate`` dataset folders. Each test fails on the code before its fix.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from audiorepro.cli import main
from audiorepro.formats.c_numbers import c_atof, c_atol
from audiorepro.formats.probe_inputs import parse_labels
from audiorepro.metrics.linear_probe import fit_linear_v1, standardize
from audiorepro.reference.linear_probe import reference_linear_v1
from tests.test_evaluate import _clotho_form, _esc50_form
from tests.test_linear_probe import blobs, sklearn_linear_v1, write_dump, write_labels


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line(err: str, *names: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in lines[0], (name, err)


def _probe_study(folder: Path, fold_values: list[str], x: Any = None) -> Path:
    """A linear-probe study over generated embeddings whose fold column holds
    ``fold_values`` (clip i in fold ``fold_values[i % len]``)."""
    folder.mkdir(parents=True, exist_ok=True)
    if x is None:
        x, y = blobs(seed=44, n=90, k=3, d=6, noise=1.0)
    else:
        y = np.arange(len(x)) % 3
    ids = [f"{i:03d}.wav" for i in range(len(y))]
    write_dump(folder / "emb.npz", x, ids)
    rows = [[ids[i], f"c{y[i]}", fold_values[i % len(fold_values)]] for i in range(len(y))]
    write_labels(folder / "labels.csv", rows)
    (folder / "study.toml").write_text(
        'schema = "audiorepro.study/1"\nkind = "linear-probe"\nname = "lp"\n'
        f'[[cell]]\nid = "m"\nmodel = "gen"\ndump = "emb.npz"\n'
        f'sha256 = "{_sha(folder / "emb.npz")}"\nlabels = "labels.csv"\n'
        f'labels_sha256 = "{_sha(folder / "labels.csv")}"\n'
    )
    return folder / "study.toml"


# -- 1. file names derived from user values ------------------------------------------------


def test_fold_values_that_name_one_prediction_file_are_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: 'a b' and 'a_b' both wrote predictions/m/a_b.npz, and reproduce said PASSED.
    study = _probe_study(tmp_path / "in", ["a b", "a_b", "c"])
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 2
    _one_line(capsys.readouterr().err, "labels.csv", "'a_b'", "'a b'", "fold")
    assert not out.exists()


def test_distinct_fold_values_each_keep_their_own_prediction_file(tmp_path: Path) -> None:
    study = _probe_study(tmp_path / "in", ["a-b", "a_b", "a.b"])
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    files = sorted(p.name for p in (out / "predictions" / "m").iterdir())
    assert files == ["a-b.npz", "a.b.npz", "a_b.npz"]


def test_a_fold_value_too_long_for_a_file_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 80 four-byte letters (MATHEMATICAL BOLD A): 320 bytes; a file name holds 255.
    study = _probe_study(tmp_path / "in", ["\U0001d400" * 80, "b", "c"])
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    _one_line(capsys.readouterr().err, "labels.csv", "320 bytes")


# -- 2. linear-probe input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("folds", "order"),
    [
        (["²", "1", "2"], ["1", "2", "²"]),  # '²'.isdigit() is True, int('²') raises
        (["--3", "1", "2"], ["--3", "1", "2"]),  # '--3'.lstrip('-') is '3'
        (["10", "2", "-1"], ["-1", "2", "10"]),
    ],
)
def test_fold_values_that_look_numeric_are_ordered_without_a_crash(
    folds: list[str], order: list[str]
) -> None:
    rows = "".join(f"c{i}.wav,{'ab'[i % 2]},{folds[i % 3]}\n" for i in range(6))
    labels = parse_labels("file_name,label,fold\n" + rows, source="l.csv", fold_column="fold")
    assert list(labels.folds) == order


def test_a_labels_csv_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    study = _probe_study(tmp_path / "in", ["1", "2", "3"])
    out = tmp_path / "plain"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    labels = tmp_path / "in" / "labels.csv"
    labels.write_bytes(b"\xef\xbb\xbf" + labels.read_bytes())
    text = study.read_text()
    study.write_text(text.replace(text.split('labels_sha256 = "')[1][:64], _sha(labels)))
    bom = tmp_path / "bom"
    assert main(["reproduce", str(study), "--out", str(bom)]) == 0
    assert (bom / "predictions").exists()
    for f in ("1", "2", "3"):
        name = f"predictions/m/{f}.npz"
        assert (bom / name).read_bytes() == (out / name).read_bytes()


def _with_near_constant(x: Any, dtype: Any) -> Any:
    """``x`` with feature 0 made near-constant: 1.0 plus a few ulps (of ``dtype``)."""
    x = np.array(x, dtype=dtype)
    ulps = np.random.default_rng(7).integers(0, 4, len(x))
    x[:, 0] = np.array(1.0, dtype=dtype) + ulps * np.finfo(dtype).eps
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_standardization_treats_near_constant_features_as_standard_scaler_does(
    dtype: Any,
) -> None:
    x, _ = blobs(seed=3, n=60, k=3, d=5)
    x = _with_near_constant(x, dtype)
    x[:, 1] = 2.5  # exactly constant
    # StandardScaler itself: on the float64 copy the probe reads (a float32 dump as float64),
    # and on the array as the dump holds it (float32: float64 accumulators), the same
    # features are constant.
    x64 = np.asarray(x, np.float64)
    (z,) = standardize(x)
    np.testing.assert_allclose(z, StandardScaler().fit_transform(x64), rtol=1e-12, atol=1e-15)
    assert (StandardScaler().fit(x64).scale_ == 1.0).tolist() == (
        StandardScaler().fit(x).scale_ == 1.0
    ).tolist()
    constant = StandardScaler().fit(x).scale_ == 1.0
    # float64: a few float64 ulps is constant (before: standardized into unit-size noise);
    # float32: a few float32 ulps is far above the float64 bound, so it is not.
    assert constant.tolist() == [dtype == np.float64, True, False, False, False]
    assert (float(np.max(np.abs(z[:, 0]))) < 1e-6) == (dtype == np.float64)


def test_a_near_constant_feature_gives_scikit_learns_predictions() -> None:
    x, y = blobs(seed=11, n=120, k=2, d=3, noise=3.0)
    x = _with_near_constant(x, np.float64)
    x[:, 0] += (y * 2.0**-51).astype(np.float64)  # the near-constant feature leaks the label
    tr, te = np.arange(120) % 4 != 0, np.arange(120) % 4 == 0
    want = sklearn_linear_v1(x[tr], y[tr], x[te])
    assert fit_linear_v1(x[tr], y[tr], x[te]).pred.tolist() == want.tolist()
    twin, _ = reference_linear_v1(x[tr], y[tr], x[te], c=1.0)
    assert np.asarray(twin).tolist() == want.tolist()


@pytest.mark.parametrize("scale", [1e306, 1e-300])
def test_standardization_is_scale_free(scale: float) -> None:
    x, y = blobs(seed=5, n=90, k=3, d=4)
    x64 = np.asarray(x, np.float64)
    for got, want in zip(
        standardize(x64 * scale, x64[:5] * scale), standardize(x64, x64[:5]), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    tr = np.arange(90) % 3 != 0
    plain = fit_linear_v1(x64[tr], y[tr], x64[~tr]).pred
    assert fit_linear_v1(x64[tr] * scale, y[tr], x64[~tr] * scale).pred.tolist() == plain.tolist()
    twin, _ = reference_linear_v1(x64[tr] * scale, y[tr], x64[~tr] * scale, c=1.0)
    assert np.asarray(twin).tolist() == plain.tolist()


def test_a_study_of_features_scaled_by_1e306_gives_the_unscaled_numbers(tmp_path: Path) -> None:
    x, _ = blobs(seed=44, n=90, k=3, d=6, noise=1.0)
    plain = _probe_study(tmp_path / "plain", ["1", "2", "3"], np.asarray(x, np.float64))
    big = _probe_study(tmp_path / "big", ["1", "2", "3"], np.asarray(x, np.float64) * 1e306)
    for study, out in ((plain, tmp_path / "o1"), (big, tmp_path / "o2")):
        assert main(["reproduce", str(study), "--out", str(out)]) == 0
    for f in ("1", "2", "3"):
        name = f"predictions/m/{f}.npz"
        assert (tmp_path / "o1" / name).read_bytes() == (tmp_path / "o2" / name).read_bytes()


# -- 3. speaker-verification input -----------------------------------------------------------


def _speaker_study(folder: Path, embeds: Any, trial_lists: dict[str, str]) -> Path:
    """A speaker-verification study over a given dump: one cell per trial list (its path
    from ``folder`` -> its rows)."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"s{i // 2}_{i % 2}.wav" for i in range(len(embeds))]
    write_dump(folder / "emb.npz", np.asarray(embeds, np.float32), ids)
    text = 'schema = "audiorepro.study/1"\nkind = "speaker-verification"\nname = "sv"\n'
    for n, (rel, rows) in enumerate(trial_lists.items()):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("enrollment,test,target\n" + rows)
        text += (
            f'[[cell]]\nid = "c{n}"\nmodel = "gen"\ndump = "emb.npz"\n'
            f'sha256 = "{_sha(folder / "emb.npz")}"\ntrials = "{rel}"\n'
            f'trials_sha256 = "{_sha(folder / rel)}"\n'
        )
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


TRIALS = "s0_0.wav,s0_1.wav,1\ns0_0.wav,s1_0.wav,0\ns1_0.wav,s1_1.wav,1\ns0_1.wav,s1_1.wav,0\n"


def test_an_all_zero_embedding_in_a_trial_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.random.default_rng(1).normal(size=(4, 8))
    x[2] = 0.0  # s1_0.wav
    study = _speaker_study(tmp_path / "in", x, {"trials.csv": TRIALS})
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 2
    _one_line(capsys.readouterr().err, "emb.npz", "audio_embeds", "'s1_0.wav'", "all zero")
    assert not out.exists()


def test_two_cells_trial_lists_of_one_file_name_are_both_inputs(tmp_path: Path) -> None:
    x = np.random.default_rng(2).normal(size=(4, 8))
    other = "s0_0.wav,s0_1.wav,1\ns0_0.wav,s1_1.wav,0\n"
    study = _speaker_study(tmp_path / "in", x, {"a/trials.csv": TRIALS, "b/trials.csv": other})
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    inputs = json.loads((out / "manifest.json").read_text())["inputs"]
    assert inputs["a/trials.csv"] == _sha(tmp_path / "in" / "a" / "trials.csv")
    assert inputs["b/trials.csv"] == _sha(tmp_path / "in" / "b" / "trials.csv")


def test_a_trial_list_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    x = np.random.default_rng(3).normal(size=(4, 8))
    plain = _speaker_study(tmp_path / "plain", x, {"trials.csv": TRIALS})
    trials = tmp_path / "bom" / "trials.csv"
    trials.parent.mkdir(parents=True)
    bom = _speaker_study(tmp_path / "bom", x, {"trials.csv": TRIALS})
    trials.write_bytes(b"\xef\xbb\xbf" + trials.read_bytes())
    bom.write_text(bom.read_text().replace(_sha(plain.parent / "trials.csv"), _sha(trials)))
    eers = []
    for study, out in ((plain, tmp_path / "o1"), (bom, tmp_path / "o2")):
        assert main(["reproduce", str(study), "--out", str(out)]) == 0
        eers.append(
            json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))["cells"][0]["eer"]
        )
    assert eers[0] == eers[1]


def test_two_linear_probe_cells_labels_of_one_file_name_are_both_inputs(tmp_path: Path) -> None:
    study = _probe_study(tmp_path / "in", ["1", "2", "3"])
    labels = tmp_path / "in" / "labels.csv"
    (tmp_path / "in" / "b").mkdir()
    other = tmp_path / "in" / "b" / "labels.csv"
    other.write_text(labels.read_text().replace(",c2,", ",c1,"))
    cell = study.read_text()[study.read_text().index("[[cell]]") :]
    cell = cell.replace('id = "m"', 'id = "n"').replace('"labels.csv"', '"b/labels.csv"')
    cell = cell.replace(_sha(labels), _sha(other))
    study.write_text(study.read_text() + cell)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    inputs = json.loads((out / "manifest.json").read_text())["inputs"]
    assert inputs["labels.csv"] == _sha(labels) and inputs["b/labels.csv"] == _sha(other)


# -- 4. trec-eval numbers and -Z ----------------------------------------------------------------

LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
LIBC.atof.restype, LIBC.atof.argtypes = ctypes.c_double, [ctypes.c_char_p]
LIBC.atol.restype, LIBC.atol.argtypes = ctypes.c_long, [ctypes.c_char_p]
NUMBERS = [
    "0x10", "0x1p4", "0X1P-2", "-0x.8", "0x", "0xg", "0x1p", "0x1.8p+1x", "+0x1fffffffffffffp0",
    "0x1p99999", "0x1p-99999", "inf", "-INF", "Infinity", "infinit", "nan", "NaN(123)", "-nan",
    "nan(", " 7", "\t\n\v\f\r-2.5e1", "12abc", "1e", ".e1", ".5", "5.", "-0", "1e400", "1e-400",
    "9" * 400, "-" + "9" * 30, "00012.50e+1", "x", "", "+-1", "3..4", "1e+", "0.1e-2x",
    "123456789012345678901234567890", "٣",
]  # fmt: skip


@pytest.mark.parametrize("text", NUMBERS)
def test_numbers_are_read_as_cs_atof_and_atol_read_them(text: str) -> None:
    raw = text.encode("utf-8")
    want, got = LIBC.atof(raw), c_atof(text)
    same_sign = math.copysign(1, want) == math.copysign(1, got)
    assert (math.isnan(want) and math.isnan(got)) or (want == got and same_sign), (want, got)
    assert c_atol(text) == LIBC.atol(raw)


def _trec_binary() -> Path:
    given = os.environ.get("TREC_EVAL")
    if given:
        return Path(given)
    pytest.skip("needs $TREC_EVAL (trec_eval built from source; tests/test_trec_eval_binary.py)")


@pytest.mark.parametrize("score", ["0x1p4", "0x10", "0x1.8p1", "0x.1p8"])
def test_a_hex_score_ranks_as_in_trec_eval(
    score: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # trec_eval reads 0x1p4 as 16: the relevant document ranks first (map 1). Before: 0.
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("1 0 good 1\n1 0 bad 0\n")
    run.write_text(f"1 Q0 bad 1 1.5 r\n1 Q0 good 2 {score} r\n")
    assert main(["trec-eval", "-m", "map", str(qrels), str(run)]) == 0
    assert capsys.readouterr().out.split() == ["map", "all", "1.0000"]
    if os.environ.get("TREC_EVAL"):
        theirs = subprocess.run(
            [_trec_binary(), "-m", "map", str(qrels), str(run)], capture_output=True, check=True
        ).stdout.decode()
        assert theirs.split() == ["map", "all", "1.0000"]


def test_hex_numbers_give_trec_eval_s_whole_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trec_eval = _trec_binary()
    qrels, run, z = tmp_path / "qrels", tmp_path / "run", tmp_path / "z"
    qrels.write_text("1 0 a 0x1\n1 0 b 1\n1 0 c 2junk\n2 0 a 1\n")
    run.write_text(
        "1 Q0 a 1 0x1p-1 r\n1 Q0 b 2 0x.8p1 r\n1 Q0 c 3 0X1P0x r\n1 Q0 d 4 -0x1p2 r\n"
        "2 Q0 a 1 1e0x r\n2 Q0 b 2 0x1.0000000000001p0 r\n"
    )
    z.write_text("1 map 0x1p-2 0x1p-1\n2 map 0.25junk 5e-1\n")
    special = tmp_path / "z-special"  # trec_eval prints a NaN z-score as '   nan'
    special.write_text("1 map nan 0.5\n2 map 0x1p-2 INF\n")
    for options in (
        ["-q"],
        ["-q", "-m", "map", "-Z", str(z)],
        ["-q", "-m", "map", "-Z", str(special)],
        ["-m", "P.5,2x", "-m", "iprec_at_recall.inf,0x1p-1"],
    ):
        theirs = subprocess.run(
            [str(trec_eval), *options, str(qrels), str(run)], capture_output=True, check=True
        ).stdout.decode()
        assert main(["trec-eval", *options, str(qrels), str(run)]) == 0
        assert capsys.readouterr().out == theirs, options


def test_z_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    qrels, run, fifo = tmp_path / "qrels", tmp_path / "run", tmp_path / "z"
    qrels.write_text("1 0 a 1\n")
    run.write_text("1 Q0 a 1 1 r\n")
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "audiorepro", "trec-eval", "-Z", str(fifo), str(qrels), str(run)]
    done = subprocess.run(argv, capture_output=True, timeout=120)  # before: blocked for ever
    assert done.returncode == 2
    _one_line(done.stderr.decode(), str(fifo), "FIFO")


def test_z_refuses_a_huge_file_before_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run, z = tmp_path / "qrels", tmp_path / "run", tmp_path / "z"
    qrels.write_text("1 0 a 1\n")
    run.write_text("1 Q0 a 1 1 r\n")
    with z.open("wb") as f:  # sparse: 600 MB on paper, nothing on disk
        f.truncate(600_000_000)
    assert main(["trec-eval", "-Z", str(z), str(qrels), str(run)]) == 2
    _one_line(capsys.readouterr().err, str(z), "600000000 bytes")


# -- 5. evaluate: dataset folders a user would expect it to take -----------------------------


def _first_clip(folder: Path, frames: int, channels: int, rate: int) -> None:
    """Replace the folder's first clip by ``frames`` x ``channels`` of noise at ``rate``."""
    import soundfile

    wav = sorted((folder / "audio").glob("*.wav"))[0]
    x = np.random.default_rng(0).uniform(-0.5, 0.5, (frames, channels))
    soundfile.write(wav, x, rate, subtype="PCM_16")


#: name -> (how the folder is changed, the exit code, what the one line names when refused).
FOLDERS: dict[str, tuple[Any, int, tuple[str, ...]]] = {
    "captions-bom": (lambda f: _prefix(f / "captions.csv", b"\xef\xbb\xbf"), 0, ()),
    "caption-nul": (lambda f: _nul_caption(f / "captions.csv"), 0, ()),
    "one-sample": (lambda f: _first_clip(f, 1, 1, 48_000), 0, ()),
    "eight-channels": (lambda f: _first_clip(f, 48_000, 8, 48_000), 0, ()),
    "384-khz": (lambda f: _first_clip(f, 384_000, 1, 384_000), 0, ()),
    "1-hz": (lambda f: _first_clip(f, 10, 1, 1), 2, ("sample rate of 1 Hz", "1000 to 384000")),
}


def _prefix(path: Path, head: bytes) -> None:
    path.write_bytes(head + path.read_bytes())


def _nul_caption(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace(",", ",a\x00b ", 1)
    path.write_text("".join(lines))


@pytest.fixture(scope="module")
def tiny(tiny_models: Callable[..., Path]) -> Path:
    return tiny_models(seed=0, fusion=False)  # the run's shared ones (tests/conftest.py)


@pytest.mark.parametrize("form", ["captions", "esc50"])
@pytest.mark.parametrize("case", sorted(FOLDERS))
def test_evaluate_takes_a_dataset_folder_or_says_why_not(
    case: str, form: str, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    change, code, names = FOLDERS[case]
    if form == "esc50":
        if case.startswith("caption"):
            change = {"captions-bom": lambda f: _prefix(f / "esc50.csv", b"\xef\xbb\xbf")}.get(case)
            if change is None:
                pytest.skip("ESC-50's metadata has no captions")
        folder = _esc50_form(tmp_path / "mine")
    else:
        folder = _clotho_form(tmp_path / "mine")
    change(folder)
    out = tmp_path / "out"
    argv = ["evaluate", "tiny-hf", str(folder), "--registry", str(tiny), "--out", str(out)]
    got = main(argv)
    err = capsys.readouterr().err
    assert got == code, err
    if code == 2:
        _one_line(err, *names)
        assert not out.exists()
    else:
        assert main(["verify", str(out)]) == 0


def test_two_model_specs_never_share_a_default_output_folder() -> None:
    from audiorepro.cli.evaluate import _default_out

    assert _default_out("tiny-hf") == Path("evaluate-tiny-hf")  # a registry name: as before
    specs = ["laion:a/b.pt", "laion:a_b.pt", "laion:a b.pt", "hf:org/m@" + "0" * 40, "x" * 300]
    outs = [_default_out(s) for s in specs]
    assert len(set(outs)) == len(outs)
    assert all(len(o.name.encode()) <= 255 for o in outs)


@pytest.mark.parametrize("kind", ["linear-probe", "speaker-verification"])
def test_cell_ids_that_name_one_dump_file_are_refused_naming_both(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind == "linear-probe":
        study = _probe_study(tmp_path / "in", ["1", "2", "3"])
    else:
        x = np.random.default_rng(1).normal(size=(4, 8))
        study = _speaker_study(tmp_path / "in", x, {"trials.csv": TRIALS})
    text = study.read_text()
    cell = text[text.index("[[cell]]") :]
    first = cell.split("\n")[1]
    study.write_text(text.replace(first, 'id = "a b"', 1) + cell.replace(first, 'id = "a_b"', 1))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    _one_line(capsys.readouterr().err, "study.toml", "'a_b' and 'a b'", "cell[1].id")


def test_probe_table_names_that_slug_alike_are_refused_not_overwritten() -> None:
    """Issue 44's critical class in the probe kind: a run ``a`` with a saved file ``b_c`` and
    a run ``a_b`` with ``c`` both name the table ``panel_a_b_c``; the second used to replace
    the first's file silently. Refused, naming both tables."""
    from typing import Any, cast

    from audiorepro.core.errors import UserError
    from audiorepro.runner.kinds.probe.saved import _panel_tables

    runs = cast(
        Any,
        [
            {"id": "a", "saved": {"b_c": {"x": 1.0}}},
            {"id": "a_b", "saved": {"c": {"x": 2.0}}},
        ],
    )
    with pytest.raises(UserError) as caught:
        _panel_tables(runs, "study.toml")
    message = str(caught.value)
    assert "tables/panel_a_b_c.*" in message
    assert "'a: b_c (every recorded number)'" in message
    assert "'a_b: c (every recorded number)'" in message
    # Distinct names still give one table each.
    tables = _panel_tables(cast(Any, [runs[0], {"id": "d", "saved": {"c": {"x": 2.0}}}]), "s")
    assert sorted(tables) == ["panel_a_b_c", "panel_d_c"]

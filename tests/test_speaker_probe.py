"""A speaker-identification probe on real embeddings: resemblyzer's pretrained VoiceEncoder
(the weights its wheel ships; extra ``speech``, in the dev lock) over the espeak-ng fixture
speech set (six voices x eight sentences, ``fixtures/speech``), each sentence held out once.

Not skipped: CI installs the dev lock (resemblyzer) and these clips are committed. Every fold
is compared with scikit-learn computed here from the dump the command line wrote; the study
kind reruns byte-identically over that dump and passes ``verify OUT``; and the verification
EER of the same embeddings (the ``speech`` work's definition) is computed beside it.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.metrics.verification import equal_error_rate, speaker_trials
from tests.conftest import ROOT
from tests.test_linear_probe import sklearn_linear_v1

SPEECH = ROOT / "fixtures" / "speech"
ENCODER = "py:audiorepro.models.resemblyzer:voice_encoder"


@pytest.fixture(scope="module")
def speaker_dump(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The clips embedded by `extract` (an audio-only dump) and a labels file: the speaker,
    and the sentence as the fold (a held-out fold is a sentence no training clip says)."""
    tmp = tmp_path_factory.mktemp("speakers")
    dump = tmp / "resemblyzer.npz"
    assert main(["extract", "--model", ENCODER, "--audio", str(SPEECH), "--out", str(dump)]) == 0
    with (SPEECH / "speakers.csv").open() as f:
        rows = list(csv.DictReader(f))
    labels = tmp / "speakers.csv"
    with labels.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file_name", "label", "sentence"])
        for r in rows:
            w.writerow([r["file_name"], r["speaker"], r["file_name"].rsplit("_", 1)[1][:2]])
    return dump, labels


def _data(dump: Path, labels: Path) -> tuple[Any, Any, Any]:
    with np.load(dump, allow_pickle=False) as z:
        x, ids = z["audio_embeds"], z["audio_ids"].tolist()
    with labels.open() as f:
        rows = {r["file_name"]: r for r in csv.DictReader(f)}
    speakers = sorted({r["label"] for r in rows.values()})
    y = np.array([speakers.index(rows[i]["label"]) for i in ids])
    fold = np.array([rows[i]["sentence"] for i in ids])
    return x, y, fold


def test_speaker_id_on_resemblyzer_is_scikit_learns_per_sentence(
    speaker_dump: tuple[Path, Path], tmp_path: Path
) -> None:
    dump, labels = speaker_dump
    out = tmp_path / "lp.json"
    argv = ["linear-probe", str(dump), "--labels", str(labels), "--folds", "sentence"]
    assert main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    x, y, fold = _data(dump, labels)
    assert x.shape == (48, 256) and len(set(y.tolist())) == 6
    expected = {}
    for s in sorted(set(fold.tolist())):
        pred = sklearn_linear_v1(x[fold != s], y[fold != s], x[fold == s])
        expected[s] = float(np.mean(pred == y[fold == s]))
    assert {f["fold"]: f["accuracy"] for f in report["folds"]} == expected
    assert report["mean_accuracy"] == pytest.approx(np.mean(list(expected.values())), abs=1e-15)
    # A real pretrained speaker encoder tells six distinct voices apart (chance: 1/6).
    assert report["mean_accuracy"] >= 0.75, report
    # The verification EER of the same embeddings, every pair of clips a trial.
    scores, target = speaker_trials(x.astype(np.float64), [str(v) for v in y])
    eer = equal_error_rate(scores, target)
    assert eer is not None and eer < 0.25, eer


def test_a_speaker_probe_study_reruns_byte_identically_and_verifies(
    speaker_dump: tuple[Path, Path], tmp_path: Path
) -> None:
    dump, labels = speaker_dump

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    study = tmp_path / "speakers.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nkind = "linear-probe"\nname = "speaker-id"\n'
        '[[cell]]\nid = "resemblyzer/espeak-ng"\nmodel = "resemblyzer"\n'
        f'dump = "{dump}"\nsha256 = "{sha(dump)}"\nlabels = "{labels}"\n'
        f'labels_sha256 = "{sha(labels)}"\nfolds = "sentence"\n'
    )
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["reproduce", str(study), "--out", str(first)]) == 0
    assert main(["reproduce", str(study), "--out", str(second)]) == 0
    for name in ("bundle.json.gz", "verification.json", "report.html", "tables/linear_probe.csv"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert main(["verify", str(first)]) == 0
    cell = json.loads(gzip.decompress((first / "bundle.json.gz").read_bytes()))["cells"][0]
    assert len(cell["folds"]) == 8 and cell["classes"] == [f"spk{i}" for i in range(1, 7)]

"""A real pretrained network on real speech, end to end (issue 37 item 3).

resemblyzer's ``VoiceEncoder`` with the weights its wheel ships (the bundled registry's
``resemblyzer`` entry, SHA-256 checked) embeds the fixture speech set (``fixtures/speech``,
espeak-ng, six speakers x eight sentences) through audiorepro's extraction, and a
speaker-verification study computes the EER over every pair of clips (target: same speaker).
The study kind is declared here, in the test module, and registered through the kinds'
registry; the runner then runs it like the built-in kinds (tables, the three outputs,
manifest, publication). Checked: the embeddings equal resemblyzer's own calls bit for bit,
the EER its reference twin, the extraction cache is used on a rerun, reruns are
byte-identical, shards and ``--jobs`` give the unsharded dump's bytes (what a Slurm array
task writes), and ``identity`` finds the shipped weights identical to themselves and a
perturbed copy different. The cross-CPU tier: ``tests/test_crosscpu.py``.

resemblyzer comes with the dev lock (extra ``speech``): where the model stack is installed
and resemblyzer is not, this module fails rather than skips.
"""

from __future__ import annotations

import csv
import hashlib
import html
import importlib.util
import json
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
if importlib.util.find_spec("resemblyzer") is None:
    pytest.fail("resemblyzer is not installed: pip install -e '.[speech]'", pytrace=False)

from audiorepro.checks.verify import Summary, summarize
from audiorepro.cli import main
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, json_dumps
from audiorepro.formats.audio_dump import AudioDump, load_audio_dump
from audiorepro.formats.captions import list_audio
from audiorepro.metrics.verification import equal_error_rate, speaker_trials
from audiorepro.models import extract as extraction
from audiorepro.reference import verification as reference
from audiorepro.render.tables import Column, Table
from audiorepro.runner.cache import cache_dump_path, entry_record_path, model_key
from audiorepro.runner.cache import model_spec as resolve_cell_model
from audiorepro.runner.kinds import (
    Better,
    BundlePart,
    Context,
    Identities,
    KindState,
    NumberRecord,
    NumberTier,
    StudyKind,
    cell_records,
    register_kind,
    rest_records,
    unregister_kind,
)
from audiorepro.runner.study import run_studies
from tests.conftest import ROOT, outputs

SPEECH = ROOT / "fixtures" / "speech"
OUTPUTS = ("report.html", "bundle.json.gz", "verification.json")


@dataclass(frozen=True)
class SpeechCell:
    id: str
    model: str
    audio: Path
    speakers: Path  # file_name,speaker


@dataclass(frozen=True)
class SpeechStudy:
    name: str
    title: str
    source: Path
    cells: tuple[SpeechCell, ...]
    kind: str = "speaker-verification"


@dataclass
class SpeechState(KindState):
    study: SpeechStudy | None = None
    dumps: dict[str, AudioDump] = field(default_factory=dict)
    speakers: dict[str, list[str]] = field(default_factory=dict)
    eer: dict[str, float | None] = field(default_factory=dict)
    trials: dict[str, tuple[int, int]] = field(default_factory=dict)
    parity: dict[str, bool] = field(default_factory=dict)


def cell_key(cell: SpeechCell) -> str:
    """The extraction cache's key: the model part the runner's cells use (weights' SHA-256,
    the encoder's code, settings, device, threads) and every clip's SHA-256."""
    spec, settings = resolve_cell_model(cell.model, None, {})
    listing = [[name, sha256_file(path)] for name, path in list_audio(cell.audio).items()]
    key = {**model_key(cell.model, spec, settings, "cpu"), "audio": listing}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def extract_cached(cell: SpeechCell, cache: Path) -> AudioDump:
    """The cell's audio-only dump from the cache (its record's SHA-256 matches), or
    extracted into it by audiorepro's extraction."""
    key = cell_key(cell)
    path, record = cache_dump_path(cache, key), entry_record_path(cache, key)
    if path.is_file() and record.is_file():
        recorded = json.loads(record.read_text())
        if recorded == {"cache_key": key, "sha256": sha256_file(path)}:
            return load_audio_dump(path)
    spec, _ = resolve_cell_model(cell.model, None, {})
    cache.mkdir(parents=True, exist_ok=True)
    extraction.extract(spec, cell.audio, None, path, extra_meta={"cache_key": key})
    atomic_write_bytes(record, json_dumps({"cache_key": key, "sha256": sha256_file(path)}).encode())
    return load_audio_dump(path)


def read_speakers(path: Path) -> dict[str, str]:
    with open(path, newline="") as f:
        return {row["file_name"]: row["speaker"] for row in csv.DictReader(f)}


class SpeechKind(StudyKind[SpeechStudy, SpeechState]):
    """Speaker verification over audio-only dumps: every pair of clips is a trial."""

    name = "speaker-verification"

    def load(self, study: SpeechStudy, ctx: Context) -> SpeechState:
        state = SpeechState(study=study)
        for cell in study.cells:
            dump = extract_cached(cell, ctx.cache)
            labels = read_speakers(cell.speakers)
            state.dumps[cell.id] = dump
            state.speakers[cell.id] = [labels[clip] for clip in dump.audio_ids]
        return state

    def compute(self, state: SpeechState) -> None:
        for cell, dump in state.dumps.items():
            scores, target = speaker_trials(dump.audio_embeds, state.speakers[cell])
            state.eer[cell] = equal_error_rate(scores, target)
            state.trials[cell] = (int(target.sum()), int((~target).sum()))

    def check_parity(self, state: SpeechState) -> None:
        for cell, dump in state.dumps.items():
            scores, target = reference.speaker_trials(dump.audio_embeds, state.speakers[cell])
            state.parity[cell] = reference.equal_error_rate(scores, target) == state.eer[cell]
            if not state.parity[cell]:
                state.failures.append(f"cell {cell}: EER differs from its reference")

    def compare_published(self, state: SpeechState) -> Summary:
        return summarize([])

    def tables(self, state: SpeechState, golden: Summary) -> dict[str, Table]:
        columns = (Column("target trials", None), Column("non-target trials", None))
        columns += (Column("EER", False),)
        body = tuple((c, (*state.trials[c], state.eer[c])) for c in state.eer)
        return {"verification": Table("Speaker verification", columns, body)}

    def bundle_part(
        self, state: SpeechState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        cells = [
            {
                "id": c,
                "eer": state.eer[c],
                "target_trials": state.trials[c][0],
                "nontarget_trials": state.trials[c][1],
                "dump_sha256": state.dumps[c].sha256,
                "model_meta": {"weights_sha256": state.dumps[c].meta["weights_sha256"]},
            }
            for c in state.eer
        ]
        verification = {"failures": state.failures, "golden": golden, "parity": state.parity}
        rows = "".join(
            f"<tr><td>{html.escape(c['id'])}</td><td>EER {c['eer']:.4f}</td></tr>" for c in cells
        )
        report = f"<html><body><h1>Speaker verification</h1><table>{rows}</table></body></html>\n"
        bundle = {"schema": "speaker-verification/1", "cells": cells, "verification": verification}
        return BundlePart(verification, report, bundle)

    def verify(self, study: SpeechStudy, cache: Path) -> Summary:
        return summarize([])

    def numbers(self, bundle: Mapping[str, Any]) -> Iterator[NumberRecord]:
        def classify(
            cell: Mapping[str, Any], below: tuple[str | int, ...]
        ) -> tuple[Better, NumberTier]:
            return ("lower", "b") if below == ("eer",) else (None, None)

        def identities(cell: Mapping[str, Any]) -> Identities:
            return Identities(dump=cell["dump_sha256"])

        yield from cell_records(bundle, "cells", classify=classify, identities=identities)
        yield from rest_records(bundle, ("cells",), lambda below: (None, None))


@pytest.fixture(scope="module")
def kind() -> Iterator[None]:
    register_kind(SpeechKind)
    try:
        yield
    finally:
        unregister_kind("speaker-verification")


def speech_study(tmp: Path) -> SpeechStudy:
    source = tmp / "speech.toml"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text('kind = "speaker-verification"\n')
    cell = SpeechCell("resemblyzer/speech", "resemblyzer", SPEECH, SPEECH / "speakers.csv")
    return SpeechStudy("speech", "resemblyzer on espeak-ng speech", source, (cell,))


@pytest.fixture(scope="module")
def first_run(kind: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("speech")
    out = tmp / "out"
    [(_, _, outcome)] = run_studies([(speech_study(tmp), ".")], out, progress=False)
    assert outcome == {"passed": True, "failures": []}
    return out


def _bundle(out: Path) -> dict[str, Any]:
    import gzip

    return dict(json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes())))


def _own_embeddings() -> np.ndarray:
    """resemblyzer's own loop, no audiorepro code: its README's two calls per file."""
    import torch
    from resemblyzer import VoiceEncoder, preprocess_wav

    torch.set_num_threads(1)
    model = VoiceEncoder(device="cpu", verbose=False)
    files = sorted(SPEECH.glob("*.wav"))
    return np.stack([model.embed_utterance(preprocess_wav(p)) for p in files])


@pytest.mark.slow
def test_the_study_reports_the_eer_of_resemblyzers_own_embeddings(first_run: Path) -> None:
    [cell] = _bundle(first_run)["cells"]
    dump = load_audio_dump(next((first_run / "cache" / "dumps").glob("*.npz")))
    assert dump.meta["weights_sha256"] == {
        "pretrained.pt": "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"
    }
    assert dump.audio_embeds.shape == (48, 256) and dump.meta["encoder"]["text_tower"] is False
    own = _own_embeddings()
    # 16 kHz clips reach the encoder sample for sample: the kit adds nothing to its numbers.
    assert np.array_equal(dump.audio_embeds, own)
    speakers = read_speakers(SPEECH / "speakers.csv")
    scores, target = reference.speaker_trials(own, [speakers[c] for c in dump.audio_ids])
    eer = reference.equal_error_rate(scores, target)
    assert cell["eer"] == eer and (cell["target_trials"], cell["nontarget_trials"]) == (168, 960)
    assert 0.0 < eer < 0.3  # six distinct voices: far better than chance, not perfect
    report = (first_run / "report.html").read_text()
    assert f"EER {eer:.4f}" in report
    print(f"resemblyzer on the fixture speech: EER {eer:.4f} ({eer:.2%}) over 168 + 960 trials")
    csv_rows = (first_run / "tables" / "verification.csv").read_text().splitlines()
    assert csv_rows[1].startswith("resemblyzer/speech,168,960,")


@pytest.mark.slow
def test_a_rerun_uses_the_cache_and_is_byte_identical(
    first_run: Path, kind: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = outputs(first_run, OUTPUTS)

    def no_extraction(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("extracted again although the cache holds the dump")

    monkeypatch.setattr(extraction, "extract", no_extraction)
    [(_, _, outcome)] = run_studies([(speech_study(tmp_path), ".")], first_run, progress=False)
    assert outcome["passed"] and outputs(first_run, OUTPUTS) == before


@pytest.mark.slow
def test_a_fresh_extraction_gives_the_same_bytes(
    first_run: Path, kind: None, tmp_path: Path
) -> None:
    out = tmp_path / "fresh"
    [(_, _, outcome)] = run_studies([(speech_study(tmp_path), ".")], out, progress=False)
    assert outcome["passed"] and outputs(out, OUTPUTS) == outputs(first_run, OUTPUTS)
    ours = sorted((out / "cache" / "dumps").glob("*.npz"))
    theirs = sorted((first_run / "cache" / "dumps").glob("*.npz"))
    assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in theirs]


@pytest.mark.slow
def test_shards_and_jobs_give_the_unsharded_dump(first_run: Path, tmp_path: Path) -> None:
    """What Slurm array tasks and ``--jobs`` write (parts over whole batches, merged) is the
    dump one local process writes."""
    whole = tmp_path / "whole.npz"
    base = ["extract", "--model", "resemblyzer", "--audio", str(SPEECH)]
    assert main([*base, "--out", str(whole)]) == 0
    parts = [tmp_path / f"{i}.part.npz" for i in range(3)]
    for i, part in enumerate(parts):
        assert main([*base, "--shard", f"{i}/3", "--out", str(part)]) == 0
    assert main(["merge", *map(str, parts), "--out", str(tmp_path / "merged.npz")]) == 0
    assert main([*base, "--jobs", "2", "--out", str(tmp_path / "jobs.npz")]) == 0
    assert (tmp_path / "merged.npz").read_bytes() == whole.read_bytes()
    assert (tmp_path / "jobs.npz").read_bytes() == whole.read_bytes()
    cached = load_audio_dump(next((first_run / "cache" / "dumps").glob("*.npz")))
    assert np.array_equal(load_audio_dump(whole).audio_embeds, cached.audio_embeds)


@pytest.mark.slow
def test_identity_of_the_shipped_weights_and_a_perturbed_copy(tmp_path: Path) -> None:
    import torch

    from audiorepro.models.resemblyzer import shipped_weights

    clips = tmp_path / "clips"
    clips.mkdir()
    for wav in sorted(SPEECH.glob("spk?_01.wav")):
        shutil.copyfile(wav, clips / wav.name)
    names = sorted(p.name for p in clips.glob("*.wav"))
    (clips / "captions.csv").write_text("file_name,caption\n" + "".join(f"{n},x\n" for n in names))
    checkpoint = torch.load(shipped_weights(), map_location="cpu", weights_only=True)
    checkpoint["model_state"]["linear.bias"] = checkpoint["model_state"]["linear.bias"] + 1e-3
    (tmp_path / "perturbed").mkdir()
    torch.save(checkpoint, tmp_path / "perturbed" / "pretrained.pt")
    (tmp_path / "perturbed" / "encoder.py").write_text(
        "from pathlib import Path\n\n"
        "from audiorepro.models.resemblyzer import ResemblyzerEncoder\n\n\n"
        "def make() -> ResemblyzerEncoder:\n"
        '    return ResemblyzerEncoder(Path(__file__).parent / "pretrained.pt")\n'
    )
    fixture = ["--audio", str(clips), "--captions", str(clips / "captions.csv")]
    same = tmp_path / "same.json"
    assert (
        main(
            ["identity", "--a", "resemblyzer", "--b", "resemblyzer", *fixture, "--json", str(same)]
        )
        == 0
    )
    assert json.loads(same.read_text())["checkpoint_identity"]["verdict"] == "identical"
    other = tmp_path / "other.json"
    b = f"py:{tmp_path / 'perturbed' / 'encoder.py'}:make"
    assert main(["identity", "--a", "resemblyzer", "--b", b, *fixture, "--json", str(other)]) == 1
    report = json.loads(other.read_text())["checkpoint_identity"]
    assert report["verdict"] == "different checkpoints"
    assert report["weights"]["compared_by"] == "tensors"
    assert [d["tensor"] for d in report["weights"]["differing"]] == ["model_state.linear.bias"]

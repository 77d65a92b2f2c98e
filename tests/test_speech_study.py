"""A real pretrained network on real speech, end to end (issue 37 item 3).

The bundled study ``studies/speaker_verification.toml`` (kind ``speaker-verification``,
:mod:`audiorepro.runner.kinds.speaker_verification`) embeds the fixture speech set
(``fixtures/speech``: espeak-ng, six speakers x eight sentences) with resemblyzer's
``VoiceEncoder`` and the weights its wheel ships (the bundled registry's ``resemblyzer``
entry, SHA-256 checked), through the extraction cache, and computes the EER over the trial
list ``fixtures/speech/trials.csv`` (every pair of clips; target: same speaker). Checked: the
embeddings equal resemblyzer's own calls bit for bit and the EER is the reference twin's over
them, printed in the report and the tables; a rerun uses the cache and is byte-identical, as
is a fresh extraction; published values give PASS and FAIL (and ``verify STUDY`` without any
says NOTHING CHECKED); ``diff`` reads the run; bad trial lists are one line, exit 2; shards
and ``--jobs`` give the unsharded dump's bytes, as do the study's ``extract-part`` tasks
merged (what a Slurm array runs; the planner submits nothing once the dump is cached), and
``identity`` finds the shipped weights identical to themselves and a perturbed copy
different. The cross-CPU tier: ``tests/test_crosscpu.py``; the study as real Slurm arrays:
``tests/test_scaleout.py``.

resemblyzer comes with the dev lock (extra ``speech``): where the model stack is installed
and resemblyzer is not, this module fails rather than skips.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
if importlib.util.find_spec("resemblyzer") is None:
    pytest.fail("resemblyzer is not installed: pip install -e '.[speech]'", pytrace=False)

from audiorepro.cli import main
from audiorepro.core.hashing import sha256_file
from audiorepro.formats.audio_dump import load_audio_dump
from audiorepro.reference import verification as reference
from audiorepro.runner import cache as extraction_cache
from audiorepro.runner.kinds import input_name
from tests.conftest import ROOT, outputs
from tests.test_number_view import _view

SPEECH = ROOT / "fixtures" / "speech"
STUDY = ROOT / "studies" / "speaker_verification.toml"
#: The heading of docs/models.md's section whose commands run the bundled study.
DOCUMENTED = "Speaker verification: resemblyzer on real speech"
OUTPUTS = ("report.html", "bundle.json.gz", "verification.json", "dumps/resemblyzer_speech.npz")


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("speech") / "out"
    assert main(["reproduce", str(STUDY), "--out", str(out)]) == 0
    return out


def _bundle(out: Path) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes())))


def _speakers() -> dict[str, str]:
    with open(SPEECH / "speakers.csv", newline="") as f:
        return {row["file_name"]: row["speaker"] for row in csv.DictReader(f)}


def _own_embeddings() -> np.ndarray:
    """resemblyzer's own loop, no audiorepro code: its README's two calls per file."""
    import torch
    from resemblyzer import VoiceEncoder, preprocess_wav

    torch.set_num_threads(1)
    model = VoiceEncoder(device="cpu", verbose=False)
    files = sorted(SPEECH.glob("*.wav"))
    return np.stack([model.embed_utterance(preprocess_wav(p)) for p in files])


def _study(folder: Path, published: str = "", trials: Path = SPEECH / "trials.csv") -> Path:
    """The bundled study's cell with absolute paths (and ``trials``), in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (
        'schema = "audiorepro.study/1"\nkind = "speaker-verification"\nname = "speech-test"\n'
        '[[cell]]\nid = "resemblyzer/speech"\nmodel = "resemblyzer"\n'
        f'trials = "{trials}"\ntrials_sha256 = "{sha256_file(trials)}"\n'
        f'extract = {{ model = "resemblyzer", audio = "{SPEECH}" }}\n' + published
    )
    (folder / "study.toml").write_text(text)
    return folder / "study.toml"


@pytest.mark.slow
def test_the_study_reports_the_eer_of_resemblyzers_own_embeddings(first_run: Path) -> None:
    [cell] = _bundle(first_run)["cells"]
    dump = load_audio_dump(first_run / cell["dump"])
    assert dump.meta["weights_sha256"] == {
        "pretrained.pt": "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"
    }
    assert dump.audio_embeds.shape == (48, 256) and dump.meta["encoder"]["text_tower"] is False
    own = _own_embeddings()
    # 16 kHz clips reach the encoder sample for sample: the kit adds nothing to its numbers.
    assert np.array_equal(dump.audio_embeds, own)
    speakers = _speakers()
    scores, target = reference.speaker_trials(own, [speakers[c] for c in dump.audio_ids])
    eer = reference.equal_error_rate(scores, target)
    assert cell["eer"] == eer and (cell["target_trials"], cell["nontarget_trials"]) == (168, 960)
    assert 0.0 < eer < 0.3  # six distinct voices: far better than chance, not perfect
    assert f"EER {eer:.4f}" in (first_run / "report.html").read_text()
    print(f"resemblyzer on the fixture speech: EER {eer:.4f} ({eer:.2%}) over 168 + 960 trials")
    rows = (first_run / "tables" / "speaker_verification.csv").read_text().splitlines()
    assert rows[1].startswith("resemblyzer/speech,48,168,960,")
    verification = json.loads((first_run / "verification.json").read_text())
    assert verification["metric_parity_passed"] is True and verification["failures"] == []
    assert main(["verify", str(first_run)]) == 0


@pytest.mark.slow
def test_a_rerun_uses_the_cache_and_is_byte_identical(
    first_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = outputs(first_run, OUTPUTS)

    def no_extraction(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("extracted again although the cache holds the dump")

    monkeypatch.setattr(extraction_cache, "extract", no_extraction)
    assert main(["reproduce", str(STUDY), "--out", str(first_run)]) == 0
    assert outputs(first_run, OUTPUTS) == before


@pytest.mark.slow
def test_a_fresh_extraction_gives_the_same_bytes(first_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "fresh"
    assert main(["reproduce", str(STUDY), "--out", str(out)]) == 0
    assert outputs(out, OUTPUTS) == outputs(first_run, OUTPUTS)
    ours = sorted((out / "cache" / "dumps").glob("*.npz"))
    theirs = sorted((first_run / "cache" / "dumps").glob("*.npz"))
    assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in theirs]
    assert main(["diff", str(first_run), str(out)]) == 0


@pytest.mark.slow
def test_published_values_pass_or_fail_and_none_checks_nothing(
    first_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eer = _bundle(first_run)["cells"][0]["eer"]
    published = (
        '[[published]]\ncell = "resemblyzer/speech"\ntolerance = 1e-12\n'
        f'provenance = "this kit\'s first run"\nvalues = {{ eer = {eer!r} }}\n'
    )
    good = _study(tmp_path / "good", published)
    assert main(["reproduce", str(good), "--out", str(tmp_path / "good-out")]) == 0
    capsys.readouterr()
    assert main(["verify", str(good)]) == 0
    assert "PASS" in capsys.readouterr().out
    bad = _study(tmp_path / "bad", published.replace(repr(eer), "0.25"))
    assert main(["reproduce", str(bad), "--out", str(tmp_path / "bad-out")]) == 1
    assert main(["verify", str(bad)]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["verify", str(STUDY)]) == 1
    assert "NOTHING CHECKED" in capsys.readouterr().out


@pytest.mark.slow
def test_the_typed_view_covers_every_number(first_run: Path) -> None:
    bundle = _bundle(first_run)
    view = _view("speaker-verification", bundle)
    eer = view["cells/resemblyzer/speech/eer"]
    assert (eer.value, eer.direction, eer.tier) == (bundle["cells"][0]["eer"], "lower", "b")
    assert eer.identities.dump == bundle["cells"][0]["dump_sha256"]
    assert view["cells/resemblyzer/speech/target_trials"].tier is None


@pytest.mark.slow
def test_a_dump_cell_gives_the_eer_of_the_extracted_one(
    first_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell over a dump you have (``dump`` with its ``sha256``: here the first run's) gives
    the extraction cell's EER; its manifest names the dump as an input; a trial of a clip the
    dump lacks is one line naming the dump, exit 2."""
    dump = first_run / "dumps" / "resemblyzer_speech.npz"

    def study(folder: Path, trials: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "study.toml").write_text(
            'schema = "audiorepro.study/1"\nkind = "speaker-verification"\nname = "given"\n'
            f'[[cell]]\nid = "given"\nmodel = "resemblyzer"\ndump = "{dump}"\n'
            f'sha256 = "{sha256_file(dump)}"\ntrials = "{trials}"\n'
            f'trials_sha256 = "{sha256_file(trials)}"\n'
        )
        return folder / "study.toml"

    out, given = tmp_path / "out", study(tmp_path / "s", SPEECH / "trials.csv")
    assert main(["reproduce", str(given), "--out", str(out)]) == 0
    [cell] = _bundle(out)["cells"]
    assert cell["eer"] == _bundle(first_run)["cells"][0]["eer"] and cell["dump"] == dump.name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][input_name(dump, given)] == sha256_file(dump)
    bad = _trials(tmp_path / "t", ["spk1_01.wav,spk1_02.wav,1", "spk1_01.wav,other.wav,0"])
    capsys.readouterr()
    assert main(["reproduce", str(study(tmp_path / "b", bad)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "key 'row 3.test': names clip 'other.wav', which is not among the 48 clips of " in err
    assert f"dump {dump.name} (cell[0].dump)" in err and err.count("\n") == 1


def _trials(folder: Path, rows: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trials.csv").write_text("enrollment,test,target\n" + "".join(r + "\n" for r in rows))
    return folder / "trials.csv"


BAD_TRIALS = {
    "an unknown clip": (
        ["spk1_01.wav,spk1_02.wav,1", "spk1_01.wav,spk9_01.wav,0"],
        "trials.csv: key 'row 3.test': names clip 'spk9_01.wav', which is not among the 48 clips",
    ),
    "target trials only": (
        ["spk1_01.wav,spk1_02.wav,1", "spk2_01.wav,spk2_02.wav,1"],
        "trials.csv: key 'target': has only target trials (2)",
    ),
    "non-target trials only": (
        ["spk1_01.wav,spk2_02.wav,0"],
        "trials.csv: key 'target': has only non-target trials (1)",
    ),
    "a target that is not 0 or 1": (
        ["spk1_01.wav,spk1_02.wav,yes"],
        "trials.csv: key 'row 2.target': is 'yes'; expected 1",
    ),
    "a pair twice": (
        ["spk1_01.wav,spk2_02.wav,0", "spk1_01.wav,spk1_02.wav,1", "spk2_02.wav,spk1_01.wav,0"],
        "trials.csv: key 'row 4': repeats the trial of row 2",
    ),
    "a clip against itself": (
        ["spk1_01.wav,spk1_01.wav,1"],
        "trials.csv: key 'row 2.test': compares clip 'spk1_01.wav' with itself",
    ),
}


@pytest.mark.parametrize(
    ("line", "key"),
    [('tie_policy = "optimistic"', "tie_policy"), ("bootstrap = { resamples = 10 }", "bootstrap")],
)
def test_a_setting_the_kind_does_not_use_is_refused_not_ignored(
    line: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study(tmp_path / "s")
    study.write_text(study.read_text().replace("[[cell]]", f"{line}\n[[cell]]", 1))
    capsys.readouterr()
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"study.toml: key '{key}': is not used" in err, err


@pytest.mark.parametrize("case", list(BAD_TRIALS), ids=list(BAD_TRIALS))
def test_a_bad_trial_list_is_one_line_exit_2_and_out_untouched(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows, message = BAD_TRIALS[case]
    study = _study(tmp_path / "s", trials=_trials(tmp_path / "t", rows))
    capsys.readouterr()
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and message in err, err
    assert not out.exists() or [p.name for p in out.iterdir()] == []


@pytest.mark.slow
def test_a_rerun_against_the_first_is_identical(first_run: Path, tmp_path: Path) -> None:
    """``reproduce --against`` takes a run of this kind as its baseline (its kind's name has
    a hyphen) and finds every number identical."""
    argv = ["reproduce", str(STUDY), "--out", str(tmp_path / "again"), "--against"]
    assert main([*argv, str(first_run)]) == 0


def _run_documented(
    page: str, heading: str, commands: list[str], tmp_path: Path
) -> tuple[Path, list[str]]:
    """The bash block under ``heading`` of ``page`` (its commands are ``commands``), run line by
    line in a checkout-like folder (the repository's studies and fixtures), each exit 0."""
    from tests.test_documented_commands import _run, blocks

    [block] = [b for b in blocks(page) if b.heading == heading and b.lang == "bash"]
    lines = block.commands()
    assert [line.split()[1] for line in lines] == commands
    work = tmp_path / "checkout"
    work.mkdir()
    for name in ("studies", "fixtures"):
        (work / name).symlink_to(ROOT / name)
    for line in lines:
        result = _run(line, work)
        assert result.returncode == 0, (line, result.stdout[-2000:], result.stderr[-2000:])
    return work, lines


@pytest.mark.slow
def test_the_documented_speech_study_runs_as_written(tmp_path: Path) -> None:
    """docs/models.md's lines, from a checkout (the study and the fixture speech are the
    repository's): the run passes, ``verify OUT`` passes, the report prints the EER."""
    page = (ROOT / "docs" / "models.md").relative_to(ROOT)
    work, lines = _run_documented(str(page), DOCUMENTED, ["reproduce", "verify"], tmp_path)
    out = work / lines[0].split("--out ")[1].split()[0]
    eer = _bundle(out)["cells"][0]["eer"]
    assert f"EER {eer:.4f}" in (out / "report.html").read_text()


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
    cached = load_audio_dump(first_run / "dumps" / "resemblyzer_speech.npz")
    assert np.array_equal(load_audio_dump(whole).audio_embeds, cached.audio_embeds)


@pytest.mark.slow
def test_array_tasks_write_the_local_dump_and_a_rerun_plans_none(
    first_run: Path, tmp_path: Path
) -> None:
    """What a Slurm array runs, without a cluster (``tests/test_scaleout.py`` has one): three
    ``extract-part`` tasks and the driver's merge give the cache entry of a local run, byte
    for byte; the planner sees an audio-only entry in the cache and plans no task (a rerun on
    Slurm submits nothing)."""
    from audiorepro.runner.executors.slurm import plan
    from audiorepro.runner.study import study_extraction
    from audiorepro.specs.study import load_study

    extraction = study_extraction(load_study(STUDY))
    assert extraction is not None
    assert plan(extraction, first_run, 3) == ([], [])
    parts, todo = plan(extraction, tmp_path, 3)
    assert [p.shard for p in todo] == [0, 1, 2] and parts == todo
    cell = extraction.cell("resemblyzer/speech")
    for part in todo:
        argv = ["extract-part", str(STUDY), "--cell", part.cell, "--shard", f"{part.shard}/3"]
        assert main([*argv, "--key", part.key, "--out", str(part.path)]) == 0
    merged = tmp_path / "merged.npz"
    cell.merge([p.path for p in parts], parts[0].key, merged)
    [local] = sorted((first_run / "cache" / "dumps").glob("*.npz"))
    assert merged.read_bytes() == local.read_bytes()


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


def _diff_json(a: Path, b: Path, out: Path, code: int) -> dict[str, Any]:
    assert main(["diff", str(a), str(b), "--json", str(out)]) == code
    return dict(json.loads(out.read_text()))


@pytest.mark.slow
def test_diff_of_two_runs_names_the_changed_trial_list(
    first_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43 item 5: two speaker-verification runs whose EER moved (the second on every
    other trial of the list): diff reads their audio-only dumps as the kind declares them
    (once exit 2, "key 'text_embeds': is missing"), names the cell's inputs (the trial
    list) for the EER and the trial counts, and nothing the trial list cannot move: the
    clip count and dimension stay identical, no weights or encoder code are named."""
    rows = (SPEECH / "trials.csv").read_text().splitlines()[1:]
    trials = _trials(tmp_path / "half", rows[::2])
    study = _study(tmp_path / "half", trials=trials)
    assert main(["reproduce", str(_study(tmp_path / "full")), "--out", str(tmp_path / "a")]) == 0
    assert main(["reproduce", str(study), "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    doc = _diff_json(tmp_path / "a", tmp_path / "b", tmp_path / "d.json", 1)
    moved = {n["path"]: n for n in doc["numbers"] if n["verdict"] != "identical"}
    eer = moved["resemblyzer/speech/eer"]
    assert eer["a"] == _bundle(tmp_path / "a")["cells"][0]["eer"] != eer["b"]
    assert eer["causes"] == ["resemblyzer/speech:inputs"]
    assert {"resemblyzer/speech/target_trials", "resemblyzer/speech/nontarget_trials"} <= set(moved)
    assert "resemblyzer/speech/n_clips" not in moved and "resemblyzer/speech/n_dims" not in moved
    named = {c for n in moved.values() for c in n["causes"]}
    assert named == {"resemblyzer/speech:inputs"}, named
    (inputs,) = [c for c in doc["causes"] if c["key"] == "resemblyzer/speech:inputs"]
    assert "trials_sha256" in inputs["a"] and sha256_file(trials) in inputs["b"]
    assert "DEFECT" not in capsys.readouterr().out


@pytest.mark.slow
def test_diff_when_only_the_machine_differs_reads_no_retrieval_dump(
    first_run: Path, tmp_path: Path
) -> None:
    """Issue 44: a speaker-verification EER (and its parity row) that moved while only the
    machine's record differs: once ``diff`` derived a rank tolerance from the audio-only
    dump as if it were a retrieval dump (exit 2, "'text_embeds' is missing"); now no bound
    is derived for it (the kind declares none): changed, explained by the hardware."""
    b = tmp_path / "b"
    shutil.copytree(first_run, b)
    bundle = _bundle(b)
    bundle["cells"][0]["eer"] += 0.001
    bundle["verification"]["metric_parity"]["cells"][0]["eer"] += 0.001
    (b / "bundle.json.gz").write_bytes(gzip.compress(json.dumps(bundle).encode(), mtime=0))
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["outputs"]["bundle.json.gz"] = sha256_file(b / "bundle.json.gz")
    manifest["environment"]["cpu"] = "another CPU"
    (b / "manifest.json").write_text(json.dumps(manifest))
    doc = _diff_json(first_run, b, tmp_path / "d.json", 1)
    assert doc["verdict"] == "changed, explained"
    moved = [n for n in doc["numbers"] if n["verdict"] != "identical"]
    assert {n["path"] for n in moved} == {
        "resemblyzer/speech/eer",
        "verification/metric_parity/cells/0/eer",
    }
    for n in moved:
        assert n["causes"] == ["run:hardware"] and n["tolerance"] is None and n["tier"] == "b"


DEFINITIONS_HEADING = "Speaker verification: EER, minDCF, Cllr under each toolkit's definition"


@pytest.mark.slow
def test_the_documented_definitions_run_as_written(tmp_path: Path) -> None:
    """docs/metrics.md's lines, from a checkout: ``explain --trials`` over the speech study's
    dump gives every definition, the page's table prints those values (8 decimals), the EER is
    the study's (unchanged: 0.10520833), and the toolkits' own code (speechbrain, pyannote)
    gives their values on the same scores."""
    from audiorepro.metrics.verification import trial_scores
    from audiorepro.metrics.verification_toolkits import DEFINITIONS
    from tests.test_verification_definitions import _against_pyannote, _against_speechbrain

    page = ROOT / "docs" / "metrics.md"
    work, _ = _run_documented("docs/metrics.md", DEFINITIONS_HEADING, ["reproduce", "explain"],
                              tmp_path)  # fmt: skip
    values = json.loads((work / "speech-definitions.json").read_text())
    assert sorted(values) == sorted(d.name for d in DEFINITIONS)
    assert values["eer"] == _bundle(work / "reproduce-speech")["cells"][0]["eer"]
    assert round(values["eer"], 8) == 0.10520833  # the kit's EER before issue 47, unchanged
    section = page.read_text().split(DEFINITIONS_HEADING, 1)[1]
    table = {}
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")] if row.startswith("| `") else []
        if len(cells) == 2:
            for name in cells[0].replace("`", "").split(", "):
                table[name] = float(cells[1])
    assert table == {name: round(v, 8) for name, v in values.items()}
    dump = load_audio_dump(work / "reproduce-speech" / "dumps" / "resemblyzer_speech.npz")
    with open(SPEECH / "trials.csv", newline="") as f:
        trials = list(csv.DictReader(f))
    at = {clip: k for k, clip in enumerate(dump.audio_ids)}
    i = np.asarray([at[t["enrollment"]] for t in trials])
    j = np.asarray([at[t["test"]] for t in trials])
    scores = trial_scores(dump.audio_embeds, i, j)
    target = np.asarray([t["target"] == "1" for t in trials])
    # The toolkits' own code on these real scores where the test extra has them (without it,
    # tests/test_verification_definitions.py says which is missing; this line's check stands).
    if importlib.util.find_spec("speechbrain") is not None:
        _against_speechbrain([(scores, target)])
    if importlib.util.find_spec("pyannote") and importlib.util.find_spec("pyannote.metrics"):
        _against_pyannote(scores, target)

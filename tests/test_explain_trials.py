"""``audiorepro explain DUMP --trials FILE`` (issue 47): every speaker-verification definition
side by side for one dump and one trial list, in each published trial-list form; its JSON maps
each definition's name to its value; bad input is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.metrics.verification import trial_scores
from audiorepro.metrics.verification_toolkits import DEFINITIONS, compute_definitions
from audiorepro.reference import verification as twin


def _dump(folder: Path) -> tuple[Path, list[str], np.ndarray]:
    """Six speakers x five clips named as VoxCeleb names them; a seeded clip-embedding dump."""
    rng = np.random.default_rng(47)
    speakers = np.repeat(np.arange(6), 5)
    ids = [f"id1030{s}/vid{k % 2}/{k:05d}.wav" for s, k in zip(speakers, range(30), strict=True)]
    emb = (rng.normal(size=(6, 8))[speakers] + rng.normal(size=(30, 8))).astype(np.float32)
    path = folder / "clips.npz"
    np.savez(path, audio_embeds=emb, audio_ids=np.asarray(ids))
    return path, ids, speakers


def _lists(folder: Path, ids: list[str], speakers: np.ndarray) -> dict[str, Path]:
    i, j = np.triu_indices(len(ids), k=1)
    keep = (i + j) % 3 != 0  # not every pair: a list, not the full matrix
    pairs = [(ids[a], ids[b], bool(speakers[a] == speakers[b])) for a, b in
             zip(i[keep].tolist(), j[keep].tolist(), strict=True)]  # fmt: skip
    texts = {
        "csv": "enrollment,test,target\n" + "".join(f"{a},{b},{int(t)}\n" for a, b, t in pairs),
        "voxceleb": "".join(f"{int(t)} {a} {b}\n" for a, b, t in pairs),
        "nist": "".join(f"{a} {b} {'target' if t else 'nontarget'}\n" for a, b, t in pairs),
    }
    paths = {}
    for form, text in texts.items():
        paths[form] = folder / f"trials.{form}.txt"
        paths[form].write_text(text)
    return paths


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, dict[str, Path], np.ndarray, np.ndarray]:
    dump, ids, speakers = _dump(tmp_path)
    lists = _lists(tmp_path, ids, speakers)
    i, j = np.triu_indices(len(ids), k=1)
    keep = (i + j) % 3 != 0
    emb = np.load(dump)["audio_embeds"].astype(np.float64)
    scores = trial_scores(emb, i[keep], j[keep])
    return dump, lists, scores, speakers[i[keep]] == speakers[j[keep]]


@pytest.mark.parametrize("form", ["csv", "voxceleb", "nist"])
def test_every_definition_side_by_side(
    form: str, inputs: tuple[Path, dict[str, Path], np.ndarray, np.ndarray], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    dump, lists, scores, target = inputs
    out = tmp_path / "definitions.json"
    capsys.readouterr()
    argv = ["explain", str(dump), "--trials", str(lists[form]), "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    values = json.loads(out.read_text())
    assert list(values) == sorted(d.name for d in DEFINITIONS)  # name -> value, nothing else
    assert values == compute_definitions(scores, target)
    assert values["eer"] == twin.equal_error_rate(scores.tolist(), target.tolist())
    assert values["eer_rocch"] == twin.eer_rocch(scores.tolist(), target.tolist())
    assert f"({form}): {int(target.sum())} target and {int((~target).sum())} non-target" in text
    for d in DEFINITIONS:
        assert f"{d.name:<27} {d.measure:<8} {values[d.name]:>11.8f}  {d.follows}" in text
        assert f"  {d.name}: " in text  # why it differs


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unknown clip", "key 'row 1.enrollment': names clip 'nobody.wav', which is not among"),
        ("self trial", "compares clip"),
        ("with --k", "'--k': applies to retrieval dumps; expected --k or --trials, not both"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    case: str, message: str, inputs: tuple[Path, dict[str, Path], np.ndarray, np.ndarray],
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    dump, lists, _, _ = inputs
    bad = tmp_path / "bad.txt"
    first = lists["voxceleb"].read_text().splitlines()[0].split()
    extra: list[str] = []
    if case == "unknown clip":
        bad.write_text(f"1 nobody.wav {first[2]}\n0 {first[1]} {first[2]}x\n")
    elif case == "self trial":
        bad.write_text(f"1 {first[1]} {first[2]}\n0 {first[1]} {first[1]}\n")
    else:
        bad, extra = lists["voxceleb"], ["--k", "1"]
    capsys.readouterr()
    out = tmp_path / "never.json"
    assert main(["explain", str(dump), "--trials", str(bad), "--json", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and message in err, err
    assert not out.exists()


def _study(folder: Path, dump: Path, trials: Path, published: str) -> Path:
    from audiorepro.core.hashing import sha256_file

    study = folder / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nkind = "speaker-verification"\nname = "sv"\n\n'
        f'[[cell]]\nid = "c"\nmodel = "m"\ndump = "{dump.name}"\nsha256 = "{sha256_file(dump)}"\n'
        f'trials = "{trials.name}"\ntrials_sha256 = "{sha256_file(trials)}"\n\n' + published
    )
    return study


def test_a_study_reports_every_definition_and_checks_each_by_its_name(
    inputs: tuple[Path, dict[str, Path], np.ndarray, np.ndarray], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A published BOSARIS EER passes against ``eer_rocch`` and fails as ``eer`` (the ROC
    crossing); the bundle, the table and the report carry every definition beside the EER."""
    import gzip

    dump, lists, scores, target = inputs
    values = compute_definitions(scores, target)
    assert values["eer_rocch"] is not None and values["eer"] is not None
    assert abs(values["eer_rocch"] - values["eer"]) > 1e-3  # they differ on these trials
    rocch, sb = round(values["eer_rocch"], 4), round(values["eer_speechbrain"] or 0, 4)
    published = (
        '[[published]]\ncell = "c"\ntolerance = 1e-4\nprovenance = "BOSARIS"\n'
        f"values = {{ eer_rocch = {rocch}, eer_speechbrain = {sb} }}\n\n"
        '[[published]]\ncell = "c"\ntolerance = 1e-4\nprovenance = "the same, read as eer"\n'
        f"values = {{ eer = {rocch} }}\n"
    )
    study = _study(tmp_path, dump, lists["voxceleb"], published)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 1  # the misread value fails
    verification = json.loads((out / "verification.json").read_text())
    status = {(r["provenance"], r["metric"]): r["status"] for r in verification["golden"]["rows"]}
    assert status == {("BOSARIS", "eer_rocch"): "PASS", ("BOSARIS", "eer_speechbrain"): "PASS",
                      ("the same, read as eer", "eer"): "FAIL"}  # fmt: skip
    [cell] = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))["cells"]
    assert cell["definitions"] == values and cell["eer"] == values["eer"]
    table = (out / "tables" / "verification_definitions.csv").read_text().splitlines()
    assert table[0].split(",")[1:] == [d.name for d in DEFINITIONS]
    report = (out / "report.html").read_text()
    assert f"minDCF {values['min_dcf_p0.01']:.4f} (p_target 0.01)" in report
    assert f"EER as BOSARIS&#x27; ROC hull {rocch:.4f}" in report
    # the DET curve on probit axes, the EER and both minDCF operating points marked
    assert report.count('class="chart det"') == 1 and "<title>DET curve: c</title>" in report
    assert f"EER {values['eer']:.2%}: false alarms {values['eer']:.4%}" in report
    assert "minDCF point, p_target 0.01: false alarms" in report


def test_a_published_value_of_no_definition_is_one_line(
    inputs: tuple[Path, dict[str, Path], np.ndarray, np.ndarray], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    dump, lists, _, _ = inputs
    published = (
        '[[published]]\ncell = "c"\ntolerance = 1e-4\nprovenance = "x"\n'
        "values = { eer_bosaris = 0.1 }\n"
    )
    study = _study(tmp_path, dump, lists["nist"], published)
    capsys.readouterr()
    assert main(["verify", str(study)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown speaker-verification metric; expected eer, " in err
    assert "eer_rocch" in err and "min_dcf_p0.01" in err, err


def test_a_cell_normalizes_its_scores_over_a_cohort_as_named(
    inputs: tuple[Path, dict[str, Path], np.ndarray, np.ndarray], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``score_norm = { method = "as-norm", top_n = 5, cohort = ... }``: every number is of the
    normalized scores, the twin agrees, the bundle records the definition and its parameters;
    as-norm without top_n is one line."""
    import gzip

    from audiorepro.core.hashing import sha256_file
    from audiorepro.metrics.verification_norm import normalize_scores

    dump, lists, _, target = inputs
    rng = np.random.default_rng(7)
    cohort = tmp_path / "cohort.npz"
    cohort_emb = rng.normal(size=(12, 8)).astype(np.float32)
    np.savez(cohort, audio_embeds=cohort_emb, audio_ids=np.asarray([f"c{k}" for k in range(12)]))
    emb = np.load(dump)["audio_embeds"].astype(np.float64)
    ids = np.load(dump)["audio_ids"].tolist()
    i, j = np.triu_indices(len(ids), k=1)
    keep = (i + j) % 3 != 0
    raw = trial_scores(emb, i[keep], j[keep])
    normalized = normalize_scores(raw, i[keep], j[keep], emb, cohort_emb, method="as-norm",
                                  top_n=5)  # fmt: skip
    values = compute_definitions(normalized, target)
    norm_line = (f'score_norm = {{ method = "as-norm", top_n = 5, cohort = "cohort.npz", '
                 f'cohort_sha256 = "{sha256_file(cohort)}" }}\n')  # fmt: skip
    published = ('[[published]]\ncell = "c"\ntolerance = 1e-6\nprovenance = "AS-norm"\n'
                 f"values = {{ eer_rocch = {values['eer_rocch']!r} }}\n")  # fmt: skip
    study = _study(tmp_path, dump, lists["csv"], published)
    text = study.read_text().replace('trials_sha256 = "', norm_line + 'trials_sha256 = "', 1)
    study.write_text(text)
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    [cell] = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))["cells"]
    assert cell["definitions"] == values and cell["eer"] == values["eer"]
    assert cell["score_norm"] == {"method": "as-norm", "top_n": 5, "cohort": "cohort.npz",
                                  "cohort_sha256": sha256_file(cohort), "n_cohort": 12,
                                  "version": 1}  # fmt: skip
    assert json.loads((out / "verification.json").read_text())["metric_parity_passed"] is True
    study.write_text(text.replace("top_n = 5, ", ""))
    capsys.readouterr()
    assert main(["verify", str(study)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "score_norm.top_n': as-norm needs top_n" in err, err

"""Hostile round 7: round 6's open defects, then ``verify`` and ``diff`` attacked across the
kinds (retrieval, probe, zero-shot, linear probe, speaker verification, HEAR) where they could
give a false PASS: rows dropped or repeated, non-finite numbers, published values in odd
spellings, tolerances, a bundle missing files, renamed keys, a bundle of another study,
symbolic links, huge inputs. Each case asserts the right outcome; those marked "fixed" failed
before their fix.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.formats.hear import find_tasks, read_task
from audiorepro.formats.trials import parse_trials
from audiorepro.metrics.verification import trial_scores as trial_scores_ours
from audiorepro.specs.study import load_study
from tests.test_hostile import DUMP, PREDICTIONS, _clip_labels, _golden, _one_line, _run, make_part
from tests.test_hostile_round6 import GOOD, IDS, META, _dump, _explain, _task

# --- round 6's open defects -----------------------------------------------------------------


@pytest.mark.parametrize("first", ["0", "1"])
def test_a_nist_key_whose_first_model_is_0_or_1_is_a_nist_key(first: str) -> None:
    """fixed: the form was told by the first field alone, so a key whose first model id is
    ``0`` or ``1`` was read as a VoxCeleb list (its label words taken for clip names)."""
    text = f"{first} seg_a target\n{first} seg_b nontarget\nm2 seg_a nontarget\n"
    trials = parse_trials(text, source="key")
    assert trials.format == "nist"
    assert trials.enrollment == (first, first, "m2")
    assert trials.test == ("seg_a", "seg_b", "seg_a")
    assert trials.target.tolist() == [True, False, False]


def test_a_voxceleb_list_is_still_a_voxceleb_list() -> None:
    trials = parse_trials("1 id1/a.wav id1/b.wav\n0 id1/a.wav id2/c.wav\n", source="veri.txt")
    assert trials.format == "voxceleb"
    assert trials.test == ("id1/b.wav", "id2/c.wav")


def test_a_hear_vocabulary_with_a_byte_order_mark_reads_as_pandas_reads_it(tmp_path: Path) -> None:
    """fixed: ``labelvocabulary.csv`` saved as "CSV UTF-8" (a BOM before the header) was
    refused ("expected the header 'idx,label'"); heareval reads it with pandas, which drops the
    mark."""
    folder = _task(tmp_path / "w-v1")
    (folder / "labelvocabulary.csv").write_bytes(b"\xef\xbb\xbfidx,label\n0,a\n1,b\n")
    assert read_task(folder).vocabulary == ("a", "b")


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_task_name_is_one_line_naming_file_and_key(tmp_path: Path, name: str) -> None:
    """fixed: ``task_name = ""`` was read (heareval names a task's outputs by it)."""
    folder = _task(tmp_path / "w-v1", meta={**META, "task_name": name})
    with pytest.raises(UserError) as info:
        read_task(folder)
    text = str(info.value)
    assert "\n" not in text and str(folder / "task_metadata.json") in text, text
    assert "key 'task_name'" in text and "not empty" in text, text


def _hear_study(tmp_path: Path, task: str) -> Path:
    study = tmp_path / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "h"\nkind = "hear"\n\n[[cell]]\nid = "c"\n'
        f'model = "hear:nowhere"\ntasks_dir = "tasks"\ntask = "{task}"\n'
    )
    return study


def test_a_study_over_a_task_with_an_empty_task_name_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: the study loaded (and ran) a task whose metadata names no task."""
    _task(tmp_path / "tasks" / "w-v1", meta={**META, "task_name": ""})
    code, err = _run(["verify", str(_hear_study(tmp_path, "w"))], capsys)
    assert code == 2
    _one_line(err, "task_metadata.json", "key 'task_name'")


@pytest.mark.parametrize("task", ["", " "])
def test_a_study_or_command_naming_an_empty_task_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str
) -> None:
    """fixed: an empty task name matched any task folder whose name starts with '-'."""
    _task(tmp_path / "tasks" / "-v1", meta={**META, "task_name": "x"})
    with pytest.raises(UserError) as info:
        load_study(_hear_study(tmp_path, task))
    assert "cell[0].task" in str(info.value) and "not empty" in str(info.value)
    with pytest.raises(UserError, match="not empty"):
        find_tasks(tmp_path / "tasks", (task,))


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _run_folder(t: Path) -> Path:
    """A folder that looks like a run's OUT (its manifest is what marks one)."""
    (t / "out").mkdir()
    (t / "out" / "manifest.json").write_text("{}")
    (t / "out" / "verification.json").write_text("{}")
    return t / "out"


#: A command whose output option names one of its inputs: argv in a folder, the file it names.
ONTO_INPUT: dict[str, tuple[Callable[[Path], list[str]], str, str]] = {
    "metrics --json DUMP": (
        lambda t: ["metrics", str(_copy(DUMP, t / "d.npz")), "--json", str(t / "d.npz")],
        "d.npz", "--json"),
    "parity --json a later DUMP": (
        lambda t: ["parity", str(_copy(DUMP, t / "a.npz")), str(_copy(DUMP, t / "b.npz")),
                   "--json", str(t / "b.npz")], "b.npz", "--json"),
    "probe-metrics --json PREDICTIONS": (
        lambda t: ["probe-metrics", str(_copy(PREDICTIONS, t / "p.npz")), "--json",
                   str(t / "p.npz")], "p.npz", "--json"),
    "linear-probe --json the labels": (
        lambda t: ["linear-probe", str(_copy(DUMP, t / "d.npz")), "--labels",
                   str(_clip_labels(t)), "--json", str(t / "labels.csv")], "labels.csv", "--json"),
    "verify --json the golden": (
        lambda t: ["verify", "--golden", str(_golden(t, _copy(DUMP, t / "d.npz"))), "--dumps",
                   str(t), "--json", str(t / "golden.toml")], "golden.toml", "--json"),
    "verify OUT --json OUT's own file": (
        lambda t: ["verify", str(_run_folder(t)), "--json", str(t / "out" / "verification.json")],
        "out/verification.json", "--json"),
    "diff --json a file of run A": (
        lambda t: ["diff", str(_run_folder(t)), str(t / "b"), "--json",
                   str(t / "out" / "manifest.json")], "out/manifest.json", "--json"),
    "merge --out a part": (
        lambda t: ["merge", str(make_part(t / "p.part.npz")), "--out", str(t / "p.part.npz")],
        "p.part.npz", "--out"),
    "extract --out the captions": (
        lambda t: ["extract", "--model", "tiny", "--audio", str(t), "--captions",
                   str(_copy(DUMP, t / "c.csv")), "--out", str(t / "c.csv")], "c.csv", "--out"),
    "extract-part --out the study": (
        lambda t: ["extract-part", str(_copy(DUMP, t / "s.toml")), "--cell", "c", "--shard",
                   "0/1", "--key", "k", "--out", str(t / "s.toml")], "s.toml", "--out"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(ONTO_INPUT))
def test_an_output_option_onto_an_input_is_one_line_and_the_input_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """fixed: only ``explain`` was guarded; every other command wrote its JSON (or dump) over
    the input it had just read (``metrics d.npz --json d.npz`` left a JSON named d.npz), or
    into the run folder it certified."""
    argv_of, name, option = ONTO_INPUT[case]
    argv = argv_of(tmp_path)
    before = (tmp_path / name).read_bytes()
    code, err = _run(argv, capsys)
    assert code == 2, err
    _one_line(err, f"key '{option}'", "would replace the input")
    assert (tmp_path / name).read_bytes() == before


def test_two_output_options_onto_one_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: ``identity --write-golden X --json X`` wrote the golden, then the report over
    it."""
    target = tmp_path / "x.json"
    argv = ["identity", "--a", "tiny", "--write-golden", str(target), "--json", str(target)]
    code, err = _run(argv, capsys)
    assert code == 2, err
    _one_line(err, "key '--json'", "is also --write-golden")
    assert not target.exists()


def _sv_study(t: Path, emb: np.ndarray, cohort: np.ndarray | None = None) -> Path:
    """A speaker-verification study over ``emb`` (one row per clip of ``IDS``) and GOOD's
    trials, score-normalized (s-norm) over ``cohort`` when given."""
    from audiorepro.core.hashing import sha256_file
    from tests.test_explain_trials import _study

    t.mkdir()
    dump = t / "d.npz"
    np.savez(dump, audio_embeds=emb, audio_ids=np.array(IDS))
    (t / "t.csv").write_text(GOOD)
    study = _study(t, dump, t / "t.csv", "")
    if cohort is not None:
        np.savez(t / "c.npz", audio_embeds=cohort, audio_ids=np.array([f"c{k}" for k in range(6)]))
        norm = (f'score_norm = {{ method = "s-norm", cohort = "c.npz", '
                f'cohort_sha256 = "{sha256_file(t / "c.npz")}" }}\n')  # fmt: skip
        study.write_text(study.read_text().replace('trials_sha256 = "', norm + 'trials_sha256 = "'))
    return study


def _sv_numbers(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A one-cell study's definitions and its parity block against the twin."""
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    (cell,) = bundle["cells"]
    (parity,) = bundle["verification"]["metric_parity"]["cells"]
    return cell["definitions"], parity


@pytest.mark.parametrize("where", ["a trial's clip", "a cohort row"])
def test_an_embedding_whose_norm_overflows_is_one_rule_in_the_study_and_explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """fixed: the study refused a clip whose norm overflows float64 (|x| > 1e154) while
    ``explain --trials`` scored it (rescaled: a cosine does not depend on the scale), and the
    twin's cosines of such a row were 0 (its norm inf: a cohort row gave a wrong ``twin_eer``
    in the bundle, a trial's clip would have failed parity on a correct number). One rule
    now: scaled by its largest |value| in ours and in the twin, the same numbers as the row at
    ordinary scale, parity passing."""
    rng = np.random.default_rng(7)
    emb = rng.normal(size=(len(IDS), 4))
    cohort = rng.normal(size=(6, 4))
    plain = _sv_study(tmp_path / "plain", emb, cohort)
    huge_emb, huge_cohort = emb.copy(), cohort.copy()
    if where == "a cohort row":
        huge_cohort[2] *= 1e200
    else:
        huge_emb[1] *= 1e200  # s0_1.wav, in the first trial
    huge = _sv_study(tmp_path / "huge", huge_emb, huge_cohort)
    for study in (plain, huge):
        code, err = _run(["reproduce", str(study), "--out", str(study.parent / "out")], capsys)
        assert code == 0, err
    ours, parity = _sv_numbers(huge.parent / "out")
    theirs, plain_parity = _sv_numbers(plain.parent / "out")
    assert parity["passed"] and parity["max_score_delta"] <= 1e-15
    assert parity["twin_eer"] == plain_parity["twin_eer"]
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
    if where == "a trial's clip":  # explain --trials (no cohort) scores the same row alike
        a = _explain(tmp_path / "ea", capsys, GOOD, _dump(tmp_path / "ea.npz", emb))
        b = _explain(tmp_path / "eb", capsys, GOOD, _dump(tmp_path / "eb.npz", huge_emb))
        assert a[0] == b[0] == 0, (a[1], b[1])
        assert json.loads(a[2].read_text()) == pytest.approx(json.loads(b[2].read_text()))


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_the_twin_scores_a_huge_or_tiny_row_as_ours_does(scale: float) -> None:
    """fixed: the twin's norm of such a row was inf (or 0: a division by zero), so its cosines
    were 0 and its normalized scores wrong; it now scales the row first, as its definition
    allows (the cosine does not depend on the scale)."""
    from audiorepro.metrics.verification_norm import normalize_scores
    from audiorepro.reference import verification as twin

    rng = np.random.default_rng(3)
    emb, cohort = rng.normal(size=(4, 5)), rng.normal(size=(6, 5))
    i, j = [0, 1, 2], [1, 2, 3]
    plain = twin.trial_scores(emb, i, j)
    odd_emb, odd_cohort = emb.copy(), cohort.copy()
    odd_emb[1] *= scale
    odd_cohort[2] *= scale
    assert twin.trial_scores(odd_emb, i, j) == pytest.approx(plain, rel=1e-14, abs=1e-15)
    assert trial_scores_ours(odd_emb, i, j) == pytest.approx(plain, rel=1e-14, abs=1e-15)
    want = twin.normalize_scores(plain, i, j, emb, cohort, method="s-norm")
    got = twin.normalize_scores(plain, i, j, odd_emb, odd_cohort, method="s-norm")
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    ours = normalize_scores(np.asarray(plain), np.asarray(i), np.asarray(j), odd_emb, odd_cohort,
                            method="s-norm")  # fmt: skip
    assert ours.tolist() == pytest.approx(want, rel=1e-12, abs=1e-12)

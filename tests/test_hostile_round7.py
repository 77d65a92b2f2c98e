"""Hostile round 7: round 6's open defects, then ``verify`` and ``diff`` attacked across the
kinds (retrieval, probe, zero-shot, linear probe, speaker verification, HEAR) where they could
give a false PASS: rows dropped or repeated, non-finite numbers, published values in odd
spellings, tolerances, a bundle missing files, renamed keys, a bundle of another study,
symbolic links, huge inputs. Each case asserts the right outcome; those marked "fixed" failed
before their fix.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
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
    "verify OUT --json a new file in OUT": (
        lambda t: ["verify", str(_run_folder(t)), "--json", str(t / "out" / "v.json")],
        "out/manifest.json", "--json"),
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
    _one_line(err, f"key '{option}'", "expected another path (the output would replace")
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


# --- round 7: verify and diff, where they could say PASS or identical falsely ---------------


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models-free retrieval run (two cells over fixture dumps, 8 published values)."""
    from tests.test_outputs_folder import _study

    tmp = tmp_path_factory.mktemp("round7-synthetic")
    assert main(["reproduce", str(_study(tmp)), "--out", str(tmp / "out")]) == 0
    return tmp / "out"


def _rehash(out: Path, rel: str) -> None:
    """OUT's manifest re-hashed for ``rel`` (as the run that wrote it would have)."""
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["outputs"][rel] = hashlib.sha256((out / rel).read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))


def _edit_bundle(run: Path, tmp: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    b = tmp / "b"
    shutil.copytree(run, b)
    bundle = json.loads(gzip.decompress((b / "bundle.json.gz").read_bytes()))
    change(bundle)
    (b / "bundle.json.gz").write_bytes(gzip.compress(json.dumps(bundle).encode(), mtime=0))
    _rehash(b, "bundle.json.gz")
    return b


def _mrr(bundle: dict[str, Any]) -> dict[str, Any]:
    return bundle["cells"][1]["metrics"]["a2t"]  # type: ignore[no-any-return]


def _repeat_moved_cell_first(bundle: dict[str, Any]) -> None:
    same = copy.deepcopy(bundle["cells"][1])
    _mrr(bundle)["mrr"] += 0.125
    bundle["cells"].append(same)  # the unmoved copy last: it hid the moved one


def _flatten_alike(bundle: dict[str, Any]) -> None:
    metrics = bundle["cells"][1]["metrics"]
    metrics["a2t/mrr"] = metrics["a2t"]["mrr"] + 0.125  # beside a2t: {mrr}, one path


#: An edited B (its manifest re-hashed, as a run that wrote it would have), and what
#: ``diff A B`` must say: the exit code and the start of the verdict or error line.
DIFF_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], int, str]] = {
    # fixed: the copy listed last won, so the moved cell diffed as identical (exit 0)
    "a cell repeated, its moved copy first": (_repeat_moved_cell_first, 2, "lists the number"),
    # fixed: two keys that flatten to one path: one hid the other
    "a2t/mrr beside a2t.mrr": (_flatten_alike, 2, "lists the number"),
    "a number NaN": (lambda b: _mrr(b).update(mrr=math.nan), 1, "changed, unexplained"),
    "a number as a string": (lambda b: _mrr(b).update(mrr=str(_mrr(b)["mrr"])), 1, "changed"),
    "a number true": (lambda b: _mrr(b).update(mrr=True), 1, "changed, unexplained"),
    "a number in a list": (lambda b: _mrr(b).update(mrr=[_mrr(b)["mrr"]]), 1, "changed"),
    "a number null": (lambda b: _mrr(b).update(mrr=None), 1, "changed, unexplained"),
    "a key renamed": (lambda b: _mrr(b).update(MRR=_mrr(b).pop("mrr")), 1, "changed"),
    "a cell dropped": (lambda b: b["cells"].pop(), 1, "changed, explained"),
    "every cell dropped": (lambda b: b.update(cells=[]), 1, "changed, explained"),
    "another study's name": (lambda b: b["study"].update(name="other"), 2, "the same study"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DIFF_CASES))
@pytest.mark.parametrize("order", ["A B", "B A"])
def test_diff_of_an_edited_bundle_never_says_identical(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, order: str
) -> None:
    change, code, says = DIFF_CASES[case]
    b = _edit_bundle(synthetic, tmp_path, change)
    pair = [synthetic, b] if order == "A B" else [b, synthetic]
    got = main(["diff", *map(str, pair)])
    out, err = capsys.readouterr()
    assert got == code, (out, err)
    if code == 2:
        _one_line(err, says)
    else:
        assert out.splitlines()[0].split(": ", 1)[1].startswith(says), out


def test_a_repeated_cell_is_refused_in_every_kinds_bundle() -> None:
    """fixed: the check lives where every kind's bundle is flattened (zero-shot shown; the
    retrieval and speaker-verification bundles above and below)."""
    from audiorepro.checks.diff import bundle_view
    from audiorepro.runner.kinds import diff_kinds
    from tests.test_diff import _zeroshot_bundle

    bundle = _zeroshot_bundle()
    kind = diff_kinds()[bundle["schema"]]
    assert bundle_view(bundle, kind).numbers
    bundle["cells"].append(copy.deepcopy(bundle["cells"][0]))
    with pytest.raises(ValueError, match="twice"):
        bundle_view(bundle, kind)


def test_diff_of_a_speaker_run_with_a_repeated_cell_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: as for retrieval, the copy listed last hid a moved EER."""
    emb = np.random.default_rng(7).normal(size=(len(IDS), 4))
    study = _sv_study(tmp_path / "sv", emb)
    a = tmp_path / "sv" / "out"
    assert main(["reproduce", str(study), "--out", str(a)]) == 0

    def repeat(bundle: dict[str, Any]) -> None:
        same = copy.deepcopy(bundle["cells"][0])
        bundle["cells"][0]["eer"] = 0.0
        bundle["cells"].append(same)

    b = _edit_bundle(a, tmp_path, repeat)
    capsys.readouterr()
    assert main(["diff", str(a), str(b)]) == 2
    _one_line(capsys.readouterr().err, "bundle.json.gz", "twice")


def _edit_record(out: Path, change: Callable[[dict[str, Any]], None]) -> None:
    record = json.loads((out / "verification.json").read_text())
    change(record)
    (out / "verification.json").write_text(json.dumps(record))
    _rehash(out, "verification.json")


def _edit_rows(out: Path, change: Callable[[list[dict[str, Any]]], None]) -> None:
    _edit_record(out, lambda record: change(record["golden"]["rows"]))


def _row0(rows: list[dict[str, Any]], **values: Any) -> None:
    rows[0].update(values)


#: verify OUT after an edit of OUT (re-hashed where a run would have): its exit and a word of
#: the line that must say why.
VERIFY_OUT_CASES: dict[str, tuple[Callable[[Path], None], int, str]] = {
    # fixed: a recorded PASS row was taken as it was, whatever its numbers
    "a PASS row 0.5 away": (
        lambda o: _edit_rows(o, lambda r: _row0(r, reproduced=r[0]["published"] + 0.5)),
        1, "recorded as PASS"),
    "a PASS row reproducing nothing": (
        lambda o: _edit_rows(o, lambda r: _row0(r, reproduced=None, delta=None)), 1,
        "recorded as PASS"),
    "a PASS row with a negative tolerance": (
        lambda o: _edit_rows(o, lambda r: _row0(r, tolerance=-1.0)), 1, "recorded as PASS"),
    "a PASS row with an infinite tolerance": (
        lambda o: _edit_rows(o, lambda r: _row0(r, tolerance=math.inf, reproduced=0.9)), 2,
        "verification.json"),
    "a PASS row reproducing NaN": (
        lambda o: _edit_rows(o, lambda r: _row0(r, reproduced=math.nan)), 2, "verification.json"),
    "a FAIL row": (lambda o: _edit_rows(o, lambda r: _row0(r, status="FAIL")), 1, "FAIL"),
    # fixed: a parity cell that did not pass under a metric_parity_passed flag still true
    # verified PASS (its verdict line said "parity 1/2")
    "a parity cell failed, the flag true": (
        lambda o: _edit_record(o, lambda r: r["metric_parity"]["cells"][1].update(passed=False)),
        1, "metric parity of 1 cell(s)"),
    "a parity flag false": (
        lambda o: _edit_record(o, lambda r: r.update(metric_parity_passed=False)), 1,
        "metric parity did not pass"),
    "an output removed": (lambda o: (o / "tables" / "published.csv").unlink(), 1, "missing"),
    "an output edited": (
        lambda o: (o / "report.html").write_text("<html></html>"), 1, "SHA-256 differs"),
    "another run's bundle": (
        lambda o: (o / "bundle.json.gz").write_bytes(gzip.compress(b"{}", mtime=0)), 1,
        "SHA-256 differs"),
    "a file the run did not write": (
        lambda o: (o / "tables" / "extra.csv").write_text("x\n"), 1, "not written by this run"),
    "an output replaced by a symbolic link to its copy": (
        lambda o: _link_to_copy(o / "report.html"), 1, "missing"),
    "a folder of outputs a symbolic link to its copy": (
        lambda o: _link_to_copy(o / "tables"), 1, "not written by this run"),
    "verification.json a symbolic link": (
        lambda o: _link_to_copy(o / "verification.json"), 2, "symbolic link"),
}  # fmt: skip


def _link_to_copy(path: Path) -> None:
    """``path`` (a file or a folder) replaced by a symbolic link to a copy of it, outside OUT."""
    copy_ = path.parent.parent / f"{path.name}.copy"
    if path.is_dir():
        shutil.copytree(path, copy_)
        shutil.rmtree(path)
    else:
        copy_.write_bytes(path.read_bytes())
        path.unlink()
    path.symlink_to(copy_)


@pytest.mark.parametrize("case", sorted(VERIFY_OUT_CASES))
def test_verify_out_after_an_edit_never_says_pass(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    edit, code, says = VERIFY_OUT_CASES[case]
    out = tmp_path / "out"
    shutil.copytree(synthetic, out)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0  # the copy verifies as it is
    capsys.readouterr()
    edit(out)
    got = main(["verify", str(out)])
    stdout, err = capsys.readouterr()
    assert got == code, (stdout, err)
    if code == 2:
        _one_line(err, says)
    else:
        assert says in stdout and stdout.splitlines()[-1].startswith("FAIL"), stdout


#: A published values file's one cell (the fixture dump's t2a/r@1 is 0.13), and what verify
#: --golden must say: exit, and a word of its last line (or of the error).
GOLDEN_CASES: dict[str, tuple[str, int, str]] = {
    "the value": ('tolerance = 1e-9\n"t2a/r@1" = 0.13', 0, "PASS"),
    "0.13 written 1.3e-1": ('tolerance = 1e-9\n"t2a/r@1" = 1.3e-1', 0, "PASS"),
    "0.13 written 13e-2 with an underscore tolerance": (
        'tolerance = 1_0e-10\n"t2a/r@1" = 13e-2', 0, "PASS"),
    "just beyond the tolerance": ('tolerance = 1e-3\n"t2a/r@1" = 0.1311', 1, "FAIL"),
    "nan": ('tolerance = 1e-9\n"t2a/r@1" = nan', 2, "expected a finite number"),
    "a tolerance inf": ('tolerance = inf\n"t2a/r@1" = 0.9', 2, "expected a finite number"),
    "a tolerance nan": ('tolerance = nan\n"t2a/r@1" = 0.9', 2, "expected a finite number"),
    "a negative tolerance": ('tolerance = -1e-9\n"t2a/r@1" = 0.13', 2, "tolerance >= 0"),
    "a tolerance as wide as the range": ('tolerance = 1.0\n"t2a/r@1" = 0.9', 2,
                                         "passes any value"),
    # fixed: a tolerance below the range's width but reaching both of its ends passed any
    # value (0.13 verified PASS against 0.5 +- 0.5, and against 0.9 +- 0.99)
    "0.5 +- 0.5": ('tolerance = 0.5\n"t2a/r@1" = 0.5', 2, "covers the whole range"),
    "0.9 +- 0.99": ('tolerance = 0.99\n"t2a/r@1" = 0.9', 2, "covers the whole range"),
    "0.9 +- 0.5": ('tolerance = 0.5\n"t2a/r@1" = 0.9', 1, "FAIL"),
    "a tolerance of 1e300 on a rank": ('tolerance = 1e300\n"t2a/mean_rank" = 5.0', 2,
                                       "passes any value"),
    "a percentage": ('tolerance = 0.5\n"t2a/r@1" = 13.0', 2, "outside the range"),
    "a string": ('tolerance = 1e-9\n"t2a/r@1" = "0.13"', 2, "expected a number"),
    "true": ('tolerance = 1e-9\n"t2a/r@1" = true', 2, "expected a number"),
    "a metric in capitals": ('tolerance = 1e-9\n"T2A/R@1" = 0.13', 2, "unknown metric"),
    "no value": ("tolerance = 1e-9", 2, "is empty"),
    "a value named twice": ('tolerance = 1e-9\n"t2a/r@1" = 0.13\n"t2a/r@1" = 0.5', 2, "g.toml"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_published_values_in_odd_spellings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    body, code, says = GOLDEN_CASES[case]
    tolerance, _, values = body.partition("\n")
    shutil.copyfile(DUMP, tmp_path / "d.npz")
    (tmp_path / "g.toml").write_text(
        'schema = "audiorepro.published/1"\n[[cell]]\ndump = "d.npz"\nprofile = "canonical"\n'
        f"{tolerance}\n[cell.values]\n{values}\n"
    )
    _exits(["verify", "--golden", str(tmp_path / "g.toml"), "--dumps", str(tmp_path)], capsys,
           code, says)  # fmt: skip


def _exits(argv: list[str], capsys: pytest.CaptureFixture[str], code: int, *names: str) -> None:
    """``argv`` exits ``code``; a refusal (2) is one line naming ``names``."""
    got, err = _run(argv, capsys)
    assert got == code, err
    if code == 2:
        _one_line(err, *names)


def test_verify_out_checks_a_nested_studys_pass_rows_too(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: a nested study's (the demo's ``probe/``) recorded PASS row 0.5 away from its
    published value verified PASS (its rows that did not pass show through its failures, a
    PASS row was not read)."""
    out = tmp_path / "out"
    shutil.copytree(synthetic, out)
    shutil.copytree(synthetic, out / "sub")
    record = json.loads((out / "sub" / "verification.json").read_text())
    record["golden"]["rows"][0]["reproduced"] += 0.5
    (out / "sub" / "verification.json").write_text(json.dumps(record))
    for path in sorted((out / "sub").rglob("*")):
        if path.is_file():
            _rehash(out, path.relative_to(out).as_posix())
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    stdout = capsys.readouterr().out
    assert "sub/five" in stdout and "recorded as PASS" in stdout, stdout
    assert stdout.splitlines()[-1].startswith("FAIL"), stdout


#: A speaker-verification study's published row (its cell's EER is 1.0, eer_rocch 0.5):
#: what ``verify STUDY`` must say.
SV_PUBLISHED: dict[str, tuple[str, int, str]] = {
    "the EER": ("values = { eer = 1.0 }\ntolerance = 1e-9", 0, "PASS"),
    # fixed: the toolkits' EERs, minDCF and Cllr had no range: 0.5 +- 0.5 passed any EER,
    # a negative Cllr or a minDCF of 1.5 was a value to compare
    "eer_rocch 0.5 +- 0.5": ("values = { eer_rocch = 0.5 }\ntolerance = 0.5", 2,
                             "covers the whole range"),
    "eer_kaldi 0.9 +- 0.95": ("values = { eer_kaldi = 0.9 }\ntolerance = 0.95", 2,
                              "covers the whole range"),
    "a minDCF of 1.5": ('values = { "min_dcf_p0.01" = 1.5 }\ntolerance = 0.1', 2,
                        "outside the range"),
    "a negative Cllr": ("values = { cllr = -1.0 }\ntolerance = 0.1", 2, "outside the range"),
    "an actDCF above 1": ('values = { "act_dcf_p0.01" = 1.0 }\ntolerance = 1e-9', 0, "PASS"),
    "EER in capitals": ("values = { EER = 1.0 }\ntolerance = 1e-9", 2, "unknown"),
    "an EER in percent": ("values = { eer = 50.0 }\ntolerance = 0.1", 2, "outside the range"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(SV_PUBLISHED))
def test_speaker_verification_published_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    body, code, says = SV_PUBLISHED[case]
    emb = np.random.default_rng(7).normal(size=(len(IDS), 4))
    study = _sv_study(tmp_path / "s", emb)
    study.write_text(study.read_text() + f'\n[[published]]\ncell = "c"\n{body}\nprovenance = "p"\n')
    _exits(["verify", str(study)], capsys, code, "study.toml", says)

"""Hostile declarations and data for probe studies in the published layout.

Found by attacking ``studies/probe_published_layout.toml`` as a user would: a derived number
that overflows a float, text where a derived formula expects a number, and an error while a
formula is evaluated are one line naming the file and key (exit 2, nothing in ``--out``),
never a traceback from the JSON writer; the report's unused-key listing stays linear in the
number of lines of a long JSONL history."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from audiorepro.cli import main
from audiorepro.runner.kinds.probe.gates import Gate, GateSpec, check_gate
from audiorepro.runner.kinds.probe.saved import _not_read
from tests.conftest import ROOT

STUDY = ROOT / "studies" / "probe_published_layout.toml"
TREE = ROOT / "studies" / "probe_published_layout"
CPS = "{test:cps_raw_mae} / {norm:cps_std}"
STUDY_DIR = "embedding_probe_study_20261006"  # the module's study folder inside the tree
NORM = "hf_layered_release/model/training_normalization.json"
NORM_DECL = 'norm = "../hf_layered_release/model/training_normalization.json"'
JOBS = f"{STUDY_DIR}/consolidated_benchmark/job_audit.json"


def _copy(tmp_path: Path, formula: str = CPS) -> Path:
    shutil.copytree(TREE, tmp_path / TREE.name)
    study = tmp_path / STUDY.name
    study.write_text(STUDY.read_text().replace(CPS, formula))
    return study


def _job(tmp_path: Path, field: str, value: object) -> None:
    path = tmp_path / TREE.name / JOBS
    doc = json.loads(path.read_text())
    doc["jobs"][2][field] = value
    path.write_text(json.dumps(doc))


def _refused(study: Path, capsys: pytest.CaptureFixture[str], *names: str) -> None:
    out = study.parent / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert not out.exists() or not [p for p in out.iterdir() if p.name != ".audiorepro-run"]


@pytest.mark.parametrize(
    ("formula", "norm_sd", "key"),
    [
        ("1e308 * 1e308", None, "derived[0].formula"),  # inf
        ("1e308 * 10 - 1e308 * 10", None, "derived[0].formula"),  # inf - inf: nan
        ("9" * 400 + " * 1", None, "derived[0].formula"),  # an int no float holds
        (CPS, 1e-320, "derived[0].formula"),  # a finite saved SD, a quotient beyond a float
    ],
)
def test_a_derived_number_beyond_a_float_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    formula: str,
    norm_sd: float | None,
    key: str,
) -> None:
    study = _copy(tmp_path, formula)
    if norm_sd is not None:
        (tmp_path / TREE.name / NORM).write_text(json.dumps({"cps_std": norm_sd}))
    _refused(study, capsys, str(study), f"key '{key}'", "not a finite number")


def test_a_tres_count_beyond_a_float_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _copy(tmp_path, "sum(tres({jobs:jobs[*].AllocTRES}, 'gres/gpu'))")
    _job(tmp_path, "AllocTRES", "cpu=72,gres/gpu=" + "9" * 400)
    _refused(study, capsys, str(study), "key 'derived[0].formula'", "not a finite number")


@pytest.mark.parametrize(
    ("file", "edit", "key"),
    [
        # Decimal text is read as a number (sacct's "3701"); other text is refused.
        (NORM, {"cps_std": "2.5x"}, "key 'cps_std': is text '2.5x'; expected a number"),
        (JOBS, ("ElapsedRaw", "37e1"), "key 'jobs[2].ElapsedRaw': is text '37e1'"),
        (JOBS, ("ElapsedRaw", " 3701"), "key 'jobs[2].ElapsedRaw': is text ' 3701'"),
    ],
)
def test_text_where_a_formula_wants_a_number_names_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, edit: object, key: str
) -> None:
    study = _copy(tmp_path)
    if isinstance(edit, tuple):
        _job(tmp_path, *edit)
    else:
        (tmp_path / TREE.name / file).write_text(json.dumps(edit))
    _refused(study, capsys, str(tmp_path / TREE.name / file), key)


@pytest.mark.parametrize(
    "formula",
    ["count({norm:cps_std})", "{jobs:jobs[*].ElapsedRaw}", "sum({jobs:jobs[*].ElapsedRaw} * "
     "{*test:clips})"],
)  # fmt: skip
def test_an_error_while_evaluating_names_the_study_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], formula: str
) -> None:
    study = _copy(tmp_path, formula)
    _refused(study, capsys, str(study), "key 'derived[0].formula'", formula)


def test_a_text_count_in_tres_still_reads() -> None:
    # tres() is the one reader of text: its reference must not be refused as "is str".
    from audiorepro.runner.kinds.probe.derived import evaluate, parse_formula, values_at

    f = parse_formula("sum(tres({j:x[*].t}, 'gpu'))", source=Path("s.toml"), key="k")
    doc = {"x": [{"t": "cpu=4,gpu=4"}, {"t": "gpu=2"}]}
    assert evaluate(f, lambda r: values_at(doc, r.path, "j.json", text=r.in_tres)) == 6.0


def test_unused_keys_of_a_long_history_are_found_in_linear_time() -> None:
    # Every line of a JSONL history is read (the history table): each line's location must
    # not be compared with every other line's (20,000 lines took minutes before; a fraction of
    # a second now). No clock is read: a test may not depend on the CPU; the quadratic version
    # shows as this test's duration in CI's --durations list.
    n = 20_000
    doc = {"lines": [{"epoch": i, "extra": i} for i in range(n)]}
    read = [("lines", i, "epoch") for i in range(n)]
    left = _not_read(doc, ("lines",), read)
    assert left == [("lines", i, "extra") for i in range(n)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('table = "panel:validation"', 'table = "panel:validaton"'),  # a typo'd split
        ('table = "provenance", when', 'table = "provenanse", when'),  # while `when` is false
    ],
)
def test_a_note_under_a_table_the_report_lacks_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str
) -> None:
    study = _copy(tmp_path)
    study.write_text(study.read_text().replace(old, new))
    (tmp_path / TREE.name / f"{STUDY_DIR}/consolidated_benchmark/validation_job.json").write_text(
        json.dumps({"publication_recovery": False})
    )
    _refused(study, capsys, str(study), "key 'note[")


@pytest.mark.parametrize(("flag", "shown"), [(True, True), ("false", False), (1, False)])
def test_a_note_when_shows_only_for_a_saved_true(tmp_path: Path, flag: object, shown: bool) -> None:
    study = _copy(tmp_path)
    (tmp_path / TREE.name / f"{STUDY_DIR}/consolidated_benchmark/validation_job.json").write_text(
        json.dumps({"publication_recovery": flag})
    )
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    provenance = (out / "tables" / "provenance.md").read_text()
    assert ("upload step failed" in provenance) is shown


ADAPTER = f"{STUDY_DIR}/probes/gemini/clapv2_s/linear/crema_matched_adapter.json"


@pytest.mark.parametrize(
    ("where", "value", "key"),
    [
        (("folds",), {"a": 1}, "key 'folds': is dict"),
        (("folds", 1), "x", "key 'folds[1]': is str"),
        (("folds", 1, "selected"), [1], "key 'folds[1].selected'"),
        (("folds", 1, "trials"), 5, "key 'folds[1].trials': is int"),
        (("metrics", "per_class"), {"a": 1}, "key 'metrics.per_class': is dict"),
        (("metrics", "accuracy_actor_bootstrap_95ci"), 5, "95ci': is 5"),
    ],
)
def test_an_acted_adapter_record_of_the_wrong_type_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: tuple[object, ...],
    value: object, key: str,
) -> None:  # fmt: skip
    study = _copy(tmp_path)
    path = tmp_path / TREE.name / ADAPTER
    doc = json.loads(path.read_text())
    node = doc
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    path.write_text(json.dumps(doc))
    _refused(study, capsys, str(path), key)


def test_a_missing_aliased_file_makes_the_study_incomplete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The derived CPS MAE divides by the SD of this file: without it the numbers would read
    # "not recorded" and the study pass, with no word of why.
    study = _copy(tmp_path)
    (tmp_path / TREE.name / NORM).unlink()
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 1
    verification = json.loads((tmp_path / "out" / "verification.json").read_text())
    assert f"file 'norm' ({TREE.name}/{NORM}) is missing" in verification["failures"]


@pytest.mark.parametrize(
    ("jobs", "problem"),
    [
        ([], "jobs is empty: no record to check"),
        # Records without JobName are each their own group: a later one does not hide a
        # failed one (both were grouped under "None").
        (
            [{"State": "FAILED", "ExitCode": "1:0"}, {"State": "COMPLETED", "ExitCode": "0:0"}],
            "jobs[0].State is 'FAILED', expected 'COMPLETED'",
        ),
    ],
)
def test_the_slurm_gate_checks_something_and_groups_by_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: list[object], problem: str
) -> None:
    study = _copy(tmp_path)
    # The rule without a workflow record: the last attempt per JobName (final_by).
    final_from = (
        'final_from = { file = "workflow.json", single = ["pilot_job"], '
        'last_of = ["cache_jobs", "tasks"] }'
    )
    assert final_from in study.read_text()
    study.write_text(study.read_text().replace(final_from, 'final_by = "JobName"'))
    path = tmp_path / TREE.name / JOBS
    doc = json.loads(path.read_text())
    doc["jobs"] = jobs
    path.write_text(json.dumps(doc))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 1
    failures = json.loads((tmp_path / "out" / "verification.json").read_text())["failures"]
    gate = [f for f in failures if "every final Slurm attempt COMPLETED 0:0" in f]
    assert len(gate) == 1 and problem in gate[0], failures


def _escape(tmp_path: Path, how: str) -> Path:
    """The study copied, one of its tree's files read from outside its root."""
    study = _copy(tmp_path)
    tree = tmp_path / TREE.name
    secret = tmp_path / "elsewhere" / "private.json"
    secret.parent.mkdir()
    secret.write_text(json.dumps({"cps_std": 1.0}))
    if how == "symlink":  # a saved file of one run, a link out of the tree
        target = (
            tree / STUDY_DIR / "probes" / "gemini" / "clapv2_s" / "linear" / "test_metrics.json"
        )
        target.unlink()
        target.symlink_to(secret)
    elif how == "files":
        study.write_text(
            study.read_text().replace(NORM_DECL, 'norm = "../../elsewhere/private.json"')
        )
    elif how == "gate":
        study.write_text(
            study.read_text().replace(
                'file = "workflow.json"', 'file = "../../elsewhere/private.json"'
            )
        )
    return study


@pytest.mark.parametrize(
    ("how", "key"),
    [("symlink", "runs[0].metrics.test"), ("files", "files.norm"), ("gate", "gate[0].file")],
)
def test_a_tree_file_outside_the_root_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, key: str
) -> None:
    # An auditor runs a tree someone sent: nothing outside its root is read, hashed or copied
    # into the output (where it would be published with the report).
    study = _escape(tmp_path, how)
    _refused(study, capsys, f"key '{key}'", "outside the study's root", "refused")


@pytest.mark.parametrize(
    ("jobs", "key", "what"),
    [
        ({"records": []}, "jobs", "is missing"),  # the list the study's `at` names is not there
        ({"jobs": ["a text"]}, "jobs[0]", "is str"),  # an attempt that is no record
    ],
)
def test_job_records_the_attempt_table_cannot_read_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: object, key: str, what: str
) -> None:
    # Both left the attempt table silently short ("no attempt" for a typo).
    study = _copy(tmp_path)
    (tmp_path / TREE.name / JOBS).write_text(json.dumps(jobs))
    _refused(study, capsys, JOBS, f"key '{key}'", what, "expected the list of job attempts")


def test_a_gate_item_that_is_no_record_is_not_hidden_by_a_job_named_by_its_index(
    tmp_path: Path,
) -> None:
    # A study without `jobs` still gates the file: item 0 (no record) and job "0" were one group.
    path = tmp_path / "audit.json"
    path.write_text(json.dumps({"jobs": ["text", {"JobName": "0", "State": "COMPLETED"}]}))
    spec = GateSpec(name="g", file="audit.json", each="jobs", final_by="JobName",
                    equals={"State": "COMPLETED"})  # fmt: skip
    result = check_gate(Gate("g", path, spec), tmp_path)
    assert result.checked == 2 and result.problem == "jobs[0].State is None, expected 'COMPLETED'"

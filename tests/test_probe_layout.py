"""Probe runs declared by a pattern over a tree in the published module's own layout.

``studies/probe_published_layout.toml`` reads the bundled synthetic tree
(``audiorepro.synthetic.published_layout``) with no converted file and no typed hash; the same
study pointed by its ``root`` at another tree of that layout (other numbers, more extra keys)
works unchanged. Expected numbers are read here from the tree's files with ``json``, not from
audiorepro."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from audiorepro.cli import main
from audiorepro.synthetic.published_layout import write_published_layout
from tests.conftest import ROOT

STUDY = ROOT / "studies" / "probe_published_layout.toml"
TREE = ROOT / "studies" / "probe_published_layout"
SD = "embedding_probe_study_20261006"  # the module's study folder in the tree
PROBES = [
    f"probe/{phase}/{model}/{head}"
    for phase in ("legacy", "gemini")
    for model in ("clapv2_s", "voiceclap_large_v2")
    for head in ("linear", "mlp")
]


def _bundle(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    return doc


def _leader(bundle: dict[str, Any], task: str) -> dict[str, Any]:
    return next(t for t in bundle["task_leaders"] if t["task"] == task)


def _expected_crema(tree: Path) -> tuple[str, float]:
    """The best frozen probe's matched CREMA-D accuracy, read from the tree's own files."""
    values = {
        run: json.loads(
            (tree / SD / "probes" / run[6:] / "crema_matched_adapter.json").read_text()
        )["metrics"]["accuracy"]
        for run in PROBES
    }
    best = max(values.values())
    return next(r for r in PROBES if values[r] == best), best


def test_the_bundled_tree_is_what_the_generator_writes(tmp_path: Path) -> None:
    written = write_published_layout(tmp_path / "tree")
    ours = {p.relative_to(tmp_path / "tree").as_posix(): p.read_bytes() for p in written}
    shipped = {
        p.relative_to(TREE).as_posix(): p.read_bytes() for p in TREE.rglob("*") if p.is_file()
    }
    assert ours == shipped
    assert len(STUDY.read_text().splitlines()) <= 150


def test_the_documented_command_reads_the_tree_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(TREE, tmp_path / "studies" / TREE.name)
    shutil.copy(STUDY, tmp_path / "studies" / STUDY.name)
    monkeypatch.chdir(tmp_path)
    command = (
        "audiorepro reproduce studies/probe_published_layout.toml --out reproduce-probe-layout"
    )
    assert command in STUDY.read_text()
    for doc in ("probe-layout.md", "probe.md"):
        assert command in (ROOT / "docs" / doc).read_text(), doc
    assert main(command.split()[1:]) == 0
    out = tmp_path / "reproduce-probe-layout"
    bundle = _bundle(out)
    assert [r["id"] for r in bundle["runs"]] == [
        *PROBES,
        "whisper/legacy/base",
        "whisper/legacy/small",
        "whisper/gemini/base",
        "whisper/gemini/small",
    ]
    tree = tmp_path / "studies" / TREE.name
    run, best = _expected_crema(tree)
    lead = _leader(bundle, "CREMA-D")
    assert (lead["best_candidate_run"], lead["best_candidate_value"]) == (run, best)
    # Every file read is hashed into the manifest: 99 of the tree's 101 (the study folder and
    # its three siblings: the original Whisper's public results, the release files, the tuned
    # Whisper's training history; the P3 audits and Flash tests in the tuned model's folder).
    inputs = json.loads((out / "manifest.json").read_text())["inputs"]
    files = [p for p in tree.rglob("*") if p.is_file()]
    read = {f"{TREE.name}/{p.relative_to(tree).as_posix()}": p for p in files}  # study-relative
    recorded = {k: v for k, v in inputs.items() if TREE.name in k}
    assert len(files) == 101 and len(recorded) == 99
    for name, digest in recorded.items():
        assert hashlib.sha256(read[name].read_bytes()).hexdigest() == digest
    unread = {p.relative_to(tree).as_posix() for p in files} - {
        k.split(f"{TREE.name}/", 1)[1] for k in recorded
    }
    # The tuned Whisper's COMPLETE.json: the module keeps it in its bundle only (no table).
    assert unread == {f"{SD}/whisper/gemini/{size}/COMPLETE.json" for size in ("base", "small")}
    assert (
        f"| workflow COMPLETE with no errors | {SD}/workflow.json | 1 | PASS |"
        in (out / "tables" / "gates.md").read_text()
    )
    # The byte copies are exact, extra keys included; the extras are listed as unused.
    copy = out / "measurements" / "probe_gemini_clapv2_s_mlp" / "adapter_crema.json"
    assert (
        copy.read_bytes()
        == (tree / SD / "probes/gemini/clapv2_s/mlp/crema_matched_adapter.json").read_bytes()
    )
    # The public copy is the file's bytes, not the renamed reading (rho stays rho there).
    public = out / "measurements" / "probe_gemini_clapv2_s_mlp" / "public.json"
    source = tree / SD / "probes/gemini/clapv2_s/mlp/public_metrics.json"
    assert public.read_bytes() == source.read_bytes() and b'"rho"' in public.read_bytes()
    unused = bundle["runs"][0]["unused"]
    assert unused["test"] == ["checkpoint"] and "public" not in unused  # per_family is read
    # A leader reads crema.accuracy; the acted tables read the adapter's protocol and folds
    # and the fixed mapping's confusion matrix.
    assert "adapter_crema" not in unused


def test_the_same_study_reads_another_tree_of_the_layout(tmp_path: Path) -> None:
    other = tmp_path / "other_tree"
    write_published_layout(other, variant=1)
    study = tmp_path / "study.toml"
    text = STUDY.read_text()
    assert 'root = "probe_published_layout"' in text
    study.write_text(text.replace('root = "probe_published_layout"', 'root = "other_tree"'))
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    bundle = _bundle(out)
    run, best = _expected_crema(other)
    lead = _leader(bundle, "CREMA-D")
    assert (lead["best_candidate_run"], lead["best_candidate_value"]) == (run, best)
    assert best != _expected_crema(TREE)[1]  # other numbers, read unchanged
    assert "pipeline_note" in bundle["runs"][0]["unused"]["test"]  # and its extra key kept


def _small_tree(root: Path, model_id: str = "m1") -> Path:
    (root / "bench").mkdir(parents=True)
    (root / "study.json").write_text(json.dumps({"models": [{"id": model_id}]}))
    public = {"models": {"base": {"emonet": {"all": {"n": 4, "pearson": 0.5}}}}}
    (root / "bench" / "public_scores.json").write_text(json.dumps(public))
    folder = root / "w" / "legacy" / model_id
    if "/" not in model_id:
        folder.mkdir(parents=True)
        (folder / "test.json").write_text(json.dumps({"clips": 3, "frame_f1": 0.25}))
    study = root / "s.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nkind = "probe"\nname = "small"\n\n[[runs]]\n'
        'pattern = "w/{phase}/{model}"\nid = "{phase}/{model}"\nmodel = "{model}"\n'
        'values = { phase = ["legacy"] }\n'
        'models = { part = "model", file = "study.json", list = "models", field = "id" }\n'
        "[runs.metrics]\n"
        'test = "test.json"\n'
        'public = { file = "../../../bench/public_scores.json", at = "models.base" }\n'
    )
    return study


def test_a_split_reads_a_sub_table(tmp_path: Path) -> None:
    study = _small_tree(tmp_path / "in")
    out = tmp_path / "out"
    # Read and published, but nothing declared to check against: NOTHING CHECKED (exit 1).
    assert main(["reproduce", str(study), "--out", str(out)]) == 1
    run = _bundle(out)["runs"][0]
    assert run["id"] == "legacy/m1"
    assert run["saved"]["public"]["emonet"]["all"]["pearson"] == 0.5
    assert run["saved"]["test"]["frame_f1"] == 0.25


@pytest.mark.parametrize(
    "edit, code, message",
    [
        (("m1", "a/b"), 2, "study.json: key 'models[0].id': expected a name without '/'"),
        # A number or a bare item was also "a name without '/'": the message says what it is.
        (("models", [{"id": 7}]), 2, "study.json: key 'models[0].id': is int; expected a name"),
        (("models", ["m1"]), 2, "study.json: key 'models[0]': is str; expected a table with 'id'"),
        (
            ('id = "{phase}/{model}"', 'id = "{phase}/{size}"'),
            2,
            "key 'runs[0].id': names part {size}",
        ),
        (
            ('values = { phase = ["legacy"] }', "values = {}"),
            2,
            "key 'runs[0].pattern': names part {phase}",
        ),
        (('at = "models.base"', 'at = "models.small"'), 2, "key 'models.small': is missing"),
        (('test = "test.json"', 'test = "nope.json"'), 1, "nope.json are missing"),
    ],
)
def test_malformed_patterns(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: tuple[str, Any],
    code: int,
    message: str,
) -> None:
    if edit[0] == "m1":
        study = _small_tree(tmp_path / "in", model_id=edit[1])
    elif edit[0] == "models":
        study = _small_tree(tmp_path / "in")
        (tmp_path / "in" / "study.json").write_text(json.dumps({"models": edit[1]}))
    else:
        study = _small_tree(tmp_path / "in")
        study.write_text(study.read_text().replace(*edit))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == code
    err = capsys.readouterr().err.strip()
    if code == 2:
        assert len(err.splitlines()) == 1 and message in err, err
    else:
        assert message in (tmp_path / "out" / "verification.json").read_text()


def test_a_lock_file_pins_every_file_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(TREE, tmp_path / TREE.name)
    study = tmp_path / STUDY.name
    study.write_text(
        STUDY.read_text().replace("\n[families]", '\nlock = "layout.lock"\n\n[families]')
    )
    out = ["--out", str(tmp_path / "out")]
    assert main(["reproduce", str(study), *out]) == 2
    assert "layout.lock does not exist; write it with 'audiorepro lock" in capsys.readouterr().err
    assert main(["lock", str(study)]) == 0
    pinned = json.loads((tmp_path / "layout.lock").read_text())["files"]
    assert len(pinned) == 99 and f"{TREE.name}/{SD}/study.json" in pinned
    assert main(["reproduce", str(study), *out]) == 0
    changed = tmp_path / TREE.name / SD / "probes/gemini/clapv2_s/mlp/COMPLETE.json"
    changed.write_text(changed.read_text() + " ")
    capsys.readouterr()
    assert main(["reproduce", str(study), *out[:1], str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "probes/gemini/clapv2_s/mlp/COMPLETE.json has SHA-256" in err[0]
    assert "the lock file pins" in err[0] and not (tmp_path / "out2").exists()
    assert main(["lock", str(study)]) == 0  # pinned as it is now
    extra = tmp_path / TREE.name / SD / "probes/legacy/clapv2_s/mlp/validation_metrics.json"
    extra.write_text("{}")  # an optional file that appeared
    assert main(["reproduce", str(study), *out[:1], str(tmp_path / "out3")]) == 2
    assert "validation_metrics.json is not pinned" in capsys.readouterr().err


def _audit(index: int, **fields: str) -> dict[str, Any]:
    """The bundled job records with one attempt's fields changed."""
    doc: dict[str, Any] = json.loads(
        (TREE / SD / "consolidated_benchmark/job_audit.json").read_text()
    )
    doc["jobs"][index].update(fields)
    return doc


@pytest.mark.parametrize(
    "file, doc, gate, why",
    [
        ("workflow.json", {"state": "RUNNING", "errors": []}, "workflow COMPLETE",
         "state is 'RUNNING', expected 'COMPLETE'"),
        ("workflow.json", {"state": "COMPLETE", "errors": ["upload failed"]}, "workflow COMPLETE",
         "errors is \"['upload failed']\", expected none"),
        ("workflow.json", None, "workflow COMPLETE", "workflow.json"),
        ("consolidated_benchmark/job_audit.json", _audit(8, State="FAILED", ExitCode="1:0"),
         "every final Slurm attempt", "jobs[8].State is 'FAILED', expected 'COMPLETED'"),
        ("consolidated_benchmark/job_audit.json", _audit(8, ExitCode="0:9"),
         "every final Slurm attempt", "jobs[8].ExitCode is '0:9', expected '0:0'"),
    ],
)  # fmt: skip
def test_a_failed_gate_fails_the_study_and_names_it(
    tmp_path: Path, file: str, doc: Any, gate: str, why: str
) -> None:
    shutil.copytree(TREE, tmp_path / TREE.name)
    shutil.copy(STUDY, tmp_path / STUDY.name)
    target = tmp_path / TREE.name / SD / file
    if doc is None:
        target.unlink()
    else:
        target.write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert main(["reproduce", str(tmp_path / STUDY.name), "--out", str(out)]) == 1
    failures = json.loads((out / "verification.json").read_text())["failures"]
    hit = [f for f in failures if f.startswith(f"gate '{gate}")]
    assert len(hit) == 1 and why in hit[0], failures


def test_a_repaired_attempt_passes_the_slurm_gate(tmp_path: Path) -> None:
    # The bundled records: a failed cache job and a failed Whisper task each repaired by a
    # later attempt the workflow names final, and a failed supplementary job; 7 final, PASS.
    shutil.copytree(TREE, tmp_path / TREE.name)
    shutil.copy(STUDY, tmp_path / STUDY.name)
    out = tmp_path / "out"
    assert main(["reproduce", str(tmp_path / STUDY.name), "--out", str(out)]) == 0
    gates = (out / "tables" / "gates.md").read_text()
    row = (
        f"| every final Slurm attempt COMPLETED 0:0 | {SD}/consolidated_benchmark/job_audit.json |"
    )
    assert f"{row} 7 | PASS |" in gates


def test_a_gate_key_path_is_checked_when_the_study_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / STUDY.name
    shutil.copytree(TREE, tmp_path / TREE.name)
    study.write_text(STUDY.read_text().replace('empty = ["errors"]', 'empty = ["errors["]'))
    assert main(["reproduce", str(study), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "key 'gate[0].empty[0]'" in err[0]


@pytest.mark.parametrize("exact", [True, False])
def test_the_target_count_is_exact_where_the_study_says_so(tmp_path: Path, exact: bool) -> None:
    shutil.copytree(TREE, tmp_path / TREE.name)
    study = tmp_path / STUDY.name
    text = STUDY.read_text()
    assert "exact = true" in text
    study.write_text(text if exact else text.replace("exact = true", "exact = false"))
    path = tmp_path / TREE.name / SD / "probes/gemini/clapv2_s/mlp/test_metrics.json"
    doc = json.loads(path.read_text())
    doc["per_score"].append({"score": "extra_target", "n": 3, "raw_mae": 0.5})
    path.write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == (1 if exact else 0)
    failures = json.loads((out / "verification.json").read_text())["failures"]
    expected = "completion: run probe/gemini/clapv2_s/mlp has 25 targets, exactly 24 expected"
    assert failures == ([expected] if exact else [])


def test_published_values_by_key_path_are_verified_against_the_tree(tmp_path: Path) -> None:
    # Values read here from the tree with json; one off by 0.01 must fail, the others pass.
    folder = TREE / SD / "probes/gemini/clapv2_s/mlp"
    adapter = json.loads((folder / "crema_matched_adapter.json").read_text())
    trial = adapter["folds"][1]["trials"][2]["inner_accuracy"]
    history = (folder / "metrics.jsonl").read_text().splitlines()
    loss = json.loads(history[2])["validation"]["loss"]
    golden = tmp_path / "published.toml"
    golden.write_text(
        'schema = "audiorepro.probe-published/1"\n\n[[run]]\nrun = "probe/gemini/clapv2_s/mlp"\n'
        "tolerance = 1e-9\n\n[run.values]\n"
        f'"adapter_crema:folds[fold=1].trials[2].inner_accuracy" = {trial!r}\n'
        f'"history:[epoch=3].validation.loss" = {loss!r}\n'
        f'"adapter_crema:metrics.accuracy" = {adapter["metrics"]["accuracy"] + 0.01!r}\n'
    )
    report = tmp_path / "report.json"
    args = ["verify", "--golden", str(golden), str(STUDY), "--json", str(report)]
    assert main(args) == 1
    rows = {r["metric"]: r["status"] for r in json.loads(report.read_text())["rows"]}
    assert rows == {
        "adapter_crema:folds[fold=1].trials[2].inner_accuracy": "PASS",
        "history:[epoch=3].validation.loss": "PASS",
        "adapter_crema:metrics.accuracy": "FAIL",
    }


def test_the_verdict_names_what_it_rests_on_and_every_table_shows_leaders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No run of the layout study has predictions: its verdict rests on completion and the
    gates, says so with their counts, and claims nothing recomputed; the terminal summary
    and ``verify OUT`` show the task leaders (no empty table), the verdict last."""
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["reproduce", str(STUDY), "--out", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(said) if "probe-published-layout: PASSED" in line)
    table = said[head + 1 :]
    assert table[0].split() == ["task", "metric", "leader", "value"]
    run, best = _expected_crema(TREE)
    shown = (f"{best:.4f}", f"{100 * best:.4f}")  # a percent metric is shown in percent
    assert any(run in line and any(v in line for v in shown) for line in table), table
    page = (out / "report.html").read_text()
    summary = page[page.index('id="summary"') : page.index("</div>", page.index('id="summary"'))]
    assert "recomputed from the predictions" not in summary
    gates = 2  # the workflow's and Slurm's records
    runs = len(_bundle(out)["runs"])  # every declared run of the tree
    assert (
        f"Rests on: completion of {runs} declared run(s), {gates} gate(s), 0 number(s)" in summary
    )
    assert _bundle(out)["verification"]["rests_on"] == {
        "completion": runs, "gates": gates, "parity": 0, "published": 0,
    }  # fmt: skip
    assert not (out / "tables" / "leaders.csv").exists()
    assert "<tbody></tbody>" not in page  # no empty table
    assert main(["verify", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("PASS  0 passed, 0 failed, 0 not verified; checked ")
    assert f"completion {runs} run(s), gates {gates}" in lines[-1]
    assert any(run in line for line in lines[:-1])


def test_reproduce_of_a_study_that_checked_nothing_is_not_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The layout study without its completion rule and gates (and with no predictions or
    published values) recorded no check: reproduce's closing line says NOTHING CHECKED and
    names what would give it something to check (exit 1), as ``verify OUT`` does; never
    PASSED of nothing (issue 35)."""
    text = STUDY.read_text()
    text = re.sub(r"^completion = .*\n", "", text, flags=re.M)
    text = text[: text.index("[[gate]]")]
    text = text.replace('root = "probe_published_layout"', f'root = "{TREE}"')
    study = tmp_path / "unchecked.toml"
    study.write_text(text)
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["reproduce", str(study), "--out", str(out)]) == 1
    said = capsys.readouterr().out.splitlines()
    closing = next(line for line in said if line.startswith("probe-published-layout: "))
    assert closing.startswith("probe-published-layout: NOTHING CHECKED; report ")
    assert not any("PASSED" in line for line in said)
    assert "add published values" in said[said.index(closing) + 1]
    assert main(["verify", str(out)]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("NOTHING CHECKED")

"""The probe report as published (issue 16, the rest): Markdown narrative, event classes with
support, per-prompt and per-dimension human tables, parity of adapter files and of named
speaker-vector sets, published probe values checked against saved measurements."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.cli import main
from audiorepro.metrics.events import span_class_accuracy, span_class_support
from audiorepro.reference import probe as ref
from audiorepro.render.markdown import markdown_html
from audiorepro.runner.demo import prepare_probe_demo
from tests.conftest import GOLDEN
from tests.test_probe_saved import _saved_study


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(study: Path, out: Path) -> int:
    return main(["reproduce", str(study), "--out", str(out)])


def _study(root: Path, runs: list[dict[str, Any]], top: str = "") -> Path:
    """A probe study of runs: {id, predictions (arrays), saved (split -> document)}."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ['schema = "audiorepro.study/1"', 'kind = "probe"', 'name = "t"', top, ""]
    for r in runs:
        lines += ["[[run]]", f'id = "{r["id"]}"', f'model = "{r["id"].upper()}"']
        if "predictions" in r:
            preds = root / f"{r['id']}.npz"
            np.savez(preds, **r["predictions"])
            lines += [f'predictions = "{preds.name}"', f'sha256 = "{_sha(preds)}"']
            if "cls_names" in r["predictions"]:
                lines.append('corpus = "acted"')
        for split, doc in r.get("saved", {}).items():
            path = root / f"{r['id']}__{split}.json"
            path.write_text(json.dumps(doc))
            lines += [f"[run.metrics.{split}]", f'file = "{path.name}"', f'sha256 = "{_sha(path)}"']
        lines.append("")
    study = root / "study.toml"
    study.write_text("\n".join(lines))
    return study


def _parity(out: Path) -> dict[str, Any]:
    parity: dict[str, Any] = json.loads((out / "verification.json").read_text())["metric_parity"]
    return parity


# --- Markdown narrative ---------------------------------------------------------------------

HOSTILE_MD = """\
### Where the numbers come from

Prose with *emphasis*, `code` and a [link](https://example.org/a).

- first
- second

<script>alert(1)</script>
<img src=x onerror=alert(2)>
[click](javascript:alert(3)) <a href="javascript:alert(4)">raw link</a>
"""


def test_markdown_sections_render_in_order_without_raw_html(tmp_path: Path) -> None:
    root = tmp_path / "in"
    abstract = root / "abstract.md"
    study = _saved_study(root)  # has a section "Caveats" (notes.md)
    abstract.write_text(HOSTILE_MD)
    study.write_text(
        study.read_text()
        + f'\n[[section]]\ntitle = "Abstract"\nfile = "abstract.md"\nsha256 = "{_sha(abstract)}"\n'
    )
    assert _run(study, tmp_path / "out") == 0
    report = (tmp_path / "out" / "report.html").read_text()
    # In the order given (Caveats is declared first), each under its title.
    assert report.index("<h2>Caveats</h2>") < report.index("<h2>Abstract</h2>")
    body = report[report.index("<h2>Abstract</h2>") :]
    assert "<h3>Where the numbers come from</h3>" in body and "<em>emphasis</em>" in body
    assert "<li>first</li>" in body and "<code>code</code>" in body
    assert '<a href="https://example.org/a">link</a>' in body
    # Raw HTML from the study is text, never markup; javascript: targets are not links.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in report
    assert "<img" not in report and 'href="javascript:' not in report
    assert "[click](javascript:alert(3))" in body
    # Deterministic: the same text renders to the same bytes.
    assert _run(study, tmp_path / "again") == 0
    assert (tmp_path / "again" / "report.html").read_bytes() == report.encode()


def test_markdown_html_escapes_every_tag() -> None:
    for tag in ("<iframe src=x></iframe>", "<svg onload=alert(1)>", "<style>*{}</style>"):
        html = markdown_html(tag)
        assert "<iframe" not in html and "<svg" not in html and "<style" not in html


# --- event classes and their support ----------------------------------------------------------


def _events(oracle: list[int]) -> dict[str, Any]:
    """Two clips, three reference events (classes laugh, laugh, cry), all detected."""
    ref_events = np.array([[0.0, 1.0], [2.0, 3.0], [0.5, 1.5]])
    return {
        "ev_ref": ref_events,
        "ev_pred": ref_events.copy(),
        "ev_ref_clip": np.array([0, 0, 1]),
        "ev_pred_clip": np.array([0, 0, 1]),
        "ev_ref_class": np.array([0, 0, 1]),
        "ev_oracle_class": np.array(oracle),
        "ev_pred_class": np.array([0, 0, 1]),
        "frame_true": np.array([0, 1, 1, 0]),
        "frame_prob": np.array([0.1, 0.9, 0.8, 0.2]),
    }


#: By hand: laugh has 2 reference events, one classified laugh on its span (50%); cry has 1,
#: classified cry (100%); sigh has none (no row).
CLASSES = [
    {"name": "laugh", "support": 2, "oracle_span_accuracy": 0.5},
    {"name": "cry", "support": 1, "oracle_span_accuracy": 1.0},
]


def _class_study(root: Path, classes: list[dict[str, Any]]) -> Path:
    return _study(
        root,
        [
            {
                "id": "m",
                "predictions": _events([0, 1, 1]),
                "saved": {"test": {"burst_per_class": classes}},
            }
        ],
        top='event_classes = ["laugh", "cry", "sigh"]',
    )


def test_event_classes_are_named_counted_and_proved(tmp_path: Path) -> None:
    study = _class_study(tmp_path / "in", CLASSES)
    out = tmp_path / "out"
    assert _run(study, out) == 0
    recomputed = (out / "tables" / "event_classes.csv").read_text().splitlines()
    assert recomputed == [
        "model,class,support,oracle_span_accuracy (%)",
        "M,laugh,2,50.0",
        "M,cry,1,100.0",
    ]
    saved = (out / "tables" / "burst_classes.csv").read_text().splitlines()
    assert saved[1:] == ["M,laugh,2,50.0", "M,cry,1,100.0"]
    cells = {c["metric"]: c for c in _parity(out)["cells"]}
    assert {m for m in cells if m.startswith("events/classes/")} == {
        "events/classes/0/support", "events/classes/0/oracle_span_accuracy",
        "events/classes/1/support", "events/classes/1/oracle_span_accuracy",
    }  # fmt: skip
    assert cells["events/classes/0/support"]["tolerance"] == 0.0  # counts: exact
    events = (out / "tables" / "events.csv").read_text().splitlines()
    assert events[0].startswith("model,frame_f1 (%)") and ",66.66666666666" in events[1]


def test_a_wrong_class_support_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = [dict(CLASSES[0], support=3), CLASSES[1]]
    assert _run(_class_study(tmp_path / "in", wrong), tmp_path / "out") == 1
    printed = capsys.readouterr().out
    assert "events/classes/0/support saved 3, recomputed 2" in printed


def test_repeated_event_class_names_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _class_study(tmp_path / "in", CLASSES)
    study.write_text(study.read_text().replace('"cry", "sigh"', '"cry", "laugh"'))
    assert _run(study, tmp_path / "out") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "key 'event_classes[2]'" in line and "repeats class 'laugh'" in line


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=40),
)
def test_span_class_support_matches_the_reference(pairs: list[tuple[int, int]]) -> None:
    truth, guess = [t for t, _ in pairs], [g for _, g in pairs]
    fast = span_class_support(truth, guess)
    slow = ref.span_class_support(truth, guess)
    assert {c: (v["support"], v["accuracy"]) for c, v in fast.items()} == slow
    # The support-weighted mean of the per-class accuracies is the overall accuracy.
    total = sum(v["support"] * v["accuracy"] for v in fast.values())  # type: ignore[operator]
    assert total / len(truth) == pytest.approx(span_class_accuracy(truth, guess))


# --- named speaker-vector sets, adapters --------------------------------------------------------


def _speakers() -> dict[str, Any]:
    """timbre: predicted = reference (cosine 1) on 3 valid clips; identity: one clip equal
    (cosine 1), one opposite (cosine -1), one invalid (mean 0 over n = 2)."""
    base = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    return {
        "spk_pred__timbre": base,
        "spk_ref__timbre": base.copy(),
        "spk_valid__timbre": np.array([True, True, True]),
        "spk_pred__identity": base * np.array([[1.0], [-1.0], [1.0]]),
        "spk_ref__identity": base.copy(),
        "spk_valid__identity": np.array([True, True, False]),
    }


SPEAKERS = {"timbre": {"mean": 1.0, "n": 3}, "identity": {"mean": 0.0, "n": 2}}


def test_named_speaker_sets_are_proved_each_by_name(tmp_path: Path) -> None:
    study = _study(
        tmp_path / "in",
        [{"id": "m", "predictions": _speakers(), "saved": {"test": {"speaker_cosine": SPEAKERS}}}],
    )
    out = tmp_path / "out"
    assert _run(study, out) == 0
    parity = _parity(out)
    assert {c["metric"] for c in parity["cells"]} == {
        f"speaker_sets/{s}/{f}" for s in SPEAKERS for f in ("mean_cosine", "n")
    }
    assert {c["metric"] for c in parity["reference"]} == {
        "speaker_sets/identity/mean_cosine", "speaker_sets/timbre/mean_cosine"
    }  # fmt: skip


def test_a_wrong_named_set_count_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = {**SPEAKERS, "identity": {"mean": 0.0, "n": 3}}
    study = _study(
        tmp_path / "in",
        [{"id": "m", "predictions": _speakers(), "saved": {"test": {"speaker_cosine": wrong}}}],
    )
    assert _run(study, tmp_path / "out") == 1
    assert "speaker_sets/identity/n saved 3, recomputed 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("drop", "key", "message"),
    [
        ("spk_ref__identity", "spk_ref__identity", "is missing"),
        ("spk_valid__timbre", "spk_valid__timbre", "is missing"),
    ],
)
def test_an_incomplete_named_set_is_one_line(
    tmp_path: Path, drop: str, key: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    arrays = {k: v for k, v in _speakers().items() if k != drop}
    preds = tmp_path / "preds.npz"
    np.savez(preds, **arrays)
    assert main(["probe-metrics", str(preds)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"key '{key}'" in line and message in line and "preds.npz" in line


def _adapter(accuracy: float) -> dict[str, Any]:
    # By hand: true 0 1 1 0, predicted 0 1 0 0: 3 of 4 right; recall 1 and 1/2 (balanced
    # 0.75); F1 0.8 (class 0: P 2/3, R 1) and 2/3 (class 1: P 1, R 1/2), macro 11/15.
    return {
        "metrics": {"n": 4, "accuracy": accuracy, "balanced_accuracy": 0.75,
                    "macro_f1": 11 / 15},
        "classes": ["calm", "angry"],
    }  # fmt: skip


def _adapter_run(accuracy: float) -> dict[str, Any]:
    return {
        "id": "m",
        "predictions": {
            "cls_names": np.array(["calm", "angry"]),
            "cls_true": np.array([0, 1, 1, 0]),
            "cls_pred": np.array([0, 1, 0, 0]),
        },
        "saved": {"adapter_acted": _adapter(accuracy)},
    }


def test_adapter_files_are_proved_by_the_classification_predictions(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run(_study(tmp_path / "in", [_adapter_run(0.75)]), out) == 0
    cells = _parity(out)["cells"]
    assert {(c["split"], c["metric"]) for c in cells} == {
        ("adapter_acted", f"classification/{f}")
        for f in ("n", "accuracy", "balanced_accuracy", "macro_f1")
    }
    table = (out / "tables" / "adapters.csv").read_text().splitlines()
    assert table[0] == "model,adapter,n,accuracy (%),balanced_accuracy (%),macro_f1 (%)"
    assert table[1].startswith("M,adapter_acted,4,75.0,75.0,73.33")


def test_a_wrong_adapter_accuracy_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(_study(tmp_path / "in", [_adapter_run(0.8)]), tmp_path / "out") == 1
    assert "classification/accuracy saved 0.8, recomputed 0.75" in capsys.readouterr().out


# --- human benchmarks: prompts and dimensions ---------------------------------------------------


def _human_arrays() -> dict[str, Any]:
    """Prompt p (dimension joy) separated perfectly, prompt q (calm) reversed; the cut min2
    keeps prompt p's items."""
    return {
        "hb_bench": np.array(["emo"] * 8),
        "hb_prompt": np.array(["p"] * 4 + ["q"] * 4),
        "hb_dimension": np.array(["joy"] * 4 + ["calm"] * 4),
        "hb_clip": np.array([f"c{i}" for i in range(8)]),
        "hb_score": np.array([0.1, 0.2, 0.8, 0.9, 0.9, 0.8, 0.2, 0.1]),
        "hb_label": np.array([0, 0, 1, 1, 0, 0, 1, 1]),
        "hb_cut_names": np.array(["min2"]),
        "hb_cut": np.array([[True]] * 4 + [[False]] * 4),
    }


#: By hand: rho of p is 0.894 (labels 0 0 1 1 have average ranks 1.5 1.5 3.5 3.5), of q
#: -0.894; the oracle separates p fully (1.0) and q not at all (0.5, everything one side).
RHO = 0.8944271909999159
PROMPT_P = {"prompt": "p", "n": 4, "spearman": RHO, "balanced_accuracy_oracle": 1.0}
PROMPT_Q = {"prompt": "q", "n": 4, "spearman": -RHO, "balanced_accuracy_oracle": 0.5}
JOY = {"dimension": "joy", "n": 4, "prompts": 1, "mean_prompt_spearman": RHO,
       "balanced_accuracy_oracle_per_prompt": 1.0}  # fmt: skip
CALM = {"dimension": "calm", "n": 4, "prompts": 1, "mean_prompt_spearman": -RHO,
        "balanced_accuracy_oracle_per_prompt": 0.5}  # fmt: skip


def _public(prompt_q: dict[str, Any]) -> dict[str, Any]:
    return {
        "emo": {
            "all": {"n": 8, "per_prompt": [PROMPT_P, prompt_q], "per_dimension": [JOY, CALM]},
            "min2": {"n": 4, "per_prompt": [PROMPT_P], "per_dimension": [JOY]},
            "per_emotion": [{"category": "joy", "n": 4, "mae": 0.5}],
        }
    }


def test_prompt_and_dimension_tables_with_cuts_as_rows(tmp_path: Path) -> None:
    study = _study(
        tmp_path / "in",
        [{"id": "m", "predictions": _human_arrays(), "saved": {"public": _public(PROMPT_Q)}}],
    )
    out = tmp_path / "out"
    assert _run(study, out) == 0
    prompts = (out / "tables" / "human_prompts_emo.csv").read_text().splitlines()
    assert prompts[0] == "model,cut,prompt,n,spearman,balanced_accuracy_oracle"
    assert [r.split(",")[1:4] for r in prompts[1:]] == [
        ["all", "p", "4"], ["all", "q", "4"], ["min2", "p", "4"]
    ]  # fmt: skip
    dims = (out / "tables" / "human_dimensions_emo.csv").read_text().splitlines()
    assert [r.split(",")[1:5] for r in dims[1:]] == [
        ["all", "joy", "4", "1"], ["all", "calm", "4", "1"], ["min2", "joy", "4", "1"]
    ]  # fmt: skip
    categories = (out / "tables" / "public_emo_per_emotion.csv").read_text().splitlines()
    assert categories[1].startswith("M,joy,4,0.5")
    cells = _parity(out)["cells"]
    proved = {c["metric"] for c in cells if c["passed"]}
    assert "human/emo/all/per_prompt/q/spearman" in proved
    assert "human/emo/min2/per_dimension/joy/balanced_accuracy_oracle_per_prompt" in proved
    # 3 prompt rows x 3 numbers + 3 dimension rows x 4 numbers, and the two cuts' n.
    assert len(cells) == 9 + 12 + 2 and all(c["passed"] for c in cells)
    reference = _parity(out)["reference"]
    assert any(c["metric"] == "human/emo/all/per_dimension/calm/prompts" for c in reference)


def test_a_wrong_prompt_number_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = dict(PROMPT_Q, balanced_accuracy_oracle=0.75)
    study = _study(
        tmp_path / "in",
        [{"id": "m", "predictions": _human_arrays(), "saved": {"public": _public(wrong)}}],
    )
    assert _run(study, tmp_path / "out") == 1
    assert "per_prompt/q/balanced_accuracy_oracle saved 0.75, recomputed 0.5" in (
        capsys.readouterr().out
    )


# --- verify: published probe values against saved measurements --------------------------------

PUBLISHED = GOLDEN / "published" / "probe_demo.toml"


@pytest.fixture(scope="module")
def demo_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_probe_demo(tmp_path_factory.mktemp("verify") / "inputs")


def _verify(golden: Path, study: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(["verify", "--golden", str(golden), str(study)])
    except SystemExit as exc:  # click's usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_published_probe_values_pass_against_the_demo(
    demo_study: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _verify(PUBLISHED, demo_study, capsys)
    assert code == 0, out
    assert out.splitlines()[-1] == "PASS  11 passed, 0 failed, 0 not verified"
    assert "PASS         clap-mlp/legacy  test/speaker_cosine/identity/mean" in out


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = PUBLISHED.read_text()
    assert old in text
    path = tmp_path / "published.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_a_wrong_published_value_fails_with_its_delta(
    demo_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _edited(tmp_path, '"test/frame_f1" = 0.695', '"test/frame_f1" = 0.705')
    code, out = _verify(path, demo_study, capsys)
    assert code == 1
    (line,) = [x for x in out.splitlines() if x.startswith("FAIL ") and "published" in x]
    assert "clap-mlp/legacy  test/frame_f1  published 0.705  reproduced 0.695" in line
    assert "delta -0.01  tolerance 5e-05" in line
    assert out.splitlines()[-1] == "FAIL  10 passed, 1 failed, 0 not verified"


def test_a_value_the_saved_files_lack_is_not_verified(
    demo_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _edited(tmp_path, '"test/frame_f1"', '"validation/frame_f1"')
    code, out = _verify(path, demo_study, capsys)
    assert code == 1
    assert "NOT VERIFIED" in out and "the saved measurements hold no validation/frame_f1" in out


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ('run = "clap-mlp/legacy"', 'run = "nobody"', "run[0].run", "not a run of study.toml"),
        ('"test/frame_f1" =', '"frame_f1" =', "run[0].values.frame_f1",
         "is not a saved-measurement path"),
        ("tolerance = 5e-5", "tolerance = -1.0", "run[0].tolerance", "expected a tolerance >= 0"),
        ('"test/frame_f1" = 0.695', '"test/frame_f1" = nan', "run[0].values.test/frame_f1",
         "finite"),
    ],
)  # fmt: skip
def test_a_malformed_published_probe_file_is_one_line(
    demo_study: Path,
    tmp_path: Path,
    old: str,
    new: str,
    key: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _verify(_edited(tmp_path, old, new), demo_study, capsys)
    assert code == 2
    (line,) = out.strip().splitlines()
    assert f"key '{key}'" in line and message in line and "published.toml" in line


def test_published_probe_values_need_the_study(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["verify", "--golden", str(PUBLISHED)])
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    assert "give the probe study file as TARGET" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        ({"hb_dimension": np.arange(8)}, "hb_dimension", "expected str"),
        ({"hb_dimension": np.array(["joy"] * 7)}, "hb_dimension", "has shape (7,)"),
        ({"spk_pred__a b": np.ones((2, 2))}, "spk_pred__a b", "is not a prediction-file key"),
    ],
)
def test_malformed_new_prediction_keys_are_one_line(
    tmp_path: Path,
    change: dict[str, Any],
    key: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    preds = tmp_path / "preds.npz"
    np.savez(preds, **{**_human_arrays(), **change})
    assert main(["probe-metrics", str(preds)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"key '{key}'" in line and message in line and "preds.npz" in line

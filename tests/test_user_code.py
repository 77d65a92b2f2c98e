"""A model developer's own encoder, every path that needs only audio (issue 43 items 1, 2, 6, 7;
issue 44's "encoder contract not enforced where it is read").

Encoders nobody in the kit wrote are written into a temporary folder: a HEAR module in the
working folder with a helper module beside it (docs/models.md, "A HEAR module in your working
folder", as printed), a ``py:`` file in a subfolder importing its sibling, an entry-point
plugin, registry files. The CLI runs as a subprocess from that folder with ``PYTHONPATH``
pointing at the package source only, never at the encoders' folder: what a user without
``PYTHONPATH`` gets. The contract cases (an encoder that changes its rate, raises, calls
``sys.exit``; HEAR answers on the meta device, as numpy, with varying dimensions; a malformed
entry point; a broken registry entry) run in this process: each is one line, exit 2, no
traceback, no dump. resemblyzer's wrapper equals resemblyzer's own ``preprocess_wav`` and
``embed_utterance`` to the last bit at 16 kHz and 22.05 kHz.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")

from audiorepro.cli import main
from tests.conftest import ROOT
from tests.test_documented_commands import blocks
from tests.test_evaluate import _esc50_form

PAGE, HEADING = "/".join(("docs", "models.md")), "A HEAR module in your working folder"

#: A ``py:`` encoder file importing a module beside it (``from my_helpers import ...``).
HELPER = """
import numpy as np


def spectrum(w):
    n = max(1, len(w) // 400)
    frames = np.resize(np.asarray(w, np.float64), n * 400).reshape(n, 400)
    return np.log1p(np.abs(np.fft.rfft(frames, axis=1))).mean(axis=0)
"""
PY_ENCODER = """
import numpy as np

from my_helpers import spectrum


class Enc:
    name = "my-py-encoder"
    sample_rate = 16000

    def __init__(self):
        self.proj = np.random.default_rng(3).standard_normal((201, 12))

    def embed_audio(self, waveforms):
        return np.asarray([spectrum(w) @ self.proj for w in waveforms], dtype=np.float32)

    def weight_files(self):
        return []


def make():
    return Enc()
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src")  # the package only, never the encoders' folder
    return env


def _cli(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    assert argv[0] == "audiorepro", line
    return subprocess.run(
        [sys.executable, "-m", "audiorepro", *argv[1:]], cwd=cwd, env=_env(),
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip


def _one_line(done: subprocess.CompletedProcess[str] | str) -> str:
    err = done if isinstance(done, str) else done.stderr
    lines = [x for x in err.splitlines() if x.startswith("audiorepro: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def _documented(folder: Path) -> list[str]:
    """The section's files written into ``folder`` as printed; its shell lines."""
    page = [b for b in blocks(PAGE) if b.heading == HEADING]
    python = [b.body for b in page if b.lang == "python"]
    (toml,) = [b.body for b in page if b.lang == "toml"]
    (shell,) = [b for b in page if b.lang == "bash"]
    (folder / "my_features.py").write_text(python[0] + "\n")
    (folder / "my_hear.py").write_text(python[1] + "\n")
    (folder / "my-registry.toml").write_text(toml + "\n")
    return shell.commands()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The documented folder: the HEAR module and its helper, the registry, ESC-50 in data/,
    and a py: encoder in enc/ beside its helper."""
    folder = tmp_path_factory.mktemp("user-code")
    lines = _documented(folder)
    _esc50_form(folder / "data" / "esc50")
    (folder / "enc").mkdir()
    (folder / "enc" / "my_helpers.py").write_text(textwrap.dedent(HELPER))
    (folder / "enc" / "my_enc.py").write_text(textwrap.dedent(PY_ENCODER))
    return folder, lines


def test_the_documented_hear_module_runs_as_written(work: tuple[Path, list[str]]) -> None:
    """Every line of the section, from the module's folder, no PYTHONPATH to it: the probe
    passes verify, the registry entry extracts, identity of the module and its file is
    identical, list shows the entry; the dump records no path."""
    folder, lines = work
    for line in lines:
        done = _cli(line, folder)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-3000:])
        if line.startswith("audiorepro identity"):
            assert "verdict: identical" in done.stdout
        if line.startswith("audiorepro list"):
            assert any(
                r.startswith("my-hear ") and r.endswith("here") for r in done.stdout.split("\n")
            )
    with np.load(folder / "my-hear.npz", allow_pickle=False) as z:
        meta = str(z["meta_json"])
    assert str(folder) not in meta and json.loads(meta)["format"] == "hear"
    bundle = json.loads(gzip.decompress((folder / "my-probe" / "bundle.json.gz").read_bytes()))
    (cell,) = bundle["cells"]
    assert cell["model"] == "hear:my_hear" and len(cell["folds"]) == 2
    assert str(folder) not in json.dumps(cell["model_meta"])


def test_audio_only_encoders_take_every_path_that_needs_only_audio(
    work: tuple[Path, list[str]],
) -> None:
    """A py: file importing its sibling (from another folder), a HEAR file: evaluate
    --task linear-probe, linear-probe and speaker-verification studies with extract cells;
    zero-shot is refused naming its task, and the refused run leaves OUT as it was."""
    folder, _ = work
    done = _cli(
        "audiorepro evaluate py:enc/my_enc.py:make esc50 --task linear-probe --out lp", folder
    )
    assert done.returncode == 0, done.stderr[-3000:]
    study = folder / "lp" / "cache" / "evaluate" / "study-esc50.toml"
    before = study.read_bytes()
    done = _cli("audiorepro evaluate py:enc/my_enc.py:make esc50 --out lp", folder)
    assert done.returncode == 2
    assert "zero-shot classification needs text embeddings" in _one_line(done)
    assert sorted(p.name for p in study.parent.iterdir()) == [study.name]
    assert study.read_bytes() == before
    done = _cli("audiorepro evaluate hear:my_hear.py esc50 --out refused", folder)
    assert done.returncode == 2 and "zero-shot" in _one_line(done)
    assert not (folder / "refused").exists()
    # The rerun line evaluate printed works from any folder (its files are absolute there).
    done = _cli(f"audiorepro reproduce {study} --out {folder / 'lp'}", ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    # Study cells with extract = {...}: speaker verification and a linear probe.
    esc = folder / "data" / "esc50"
    clips = sorted(p.name for p in (esc / "audio").iterdir())
    trials = ["enrollment,test,target"] + [
        f"{a},{b},{int(a.split('-')[-1] == b.split('-')[-1])}"
        for a, b in itertools.combinations(clips, 2)
    ]
    (folder / "trials.csv").write_text("\n".join(trials) + "\n")
    sha = hashlib.sha256((folder / "trials.csv").read_bytes()).hexdigest()
    labels = hashlib.sha256((esc / "esc50.csv").read_bytes()).hexdigest()
    (folder / "studies.toml").write_text(
        'schema = "audiorepro.study/1"\nkind = "speaker-verification"\nname = "sv"\n'
        '[[cell]]\nid = "hear/esc"\nmodel = "hear"\ntrials = "trials.csv"\n'
        f'trials_sha256 = "{sha}"\n'
        'extract = { model = "hear:my_hear", audio = "data/esc50/audio" }\n'
        '[[cell]]\nid = "py/esc"\nmodel = "py"\ntrials = "trials.csv"\n'
        f'trials_sha256 = "{sha}"\n'
        'extract = { model = "py:enc/my_enc.py:make", audio = "data/esc50/audio" }\n'
    )
    (folder / "lp.toml").write_text(
        'schema = "audiorepro.study/1"\nkind = "linear-probe"\nname = "lp"\n'
        '[[cell]]\nid = "hear/esc"\nmodel = "hear"\nlabels = "data/esc50/esc50.csv"\n'
        f'labels_sha256 = "{labels}"\n'
        'extract = { model = "hear:my_hear", audio = "data/esc50/audio" }\n'
    )
    for study_file in ("studies.toml", "lp.toml"):
        done = _cli(f"audiorepro reproduce {study_file} --out out-{study_file}", folder)
        assert done.returncode == 0, done.stderr[-3000:]
    sv = json.loads(gzip.decompress((folder / "out-studies.toml" / "bundle.json.gz").read_bytes()))
    assert [c["id"] for c in sv["cells"]] == ["hear/esc", "py/esc"]
    readme = (folder / "out-studies.toml" / "README.txt").read_text()
    for name in ("verification.json", "report.html", "bundle.json.gz", "dumps/", "tables/"):
        assert name in readme and (folder / "out-studies.toml" / name.rstrip("/")).exists()


# --- the contract, in this process -----------------------------------------------------------

GOOD = """
import numpy as np


class Enc:
    name = "contract"
    sample_rate = 16000

    def embed_audio(self, waveforms):
        {body}
        return np.ones((len(waveforms), 4), np.float32)

    def weight_files(self):
        return []


def make():
    return Enc()
"""

CONTRACT = {
    "rate": ("self.sample_rate = 22050", "changed its sample_rate from 16000 to 22050"),
    "raises": ("raise RuntimeError('boom')", "embed_audio failed: RuntimeError: boom"),
    "exits": ("import sys; sys.exit(0)", "embed_audio called sys.exit(0)"),
}

HEAR = """
import numpy as np
import torch


class Model(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = 4

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4{meta}))


def load_model(model_file_path=""):
    return Model()


def get_scene_embeddings(audio, model):
    out = torch.ones((audio.shape[0], 4)) * audio.abs().mean()
    {body}
    return out
"""

HEAR_CASES = {
    "meta": (", device='meta'", "", "on torch's meta device"),
    "numpy": ("", "if audio.shape[1] != 16000: return out.numpy()", "returned ndarray for a clip"),
    "dims": ("", "if audio.shape[1] != 16000: return torch.ones((1, 5))", "gave shape (1, 5)"),
}


@pytest.fixture
def clips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return _esc50_form(tmp_path / "esc50") / "audio"


@pytest.mark.parametrize("case", sorted(CONTRACT))
def test_an_encoder_breaking_the_contract_is_one_line(
    case: str, clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, expected = CONTRACT[case]
    (tmp_path / f"contract_{case}.py").write_text(textwrap.dedent(GOOD.format(body=body)))
    argv = ["extract", "--model", f"py:contract_{case}.py:make", "--audio", str(clips)]
    assert main([*argv, "--out", "d.npz"]) == 2
    assert expected in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "d.npz").exists()


@pytest.mark.parametrize("case", sorted(HEAR_CASES))
def test_a_hear_module_breaking_the_api_is_one_line(
    case: str, clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta, body, expected = HEAR_CASES[case]
    name = f"hear_{case}_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(HEAR.format(meta=meta, body=body)))
    argv = ["extract", "--model", f"hear:{name}", "--audio", str(clips), "--out", "d.npz"]
    assert main(argv) == 2
    assert expected in _one_line(capsys.readouterr().err)


def _plugin(folder: Path, dist: str, entry: str) -> None:
    info = folder / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[audiorepro.encoders]\n{entry}\n")


def test_plugins_listed_and_a_malformed_entry_point_is_one_line(
    clips: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    (site / "good_plugin_mod.py").parent.mkdir()
    (site / "good_plugin_mod.py").write_text(textwrap.dedent(GOOD.format(body="pass")))
    _plugin(site, "goodplug", "good-plug = good_plugin_mod:make")
    _plugin(site, "badplug", "bad-plug = not a module path")
    monkeypatch.syspath_prepend(str(site))
    argv = ["extract", "--model", "bad-plug", "--audio", str(clips), "--out", "d.npz"]
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert "audiorepro.encoders:bad-plug" in line and "MODULE:FACTORY" in line
    assert main(["extract", "--model", "good-plug", "--audio", str(clips), "--out", "g.npz"]) == 0
    capsys.readouterr()
    assert main(["list", "checkpoints"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any(r.startswith("good-plug ") and r.endswith(" here") for r in rows)
    assert any(r.startswith("bad-plug ") and "cannot be used" in r for r in rows)


def test_a_broken_registry_entry_fails_only_the_commands_naming_it(
    clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"reg_ok_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(GOOD.format(body="pass")))
    registry = tmp_path / "reg.toml"
    registry.write_text(
        'schema = "audiorepro.checkpoints/1"\n'
        f'[checkpoints.ok]\nformat = "py"\npath = "{name}.py"\nfactory = "make"\n'
        '[checkpoints.ok.weights]\n"x.npy" = "' + "0" * 64 + '"\n'
        '[checkpoints.broken]\nformat = "py"\nmodule = "no_such_module_here"\nfactory = "make"\n'
        '[checkpoints.broken.weights]\n"x.npy" = "' + "0" * 64 + '"\n'
    )
    argv = ["extract", "--registry", str(registry), "--audio", str(clips)]
    assert main([*argv, "--model", "broken", "--out", "b.npz"]) == 2
    assert "checkpoints.broken" in _one_line(capsys.readouterr().err)
    # The other entry is usable: it fails only on its own (absent) weights file.
    assert main([*argv, "--model", "ok", "--out", "o.npz"]) == 2
    assert "x.npy" in _one_line(capsys.readouterr().err)
    assert main(["extract", "--model", f"py:{name}.py:make", "--audio", str(clips),
                 "--out", "p.npz", "--registry", str(registry)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["list", "checkpoints", "--registry", str(registry)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any(r.startswith("broken ") and "cannot be used" in r for r in rows)


def test_list_says_not_here_of_an_entry_whose_import_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled resemblyzer entry's module ships with the kit; without the resemblyzer
    package it is not here."""
    import importlib.util

    from audiorepro.models import encoder_specs

    real = importlib.util.find_spec

    def without(name: str, *args: object) -> object:
        return None if name == "resemblyzer" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(encoder_specs.importlib.util, "find_spec", without)
    assert main(["list", "checkpoints"]) == 0
    (row,) = [r for r in capsys.readouterr().out.splitlines() if r.startswith("resemblyzer ")]
    assert row.endswith("not here: it imports resemblyzer, which is not installed")


def test_identity_names_what_differs_when_no_setting_does(
    clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two HEAR files, one weights file, another computation: the verdict and the line under
    it agree (it was "no recorded preprocessing setting differs", then "preprocessing differs")."""
    import torch

    source = HEAR.format(meta="", body="pass").replace("torch.ones(4)", "torch.arange(4.0)")
    (tmp_path / "ha.py").write_text(textwrap.dedent(source))
    (tmp_path / "hb.py").write_text(
        textwrap.dedent(
            source.replace(
                "torch.ones((audio.shape[0], 4))",
                "torch.arange(1.0, 5.0).repeat(audio.shape[0], 1)",
            )
        )
    )
    for f in ("ha.py", "hb.py"):
        text = (tmp_path / f).read_text().replace('model_file_path=""', "model_file_path")
        text = text.replace("return Model()", "m = Model(); m.load_state_dict(torch.load("
                            "model_file_path, weights_only=True)); return m")  # fmt: skip
        (tmp_path / f).write_text(text)
    torch.save({"w": torch.arange(4.0)}, tmp_path / "w.pt")
    assert main(["identity", "--a", "hear:ha.py:w.pt", "--b", "hear:hb.py:w.pt"]) == 1
    out = capsys.readouterr().out
    assert "verdict: same weights, preprocessing differs" in out
    assert "no recorded preprocessing setting differs" not in out
    assert "outside the recorded settings" in out and "encoder code" in out


# --- resemblyzer -----------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [16_000, 22_050])
def test_resemblyzers_wrapper_equals_its_own_call(rate: int, tmp_path: Path) -> None:
    """A speech clip at ``rate`` through ``extract --model resemblyzer`` equals resemblyzer's own
    ``embed_utterance(preprocess_wav(path))`` to the last bit (librosa decodes and resamples
    it in both)."""
    import librosa
    import soundfile
    from resemblyzer import VoiceEncoder, preprocess_wav

    wav, source = soundfile.read(ROOT / "fixtures" / "speech" / "spk1_01.wav")
    if rate != source:
        wav = librosa.resample(wav, orig_sr=source, target_sr=rate)
    (tmp_path / "clips").mkdir()
    clip = tmp_path / "clips" / "a.wav"
    soundfile.write(clip, wav, rate, subtype="PCM_16")
    out = tmp_path / "r.npz"
    assert (
        main(["extract", "--model", "resemblyzer", "--audio", str(clip.parent), "--out", str(out)])
        == 0
    )
    with np.load(out, allow_pickle=False) as z:
        ours, meta = z["audio_embeds"], json.loads(str(z["meta_json"]))
    own = VoiceEncoder(device="cpu", verbose=False).embed_utterance(preprocess_wav(clip))
    assert ours.dtype == np.float32 and np.array_equal(ours[0], own)
    assert meta["audio_loader"].startswith("resemblyzer's preprocess_wav: librosa")
    assert "resampler" not in meta

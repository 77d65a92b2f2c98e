"""Any encoder through the kit (issue 37): a ``py:`` module, a ``py:`` file, an installed
plugin and a HEAR 2021 module, each written here from a seed (``tests/encoder_sources.py``),
through ``extract`` (``--jobs`` too), ``evaluate``, ``identity`` and a study with its cache;
the embeddings equal the module's own direct calls; bad specs are one line."""

from __future__ import annotations

import importlib
import json
import runpy
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.audio_dump import load_audio_dump
from audiorepro.formats.dump import load_dump
from tests.conftest import ROOT
from tests.encoder_sources import Encoders, write_encoders

RATE = 16_000
CAPTIONS = ("a low hum", "a bright whistle", "soft rain noise", "two clicks", "a rising sweep")


def _clips(folder: Path, rate: int = RATE) -> Path:
    """Five seeded 16-bit clips of different lengths at ``rate`` and a Clotho caption file."""
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    rows = ["file_name,caption_1"]
    for i, caption in enumerate(CAPTIONS):
        n = int(rate * (0.5 + 0.2 * i))
        t = np.arange(n) / rate
        x = 0.3 * np.sin(2 * np.pi * (200 + 150 * i) * t) + 0.05 * rng.standard_normal(n)
        soundfile.write(folder / f"clip{i}.wav", x, rate, subtype="PCM_16")
        rows.append(f"clip{i}.wav,{caption}")
    (folder / "captions.csv").write_text("\n".join(rows) + "\n")
    return folder


def _decoded(folder: Path) -> list[np.ndarray]:
    """The clips as soundfile reads them (float32), not through the kit."""
    import soundfile

    return [
        soundfile.read(folder / f"clip{i}.wav", dtype="float32")[0] for i in range(len(CAPTIONS))
    ]


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Encoders]:
    pytest.importorskip("torch", reason="torch is not installed (extra `models`)")
    made = write_encoders(tmp_path_factory.mktemp("encoders"), "m")
    with pytest.MonkeyPatch.context() as mp:
        for folder in (made.root / "mods", made.root / "plugin"):
            mp.syspath_prepend(str(folder))
        importlib.invalidate_caches()
        yield made


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _clips(tmp_path_factory.mktemp("clips") / "clips")


def _extract(spec: str, clips: Path, out: Path, *extra: str) -> int:
    return main(["extract", "--model", spec, "--audio", str(clips), "--out", str(out), *extra])


def _direct_numpy(spec: str, encoders: Encoders) -> object:
    """The encoder object made by the module's own factory, outside the kit."""
    if spec == encoders.file_spec:
        return runpy.run_path(str(encoders.file_path))["make"]()
    module = spec.split(":")[1] if spec.startswith("py:") else f"seedplug_{spec.split('-')[1]}"
    return importlib.import_module(module).make()


@pytest.mark.parametrize("form", ["module_spec", "file_spec", "plugin_spec"])
def test_a_python_encoder_extracts_what_its_own_calls_give(
    encoders: Encoders, clips: Path, tmp_path: Path, form: str
) -> None:
    spec = getattr(encoders, form)
    out = tmp_path / "dump.npz"
    assert _extract(spec, clips, out, "--captions", str(clips / "captions.csv")) == 0
    dump = load_dump(out)
    direct = _direct_numpy(spec, encoders)
    expected_audio = direct.embed_audio(_decoded(clips))  # type: ignore[attr-defined]
    expected_text = direct.embed_text(list(CAPTIONS))  # type: ignore[attr-defined]
    assert np.array_equal(dump.audio_embeds, expected_audio)
    assert np.array_equal(dump.text_embeds, expected_text)
    meta = dump.meta
    assert meta["encoder"] == {"name": "seedenc", "sample_rate": RATE, "text_tower": True}
    assert meta["sample_rate"] == RATE and meta["format"] == "py"
    assert len(meta["encoder_code"]["source_sha256"]) == 64
    assert list(meta["weights_sha256"]) == [Path(direct.path).name]  # type: ignore[attr-defined]


def test_a_hear_module_gives_an_audio_only_dump_equal_to_its_own_calls(
    encoders: Encoders, clips: Path, tmp_path: Path
) -> None:
    import torch

    out = tmp_path / "hear.npz"
    assert _extract(encoders.hear_spec, clips, out) == 0
    dump = load_audio_dump(out)
    module = importlib.import_module(encoders.hear_spec.split(":")[1])
    model = module.load_model(str(encoders.hear_weights))
    with torch.no_grad():
        expected = np.concatenate(
            [
                module.get_scene_embeddings(torch.from_numpy(x)[None, :], model).numpy()
                for x in _decoded(clips)
            ]
        )
    assert dump.audio_ids == tuple(f"clip{i}.wav" for i in range(len(CAPTIONS)))
    assert np.array_equal(dump.audio_embeds, expected)
    assert dump.meta["encoder"]["text_tower"] is False


def test_clips_at_the_encoders_rate_arrive_sample_for_sample(
    encoders: Encoders, clips: Path, tmp_path: Path
) -> None:
    from audiorepro.formats.audio import resample

    module = importlib.import_module(encoders.module_spec.split(":")[1])
    module.RECEIVED.clear()
    assert _extract(encoders.module_spec, clips, tmp_path / "a.npz") == 0
    got = list(module.RECEIVED)
    assert len(got) == len(CAPTIONS)
    for received, decoded in zip(got, _decoded(clips), strict=True):
        assert received.dtype == np.float32 and np.array_equal(received, decoded)
    # At another rate, the kit resamples with its own recorded code (resample_poly).
    loud = _clips(tmp_path / "48k", rate=48_000)
    module.RECEIVED.clear()
    assert _extract(encoders.module_spec, loud, tmp_path / "b.npz") == 0
    import soundfile

    for i, received in enumerate(module.RECEIVED):
        x, rate = soundfile.read(loud / f"clip{i}.wav", dtype="float64")
        assert np.array_equal(received, resample(x, rate, RATE).astype(np.float32))
    meta = load_audio_dump(tmp_path / "b.npz").meta
    assert meta["resampler"].startswith("scipy.signal.resample_poly")


def test_extract_jobs_writes_the_bytes_of_one_process(
    encoders: Encoders, clips: Path, tmp_path: Path
) -> None:
    captions = ["--captions", str(clips / "captions.csv"), "--set", "batch_size=2"]
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    assert _extract(encoders.file_spec, clips, one, *captions) == 0
    assert _extract(encoders.file_spec, clips, two, *captions, "--jobs", "2") == 0
    assert one.read_bytes() == two.read_bytes()
    # audio-only parts merge too
    three, four = tmp_path / "three.npz", tmp_path / "four.npz"
    assert _extract(encoders.file_spec, clips, three, "--set", "batch_size=2") == 0
    assert _extract(encoders.file_spec, clips, four, "--set", "batch_size=2", "--jobs", "2") == 0
    assert three.read_bytes() == four.read_bytes()


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_an_audio_only_encoder_is_refused_text_work_in_one_line(
    encoders: Encoders, clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.npz"
    capsys.readouterr()
    assert _extract(encoders.hear_spec, clips, out, "--captions", str(clips / "captions.csv")) == 2
    assert "has no text tower" in _one_line(capsys.readouterr().err)
    assert not out.exists()
    data = tmp_path / "data"
    folder = data / "mine"
    folder.mkdir(parents=True)
    shutil.copytree(clips, folder / "audio", ignore=shutil.ignore_patterns("*.csv"))
    shutil.copy(clips / "captions.csv", folder / "captions.csv")
    target = tmp_path / "eval"
    argv = ["evaluate", encoders.hear_spec, "mine", "--data", str(data), "--out", str(target)]
    assert main(argv) == 2
    assert "has no text tower" in _one_line(capsys.readouterr().err)


def _direct_ranks(queries: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The rank of each query's own item (query i matches item i) by the dot product of the
    stored vectors (docs/retrieval.md), ties counted against it (pessimistic)."""
    scores = queries.astype(np.float64) @ items.astype(np.float64).T
    return np.asarray((scores >= np.diag(scores)[:, None]).sum(axis=1))  # the own item counts 1


def test_evaluate_takes_a_python_encoder_with_a_text_tower(
    encoders: Encoders, clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The verdict (PASSED: exit 0, the harness equal to the independent twin) and R@1, mean
    rank and mAP@10 of both directions, each equal to a computation from the module's own
    calls."""
    import gzip

    data = tmp_path / "data" / "mine"
    data.mkdir(parents=True)
    shutil.copytree(clips, data / "audio", ignore=shutil.ignore_patterns("*.csv"))
    shutil.copy(clips / "captions.csv", data / "captions.csv")
    out = tmp_path / "eval"
    argv = ["evaluate", encoders.file_spec, "mine", "--data", str(tmp_path / "data")]
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 0
    assert ": PASSED; report " in capsys.readouterr().out
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    assert bundle["status"]["passed"] is True
    assert bundle["verification"]["metric_parity"]["cells"][0]["passed"] is True
    direct = runpy.run_path(str(encoders.file_path))["make"]()
    audio, text = direct.embed_audio(_decoded(clips)), direct.embed_text(list(CAPTIONS))
    metrics = bundle["cells"][0]["metrics"]
    for direction, ranks in (("t2a", _direct_ranks(text, audio)),
                             ("a2t", _direct_ranks(audio, text))):  # fmt: skip
        got = metrics[direction]
        assert got["r@1"] == float(np.mean(ranks == 1)), direction
        assert got["mean_rank"] == pytest.approx(float(np.mean(ranks)), abs=1e-12)
        reciprocal = np.where(ranks <= 10, 1.0 / ranks, 0.0)  # one relevant item per query
        assert got["map@10"] == pytest.approx(float(np.mean(reciprocal)), abs=1e-12)
    assert 0 < metrics["t2a"]["r@1"] < 1  # the clips are told apart, not all alike
    assert main(["verify", str(out)]) == 0


def _study(folder: Path, model: str, clips: Path) -> Path:
    path = folder / "study.toml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(
        'schema = "audiorepro.study/1"\nname = "encoders"\ntitle = "a user encoder"\n'
        'profiles = ["canonical"]\n\n[[cell]]\nid = "enc/clips"\nmodel = "enc"\n'
        f'dataset = "clips"\n\n[cell.extract]\nmodel = "{model}"\naudio = "{clips}"\n'
        f'captions = "{clips / "captions.csv"}"\nsettings = {{ batch_size = 2 }}\n'
    )
    return path


def test_a_study_caches_by_the_encoders_code_weights_and_settings(
    encoders: Encoders, clips: Path, tmp_path: Path
) -> None:
    from audiorepro.runner.cache import extract_key
    from audiorepro.specs.study import load_study

    source = tmp_path / "enc" / "enc.py"
    source.parent.mkdir()
    shutil.copy(encoders.file_path, source)
    shutil.copy(encoders.file_path.with_suffix(".npz"), source.with_suffix(".npz"))
    spec = f"py:{source}:make"
    study_file = _study(tmp_path / "study", spec, clips)
    out = tmp_path / "out"
    assert main(["reproduce", str(study_file), "--out", str(out)]) == 0
    entries = sorted((out / "cache" / "dumps").glob("*.npz"))
    assert len(entries) == 1
    first_key = extract_key(load_study(study_file).cells[0])
    stamp = entries[0].stat().st_mtime_ns
    assert main(["reproduce", str(study_file), "--out", str(out)]) == 0  # a cache hit
    assert entries[0].stat().st_mtime_ns == stamp
    assert main(["verify", str(out)]) == 0
    # Changed code, same weights and settings: a new key, never the old embeddings.
    source.write_text(source.read_text().replace("np.log1p(", "0.5 * np.log1p("))
    second_key = extract_key(load_study(study_file).cells[0])
    assert second_key != first_key
    assert main(["reproduce", str(study_file), "--out", str(out)]) == 0
    entries = sorted((out / "cache" / "dumps").glob("*.npz"))
    assert len(entries) == 2
    new = next(e for e in entries if e.name.startswith(second_key[:32]))
    old = next(e for e in entries if e.name.startswith(first_key[:32]))
    assert np.allclose(load_dump(new).audio_embeds, 0.5 * load_dump(old).audio_embeds, rtol=1e-5)
    assert not np.array_equal(load_dump(new).audio_embeds, load_dump(old).audio_embeds)
    # Changed weights: a new key too.
    weights = source.with_suffix(".npz")
    runpy.run_path(str(source))["write_weights"](weights, 9)
    assert extract_key(load_study(study_file).cells[0]) not in (first_key, second_key)


def test_identity_compares_a_user_encoders_tensors_and_embeddings(
    encoders: Encoders, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    argv = ["identity", "--a", encoders.file_spec, "--b", encoders.file_spec]
    assert main([*argv, "--json", str(report)]) == 0
    block = json.loads(report.read_text())["checkpoint_identity"]
    assert block["verdict"] == "identical"
    assert block["weights"]["compared_by"] == "tensors"
    assert block["weights"]["tensors_compared"] == 2
    # A perturbed copy of the weights under the same code: different checkpoints.
    other = tmp_path / "other" / "my_encoder.py"
    other.parent.mkdir()
    shutil.copy(encoders.file_path, other)
    runpy.run_path(str(other))["write_weights"](other.with_suffix(".npz"), 5)
    argv = ["identity", "--a", encoders.file_spec, "--b", f"py:{other}:make"]
    capsys.readouterr()
    assert main([*argv, "--json", str(report)]) == 1
    block = json.loads(report.read_text())["checkpoint_identity"]
    assert block["verdict"] == "different checkpoints"
    assert block["weights"]["tensors_differing"] == 2
    # An audio-only HEAR module against itself: its torch weights, tensor by tensor.
    argv = ["identity", "--a", encoders.hear_spec, "--b", encoders.hear_spec]
    assert main([*argv, "--json", str(report)]) == 0
    block = json.loads(report.read_text())["checkpoint_identity"]
    assert block["verdict"] == "identical" and block["weights"]["tensors_compared"] == 2
    assert "(audio only)" in capsys.readouterr().out


BAD_ENCODER = """
import numpy as np

class Bad:
    name = "bad"
    sample_rate = 16000
    def embed_audio(self, waveforms):
        return np.zeros((len(waveforms), 4))  # float64
    def weight_files(self):
        return []

def make():
    return Bad()
"""


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("py:nosuchmodule_xyz:make", "is not importable here"),
        ("py:/nonexistent/enc.py:make", "is not a file here"),
        ("py:json", "expected py:MODULE:FACTORY"),
        ("py:json:nosuch", "has no 'nosuch'"),
        ("py:json:dumps", "dumps() failed: TypeError"),
        ("py:json:JSONDecoder", "has no name"),
        ("hear:json", "is not a HEAR 2021 module: module json has no function load_model"),
        ("hear:json:/nonexistent/w.pt", "is not a file here"),
        ("no-such-plugin", "an installed encoder plugin"),
        ("BAD", "returned float64; expected float32"),
    ],
)
def test_a_bad_spec_is_one_line_and_exit_2(
    clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, says: str
) -> None:
    if spec == "BAD":
        bad = tmp_path / "bad.py"
        bad.write_text(BAD_ENCODER)
        spec = f"py:{bad}:make"
    out = tmp_path / "out.npz"
    assert _extract(spec, clips, out) == 2
    assert says in _one_line(capsys.readouterr().err)
    assert not out.exists()


#: Run in a fresh process: the module table before and after resolving each spec.
RESOLVE_IN_A_FRESH_PROCESS = """
import json, sys
from audiorepro.models.registry import resolve_spec
before = set(sys.modules)
parsed = [resolve_spec(spec, {}) for spec in sys.argv[1:]]
print(json.dumps({"parsed": [[p.format, p.location] for p in parsed],
                  "imported": sorted(set(sys.modules) - before), "before": sorted(before)}))
"""


def test_specs_are_checked_without_running_the_users_code(
    encoders: Encoders, tmp_path: Path
) -> None:
    """A ``py:`` module, a ``hear:`` module and a plugin resolved in a fresh process (no
    earlier test imported anything there): none of the user's modules is in the module table
    after resolving, and none was before."""
    import os
    import subprocess

    from audiorepro.models.registry import resolve_spec

    specs = [encoders.module_spec, encoders.hear_spec, encoders.plugin_spec]
    user = ["seedenc_m", "hearseed_m", "seedplug_m"]
    path = [str(encoders.root / "mods"), str(encoders.root / "plugin")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE_IN_A_FRESH_PROCESS, *specs],
        env=env, capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    table = json.loads(done.stdout)
    assert table["parsed"] == [["py", "seedenc_m"], ["hear", "hearseed_m"], ["py", "seedplug_m"]]
    assert "audiorepro.models.registry" in table["before"]  # the table is the process's own
    for module in user:
        assert module not in table["before"] and module not in table["imported"], module
    noisy = tmp_path / "noisy.py"
    noisy.write_text("raise SystemExit('imported!')\n")
    assert resolve_spec(f"py:{noisy}:make", {}).location == str(noisy.resolve())


def test_a_registry_entry_names_a_python_encoder_by_its_weights_hash(
    encoders: Encoders, clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from audiorepro.core.hashing import sha256_file

    folder = tmp_path / "reg"
    folder.mkdir()
    shutil.copy(encoders.file_path, folder / "my_encoder.py")
    shutil.copy(encoders.file_path.with_suffix(".npz"), folder / "my_encoder.npz")
    digest = sha256_file(folder / "my_encoder.npz")
    registry = folder / "registry.toml"
    registry.write_text(
        'schema = "audiorepro.checkpoints/1"\n[checkpoints."mine"]\nformat = "py"\n'
        f'path = "my_encoder.py"\nfactory = "make"\n[checkpoints."mine".weights]\n'
        f'"my_encoder.npz" = "{digest}"\n'
        '[checkpoints."hearing"]\nformat = "hear"\n'
        f'module = "{encoders.hear_spec.split(":")[1]}"\nfile = "{encoders.hear_weights}"\n'
        f'[checkpoints."hearing".weights]\n"hearseed.pt" = "{sha256_file(encoders.hear_weights)}"\n'
    )
    out = tmp_path / "d.npz"
    assert _extract("mine", clips, out, "--registry", str(registry)) == 0
    assert _extract("hearing", clips, tmp_path / "h.npz", "--registry", str(registry)) == 0
    assert main(["list", "checkpoints", "--registry", str(registry)]) == 0
    listed = capsys.readouterr().out
    assert "mine" in listed and "hearing" in listed
    (folder / "my_encoder.npz").write_bytes(b"other bytes")
    assert _extract("mine", clips, tmp_path / "e.npz", "--registry", str(registry)) == 2
    assert "the registry expects" in _one_line(capsys.readouterr().err)


def test_the_documented_encoder_runs_as_written(tmp_path: Path) -> None:
    """docs/models.md, "Your own encoder": the file as printed, then its shell lines, in a
    folder holding ``my-clips``; the dump equals the module's own calls."""
    import os
    import shlex
    import subprocess

    from tests.test_documented_commands import blocks

    page = [b for b in blocks("docs/models.md") if b.heading == "Your own encoder"]
    (source,) = [b.body for b in page if b.lang == "python"]
    (shell,) = [b for b in page if b.lang == "bash"]
    (tmp_path / "my_encoder.py").write_text(source + "\n")
    clips = _clips(tmp_path / "my-clips")
    (clips / "captions.csv").unlink()  # the audio-only line reads a plain folder of clips
    for line in shell.commands():
        argv = shlex.split(line)
        assert argv[0] == "audiorepro", line
        done = subprocess.run(
            [sys.executable, "-m", "audiorepro", *argv[1:]], cwd=tmp_path, env=dict(os.environ),
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    dump = load_audio_dump(tmp_path / "my-clips.npz")
    direct = runpy.run_path(str(tmp_path / "my_encoder.py"))["make"]()
    assert np.array_equal(dump.audio_embeds, direct.embed_audio(_decoded(clips)))
    assert (ROOT / "docs" / "models.md").is_file()


def test_an_audio_only_extraction_is_cached_by_its_key(encoders: Encoders, tmp_path: Path) -> None:
    """What a kind embedding audio only uses: a key over the model and every clip, the dump
    written once, then served from the cache; another clip, another key."""
    from audiorepro.runner.cache import (
        audio_only_key,
        cache_dump_path,
        cached_audio_dump,
        extract_audio_only,
        record_entry,
    )

    clips = _clips(tmp_path / "clips")
    (clips / "captions.csv").unlink()
    cache = tmp_path / "cache"
    args = (encoders.hear_spec, None, {"batch_size": 2}, "cpu", clips)
    key = audio_only_key(*args)
    assert cached_audio_dump(cache, key) is None
    extract_audio_only(*args, cache_dump_path(cache, key), key)
    record_entry(cache, key)
    hit = cached_audio_dump(cache, key)
    assert hit is not None and hit.meta["cache_key"] == key and len(hit.audio_ids) == 5
    import soundfile

    soundfile.write(clips / "clip0.wav", np.full(800, 0.25), RATE, subtype="PCM_16")
    assert audio_only_key(*args) != key

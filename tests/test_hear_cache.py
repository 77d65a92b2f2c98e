"""A hear cell's embeddings through the extraction cache (runner.kinds.hear.entry): one entry
per (encoder, task) in heareval's per-file names, read back instead of computed, checked by its
SHA-256, computed in shards (the array tasks of ``--executor slurm``) into the same bytes, and
named by ``diff`` when the embeddings differ."""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.hear import read_task
from audiorepro.formats.hear_embeddings import read_embeddings
from audiorepro.runner.kinds.hear.frames import heareval_batches
from tests.hear_reference import build_tasks

#: A HEAR module that counts its calls (in a list its module keeps: loaded once per process),
#: and whose embeddings are raised to the power in the file POWER beside it when that exists
#: (an outside change that is neither its weights nor its code nor its inputs).
COUNTING_MODULE = """
from pathlib import Path

import torch

CALLS = []
POWER = Path(__file__).with_name("POWER")


class Model(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = 16
    timestamp_embedding_size = 16


def load_model(model_file_path=""):
    return Model()


def _power():
    return float(POWER.read_text()) if POWER.exists() else 1.0


def get_timestamp_embeddings(audio, model):
    CALLS.append(f"frames x{audio.shape[0]}")
    n = audio.shape[1] // 800
    frames = audio[:, : n * 800].reshape(audio.shape[0], n, 800)[:, :, :400]
    emb = torch.log1p(torch.fft.rfft(frames, dim=-1).abs())[:, :, :16] ** _power()
    return emb, (torch.arange(n, dtype=torch.float32) * 50.0 + 12.5).expand(audio.shape[0], n)


def get_scene_embeddings(audio, model):
    CALLS.append(f"scene x{audio.shape[0]}")
    frames = audio[:, : audio.shape[1] // 400 * 400].reshape(audio.shape[0], -1, 400)
    return torch.log1p(torch.fft.rfft(frames, dim=-1).abs())[:, :, :16].mean(dim=1) ** _power()
"""
MODULE = "hear_counting_module_t"


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tasks(tmp_path_factory.mktemp("hear-cache"))


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hear-cache-mod")
    (root / f"{MODULE}.py").write_text(COUNTING_MODULE)
    sys.path.insert(0, str(root))
    return root


def _calls() -> list[str]:
    calls: list[str] = sys.modules[MODULE].CALLS
    return calls


def _hear(tasks_dir: Path, out: Path, *tasks: str) -> list[str]:
    """``audiorepro hear`` over ``tasks``; the encoder calls it made."""
    before = len(_calls()) if MODULE in sys.modules else 0
    argv = ["hear", f"hear:{MODULE}", "--tasks-dir", str(tasks_dir), "--out", str(out)]
    for task in tasks:
        argv += ["--task", task]
    assert main(argv) == 0
    return _calls()[before:]


def _entries(out: Path) -> list[Path]:
    return sorted((out / "cache" / "dumps").glob("*.npz"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


DETERMINISTIC = ("report.html", "bundle.json.gz", "verification.json")


def task_outputs(out: Path, task: str) -> dict[str, str]:
    """SHA-256 of every file of ``OUT/<task>/`` but ``<split>.filename-timestamps.json``,
    whose rows name each file by the path it was written at, as heareval's runner does (the
    run's staging folder inside OUT)."""
    files = (p for p in sorted((out / task).rglob("*")) if p.is_file())
    return {
        p.relative_to(out).as_posix(): _sha(p)
        for p in files
        if not p.name.endswith(".filename-timestamps.json")
    }


def _same_outputs(a: Path, b: Path, tasks: tuple[str, ...]) -> None:
    for name in DETERMINISTIC:
        assert _sha(a / name) == _sha(b / name), name
    for task in tasks:
        assert task_outputs(a, task) == task_outputs(b, task)


def test_a_second_run_reads_the_entry_and_computes_nothing(
    tasks_dir: Path, module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scene and an event task: the first run embeds every clip once (one call each), the
    second (the same OUT) and a third (another OUT, the per-user store on) embed nothing and
    write the same bytes; the entry holds heareval's per-file names and the arrays written to
    OUT/<task>/."""
    tasks = ("words-v1-full", "events-v1-full")
    # a HEAR module is called in heareval's embedding batches (16 kHz, the module's rate)
    kinds = {"scene": "scene", "event": "frames"}
    batches = [
        f"{kinds[t.metadata.embedding_type]} x{len(b)}"
        for t in (read_task(tasks_dir / name) for name in tasks)
        for s in t.metadata.splits
        for b in heareval_batches(t, s, 16000)
    ]
    monkeypatch.setenv("AUDIOREPRO_EMBEDDING_CACHE", "on")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    first = tmp_path / "first"
    calls = _hear(tasks_dir, first, "words", "events")
    # one call per batch, and the load check's one call of two noise clips (docs/models.md)
    assert sorted(calls) == sorted(["scene x2", *batches])
    assert _hear(tasks_dir, first, "words", "events") == []
    other = tmp_path / "other"
    assert _hear(tasks_dir, other, "words", "events") == []  # from the per-user store
    _same_outputs(first, other, tasks)
    # The entries: heareval's per-file names, the arrays OUT/<task>/ holds, and the bundle's
    # dump_sha256 is each entry's SHA-256.
    bundle = json.loads(gzip.decompress((first / "bundle.json.gz").read_bytes()))
    by_sha = {_sha(p): p for p in _entries(first)}
    assert sorted(by_sha) == sorted(c["dump_sha256"] for c in bundle["cells"])
    for cell in bundle["cells"]:
        task = read_task(tasks_dir / cell["task"])
        saved = read_embeddings(task, first / cell["id"])
        with zipfile.ZipFile(by_sha[cell["dump_sha256"]]) as zf:
            names = set(zf.namelist())
        with np.load(by_sha[cell["dump_sha256"]], allow_pickle=False) as entry:
            meta = json.loads(str(entry["entry_json"]))
            assert meta["cache_key"][:32] == by_sha[cell["dump_sha256"]].stem
            assert meta["task"] == cell["task"] and meta["sample_rate"] == 16000
            assert meta["embedding_type"] == task.metadata.embedding_type
            assert meta["code"] == cell["model_meta"]["code"] and meta["versions"]["numpy"]
            for split in task.metadata.splits:
                for name in task.files(split):
                    assert f"{split}/{name}.embedding.npy" in names
                    got = entry[f"{split}/{name}.embedding"]
                    assert np.array_equal(got, saved[split].embeddings[name])
                    if task.metadata.embedding_type == "event":
                        stamps = entry[f"{split}/{name}.timestamps"]
                        assert np.array_equal(stamps, saved[split].timestamps[name])


def test_a_tampered_entry_is_one_line_and_computed_again(
    tasks_dir: Path, module: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _hear(tasks_dir, out, "words")
    before = _sha(out / "bundle.json.gz")
    (entry,) = _entries(out)
    entry.chmod(0o644)
    data = bytearray(entry.read_bytes())
    data[-100] ^= 1
    entry.write_bytes(bytes(data))
    capsys.readouterr()
    calls = _hear(tasks_dir, out, "words")
    words = read_task(tasks_dir / "words-v1-full")
    n_clips = sum(len(words.files(s)) for s in words.metadata.splits)
    embedded = sum(int(c.removeprefix("scene x")) for c in calls)
    assert embedded in (n_clips, n_clips + 2), calls  # computed again (and the load check)
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "does not match its record" in line]
    assert len(said) == 1 and str(entry) in said[0], err
    assert "Traceback" not in err
    assert _sha(out / "bundle.json.gz") == before
    assert _hear(tasks_dir, out, "words") == []  # the entry is whole again


def test_shards_merge_into_the_local_entry(
    tasks_dir: Path, module: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three ``extract-part`` array tasks (what ``--executor slurm`` submits) of an event
    cell, merged: the bytes of the entry a local run writes; a part of another key is
    refused in one line."""
    from audiorepro.runner.study import study_extraction
    from audiorepro.specs.study import load_study

    study = tmp_path / "hear.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "h"\nkind = "hear"\n\n[[cell]]\nid = "ev"\n'
        f'model = "hear:{MODULE}"\ntasks_dir = "{tasks_dir}"\ntask = "events"\n'
    )
    local = tmp_path / "local"
    assert main(["reproduce", str(study), "--out", str(local)]) == 0
    (entry,) = _entries(local)
    extraction = study_extraction(load_study(study))
    assert extraction is not None
    (key,) = extraction.keys().values()
    assert entry.name == f"{key[:32]}.npz"
    parts = [tmp_path / f"{i}.part.npz" for i in range(3)]
    for i, part in enumerate(parts):
        argv = ["extract-part", str(study), "--cell", "ev", "--shard", f"{i}/3"]
        assert main([*argv, "--key", key, "--out", str(part)]) == 0
    merged = tmp_path / "merged.npz"
    extraction.cell("ev").merge(parts, key, merged)
    assert merged.read_bytes() == entry.read_bytes()
    assert main([*argv, "--key", "0" * 64, "--out", str(tmp_path / "x.npz")]) == 2
    assert "changed since submission" in capsys.readouterr().err
    with pytest.raises(Exception, match="belongs to another extraction"):
        extraction.cell("ev").merge(parts, "1" * 64, tmp_path / "y.npz")


def test_diff_names_the_embedding_entry_when_embeddings_differ(
    tasks_dir: Path, module: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Embeddings that differ with the same weights, code and task (here: a file the module
    reads; in life a library or a machine) move the scores; diff names the cell's inputs,
    whose record holds the entry's SHA-256, as the cause."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert _hear(tasks_dir, a, "words")
    (module / "POWER").write_text("3.0")
    try:
        assert _hear(tasks_dir, b, "words")
    finally:
        (module / "POWER").unlink()
    (entry_a,), (entry_b,) = _entries(a), _entries(b)
    assert entry_a.name == entry_b.name and _sha(entry_a) != _sha(entry_b)  # same key
    capsys.readouterr()
    main(["diff", str(a), str(b)])
    said = capsys.readouterr().out
    assert "inputs" in said and _sha(entry_b)[:12] in said, said


def test_slurm_without_a_scheduler_is_one_line_and_leaves_no_out(
    tasks_dir: Path,
    module: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``audiorepro hear --executor slurm`` where no ``sbatch`` is on PATH: one line, exit 2,
    no output folder left behind (tests/test_scaleout.py runs it on a real Slurm)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = tmp_path / "out"
    argv = ["hear", f"hear:{MODULE}", "--tasks-dir", str(tasks_dir), "--task", "words"]
    assert main([*argv, "--out", str(out), "--executor", "slurm"]) == 2
    err = capsys.readouterr().err
    assert "no sbatch on PATH" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_an_event_cell_without_frames_is_one_line_before_any_array_task(
    tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache key reads the clips at the encoder's rate and, for an event task, needs the
    encoder's frames: a module without get_timestamp_embeddings is one line when the key is
    asked (before Slurm submits anything), naming what is missing."""
    from audiorepro.core.errors import UserError
    from audiorepro.runner.study import study_extraction
    from audiorepro.specs.study import load_study

    mods = tmp_path / "mods"
    mods.mkdir()
    source = COUNTING_MODULE.replace("def get_timestamp_embeddings", "def _no_frames")
    (mods / "hear_no_frames_t.py").write_text(source)
    sys.path.insert(0, str(mods))
    study = tmp_path / "hear.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "h"\nkind = "hear"\n\n[[cell]]\nid = "ev"\n'
        f'model = "hear:hear_no_frames_t"\ntasks_dir = "{tasks_dir}"\ntask = "events"\n'
    )
    extraction = study_extraction(load_study(study))
    assert extraction is not None
    with pytest.raises(UserError, match="get_timestamp_embeddings"):
        extraction.keys()


def test_a_computed_cell_reads_each_clip_once_before_it_embeds(
    tasks_dir: Path, module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load's check reads each clip's header and hashes its bytes from one open file; the
    cache key and the cell's ``audio_sha256`` are made from those hashes (they hashed every
    clip twice more). Python opens each clip once per run, on a cache miss (the decoding is
    libsndfile's own open) and on a hit, and ``audio_sha256`` is still one SHA-256 over a line
    ``<split>/<file> <SHA-256 of its bytes>`` per clip."""
    import builtins

    task = read_task(tasks_dir / "words-v1-full")
    clips = [
        (s, n, task.audio_dir(16000, s) / n) for s in task.metadata.splits for n in task.files(s)
    ]
    opened: list[Path] = []
    real_open = builtins.open

    def counting_open(file: object, *args: object, **kwargs: object) -> object:
        if isinstance(file, str | Path) and Path(file).suffix == ".wav":
            opened.append(Path(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setenv("AUDIOREPRO_EMBEDDING_CACHE", "off")
    monkeypatch.setattr(builtins, "open", counting_open)
    out = tmp_path / "out"
    for run in ("miss", "hit"):
        opened.clear()
        calls = _hear(tasks_dir, out, "words-v1-full")
        assert bool(calls) == (run == "miss"), run
        assert sorted(opened) == sorted(p for _, _, p in clips), run
    monkeypatch.undo()
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    lines = "".join(f"{s}/{n} {_sha(p)}\n" for s, n, p in clips)
    assert bundle["cells"][0]["audio_sha256"] == hashlib.sha256(lines.encode()).hexdigest()

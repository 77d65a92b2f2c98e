"""Scale-out on Slurm: the executor against a real single-node Slurm started by the tests.

The cluster comes from ``tools/slurm-local`` (Debian's slurmctld, slurmd and munge; accounting
off, with its sacct stand-in first on PATH). Tests that need it skip, saying why, when not root
or without the packages; ``.ci/run`` installs them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.core.io import atomic_write_bytes, npz_bytes
from audiorepro.runner.executors.extraction import StudyExtraction
from audiorepro.runner.executors.slurm import (
    Part,
    SlurmOptions,
    part_finished,
    run_slurm,
    sbatch_script,
    task_command,
    write_part_record,
)
from audiorepro.runner.study import study_extraction
from audiorepro.specs.study import load_study
from tests.conftest import ROOT, outputs

SLURM_LOCAL = ROOT / "tools" / "slurm-local"
DAEMONS = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "sbatch", "scancel")
DETERMINISTIC = ("report.html", "bundle.json.gz", "verification.json")


# --- parts and commands (no cluster needed) ------------------------------------------------


def _extraction(path: Path) -> StudyExtraction:
    """The study's cells as the executors see them (its kind describes them)."""
    extraction = study_extraction(load_study(path))
    assert extraction is not None
    return extraction


def _fake_part(path: Path, key: str, shard: tuple[int, int]) -> Part:
    info = {"kind": "audiorepro.dump-part/1", "shard": list(shard), "meta": {"cache_key": key}}
    arrays = {"audio_embeds": np.zeros((1, 2)), "part_json": np.asarray(json.dumps(info))}
    atomic_write_bytes(path, npz_bytes(arrays))
    return Part("c", shard[0], shard[1], key, path)


def test_a_part_counts_by_content_hash_not_by_existence(tmp_path: Path) -> None:
    part = _fake_part(tmp_path / "0.part.npz", "k" * 64, (0, 2))
    assert not part_finished(part)  # no record: a killed task's leftover, or a foreign file
    write_part_record(part.path)
    assert part_finished(part)
    data = bytearray(part.path.read_bytes())
    data[-1] ^= 1
    part.path.write_bytes(bytes(data))
    assert not part_finished(part)  # changed after its record was written
    other = _fake_part(tmp_path / "1.part.npz", "x" * 64, (1, 2))
    write_part_record(other.path)
    assert not part_finished(Part("c", 1, 2, "k" * 64, other.path))  # another extraction
    assert not part_finished(Part("c", 0, 2, "x" * 64, other.path))  # another shard


def _study(work: Path, tmp_path: Path, cells: int = 1) -> Path:
    """A study over the demo's tiny models and clips (absolute paths), ``cells`` extractions."""
    blocks = []
    for model, registry in (("tiny-laion", "tiny"), ("tiny-hf", "tiny"))[:cells]:
        blocks.append(
            f'[[cell]]\nid = "{model}/clips"\nmodel = "{model}"\ndataset = "clips"\n\n'
            f'[cell.extract]\nmodel = "{model}"\nregistry = "{work}/{registry}/registry.toml"\n'
            f'audio = "{work}/audio"\ncaptions = "{work}/audio/captions.csv"\n'
            "settings = { batch_size = 2 }\n"
        )
    path = tmp_path / "study" / "study.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        'schema = "audiorepro.study/1"\nname = "scaleout"\ntitle = "tiny cells on Slurm"\n'
        'profiles = ["canonical"]\ntie_policy = "pessimistic"\n'
        "bootstrap = { resamples = 200, seed = 0, level = 0.95 }\n\n" + "\n".join(blocks)
    )
    return path


def test_task_commands_with_and_without_a_container(demo: Path, tmp_path: Path) -> None:
    work = demo / "cache" / "demo"
    study = _extraction(_study(work, tmp_path))
    part = Part("tiny-laion/clips", 1, 3, "k" * 64, tmp_path / "out" / "p.part.npz")
    local = task_command(study, tmp_path / "out", part, SlurmOptions())
    assert local[:3] == [sys.executable, "-m", "audiorepro"]
    assert local[3:] == [
        "extract-part",
        str(study.source.resolve()),
        "--cell",
        "tiny-laion/clips",
        "--shard",
        "1/3",
        "--key",
        "k" * 64,
        "--out",
        str(part.path.resolve()),
    ]
    sif = tmp_path / "audiorepro.sif"
    wrapped = task_command(
        study, tmp_path / "out", part, SlurmOptions(container=sif, binds=("/scratch:/scratch",))
    )
    head = ["apptainer", "exec", "--nv", "--containall", "--cleanenv"]
    assert wrapped[:5] == head
    binds = [wrapped[i + 1] for i, x in enumerate(wrapped) if x == "--bind"]
    parts = (tmp_path / "out" / "cache" / "parts").resolve()
    assert f"{(work / 'audio').resolve()}:{(work / 'audio').resolve()}:ro" in binds
    assert f"{(work / 'tiny').resolve()}:{(work / 'tiny').resolve()}:ro" in binds
    assert "/scratch:/scratch" in binds
    # the parts folder is the only writable bind of audiorepro's own (the user's come as given)
    assert [b for b in binds if not b.endswith(":ro")] == ["/scratch:/scratch", f"{parts}:{parts}"]
    # the weights: the hub cache (HF_HUB_CACHE, set by the test suite) read-only at /hf, named
    cache = Path(os.environ["HF_HUB_CACHE"]).resolve()
    assert f"{cache}:/hf:ro" in binds
    assert wrapped[wrapped.index(f"{cache}:/hf:ro") + 1 :][:2] == ["--env", "HF_HUB_CACHE=/hf"]
    assert wrapped[wrapped.index(str(sif.resolve())) + 1 :] == ["audiorepro", *local[3:]]


def test_sbatch_template_is_valid_bash_with_the_requests(demo: Path, tmp_path: Path) -> None:
    study = _extraction(_study(demo / "cache" / "demo", tmp_path, cells=2))
    options = SlurmOptions(
        shards=3, partition="booster", account="proj", time_min=90, gpus_per_task=1
    )
    script = sbatch_script(study, tmp_path / "out", options)
    assert "#SBATCH --array=0-5%64" in script
    for line in ("--partition=booster", "--account=proj", "--time=90", "--gpus-per-task=1"):
        assert f"#SBATCH {line}" in script
    assert script.count("extract-part") == 6
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


@pytest.fixture(scope="module")
def zeroshot_study(
    tmp_path_factory: pytest.TempPathFactory, tiny_models: Callable[..., Path]
) -> Path:
    """A zero-shot study over test_esc50's ESC-50-shaped clips (9 clips of 3 classes, folds 1
    and 2) and one tiny seeded model, batches of 2: 5 audio and 2 prompt batches, so that two
    shards both hold rows."""
    pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")
    import io
    import zipfile

    from tests.test_esc50 import esc50_archive

    tmp = tmp_path_factory.mktemp("zeroshot")
    data = tmp / "esc50"
    with zipfile.ZipFile(io.BytesIO(esc50_archive())) as z:
        for name in z.namelist():
            rel = name.split("/", 1)[1]
            if rel.startswith(("audio/", "meta/")) and not name.endswith("/"):
                (data / rel).parent.mkdir(parents=True, exist_ok=True)
                (data / rel).write_bytes(z.read(name))
    registry = tiny_models(seed=0, fusion=False)  # the run's shared ones
    path = tmp / "study" / "zeroshot.toml"
    path.parent.mkdir()
    path.write_text(
        'schema = "audiorepro.study/1"\nkind = "zeroshot"\nname = "zeroshot-slurm"\n'
        f'[dataset]\nname = "esc50-tiny"\naudio = "{data}/audio"\n'
        f'metadata = "{data}/meta/esc50.csv"\nfolds = [1, 2]\n'
        'template = "This is a sound of {class}"\n'
        f'[[cell]]\nid = "tiny/esc50"\nmodel = "tiny-laion"\nregistry = "{registry}"\n'
        "settings = { batch_size = 2 }\n"
    )
    return path


def test_zeroshot_cells_are_array_tasks_with_their_dataset_bound(
    zeroshot_study: Path, tmp_path: Path
) -> None:
    study = load_study(zeroshot_study)
    extraction = _extraction(zeroshot_study)
    out = tmp_path / "out"
    script = sbatch_script(extraction, out, SlurmOptions(shards=2))
    assert "#SBATCH --array=0-1%64" in script and script.count("extract-part") == 2
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    part = Part("tiny/esc50", 0, 2, "k" * 64, out / "p.part.npz")
    wrapped = task_command(extraction, out, part, SlurmOptions(container=tmp_path / "a.sif"))
    binds = [wrapped[i + 1] for i, x in enumerate(wrapped) if x == "--bind"]
    audio = study.dataset.audio.resolve()
    assert f"{audio}:{audio}:ro" in binds
    meta = study.dataset.metadata.resolve().parent
    assert f"{meta}:{meta}:ro" in binds


def _refuses_changed_inputs(
    study: Path, cell: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``extract-part`` with a key other than the inputs' (changed since submission), or a
    cell the study does not extract: one line each, exit 2, no part written."""
    from audiorepro.cli import main

    part = tmp_path / "p.part.npz"
    argv = ["extract-part", str(study), "--cell", cell, "--shard", "0/2"]
    assert main([*argv, "--key", "0" * 64, "--out", str(part)]) == 2
    err = capsys.readouterr().err
    assert "changed since submission" in err and "Traceback" not in err
    assert main([*argv[:3], "nope", *argv[4:], "--key", "0" * 64, "--out", str(part)]) == 2
    assert "'nope' is not a cell to extract" in capsys.readouterr().err
    assert not part.exists()


def test_zeroshot_extract_part_refuses_inputs_changed_since_submission(
    zeroshot_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _refuses_changed_inputs(zeroshot_study, "tiny/esc50", tmp_path, capsys)


# --- a real local Slurm ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def slurm() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("a local Slurm needs root (munged and slurmd run as root); see .ci/run")
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        pytest.skip(
            f"Slurm is not installed ({', '.join(missing)} missing): apt-get install "
            "slurmctld slurmd slurm-client munge (.ci/run does)"
        )
    pytest.importorskip("submitit", reason="submitit is not installed (extra `slurm`)")
    state = Path(tempfile.mkdtemp(prefix="ars-", dir="/tmp"))
    subprocess.run([sys.executable, str(SLURM_LOCAL), "up", "--dir", str(state)], check=True)
    env = subprocess.run(
        [sys.executable, str(SLURM_LOCAL), "env", "--dir", str(state)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with pytest.MonkeyPatch.context() as mp:
        for line in env.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            mp.setenv(key, value)
        yield state
        subprocess.run(["scancel", "--user=root"], check=False)
    subprocess.run([sys.executable, str(SLURM_LOCAL), "down", "--dir", str(state)], check=True)
    shutil.rmtree(state, ignore_errors=True)


def _squeue(job: str) -> dict[str, str]:
    out = subprocess.run(
        ["squeue", "-h", "-r", "-t", "all", "-j", job, "-o", "%i|%T"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("|") for line in out.split())


def test_demo_on_slurm_is_byte_identical_to_local(
    slurm: Path, demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from audiorepro.cli import main

    out = tmp_path / "out"
    argv = ["reproduce", "--out", str(out), "--executor", "slurm", "--shards", "2"]
    # GPU requests go through the scheduler (its gres.conf has device-like files); the tiny
    # models still run on the CPU, as the study says.
    argv += ["--gpus-per-task", "1", "--cpus-per-task", "1", "--wait-timeout", "900"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "submitting 6 of 6 extraction part(s)" in said
    assert outputs(out, DETERMINISTIC) == outputs(demo, DETERMINISTIC)
    assert outputs(out / "probe", DETERMINISTIC) == outputs(demo / "probe", DETERMINISTIC)
    # The job's files are named "<job id>_<task>_..."; submitit keeps other files there too
    # (".submission..."), and a folder's listing has no order: pick by name.
    logs = sorted(p.name for p in (out / "slurm").iterdir() if p.name[:1].isdigit())
    job = logs[0].split("_")[0]
    detail = subprocess.run(
        ["scontrol", "show", "job", f"{job}_0"], capture_output=True, text=True, check=True
    ).stdout
    assert "gres/gpu=1" in detail or "gres:gpu:1" in detail, detail
    # Everything is finished now: a rerun submits nothing and writes the same bytes.
    assert main(argv) == 0
    assert "submitting" not in capsys.readouterr().out
    assert outputs(out, DETERMINISTIC) == outputs(demo, DETERMINISTIC)


def _kill_when_running(job_ids: list[str], signal: str, shard: int) -> None:
    """Wait (bounded) until the array task for ``shard`` runs, then send it ``signal``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if job_ids:
            task = job_ids[shard]
            if _squeue(task.split("_")[0]).get(task) == "RUNNING":
                subprocess.run(["scancel", f"--signal={signal}", "--full", task], check=True)
                return
        time.sleep(0.2)
    raise AssertionError("the task never ran")


def _in_thread(
    study: Any, out: Path, options: SlurmOptions
) -> tuple[threading.Thread, dict[str, Any], list[str]]:
    """run_slurm in a thread; the job ids appear in the returned list once submitted."""
    import audiorepro.runner.executors.slurm as scaleout

    result: dict[str, Any] = {}
    ids: list[str] = []
    submit = scaleout.submit

    def recording_submit(*args: Any, **kwargs: Any) -> list[Any]:
        jobs = submit(*args, **kwargs)
        ids.extend(j.job_id for j in jobs)
        return jobs

    def target() -> None:
        scaleout.submit = recording_submit  # type: ignore[assignment]
        try:
            result["outcome"] = run_slurm(study, out, options, say=lambda s: None)
        except UserError as exc:
            result["error"] = exc
        finally:
            scaleout.submit = submit  # type: ignore[assignment]

    thread = threading.Thread(target=target)
    thread.start()
    return thread, result, ids


def test_a_killed_task_is_reported_and_only_its_part_is_rerun(
    slurm: Path, demo: Path, tmp_path: Path
) -> None:
    study = _extraction(_study(demo / "cache" / "demo", tmp_path))
    out = tmp_path / "out"
    # Each task waits 3 s before extracting, so that shard 0 is surely killed mid-run.
    options = SlurmOptions(shards=2, folder=tmp_path / "slurm", setup=("sleep 3",), poll_s=0.5)
    thread, result, ids = _in_thread(study, out, options)
    _kill_when_running(ids, "KILL", 0)
    thread.join(timeout=300)
    assert not thread.is_alive()
    outcome = result["outcome"]
    (failed,) = outcome.failed
    assert failed.startswith(f"cell tiny-laion/clips shard 0/2: job {ids[0]} ")
    assert any(state in failed for state in ("FAILED", "CANCELLED")), failed
    assert "log " in failed and str(tmp_path / "slurm") in failed
    assert not list((out / "cache" / "dumps").glob("*.npz"))  # nothing merged
    parts = sorted((out / "cache" / "parts").rglob("*.part.npz"))
    assert [p.name for p in parts] == ["0001-of-0002.part.npz"]
    # The rerun submits only shard 0 and then merges both.
    again = run_slurm(study, out, SlurmOptions(shards=2, folder=tmp_path / "slurm2", poll_s=0.5))
    assert [p.shard for p in again.submitted] == [0]
    assert again.failed == []
    (merged,) = (out / "cache" / "dumps").glob("*.npz")
    (local,) = [p for p in (demo / "cache" / "dumps").glob("*.npz") if p.name == merged.name]
    assert merged.read_bytes() == local.read_bytes()  # same as the unsharded local extraction


def test_cancelled_and_overdue_jobs_never_hang_the_runner(
    slurm: Path, demo: Path, tmp_path: Path
) -> None:
    study = _extraction(_study(demo / "cache" / "demo", tmp_path))
    # Tasks that would sit for a minute: the wait gives up after its bound, naming them.
    slow = SlurmOptions(shards=2, folder=tmp_path / "a", setup=("sleep 60",), poll_s=0.5)
    start = time.monotonic()
    with pytest.raises(UserError, match=r"gave up after 3 s waiting for 2 array task\(s\)"):
        run_slurm(study, tmp_path / "a-out", replace(slow, wait_timeout_s=3))
    assert time.monotonic() - start < 60
    subprocess.run(["scancel", "--user=root"], check=True)
    # Cancelled while running: reported as such, promptly.
    opts = SlurmOptions(shards=2, folder=tmp_path / "b", setup=("sleep 60",), poll_s=0.5)
    thread, result, ids = _in_thread(study, tmp_path / "b-out", opts)
    deadline = time.monotonic() + 60
    while not ids and time.monotonic() < deadline:
        time.sleep(0.2)
    subprocess.run(["scancel", ids[0].split("_")[0]], check=True)
    thread.join(timeout=60)
    assert not thread.is_alive(), "the runner hung on a cancelled job"
    failed = result["outcome"].failed
    assert len(failed) == 2 and all("CANCELLED" in line for line in failed), failed


def test_extract_part_refuses_inputs_changed_since_submission(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = _study(demo / "cache" / "demo", tmp_path)
    _refuses_changed_inputs(study, "tiny-laion/clips", tmp_path, capsys)


def test_hand_submitted_template_then_reproduce_submits_nothing(
    slurm: Path, demo: Path, tmp_path: Path
) -> None:
    study = _extraction(_study(demo / "cache" / "demo", tmp_path))
    out = tmp_path / "out"
    options = SlurmOptions(shards=2, folder=tmp_path / "logs", gpus_per_task=1)
    script = tmp_path / "extract.sbatch"
    script.write_text(sbatch_script(study, out, options))
    (tmp_path / "logs").mkdir()
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=True
    )
    job = submitted.stdout.strip()
    deadline = time.monotonic() + 300
    while any(s in ("PENDING", "RUNNING") for s in _squeue(job).values()):
        assert time.monotonic() < deadline, _squeue(job)
        time.sleep(0.5)
    assert set(_squeue(job).values()) == {"COMPLETED"}, _squeue(job)
    outcome = run_slurm(study, out, options, say=lambda s: None)
    assert outcome.submitted == [] and outcome.failed == []
    (merged,) = (out / "cache" / "dumps").glob("*.npz")
    assert merged.read_bytes() == (demo / "cache" / "dumps" / merged.name).read_bytes()


def test_zeroshot_study_on_slurm_is_byte_identical_to_local(
    slurm: Path, zeroshot_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A zero-shot cell as a two-task array: the merged dump, and every output after it, are
    the bytes of a local run; a rerun submits nothing (the cache has the dump)."""
    from audiorepro.cli import main

    local, out = tmp_path / "local", tmp_path / "out"
    assert main(["reproduce", str(zeroshot_study), "--out", str(local)]) == 0
    argv = ["reproduce", str(zeroshot_study), "--out", str(out), "--executor", "slurm"]
    argv += ["--shards", "2", "--wait-timeout", "900"]
    capsys.readouterr()
    assert main(argv) == 0
    assert "submitting 2 of 2 extraction part(s)" in capsys.readouterr().out
    names = (*DETERMINISTIC, "dumps/tiny_esc50.npz")
    assert outputs(out, names) == outputs(local, names)
    parts = sorted((out / "cache" / "parts").rglob("*.part.npz"))
    assert [p.name for p in parts] == ["0000-of-0002.part.npz", "0001-of-0002.part.npz"]
    assert main(argv) == 0
    assert "submitting" not in capsys.readouterr().out
    assert outputs(out, names) == outputs(local, names)


def test_speech_extraction_as_a_slurm_array_is_the_local_dump(slurm: Path, tmp_path: Path) -> None:
    """resemblyzer's real weights on the fixture speech (extra ``speech``): three array tasks,
    each one shard of whole batches, merged, give the bytes of the local extraction."""
    from audiorepro.cli import main

    speech = ROOT / "fixtures" / "speech"
    base = [sys.executable, "-m", "audiorepro", "extract", "--model", "resemblyzer"]
    base += ["--audio", str(speech)]
    whole = tmp_path / "whole.npz"
    assert main([*base[3:], "--out", str(whole)]) == 0
    parts = tmp_path / "parts"
    parts.mkdir()
    task = " ".join(base) + " --shard ${SLURM_ARRAY_TASK_ID}/3"
    task += f" --out {parts}/${{SLURM_ARRAY_TASK_ID}}.part.npz"
    log = f"--output={tmp_path}/%A_%a.log"
    cmd = ["sbatch", "--wait", "--array=0-2", "--cpus-per-task=1", log, "--wrap", task]
    subprocess.run(cmd, check=True, timeout=900, capture_output=True)
    found = sorted(parts.glob("*.part.npz"))
    assert [p.name for p in found] == ["0.part.npz", "1.part.npz", "2.part.npz"]
    assert main(["merge", *map(str, found), "--out", str(tmp_path / "merged.npz")]) == 0
    assert (tmp_path / "merged.npz").read_bytes() == whole.read_bytes()


def test_the_speaker_verification_study_on_slurm_is_byte_identical_to_local(
    slurm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled speaker-verification study (resemblyzer's real weights on the fixture
    speech, extra ``speech``) as a three-task array: the merged audio-only dump and every
    output after it are the bytes of a local run; a rerun submits nothing (the cache has the
    dump, checked as an audio-only entry)."""
    from audiorepro.cli import main

    study = ROOT / "studies" / "speaker_verification.toml"
    local, out = tmp_path / "local", tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(local)]) == 0
    argv = ["reproduce", str(study), "--out", str(out), "--executor", "slurm"]
    argv += ["--shards", "3", "--wait-timeout", "900"]
    capsys.readouterr()
    assert main(argv) == 0
    assert "submitting 3 of 3 extraction part(s)" in capsys.readouterr().out
    names = (*DETERMINISTIC, "dumps/resemblyzer_speech.npz")
    assert outputs(out, names) == outputs(local, names)
    assert main(argv) == 0
    assert "submitting" not in capsys.readouterr().out
    assert outputs(out, names) == outputs(local, names)


def test_a_python_encoder_study_on_slurm_is_byte_identical_to_local(
    slurm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user's ``py:`` encoder (a file nobody in the kit wrote) as array tasks: the executor
    asks the study's extraction, never the encoder's family; the outputs are a local run's."""
    from audiorepro.cli import main
    from tests.encoder_sources import write_encoders
    from tests.test_encoders import _clips, _study

    encoders = write_encoders(tmp_path / "enc", "slurm")
    clips = _clips(tmp_path / "clips")
    study = _study(tmp_path / "study", encoders.file_spec, clips)
    local, out = tmp_path / "local", tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(local)]) == 0
    argv = ["reproduce", str(study), "--out", str(out), "--executor", "slurm"]
    argv += ["--shards", "2", "--wait-timeout", "900"]
    capsys.readouterr()
    assert main(argv) == 0
    assert "submitting 2 of 2 extraction part(s)" in capsys.readouterr().out
    assert outputs(out, DETERMINISTIC) == outputs(local, DETERMINISTIC)


def test_a_trec_eval_array_task_compiles_nothing(slurm: Path, tmp_path: Path) -> None:
    """Issue 48: each task of a Slurm array is a fresh process (on a fresh node, numba's cache
    would be empty): its first trec-eval answers from the kernels compiled into the package,
    imports no numba and writes nothing to numba's cache (an empty read-only folder here)."""
    from tests.test_trec_native import EXPECTED, PROBE, _inputs

    qrels, run, cache = _inputs(tmp_path / "data")
    probe = tmp_path / "data" / "probe.py"
    probe.write_text(PROBE)
    task = f"NUMBA_CACHE_DIR={cache} {sys.executable} {probe} {qrels} {run}"
    out = f"--output={tmp_path}/%a.out"
    err = f"--error={tmp_path}/%a.err"
    cmd = ["sbatch", "--wait", "--array=0-1", "--cpus-per-task=1", out, err, "--wrap", task]
    subprocess.run(cmd, check=True, timeout=600, capture_output=True)
    for task_id in (0, 1):
        assert (tmp_path / f"{task_id}.out").read_text() == EXPECTED
        report = json.loads((tmp_path / f"{task_id}.err").read_text().splitlines()[-1])
        assert report["code"] == 0 and report["jit"] == []
    assert list(cache.iterdir()) == []
    # A real command line in an array task execs the native program (main never returns).
    from tests.test_trec_native import EXEC_PROBE

    native = tmp_path / "native"
    native.mkdir()
    (tmp_path / "data" / "exec_probe.py").write_text(EXEC_PROBE)
    task = f"{sys.executable} {tmp_path / 'data' / 'exec_probe.py'} -m map -m ndcg_cut.10 "
    task += f"{qrels} {run}"
    cmd = ["sbatch", "--wait", "--array=0-1", "--cpus-per-task=1", f"--output={native}/%a.out",
           f"--error={native}/%a.err", "--wrap", task]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=600, capture_output=True)
    for task_id in (0, 1):
        assert (native / f"{task_id}.out").read_text() == EXPECTED
        assert (native / f"{task_id}.err").read_text() == ""


def test_the_documented_hear_slurm_lines_as_written(slurm: Path, tmp_path: Path) -> None:
    """docs/hear.md, "Embeddings through the cache, and on Slurm": the page's module and tasks,
    then its two lines as written, in their folder: the first submits one array task per
    shard of the task's embeddings, the second nothing; both write the bytes of the local
    executor's run (`--out hear-out`), whose cache entry is the merged parts' bytes."""
    from tests.test_documented_commands import blocks
    from tests.test_hear_cache import DETERMINISTIC as HEAR_OUTPUTS
    from tests.test_hear_cache import task_outputs

    if shutil.which("espeak-ng") is None:
        pytest.skip("needs espeak-ng to build the HEAR tasks (apt-get install espeak-ng)")
    assert (ROOT / "docs" / "hear.md").is_file()
    run = [b for b in blocks("docs/hear.md") if b.heading.startswith("Run a HEAR module")]
    (module,) = [b.body for b in run if b.lang == "python"]
    (local_block,) = [b for b in run if b.lang == "bash"]
    page = [b for b in blocks("docs/hear.md") if b.heading.startswith("Embeddings through")]
    (shell,) = [b for b in page if b.lang == "bash"]
    (tmp_path / "my_hear_module.py").write_text(module + "\n")
    (tmp_path / "tools").mkdir()
    for tool in ("make_hear_tasks.py", "make_speech.py"):
        shutil.copy(ROOT / "tools" / tool, tmp_path / "tools" / tool)

    def line(text: str) -> str:
        argv = shlex.split(text)
        program = [sys.executable, "-P"] + ([] if argv[0] == "python" else ["-m", "audiorepro"])
        done = subprocess.run(
            [*program, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, check=False,
            timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, (text, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    for text in local_block.commands():  # the tasks, and the local executor's run
        line(text)
    first, second = shell.commands()
    assert "submitting 2 of 2 extraction part(s)" in line(first)
    assert "submitting" not in line(second)
    local, out = tmp_path / "hear-out", tmp_path / "hear-slurm-out"
    names = (*HEAR_OUTPUTS, *(f"cache/dumps/{p.name}" for p in (local / "cache/dumps").iterdir()))
    assert outputs(out, names) == outputs(local, names)
    assert task_outputs(out, "words-v1-full") == task_outputs(local, "words-v1-full")
    parts = sorted((out / "cache" / "parts").rglob("*.part.npz"))
    assert [p.name for p in parts] == ["0000-of-0002.part.npz", "0001-of-0002.part.npz"]


def test_a_hear_study_with_an_event_task_on_slurm_is_byte_identical_to_local(
    slurm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hear study (a scene and an event task: frames and their timestamps) by `reproduce
    --executor slurm`: three array tasks per cell, merged into the entries a local run
    writes; every output is the local run's; a rerun submits nothing."""
    from tests.hear_reference import build_tasks
    from tests.test_hear_cache import COUNTING_MODULE, MODULE, task_outputs
    from tests.test_hear_cache import DETERMINISTIC as HEAR_OUTPUTS

    tasks = build_tasks(tmp_path)
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / f"{MODULE}.py").write_text(COUNTING_MODULE)
    monkeypatch.syspath_prepend(str(mods))  # here, and on the node (sbatch passes PYTHONPATH)
    # the package may be installed (tox: no PYTHONPATH) or a checkout's src (PYTHONPATH=src)
    path = [str(mods), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    study = tmp_path / "hear.toml"
    cells = "".join(
        f'[[cell]]\nid = "{task}"\nmodel = "hear:{MODULE}"\ntasks_dir = "{tasks}"\n'
        f'task = "{task}"\n\n'
        for task in ("words", "events")
    )
    study.write_text(f'schema = "audiorepro.study/1"\nname = "h"\nkind = "hear"\n\n{cells}')
    from audiorepro.cli import main

    local, out = tmp_path / "local", tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(local)]) == 0
    argv = ["reproduce", str(study), "--out", str(out), "--executor", "slurm"]
    argv += ["--shards", "3", "--wait-timeout", "900"]
    capsys.readouterr()
    assert main(argv) == 0
    assert "submitting 6 of 6 extraction part(s)" in capsys.readouterr().out
    dumps = sorted(p.name for p in (local / "cache" / "dumps").iterdir())
    assert len(dumps) == 4  # two entries and their records
    names = (*HEAR_OUTPUTS, *(f"cache/dumps/{name}" for name in dumps))
    assert outputs(out, names) == outputs(local, names)
    for task in ("words", "events"):
        assert task_outputs(out, task) == task_outputs(local, task)
    assert main(argv) == 0
    assert "submitting" not in capsys.readouterr().out
    assert outputs(out, names) == outputs(local, names)

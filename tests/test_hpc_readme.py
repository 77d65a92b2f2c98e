"""The HPC and Slurm lines of docs/hpc.md, run as written in an emulated SIF (tests/standins).

The container lines are extracted from docs/hpc.md and run by bash in a project folder holding
what the page says it holds (``data/`` with the study, ``hub-cache/`` with the weights),
with the ``apptainer`` and ``srun`` stand-ins first on PATH: a read-only root, only the binds
writable, a fresh HOME and /tmp, a clean environment. Lines that need what is not here (a
registry, the real apptainer, a PGP key, a Slurm cluster) say so on the page with a trailing
``# needs ...``, and :func:`test_every_hpc_command_is_run_or_marked` holds the page to that.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

STANDINS = ROOT / "tests" / "standins"
#: The sections of docs/hpc.md whose every command a test runs, unless the line is marked.
SECTIONS = ("Reproduce on HPC", "Scale out on Slurm")
MARK = re.compile(r"#\s*needs (network|apptainer|a Slurm cluster|a GPU)\b")
HF_REPO = "org/tiny-clap"
HF_COMMIT = "7e57c1a97e57c1a97e57c1a97e57c1a97e57c1a9"
sys.path.insert(0, str(STANDINS))
import sif  # noqa: E402


def section(title: str) -> str:
    text = (ROOT / "docs" / "hpc.md").read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match is not None, f"docs/hpc.md has no section {title!r}"
    return match.group(1)


def blocks(title: str) -> list[list[str]]:
    """The section's bash blocks, each as its commands (continuation lines joined)."""
    found = []
    for body in re.findall(r"```bash\n(.*?)```", section(title), re.S):
        commands, current = [], ""
        for line in body.splitlines():
            current += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
            if not line.endswith("\\"):
                if current.strip() and not current.lstrip().startswith("#"):
                    commands.append(current.strip())
                current = ""
        found.append(commands)
    return found


def unmarked(commands: list[str]) -> list[str]:
    return [c for c in commands if not MARK.search(c)]


def test_every_hpc_command_is_run_or_marked() -> None:
    """Each command of the HPC sections is run by a test here or says what it needs."""
    run_by_tests = {("Reproduce on HPC", 1)}  # test_the_readme_hpc_lines_as_written
    for title in SECTIONS:
        for i, commands in enumerate(blocks(title)):
            if (title, i) in run_by_tests:
                assert unmarked(commands) == commands, (title, i)
            else:
                assert unmarked(commands) == [], (title, i, unmarked(commands))


def test_help_and_readme_name_the_same_container_lines() -> None:
    """apptainer.def's %help shows the run lines of docs/hpc.md, word for word."""
    sys.path.insert(0, str(ROOT / "tools"))
    import apptainer_def

    help_text = apptainer_def.parse((ROOT / "apptainer.def").read_text()).sections["help"]
    joined = " ".join(line.rstrip("\\").strip() for line in help_text.splitlines())
    joined = re.sub(r"\s+", " ", joined)
    srun, verify = [c for c in blocks("Reproduce on HPC")[1] if "apptainer run" in c]
    for command in (srun, verify):
        command = re.sub(r"\s+", " ", command.split("  #")[0]).strip()
        assert command in joined, command
    assert "--bind HOST_CACHE:/hf:ro --env HF_HUB_CACHE=/hf" in joined
    assert "APPTAINERENV_HF_HUB_CACHE" in joined


def test_the_stand_in_refuses_what_it_does_not_emulate(tmp_path: Path) -> None:
    image = sif.write_image(tmp_path / "a.sif")
    for argv, says in (
        (["build", "x.sif", "apptainer.def"], "needs the real apptainer"),
        (["run", "--writable-tmpfs", "--containall", str(image)], "unknown option"),
        (["run", str(image), "--version"], "--containall/--cleanenv runs only"),
        (["exec", "--containall", "--bind", "/nonexistent-x:/x", str(image), "true"], "doesn't"),
    ):
        proc = _standin("apptainer", argv, tmp_path)
        assert proc.returncode == 255 and says in proc.stderr, (argv, proc.stderr)
    proc = _standin("srun", ["--nodes=2", "true"], tmp_path)
    assert proc.returncode == 255 and "unknown option --nodes" in proc.stderr


def _needs_namespaces() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the SIF emulation needs root and unshare (mount namespaces)")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespaces here: {probe.stderr.decode().strip()}")


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}"}


def _standin(name: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STANDINS / name), *argv], cwd=cwd, env=_env(), capture_output=True, text=True,
        check=False, timeout=600,
    )  # fmt: skip


def test_the_emulated_sif_is_read_only_but_its_binds(tmp_path: Path) -> None:
    _needs_namespaces()
    image = sif.write_image(tmp_path / "a.sif")
    (tmp_path / "rw").mkdir()
    (tmp_path / "ro").mkdir()
    script = (
        "echo home: $(ls -A \"$HOME\" | grep -v '^.pyenv$'); "
        'for p in /x /usr/x "$HOME"/x /tmp/x /rw/x /ro/x; do '
        'if touch "$p" 2>/dev/null; then echo "$p writable"; else echo "$p read-only"; fi; done; '
        'echo "HF=${HF_HUB_CACHE-unset} SECRET=${AUDIOREPRO_SECRET-unset} C=$APPTAINER_CONTAINER";'
        f"if [ -e {tmp_path}/a.sif ]; then echo host visible; else echo host hidden; fi"
    )
    env_hint = {"AUDIOREPRO_SECRET": "leak", "APPTAINERENV_HF_HUB_CACHE": "/hf"}
    proc = subprocess.run(
        [str(STANDINS / "apptainer"), "exec", "--containall", "--cleanenv",
         "--bind", f"{tmp_path / 'rw'}:/rw", "--bind", f"{tmp_path / 'ro'}:/ro:ro",
         str(image), "/bin/sh", "-c", script],
        cwd=tmp_path, env={**_env(), **env_hint}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    home, *lines = proc.stdout.splitlines()
    assert home == "home:"  # a fresh HOME (but for the image's Python, if it lives there)
    assert lines[:6] == [
        "/x read-only", "/usr/x read-only", f"{os.environ.get('HOME', '/root')}/x writable",
        "/tmp/x writable", "/rw/x writable", "/ro/x read-only",
    ]  # fmt: skip
    assert lines[6] == f"HF=/hf SECRET=unset C={image}"
    assert (tmp_path / "rw" / "x").is_file() and not (tmp_path / "ro" / "x").exists()
    assert lines[7:] == ["host hidden"]  # the host's files are not there


# --- the project folder docs/hpc.md describes, with a tiny model in the hub cache ------------


def _hub_model(tiny: Path, cache: Path) -> dict[str, str]:
    """Lay out the tiny HF model in ``cache`` as the hub does; returns its file hashes."""
    import hashlib

    snapshot = cache / ("models--" + HF_REPO.replace("/", "--")) / "snapshots" / HF_COMMIT
    shutil.copytree(tiny / "tiny-hf", snapshot)
    refs = snapshot.parents[1] / "refs"
    refs.mkdir()
    (refs / "main").write_text(HF_COMMIT)
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(snapshot.iterdir())}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project folder, built once per module (tiny models take a while)."""
    _needs_namespaces()
    pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
    return _project(tmp_path_factory.mktemp("hpc"))


def project(built: Path, tmp_path: Path) -> Path:
    work = tmp_path / "project"
    shutil.copytree(built, work)
    sif.write_image(work / "audiorepro.sif")
    return work


def _project(tmp_path: Path) -> Path:
    """``data/`` (a one-cell study, its registry and clips) and ``hub-cache/`` (its weights)."""
    import numpy as np
    import soundfile

    from audiorepro.models.tiny import build_tiny_models

    tiny = build_tiny_models(tmp_path / "tiny", seed=0).parent
    work = tmp_path / "project"
    data = work / "data"
    (data / "clips").mkdir(parents=True)
    files = _hub_model(tiny, work / "hub-cache")
    weights = {n: h for n, h in files.items() if n.endswith(".safetensors")}
    others = {n: h for n, h in files.items() if n not in weights}
    (data / "registry.toml").write_text(
        'schema = "audiorepro.checkpoints/1"\n'
        f'[checkpoints."{HF_REPO}"]\nformat = "hf"\nrepo = "{HF_REPO}"\n'
        f'revision = "{HF_COMMIT}"\n'
        f'[checkpoints."{HF_REPO}".weights]\n'
        + "".join(f'"{n}" = "{h}"\n' for n, h in weights.items())
        + f'[checkpoints."{HF_REPO}".files]\n'
        + "".join(f'"{n}" = "{h}"\n' for n, h in others.items())
        + f'[checkpoints."{HF_REPO}".architecture]\nenable_fusion = true\n'
        + f'[checkpoints."{HF_REPO}".preprocessing]\nint16_roundtrip = true\nis_longer = "length"\n'
    )
    rng = np.random.default_rng(0)
    names = ["a.wav", "b.wav", "c.wav"]
    for i, name in enumerate(names):
        wave = rng.uniform(-0.5, 0.5, 48000 * (i + 1)).astype(np.float32)
        soundfile.write(data / "clips" / name, wave, 48000, subtype="PCM_16")
    (data / "captions.csv").write_text(
        "file_name,caption_1,caption_2,caption_3,caption_4,caption_5\n"
        + "".join(f"{n}," + ",".join(f"{n[0]} sound {k}" for k in range(5)) + "\n" for n in names)
    )
    (data / "study.toml").write_text(
        'schema = "audiorepro.study/1"\nname = "hpc"\ntitle = "one tiny cell in a SIF"\n'
        "bootstrap = { resamples = 20 }\n"
        f'[[cell]]\nid = "tiny/clips"\nmodel = "{HF_REPO}"\ndataset = "clips"\n'
        f'extract = {{ model = "{HF_REPO}", registry = "registry.toml", audio = "clips", '
        'captions = "captions.csv" }\n'
        # Three clips: every caption finds its clip within 5, by definition.
        '[[published]]\ncell = "tiny/clips"\ntolerance = 0.0\n'
        'provenance = "definition: three clips"\nvalues = { "t2a/r@5" = 1.0 }\n'
    )
    sif.write_image(work / "audiorepro.sif")
    return work


@pytest.mark.slow
def test_the_readme_hpc_lines_as_written(built: Path, tmp_path: Path) -> None:
    """mkdir, apptainer test, srun ... apptainer run ... reproduce, apptainer run ... verify:
    the lines of docs/hpc.md, in a read-only emulated SIF. Needs OUT to be publishable when it is a
    bind mount whose parent is read-only (issue 23, item 1)."""
    work = project(built, tmp_path)
    commands = blocks("Reproduce on HPC")[1]
    script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
    proc = subprocess.run(
        ["bash", "-c", script], cwd=work, env=_env(), capture_output=True, text=True,
        check=False, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "selfcheck: passed" in proc.stdout
    verification = json.loads((work / "out" / "verification.json").read_text())
    assert verification["failures"] == []
    assert verification["golden"]["counts"]["PASS"] == 1
    assert not list(work.glob(".*staging*")) and not (work / "data" / "out").exists()


@pytest.mark.slow
def test_a_cache_not_bound_is_one_line_naming_the_bind(built: Path, tmp_path: Path) -> None:
    """The srun line of docs/hpc.md without the hub cache's bind and variable: exit 2, one line."""
    work = project(built, tmp_path)
    (srun,) = [c for c in blocks("Reproduce on HPC")[1] if c.startswith("srun")]
    assert '--bind "$PWD/hub-cache":/hf:ro --env HF_HUB_CACHE=/hf ' in srun
    for cut in (
        '--bind "$PWD/hub-cache":/hf:ro --env HF_HUB_CACHE=/hf ',
        "--env HF_HUB_CACHE=/hf ",
    ):
        (work / "out").mkdir(exist_ok=True)
        proc = subprocess.run(
            ["bash", "-c", srun.replace(cut, "")], cwd=work, env=_env(), capture_output=True,
            text=True, check=False, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
        (line,) = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower() or "/hf" in ln]
        assert "is not there inside the container" in line
        assert "--bind HOST_CACHE:/hf:ro --env HF_HUB_CACHE=/hf" in line
        assert "APPTAINERENV_HF_HUB_CACHE=/hf" in line
        assert list((work / "out").iterdir()) == []  # nothing written


@pytest.mark.slow
def test_slurm_container_tasks_get_the_weights_in_the_emulated_sif(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An array task's command, as ``--executor slurm --container`` builds it, run in the
    emulated SIF: the hub cache arrives bound at /hf and named, the part is written; with no
    cache on the submitting side the task stops in one line naming the bind."""
    from audiorepro.runner.executors.slurm import SlurmOptions, part_finished, plan, task_command
    from audiorepro.specs.study import load_study

    work = project(built, tmp_path)
    from audiorepro.runner.study import study_extraction

    study = study_extraction(load_study(work / "data" / "study.toml"))
    assert study is not None
    out = work / "out"
    options = SlurmOptions(container=work / "audiorepro.sif")
    monkeypatch.setenv("PATH", _env()["PATH"])
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache-here"))
    _, (first, second) = plan(study, out, 2)
    first.path.parent.mkdir(parents=True)
    argv = task_command(study, out, first, options)
    assert "HF_HUB_CACHE=/hf" not in argv  # nothing to pass on: and the task says so
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--bind HOST_CACHE:/hf:ro --env HF_HUB_CACHE=/hf" in proc.stderr.splitlines()[-1]
    assert not first.path.exists()
    monkeypatch.setenv("HF_HUB_CACHE", str(work / "hub-cache"))
    argv = task_command(study, out, first, options)
    i = argv.index("--env")
    assert argv[i - 2 : i + 2] == [
        "--bind", f"{(work / 'hub-cache').resolve()}:/hf:ro", "--env", "HF_HUB_CACHE=/hf",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert part_finished(first) and not part_finished(second)

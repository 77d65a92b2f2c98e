"""The code identity sees the code that runs (issue 43 item 3, issue 44 "stale embeddings from
user code"): a ``py:`` encoder file that imports a helper module beside it and a package
installed with ``pip install -e`` (a real editable install, made by pip into a throwaway
virtualenv whose site folder this process then reads as Python's ``site`` reads any other).
Editing the encoder file, the helper or a file of the editable package re-extracts (the
extractions are counted), the dump records what changed and ``diff`` names it as the cause.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.dump import load_dump
from audiorepro.models import codehash
from audiorepro.models.encoder_specs import UserSpec, code_identity
from tests.test_embedding_cache import extractions, study_of  # noqa: F401 (a fixture)

#: The test's editable package (unique: modules stay in sys.modules for the session).
PACKAGE = "edpkg_codeid"

ENCODER = f'''
"""An encoder over frame spectra whose output a helper beside it and an editable package
shift: an edit of either moves the embeddings."""
import numpy as np

import {PACKAGE}
from enc_helpers import OFFSET


class Enc:
    name = "codeid"
    sample_rate = 16000

    def embed_audio(self, waveforms):
        rows = []
        for w in waveforms:
            n = max(1, len(w) // 400)
            frames = np.resize(np.asarray(w, np.float64), n * 400).reshape(n, 400)
            spectrum = np.log1p(np.abs(np.fft.rfft(frames, axis=1))).mean(axis=0)[:16]
            rows.append(SCALE * spectrum + 1.0 + OFFSET + {PACKAGE}.tilt(16))
        return np.asarray(rows, dtype=np.float32)

    def embed_text(self, texts):
        counts = np.zeros((len(texts), 16))
        for i, text in enumerate(texts):
            for byte in text.encode():
                counts[i, byte % 16] += 1.0
        return counts.astype(np.float32)

    def weight_files(self):
        return []


SCALE = 1.0


def make():
    return Enc()
'''

HELPER = "OFFSET = 0.0\n"
PACKAGE_INIT = (
    "import numpy as np\n\nSTEP = 0.0\n\n\ndef tilt(n):\n    return STEP * np.arange(n)\n"
)


@dataclass(frozen=True)
class Setup:
    encoder: Path
    helper: Path
    package: Path  # the editable package's __init__.py, in its project folder
    site: Path  # the throwaway virtualenv's site-packages
    python: Path  # its interpreter


def _editable_install(root: Path) -> Path:
    """``pip install -e`` of a one-module project into a fresh virtualenv (no index, no build
    isolation: offline), its site folder seeing this environment's packages; returns the site
    folder pip installed into."""
    project = root / "project"
    (project / "src" / PACKAGE).mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{PACKAGE}"\nversion = "0.1"\n'
    )
    (project / "src" / PACKAGE / "__init__.py").write_text(PACKAGE_INIT)
    venv = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # this environment's packages (pip, setuptools, numpy) seen from the new one
    (Path(purelib) / "parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
         "--no-build-isolation", "-e", str(project)],
        check=True, capture_output=True,
    )  # fmt: skip
    return Path(purelib)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    pytest.importorskip("setuptools", reason="pip install -e needs setuptools here (offline)")
    root = tmp_path_factory.mktemp("codeid")
    purelib = _editable_install(root)
    enc = root / "enc"
    enc.mkdir()
    (enc / "enc.py").write_text(textwrap.dedent(ENCODER).lstrip())
    (enc / "enc_helpers.py").write_text(HELPER)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "path", list(sys.path))
        mp.setattr(sys, "dont_write_bytecode", True)  # edits within one second: no stale .pyc
        site.addsitedir(str(purelib))  # the .pth files pip wrote, as Python's startup reads them
        # the encoder's folder on the path, as ``python enc.py`` has it (issue 43 item 2 has
        # the kit put it there itself)
        mp.syspath_prepend(str(enc))
        importlib.invalidate_caches()
        yield Setup(enc / "enc.py", enc / "enc_helpers.py",
                    root / "project" / "src" / PACKAGE / "__init__.py", purelib,
                    root / "venv" / "bin" / "python")  # fmt: skip


def _fresh_process() -> None:
    """What a new ``audiorepro`` process starts from: the user's modules not yet imported."""
    for name in (PACKAGE, "enc_helpers"):
        sys.modules.pop(name, None)
    importlib.invalidate_caches()


def test_the_identity_records_the_helper_and_the_editable_package_by_content(
    setup: Setup,
) -> None:
    code = code_identity(UserSpec("py", str(setup.encoder), "make"))
    assert code["local"] == {"enc_helpers.py": codehash.file_sha256(setup.helper)}
    assert code["missing"] == []
    editable = code["distributions"][PACKAGE]
    assert editable["by"] == "content" and editable["version"] == "0.1"
    assert code["distributions"]["numpy"]["by"] == "RECORD"  # a wheel install
    numpy_record = next(Path(np.__file__).parent.parent.glob("numpy-*.dist-info")) / "RECORD"
    assert code["distributions"]["numpy"]["sha256"] == codehash.file_sha256(numpy_record)
    # the editable package's files are read where they live, not in site-packages
    before = editable["sha256"]
    setup.package.write_text(setup.package.read_text() + "# a comment\n")
    try:
        after = code_identity(UserSpec("py", str(setup.encoder), "make"))
        assert after["distributions"][PACKAGE]["sha256"] != before
        assert after["local"] == code["local"] and after["source_sha256"] == code["source_sha256"]
    finally:
        setup.package.write_text(PACKAGE_INIT)


@pytest.mark.parametrize(
    ("edit", "named"),
    [("encoder", "source_sha256"), ("helper", "enc_helpers.py"), ("editable", PACKAGE)],
)
def test_an_edit_of_any_file_of_the_encoders_code_reextracts_and_diff_names_it(
    setup: Setup,
    tmp_path: Path,
    extractions: list[Path],  # noqa: F811  (the fixture imported above)
    capsys: pytest.CaptureFixture[str],
    edit: str,
    named: str,
) -> None:
    study = study_of(f"py:{setup.encoder}:make", tmp_path)
    out = tmp_path / "out"
    _fresh_process()
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    _fresh_process()
    assert main(["reproduce", str(study), "--out", str(out)]) == 0  # served from the cache
    assert len(extractions) == 1
    before = tmp_path / "before"
    shutil.copytree(out, before)
    file, old, new = {
        "encoder": (setup.encoder, "SCALE = 1.0", "SCALE = -2.0"),
        "helper": (setup.helper, "OFFSET = 0.0", "OFFSET = 4.0"),
        "editable": (setup.package, "STEP = 0.0", "STEP = 0.7"),
    }[edit]
    original = file.read_text()
    file.write_text(original.replace(old, new))
    try:
        _fresh_process()
        assert main(["reproduce", str(study), "--out", str(out)]) == 0
        assert len(extractions) == 2  # re-extracted, never the old embeddings
        dumps = [load_dump(p) for p in sorted((out / "cache" / "dumps").glob("*.npz"))]
        assert len(dumps) == 2
        a, b = (d.meta["encoder_code"] for d in dumps)
        changed = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
        # the dump says what changed, and only that
        assert changed == {"source_sha256" if edit == "encoder" else
                           "local" if edit == "helper" else "distributions"}  # fmt: skip
        capsys.readouterr()
        assert main(["diff", str(before), str(out)]) == 1
        text = capsys.readouterr().out
        causes = " ".join(text.split("causes")[1].split("\ncells:")[0].split())
        assert causes.startswith("(what differs between the runs): encoder code enc/clips:"), text
        assert named in causes and re.search(r"moved [1-9][0-9]* number\(s\)", causes), text
        assert "moved nothing" not in causes, text
    finally:
        file.write_text(original)
        _fresh_process()


def test_an_edited_editable_package_reextracts_in_a_new_process(
    setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same as a user runs it: each command a new process of the virtualenv pip installed
    into (its site folder read by Python's own start-up), nothing imported beforehand."""
    import audiorepro

    study = study_of(f"py:{setup.encoder}:make", tmp_path)
    # the kit under test, and the encoder's folder as ``python enc.py`` has it
    # (a checkout's src/ first; an installed kit, as in tox, is already on the new
    # virtualenv's path through parent.pth, and its site-packages first on PYTHONPATH would
    # put resemblyzer's `typing` backport before the standard library's)
    kit = str(Path(audiorepro.__file__).parent.parent)
    first = [] if kit in site.getsitepackages() else [kit]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*first, str(setup.encoder.parent)])}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(setup.python), "-m", "audiorepro", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=False)

    out = tmp_path / "out"
    assert run("reproduce", str(study), "--out", str(out)).returncode == 0
    before = tmp_path / "before"
    shutil.copytree(out, before)
    original = setup.package.read_text()
    setup.package.write_text(original.replace("STEP = 0.0", "STEP = 0.9"))
    try:
        assert run("reproduce", str(study), "--out", str(out)).returncode == 0
    finally:
        setup.package.write_text(original)
    assert len(list((out / "cache" / "dumps").glob("*.npz"))) == 2  # extracted again
    capsys.readouterr()
    assert main(["diff", str(before), str(out)]) == 1
    text = capsys.readouterr().out
    causes = " ".join(text.split("causes")[1].split("\ncells:")[0].split())
    assert f"distributions.{PACKAGE}.sha256" in causes and "moved nothing" not in causes, text


def test_a_wheel_install_is_identified_by_its_record(tmp_path: Path) -> None:
    """A distribution installed from a wheel: pip's RECORD (the SHA-256 of every file it
    wrote) stands for its files; another RECORD under the same version is other code."""
    site_dir = tmp_path / "site"
    (site_dir / "wheelmod_codeid").mkdir(parents=True)
    (site_dir / "wheelmod_codeid" / "__init__.py").write_text("X = 1\n")
    info = site_dir / "wheelmod_codeid-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wheelmod_codeid\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("wheelmod_codeid\n")
    record = "wheelmod_codeid/__init__.py,sha256=aaaa,6\n"
    (info / "RECORD").write_text(record)
    encoder = tmp_path / "enc" / "wheel_enc.py"
    encoder.parent.mkdir()
    encoder.write_text("import wheelmod_codeid\n\ndef make():\n    return None\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(site_dir))
        importlib.invalidate_caches()
        first = code_identity(UserSpec("py", str(encoder), "make"))
        assert first["distributions"]["wheelmod_codeid"]["by"] == "RECORD"
        assert first["local"] == {}
        (info / "RECORD").write_text(record.replace("aaaa", "bbbbb"))
        second = code_identity(UserSpec("py", str(encoder), "make"))
    assert first["distributions"] != second["distributions"]
    assert json.dumps(second["distributions"]["wheelmod_codeid"]["version"]) == '"1.0"'


def test_a_data_folder_beside_the_encoder_does_not_shadow_an_installed_package(
    tmp_path: Path,
) -> None:
    """A folder without ``__init__.py`` named as an installed package (``numpy/`` of audio
    files beside the encoder) is a namespace portion: Python imports the installed package,
    and so the identity records numpy by its RECORD and reads none of the folder's files."""
    encoder = tmp_path / "enc" / "ns_enc.py"
    (tmp_path / "enc" / "numpy").mkdir(parents=True)
    (tmp_path / "enc" / "numpy" / "clip.wav").write_bytes(b"RIFF" + bytes(64))
    encoder.write_text("import numpy\n\ndef make():\n    return None\n")
    code = code_identity(UserSpec("py", str(encoder), "make"))
    assert code["local"] == {} and code["distributions"]["numpy"]["by"] == "RECORD"


def test_the_benchmark_script_runs() -> None:
    """``benchmarks/code_identity.py`` (docs/benchmarks.md) runs and reports each case; its
    figures are measured there, not asserted here."""
    from tests.conftest import ROOT

    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "code_identity.py"), "--repeat", "1"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["file+torch", "resemblyzer"]
    assert all(" cold " in line and " warm " in line for line in lines[1:])

"""The container recipe: apptainer.def read strictly and emulated, the Dockerfile's promises,
the base-image pinning tool. The image build itself is `tox -e container` (tools/container.py).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import apptainer_def

DEF = (ROOT / "apptainer.def").read_text()
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _pin_tool() -> ModuleType:
    path = str(ROOT / "tools" / "pin-base-image")
    loader = importlib.machinery.SourceFileLoader("pin_base_image", path)
    spec = importlib.util.spec_from_loader("pin_base_image", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_shipped_definition_parses_with_every_required_section() -> None:
    definition = apptainer_def.parse(DEF)
    assert definition.header["Bootstrap"] == "docker-archive"
    assert {"labels", "help", "environment", "runscript", "test"} <= set(definition.sections)
    assert definition.sections["runscript"] == 'exec audiorepro "$@"'
    assert "audiorepro selfcheck" in definition.sections["test"]
    assert definition.labels["org.opencontainers.image.title"] == "audiorepro"
    help_text = definition.sections["help"]
    for flag in ("--nv", "--containall", "--cleanenv", ":ro"):
        assert flag in help_text, flag
    for doc in ("--reproducible", "SOURCE_DATE_EPOCH", "apptainer sign", "apptainer verify"):
        assert doc in DEF, doc


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (("%runscript", "%runscirpt"), "unknown section %runscirpt"),
        (("Bootstrap: docker-archive", "Bootstrap: dokcer"), "unknown bootstrap agent 'dokcer'"),
        (("From: audiorepro.tar", "Form: audiorepro.tar"), "unknown header key 'Form'"),
        (("From: audiorepro.tar", ""), "needs a `From:` header"),
        (("%test", "%help"), "section %help appears twice"),
        (("%labels", "%labels -x"), "takes no arguments"),
        (("Bootstrap: docker-archive", "Bootstrap docker-archive"), "expected a header line"),
        (("%environment", "%appenv foo"), "SCIF apps"),
    ],
)
def test_misspellings_are_errors_naming_the_line(mutation: tuple[str, str], message: str) -> None:
    with pytest.raises(apptainer_def.DefinitionError, match=re.escape(message)):
        apptainer_def.parse(DEF.replace(*mutation, 1))


def test_emulation_lays_out_singularity_d(tmp_path: Path) -> None:
    definition = apptainer_def.parse(DEF)
    containerfile = apptainer_def.containerfile(definition, "localhost/x:1", tmp_path).read_text()
    assert containerfile.startswith("FROM localhost/x:1\n")
    assert "COPY runscript /.singularity.d/runscript" in containerfile
    assert "COPY test /.singularity.d/test" in containerfile
    assert "COPY 90-environment.sh /.singularity.d/env/90-environment.sh" in containerfile
    assert 'LABEL org.opencontainers.image.title="audiorepro"' in containerfile
    assert (tmp_path / "runscript").read_text() == '#!/bin/sh\nexec audiorepro "$@"\n'
    env = (tmp_path / "90-environment.sh").read_text()
    assert "export CUBLAS_WORKSPACE_CONFIG=:4096:8" in env


def test_emulation_refuses_what_it_does_not_translate(tmp_path: Path) -> None:
    definition = apptainer_def.parse(DEF + "\n%setup\n    touch ${APPTAINER_ROOTFS}/x\n")
    with pytest.raises(apptainer_def.DefinitionError, match="does not translate %setup"):
        apptainer_def.containerfile(definition, "localhost/x:1", tmp_path)


def test_dockerfile_promises() -> None:
    (base,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, re.MULTILINE)
    # A digest is either real (written by tools/pin-base-image) or absent: never a placeholder.
    assert "@" not in base or re.fullmatch(r"[^@]+@sha256:[0-9a-f]{64}", base)
    assert "FROM ${BASE_IMAGE}" in DOCKERFILE
    assert "--require-hashes" in DOCKERFILE
    assert "--no-build-isolation" in DOCKERFILE
    assert 'ENTRYPOINT ["audiorepro"]' in DOCKERFILE
    assert re.search(r"^USER audiorepro$", DOCKERFILE, re.MULTILINE)
    assert "RUN audiorepro selfcheck --strict-environment" in DOCKERFILE
    for label in ("source", "revision", "version"):
        assert f"org.opencontainers.image.{label}=" in DOCKERFILE
    for var in ("CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED=0", "OMP_NUM_THREADS=1"):
        assert var in DOCKERFILE
    # every lock the Dockerfile names exists (one per architecture it supports)
    for arch in ("x86_64", "aarch64"):
        assert (ROOT / "requirements" / f"image-linux-{arch}.txt").is_file()


def test_pin_base_image_rewrites_only_the_arg_line() -> None:
    tool = _pin_tool()
    digest = "sha256:" + "ab" * 32
    tag = tool.current_reference(DOCKERFILE).split("@")[0]
    out = tool.pinned(DOCKERFILE, tag, digest)
    assert f"ARG BASE_IMAGE={tag}@{digest}\n" in out
    assert out.replace(f"{tag}@{digest}", tag) == DOCKERFILE.replace(
        tool.current_reference(DOCKERFILE), tag
    )
    with pytest.raises(ValueError, match="not a sha256 digest"):
        tool.pinned(DOCKERFILE, tag, "sha256:1234")


def test_pin_base_image_without_skopeo_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = _pin_tool()
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(DOCKERFILE)
    monkeypatch.setattr(tool.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="needs skopeo"):
        tool.main(["--dockerfile", str(dockerfile)])
    assert dockerfile.read_text() == DOCKERFILE


def test_the_container_check_says_when_the_disk_is_too_small_for_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CI once failed deep inside podman's layer commit (ENOSPC); the check now says up front
    # how much is free where the build writes, and what it needs.
    import shutil
    import subprocess

    import container

    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "/nonexistent/graph\n")
    )
    usage = shutil.disk_usage("/")
    for free_gb, low in ((10, True), (container.BUILD_NEEDS_GB + 5, False)):
        monkeypatch.setattr(
            shutil, "disk_usage", lambda _p, f=free_gb: usage._replace(free=int(f * 1e9))
        )
        line = container.disk_report()
        assert f"{free_gb} GB free at /nonexistent/graph" in line and "/var/tmp" in line
        assert ("LOW" in line) is low


def test_the_build_installs_the_pip_layer_from_this_machines_pip_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tools/container.py mounts the pip cache the tox envs filled; the Dockerfile's pip layer
    uses it only when mounted (never a cache inside the image) and checks hashes as before."""
    import container

    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(container, "podman", lambda *args, **kw: calls.append(args))
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip"))
    container.build("localhost/base")
    (args,) = calls
    assert args[args.index(f"{tmp_path / 'pip'}:/opt/pip-cache") - 1] == "--volume"
    layer = DOCKERFILE.split("COPY requirements/build.txt", 1)[1].split("\nCOPY ", 1)[0]
    assert "if [ -d /opt/pip-cache ]" in layer and "unset PIP_NO_CACHE_DIR" in layer
    assert layer.count("--require-hashes") == 2
    assert "PIP_NO_CACHE_DIR=1" in DOCKERFILE  # without the mount: no cache in the layer


def test_a_new_commit_reuses_the_pip_layer() -> None:
    """The revision (a build argument that changes with every commit) is declared after the
    lock's pip layer: an ARG takes part in the cache key of every RUN after it, so above the
    layer each commit rebuilt its ~8 GB."""
    pip_layer = DOCKERFILE.index('--no-build-isolation -r "$lock"')
    assert DOCKERFILE.index("ARG REVISION") > pip_layer
    assert DOCKERFILE.index("AUDIOREPRO_REVISION=${REVISION}") > pip_layer
    before = DOCKERFILE[:pip_layer]
    assert "REVISION" not in before.replace("# ", "")  # nothing above it names the revision

"""The demo's tiny models live outside OUT, built once per user, checked against their list on
every use, and hard-linked (read-only) or copied into OUT/cache/demo, never linked to
(:func:`audiorepro.runner.demo.place_models`); where that cache cannot be written, in OUT.

The builder here writes a registry and one weights file and counts its calls: what is tested
is where the models go and how often they are built (the real models and the demo's outputs
are the business of tests/test_reproduce.py, whose goldens are unchanged by the move).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from audiorepro.core.errors import WriteError
from audiorepro.runner.demo import CONTENTS, mismatch, model_cache, models_key, place_models


class Builder:
    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, out: Path, seed: int = 0) -> Path:
        self.calls.append(Path(out))
        out.mkdir(parents=True, exist_ok=True)
        (out / "weights.bin").write_bytes(bytes([seed]) * 1000)
        (out / "registry.toml").write_text(f"seed {seed}\n")
        return out / "registry.toml"


def test_two_output_folders_share_one_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    build = Builder()
    first, second = (
        tmp_path / "a" / "cache" / "demo" / "tiny",
        tmp_path / "b" / "cache" / "demo" / "tiny",
    )
    place_models(first, 0, build)
    place_models(second, 0, build)
    place_models(first, 0, build)  # a rerun into the same OUT
    assert len(build.calls) == 1 and build.calls[0].parent == model_cache()
    shared = model_cache() / models_key(0)
    for folder in (first, second):
        assert folder.is_dir() and not folder.is_symlink()
        assert (folder / "registry.toml").read_text() == "seed 0\n"
        assert os.path.samefile(folder / "weights.bin", shared / "weights.bin")  # a hard link
        assert mismatch(folder) is None
    assert [p.name for p in model_cache().iterdir()] == [models_key(0)]  # no leftover
    assert [p.name for p in first.parent.iterdir()] == ["tiny"]


def test_a_cache_that_cannot_be_written_builds_in_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # mkdir under a file fails
    build = Builder()
    folder = tmp_path / "out" / "cache" / "demo" / "tiny"
    place_models(folder, 1, build)
    assert build.calls == [folder] and not folder.is_symlink()
    assert (folder / "registry.toml").read_text() == "seed 1\n"


def test_a_full_cache_disk_builds_in_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls: list[Path] = []

    def full_once(out: Path, seed: int = 0) -> Path:
        calls.append(out)
        if len(calls) == 1:  # the cache's disk: what atomic_write_bytes raises there
            raise WriteError(f"{out}/registry.toml: cannot be written: no space left")
        return Builder()(out, seed)

    folder = tmp_path / "out" / "tiny"
    place_models(folder, 0, full_once)
    assert len(calls) == 2 and calls[1] == folder and not folder.is_symlink()
    assert list((tmp_path / "xdg" / "audiorepro" / "demo-models").iterdir()) == []


def test_a_link_made_elsewhere_is_pointed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "out" / "tiny"
    folder.parent.mkdir(parents=True)
    os.symlink(tmp_path / "gone", folder)  # another machine's or container's cache
    place_models(folder, 0, build := Builder())
    assert len(build.calls) == 1 and (folder / "registry.toml").is_file()


def test_a_failed_build_leaves_nothing_half_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def broken(out: Path, seed: int = 0) -> Path:
        (out / "weights.bin").write_bytes(b"half")
        raise RuntimeError("killed midway")

    with pytest.raises(RuntimeError):
        place_models(tmp_path / "out" / "tiny", 0, broken)
    assert list(model_cache().iterdir()) == []


def test_the_folder_name_follows_the_seed() -> None:
    assert models_key(0) != models_key(1) and models_key(0) == models_key(0)


def test_models_an_earlier_version_built_in_out_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "out" / "cache" / "demo" / "tiny"
    Builder()(folder, 0)  # a real folder, as an OUT of an earlier version holds
    place_models(folder, 0, build := Builder())
    assert build.calls == [] and not folder.is_symlink()
    assert not (tmp_path / "xdg").exists()


def _links(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_symlink()]


def test_a_copied_out_cannot_change_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cp -a OUT copy`` and a checkpoint replaced in the copy (an experiment before
    ``diff``): the cache is untouched, and the next demo uses it as it was."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out = tmp_path / "out"
    place_models(out / "cache" / "demo" / "tiny", 0, build := Builder())
    assert _links(out) == []  # nothing in OUT leads into a shared place
    shared = model_cache() / models_key(0)
    before = (shared / "weights.bin").read_bytes()
    subprocess.run(["cp", "-a", str(out), str(tmp_path / "copy")], check=True)
    weights = tmp_path / "copy" / "cache" / "demo" / "tiny" / "weights.bin"
    weights.chmod(0o644)
    weights.write_bytes(b"another checkpoint")
    assert (shared / "weights.bin").read_bytes() == before and mismatch(shared) is None
    lines: list[str] = []
    place_models(tmp_path / "later" / "tiny", 0, build, lines.append)
    assert len(build.calls) == 1 and lines == []


def test_a_cache_that_does_not_match_its_list_is_rebuilt_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file changed in the cache (written through OUT's hard link by root, or by hand):
    the next use rebuilds it, says so in one line, and OUT holds the rebuilt files."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "out" / "tiny"
    place_models(folder, 0, build := Builder())
    shared = model_cache() / models_key(0)
    assert (shared / "weights.bin").stat().st_mode & 0o222 == 0  # read-only
    assert (shared / CONTENTS).read_text().count("\n") == 2
    (folder / "weights.bin").chmod(0o644)
    with open(folder / "weights.bin", "r+b") as f:  # through the link: the cache changes
        f.write(b"X")
    lines: list[str] = []
    place_models(folder, 0, build, lines.append)
    assert len(build.calls) == 2 and len(lines) == 1
    assert str(shared) in lines[0] and "weights.bin differs" in lines[0]
    assert "rebuilding" in lines[0]
    assert mismatch(shared) is None and mismatch(folder) is None
    assert (folder / "weights.bin").read_bytes() == bytes([0]) * 1000

"""The demo's tiny models live outside OUT, built once per user and linked into OUT/cache/demo
(:func:`audiorepro.runner.demo.place_models`); where that cache cannot be written, in OUT.

The builder here writes a registry and one weights file and counts its calls: what is tested
is where the models go and how often they are built (the real models and the demo's outputs
are the business of tests/test_reproduce.py, whose goldens are unchanged by the move).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from audiorepro.core.errors import WriteError
from audiorepro.runner.demo import model_cache, models_key, place_models


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
        assert folder.is_symlink() and folder.resolve() == shared.resolve()
        assert (folder / "registry.toml").read_text() == "seed 0\n"
    assert [p.name for p in model_cache().iterdir()] == [models_key(0)]  # no leftover


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

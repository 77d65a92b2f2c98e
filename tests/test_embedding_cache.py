"""One embedding cache across output folders (issue 43 item 4): a second output folder of the
same study re-extracts nothing (extractions counted), its ``cache/`` holds the entry itself
(read-only), a damaged store entry is rebuilt, ``rm -rf`` of the store clears it, and
``AUDIOREPRO_EMBEDDING_CACHE=off`` turns it off. The store is this test's own
``$XDG_CACHE_HOME/audiorepro/embeddings``."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.audio_dump import load_audio_dump, make_audio_dump, save_audio_dump
from tests.encoder_sources import Encoders, write_encoders
from tests.test_encoders import _clips, _study


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Encoders:
    return write_encoders(tmp_path_factory.mktemp("encoders"), "cache")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The per-user store as a user has it: on (the variable unset), under XDG_CACHE_HOME."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("AUDIOREPRO_EMBEDDING_CACHE")
    yield tmp_path / "xdg" / "audiorepro" / "embeddings"


@pytest.fixture
def extractions(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every extraction the runner makes, by its output path."""
    from audiorepro.runner import cache

    made: list[Path] = []
    real = cache.extract

    def counted(*args: object, **kw: object) -> None:
        made.append(Path(str(args[3])))
        real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "extract", counted)
    return made


def study_of(spec: str, folder: Path) -> Path:
    """A one-cell retrieval study of ``spec`` over seeded clips, written under ``folder``."""
    return _study(folder / "study", spec, _clips(folder / "clips"))


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*") if not p.name.startswith("."))


def test_a_second_output_folder_reextracts_nothing(
    encoder: Encoders, store: Path, extractions: list[Path], tmp_path: Path
) -> None:
    study = study_of(encoder.file_spec, tmp_path)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "a")]) == 0
    assert len(extractions) == 1
    kept = _entries(store)
    assert len(kept) == 2 and kept[0].endswith(".json") and kept[1].endswith(".npz")
    assert main(["reproduce", str(study), "--out", str(tmp_path / "b")]) == 0
    assert len(extractions) == 1  # served from the store
    # OUT holds the entry itself, read-only: the folder stays whole without the store
    here = tmp_path / "b" / "cache" / "dumps"
    assert _entries(here) == kept
    for name in kept:
        assert not stat.S_IMODE((here / name).stat().st_mode) & 0o222
        assert (here / name).read_bytes() == (store / name).read_bytes()
    bundle = "bundle.json.gz"
    assert (tmp_path / "a" / bundle).read_bytes() == (tmp_path / "b" / bundle).read_bytes()
    shutil.rmtree(store)  # the documented way to clear it
    assert main(["verify", str(tmp_path / "b")]) == 0
    assert main(["reproduce", str(study), "--out", str(tmp_path / "b")]) == 0
    assert len(extractions) == 1  # OUT's own cache
    assert _entries(store) == kept  # an intact entry in use is kept in the store again


def test_a_damaged_store_entry_is_rebuilt(
    encoder: Encoders, store: Path, extractions: list[Path], tmp_path: Path
) -> None:
    study = study_of(encoder.file_spec, tmp_path)
    assert main(["reproduce", str(study), "--out", str(tmp_path / "a")]) == 0
    entry = next(store.glob("*.npz"))
    good = entry.read_bytes()
    entry.unlink()  # a new file in its place (the read-only link in OUT a stays as it was)
    entry.write_bytes(good[: len(good) // 2])
    assert main(["reproduce", str(study), "--out", str(tmp_path / "b")]) == 0
    assert len(extractions) == 2  # not served the damaged bytes: extracted again
    assert entry.read_bytes() == good  # and stored anew
    assert (tmp_path / "b" / "cache" / "dumps" / entry.name).read_bytes() == good


def test_off_keeps_each_output_folder_to_itself(
    encoder: Encoders, store: Path, extractions: list[Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    study = study_of(encoder.file_spec, tmp_path)
    monkeypatch.setenv("AUDIOREPRO_EMBEDDING_CACHE", "off")
    for out in ("a", "b"):
        assert main(["reproduce", str(study), "--out", str(tmp_path / out)]) == 0
    assert len(extractions) == 2 and not store.exists()
    monkeypatch.setenv("AUDIOREPRO_EMBEDDING_CACHE", "maybe")
    capsys.readouterr()
    assert main(["reproduce", str(study), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "AUDIOREPRO_EMBEDDING_CACHE" in err[0] and "on or off" in err[0]
    assert not (tmp_path / "c").exists()  # refused before anything is written


def test_an_audio_only_entry_is_shared_as_well(store: Path, tmp_path: Path) -> None:
    """The speaker-verification and probe kinds' audio-only entries take the same path."""
    from audiorepro.runner.cache import cache_dump_path, cached_audio_dump, record_entry

    key = "f" * 64
    dump = make_audio_dump(np.eye(3, dtype=np.float32), ["a", "b", "c"], {"cache_key": key})
    first, second = tmp_path / "a" / "cache" / "dumps", tmp_path / "b" / "cache" / "dumps"
    save_audio_dump(cache_dump_path(first, key), dump)
    record_entry(first, key)
    assert cached_audio_dump(second, key) is not None
    assert load_audio_dump(cache_dump_path(second, key)).audio_ids == ("a", "b", "c")
    assert os.path.samefile(cache_dump_path(second, key), cache_dump_path(store, key))


def test_a_damaged_entry_in_out_is_restored_from_the_store(
    encoder: Encoders, store: Path, extractions: list[Path], tmp_path: Path
) -> None:
    """OUT's copy replaced by other bytes: the store's checked entry is linked in again, no
    extraction; the folder verifies; OUT keeps its entry when the store and the first folder
    are removed."""
    study = study_of(encoder.file_spec, tmp_path)
    for out in ("a", "b"):
        assert main(["reproduce", str(study), "--out", str(tmp_path / out)]) == 0
    entry = next((tmp_path / "b" / "cache" / "dumps").glob("*.npz"))
    entry.unlink()
    entry.write_bytes(b"not a dump")
    assert main(["reproduce", str(study), "--out", str(tmp_path / "b")]) == 0
    assert len(extractions) == 1
    assert entry.read_bytes() == (store / entry.name).read_bytes()
    shutil.rmtree(store)
    shutil.rmtree(tmp_path / "a")
    assert main(["verify", str(tmp_path / "b")]) == 0
    assert main(["reproduce", str(study), "--out", str(tmp_path / "b")]) == 0
    assert len(extractions) == 1


def test_a_store_that_cannot_be_written_leaves_the_run_to_its_own_cache(
    encoder: Encoders, store: Path, extractions: list[Path], tmp_path: Path
) -> None:
    """The store's place taken by a file (as a read-only or full home refuses it): each output
    folder extracts into its own cache, and the run goes on."""
    store.parent.mkdir(parents=True)
    store.write_text("not a folder")
    study = study_of(encoder.file_spec, tmp_path)
    for out in ("a", "b"):
        assert main(["reproduce", str(study), "--out", str(tmp_path / out)]) == 0
    assert len(extractions) == 2 and store.read_text() == "not a folder"

"""The extraction cache is keyed and checked by content: a checkpoint replaced at the same
path, or a cache entry rewritten under the same key, is extracted again (issue 14, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.core.io import npz_bytes
from audiorepro.runner.cache import cache_dump_path, extract_key
from audiorepro.runner.executors import local
from audiorepro.specs.study import Cell, Extraction
from tests.conftest import FIXTURES

AUDIO = FIXTURES / "audio"


def _cell(model: str, **settings: object) -> Cell:
    extraction = Extraction(
        model=model, audio=AUDIO, captions=AUDIO / "captions.csv", settings=dict(settings)
    )
    return Cell("c", "m", "d", None, None, extraction, ("canonical",))


def test_a_checkpoint_replaced_at_the_same_path_gets_a_new_key(tmp_path: Path) -> None:
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"first weights")
    first = extract_key(_cell(f"laion:{checkpoint}"))
    assert extract_key(_cell(f"laion:{checkpoint}")) == first
    checkpoint.write_bytes(b"other weights")
    assert extract_key(_cell(f"laion:{checkpoint}")) != first


def test_a_file_of_an_hf_folder_replaced_gets_a_new_key(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"a")
    first = extract_key(_cell(f"hf:{folder}"))
    (folder / "config.json").write_text('{"hidden": 2}')
    assert extract_key(_cell(f"hf:{folder}")) != first


def test_settings_are_in_the_key(tmp_path: Path) -> None:
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"w")
    spec = f"laion:{checkpoint}"
    assert extract_key(_cell(spec, batch_size=2)) != extract_key(_cell(spec, batch_size=3))


def _fixture_arrays(scale: float, key: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "dumps" / "synthetic_5cap.npz", allow_pickle=False) as z:
        arrays = {name: z[name] for name in z.files}
    arrays["audio_embeds"] = arrays["audio_embeds"] * scale
    meta = json.loads(str(arrays.get("meta_json", np.asarray("{}"))))
    arrays["meta_json"] = np.asarray(json.dumps({**meta, "cache_key": key}, sort_keys=True))
    return arrays


def test_a_rewritten_cache_entry_is_extracted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"w")
    cell = _cell(f"laion:{checkpoint}")
    calls: list[Path] = []

    def fake_extract(cell: Cell, path: Path, key: str, shard: object = None) -> None:
        calls.append(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(npz_bytes(_fixture_arrays(1.0, key)))

    monkeypatch.setattr(local, "extract_cell", fake_extract)
    cache = tmp_path / "cache"
    first = local.extract_local(cell, cache)
    assert len(calls) == 1
    assert local.extract_local(cell, cache).sha256 == first.sha256 and len(calls) == 1
    # Same cache_key inside, other numbers: not the entry that was written.
    entry = cache_dump_path(cache, extract_key(cell))
    entry.write_bytes(npz_bytes(_fixture_arrays(0.5, extract_key(cell))))
    again = local.extract_local(cell, cache)
    assert len(calls) == 2 and again.sha256 == first.sha256


def test_a_laion_path_spec_takes_its_architecture_from_the_study(tmp_path: Path) -> None:
    # enable_fusion was an "unknown preprocessing setting": a fused checkpoint could not be
    # used from a study.
    from audiorepro.runner.cache import cell_spec
    from audiorepro.specs.study import load_study

    (tmp_path / "fused.pt").write_bytes(b"w")
    study = tmp_path / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "s"\n[[cell]]\nid = "c"\nmodel = "m"\n'
        'dataset = "d"\n'
        f'extract = {{ model = "laion:{tmp_path / "fused.pt"}", audio = "{AUDIO}", '
        f'captions = "{AUDIO / "captions.csv"}", '
        "settings = { enable_fusion = true, batch_size = 2 } }\n"
    )
    loaded = load_study(study)
    assert loaded.kind == "retrieval"
    spec, overrides = cell_spec(loaded.cells[0])
    assert spec.architecture.enable_fusion is True and overrides == {"batch_size": 2}
    study.write_text(study.read_text().replace("enable_fusion = true", 'enable_fusion = "maybe"'))
    with pytest.raises(UserError, match="'maybe' is not valid") as info:
        load_study(study)
    assert info.value.key == "enable_fusion"


def test_a_cache_that_cannot_be_written_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An extraction whose dump cannot be written to the cache (here: the cache is under a
    file; a full disk is the same WriteError) stops the run with exit 2, instead of being
    recorded as a failed cell while the run goes on to write its outputs (exit 1)."""
    from audiorepro.core.errors import WriteError
    from audiorepro.core.io import atomic_write_bytes
    from audiorepro.runner.kinds.retrieval import CellResult, load_cell

    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"w")
    cell = _cell(f"laion:{checkpoint}")

    def extract_to_cache(cell: Cell, path: Path, key: str, shard: object = None) -> None:
        atomic_write_bytes(path, npz_bytes(_fixture_arrays(1.0, key)))  # as extract does

    monkeypatch.setattr(local, "extract_cell", extract_to_cache)
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(WriteError, match="cannot be written"):
        load_cell(CellResult(cell), tmp_path / "a-file" / "cache")
    assert not list(tmp_path.rglob("*.tmp"))

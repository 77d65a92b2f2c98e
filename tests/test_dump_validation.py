"""Every kind of bad dump gets one clear line naming the file and the key, and exit code 2."""

from __future__ import annotations

import io
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.core.errors import UserError


def good() -> dict[str, Any]:
    return {
        "audio_embeds": np.eye(3, 4, dtype=np.float32),
        "text_embeds": np.eye(4, dtype=np.float32)[[0, 1, 2, 2]],
        "text_to_audio": np.array([0, 1, 2, 2]),
    }


def _changed(
    base: Callable[[], dict[str, Any]], changes: dict[str, Any]
) -> Callable[[], dict[str, Any]]:
    """``base()`` with keys replaced, added, or (value None) removed."""

    def make() -> dict[str, Any]:
        d = base()
        for k, v in changes.items():
            if v is None:
                del d[k]
            else:
                d[k] = v
        return d

    return make


def with_(**changes: Any) -> Callable[[], dict[str, Any]]:
    return _changed(good, changes)


F = np.float32
CASES: list[tuple[str, Callable[[], dict[str, Any]], str | None, str]] = [
    ("missing key", with_(text_to_audio=None), "text_to_audio", "missing"),
    ("unknown key", with_(extra=np.zeros(1)), "extra", "not a dump key"),
    (
        "int embeddings",
        with_(audio_embeds=np.eye(3, 4, dtype=np.int32)),
        "audio_embeds",
        "float32 or float64",
    ),
    ("1-D embeddings", with_(audio_embeds=np.zeros(4, F)), "audio_embeds", "2 dimensions"),
    ("no rows", with_(audio_embeds=np.zeros((0, 4), F)), "audio_embeds", "no rows"),
    (
        "D = 0",
        with_(audio_embeds=np.zeros((3, 0), F), text_embeds=np.zeros((4, 0), F)),
        "audio_embeds",
        "D = 0",
    ),
    ("D mismatch", with_(text_embeds=np.zeros((4, 5), F)), "text_embeds", "D = 4"),
    (
        "dtype mismatch",
        with_(text_embeds=np.zeros((4, 4), np.float64)),
        "text_embeds",
        "float32 like",
    ),
    ("NaN", with_(text_embeds=np.full((4, 4), np.nan, F)), "text_embeds", "non-finite"),
    ("inf", with_(audio_embeds=np.full((3, 4), np.inf, F)), "audio_embeds", "non-finite"),
    ("float indices", with_(text_to_audio=np.array([0.0, 1, 2, 2])), "text_to_audio", "integer"),
    ("index shape", with_(text_to_audio=np.array([0, 1, 2])), "text_to_audio", "(4,)"),
    ("index out of range", with_(text_to_audio=np.array([0, 1, 2, 3])), "text_to_audio", "[0, 3)"),
    ("negative index", with_(text_to_audio=np.array([0, 1, 2, -1])), "text_to_audio", "[0, 3)"),
    (
        "clip without caption",
        with_(text_to_audio=np.array([0, 1, 1, 1])),
        "text_to_audio",
        "clip 2 no caption",
    ),
    ("ids shape", with_(audio_ids=np.array(["a", "b"])), "audio_ids", "(3,)"),
    ("ids dtype", with_(audio_ids=np.arange(3)), "audio_ids", "expected str"),
    ("bad meta", with_(meta_json=np.asarray("{not json")), "meta_json", "not valid JSON"),
    ("meta not object", with_(meta_json=np.asarray("[1]")), "meta_json", "not an object"),
    ("empty dump", lambda: {}, None, "is empty"),
]


def _run(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["metrics", str(path)])
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("name,make,key,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_dump(
    name: str,
    make: Callable[[], dict[str, Any]],
    key: str | None,
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **make())
    code, err = _run(path, capsys)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(path) in err and expected in err
    if key is not None:
        assert f"key '{key}'" in err


def test_pickled_object_array_is_never_loaded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pickled.npz"
    d = good()
    d["captions"] = np.array([{"a": 1}, None, "x", 3], dtype=object)
    np.savez(path, **d)
    code, err = _run(path, capsys)
    assert code == 2 and "pickled object array" in err and "key 'captions'" in err


@pytest.mark.parametrize(
    "content,expected",
    [
        (b"this is not a zip file", "not a readable .npz"),
        (pickle.dumps({"audio_embeds": 1}), "not a readable .npz"),
    ],
)
def test_not_an_npz(
    content: bytes, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "junk.npz"
    path.write_bytes(content)
    code, err = _run(path, capsys)
    assert code == 2 and expected in err and str(path) in err


def test_single_npy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "one.npy"
    np.save(path, np.zeros(3))
    code, err = _run(path, capsys)
    assert code == 2 and "single .npy" in err


def test_corrupt_member(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "corrupt.npz"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("audio_embeds.npy", b"\x93NUMPY garbage")
    path.write_bytes(buf.getvalue())
    code, err = _run(path, capsys)
    assert code == 2 and str(path) in err and "Traceback" not in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(tmp_path / "nope.npz", capsys)
    assert code == 2 and "no such file" in err


def test_user_error_message_format() -> None:
    e = UserError("is missing (required)", source="x.npz", key="text_embeds")
    assert str(e) == "x.npz: key 'text_embeds': is missing (required)"


# --- format version 2: relevance as CSR over clips, instead of text_to_audio ---------------


def good_rel() -> dict[str, Any]:
    """3 clips, 4 texts: text 3 is relevant to clips 0 and 2 (a class prompt, say)."""
    return {
        "audio_embeds": np.eye(3, 4, dtype=np.float32),
        "text_embeds": np.eye(4, dtype=np.float32),
        "relevance_indptr": np.array([0, 2, 3, 5]),
        "relevance_indices": np.array([0, 3, 1, 2, 3]),
    }


def rel_with(**changes: Any) -> Callable[[], dict[str, Any]]:
    return _changed(good_rel, changes)


REL_CASES = [
    (
        "both t2a and relevance",
        rel_with(text_to_audio=np.array([0, 1, 2, 2])),
        "relevance_indptr",
        "together with text_to_audio",
    ),
    (
        "neither",
        rel_with(relevance_indptr=None, relevance_indices=None),
        "text_to_audio",
        "missing",
    ),
    ("indptr alone", rel_with(relevance_indices=None), "relevance_indices", "missing"),
    ("indices alone", rel_with(relevance_indptr=None), "relevance_indptr", "missing"),
    (
        "float indptr",
        rel_with(relevance_indptr=np.array([0.0, 2, 3, 5])),
        "relevance_indptr",
        "integer",
    ),
    ("bool indices", rel_with(relevance_indices=np.ones(5, bool)), "relevance_indices", "integer"),
    (
        "2-d indices",
        rel_with(relevance_indices=np.zeros((5, 1), int)),
        "relevance_indices",
        "1 dim",
    ),
    ("indptr length", rel_with(relevance_indptr=np.array([0, 2, 5])), "relevance_indptr", "(4,)"),
    (
        "indptr start",
        rel_with(relevance_indptr=np.array([1, 2, 3, 5])),
        "relevance_indptr",
        "expected 0",
    ),
    (
        "indptr decreasing",
        rel_with(relevance_indptr=np.array([0, 3, 2, 5])),
        "relevance_indptr",
        "non-decreasing",
    ),
    (
        "indptr end",
        rel_with(relevance_indptr=np.array([0, 2, 3, 4])),
        "relevance_indptr",
        "(the length",
    ),
    (
        "indptr end uint64",
        rel_with(relevance_indptr=np.array([0, 2, 3, 2**64 - 1], np.uint64)),
        "relevance_indptr",
        "ends at 18446744073709551615",
    ),
    (
        "index too big",
        rel_with(relevance_indices=np.array([0, 3, 1, 2, 4])),
        "relevance_indices",
        "[0, 4)",
    ),
    (
        "negative index",
        rel_with(relevance_indices=np.array([0, -1, 1, 2, 3])),
        "relevance_indices",
        "[0, 4)",
    ),
    (
        "duplicate in clip",
        rel_with(relevance_indices=np.array([3, 3, 1, 2, 0])),
        "relevance_indices",
        "text row 3 twice for clip 0",
    ),
    (
        "clip without text",
        rel_with(
            relevance_indptr=np.array([0, 2, 2, 5]), relevance_indices=np.array([0, 3, 1, 2, 3])
        ),
        "relevance_indptr",
        "clip 1 no relevant text",
    ),
    (
        "text without clip",
        rel_with(relevance_indices=np.array([0, 3, 3, 2, 3])),
        "relevance_indices",
        "text row 1 relevant to no clip",
    ),
    ("version mismatch", rel_with(format_version=np.asarray(1)), "format_version", "expected 2"),
    ("version not int", rel_with(format_version=np.asarray("2")), "format_version", "integer"),
    ("v1 version mismatch", with_(format_version=np.asarray(2)), "format_version", "expected 1"),
]


@pytest.mark.parametrize("name,make,key,expected", REL_CASES, ids=[c[0] for c in REL_CASES])
def test_bad_relevance_dump(
    name: str,
    make: Callable[[], dict[str, Any]],
    key: str,
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    test_bad_dump(name, make, key, expected, tmp_path, capsys)


def test_relevance_dump_round_trips_and_v1_keeps_its_bytes(tmp_path: Path) -> None:
    from audiorepro.core.io import npz_bytes
    from audiorepro.formats.dump import dump_arrays, load_dump, make_dump, save_dump

    rel = good_rel()
    shuffled = np.array([3, 0, 1, 3, 2])  # unsorted within clips 0 and 2
    d = make_dump(
        rel["audio_embeds"],
        rel["text_embeds"],
        relevance_indptr=rel["relevance_indptr"],
        relevance_indices=shuffled,
    )
    assert d.text_to_audio is None and d.format_version == 2
    assert d.relevance.indices.tolist() == [0, 3, 1, 2, 3]
    assert d.relevance.transpose().indptr.tolist() == [0, 1, 2, 3, 5]
    assert d.captions_per_clip is None and d.multi_positive
    save_dump(tmp_path / "r.npz", d)
    back = load_dump(tmp_path / "r.npz")
    assert back.relevance.indices.tolist() == [0, 3, 1, 2, 3] and back.format_version == 2
    with np.load(tmp_path / "r.npz") as z:
        assert int(z["format_version"]) == 2 and "text_to_audio" not in z.files

    v1 = make_dump(**good())
    assert v1.format_version == 1 and "format_version" not in dump_arrays(v1)
    assert v1.relevance.indptr.tolist() == [0, 1, 2, 4]
    assert v1.relevance.indices.tolist() == [0, 1, 2, 3]
    assert v1.relevance.one_clip_per_text() is not None
    # The same relevance written as CSR: one caption per clip... except clip 2 has two.
    same = make_dump(
        good()["audio_embeds"],
        good()["text_embeds"],
        relevance_indptr=v1.relevance.indptr,
        relevance_indices=v1.relevance.indices,
    )
    assert same.captions_per_clip == v1.captions_per_clip
    assert same.multi_positive == v1.multi_positive
    t2a = same.relevance.one_clip_per_text()
    assert t2a is not None and t2a.tolist() == [0, 1, 2, 2]
    # A version-1 dump's file bytes do not change (no format_version key is written).
    assert npz_bytes(dump_arrays(v1)) == npz_bytes(
        {k: v for k, v in dump_arrays(v1).items() if k != "format_version"}
    )

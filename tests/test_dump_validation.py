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


def with_(**changes: Any) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        d = good()
        for k, v in changes.items():
            if v is None:
                del d[k]
            else:
                d[k] = v
        return d

    return make


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

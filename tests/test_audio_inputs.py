"""Audio decoding, caption files and their matching: behaviour and clear errors."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.formats.audio import SAMPLE_RATE, read_audio
from audiorepro.formats.captions import list_audio, match_audio, parse_captions, read_captions
from tests.conftest import FIXTURES

soundfile = pytest.importorskip("soundfile")


def _wav(path: Path, samples: np.ndarray, rate: int) -> Path:
    frames = np.atleast_2d(samples.T).T if samples.ndim == 1 else samples
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(frames.shape[1] if frames.ndim == 2 else 1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((frames * 32767).astype("<i2").tobytes())
    path.write_bytes(buf.getvalue())
    return path


def test_resamples_to_48k_and_mixes_to_mono(tmp_path: Path) -> None:
    t = np.arange(16_000) / 16_000
    left, right = 0.5 * np.sin(2 * np.pi * 440 * t), np.zeros_like(t)
    out = read_audio(_wav(tmp_path / "s.wav", np.stack([left, right], axis=1), 16_000))
    assert out.dtype == np.float32 and out.shape == (SAMPLE_RATE,)
    # Mono is the mean of the channels: peak about half of the left channel's 0.5.
    assert 0.24 < float(np.abs(out[1000:-1000]).max()) < 0.26


def test_48k_input_is_not_resampled(tmp_path: Path) -> None:
    x = (np.arange(480) % 7 - 3) / 10.0
    out = read_audio(_wav(tmp_path / "s.wav", x, SAMPLE_RATE))
    np.testing.assert_array_equal(out, (x * 32767).astype(np.int16) / 32768.0)


def test_fixture_clips_decode(tmp_path: Path) -> None:
    lengths = {p.name: read_audio(p).shape[0] for p in sorted((FIXTURES / "audio").glob("*.wav"))}
    assert lengths["long_am_tone.wav"] == 11 * SAMPLE_RATE
    assert lengths["chirp_up.wav"] == 4 * SAMPLE_RATE


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "cannot be decoded"),
        (b"RIFF\x00\x00\x00\x00WAVEjunk", "cannot be decoded"),
        (b"not audio at all" * 10, "cannot be decoded"),
    ],
)
def test_undecodable_audio_is_a_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_bytes(content)
    with pytest.raises(UserError, match=message) as info:
        read_audio(bad)
    assert "bad.wav" in str(info.value)


def test_silent_clip_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="silent") as info:
        read_audio(_wav(tmp_path / "quiet.wav", np.zeros(4800), SAMPLE_RATE))
    assert "quiet.wav" in str(info.value)


def test_missing_audio_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such audio file"):
        read_audio(tmp_path / "nope.wav")


CLOTHO = "file_name,caption_1,caption_2\nb.wav,a dog barks,barking\na.wav,rain falls,rain\n"
LONG = "file_name,caption\nb.wav,a dog barks\na.wav,rain falls\nb.wav,barking\n"


def test_clotho_layout_keeps_csv_order() -> None:
    caps = parse_captions(CLOTHO)
    assert caps.layout == "clotho"
    assert caps.clips == ("b.wav", "a.wav")
    assert caps.texts == ("a dog barks", "barking", "rain falls", "rain")
    assert caps.clip_index == (0, 0, 1, 1)


def test_long_layout_groups_a_clips_rows_in_order() -> None:
    caps = parse_captions(LONG)
    assert caps.layout == "long"
    assert caps.clips == ("b.wav", "a.wav")
    assert caps.texts == ("a dog barks", "barking", "rain falls")
    assert caps.clip_index == (0, 0, 1)


@pytest.mark.parametrize(
    "text, key, message",
    [
        ("", None, "is empty"),
        ("name,caption\na.wav,x\n", "header", "expected 'file_name'"),
        ("file_name,text\na.wav,x\n", "header", "neither"),
        ("file_name,caption\n", None, "no captions"),
        ("file_name,caption\na.wav\n", "line 2", "1 fields, expected 2"),
        ("file_name,caption\na.wav,   \n", "caption", "empty caption"),
        ("file_name,caption_1\na.wav,x\na.wav,y\n", "file_name", "appears twice"),
        ("file_name,caption\n,x\n", "file_name", "empty file_name"),
    ],
)
def test_bad_caption_files(text: str, key: str | None, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        parse_captions(text, source="caps.csv")
    assert info.value.source == "caps.csv"
    assert info.value.key == key


def test_caption_file_must_match_the_audio(tmp_path: Path) -> None:
    audio = {"a.wav": tmp_path / "a.wav", "b.wav": tmp_path / "b.wav"}
    caps = parse_captions("file_name,caption\na.wav,x\nc.wav,y\n")
    with pytest.raises(UserError, match=r"no audio file, first \['c.wav'\]"):
        match_audio(caps, audio, source="caps.csv")
    caps = parse_captions("file_name,caption\na.wav,x\n")
    with pytest.raises(UserError, match=r"no caption for 1 audio file\(s\), first \['b.wav'\]"):
        match_audio(caps, audio, source="caps.csv")


def test_audio_list_file_and_folder(tmp_path: Path) -> None:
    folder = list_audio(FIXTURES / "audio")
    assert sorted(folder) == sorted(read_captions(FIXTURES / "audio" / "captions.csv").clips)
    listing = tmp_path / "list.txt"
    listing.write_text(f"# clips\n{FIXTURES / 'audio' / 'clicks.wav'}\n")
    assert list(list_audio(listing)) == ["clicks.wav"]
    with pytest.raises(UserError, match="holds no audio files"):
        list_audio(tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else tmp_path)

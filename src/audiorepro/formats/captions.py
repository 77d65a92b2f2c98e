"""Caption files and the audio list they describe.

Two CSV layouts are read (UTF-8, a header row, standard CSV quoting):

- Clotho's own: ``file_name,caption_1,caption_2,caption_3,caption_4,caption_5`` (any number of
  ``caption_<i>`` columns, all filled);
- long: ``file_name,caption``, one row per caption, a clip on several rows.

Clips keep the CSV's order of first appearance; a clip's captions keep their column or row
order. The audio side is a folder (every file with an audio suffix) or a text file listing one
path per line (relative paths are taken from the list's folder). Every captioned clip must have
an audio file and every audio file a caption: a mismatch is an error naming the first
offending names, never a silently smaller evaluation.

:func:`load_inputs` checks all of it before any model work (``extract``, ``identity``, and a
study's extraction cells when the study loads): the caption file (a regular UTF-8 file of at
most :data:`~audiorepro.core.io.TEXT_MAX_BYTES`, valid CSV in one of the layouts, no clip
twice in the Clotho layout, the captions per clip its ``dataset.json`` declares), the audio
list, the match between them, and every clip's header (:func:`~.audio.check_audio`). Each
problem is one :class:`~audiorepro.core.errors.UserError` naming the file and the field.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file
from audiorepro.core.io import read_text
from audiorepro.formats.audio import AUDIO_SUFFIXES, check_audio
from audiorepro.formats.coverage import dataset_record


@dataclass(frozen=True)
class Captions:
    """Clips in order, and the captions as parallel ``texts`` / ``clip_index`` lists."""

    clips: tuple[str, ...]
    texts: tuple[str, ...]
    clip_index: tuple[int, ...]
    layout: str


_CAPTION_COLUMN = re.compile(r"caption_(\d+)$")


def _check_quotes_closed(text: str, source: str) -> None:
    """Refuse a quoted field that is never closed: csv reads it, leniently, to the end of the
    file as one caption, so the clips after it looked like missing captions.

    >>> try:
    ...     _check_quotes_closed('file_name,caption\\na.wav,"a dog\\nb.wav,rain\\n', "c.csv")
    ... except UserError as exc:
    ...     print(str(exc)[:60])
    c.csv: key 'line 2': opens a quoted field that is never clos
    """
    reader = csv.reader(io.StringIO(text), strict=True)
    start = 1
    try:
        for _ in reader:
            start = reader.line_num + 1
    except csv.Error as exc:
        if str(exc) != "unexpected end of data":
            return  # other quoting csv reads leniently, as before
        raise UserError(
            "opens a quoted field that is never closed (an unterminated quote: the rest of "
            "the file would be one caption); expected each '\"' closed by another",
            source=source,
            key=f"line {start}",
        ) from None


def parse_captions(text: str, *, source: str = "<captions>") -> Captions:
    """Parse a caption CSV in either layout.

    >>> c = parse_captions("file_name,caption\\nb.wav,a dog\\na.wav,rain\\nb.wav,a bark\\n")
    >>> c.clips, c.texts, c.clip_index
    (('b.wav', 'a.wav'), ('a dog', 'a bark', 'rain'), (0, 0, 1))
    """
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        # A NUL byte, a field beyond csv's size limit (a huge single line), bad quoting.
        raise UserError(f"is not valid CSV ({exc})", source=source, key="line") from None
    _check_quotes_closed(text, source)
    if not rows:
        raise UserError("is empty (expected a header row and captions)", source=source)
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if any(cell.strip() for cell in r)]
    if not header or header[0] != "file_name":
        raise UserError(
            f"first column is {header[0] if header else ''!r}; expected 'file_name' "
            "(Clotho: file_name,caption_1..caption_5; long: file_name,caption)",
            source=source,
            key="header",
        )
    if header[1:] == ["caption"]:
        layout, columns = "long", [1]
    else:
        numbered = [_CAPTION_COLUMN.match(h) for h in header[1:]]
        if not numbered or not all(numbered):
            raise UserError(
                f"header {','.join(header)!r} is neither 'file_name,caption' nor "
                "'file_name,caption_1,...,caption_N'",
                source=source,
                key="header",
            )
        layout, columns = "clotho", list(range(1, len(header)))
    if not body:
        raise UserError("has a header but no captions", source=source)
    order: dict[str, list[str]] = {}
    for line, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise UserError(
                f"line {line} has {len(row)} fields, expected {len(header)}",
                source=source,
                key=f"line {line}",
            )
        name = row[0].strip()
        if not name:
            raise UserError(f"line {line} has an empty file_name", source=source, key="file_name")
        for col in columns:
            caption = row[col].strip()
            if not caption:
                raise UserError(
                    f"line {line} ({name}) has an empty caption", source=source, key=header[col]
                )
            order.setdefault(name, []).append(caption)
        if layout == "clotho" and len(order[name]) > len(columns):
            raise UserError(
                f"line {line}: clip {name!r} appears twice", source=source, key="file_name"
            )
    clips = tuple(order)
    texts: list[str] = []
    index: list[int] = []
    for i, name in enumerate(clips):
        texts += order[name]
        index += [i] * len(order[name])
    return Captions(clips=clips, texts=tuple(texts), clip_index=tuple(index), layout=layout)


def read_captions(path: str | Path) -> Captions:
    text = read_text(path, what="a caption CSV", encoding="utf-8-sig")
    return parse_captions(text, source=str(path))


def list_audio(audio: str | Path) -> dict[str, Path]:
    """File name -> path for a folder of audio files or a list file (one path per line)."""
    audio = Path(audio)
    if audio.is_dir():
        files = sorted(p for p in audio.iterdir() if p.suffix.lower() in AUDIO_SUFFIXES)
        if not files:
            raise UserError(
                f"holds no audio files (looked for {', '.join(AUDIO_SUFFIXES)})", source=audio
            )
    elif audio.exists() or audio.is_symlink():
        check_regular_file(audio, what="an audio folder or a list file")
        if audio.suffix.lower() in AUDIO_SUFFIXES:
            raise UserError(
                "is an audio file; expected the folder of the clips or a list file", source=audio
            )
        text = read_text(audio, what="an audio list file (one path per line)")
        lines = [ln.strip() for ln in text.splitlines()]
        files = [(audio.parent / ln) for ln in lines if ln and not ln.startswith("#")]
        if not files:
            raise UserError("lists no audio files", source=audio)
    else:
        raise UserError("no such audio folder or list file", source=audio)
    by_name: dict[str, Path] = {}
    for f in files:
        if f.name in by_name:
            raise UserError(f"names {f.name!r} twice (clips are keyed by file name)", source=audio)
        by_name[f.name] = f
    return by_name


def match_audio(captions: Captions, audio: dict[str, Path], *, source: str) -> list[Path]:
    """The audio path of every captioned clip, in caption order; mismatches are errors."""
    missing = [c for c in captions.clips if c not in audio]
    if missing:
        raise UserError(
            f"names {len(missing)} clip(s) with no audio file, first {missing[:3]}",
            source=source,
            key="file_name",
        )
    extra = sorted(set(audio) - set(captions.clips))
    if extra:
        raise UserError(
            f"has no caption for {len(extra)} audio file(s), first {extra[:3]} "
            "(every clip needs at least one caption)",
            source=source,
            key="file_name",
        )
    return [audio[c] for c in captions.clips]


@dataclass(frozen=True)
class Inputs:
    """An extraction's inputs, checked: the captions and each captioned clip's audio path."""

    captions: Captions
    paths: tuple[Path, ...]


def load_inputs(captions_path: str | Path, audio: str | Path) -> Inputs:
    """Read and check an extraction's captions and audio before any model work (see the
    module docstring); every problem is one UserError naming the file and the field."""
    captions_path = Path(captions_path)
    caps = read_captions(captions_path)
    record = dataset_record(captions_path)
    expected = None if record is None else record.get("captions_per_clip")
    if isinstance(expected, int) and not isinstance(expected, bool):
        per = Counter(caps.clip_index)
        counts = [per[i] for i in range(len(caps.clips))]
        wrong = [(c, n) for c, n in zip(caps.clips, counts, strict=True) if n != expected]
        if wrong:
            raise UserError(
                f"clip {wrong[0][0]!r} has {wrong[0][1]} caption(s) ({len(wrong)} clip(s) "
                f"differ); its dataset.json declares {expected} per clip",
                source=captions_path,
                key="captions_per_clip",
            )
    paths = match_audio(caps, list_audio(audio), source=str(captions_path))
    for path in paths:
        check_audio(path)
    return Inputs(captions=caps, paths=tuple(paths))

"""The embedding dump format (``.npz``) and its validation.

A dump holds the embeddings of one model on one dataset:

=================  ==========================  =============================================
key                dtype / shape               meaning
=================  ==========================  =============================================
``audio_embeds``   float32 or float64 [N, D]   one row per clip
``text_embeds``    same dtype [M, D]           one row per caption
``text_to_audio``  integer [M]                 caption ``i`` describes clip ``text_to_audio[i]``
``audio_ids``      str [N] (optional)          clip identifiers, e.g. file names
``captions``       str [M] (optional)          the caption texts
``meta_json``      str scalar (optional)       JSON object: model, revision, dataset, ...
=================  ==========================  =============================================

Every clip must have at least one caption; captions per clip may vary. Files are read with
``allow_pickle=False``: an object array is refused, never unpickled.
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file, sha256_file
from audiorepro.core.io import atomic_write_bytes, npz_bytes

NOT_FINITE_JSON = "expected a finite number (nan and inf are refused)"
REQUIRED_KEYS = ("audio_embeds", "text_embeds", "text_to_audio")
OPTIONAL_KEYS = ("audio_ids", "captions", "meta_json")
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class Dump:
    """A validated embedding dump. Arrays are read-only."""

    audio_embeds: npt.NDArray[np.floating[Any]]
    text_embeds: npt.NDArray[np.floating[Any]]
    text_to_audio: npt.NDArray[np.int64]
    audio_ids: tuple[str, ...] | None = None
    captions: tuple[str, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"
    sha256: str | None = None

    @property
    def n_clips(self) -> int:
        return int(self.audio_embeds.shape[0])

    @property
    def n_captions(self) -> int:
        return int(self.text_embeds.shape[0])

    @property
    def captions_per_clip(self) -> int | None:
        """The number of captions of every clip, or None when it varies."""
        counts = np.bincount(self.text_to_audio, minlength=self.n_clips)
        return int(counts[0]) if bool(np.all(counts == counts[0])) else None

    @property
    def multi_positive(self) -> bool:
        """True when some clip has more than one caption (a2t queries with several relevant)."""
        counts = np.bincount(self.text_to_audio, minlength=self.n_clips)
        return bool(counts.max() > 1)


#: A member that inflates more than this many times its stored size is refused before it is
#: read: numbers (embeddings, indices) compress little, a zip bomb about a thousandfold.
MAX_INFLATION = 100
#: The same for string members (ids, captions): numpy stores them as fixed-width UTF-32, whose
#: zero bytes and padding compress far better than numbers.
MAX_INFLATION_STRINGS = 1000
#: Members smaller than this are never refused for their inflation (a short caption list or a
#: metadata string may compress well).
INFLATION_FLOOR = 1 << 20


def inspect_npz(path: Path, *, source: str) -> None:
    """Check an archive before any array is read, from its directory and each member's .npy
    header only (bounded memory, whatever the file declares): each member once, a
    well-formed header, no member that inflates beyond :data:`MAX_INFLATION` (strings
    :data:`MAX_INFLATION_STRINGS`), and a declared shape
    and dtype whose size is the member's size."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            seen: set[str] = set()
            for info in infos:
                key = info.filename.removesuffix(".npy")
                if info.filename in seen:
                    raise UserError(
                        "is in the archive twice; expected each array once (which one would "
                        "be read is up to the reader)",
                        source=source,
                        key=key,
                    )
                seen.add(info.filename)
                _check_member(zf, info, source=source, key=key)
    except zipfile.BadZipFile as exc:
        raise UserError(f"is not a readable .npz archive ({exc})", source=source) from None
    except (OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise UserError(f"cannot be read ({exc})", source=source) from None


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, *, source: str, key: str) -> None:
    fmt: Any = np.lib.format
    with zf.open(info) as member:
        try:
            version = fmt.read_magic(member)
            read_header = (
                fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            )
            shape, _, dtype = read_header(member, max_header_size=1 << 16)
        except (
            ValueError,
            SyntaxError,
            TypeError,
            OverflowError,
            MemoryError,
            RecursionError,
        ) as exc:
            raise UserError(
                f"has a malformed .npy header ({str(exc)[:200]})", source=source, key=key
            ) from None
        header = member.tell()
    limit = MAX_INFLATION_STRINGS if dtype.kind in "US" else MAX_INFLATION
    if info.file_size > INFLATION_FLOOR and info.file_size > limit * max(info.compress_size, 1):
        raise UserError(
            f"inflates {info.compress_size} stored bytes to {info.file_size} "
            f"(more than {limit} times); refused before reading",
            source=source,
            key=key,
        )
    if dtype.hasobject:
        return  # refused when read (never unpickled), with its own message
    declared = math.prod(shape) * dtype.itemsize
    if declared != info.file_size - header:
        raise UserError(
            f"declares shape {shape} of {dtype} ({declared} bytes), but holds "
            f"{info.file_size - header} bytes of data",
            source=source,
            key=key,
        )


def read_npz(path: Path, *, what: str) -> dict[str, npt.NDArray[Any]]:
    r"""Every array of an .npz file, never unpickling; problems are :class:`UserError`\s.

    The file type is checked before it is opened (a FIFO would block, a folder is not a
    dump), and the archive is inspected (:func:`inspect_npz`) before any array is read."""
    name = str(path)
    check_regular_file(path, what=what)
    with open(path, "rb") as f:
        if f.read(6) == b"\x93NUMPY":  # refused before np.load allocates what it declares
            raise UserError("is a single .npy array, expected an .npz archive", source=name)
    inspect_npz(path, source=name)
    try:
        loaded = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UserError(f"is not a readable .npz archive ({exc})", source=name) from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise UserError("is a single .npy array, expected an .npz archive", source=name)
    arrays = {}
    with loaded as npz:
        for key in npz.files:
            try:
                arrays[key] = npz[key]
            except ValueError as exc:
                if "allow_pickle" in str(exc):
                    raise UserError(
                        "holds a pickled object array, which is never loaded "
                        "(expected numeric or string arrays)",
                        source=name,
                        key=key,
                    ) from None
                raise UserError(f"cannot be read ({exc})", source=name, key=key) from None
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise UserError(f"cannot be read ({exc})", source=name, key=key) from None
    return arrays


def make_dump(
    audio_embeds: npt.ArrayLike,
    text_embeds: npt.ArrayLike,
    text_to_audio: npt.ArrayLike,
    *,
    audio_ids: npt.ArrayLike | None = None,
    captions: npt.ArrayLike | None = None,
    meta: dict[str, Any] | None = None,
    source: str = "<memory>",
    sha256: str | None = None,
) -> Dump:
    """Validate arrays and build a :class:`Dump` (the same checks as for a file)."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "audio_embeds": np.asarray(audio_embeds),
        "text_embeds": np.asarray(text_embeds),
        "text_to_audio": np.asarray(text_to_audio),
    }
    if audio_ids is not None:
        arrays["audio_ids"] = np.asarray(audio_ids, dtype=str)
    if captions is not None:
        arrays["captions"] = np.asarray(captions, dtype=str)
    if meta is not None:
        arrays["meta_json"] = np.asarray(json.dumps(meta, sort_keys=True))
    return _validate(arrays, source=source, sha256=sha256)


def dump_from_arrays(arrays: dict[str, npt.NDArray[Any]], *, source: str) -> Dump:
    """Validate the arrays of a dump file (as read from it) and build a :class:`Dump`."""
    return _validate(arrays, source=source, sha256=None)


def load_dump(path: str | Path) -> Dump:
    """Load and validate a dump file; any problem raises :class:`UserError` naming file and key."""
    path = Path(path)
    arrays = read_npz(path, what="an .npz embedding dump")
    name = str(path)
    return _validate(arrays, source=path.name, sha256=sha256_file(path), path_for_errors=name)


def _validate(
    arrays: dict[str, npt.NDArray[Any]],
    *,
    source: str,
    sha256: str | None,
    path_for_errors: str | None = None,
) -> Dump:
    where = path_for_errors or source

    def fail(key: str | None, msg: str) -> UserError:
        return UserError(msg, source=where, key=key)

    if not arrays:
        raise fail(None, "is empty (expected keys " + ", ".join(REQUIRED_KEYS) + ")")
    unknown = sorted(set(arrays) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        allowed = ", ".join(REQUIRED_KEYS + OPTIONAL_KEYS)
        raise fail(unknown[0], f"is not a dump key (expected only: {allowed})")
    for key in REQUIRED_KEYS:
        if key not in arrays:
            raise fail(key, "is missing (required)")

    audio, text, t2a = arrays["audio_embeds"], arrays["text_embeds"], arrays["text_to_audio"]
    for key, arr in (("audio_embeds", audio), ("text_embeds", text)):
        if arr.dtype not in FLOAT_DTYPES:
            raise fail(key, f"has dtype {arr.dtype}, expected float32 or float64")
        if arr.ndim != 2:
            raise fail(key, f"has shape {arr.shape}, expected 2 dimensions [rows, D]")
        if arr.shape[0] == 0:
            raise fail(key, "has no rows, expected at least one")
        if arr.shape[1] == 0:
            raise fail(key, "has D = 0, expected at least one dimension")
        if not bool(np.all(np.isfinite(arr))):
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise fail(key, f"has a non-finite value at row {bad[0]}, column {bad[1]}")
    if text.dtype != audio.dtype:
        raise fail(
            "text_embeds", f"has dtype {text.dtype}, expected {audio.dtype} like audio_embeds"
        )
    if text.shape[1] != audio.shape[1]:
        raise fail(
            "text_embeds",
            f"has D = {text.shape[1]}, expected D = {audio.shape[1]} like audio_embeds",
        )
    n, m = audio.shape[0], text.shape[0]
    if t2a.dtype.kind not in "iu":
        raise fail("text_to_audio", f"has dtype {t2a.dtype}, expected an integer dtype")
    if t2a.shape != (m,):
        raise fail("text_to_audio", f"has shape {t2a.shape}, expected ({m},) (one per caption)")
    if m and (int(t2a.min()) < 0 or int(t2a.max()) >= n):
        bad_i = int(np.argmax((t2a < 0) | (t2a >= n)))
        raise fail(
            "text_to_audio",
            f"has value {int(t2a[bad_i])} at caption {bad_i}, expected a clip index in [0, {n})",
        )
    t2a64 = t2a.astype(np.int64)
    counts = np.bincount(t2a64, minlength=n)
    if bool(np.any(counts == 0)):
        raise fail(
            "text_to_audio",
            f"gives clip {int(np.argmin(counts))} no caption, expected at least one per clip",
        )

    audio_ids = _strings(arrays, "audio_ids", n, fail)
    captions = _strings(arrays, "captions", m, fail)
    meta: dict[str, Any] = {}
    if "meta_json" in arrays:
        raw = arrays["meta_json"]
        if raw.dtype.kind != "U" or raw.ndim != 0:
            raise fail(
                "meta_json", f"has dtype {raw.dtype} and shape {raw.shape}, expected a str scalar"
            )
        try:
            meta = json.loads(str(raw), parse_constant=_no_constant, parse_int=_bounded_int)
        except json.JSONDecodeError as exc:
            raise fail(
                "meta_json", f"is not valid JSON ({exc.msg} at position {exc.pos})"
            ) from None
        except RecursionError:
            raise fail("meta_json", "is nested too deeply; expected a flat JSON object") from None
        except ValueError as exc:
            raise fail("meta_json", str(exc)) from None
        if not isinstance(meta, dict):
            raise fail("meta_json", "is JSON but not an object, expected {...}")

    audio = np.ascontiguousarray(audio)
    text = np.ascontiguousarray(text)
    for arr in (audio, text, t2a64):
        arr.setflags(write=False)
    return Dump(
        audio_embeds=audio,
        text_embeds=text,
        text_to_audio=t2a64,
        audio_ids=audio_ids,
        captions=captions,
        meta=meta,
        source=source,
        sha256=sha256,
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"holds {name}; {NOT_FINITE_JSON}")


def _bounded_int(text: str) -> int:
    """JSON integers that a float can hold (a 400-digit ``logit_scale`` overflowed later)."""
    if len(text.lstrip("-")) > 300:
        raise ValueError(f"holds an integer of {len(text)} digits; expected a number a float holds")
    return int(text)


def _strings(
    arrays: dict[str, npt.NDArray[Any]], key: str, n: int, fail: Any
) -> tuple[str, ...] | None:
    if key not in arrays:
        return None
    arr = arrays[key]
    if arr.dtype.kind != "U":
        raise fail(key, f"has dtype {arr.dtype}, expected str")
    if arr.shape != (n,):
        raise fail(key, f"has shape {arr.shape}, expected ({n},)")
    return tuple(str(x) for x in arr)


def dump_arrays(dump: Dump) -> dict[str, npt.NDArray[Any]]:
    """The arrays of a dump file, keyed as in the format table."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "audio_embeds": np.asarray(dump.audio_embeds),
        "text_embeds": np.asarray(dump.text_embeds),
        "text_to_audio": np.asarray(dump.text_to_audio, dtype=np.int64),
        "meta_json": np.asarray(json.dumps(dump.meta, sort_keys=True)),
    }
    if dump.audio_ids is not None:
        arrays["audio_ids"] = np.asarray(dump.audio_ids, dtype=str)
    if dump.captions is not None:
        arrays["captions"] = np.asarray(dump.captions, dtype=str)
    return arrays


def save_dump(path: str | Path, dump: Dump) -> None:
    """Write a dump atomically; the bytes depend only on its contents (:func:`npz_bytes`)."""
    atomic_write_bytes(path, npz_bytes(dump_arrays(dump)))

"""Deterministic, atomic output: the same data always gives the same bytes.

- JSON: sorted keys, two-space indent, floats as Python's shortest round-trip repr, no NaN
  (undefined values are ``null``), trailing newline.
- npz: stored (uncompressed) zip members in sorted order with a fixed 1980-01-01 timestamp.
- Every file is written to a temporary file in the same folder and renamed into place, so a
  reader never sees a half-written file under the final name.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
from typing_extensions import TypeAliasType

from audiorepro.core.errors import WRITE_ERRNOS, UserError, WriteError, write_error
from audiorepro.core.hashing import check_regular_file

#: A JSON object as parsed from a file (:func:`read_json`, a bundle read back): typed loosely
#: where it is read, since its shape is the file's; what flows on from it is a typed record.
JsonObject: TypeAlias = Mapping[str, Any]
#: A JSON value carried whole from one file into another (a dump's meta, a run's config): its
#: shape is its writer's, so code that reads a key of it narrows what it finds there.
JsonValue = TypeAliasType(
    "JsonValue", "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
)

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# Read once: os.umask can only be read by setting it, which is not thread-safe per write.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place. A path
    that cannot be written (a folder, under a file, in a read-only or pseudo file system, a
    full disk, a file-size limit, a quota) is a :class:`~audiorepro.core.errors.WriteError`
    naming it (:func:`~audiorepro.core.errors.write_error`), and leaves nothing behind: the
    temporary file is removed and ``path`` keeps what it held before."""
    path = Path(path)
    check_output_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        if exc.errno in WRITE_ERRNOS:
            raise write_error(exc, path) from None
        raise WriteError(  # under a file, in a pseudo file system
            f"cannot be written ({exc.strerror or exc}); expected a writable file path",
            source=path,
        ) from None
    try:
        # mkstemp creates 0600; give the file the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise write_error(exc, path) from None
    except BaseException:
        _remove(tmp)
        raise


def _kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_output_file(path: str | Path) -> None:
    """Refuse an output path that exists and is not a regular file (its own entry, not what
    a link points at): a symbolic link, a folder, a FIFO, a device node or a socket. An
    output is written beside it and renamed over it, which would replace the link, the FIFO
    or the device itself (as root, ``--json /dev/null`` replaced the system's /dev/null).
    A :class:`~audiorepro.core.errors.WriteError` naming it, before anything is written.

    >>> try:
    ...     check_output_file("/")
    ... except WriteError as exc:
    ...     print(str(exc)[:50])
    /: is a folder; expected a regular file to write (
    """
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return  # not there (or not reachable): the writer says what refuses it
    if not stat.S_ISREG(mode):
        raise WriteError(
            f"is {_kind_of(mode)}; expected a regular file to write (audiorepro replaces only "
            "regular files; choose another output path)",
            source=path,
        )


def _remove(tmp: str) -> None:
    """Remove a half-written temporary file (it may be gone already)."""
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def json_dumps(obj: Any) -> str:
    """Canonical JSON text.

    >>> print(json_dumps({"b": 0.1, "a": [1, None]}), end="")
    {
      "a": [
        1,
        null
      ],
      "b": 0.1
    }
    """
    return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_bytes(path, json_dumps(obj).encode("utf-8"))


def npz_bytes(arrays: dict[str, npt.NDArray[Any]]) -> bytes:
    """An .npz archive whose bytes depend only on the arrays (no timestamps, sorted members)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(  # type: ignore[no-untyped-call]
                member, np.asarray(arrays[key]), allow_pickle=False
            )
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


#: The largest text file a user gives that is read whole (studies, registries, published
#: values, caption files, measurement and record JSON): far above any real one (Clotho's
#: caption file is 0.6 MB), far below what would exhaust memory. Larger files are refused
#: from their size, before they are opened.
TEXT_MAX_BYTES = 64 << 20


def read_text(
    path: str | Path, *, what: str, encoding: str = "utf-8", max_bytes: int = TEXT_MAX_BYTES
) -> str:
    """A user's text file, or a :class:`UserError` naming it and what was expected. A file
    larger than ``max_bytes`` is refused before it is read."""
    path = Path(path)
    check_regular_file(path, what=what)  # before opening: a FIFO would block
    size = path.stat().st_size
    if size > max_bytes:
        raise UserError(
            f"is {size} bytes; expected {what} of at most {max_bytes} bytes "
            "(read whole, so larger files are refused before reading)",
            source=path,
        )
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise UserError(f"is not UTF-8 text ({exc.reason})", source=path) from None


#: The deepest nesting of arrays and objects a JSON document a user gives may have (real ones:
#: under 10); deeper is refused before parsing (the parser recurses).
JSON_MAX_DEPTH = 64
#: The longest JSON integer read (a float holds about 308 digits; Python refuses 4300).
JSON_MAX_DIGITS = 300
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class _JSONRefused(ValueError):
    """A JSON document that parses but is refused; ``key`` names where, when known."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _JSONRefused(
                "has this key twice in one object (which one counts would depend on the "
                "reader); expected each key once",
                key=k,
            )
        out[k] = v
    return out


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > JSON_MAX_DIGITS:
        raise _JSONRefused(
            f"holds an integer of {len(text.lstrip('-'))} digits; expected at most "
            f"{JSON_MAX_DIGITS} (a number a float holds)"
        )
    return int(text)


def _constant(name: str) -> Any:
    raise _JSONRefused(f"holds {name}; expected a finite number (nan and inf are refused)")


def _depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings."""
    depth = deepest = 0
    for ch in re.findall(r"[\[\]{}]", _JSON_STRING.sub('""', text)):
        depth += 1 if ch in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _check_strings(value: Any, depth: int = 0) -> None:
    """Every string (keys too) encodes as UTF-8: a lone surrogate (``\\ud800``) would fail
    later, when it is written."""
    items: list[Any]
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _JSONRefused(
                f"holds the string {value[:40]!r} with a lone surrogate; expected text that "
                "is valid Unicode"
            ) from None
        return
    else:
        return
    for item in items:
        _check_strings(item, depth + 1)


def _counter(limit: int) -> Callable[[str], str]:
    """Passes a number's text through, refusing the one after the ``limit``-th."""
    seen = [0]

    def count(text: str) -> str:
        seen[0] += 1
        if seen[0] > limit:
            raise _JSONRefused(
                f"holds more than {limit} numbers; expected at most {limit} (refused while "
                "reading, before any is used)"
            )
        return text

    return count


def parse_json(
    text: str,
    *,
    source: str | Path,
    key: str | None = None,
    finite: bool = False,
    max_numbers: int | None = None,
) -> Any:
    """The one JSON reader for what a user gives (and what verify reads back), or a
    :class:`UserError` naming ``source`` (and ``key``, or the duplicated key) in one line:
    invalid JSON, a key twice in one object, an integer of more than
    :data:`JSON_MAX_DIGITS` digits, nesting deeper than :data:`JSON_MAX_DEPTH`, a lone
    surrogate; with ``finite``, also ``NaN``/``Infinity``; with ``max_numbers``, more numbers
    than that (a few KiB of gzip can hold a million numbers, each of which a reader of the
    document then walks).

    >>> parse_json('{"a": [1, 2.5, null]}', source="x.json")
    {'a': [1, 2.5, None]}
    >>> try:
    ...     parse_json('{"a": 1, "a": 2}', source="x.json")
    ... except UserError as exc:
    ...     print(str(exc)[:50])
    x.json: key 'a': is not accepted JSON: has this ke
    """
    if _depth(text) > JSON_MAX_DEPTH:
        raise UserError(
            f"is not accepted JSON: nested more than {JSON_MAX_DEPTH} levels deep",
            source=source,
            key=key,
        )
    parse_int: Callable[[str], Any] = _bounded_int
    parse_float: Callable[[str], Any] = float
    if max_numbers is not None:
        count = _counter(max_numbers)
        parse_int = lambda t: _bounded_int(count(t))  # noqa: E731
        parse_float = lambda t: float(count(t))  # noqa: E731
    try:
        value = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_int=parse_int,
            parse_float=parse_float,
            parse_constant=_constant if finite else None,
        )
        _check_strings(value)
    except _JSONRefused as exc:
        where = ".".join(k for k in (key, exc.key) if k is not None) or None
        raise UserError(f"is not accepted JSON: {exc}", source=source, key=where) from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            source=source,
            key=key,
        ) from None
    except RecursionError:
        raise UserError("is not valid JSON: nested too deeply", source=source, key=key) from None
    return value


def read_json(path: str | Path, *, what: str, max_bytes: int = TEXT_MAX_BYTES) -> Any:
    """A user's JSON file (:func:`read_text`, then :func:`parse_json`)."""
    return parse_json(read_text(path, what=what, max_bytes=max_bytes), source=path)


def parse_toml(text: str, *, source: str | Path) -> dict[str, Any]:
    """A TOML document, or a :class:`UserError` naming ``source`` (also for nesting too deep
    for the parser, which recurses)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"is not valid TOML ({exc})", source=source) from None
    except RecursionError:
        raise UserError("is nested too deeply; expected a TOML document", source=source) from None


def read_toml(path: str | Path, *, what: str, schema: str) -> dict[str, Any]:
    """A user's TOML document whose top-level ``schema`` must be ``schema``."""
    text = read_text(path, what=what)
    doc = parse_toml(text, source=path)
    if doc.get("schema") != schema:
        raise UserError(
            f"has schema {doc.get('schema')!r}, expected {schema!r}", source=path, key="schema"
        )
    return doc


def regenerate(build: Any, out: Path, *, check: bool, label: str) -> int:
    """Write generated files and their SHA256SUMS, or (``check``) compare a regeneration with it.

    ``build(folder)`` writes the files and returns name -> SHA-256. Used by the fixture tools.
    """

    def sums_text(sums: dict[str, str]) -> str:
        return "".join(f"{sums[name]}  {name}\n" for name in sorted(sums))

    if check:
        with tempfile.TemporaryDirectory() as tmp:
            got = sums_text(build(Path(tmp)))
        if got != (out / "SHA256SUMS").read_text():
            print(f"{label} differ from SHA256SUMS:\n" + got, file=sys.stderr)
            return 1
        print(f"{label} regenerate bit-identically")
        return 0
    sums = build(out)
    atomic_write_bytes(out / "SHA256SUMS", sums_text(sums).encode())
    print(f"wrote {len(sums)} {label} to {out}")
    return 0


#: The longest name :func:`slug` makes part of a file name (file systems allow 255 bytes).
SLUG_MAX = 100


def slug(text: str) -> str:
    """A file-name-safe form of a dataset, target or corpus name.

    >>> slug("crema-like/v2 (test)")
    'crema-like_v2__test_'
    """
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)

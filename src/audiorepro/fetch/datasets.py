"""Evaluation datasets: hashed downloads (pooch), unpacking (py7zr), files ``extract`` reads.

A datasets registry (schema ``audiorepro.datasets/1``; the bundled one is
``audiorepro/data/datasets.toml``) names each dataset's files with URL, hash (``md5:`` or
``sha256:``) and size. ``fetch`` downloads them with pooch, which writes to a temporary file and
moves it into place only when the hash matches (a failed or interrupted transfer leaves
nothing; the next ``fetch`` restarts it, up to three attempts per call), then prepares
``DATA/<name>/``:

- ``clotho-eval``: ``audio/`` (the WAV files of ``clotho_audio_evaluation.7z``) and
  ``captions.csv`` (Clotho's own ``file_name,caption_1..caption_5`` file);
- ``audiocaps-test``: ``test.csv``; with ``--audio DIR`` (clips you have: ``<youtube_id>``,
  ``Y<youtube_id>`` or ``<youtube_id>_<start>`` ``.wav``/``.flac``), ``audio.txt`` listing them
  and ``captions.csv`` (``file_name,caption``) with the captions of the present clips only:
  all five (the default), or one per clip as the published verification's dumps had
  (``--caption-selection first-id``: the caption with the lowest ``audiocap_id``), or the
  ``audiocap_id`` values a file lists (``ids:FILE``); ``dataset.json`` records which
  (``caption_selection``: rule, captions, SHA-256 of the sorted caption ids).

- ``esc50``: the ESC-50 repository's source archive at a pinned commit (a ``.zip``):
  ``audio/`` (its 2,000 WAV files) and ``esc50.csv`` (its ``meta/esc50.csv``: folds and
  classes, :mod:`audiorepro.formats.esc50`). Only those members are unpacked; a member whose
  path leaves the archive's folder, a link or a repeated name is refused.

A file whose hash nobody has published yet (:data:`~audiorepro.core.hashing.PLACEHOLDER`) is
downloaded without a check, its SHA-256 is recorded (``dataset.json`` ``sources``, marked
``unverified``) and printed, and ``fetch`` exits 1 until the value is recorded in a registry
(the convention of checkpoint files without a published hash).

All get ``dataset.json`` (:mod:`audiorepro.formats.coverage`): clips expected, present and
missing, the SHA-256 of the sorted present-clip list, the source files' hashes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.core.io import atomic_write_bytes, json_dumps, read_text, read_toml
from audiorepro.core.paths import check_relative, inside
from audiorepro.formats.captions import list_audio, read_captions
from audiorepro.formats.coverage import RECORD_NAME, RECORD_SCHEMA, present_digest
from audiorepro.formats.esc50 import read_esc50_csv

SCHEMA = "audiorepro.datasets/1"
KINDS = ("clotho", "audiocaps", "esc50")
ATTEMPTS = 3
_HASH = re.compile(r"^(md5:[0-9a-f]{32}|sha256:[0-9a-f]{64})$")
_ENTRY = {
    "kind", "description", "licence", "provenance", "clips", "captions_per_clip", "files",
    "commit",
}  # fmt: skip
_FILE = {"name", "url", "hash", "size"}
_YTID = re.compile(r"^[A-Za-z0-9_-]{11}$")
_WITH_START = re.compile(r"^Y?([A-Za-z0-9_-]{11})_(\d+(?:\.\d+)?)$")
AUDIOCAPS_SUFFIXES = (".wav", ".flac")
_INFLATION = 100

Say = Callable[[str], None]


@dataclass(frozen=True)
class RemoteFile:
    name: str
    url: str
    hash: str
    size: int | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: str
    files: tuple[RemoteFile, ...]
    clips: int | None
    captions_per_clip: int | None
    provenance: str
    registry: str
    #: The source repository's commit a source archive is pinned to (esc50), else None.
    commit: str | None = None


def bundled_datasets() -> Path:
    return Path(str(resources.files("audiorepro") / "data" / "datasets.toml"))


def read_datasets(path: str | Path) -> dict[str, Dataset]:
    path = Path(path)
    doc = read_toml(path, what="a datasets registry .toml", schema=SCHEMA)
    unknown = sorted(set(doc) - {"schema", "datasets"})
    if unknown:
        raise UserError(
            "unknown key; expected 'schema' and 'datasets'", source=path, key=unknown[0]
        )
    out = {}
    for name, table in dict(doc.get("datasets", {})).items():
        where = f"datasets.{name}"
        # The name is DATA's subfolder, each file's a name in its downloads/: never a way out.
        check_relative(name, what="dataset name", source=path, key=where, flat=True)
        if not isinstance(table, dict):
            raise UserError("must be a table", source=path, key=where)
        bad = sorted(set(table) - _ENTRY)
        if bad:
            raise UserError(
                f"unknown key; expected some of {', '.join(sorted(_ENTRY))}",
                source=path,
                key=f"{where}.{bad[0]}",
            )
        if table.get("kind") not in KINDS:
            raise UserError(
                f"is {table.get('kind')!r}; expected one of {', '.join(KINDS)}",
                source=path,
                key=f"{where}.kind",
            )
        files = []
        for i, f in enumerate(table.get("files", [])):
            fw = f"{where}.files[{i}]"
            if not isinstance(f, dict) or set(f) - _FILE or not {"name", "url", "hash"} <= set(f):
                raise UserError(
                    "must be a table with name, url, hash and optional size", source=path, key=fw
                )
            check_relative(f["name"], what="file name", source=path, key=f"{fw}.name", flat=True)
            if urlsplit(str(f["url"])).scheme not in ("http", "https"):
                raise UserError(
                    f"is {f['url']!r}; expected an http(s) URL", source=path, key=f"{fw}.url"
                )
            if f["hash"] == PLACEHOLDER and table["kind"] != "esc50":
                # Only the esc50 preparation records and reports an unpinned hash; the
                # others would keep an unchecked file silently.
                raise UserError(
                    f"is {PLACEHOLDER!r}; a {table['kind']} dataset needs its published hash",
                    source=path,
                    key=f"{fw}.hash",
                )
            if not _HASH.match(str(f["hash"])) and f["hash"] != PLACEHOLDER:
                raise UserError(
                    f"is {f['hash']!r}; expected md5:<32 hex>, sha256:<64 hex> or {PLACEHOLDER!r}",
                    source=path,
                    key=f"{fw}.hash",
                )
            files.append(RemoteFile(str(f["name"]), str(f["url"]), str(f["hash"]), f.get("size")))
        if not files:
            raise UserError("lists no files", source=path, key=f"{where}.files")
        commit = table.get("commit")
        if commit is not None and not re.fullmatch(r"[0-9a-f]{40}", str(commit)):
            raise UserError(
                f"is {commit!r}; expected a 40-hex commit id", source=path, key=f"{where}.commit"
            )
        if table["kind"] == "esc50" and (
            commit is None or not all(str(commit) in f.url for f in files)
        ):
            raise UserError(
                "an esc50 dataset is pinned to a commit: give 'commit' and name it in each URL "
                "(never a branch)",
                source=path,
                key=f"{where}.commit",
            )
        out[name] = Dataset(
            name=name,
            kind=str(table["kind"]),
            files=tuple(files),
            clips=table.get("clips"),
            captions_per_clip=table.get("captions_per_clip"),
            provenance=str(table.get("provenance", "")),
            registry=str(path),
            commit=None if table.get("commit") is None else str(table["commit"]),
        )
    return out


def mirrored(url: str, mirror: str | None) -> str:
    """Replace the scheme and host of ``url`` by ``mirror`` (which may add a path prefix).

    >>> mirrored("https://zenodo.org/record/1/files/a.csv?download=1", "http://127.0.0.1:8000/z")
    'http://127.0.0.1:8000/z/record/1/files/a.csv?download=1'
    >>> mirrored("https://zenodo.org/a.csv", None)
    'https://zenodo.org/a.csv'
    """
    if not mirror:
        return url
    parts = urlsplit(url)
    tail = parts.path + (f"?{parts.query}" if parts.query else "")
    return mirror.rstrip("/") + tail


class TooLarge(Exception):
    """A server announced or sent more bytes than the file may have (not retried)."""


#: Left free on the data folder's disk by a download whose size the registry does not give.
FREE_MARGIN = 1 << 30


def byte_limit(f: RemoteFile, folder: Path) -> tuple[int, str]:
    """The most bytes a download of ``f`` may write, and what sets that bound."""
    if f.size is not None:
        return f.size, "the registry's size"
    free = shutil.disk_usage(folder).free - FREE_MARGIN
    return max(free, 0), f"the free space of {folder} (less 1 GiB)"


@dataclass(frozen=True)
class BoundedDownloader:
    """A pooch downloader that refuses a file larger than ``limit`` before writing it.

    A ``Content-Length`` over the limit is refused before the body is read, and a body that
    runs past it (no or a false ``Content-Length``) is cut there: a hostile or broken server
    cannot fill the disk. pooch still writes to a temporary file and checks the hash.
    """

    limit: int
    why: str
    timeout: float = 60.0

    def __call__(self, url: str, output_file: Any, pooch: Any, check_only: bool = False) -> Any:
        import requests

        if check_only:
            return requests.head(url, timeout=self.timeout, allow_redirects=True).ok
        with requests.get(url, timeout=self.timeout, stream=True) as response:
            response.raise_for_status()
            announced = response.headers.get("content-length", "")
            if announced.isdigit() and int(announced) > self.limit:
                raise TooLarge(f"announces {int(announced)} bytes, over {self.why} ({self.limit})")
            written = 0
            sink = output_file if hasattr(output_file, "write") else open(output_file, "wb")
            with sink:
                for chunk in response.iter_content(chunk_size=1 << 20):
                    written += len(chunk)
                    if written > self.limit:
                        raise TooLarge(f"sent more than {self.why} ({self.limit} bytes); cut off")
                    sink.write(chunk)
        return None


def download_file(f: RemoteFile, folder: Path, mirror: str | None, say: Say) -> Path:
    """Download (or find in place, hash-checked) one file into ``folder``."""
    import pooch
    import requests

    url = mirrored(f.url, mirror)
    own_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = inside(folder, check_relative(f.name, what="file name", key=f.name, flat=True))
    remove_stale_pooch(folder)
    pooch.get_logger().setLevel("WARNING")  # one line per problem, no chatter on stderr
    # No published hash: download unchecked (pooch still writes to a temporary file first);
    # the caller records and prints the SHA-256 found and fetch exits 1 until it is recorded.
    known = None if f.hash == PLACEHOLDER else f.hash
    last, mismatch = "", ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            path = Path(
                pooch.retrieve(
                    url,
                    known_hash=known,
                    fname=f.name,
                    path=folder,
                    downloader=BoundedDownloader(*byte_limit(f, folder)),
                )
            )
            break
        except TooLarge as exc:
            raise UserError(f"{url}: {exc}; not kept", key=f.name) from None
        except ValueError as exc:
            if "hash" not in str(exc):
                raise UserError(f"{url}: {exc}", key=f.name) from None
            # pooch checks the hash before moving the file into place: nothing is left. A
            # transfer cut short without an error looks the same: restart it.
            found = re.search(r"but got ([0-9a-f]{32,64})", str(exc))
            algorithm, expected = f.hash.split(":")
            mismatch = (
                f"{url}: {algorithm} expected {expected}, found "
                f"{found.group(1) if found else 'another value'}: not the registered file, "
                "not kept"
            )
            last = "hash mismatch"
        except (requests.RequestException, OSError) as exc:
            last = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
            mismatch = ""
        if attempt < ATTEMPTS:
            say(f"  {f.name}: attempt {attempt} failed ({last}); restarting")
    else:
        if mismatch:
            raise UserError(mismatch, key=f.name)
        raise UserError(
            f"cannot download {url} ({last}); to place it by hand, download it where the network "
            f"reaches, put it at {target} ({f.hash}) and rerun fetch",
            key=f.name,
        )
    if f.size is not None and path.stat().st_size != f.size:
        raise UserError(f"has {path.stat().st_size} bytes, expected {f.size}", source=path)
    return path


def own_folder(path: Path) -> Path:
    """A folder fetch prepares (``downloads/``, ``audio/``): refused, before anything is
    written or removed, when it is a symbolic link (its target is the user's) or a file."""
    if path.is_symlink():
        raise UserError(
            "is a symbolic link; expected the folder fetch prepares here (nothing was changed: "
            "remove the link or choose another --data)",
            source=path,
        )
    if path.exists() and not path.is_dir():
        raise UserError(
            "is not a folder; expected the folder fetch prepares here (nothing was changed: "
            "move the file away or choose another --data)",
            source=path,
        )
    return path


#: pooch's temporary download names (``tempfile``'s ``tmp`` and eight characters).
_POOCH_TMP = re.compile(r"^tmp[a-z0-9_]{8}$")


def remove_stale_pooch(folder: Path) -> None:
    """Remove the temporary files an earlier fetch killed mid-transfer left in ``downloads/``
    (an interrupted one removes its own: SIGINT and SIGTERM raise in the transfer)."""
    for path in folder.iterdir():
        if _POOCH_TMP.match(path.name) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)


def forget_unpinned(ds: Dataset, got: dict[str, Path]) -> None:
    """Remove the downloads without a published hash: after a failed check they must not be
    found, and reused unasked, by the next fetch (a pinned one is rechecked by its hash)."""
    for f in ds.files:
        path = got.get(f.name)
        if f.hash == PLACEHOLDER and path is not None and not path.is_symlink():
            path.unlink(missing_ok=True)


def source_hashes(ds: Dataset, got: dict[str, Path]) -> tuple[dict[str, str], list[str]]:
    """Each file's registered hash, or for an unpinned one the SHA-256 found here (marked
    unverified), and a line per unverified file."""
    sources: dict[str, str] = {}
    unverified: list[str] = []
    for f in ds.files:
        if f.hash != PLACEHOLDER:
            sources[f.name] = f.hash
            continue
        found = sha256_file(got[f.name])
        sources[f.name] = f"sha256:{found} (unverified: no published hash)"
        unverified.append(
            f"{ds.name}: {f.name} has no published hash in the registry; this download's "
            f"SHA-256 is {found}: once verified, record it in a datasets registry (--registry)"
        )
    return sources, unverified


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _per_clip(ds: Dataset) -> dict[str, Any]:
    """The captions per clip the registry declares, for ``extract`` to check the prepared
    captions against (absent when the registry does not say)."""
    return {} if ds.captions_per_clip is None else {"captions_per_clip": ds.captions_per_clip}


def _record(out: Path, record: dict[str, Any]) -> None:
    captions = out / "captions.csv"
    record = {"schema": RECORD_SCHEMA, **record, "captions_sha256": sha256_file(captions)}
    atomic_write_bytes(out / RECORD_NAME, json_dumps(record).encode())


def prepare_clotho(ds: Dataset, data: Path, mirror: str | None, say: Say) -> dict[str, Any]:
    """Download, md5-check and unpack Clotho's evaluation split into ``data/<name>``."""
    import py7zr

    out = data / ds.name
    own_folder(out / "audio")  # before anything is downloaded
    got = {f.name: download_file(f, out / "downloads", mirror, say) for f in ds.files}
    archive = next((p for n, p in got.items() if n.endswith(".7z")), None)
    captions_src = next((p for n, p in got.items() if "captions" in n), None)
    if archive is None or captions_src is None:
        raise UserError(
            "a clotho dataset needs a .7z audio archive and a *captions*.csv file",
            source=ds.registry,
            key=f"datasets.{ds.name}.files",
        )
    audio = own_folder(out / "audio")
    with tempfile.TemporaryDirectory(dir=out, prefix=".unpack-") as tmp:
        try:
            with py7zr.SevenZipFile(archive, mode="r") as z:
                z.extractall(path=tmp)
        except (py7zr.Bad7zFile, OSError, ValueError) as exc:
            raise UserError(f"cannot be unpacked ({exc})", source=archive) from None
        staged = Path(tmp) / "audio"
        staged.mkdir()
        for wav in sorted(Path(tmp).rglob("*.wav")):
            if staged in wav.parents:
                continue
            if (staged / wav.name).exists():
                raise UserError(f"holds {wav.name} twice", source=archive)
            wav.replace(staged / wav.name)
        if audio.exists():
            shutil.rmtree(audio)
        staged.replace(audio)
    shutil.copyfile(captions_src, out / ".captions.csv.tmp")
    (out / ".captions.csv.tmp").replace(out / "captions.csv")
    caps = read_captions(out / "captions.csv")
    wavs = list_audio(audio)
    present = [c for c in caps.clips if c in wavs]
    record = {
        "name": ds.name,
        "kind": ds.kind,
        "clips_expected": ds.clips,
        "clips_in_captions": len(caps.clips),
        "clips_present": len(present),
        "clips_missing": len(caps.clips) - len(present),
        "extra_files": len(set(wavs) - set(caps.clips)),
        "present_sha256": present_digest(present),
        "sources": {f.name: f.hash for f in ds.files},
        **_per_clip(ds),
    }
    _record(out, record)
    return record


#: AudioCaps test rows of one clip: ``(start_time, caption, audiocap_id)`` in file order.
Rows = list[tuple[str, str, str]]
#: The caption selections ``fetch audiocaps-test --caption-selection`` knows (see
#: :func:`parse_caption_selection`).
SELECTIONS = ("all", "first-id", "ids")


@dataclass(frozen=True)
class CaptionSelection:
    """Which captions of each present clip are prepared: ``all`` (AudioCaps test has five),
    ``first-id`` (one per clip: the caption with the lowest ``audiocap_id``), or ``ids`` (the
    ``audiocap_id`` values listed in a file, one per line)."""

    rule: str = "all"
    ids: frozenset[str] = frozenset()
    source: str | None = None


def parse_caption_selection(value: str) -> CaptionSelection:
    """``all``, ``first-id`` or ``ids:FILE``; anything else is one line naming the option.

    >>> parse_caption_selection("first-id").rule
    'first-id'
    >>> parse_caption_selection("first")
    Traceback (most recent call last):
    ...
    audiorepro.core.errors.UserError: '--caption-selection': is 'first'; expected all, \
first-id (one per clip: the lowest audiocap_id) or ids:FILE (audiocap_id values, one per line)
    """
    if value in ("all", "first-id"):
        return CaptionSelection(value)
    if value.startswith("ids:") and value[4:]:
        path = Path(value[4:])
        text = read_text(path, what="a list of AudioCaps caption ids (audiocap_id, one per line)")
        ids = [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip()[0] != "#"]
        bad = next((i for i in ids if not i.isdigit()), None)
        if not ids or bad is not None:
            got = f"got {bad!r}" if bad is not None else "it lists none"
            raise UserError(
                f"expected audiocap_id numbers, one per line; {got}",
                source=path,
                key="--caption-selection",
            )
        if len(set(ids)) != len(ids):
            twice = next(i for i in ids if ids.count(i) > 1)
            raise UserError(
                f"lists caption id {twice} twice", source=path, key="--caption-selection"
            )
        return CaptionSelection("ids", frozenset(ids), str(path))
    raise UserError(
        f"is {value!r}; expected all, first-id (one per clip: the lowest audiocap_id) or "
        "ids:FILE (audiocap_id values, one per line)",
        key="--caption-selection",
    )


def select_captions(
    known: dict[str, Rows], present: list[str], selection: CaptionSelection
) -> dict[str, Rows]:
    """The selected rows of each present clip (clips left without a caption are left out).

    >>> known = {"a": [("0", "x", "7"), ("0", "y", "3")], "b": [("0", "z", "9")]}
    >>> select_captions(known, ["a", "b"], CaptionSelection("first-id"))
    {'a': [('0', 'y', '3')], 'b': [('0', 'z', '9')]}
    >>> select_captions(known, ["a", "b"], CaptionSelection("ids", frozenset({"7"})))
    {'a': [('0', 'x', '7')]}
    """
    if selection.rule == "ids":
        listed = {row[2] for rows in known.values() for row in rows}
        unknown = sorted(selection.ids - listed, key=int)
        if unknown:
            raise UserError(
                f"lists caption id {unknown[0]} ({len(unknown)} id(s) in all), which the "
                "AudioCaps test CSV does not have",
                source=selection.source,
                key="--caption-selection",
            )
    chosen: dict[str, Rows] = {}
    for ytid in present:
        rows = known[ytid]
        if selection.rule == "first-id":
            rows = [min(rows, key=lambda r: int(r[2]))]
        elif selection.rule == "ids":
            rows = [r for r in rows if r[2] in selection.ids]
        if rows:
            chosen[ytid] = rows
    return chosen


def selection_record(selection: CaptionSelection, chosen: dict[str, Rows]) -> dict[str, Any]:
    """What ``dataset.json`` says of the selection: the rule, the number of captions and the
    SHA-256 of the sorted selected caption ids (one per line), comparable between labs."""
    ids = sorted((row[2] for rows in chosen.values() for row in rows), key=int)
    record: dict[str, Any] = {
        "rule": selection.rule,
        "captions": len(ids),
        "caption_ids_sha256": _sha256("".join(f"{i}\n" for i in ids).encode()),
    }
    if selection.source is not None:
        record["ids_file"] = Path(selection.source).name
    return record


def read_audiocaps_csv(path: Path) -> dict[str, Rows]:
    """youtube_id -> [(start_time, caption, audiocap_id), ...] in file order."""
    rows = list(csv.DictReader(io.StringIO(read_text(path, what="the AudioCaps test CSV"))))
    need = {"audiocap_id", "youtube_id", "start_time", "caption"}
    if not rows or not need <= set(rows[0]):
        raise UserError(f"expected columns {', '.join(sorted(need))}", source=path, key="header")
    clips: dict[str, Rows] = {}
    for row in rows:
        if not str(row["audiocap_id"]).isdigit():
            raise UserError(
                f"audiocap_id {row['audiocap_id']!r} is not a number",
                source=path,
                key="audiocap_id",
            )
        clips.setdefault(row["youtube_id"], []).append(
            (row["start_time"], row["caption"], row["audiocap_id"])
        )
    return clips


def audiocaps_id(stem: str, known: dict[str, Rows]) -> str | None:
    """The youtube id a file stem names: ``<id>``, ``Y<id>`` or ``<id>_<start>`` (or ``Y``...).

    >>> known = {"abcdefghijk": [("30", "x", "1")], "Yabcdefghij": [("0", "y", "2")]}
    >>> [audiocaps_id(s, known) for s in ["abcdefghijk", "Yabcdefghijk", "abcdefghijk_30.000",
    ...                                    "abcdefghijk_31", "Yabcdefghij", "zzz"]]
    ['abcdefghijk', 'abcdefghijk', 'abcdefghijk', None, 'Yabcdefghij', None]
    """
    if stem in known:
        return stem
    if stem.startswith("Y") and stem[1:] in known:
        return stem[1:]
    m = _WITH_START.match(stem)
    if m and m.group(1) in known:
        starts = {float(row[0]) for row in known[m.group(1)]}
        if float(m.group(2)) in starts:
            return m.group(1)
    return None


def prepare_audiocaps(
    ds: Dataset,
    data: Path,
    mirror: str | None,
    audio: Path | None,
    say: Say,
    selection: CaptionSelection | None = None,
) -> dict[str, Any] | None:
    """The pinned test CSV; with ``audio``, the selected captions of the clips present there
    (``selection``: every caption by default)."""
    selection = selection or CaptionSelection()
    out = data / ds.name
    (csv_path,) = [download_file(f, out / "downloads", mirror, say) for f in ds.files]
    if audio is None:
        say(f"{ds.name}: test CSV verified; pass --audio DIR (your clips) to prepare captions")
        return None
    if not audio.is_dir():
        raise UserError("is not a folder of AudioCaps clips", source=audio, key="--audio")
    known = read_audiocaps_csv(csv_path)
    found: dict[str, Path] = {}
    extra = 0
    for path in sorted(audio.iterdir()):
        if path.suffix.lower() not in AUDIOCAPS_SUFFIXES or not path.is_file():
            continue
        ytid = audiocaps_id(path.stem, known)
        if ytid is None:
            extra += 1
            continue
        if ytid in found:
            raise UserError(
                f"holds two files for clip {ytid}: {found[ytid].name} and {path.name}",
                source=audio,
                key="--audio",
            )
        found[ytid] = path
    if not found:
        raise UserError(
            f"holds no AudioCaps test clip (looked for <id>, Y<id>, <id>_<start> with "
            f"{', '.join(AUDIOCAPS_SUFFIXES)})",
            source=audio,
            key="--audio",
        )
    chosen = select_captions(known, sorted(found), selection)
    present = sorted(chosen)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["file_name", "caption"])
    for ytid in present:
        for _, caption, _ in chosen[ytid]:
            writer.writerow([found[ytid].name, caption])
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "captions.csv", buf.getvalue().encode())
    listing = "".join(f"{found[y].resolve()}\n" for y in present)
    atomic_write_bytes(out / "audio.txt", listing.encode())
    record = {
        "name": ds.name,
        "kind": ds.kind,
        "clips_expected": len(known),
        "clips_present": len(present),
        "clips_missing": len(known) - len(present),
        "extra_files": extra,
        "present_sha256": present_digest(present),
        "missing": sorted(set(known) - set(chosen)),
        "sources": {f.name: f.hash for f in ds.files},
        **_per_clip(ds),
        "caption_selection": selection_record(selection, chosen),
    }
    if selection.rule == "first-id":
        record["captions_per_clip"] = 1
    elif selection.rule == "ids":
        record.pop("captions_per_clip", None)
    _record(out, record)
    return record


def _esc50_members(archive: Path) -> tuple[zipfile.ZipInfo, list[zipfile.ZipInfo]]:
    """The archive's ``meta/esc50.csv`` and ``audio/*.wav`` members, checked, before unpacking."""
    try:
        z = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"is not a readable .zip archive ({exc})", source=archive) from None
    with z:
        infos = z.infolist()
    meta: zipfile.ZipInfo | None = None
    wavs: list[zipfile.ZipInfo] = []
    names: set[str] = set()
    for info in infos:
        parts = info.filename.split("/")
        if info.filename.startswith("/") or ".." in parts or "\\" in info.filename:
            raise UserError(f"holds a member outside its folder: {info.filename!r}", source=archive)
        if (info.external_attr >> 16) & 0o170000 == 0o120000:
            raise UserError(f"holds a link: {info.filename!r}", source=archive)
        if info.file_size > _INFLATION * info.compress_size + (1 << 16):
            # A zip bomb: WAV and CSV members barely compress.
            raise UserError(
                f"member {info.filename!r} inflates {info.file_size} bytes from "
                f"{info.compress_size}; refused (more than {_INFLATION} times)",
                source=archive,
            )
        # GitHub's source archives put everything under one folder <repo>-<commit>/.
        inner = parts[1:]
        if inner == ["meta", "esc50.csv"]:
            if meta is not None:  # else the last one would silently win
                raise UserError("holds meta/esc50.csv twice", source=archive)
            meta = info
        elif len(inner) == 2 and inner[0] == "audio" and inner[1].endswith(".wav"):
            if inner[1] in names:
                raise UserError(f"holds {inner[1]} twice", source=archive)
            names.add(inner[1])
            wavs.append(info)
    if meta is None:
        raise UserError(
            "has no <folder>/meta/esc50.csv; expected the ESC-50 repository's source archive",
            source=archive,
        )
    return meta, wavs


def _unpack_esc50(archive: Path, out: Path) -> tuple[Any, bytes]:
    """The archive's ``audio/*.wav`` into ``out/audio`` and ``meta/esc50.csv`` into
    ``out/esc50.csv``, each member checked (a bad CRC is one line) before either moves."""
    meta_info, wav_infos = _esc50_members(archive)
    audio = own_folder(out / "audio")
    with tempfile.TemporaryDirectory(dir=out, prefix=".unpack-") as tmp:
        staged = Path(tmp) / "audio"
        staged.mkdir()
        with zipfile.ZipFile(archive) as z:
            for info in [*sorted(wav_infos, key=lambda i: i.filename), meta_info]:
                # Streamed member by member to a name we chose: no path from the archive is used.
                name = info.filename.rsplit("/", 1)[1]
                dst_path = staged / name if info is not meta_info else Path(tmp) / "esc50.csv"
                try:
                    with z.open(info) as src, open(dst_path, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                    raise UserError(
                        f"member {info.filename!r} cannot be unpacked ({exc}); nothing was "
                        "prepared",
                        source=archive,
                    ) from None
        meta_bytes = (Path(tmp) / "esc50.csv").read_bytes()
        meta = read_esc50_csv(Path(tmp) / "esc50.csv")
        if audio.exists():
            shutil.rmtree(audio)
        staged.replace(audio)
        (Path(tmp) / "esc50.csv").replace(out / "esc50.csv")
    return meta, meta_bytes


def prepare_esc50(ds: Dataset, data: Path, mirror: str | None, say: Say) -> dict[str, Any]:
    """Download ESC-50's source archive and unpack ``audio/`` and ``esc50.csv``."""
    out = data / ds.name
    own_folder(out / "audio")  # before anything is downloaded
    got = {f.name: download_file(f, out / "downloads", mirror, say) for f in ds.files}
    archives = [p for n, p in got.items() if n.endswith(".zip")]
    if len(archives) != 1:
        raise UserError(
            "an esc50 dataset needs exactly one .zip source archive",
            source=ds.registry,
            key=f"datasets.{ds.name}.files",
        )
    try:
        meta, meta_bytes = _unpack_esc50(archives[0], out)
    except BaseException:
        forget_unpinned(ds, got)
        raise
    audio = out / "audio"
    wavs = set(list_audio(audio))
    present = [c for c in meta.filenames if c in wavs]
    sources, unverified = source_hashes(ds, got)
    record = {
        "schema": RECORD_SCHEMA,
        "name": ds.name,
        "kind": ds.kind,
        "commit": ds.commit,
        "clips_expected": ds.clips,
        "clips_in_metadata": len(meta.filenames),
        "clips_present": len(present),
        "clips_missing": len(meta.filenames) - len(present),
        "extra_files": len(wavs - set(meta.filenames)),
        "classes": len(meta.classes),
        "present_sha256": present_digest(present),
        "metadata_sha256": _sha256(meta_bytes),
        "sources": sources,
        "unverified": unverified,
    }
    atomic_write_bytes(out / RECORD_NAME, json_dumps(record).encode())
    return record

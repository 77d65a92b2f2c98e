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
  and ``captions.csv`` (``file_name,caption``) with the captions of the present clips only.

Both get ``dataset.json`` (:mod:`audiorepro.formats.coverage`): clips expected, present and
missing, the SHA-256 of the sorted present-clip list, the source files' hashes.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, json_dumps, read_text, read_toml
from audiorepro.formats.captions import list_audio, read_captions
from audiorepro.formats.coverage import RECORD_NAME, RECORD_SCHEMA, present_digest

SCHEMA = "audiorepro.datasets/1"
KINDS = ("clotho", "audiocaps")
ATTEMPTS = 3
_HASH = re.compile(r"^(md5:[0-9a-f]{32}|sha256:[0-9a-f]{64})$")
_ENTRY = {"kind", "description", "licence", "provenance", "clips", "captions_per_clip", "files"}
_FILE = {"name", "url", "hash", "size"}
_YTID = re.compile(r"^[A-Za-z0-9_-]{11}$")
_WITH_START = re.compile(r"^Y?([A-Za-z0-9_-]{11})_(\d+(?:\.\d+)?)$")
AUDIOCAPS_SUFFIXES = (".wav", ".flac")

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
            if not _HASH.match(str(f["hash"])):
                raise UserError(
                    f"is {f['hash']!r}; expected md5:<32 hex> or sha256:<64 hex>",
                    source=path,
                    key=f"{fw}.hash",
                )
            files.append(RemoteFile(str(f["name"]), str(f["url"]), str(f["hash"]), f.get("size")))
        if not files:
            raise UserError("lists no files", source=path, key=f"{where}.files")
        out[name] = Dataset(
            name=name,
            kind=str(table["kind"]),
            files=tuple(files),
            clips=table.get("clips"),
            captions_per_clip=table.get("captions_per_clip"),
            provenance=str(table.get("provenance", "")),
            registry=str(path),
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


def download_file(f: RemoteFile, folder: Path, mirror: str | None, say: Say) -> Path:
    """Download (or find in place, hash-checked) one file into ``folder``."""
    import pooch
    import requests

    url = mirrored(f.url, mirror)
    target = folder / f.name
    folder.mkdir(parents=True, exist_ok=True)
    pooch.get_logger().setLevel("WARNING")  # one line per problem, no chatter on stderr
    last, mismatch = "", ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            path = Path(
                pooch.retrieve(
                    url,
                    known_hash=f.hash,
                    fname=f.name,
                    path=folder,
                    downloader=pooch.HTTPDownloader(progressbar=False, timeout=60),
                )
            )
            break
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
    got = {f.name: download_file(f, out / "downloads", mirror, say) for f in ds.files}
    archive = next((p for n, p in got.items() if n.endswith(".7z")), None)
    captions_src = next((p for n, p in got.items() if "captions" in n), None)
    if archive is None or captions_src is None:
        raise UserError(
            "a clotho dataset needs a .7z audio archive and a *captions*.csv file",
            source=ds.registry,
            key=f"datasets.{ds.name}.files",
        )
    audio = out / "audio"
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


def read_audiocaps_csv(path: Path) -> dict[str, list[tuple[str, str]]]:
    """youtube_id -> [(start_time, caption), ...] in file order."""
    rows = list(csv.DictReader(io.StringIO(read_text(path, what="the AudioCaps test CSV"))))
    need = {"audiocap_id", "youtube_id", "start_time", "caption"}
    if not rows or not need <= set(rows[0]):
        raise UserError(f"expected columns {', '.join(sorted(need))}", source=path, key="header")
    clips: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        clips.setdefault(row["youtube_id"], []).append((row["start_time"], row["caption"]))
    return clips


def audiocaps_id(stem: str, known: dict[str, list[tuple[str, str]]]) -> str | None:
    """The youtube id a file stem names: ``<id>``, ``Y<id>`` or ``<id>_<start>`` (or ``Y``...).

    >>> known = {"abcdefghijk": [("30", "x")], "Yabcdefghij": [("0", "y")]}
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
        starts = {float(s) for s, _ in known[m.group(1)]}
        if float(m.group(2)) in starts:
            return m.group(1)
    return None


def prepare_audiocaps(
    ds: Dataset, data: Path, mirror: str | None, audio: Path | None, say: Say
) -> dict[str, Any] | None:
    """The pinned test CSV; with ``audio``, the captions of the clips present there."""
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
    present = sorted(found)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["file_name", "caption"])
    for ytid in present:
        for _, caption in known[ytid]:
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
        "missing": sorted(set(known) - set(found)),
        "sources": {f.name: f.hash for f in ds.files},
        **_per_clip(ds),
    }
    _record(out, record)
    return record

"""Hostile servers and registries against ``fetch`` (issue 24): every path that comes from
outside (hub ETags and commits, listings, registry names and repos, archive members, mirror
URLs) stays inside the cache or DATA.

Each class must give exit 2, one line on stderr naming what was wrong, leave a canary file
outside the cache and DATA as it was, create nothing outside them, and leave no partial
download behind. The servers are :mod:`tests.standin_servers` (the hostile hub beside the
honest one), on 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audiorepro.core.hashing import PLACEHOLDER
from tests.standin_servers import FileServer, HostileHub, StandinHub
from tests.test_fetch import COMMIT, run_cli, sha256

CANARY = b"the user's own file\n"
#: A weight (served as LFS: a redirect to the blob server), a file pinned by its SHA-256 and
#: one pinned only by the revision.
FILES = {
    "model.safetensors": b"\x08" + bytes(4096),
    "config.json": b'{"toy": true}\n',
    "vocab.txt": b"a\nb\n",
}


def _registry(
    tmp: Path, *, repo: str = "org/toy", names: dict[str, str] | None = None, support: str = ""
) -> Path:
    names = names or {n: n for n in FILES}
    lines = [
        'schema = "audiorepro.checkpoints/1"',
        '[checkpoints."toy"]',
        'format = "hf"',
        f'repo = "{repo}"',
        f'revision = "{COMMIT}"',
        *([f'support = ["{support}"]'] if support else []),
        '[checkpoints."toy".weights]',
        f'"{names["model.safetensors"]}" = "{sha256(FILES["model.safetensors"])}"',
        '[checkpoints."toy".files]',
        f'"{names["config.json"]}" = "{sha256(FILES["config.json"])}"',
        f'"{names["vocab.txt"]}" = "{PLACEHOLDER}"',
    ]
    path = tmp / "registry.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _tree(root: Path, skip: tuple[Path, ...]) -> dict[str, bytes | str]:
    """Every entry under ``root`` but those under ``skip``: its bytes, or where a link points."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if any(here == s or s in here.parents for s in skip):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = here / name
            if any(p == s for s in skip):
                continue
            key = str(p.relative_to(root))
            out[key] = os.readlink(p) if p.is_symlink() else (p.read_bytes() if p.is_file() else "")
    return out


class Outside:
    """A canary beside the cache and DATA, and a picture of everything outside them."""

    def __init__(self, tmp: Path, *inside: Path) -> None:
        self.tmp, self.inside = tmp, inside
        self.canary = tmp / "victim" / "x"
        self.canary.parent.mkdir(parents=True, exist_ok=True)
        self.canary.write_bytes(CANARY)
        self.before = _tree(tmp, inside)

    def untouched(self) -> None:
        assert self.canary.read_bytes() == CANARY
        assert _tree(self.tmp, self.inside) == self.before


def _one_line(r: subprocess.CompletedProcess[str], *names: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])


def _no_partial(root: Path) -> None:
    left = [p for p in root.rglob("*") if p.name.endswith(".incomplete")] if root.exists() else []
    assert not left, left


def _fetch_toy(tmp: Path, hub: StandinHub, registry: Path) -> subprocess.CompletedProcess[str]:
    args = ["fetch", "toy", "--registry", str(registry), "--cache", str(tmp / "cache")]
    return run_cli(args, {"HF_ENDPOINT": hub.url}, timeout=120)


def _victim(tmp: Path, name: str) -> str:
    return str(tmp / "victim" / name)


#: Hostile answers of the hub for one file: name -> (file, headers, what stderr names). The
#: ``..`` ETags climb from ``cache/models--org--toy/blobs`` to ``victim/``, beside the cache.
HUB_CLASSES: dict[str, tuple[str, dict[str, str], str]] = {
    "etag-dotdot-onto-a-file": ("config.json", {"ETag": '"../../../victim/x"'}, "ETag"),
    "etag-dotdot-new-file": ("vocab.txt", {"ETag": '"../../../victim/new"'}, "ETag"),
    "etag-absolute": ("vocab.txt", {"ETag": '"{victim}/abs"'}, "ETag"),
    "linked-etag-dotdot": (
        "model.safetensors", {"X-Linked-Etag": '"../../../victim/x"'}, "ETag",
    ),
    "commit-dotdot": ("vocab.txt", {"X-Repo-Commit": "../../../victim"}, "commit"),
    "content-length-huge": ("vocab.txt", {"Content-Length": str(10**15)}, "bytes"),
    "linked-size-huge": ("model.safetensors", {"X-Linked-Size": str(10**15)}, "bytes"),
    "location-file-scheme": ("model.safetensors", {"Location": "file:///etc/passwd"}, "file:"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HUB_CLASSES))
def test_a_hostile_hub_cannot_write_or_remove_outside_the_cache(tmp_path: Path, case: str) -> None:
    file, headers, names = HUB_CLASSES[case]
    registry = _registry(tmp_path)
    outside = Outside(tmp_path, tmp_path / "cache")
    with HostileHub() as hub:
        hub.add("org/toy", COMMIT, FILES)
        hub.headers[file] = {k: v.format(victim=tmp_path / "victim") for k, v in headers.items()}
        r = _fetch_toy(tmp_path, hub, registry)
    _one_line(r, file, names)
    outside.untouched()
    _no_partial(tmp_path / "cache")


def test_the_honest_hub_still_fetches_every_file(tmp_path: Path) -> None:
    """The base of the classes above: the same registry against the honest hub passes, each
    file in the snapshot of the pinned commit."""
    registry = _registry(tmp_path)
    outside = Outside(tmp_path, tmp_path / "cache")
    with HostileHub() as hub:
        hub.add("org/toy", COMMIT, FILES)
        r = _fetch_toy(tmp_path, hub, registry)
    assert r.returncode == 0, r.stderr
    snap = tmp_path / "cache" / "models--org--toy" / "snapshots" / COMMIT
    assert {p.name: p.read_bytes() for p in snap.iterdir()} == FILES
    outside.untouched()
    # a second fetch finds every file in place and asks the hub nothing
    with StandinHub() as hub2:
        r = _fetch_toy(tmp_path, hub2, registry)
        assert r.returncode == 0, r.stderr
        assert not [q for q in hub2.requests if "/resolve/" in q]


def test_a_cache_entry_linked_outside_is_never_removed(tmp_path: Path) -> None:
    """A snapshot entry that a hostile hub (or anyone) pointed outside the cache is refused;
    the file it points at survives."""
    registry = _registry(tmp_path)
    outside_files = Outside(tmp_path, tmp_path / "cache")
    snap = tmp_path / "cache" / "models--org--toy" / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to(outside_files.canary)
    with StandinHub() as hub:
        hub.add("org/toy", COMMIT, FILES)
        r = _fetch_toy(tmp_path, hub, registry)
    _one_line(r, "config.json", "outside")
    outside_files.untouched()


# -- checkpoint registries ------------------------------------------------------------------

#: Registry entries naming paths outside the cache: name -> (repo, file names, stderr names).
REGISTRY_CLASSES: dict[str, tuple[str, dict[str, str], str]] = {
    "file-dotdot": ("org/toy", {"vocab.txt": "../../../../victim/new"}, "victim/new"),
    "file-absolute": ("org/toy", {"vocab.txt": "{victim}/abs"}, "abs"),
    "weight-dotdot": ("org/toy", {"model.safetensors": "../../x.safetensors"}, "x.safetensors"),
    "repo-dotdot": ("../../victim", {}, "repo"),
    "repo-inner-dotdot": ("org/../../victim", {}, "repo"),
}


@pytest.mark.parametrize("case", sorted(REGISTRY_CLASSES))
def test_a_registry_naming_paths_outside_the_cache_is_refused(tmp_path: Path, case: str) -> None:
    repo, renamed, names = REGISTRY_CLASSES[case]
    victim = str(tmp_path / "victim")
    registry = _registry(
        tmp_path,
        repo=repo,
        names={n: renamed.get(n, n).format(victim=victim) for n in FILES},
    )
    outside = Outside(tmp_path, tmp_path / "cache")
    with StandinHub() as hub:
        hub.add(repo, COMMIT, {renamed.get(n, n).format(victim=victim): FILES[n] for n in FILES})
        r = _fetch_toy(tmp_path, hub, registry)
    _one_line(r, "registry.toml", names)
    outside.untouched()


# -- support repositories (laion-clap's text models) -----------------------------------------

SUPPORT_COMMIT = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"


def _support_registry(tmp: Path) -> Path:
    path = _registry(tmp, support="text")
    with path.open("a", encoding="utf-8") as f:
        f.write(f'[support.text]\nrepo = "org/text"\nrevision = "{SUPPORT_COMMIT}"\n')
        f.write('allow = ["*.json", "*.txt", "*/*"]\n')
    return path


#: Listings of a support repository: name -> (raw body, what stderr names).
LISTING_CLASSES: dict[str, tuple[bytes, str]] = {
    "name-dotdot": (
        b'[{"type": "file", "path": "../../../../victim/new", "size": 4, "oid": "0"}]', "..",
    ),
    "name-absolute": (
        b'[{"type": "file", "path": "/tmp/victim-abs", "size": 4, "oid": "0"}]', "/tmp/victim-abs",
    ),
    "html-page": (b"<html><body>Sign in</body></html>", "listing"),
    "not-a-list": (b'{"files": ["config.json"]}', "listing"),
    "entries-not-objects": (b'["config.json", 3]', "listing"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LISTING_CLASSES))
def test_a_hostile_support_listing_is_one_line(tmp_path: Path, case: str) -> None:
    body, names = LISTING_CLASSES[case]
    registry = _support_registry(tmp_path)
    outside = Outside(tmp_path, tmp_path / "cache")
    with HostileHub() as hub:
        hub.add("org/toy", COMMIT, FILES)
        hub.add("org/text", SUPPORT_COMMIT, {"tokenizer.json": b"{}", "sub/vocab.txt": b"a\n"})
        hub.listings["org/text"] = body
        r = _fetch_toy(tmp_path, hub, registry)
    _one_line(r, "org/text", names)
    outside.untouched()
    assert not Path("/tmp/victim-abs").exists()


def test_the_honest_support_listing_is_fetched(tmp_path: Path) -> None:
    registry = _support_registry(tmp_path)
    with HostileHub() as hub:
        hub.add("org/toy", COMMIT, FILES)
        hub.add("org/text", SUPPORT_COMMIT, {"tokenizer.json": b"{}", "sub/vocab.txt": b"a\n"})
        r = _fetch_toy(tmp_path, hub, registry)
    assert r.returncode == 0, r.stderr
    base = tmp_path / "cache" / "models--org--text"
    assert (base / "refs" / "main").read_text() == SUPPORT_COMMIT
    assert (base / "snapshots" / SUPPORT_COMMIT / "sub" / "vocab.txt").read_bytes() == b"a\n"


# -- interrupted downloads ------------------------------------------------------------------


def _start_fetch(tmp: Path, hub: StandinHub, registry: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "20",
        "HF_ENDPOINT": hub.url,
    }
    args = ["fetch", "toy", "--registry", str(registry), "--cache", str(tmp / "cache")]
    return subprocess.Popen(
        [sys.executable, "-m", "audiorepro", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_partial(hub: StandinHub, proc: subprocess.Popen[str]) -> None:
    """Until the stalled transfer has begun (the blob server has been asked for it)."""
    until = time.monotonic() + 60
    while not any(q.startswith("GET /lfs/") for q in hub.requests):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < until, "the download never started"
        time.sleep(0.05)
    time.sleep(0.5)  # the first half is written


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_fetch_leaves_no_partial_file_for_long(
    tmp_path: Path, how: signal.Signals
) -> None:
    """SIGTERM and SIGINT remove the partial download at once (one line, exit 2); after
    SIGKILL nothing can, so the next fetch removes what a dead fetch left."""
    registry = _registry(tmp_path)
    with StandinHub() as hub:
        hub.add("org/toy", COMMIT, FILES)
        # Every transfer stalls: under load the client's timeout and retry could otherwise
        # finish the download before the signal arrives (a flake seen on a busy machine).
        hub.faults["model.safetensors"] = "stall-always"
        proc = _start_fetch(tmp_path, hub, registry)
        try:
            _wait_for_partial(hub, proc)
            proc.send_signal(how)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    if how != signal.SIGKILL:
        assert proc.returncode == 2, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        _no_partial(tmp_path / "cache")
    with StandinHub() as hub2:
        hub2.add("org/toy", COMMIT, FILES)
        r = _fetch_toy(tmp_path, hub2, registry)
    assert r.returncode == 0, r.stderr
    _no_partial(tmp_path / "cache")


# -- datasets registries ------------------------------------------------------------------


def _datasets_registry(tmp: Path, name: str, data: bytes, dataset: str = "notes") -> Path:
    path = tmp / "datasets.toml"
    path.write_text(
        f'schema = "audiorepro.datasets/1"\n[datasets."{dataset}"]\nkind = "audiocaps"\n'
        f'[[datasets."{dataset}".files]]\nname = "{name}"\n'
        'url = "https://example.org/files/test.csv"\n'
        f'hash = "sha256:{hashlib.sha256(data).hexdigest()}"\n',
        encoding="utf-8",
    )
    return path


#: Datasets-registry names that leave DATA: name -> (file name, dataset name, stderr names).
DATASET_CLASSES: dict[str, tuple[str, str, str]] = {
    "file-dotdot": ("../../../victim/notes.txt", "notes", "files[0].name"),
    "file-absolute": ("{victim}/notes.txt", "notes", "files[0].name"),
    "file-onto-the-canary": ("../../../victim/x", "notes", "files[0].name"),
    "dataset-dotdot": ("test.csv", "../../victim", "datasets"),
}


@pytest.mark.parametrize("case", sorted(DATASET_CLASSES))
def test_a_datasets_registry_naming_paths_outside_data_is_refused(
    tmp_path: Path, case: str
) -> None:
    name, dataset, names = DATASET_CLASSES[case]
    body = b"audiocap_id,youtube_id,start_time,caption\n1,abcdefghijk,0,a dog\n"
    name = name.format(victim=tmp_path / "victim")
    registry = _datasets_registry(tmp_path, name, body, dataset)
    data = tmp_path / "data"
    outside = Outside(tmp_path, data)
    with FileServer({"/files/test.csv": body}) as srv:
        r = run_cli(
            ["fetch", dataset, "--registry", str(registry), "--mirror", srv.url,
             "--data", str(data)],
            {},
        )  # fmt: skip
    _one_line(r, "datasets.toml", names)
    outside.untouched()


def test_a_mirror_that_is_not_a_url_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from audiorepro.cli import main

    data = tmp_path / "data"
    assert main(["fetch", "clotho-eval", "--mirror", "http://[::1", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "--mirror" in err and len(err.strip().splitlines()) == 1
    assert not data.exists()


# -- ESC-50: archives and the folders fetch prepares --------------------------------------


def _bad_crc(archive: bytes) -> bytes:
    """The archive with one byte of its first WAV member's data changed (its CRC is wrong)."""
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(".wav"))
    # local header: 30 bytes, then the name and the extra field, then the (deflated) data
    name_len = int.from_bytes(archive[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(archive[info.header_offset + 28 : info.header_offset + 30], "little")
    at = info.header_offset + 30 + name_len + extra_len + info.compress_size // 2
    return archive[:at] + bytes([archive[at] ^ 0x01]) + archive[at + 1 :]


def _esc50_fetch(
    tmp: Path, archive: bytes, *, registry: Path | None = None
) -> subprocess.CompletedProcess[str]:
    from tests.test_esc50 import _fetch

    return _fetch(tmp, archive, registry, tmp / "data")  # type: ignore[no-any-return]


def test_a_failed_unpinned_esc50_download_is_not_reused(tmp_path: Path) -> None:
    """The bundled entry has no published hash: an HTML page served in its place fails the
    archive check, and the next fetch asks the server again instead of reusing the page."""
    from tests.test_esc50 import esc50_archive

    outside = Outside(tmp_path, tmp_path / "data")
    r = _esc50_fetch(tmp_path, b"<html>rate limited</html>")
    _one_line(r, "zip")
    assert not list((tmp_path / "data" / "esc50" / "downloads").iterdir())
    r = _esc50_fetch(tmp_path, esc50_archive())
    assert r.returncode == 1, r.stderr  # prepared, reported unverified
    assert len(list((tmp_path / "data" / "esc50" / "audio").iterdir())) == 9
    outside.untouched()


def test_an_esc50_archive_with_a_bad_crc_is_one_line(tmp_path: Path) -> None:
    from tests.test_esc50 import esc50_archive, esc50_registry

    archive = _bad_crc(esc50_archive())
    r = _esc50_fetch(tmp_path, archive, registry=esc50_registry(tmp_path, archive))
    _one_line(r, ".zip", "CRC")
    assert not (tmp_path / "data" / "esc50" / "audio").exists()


def _downloads_a_file(esc50: Path, outside: Path) -> None:
    esc50.mkdir(parents=True)
    (esc50 / "downloads").write_bytes(CANARY)


def _audio_a_symlink(esc50: Path, outside: Path) -> None:
    esc50.mkdir(parents=True)
    (outside / "keep.wav").write_bytes(CANARY)
    (esc50 / "audio").symlink_to(outside, target_is_directory=True)


def _downloads_a_symlink(esc50: Path, outside: Path) -> None:
    esc50.mkdir(parents=True)
    (esc50 / "downloads").symlink_to(outside, target_is_directory=True)


#: Folders fetch prepares that are not its folders: name -> (make them, what stderr names).
FOLDER_CLASSES = {
    "downloads-a-file": (_downloads_a_file, "downloads"),
    "audio-a-symlink": (_audio_a_symlink, "audio"),
    "downloads-a-symlink": (_downloads_a_symlink, "downloads"),
}


@pytest.mark.parametrize("case", sorted(FOLDER_CLASSES))
def test_a_prepared_folder_that_is_a_file_or_a_link_is_one_line(tmp_path: Path, case: str) -> None:
    from tests.test_esc50 import esc50_archive, esc50_registry

    make, names = FOLDER_CLASSES[case]
    archive = esc50_archive()
    registry = esc50_registry(tmp_path, archive)
    (tmp_path / "victim").mkdir()
    make(tmp_path / "data" / "esc50", tmp_path / "victim")
    outside = Outside(tmp_path, tmp_path / "data")
    before = _tree(tmp_path / "data", ())
    r = _esc50_fetch(tmp_path, archive, registry=registry)
    _one_line(r, names)
    outside.untouched()
    assert _tree(tmp_path / "data", ()) == before  # nothing lost there either


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_an_interrupted_dataset_fetch_leaves_no_partial_file_for_long(
    tmp_path: Path, how: signal.Signals
) -> None:
    """The same for a dataset file (pooch's temporary file in ``downloads/``)."""
    body = b"audiocap_id,youtube_id,start_time,caption\n" + b"1,abcdefghijk,0,a dog\n" * 4000
    registry = _datasets_registry(tmp_path, "test.csv", body)
    data = tmp_path / "data"
    downloads = data / "notes" / "downloads"
    args = ["fetch", "notes", "--registry", str(registry), "--data", str(data)]
    with FileServer({"/files/test.csv": body}) as srv:
        srv.faults["test.csv"] = "stall"
        proc = subprocess.Popen(
            [sys.executable, "-m", "audiorepro", *args, "--mirror", srv.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            until = time.monotonic() + 60
            while not (downloads.is_dir() and any(downloads.iterdir())):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < until, "the download never started"
                time.sleep(0.05)
            time.sleep(0.5)
            proc.send_signal(how)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    if how != signal.SIGKILL:
        assert proc.returncode == 2, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not list(downloads.iterdir())
    with FileServer({"/files/test.csv": body}) as srv:
        r = run_cli([*args, "--mirror", srv.url], {})
    assert r.returncode == 0, r.stderr
    assert [p.name for p in downloads.iterdir()] == ["test.csv"]


@pytest.mark.parametrize(
    ("fault", "size", "says"),
    [
        ("huge", None, "announces 1000000000000000 bytes, over the free space of"),
        (None, 100, "announces {len} bytes, over the registry's size (100)"),
        ("unsized", 100, "sent more than the registry's size (100 bytes); cut off"),
    ],
)
def test_a_dataset_file_larger_than_allowed_is_refused_before_it_fills_the_disk(
    tmp_path: Path, fault: str | None, size: int | None, says: str
) -> None:
    """A server announcing 10**15 bytes, or sending more than the registry's size, is one line
    at once (not three attempts of a petabyte), and nothing is kept."""
    body = b"audiocap_id,youtube_id,start_time,caption\n" + b"1,abcdefghijk,0,a dog\n" * 4000
    registry = _datasets_registry(tmp_path, "test.csv", body)
    if size is not None:
        registry.write_text(registry.read_text() + f"size = {size}\n")
    data = tmp_path / "data"
    with FileServer({"/files/test.csv": body}) as srv:
        if fault:
            srv.faults["test.csv"] = fault
        args = ["fetch", "notes", "--registry", str(registry), "--data", str(data)]
        r = run_cli([*args, "--mirror", srv.url], {})
        assert len([q for q in srv.requests if q.startswith("GET")]) == 1, srv.requests
    _one_line(r, "test.csv", says.format(len=len(body)))
    assert not [p for p in (data / "notes").rglob("*") if p.is_file()], "a file was kept"

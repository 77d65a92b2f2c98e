"""Checkpoints from the Hugging Face hub at their pinned commit, each file's hash checked.

Every file is asked for at the registry's 40-hex ``revision`` (never ``main``) and placed in
the hub cache's layout (``--cache``, else ``HF_HUB_CACHE``/the standard one:
``models--owner--name/snapshots/<commit>/<file>`` linked to ``blobs/<sha256>``), following
``HF_ENDPOINT`` as huggingface_hub does, with its metadata request and its transfer (which
retries a dropped connection and resumes it with HTTP ranges). audiorepro places the file
itself rather than through ``hf_hub_download``, because the library names cache paths after
what the server says (an ETag ``"../../x"`` or a commit ``../x`` would write, link and later
remove files outside the cache): here no path comes from the server. The server must answer
with the pinned commit, an ETag that is a hash and a size that fits; the bytes go to a
temporary file of this process (removed on failure or interruption, and by the next fetch
after a kill) and enter the cache only once their SHA-256 is the registry's and agrees with
the server's ETag. A cached file whose SHA-256 or size is not the registry's is removed (its
snapshot link and its blob, each only if inside the cache), and the error names the file and
both hashes.

laion-clap's loads that take no revision (three tokenizers at import, ``RobertaModel
("roberta-base")``) are served by ``[support.*]`` repositories: their files are fetched at the
pinned commit and the cache's ``refs/main`` of each is pointed at it, so that with
``HF_HUB_OFFLINE=1`` those loads resolve to exactly the pinned files.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.core.io import atomic_write_bytes
from audiorepro.core.paths import (
    check_relative,
    inside,
    is_inside,
    partial_name,
    relative_name,
    remove_stale_partials,
    repo_error,
)
from audiorepro.models.registry import ModelSpec, SupportRepo

Say = Callable[[str], None]


class HashMismatch(UserError):
    """A downloaded file is not the registered one (it has been removed from the cache)."""


class Unverified(UserError):
    """A file arrived whose hash nobody has published yet: kept, reported, not trusted."""


@dataclass(frozen=True)
class Fetched:
    name: str
    repo: str
    revision: str
    file: str
    path: Path
    sha256: str
    verified: bool


def allow_downloads(cache: Path | None) -> None:
    """Let huggingface_hub reach ``HF_ENDPOINT`` in this process (``fetch`` only).

    The rest of audiorepro sets ``HF_HUB_OFFLINE=1``; huggingface_hub reads its settings when
    first imported, so its constants are updated too when it already is.
    """
    os.environ["HF_HUB_OFFLINE"] = "0"
    os.environ.pop("TRANSFORMERS_OFFLINE", None)
    if cache is not None:
        os.environ["HF_HUB_CACHE"] = str(cache.resolve())
    # The library's retry notices would break the one-line error; its retries stay.
    from huggingface_hub.utils import logging as hub_logging

    hub_logging.set_verbosity_error()
    constants: Any = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = False
        if cache is not None:
            constants.HF_HUB_CACHE = os.environ["HF_HUB_CACHE"]


def endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def _url(repo: str, revision: str, file: str) -> str:
    return f"{endpoint()}/{repo}/resolve/{revision}/{file}"


def _hand_placement(repo: str, revision: str, file: str, cache: Path | None) -> str:
    where = cache or "the hub cache (HF_HUB_CACHE)"
    return (
        f"to place it by hand, download {_url(repo, revision, file)} on a machine with network "
        f"(or `hf download {repo} {file} --revision {revision} --cache-dir DIR`) and copy the "
        f"cache folder models--{repo.replace('/', '--')} into {where}"
    )


def cache_root(cache: Path | None) -> Path:
    """The hub cache folder fetch writes into (``--cache``, else the library's)."""
    if cache is not None:
        return cache
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def storage(repo: str, cache: Path | None) -> Path:
    """The cache folder of ``repo`` (``models--owner--name``), checked to stay in the cache."""
    why = repo_error(repo)
    if why is not None:
        raise UserError(f"repository {repo!r} {why}", key=repo)
    return inside(cache_root(cache), "models--" + repo.replace("/", "--"))


@dataclass(frozen=True)
class Expected:
    """What a file must be: its SHA-256 (or PLACEHOLDER: pinned by the revision only), its
    size where the registry gives it, and where the registry says so (for the message)."""

    sha256: str = PLACEHOLDER
    size: int | None = None
    where: str | None = None
    registry: str | None = None


def download(
    repo: str, file: str, revision: str, cache: Path | None, expected: Expected | None = None
) -> Path:
    """The file's snapshot entry in the hub cache at ``revision``, downloaded if absent.

    Nothing the server says names a path: the file's name is the registry's (or a checked
    listing's), the snapshot folder is the pinned revision (the server must answer with that
    commit), and the blob is named by the SHA-256 of the bytes received. The bytes go to a
    temporary file of this process, are checked (the registry's hash and size, the server's
    own ETag), and only then move into the cache; a failure or an interruption removes them.
    """
    expected = expected or Expected()
    check_relative(file, what="file name", key=f"{repo}/{file}")
    home = storage(repo, cache)
    pointer = inside(home, "snapshots", revision, *file.split("/"))
    if pointer.is_file():
        return pointer
    blobs = inside(home, "blobs")
    remove_stale_partials(blobs)
    meta = _metadata(repo, file, revision)
    _check_metadata(meta, repo, file, revision, expected, blobs)
    url = _url(repo, revision, file)
    blobs.mkdir(parents=True, exist_ok=True)
    tmp = blobs / partial_name()
    try:
        _get(meta.location, tmp, meta.size, repo, file, revision, cache)
        got = _check_bytes(tmp, meta.etag, expected, url)
        blob = blobs / got
        os.replace(tmp, blob)
    finally:
        tmp.unlink(missing_ok=True)
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_symlink():  # a dangling link inside the cache (its blob was removed)
        pointer.unlink()
    os.symlink(os.path.relpath(blob, pointer.parent), pointer)
    return pointer


def _metadata(repo: str, file: str, revision: str) -> Any:
    """The hub's HEAD answer for the file (commit, ETag, size, where the bytes are)."""
    from huggingface_hub import get_hf_file_metadata

    try:
        return get_hf_file_metadata(_url(repo, revision, file), retry_on_errors=True)
    except Exception as exc:
        raise _download_error(exc, repo, file, revision, None) from None


def _download_error(
    exc: BaseException, repo: str, file: str, revision: str, cache: Path | None
) -> BaseException:
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    url = _url(repo, revision, file)
    if isinstance(exc, RevisionNotFoundError):
        return UserError(
            f"revision {revision} of {repo} does not exist on {endpoint()}: the registry pins a "
            "commit the hub does not have",
            key=f"{repo}@{revision}",
        )
    if isinstance(exc, RepositoryNotFoundError):
        return UserError(f"repository {repo} not found on {endpoint()}", key=repo)
    if isinstance(exc, EntryNotFoundError):
        return UserError(f"{file} is not in {repo} at revision {revision}", key=url)
    if not _transport_error(exc) and not isinstance(exc, HfHubHTTPError | OSError | ValueError):
        return exc
    return UserError(
        f"download of {url} failed ({_cause(exc)}); rerun fetch to download it again, or "
        f"{_hand_placement(repo, revision, file, cache)}",
        key=f"{repo}/{file}",
    )


#: An ETag the hub gives a file: the git blob SHA-1 (40 hex) or, for an LFS file, its
#: SHA-256 (64 hex).
_ETAG = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})$")


def _check_metadata(
    meta: Any, repo: str, file: str, revision: str, expected: Expected, blobs: Path
) -> None:
    """The server's answer, before a byte is written: the pinned commit, an ETag that is a
    hash, a size that fits, bytes at an http(s) address."""
    url = _url(repo, revision, file)

    def refuse(message: str) -> UserError:
        return UserError(f"{url}: the hub {message}; refused (nothing was written)", key=file)

    if meta.commit_hash != revision:
        raise refuse(f"answers commit {meta.commit_hash!r} for the pinned revision {revision}")
    if not isinstance(meta.etag, str) or not _ETAG.match(meta.etag):
        raise refuse(f"gives the ETag {meta.etag!r}; expected a 40- or 64-hex hash")
    if meta.size is None:
        raise refuse("declares no size")
    if expected.size is not None and meta.size != expected.size:
        raise refuse(f"declares {meta.size} bytes, the registry expects {expected.size}")
    free = shutil.disk_usage(blobs if blobs.exists() else _existing_parent(blobs)).free
    if meta.size > free:
        raise refuse(f"declares {meta.size} bytes, more than the {free} bytes free in the cache")
    if urlsplit(str(meta.location)).scheme not in ("http", "https"):
        raise refuse(f"sends the bytes to {str(meta.location)[:200]!r}; expected an http(s) URL")


def _existing_parent(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def _get(
    location: str, tmp: Path, size: int, repo: str, file: str, revision: str, cache: Path | None
) -> None:
    """The bytes into ``tmp``; the library resumes a dropped transfer (HTTP ranges)."""
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    try:
        with open(tmp, "wb") as f:
            http_get(location, f, headers=build_hf_headers(), expected_size=size)
    except Exception as exc:
        raise _download_error(exc, repo, file, revision, cache) from None


def _check_bytes(tmp: Path, etag: str, expected: Expected, url: str) -> str:
    """The SHA-256 of the received bytes, which must be the registry's and agree with the
    server's own ETag (git blob SHA-1 or SHA-256)."""
    size = tmp.stat().st_size
    sha, git = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    with open(tmp, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
            git.update(block)
    got = sha.hexdigest()
    if expected.sha256 != PLACEHOLDER and got != expected.sha256:
        raise HashMismatch(
            f"{url}: SHA-256 expected {expected.sha256}, found {got}: not the registered file, "
            "not kept in the cache",
            source=expected.registry,
            key=expected.where,
        )
    if etag not in (got, git.hexdigest()):
        raise HashMismatch(
            f"{url}: the bytes received (SHA-256 {got}) are not the ETag {etag} the hub gave "
            "them: not kept in the cache",
            source=expected.registry,
            key=expected.where,
        )
    return got


def _transport_error(exc: BaseException) -> bool:
    """An error of the HTTP client under huggingface_hub (httpx in 1.x, httpx2 in 2.x)."""
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "requests")


def _cause(exc: BaseException) -> str:
    """The innermost message of an exception chain, on one line."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def remove_from_cache(path: Path, root: Path) -> None:
    """Delete a snapshot file and the blob it links to: nothing loadable is left. Only what
    is inside the cache ``root`` is removed, the link and its target each checked."""
    blob = path.resolve()
    if is_inside(root, path.parent):
        path.unlink(missing_ok=True)
    if blob != path and is_inside(root, blob):
        blob.unlink(missing_ok=True)


def check_file(
    path: Path, *, expected: str, size: int | None, where: str, url: str, registry: str | None,
    root: Path,
) -> tuple[str, bool]:  # fmt: skip
    """SHA-256 (and size) of a cached file against the registry; a mismatch removes it."""
    got_size = path.stat().st_size
    got = sha256_file(path)
    if size is not None and got_size != size:
        remove_from_cache(path, root)
        raise HashMismatch(
            f"{url} has {got_size} bytes, the registry expects {size} (SHA-256 found {got}, "
            f"expected {expected}): removed from the cache",
            source=registry,
            key=where,
        )
    if expected != PLACEHOLDER and got != expected:
        remove_from_cache(path, root)
        raise HashMismatch(
            f"{url}: SHA-256 expected {expected}, found {got}: not the registered file, "
            "removed from the cache",
            source=registry,
            key=where,
        )
    return got, expected != PLACEHOLDER


def fetch_model(spec: ModelSpec, cache: Path | None) -> list[Fetched]:
    """Every file of a hub model (``hf`` with ``repo``, or ``laion`` with ``repo``)."""
    if spec.format == "hf" and not spec.is_hub:
        raise UserError("is a local folder, not a hub repository: nothing to fetch", key=spec.name)
    repo = spec.location if spec.format == "hf" else spec.hub_repo
    if repo is None:
        raise UserError(
            "has no hub 'repo' in its registry entry: nothing to fetch (place the checkpoint "
            "file by hand, see AUDIOREPRO_CHECKPOINT_DIR)",
            source=spec.registry,
            key=f"checkpoints.{spec.name}",
        )
    revision = spec.revision or ""
    if revision == PLACEHOLDER or len(revision) != 40:
        raise UserError(
            f"has no pinned 40-hex revision ({revision!r}); fetch never takes a branch",
            source=spec.registry,
            key=f"checkpoints.{spec.name}.revision",
        )
    wanted = {**spec.files, **spec.weights}
    done: list[Fetched] = []
    for file in sorted(wanted):
        table = "weights" if file in spec.weights else "files"
        where = f"checkpoints.{spec.name}.{table}.{file}"
        size = spec.sizes.get(file)
        path = download(
            repo, file, revision, cache, Expected(wanted[file], size, where, spec.registry)
        )
        sha, verified = check_file(
            path,
            expected=wanted[file],
            size=size,
            where=where,
            url=_url(repo, revision, file),
            registry=spec.registry,
            root=cache_root(cache),
        )
        done.append(Fetched(spec.name, repo, revision, file, path, sha, verified))
    return done


def _listing(support: SupportRepo) -> list[str]:
    """The file names of a support repository at its pinned commit, each a safe relative
    name; a listing that is not a JSON list of file entries is one line."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError

    where = f"{endpoint()}/api/models/{support.repo}/tree/{support.revision}"
    try:
        listing = list(HfApi().list_repo_files(support.repo, revision=support.revision))
    except RevisionNotFoundError:
        raise UserError(
            f"revision {support.revision} of {support.repo} does not exist on {endpoint()}",
            source=support.registry,
            key=f"support.{support.name}.revision",
        ) from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # The library reads the listing as a JSON list of objects and fails on anything else
        # (an HTML page, an object, a list of strings) with the error of the step that broke.
        raise UserError(
            f"the file listing {where} is not a JSON list of file entries ({_cause(exc)}); refused",
            key=support.name,
        ) from None
    except Exception as exc:
        if not _transport_error(exc) and not isinstance(exc, HfHubHTTPError | OSError):
            raise
        raise UserError(
            f"cannot list {where} ({_cause(exc)}); run fetch where the hub is reachable and "
            f"copy the cache folder models--{support.repo.replace('/', '--')}",
            key=support.name,
        ) from None
    for name in listing:
        why = relative_name(name)
        if why is not None:
            raise UserError(
                f"the file listing {where} names {name!r}, which {why}; refused (nothing was "
                "written)",
                key=support.name,
            )
    return sorted(listing)


def fetch_support(support: SupportRepo, cache: Path | None) -> list[Fetched]:
    """A support repository's files (``allow`` patterns, the first of ``weights_one_of`` the
    revision has) at its pinned commit; then ``refs/main`` names that commit in the cache."""
    listing = _listing(support)
    files = [f for f in listing if any(fnmatch.fnmatchcase(f, p) for p in support.allow)]
    if support.weights_one_of:
        present = [w for w in support.weights_one_of if w in listing]
        if not present:
            raise UserError(
                f"{support.repo} at {support.revision} has none of "
                f"{', '.join(support.weights_one_of)}",
                source=support.registry,
                key=f"support.{support.name}.weights_one_of",
            )
        files.append(present[0])
    done = []
    for file in sorted(set(files)):
        path = download(support.repo, file, support.revision, cache)
        done.append(
            Fetched(
                support.name, support.repo, support.revision, file, path, sha256_file(path), False
            )
        )
    if done:
        # .../models--org--name/refs/main: laion-clap's unpinned loads resolve to the commit
        atomic_write_bytes(
            inside(storage(support.repo, cache), "refs", "main"), support.revision.encode()
        )
    return done


def summary_line(f: Fetched) -> str:
    status = "verified" if f.verified else "pinned by revision"
    return f"{f.name}: {f.repo}@{f.revision[:12]} {f.file} sha256 {f.sha256} ({status})"

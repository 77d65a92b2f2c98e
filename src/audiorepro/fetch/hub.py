"""Checkpoints from the Hugging Face hub at their pinned commit, each file's hash checked.

Every download goes through ``huggingface_hub.hf_hub_download`` with the registry's 40-hex
``revision`` (never ``main``), into the hub cache (``--cache``, else ``HF_HUB_CACHE``/the
standard one), following ``HF_ENDPOINT`` as the library does. The library retries a dropped
connection and resumes the transfer within the call (HTTP ranges); a call that fails leaves no
partial file (huggingface_hub 2.x), so the next ``fetch`` restarts that file. audiorepro then
hashes the file it got. A file whose SHA-256 or size is not the
registry's is removed from the cache (its snapshot link and its blob), so nothing a later
``extract`` would load is left, and the error names the file and both hashes.

laion-clap's loads that take no revision (three tokenizers at import, ``RobertaModel
("roberta-base")``) are served by ``[support.*]`` repositories: their files are fetched at the
pinned commit and the cache's ``refs/main`` of each is pointed at it, so that with
``HF_HUB_OFFLINE=1`` those loads resolve to exactly the pinned files.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.core.io import atomic_write_bytes
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


def download(repo: str, file: str, revision: str, cache: Path | None) -> Path:
    """``hf_hub_download`` at ``revision``; every failure is one line (a UserError)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    url = _url(repo, revision, file)
    try:
        return Path(
            hf_hub_download(
                repo, file, revision=revision, cache_dir=None if cache is None else str(cache)
            )
        )
    except RevisionNotFoundError:
        raise UserError(
            f"revision {revision} of {repo} does not exist on {endpoint()}: the registry pins a "
            "commit the hub does not have",
            key=f"{repo}@{revision}",
        ) from None
    except RepositoryNotFoundError:
        raise UserError(f"repository {repo} not found on {endpoint()}", key=repo) from None
    except LocalEntryNotFoundError as exc:
        # The hub's way of saying "no connection and not in the cache".
        raise UserError(
            f"cannot download {url} ({_cause(exc)}); "
            + _hand_placement(repo, revision, file, cache),
            key=f"{repo}/{file}",
        ) from None
    except EntryNotFoundError:
        raise UserError(f"{file} is not in {repo} at revision {revision}", key=url) from None
    except Exception as exc:
        if not _transport_error(exc) and not isinstance(exc, HfHubHTTPError | OSError):
            raise
        raise UserError(
            f"download of {url} failed ({_cause(exc)}); rerun fetch to download it again, or "
            f"{_hand_placement(repo, revision, file, cache)}",
            key=f"{repo}/{file}",
        ) from None


def _transport_error(exc: BaseException) -> bool:
    """An error of the HTTP client under huggingface_hub (httpx in 1.x, httpx2 in 2.x)."""
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "requests")


def _cause(exc: BaseException) -> str:
    """The innermost message of an exception chain, on one line."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def remove_from_cache(path: Path) -> None:
    """Delete a snapshot file and the blob it links to: nothing loadable is left."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)


def check_file(
    path: Path, *, expected: str, size: int | None, where: str, url: str, registry: str | None
) -> tuple[str, bool]:
    """SHA-256 (and size) of a downloaded file against the registry; a mismatch removes it."""
    got_size = path.stat().st_size
    got = sha256_file(path)
    if size is not None and got_size != size:
        remove_from_cache(path)
        raise HashMismatch(
            f"{url} has {got_size} bytes, the registry expects {size} (SHA-256 found {got}, "
            f"expected {expected}): removed from the cache",
            source=registry,
            key=where,
        )
    if expected != PLACEHOLDER and got != expected:
        remove_from_cache(path)
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
        path = download(repo, file, revision, cache)
        table = "weights" if file in spec.weights else "files"
        sha, verified = check_file(
            path,
            expected=wanted[file],
            size=spec.sizes.get(file),
            where=f"checkpoints.{spec.name}.{table}.{file}",
            url=_url(repo, revision, file),
            registry=spec.registry,
        )
        done.append(Fetched(spec.name, repo, revision, file, path, sha, verified))
    return done


def fetch_support(support: SupportRepo, cache: Path | None) -> list[Fetched]:
    """A support repository's files (``allow`` patterns, the first of ``weights_one_of`` the
    revision has) at its pinned commit; then ``refs/main`` names that commit in the cache."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError

    try:
        listing = sorted(HfApi().list_repo_files(support.repo, revision=support.revision))
    except RevisionNotFoundError:
        raise UserError(
            f"revision {support.revision} of {support.repo} does not exist on {endpoint()}",
            source=support.registry,
            key=f"support.{support.name}.revision",
        ) from None
    except Exception as exc:
        if not _transport_error(exc) and not isinstance(exc, HfHubHTTPError | OSError):
            raise
        raise UserError(
            f"cannot list {endpoint()}/api/models/{support.repo}/tree/{support.revision} "
            f"({_cause(exc)}); run fetch where the hub is reachable and copy the cache folder "
            f"models--{support.repo.replace('/', '--')}",
            key=support.name,
        ) from None
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
        # .../models--org--name/snapshots/<commit>/<file> -> .../models--org--name/refs/main
        storage = done[0].path.parents[len(Path(done[0].file).parts)].parent
        atomic_write_bytes(storage / "refs" / "main", support.revision.encode())
    return done


def summary_line(f: Fetched) -> str:
    status = "verified" if f.verified else "pinned by revision"
    return f"{f.name}: {f.repo}@{f.revision[:12]} {f.file} sha256 {f.sha256} ({status})"

"""Stand-in servers on 127.0.0.1 for the download tests: a Hugging Face hub and a file server.

:class:`StandinHub` answers as the hub does for what ``huggingface_hub`` asks
(``HEAD``/``GET /{repo}/resolve/{revision}/{file}`` with ``X-Repo-Commit``, ``ETag``,
``Content-Length``; large files as LFS: a 302 to a blob URL with ``X-Linked-Etag`` (the
SHA-256) and ``X-Linked-Size``; byte ranges for resumed transfers; 404 with
``X-Error-Code: RevisionNotFound`` / ``EntryNotFound`` / ``RepoNotFound``; and
``/api/models/{repo}/tree/{revision}``). :class:`FileServer` serves bytes by URL path (the
query is ignored, as Zenodo's ``?download=1`` is). Faults per file: ``tamper`` (other bytes,
same headers), ``truncate`` (the first GET stops half-way and closes the connection),
``die`` (the server stops half-way through the file, for good), ``stall`` (the first GET
stops half-way and waits, at most 30 s, so that a test can interrupt the client mid-file).

:class:`HostileHub` is the same hub answering as a hostile one may: per file, headers of its
``resolve`` answers replaced (an ``ETag`` or ``X-Repo-Commit`` with ``..`` or an absolute
path, ``Content-Length: 10**15``, a ``Location`` elsewhere), and per repository the raw body
of its file listing (names with ``..``, an HTML page, a JSON object instead of a list).

Both listen on loopback only, on a free port, stop by themselves after ``lifetime_s`` or
``max_requests`` (so a stuck client cannot loop), and are context managers.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".bin", ".pt", ".safetensors", ".7z", ".msgpack", ".h5")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class _Server:
    """A threading HTTP server on 127.0.0.1 with a bounded life."""

    def __init__(self, lifetime_s: float = 300.0, max_requests: int = 2000) -> None:
        self.faults: dict[str, str] = {}
        self.requests: list[str] = []
        self.max_requests = max_requests
        self._served_truncated: set[str] = set()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                owner._handle(self, head=True)

            def do_GET(self) -> None:
                owner._handle(self, head=False)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True
        self._stopped = False

    def __enter__(self) -> _Server:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._timer.cancel()
            threading.Thread(target=self.httpd.shutdown, daemon=True).start()
            self.httpd.server_close()

    # -- responses ------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        rng = h.headers.get("Range")
        self.requests.append(f"{h.command} {h.path}" + (f" range={rng}" if rng else ""))
        if len(self.requests) > self.max_requests:
            self._send(h, 503, b"too many requests", {}, head=head)
            self.stop()
            return
        self.route(h, head=head)

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: dict[str, str],
        *,
        head: bool,
    ) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        if "Content-Length" not in headers:
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _send_file(
        self, h: BaseHTTPRequestHandler, key: str, data: bytes, headers: dict[str, str], head: bool
    ) -> None:
        """A file body with byte ranges and the faults set for ``key``."""
        fault = self.faults.get(key)
        if fault == "tamper":
            data = bytes(b ^ 0x5A for b in data[:64]) + data[64:]
        start = 0
        rng = h.headers.get("Range")
        status = 200
        if rng and rng.startswith("bytes=") and not head:
            start = int(rng[6:].split("-")[0] or 0)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        headers = {**headers, "Accept-Ranges": "bytes", "Content-Length": str(len(body))}
        if fault in ("huge", "unsized") and not head:
            # A server that announces a petabyte, or sends a body with no length at all
            # (the connection's end marks it: HTTP/1.0).
            h.send_response(status)
            if fault == "huge":
                h.send_header("Content-Length", str(10**15))
            h.end_headers()
            h.wfile.write(body)
            h.close_connection = True
            return
        # "stall" stalls the first transfer only (a retry then succeeds); "stall-always" every
        # one, so that only a signal can end the client (no timing race with its retries).
        cut = not head and (
            fault == "stall-always"
            or (fault in ("truncate", "die", "stall") and key not in self._served_truncated)
        )
        if not cut:
            self._send(h, status, body, headers, head=head)
            return
        self._served_truncated.add(key)
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body[: len(body) // 2])
        h.wfile.flush()
        h.close_connection = True
        until = time.monotonic() + 30
        while fault in ("stall", "stall-always") and not self._stopped and time.monotonic() < until:
            time.sleep(0.05)
        if fault == "die":
            self.stop()

    def route(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        raise NotImplementedError


class _Blobs(_Server):
    """The hub's LFS storage on its own origin (the hub follows redirects on its own origin
    only; the real one sends LFS files to a CDN host)."""

    def __init__(self, hub: StandinHub, **kw: Any) -> None:
        super().__init__(**kw)
        self.hub = hub
        self.requests = hub.requests
        self.faults = hub.faults
        self._served_truncated = hub._served_truncated

    def route(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        self.hub.route(h, head=head)


class StandinHub(_Server):
    """A Hugging Face hub stand-in: ``add(repo, commit, files)``; ``main`` is the last added."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.repos: dict[str, dict[str, dict[str, bytes]]] = {}
        self.main: dict[str, str] = {}
        self.blobs = _Blobs(self, **kw)

    def __enter__(self) -> StandinHub:
        super().__enter__()
        self.blobs.__enter__()
        return self

    def stop(self) -> None:
        super().stop()
        self.blobs.stop()

    def add(self, repo: str, commit: str, files: dict[str, bytes]) -> None:
        self.repos.setdefault(repo, {})[commit] = dict(files)
        self.main[repo] = commit

    def _error(self, h: BaseHTTPRequestHandler, code: str, head: bool, commit: str = "") -> None:
        headers = {"X-Error-Code": code, "Content-Type": "application/json"}
        if commit:
            headers["X-Repo-Commit"] = commit
        body = json.dumps({"error": code}).encode()
        self._send(h, 404, body, headers, head=head)

    def _commit(self, repo: str, revision: str) -> str | None:
        if revision == "main":
            return self.main.get(repo)
        return revision if revision in self.repos.get(repo, {}) else None

    def route(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        if path.startswith("/lfs/"):
            sha = path[len("/lfs/") :]
            for commits in self.repos.values():
                for files in commits.values():
                    for name, data in files.items():
                        if hashlib.sha256(data).hexdigest() == sha:
                            headers = {"ETag": f'"{sha}"'}
                            self.blobs._send_file(h, name, data, headers, head)
                            return
            self._send(h, 404, b"no such blob", {}, head=head)
            return
        if path.startswith("/api/models/") and "/tree/" in path:
            repo, _, revision = path[len("/api/models/") :].partition("/tree/")
            commit = self._commit(repo, revision.strip("/"))
            if repo not in self.repos:
                return self._error(h, "RepoNotFound", head)
            if commit is None:
                return self._error(h, "RevisionNotFound", head)
            entries = [
                {"type": "file", "path": n, "size": len(d), "oid": git_blob_sha1(d)}
                for n, d in sorted(self.repos[repo][commit].items())
            ]
            body = json.dumps(entries).encode()
            self._send(h, 200, body, {"Content-Type": "application/json"}, head=head)
            return
        if "/resolve/" not in path:
            self._send(h, 404, b"not found", {}, head=head)
            return
        repo, _, rest = path.lstrip("/").partition("/resolve/")
        revision, _, file = rest.partition("/")
        if repo not in self.repos:
            return self._error(h, "RepoNotFound", head)
        commit = self._commit(repo, revision)
        if commit is None:
            return self._error(h, "RevisionNotFound", head)
        files = self.repos[repo][commit]
        if file not in files:
            return self._error(h, "EntryNotFound", head, commit)
        data = files[file]
        if file.endswith(LFS_SUFFIXES):
            sha = hashlib.sha256(data).hexdigest()
            headers = {
                "X-Repo-Commit": commit,
                "X-Linked-Etag": f'"{sha}"',
                "X-Linked-Size": str(len(data)),
                "ETag": f'"{git_blob_sha1(data)}"',
                "Location": f"{self.blobs.url}/lfs/{sha}",
            }
            self._send(h, 302, b"", headers, head=head)
            return
        headers = {"X-Repo-Commit": commit, "ETag": f'"{git_blob_sha1(data)}"'}
        self._send_file(h, file, data, headers, head)


class HostileHub(StandinHub):
    """The hub as a hostile server answers: ``headers[file]`` replace (or add) headers of the
    ``resolve`` answers for that file (HEAD and GET, also a ``Content-Length`` that the body
    does not have); ``listings[repo]`` is the raw body of that repository's file listing."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.headers: dict[str, dict[str, str]] = {}
        self.listings: dict[str, bytes] = {}

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: dict[str, str],
        *,
        head: bool,
    ) -> None:
        path = unquote(urlsplit(h.path).path)
        if path.startswith("/api/models/") and "/tree/" in path:
            repo = path[len("/api/models/") :].partition("/tree/")[0]
            if repo in self.listings:
                body, headers = self.listings[repo], {"Content-Type": "text/html"}
        elif "/resolve/" in path:
            file = path.partition("/resolve/")[2].partition("/")[2]
            headers = {**headers, **self.headers.get(file, {})}
        super()._send(h, status, body, headers, head=head)


class FileServer(_Server):
    """Static files by URL path (query ignored): ``files["/record/1/files/a.csv"] = b"..."``."""

    def __init__(self, files: dict[str, bytes], **kw: Any) -> None:
        super().__init__(**kw)
        self.files = dict(files)

    def route(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        if path not in self.files:
            self._send(h, 404, b"not found", {}, head=head)
            return
        name = path.rsplit("/", 1)[-1]
        self._send_file(h, name, self.files[path], {}, head)

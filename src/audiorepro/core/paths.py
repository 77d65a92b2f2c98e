"""Paths that come from outside (a server's headers and listings, a registry's names, an
archive's members) kept inside the folder they are meant for, and downloads that leave
nothing behind.

A name from outside is checked as text first (:func:`relative_name`: no ``..``, no absolute
path, nothing a file system would read otherwise), then the path it makes is resolved,
symbolic links followed, and must still be inside its root (:func:`inside`) before anything is
written or removed there. Temporary download files carry the id of the process writing them
(:func:`partial_name`) so that a later fetch removes those of a process that is gone
(:func:`remove_stale_partials`) and leaves a running one's alone.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from audiorepro.core.errors import UserError

#: A hub repository id: ``name`` or ``owner/name`` of letters, digits, ``-``, ``_``, ``.``
#: (the hub's own rule; it forbids ``--`` and ``..`` too, which the cache's folder name would
#: make ambiguous or a way out).
_REPO = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$")
_PARTIAL = re.compile(r"^\.audiorepro-(\d+)-[0-9a-f]{32}\.incomplete$")


def relative_name(name: object, *, flat: bool = False) -> str | None:
    """Why ``name`` is not a safe relative file name (``None`` when it is). ``flat``: a plain
    file name, without folders.

    >>> for n in ["a/b.json", "../x", "/etc/x", "a//b", "a\\\\b", "./a"]:
    ...     print(relative_name(n))
    None
    has a '..' part
    is an absolute path
    has an empty part
    has a backslash
    has a '.' part
    >>> relative_name("sub/a.txt", flat=True)
    'names a folder'
    """
    if not isinstance(name, str) or not name:
        return "is not a non-empty string"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "has a control character"
    if "\\" in name:
        return "has a backslash"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "is an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "has a '..' part"
    if "." in parts:
        return "has a '.' part"
    if "" in parts:
        return "has an empty part"
    if flat and len(parts) > 1:
        return "names a folder"
    return None


def check_relative(
    name: object, *, what: str, source: str | Path | None = None, key: str | None = None,
    flat: bool = False,
) -> str:  # fmt: skip
    """``name`` if it is a safe relative name, else a :class:`UserError` saying why."""
    why = relative_name(name, flat=flat)
    if why is not None:
        expected = "a plain file name" if flat else "a relative path inside its folder"
        raise UserError(f"{what} {name!r} {why}; expected {expected}", source=source, key=key)
    assert isinstance(name, str)
    return name


def repo_error(repo: object) -> str | None:
    """Why ``repo`` is not a hub repository id (``None`` when it is).

    >>> [repo_error(r) is None for r in ["laion/clap-htsat", "roberta-base", "../x", "a/../b"]]
    [True, True, False, False]
    """
    if not isinstance(repo, str) or not _REPO.match(repo) or ".." in repo or "--" in repo:
        return "is not owner/name of letters, digits, '-', '_', '.'"
    return None


def inside(root: Path, *parts: str) -> Path:
    """``root/parts`` if, resolved (symbolic links followed), it stays inside ``root``
    (resolved too); else a :class:`UserError` naming the path and where it leads."""
    base = root.resolve()
    path = root.joinpath(*parts)
    resolved = path.resolve()
    if resolved != base and base not in resolved.parents:
        raise UserError(f"leads to {resolved}, outside {base}; refused", source=path)
    return path


def is_inside(root: Path, path: Path) -> bool:
    """Whether ``path``, resolved, is ``root`` or inside it (resolved)."""
    base, resolved = root.resolve(), path.resolve()
    return resolved == base or base in resolved.parents


def partial_name() -> str:
    """A temporary download name unique to this process and call.

    >>> _PARTIAL.match(partial_name()) is not None
    True
    """
    return f".audiorepro-{os.getpid()}-{uuid.uuid4().hex}.incomplete"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_stale_partials(folder: Path) -> list[Path]:
    """Remove the partial downloads in ``folder`` whose process is gone (killed mid-file)."""
    removed: list[Path] = []
    if not folder.is_dir() or folder.is_symlink():
        return removed
    for path in sorted(folder.iterdir()):
        m = _PARTIAL.match(path.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            if path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def user_cache(name: str) -> Path:
    """A folder of the per-user cache: ``$XDG_CACHE_HOME/audiorepro/<name>`` where that is
    set, else ``~/.cache/audiorepro/<name>`` (the XDG base directory rule)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "audiorepro" / name

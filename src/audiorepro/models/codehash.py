"""The content of the code an encoder runs, read without importing any of it.

:func:`imported_code` follows the import statements of the encoder's module (every one,
those inside functions too) and resolves each top-level name as Python would find it (the
encoder file's own folder first, as ``python PATH.py`` has it, then ``sys.path`` and the
installed import hooks), then records:

- a **local module** (a ``.py`` file or package that no installed distribution provides: a
  helper beside a ``py:`` file, a folder on ``PYTHONPATH``) by the SHA-256 of its bytes, under
  its path relative to the folder it was found in; its own imports are followed in turn;
- an **editable install** (``pip install -e``: its ``direct_url.json`` says ``editable``) by
  content: the SHA-256 over every file of the packages it provides (``__pycache__`` left out),
  where they live (the project's folder); their imports are followed in turn;
- a **wheel install** (also ``pip install ./path`` without ``-e``: pip builds a wheel and
  copies it) by the SHA-256 of the ``RECORD`` file pip wrote, which lists the SHA-256 of every
  file it installed: a reinstall of other bytes under the same version gets another record.
  An edit made in place inside ``site-packages`` is not seen (pip's record is not re-read
  against the files: that would read torch's 13,700 files on every call); a distribution
  without a ``RECORD`` is hashed by content as an editable one is.

A file over 64 MiB in a local or editable package is data, not code: it counts by its size
(:func:`code_file_sha256`; an encoder's weight files are hashed as its weights). Hashes are
kept per process by each file's path, inode, size and times (:func:`file_sha256`), and
``RECORD`` files are small (torch's: 1.4 MB), so a torch-sized
dependency costs a few milliseconds: ``benchmarks/code_identity.py`` measures it
(docs/benchmarks.md).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Literal, TypedDict

#: How a distribution's code is identified (module docstring).
By = Literal["RECORD", "content", "version"]


class DistributionCode(TypedDict):
    """One imported distribution as the code identity records it."""

    version: str | None
    by: By  #: RECORD (wheel install), content (editable, or no RECORD), version (no files)
    sha256: str | None  #: of RECORD, or over the files' contents; None: by version only


class ImportedCode(TypedDict):
    """What an encoder's module imports, beyond the standard library and its own package."""

    local: dict[str, str]  #: a local module's path (relative to where found) -> SHA-256
    distributions: dict[str, DistributionCode]  #: by distribution name
    missing: list[str]  #: imported names found nowhere here (an optional import)


_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".tox", ".venv", ".mypy_cache"})


def _tops(dist: metadata.Distribution) -> set[str]:
    """The top-level modules a distribution provides: its ``top_level.txt``, else the first
    part of every Python file its ``RECORD`` lists (as ``importlib.metadata`` infers them),
    read as plain lines: no ``METADATA`` is parsed."""
    declared = (dist.read_text("top_level.txt") or "").split()
    if declared:
        return set(declared)
    tops = set()
    for line in (dist.read_text("RECORD") or "").splitlines():
        name = line.rsplit(",", 2)[0].strip('"')
        head, sep, _ = name.partition("/")
        if sep and head.isidentifier():  # not foo.dist-info, foo.libs, ..
            if name.endswith((".py", ".so", ".pyd")):
                tops.add(head)
        elif name.endswith(".py"):
            tops.add(name[:-3])
        elif name.endswith((".so", ".pyd")):
            tops.add(name.split(".")[0])
    return tops


@functools.cache
def _index() -> Mapping[str, tuple[metadata.Distribution, ...]]:
    """Top-level module -> the installed distributions that provide it, first on the path
    first (as ``importlib.metadata.packages_distributions()`` maps them, but by each
    distribution's folder name, without parsing every ``METADATA``: 0.2-0.25 s of CPU with
    this project's dev lock, once the largest cost of a short extraction; docs/benchmarks.md)."""
    out: dict[str, list[metadata.Distribution]] = {}
    seen: set[str] = set()
    for dist in metadata.distributions():
        name = dist_name(dist)
        if name in seen:
            continue  # a second install of one name further down the path: not the one used
        seen.add(name)
        for top in _tops(dist):
            out.setdefault(top, []).append(dist)
    return {top: tuple(dists) for top, dists in out.items()}


def dist_name(dist: metadata.Distribution) -> str:
    """A distribution's normalized name (``laion_clap``, ``resemblyzer``), from its folder's
    name where it has one (no ``METADATA`` read)."""
    name = getattr(dist, "_normalized_name", None)
    return str(name) if name else str(dist.metadata["Name"])


def packages_distributions() -> Mapping[str, list[str]]:
    """Top-level module -> the names of the distributions that provide it (:func:`_index`,
    built once per process)."""
    return {top: [dist_name(d) for d in dists] for top, dists in _index().items()}


#: Names looked up afresh once already (:func:`distributions_of`): a local module is in no
#: distribution, and re-reading every distribution's metadata on each call costs time.
_LOOKED_AFRESH: set[str] = set()


def _dists_of(top: str) -> tuple[metadata.Distribution, ...]:
    """The distributions that provide ``top``; a name the index lacks is looked up afresh once
    per process (a distribution installed meanwhile)."""
    dists = _index().get(top)
    if dists is None and top not in _LOOKED_AFRESH:
        _LOOKED_AFRESH.add(top)
        _index.cache_clear()
        dists = _index().get(top)
    return dists or ()


def distributions_of(top: str) -> list[str]:
    """The names of the distributions that provide the top-level module ``top``, sorted."""
    return sorted({dist_name(d) for d in _dists_of(top)})


@functools.cache
def _sha256_stat(path: str, stamp: tuple[int, ...]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read once per process while its inode, size and times
    stay the same (a file edited since is read again)."""
    return _sha256_stat(str(path), _stamp(path))


def _stamp(path: Path) -> tuple[int, ...]:
    """What tells a file edited since it was last read: its inode, size and times."""
    st = path.stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.cache
def _parsed_imports(path: str, stamp: tuple[int, ...]) -> tuple[tuple[int, str], ...]:
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()  # not Python we can read: its bytes are hashed all the same
    out: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {(0, alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            out.add((node.level, base))
            # ``from pkg import name``: ``name`` may be a submodule
            out |= {(node.level, f"{base}.{a.name}".lstrip(".")) for a in node.names}
    return tuple(sorted(out))


def imports_of(path: Path) -> tuple[tuple[int, str], ...]:
    """Every import statement of a Python file as ``(level, dotted name)`` (``level`` > 0: a
    relative import), parsed once per process while the file is unchanged."""
    return _parsed_imports(str(path), _stamp(path))


def tree_files(locations: Iterable[Path]) -> list[tuple[str, Path]]:
    """Every file under ``locations`` (folders or files), as ``(relative name, path)``,
    sorted; caches and VCS folders are left out."""
    out: list[tuple[str, Path]] = []
    for loc in sorted(set(locations)):
        if loc.is_file():
            out.append((loc.name, loc))
            continue
        for root, dirs, files in os.walk(loc):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
            for name in sorted(files):
                path = Path(root, name)
                if not name.endswith((".pyc", ".pyo")) and path.is_file():
                    out.append(((loc.name / path.relative_to(loc)).as_posix(), path))
    return sorted(out)


#: A file larger than this in a local or editable package is data (code is smaller): it counts
#: by its size, not read on every call (weight files are hashed as the encoder's weights).
LARGE = 64 << 20


def code_file_sha256(path: Path) -> str:
    """A code file's SHA-256 (:func:`file_sha256`), or ``size:N`` for a file over
    :data:`LARGE`."""
    size = path.stat().st_size
    return f"size:{size}" if size > LARGE else file_sha256(path)


def content_sha256(files: Iterable[tuple[str, Path]]) -> str:
    """The SHA-256 over ``"name\\0" + SHA-256 of the bytes + "\\0"`` of each file, in order
    (:func:`code_file_sha256`)."""
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + code_file_sha256(path).encode() + b"\0")
    return digest.hexdigest()


def _locations(found: importlib.machinery.ModuleSpec) -> list[Path]:
    if found.submodule_search_locations:
        return [Path(p) for p in found.submodule_search_locations if Path(p).is_dir()]
    origin = found.origin
    if origin and origin not in ("built-in", "frozen") and Path(origin).is_file():
        return [Path(origin)]
    return []


def find_top(top: str, first: Path | None) -> importlib.machinery.ModuleSpec | None:
    """Where ``import top`` would find the module, without importing it: ``first`` (the
    encoder file's folder) before the rest, as ``python PATH.py`` puts it on the path."""
    namespace = None
    if first is not None:
        found = importlib.machinery.PathFinder.find_spec(top, [str(first)])
        # a plain folder there (a namespace portion, say of audio files) yields to a module
        # or package found anywhere on the path, as Python's import does
        if found is not None and found.origin is not None:
            return found
        namespace = found
    try:
        return importlib.util.find_spec(top) or namespace
    except (ImportError, ValueError):
        return namespace


def _is_editable(dist: metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        info = json.loads(text)
    except ValueError:
        return False
    return isinstance(info, dict) and bool((info.get("dir_info") or {}).get("editable"))


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


@dataclass
class _Walk:
    """The state of one walk over the imports (:func:`imported_code`)."""

    first: Path | None  #: the encoder file's folder (searched first), None for a module spec
    own: str | None  #: the encoder's own top-level package (hashed whole by its caller)
    own_roots: list[Path]
    local: dict[str, str] = field(default_factory=dict)
    distributions: dict[str, DistributionCode] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    seen_tops: set[str] = field(default_factory=set)
    seen_files: set[Path] = field(default_factory=set)
    todo: list[tuple[Path, str | None]] = field(default_factory=list)

    def queue(self, path: Path, package: str | None) -> None:
        """Follow the imports of ``path`` (``package``: its dotted package, for relative
        imports inside the encoder's own package)."""
        if path.suffix == ".py" and path not in self.seen_files and path.is_file():
            self.seen_files.add(path)
            self.todo.append((path, package))

    def run(self) -> None:
        while self.todo:
            path, package = self.todo.pop()
            for level, name in imports_of(path):
                if level:
                    self._relative(package, level, name)
                elif name:
                    self._absolute(name)

    def _relative(self, package: str | None, level: int, name: str) -> None:
        if package is None:
            return  # a relative import outside a package fails when it runs
        parts = package.split(".")
        base = parts[: len(parts) - level + 1] if level <= len(parts) else []
        if base:
            self._absolute(".".join([*base, *[p for p in name.split(".") if p]]))

    def _absolute(self, dotted: str) -> None:
        top = dotted.split(".")[0]
        if top == self.own:
            self._own_module(dotted)
            return
        if top in sys.stdlib_module_names or top == "__future__" or top in self.seen_tops:
            return
        self.seen_tops.add(top)
        found = find_top(top, self.first)
        if found is None:
            self.missing.add(top)
            return
        locations = _locations(found)
        if not locations:
            return  # built into the interpreter
        if not self._distribution(top, locations):
            self._local(locations)

    def _own_module(self, dotted: str) -> None:
        """A module of the encoder's own package (hashed whole by the caller): follow its
        imports (a name that is not a module, ``from pkg import function``, matches none)."""
        parts = dotted.split(".")
        for root in self.own_roots:
            base = root.joinpath(*parts[1:])
            if len(parts) > 1:
                self.queue(base.with_suffix(".py"), ".".join(parts[:-1]))
            self.queue(base / "__init__.py", dotted)

    def _distribution(self, top: str, locations: list[Path]) -> bool:
        """Record the distributions providing ``top`` where it is found in one of them;
        False when none does (a local module, or one shadowing an installed one)."""
        recorded = False
        for dist in _dists_of(top):
            name = dist_name(dist)
            editable = _is_editable(dist)
            home = Path(str(dist.locate_file("")))
            if not editable and not all(_under(p, home) for p in locations):
                continue  # another copy shadows the installed one: it runs, not this
            recorded = True
            if name not in self.distributions:
                self.distributions[name] = self._dist_code(dist, editable, locations)
        return recorded

    def _dist_code(
        self, dist: metadata.Distribution, editable: bool, locations: list[Path]
    ) -> DistributionCode:
        version = _version(dist)
        record = None if editable else _record_path(dist)
        if record is not None:
            return {"version": version, "by": "RECORD", "sha256": file_sha256(record)}
        # every package the distribution provides, not only the one imported first
        for top in sorted(_tops(dist)):
            found = find_top(top, None)
            locations = [*locations, *(_locations(found) if found is not None else [])]
        files = tree_files(locations)
        for _, path in files:
            self.queue(path, None)
        return {"version": version, "by": "content", "sha256": content_sha256(files)}

    def _local(self, locations: list[Path]) -> None:
        """A module no distribution provides: every file of it by its bytes, under its path
        relative to the folder it was found in; its imports followed (its relative imports
        stay inside it)."""
        for name, path in tree_files(locations):
            self.local[name] = code_file_sha256(path)
            self.queue(path, None)


def _version(dist: metadata.Distribution) -> str | None:
    try:
        return metadata.version(dist_name(dist))
    except metadata.PackageNotFoundError:
        return dist.version


def _record_path(dist: metadata.Distribution) -> Path | None:
    """pip's ``RECORD`` of an installed wheel, where it lists hashes (an egg's has none)."""
    located = getattr(dist, "_path", None)  # PathDistribution: the .dist-info folder
    if located is None:
        return None
    record = Path(str(located)) / "RECORD"
    return record if record.is_file() else None


def imported_code(
    module_file: Path, *, first: Path | None, own: str | None, own_roots: list[Path]
) -> ImportedCode:
    """What the encoder's module imports, by content (module docstring): ``first`` is the
    encoder file's folder (searched first), ``own`` its own top-level package and
    ``own_roots`` that package's folders (hashed whole by the caller; its modules' imports
    are followed)."""
    walk = _Walk(first=first, own=own, own_roots=own_roots)
    walk.queue(module_file, _package_of(module_file, own, own_roots))
    walk.run()
    return {
        "local": dict(sorted(walk.local.items())),
        "distributions": dict(sorted(walk.distributions.items())),
        "missing": sorted(walk.missing),
    }


def _package_of(path: Path, own: str | None, roots: list[Path]) -> str | None:
    """The dotted package a file of the encoder's own package belongs to."""
    if own is None:
        return None
    for root in roots:
        if _under(path, root):
            parts = path.resolve().parent.relative_to(root.resolve()).parts
            return ".".join([own, *parts])
    return None

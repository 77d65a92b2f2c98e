"""Model specs that name a user's encoder, checked without running any of its code.

Three forms, besides the registry's names and the CLAP specs (``hf:``, ``laion:``):

- ``py:MODULE:FACTORY``: an importable module (``mypkg.encoders:make``); ``FACTORY()``
  returns an :class:`~audiorepro.models.encoder.Encoder`;
- ``py:PATH.py:FACTORY``: the same from a file (``py:./my_encoder.py:make``);
- ``hear:MODULE[:WEIGHTS]`` or ``hear:PATH.py[:WEIGHTS]``: a module implementing the HEAR 2021
  API (``load_model``, ``get_scene_embeddings``, the model's ``sample_rate`` and
  ``scene_embedding_size``), used as it is; ``WEIGHTS`` is the file given to ``load_model``;
- an installed plugin's name: an entry point of the group :data:`ENTRY_POINT_GROUP`
  (``audiorepro.encoders``) whose value is ``MODULE:FACTORY``, as ``py:MODULE:FACTORY``.

User code is found as Python finds it (:func:`find_top`, :func:`add_import_folder`): a module
name among the installed packages or in the working folder (which then goes first on the
import path, as ``python -m`` and HEAR's runner ``python -m heareval.embeddings.runner MODULE``
have it), and
a ``.py`` file with its own folder first on the import path (as ``python PATH.py`` has it),
so that it imports the modules beside it. Parsing a spec finds its module
(``importlib.util.find_spec`` of the top-level name, which imports nothing) or its file, and
never imports it: a bad spec is one line (exit 2) before any of the user's code runs.
Loading it (:mod:`audiorepro.models.user_encoders`) imports the module, which runs the user's
code: by design, as ``pip install`` of the same code would.

The encoder's code identity (:func:`code_identity`) is part of the extraction cache's key and
of every dump's record: the SHA-256 of its source (every ``.py`` file of the module's
top-level package, or the one file), its distribution's version, and the code its module
imports (:func:`wrapped_code`): local modules (a helper beside the file) by their bytes,
distributions by pip's ``RECORD`` (a wheel install) or by content (an editable install),
read from the files without importing them (:mod:`audiorepro.models.codehash`), so that a
changed encoder, helper or editable package is never served embeddings of the old code.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from audiorepro.core.errors import UserError
from audiorepro.models.codehash import ImportedCode, distributions_of, imported_code

#: The entry-point group installed encoders register under (``MODULE:FACTORY``).
ENTRY_POINT_GROUP = "audiorepro.encoders"
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class UserSpec:
    """A parsed ``py:``/``hear:`` spec or plugin: what to import, what to call."""

    format: Literal["py", "hear"]
    #: A dotted module name, or the absolute path of a ``.py`` file.
    target: str
    #: ``py``: the factory's (dotted) name in the module.
    factory: str | None = None
    #: ``hear``: the absolute path given to ``load_model``, if any.
    weights: str | None = None
    #: The entry point's name, for a plugin.
    plugin: str | None = None

    @property
    def is_file(self) -> bool:
        return self.target.endswith(".py")


def add_import_folder(folder: str | Path) -> None:
    """Put ``folder`` (absolute) first on ``sys.path`` unless it is there already: the working
    folder for a module name, a ``.py`` file's folder for the file (module docstring). It stays
    there for the process, as it does for ``python -m`` and ``python PATH.py``: the user's
    code may import its sibling modules at any later call."""
    path = os.path.abspath(folder)
    here = {os.path.abspath(p or os.curdir) for p in sys.path}
    if path not in here:
        sys.path.insert(0, path)
        importlib.invalidate_caches()


def find_top(top: str) -> Any:
    """The spec of a top-level module (``importlib.util.find_spec``, which imports nothing):
    among the installed packages, else in the working folder, which then goes first on the
    import path (as ``python -m`` has it) so that the module and the modules beside it are
    imported from there. None when neither has it. The working folder is added only for a
    module it holds: a command naming installed modules keeps ``sys.path`` as it is."""

    def find() -> Any:
        try:
            return importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None

    found = find()
    here = os.getcwd()
    if found is None and any(os.path.exists(os.path.join(here, top + end)) for end in ("", ".py")):
        add_import_folder(here)
        found = find()
    return found


def _check_module(name: str, spec: str) -> None:
    if not _DOTTED.match(name):
        raise UserError(
            f"{name!r} is not a module name (dotted identifiers) nor a .py file", key=spec
        )
    top = name.split(".")[0]
    if find_top(top) is None:
        raise UserError(
            f"module {top!r} is not importable here (neither in the working folder "
            f"{os.getcwd()} nor installed; install it, run from its folder, or give its "
            "file: PATH.py)",
            key=spec,
        )


def _check_file(path: Path, spec: str, what: str) -> str:
    if not path.is_file():
        raise UserError(f"{what} is not a file here", source=path, key=spec)
    return str(path.resolve())


def _parse_py(rest: str, spec: str) -> UserSpec:
    target, sep, factory = rest.rpartition(":")
    if not sep or not target or not _DOTTED.match(factory):
        raise UserError(
            "expected py:MODULE:FACTORY or py:PATH.py:FACTORY (FACTORY: a function in the "
            "module returning an Encoder)",
            key=spec,
        )
    if target.endswith(".py"):
        return UserSpec("py", _encoder_file(target, spec), factory)
    _check_module(target, spec)
    return UserSpec("py", target, factory)


def _encoder_file(target: str, spec: str) -> str:
    """An encoder's ``.py`` file, absolute, with its folder put first on the import path."""
    path = _check_file(Path(target), spec, "the encoder's .py file")
    add_import_folder(Path(path).parent)
    return path


def _parse_hear(rest: str, spec: str) -> UserSpec:
    module, sep, weights = rest.partition(":")
    if not module or (sep and not weights):
        raise UserError(
            "expected hear:MODULE, hear:PATH.py, hear:MODULE:WEIGHTS or hear:PATH.py:WEIGHTS",
            key=spec,
        )
    if module.endswith(".py"):
        module = _encoder_file(module, spec)
    else:
        _check_module(module, spec)
    path = _check_file(Path(weights), spec, "the HEAR model's weights") if weights else None
    return UserSpec("hear", module, weights=path)


def parse_user_spec(spec: str) -> UserSpec | None:
    """A ``py:`` or ``hear:`` spec (module docstring), checked without importing; None for
    any other spec. A malformed one is one line.

    >>> parse_user_spec("py:json:loads")
    UserSpec(format='py', target='json', factory='loads', weights=None, plugin=None)
    >>> parse_user_spec("hf:laion/clap") is None
    True
    """
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("py", "hear"):
        return None
    return _parse_py(rest, spec) if kind == "py" else _parse_hear(rest, spec)


def plugin_spec(name: str) -> UserSpec | None:
    """The installed encoder registered as ``name`` in :data:`ENTRY_POINT_GROUP`, or None."""
    found = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        return None
    ep = found[0]
    where = f"{ENTRY_POINT_GROUP}:{name}"
    match = re.fullmatch(r"\s*([\w.]+)\s*:\s*([\w.]+)\s*(\[.*\])?\s*", ep.value)
    if match is None or not _DOTTED.match(match[1]) or not _DOTTED.match(match[2]):
        dist = getattr(ep.dist, "name", None)
        raise UserError(
            f"the entry point's value is {ep.value!r}; expected MODULE:FACTORY (installed by "
            f"{dist or 'an unknown distribution'}: fix its entry_points, then reinstall it)",
            key=where,
        )
    parsed = _parse_py(f"{match[1]}:{match[2]}", where)
    return UserSpec("py", parsed.target, parsed.factory, plugin=name)


def plugin_names() -> list[str]:
    """The names of the installed encoder plugins."""
    return sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})


def _source_files(user: UserSpec) -> list[tuple[str, Path]]:
    """The source files of the encoder's code: the ``.py`` file, or every ``.py`` file of the
    module's top-level package (a single-file module: that file), found without importing."""
    if user.is_file:
        path = Path(user.target)
        return [(path.name, path)]
    found = importlib.util.find_spec(user.target.split(".")[0])
    if found is None:
        raise UserError("module is not importable here", key=user.target)
    roots = list(found.submodule_search_locations or [])
    if not roots:
        origin = Path(found.origin or "")
        return [(origin.name, origin)] if origin.is_file() else []
    files = []
    for root in sorted(roots):
        for path in sorted(Path(root).rglob("*.py")):
            if path.is_file():  # not an editor's lock (a dangling link ".#enc.py"), a FIFO
                files.append((path.relative_to(root).as_posix(), path))
    return files


def _distribution_version(user: UserSpec) -> tuple[str | None, str | None]:
    if user.is_file:
        return None, None
    dists = distributions_of(user.target.split(".")[0])
    if not dists:
        return None, None
    name = dists[0]
    try:
        return name, metadata.version(name)
    except metadata.PackageNotFoundError:
        return name, None


def _module_file(user: UserSpec) -> Path | None:
    """The file of the module the spec names (a package: its ``__init__.py``), found under its
    top-level package's folders without importing anything; None where there is none."""
    if user.is_file:
        return Path(user.target)
    top, *rest = user.target.split(".")
    found = importlib.util.find_spec(top)
    if found is None:
        return None
    roots = list(found.submodule_search_locations or [])
    if not roots:
        return Path(found.origin) if found.origin and not rest else None
    for root in roots:
        base = Path(root).joinpath(*rest)
        candidates = [base.with_suffix(".py")] if rest else []
        for path in (*candidates, base / "__init__.py"):
            if path.is_file():
                return path
    return None


def _own_roots(user: UserSpec) -> list[Path]:
    """The folders of the encoder's own top-level package (none for a file or a one-file
    module)."""
    if user.is_file:
        return []
    found = importlib.util.find_spec(user.target.split(".")[0])
    return [Path(p) for p in (found.submodule_search_locations or [])] if found else []


def wrapped_code(user: UserSpec) -> ImportedCode:
    """The code the encoder's module imports, by content (:func:`.codehash.imported_code`):
    local modules (a helper beside a ``py:`` file) by their bytes, each imported distribution
    by pip's ``RECORD`` (a wheel) or its files' content (an editable install), read without
    importing: an encoder that wraps another package (``audiorepro.models.resemblyzer`` over
    ``resemblyzer``) gets a new code identity when that package is reinstalled or edited."""
    path = _module_file(user)
    if path is None or not path.is_file():
        return {"local": {}, "distributions": {}, "missing": []}
    own = None if user.is_file else user.target.split(".")[0]
    first = path.parent if user.is_file else None
    return imported_code(path, first=first, own=own, own_roots=_own_roots(user))


def missing_imports(user: UserSpec) -> list[str]:
    """The top-level modules the encoder's own module imports (those inside functions too, not
    those under ``try``, which the module handles) that are not importable here, found
    without importing: the bundled ``resemblyzer`` entry's module is here, but without the
    ``resemblyzer`` package it cannot run (``list checkpoints`` says so)."""
    path = _module_file(user)
    if path is None or not path.is_file():
        return []
    tops: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Try):
            return
        if isinstance(node, ast.Import):
            tops.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_bytes(), filename=str(path)))
    own = None if user.is_file else user.target.split(".")[0]
    missing = []
    for top in sorted(tops - set(sys.stdlib_module_names) - {"__future__", own}):
        try:
            found = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            found = None
        if found is None:
            missing.append(top)
    return missing


def code_identity(user: UserSpec) -> dict[str, Any]:
    """The encoder's code as the cache key and the dump record it: the SHA-256 over its
    source files (``"relative path\\0bytes\\0"`` each, sorted), its distribution's name
    and version (None for a file or a module no distribution installed), and what its module
    imports (:func:`wrapped_code`): ``local`` modules by file, ``distributions`` by pip's
    ``RECORD`` or by content, and the imported names found nowhere (``missing``). Each part
    is recorded apart, so that two dumps' records name the file or distribution that
    changed."""
    digest = hashlib.sha256()
    files = _source_files(user)
    for rel, path in files:
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    package, version = _distribution_version(user)
    imported = wrapped_code(user)
    return {
        "source_sha256": digest.hexdigest(),
        "source_files": len(files),
        "package": package,
        "version": version,
        "local": imported["local"],
        "distributions": dict(imported["distributions"]),
        "missing": imported["missing"],
    }

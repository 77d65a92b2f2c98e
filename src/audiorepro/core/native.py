"""The compiled kernels of ``audiorepro trec-eval`` (``core/_trec.c``), loaded with ctypes.

They are C compiled ahead of time by the package's own build (``setup.py``: a setuptools
``Extension``, so a wheel is ``cp311-...-linux_x86_64`` and carries them): nothing is compiled
when a command runs, in a fresh install, a fresh container or a Slurm array task, and nothing
is written (no cache folder, a read-only image is enough). The library holds no Python object
and no ``Python.h``: plain buffers of int64, int32, float64 and bytes, which
:func:`pointer` hands over.

A source checkout run with ``PYTHONPATH=src`` has no wheel: there the library is built in
place the first time it is needed (``python setup.py build_ext --inplace``, the same flags as
the wheel's, under a file lock so that parallel test workers build it once) and rebuilt when
``_trec.c`` is newer than it. Where it can be neither found nor built (an install without
it, a checkout that is read-only or has no C compiler) the command stops with one line saying
how to get it. See docs/architecture.md ("Compiled kernels").
"""

from __future__ import annotations

import ctypes
import fcntl
import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiorepro.core.errors import UserError

if TYPE_CHECKING:  # no numpy at run time: trec-eval's numpy-free path loads this module too
    import numpy as np
    import numpy.typing as npt

#: The library's ``atr_abi()``: raised whenever a function's arguments change.
ABI_VERSION = 4
HERE = Path(__file__).resolve().parent
SOURCE = HERE / "_trec.c"
#: Every file the library is built from (a checkout rebuilds it when one is newer).
SOURCES = (SOURCE, HERE / "_trec_prefs.c", HERE / "_trec.h")
#: A checkout's build script (absent in an installed wheel).
SETUP = HERE.parent.parent.parent / "setup.py"
BUILD_HINT = (
    "reinstall audiorepro from its wheel (pip install audiorepro-*.whl), or in a source "
    "checkout build them with: python setup.py build_ext --inplace"
)

_LIB: ctypes.CDLL | None = None
#: A library's functions: name -> (result, arguments), as ctypes takes them.
SignatureMap = dict[str, tuple[Any, list[Any]]]

_P = ctypes.c_void_p
_I = ctypes.c_int64
_D = ctypes.c_double
#: Each function's (result, arguments); pointers are passed as integers (``pointer``).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "atr_abi": (_I, []),
    "atr_atol": (_I, [_P, _I, _I]),
    "atr_atof": (_D, [_P, _I, _I, _P, _P]),
    "atr_count_lines": (_I, [_P, _I]),
    "atr_scan": (None, [_P, _I, _I, _I, *[_P] * 9]),
    "atr_compare": (_I, [_P, _I, _I, _P, _I, _I]),
    "atr_sort_by_docno": (_I, [_P, _P, _P, _P, _I, _P, _P, _I]),
    "atr_rank_levels": (_I, [_P, _P, _P, _P, _P, _I, _P, _P, _P, _P, _P, _I, _I, _I, _P, _P]),
    "atr_group_order": (_I, [_P, _I, _P, _I, _P, _P, _P]),
    "atr_levels": (_I, [_P, _I, _D, _P]),
    "atr_class_pair": (None, [_P, _I, _I, _P, _I, _P, _I, _P]),
    "atr_pair_sums": (None, [_P, _I, _I, _P, _P]),
    # (run AtrTable*, judgements path, qrels_form, AtrMeasures*, AtrOptions*, AtrEval* out)
    "atr_prefs_evaluate": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int, _P, _P, _P]),
    "atr_prefs_free": (None, [_P]),
    # one query's codes, numbers and levels (nl, n, m) -> values, groups, pair sums, error
    "atr_prefs_query": (_I, [_P, _P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P]),
    "atr_evaluate": (
        _I,
        [*[_P] * 16, _I, _I, _I, _I, _I, _P, _I, _P, _I, _P, _I, _I, _I, _P, _P, _I, _P],
    ),
}


class AtrTable(ctypes.Structure):
    """``core/_trec.h``'s AtrTable: a read run or qrels (formats/trec_light.LightTable)."""

    _fields_ = [
        ("data", _P), ("size", _I), ("n", _I), ("doc_start", _P), ("doc_len", _P),
        ("value", _P), ("levels", _P), ("nq", _I), ("qids", ctypes.POINTER(ctypes.c_char_p)),
        ("start", _P), ("stop", _P), ("order", _P), ("tag", ctypes.c_char_p),
    ]  # fmt: skip


class AtrMeasures(ctypes.Structure):
    """``core/_trec.h``'s AtrMeasures: the chosen measures' columns and kernel plan."""

    _fields_ = [
        ("ncolumns", _I), ("names", ctypes.POINTER(ctypes.c_char_p)),
        ("owners", ctypes.POINTER(ctypes.c_char_p)), ("count", _P), ("geometric", _P),
        ("nrows", _I), ("rows", _P), ("nparams", _I), ("params", _P), ("npairs", _I),
        ("pairs", _P), ("relstring", _I),
    ]  # fmt: skip


class AtrEval(ctypes.Structure):
    """``core/_trec.h``'s AtrEval: per-query values (nq x ncolumns) and the all line."""

    _fields_ = [
        ("run_id", ctypes.c_char_p), ("nq", _I), ("qids", ctypes.POINTER(ctypes.c_char_p)),
        ("ncolumns", _I), ("names", ctypes.POINTER(ctypes.c_char_p)),
        ("owners", ctypes.POINTER(ctypes.c_char_p)), ("count", _P),
        ("values", ctypes.POINTER(_D)), ("summary", ctypes.POINTER(_D)),
        ("relstrings", ctypes.POINTER(ctypes.c_char_p)),
    ]  # fmt: skip


class AtrOptions(ctypes.Structure):
    """``core/_trec.h``'s AtrOptions: a plain trec-eval command line's options."""

    _fields_ = [
        ("per_query", ctypes.c_int), ("complete", ctypes.c_int), ("no_summary", ctypes.c_int),
        ("judged_only", ctypes.c_int), ("max_ret", _I), ("level", _I), ("num_docs", _I),
        ("only_query", ctypes.c_char_p),
    ]  # fmt: skip


def library_path() -> Path | None:
    """The compiled library beside this module, if there is one."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = HERE / f"_trec{suffix}"
        if path.is_file():
            return path
    return None


def _stale(path: Path | None) -> bool:
    """Missing, or (in a source checkout only: an installed wheel's library is never rebuilt)
    older than its source."""
    if path is None:
        return True
    checkout = HERE.parent.parent.name == "src" and SETUP.is_file() and SOURCE.is_file()
    newest = max(source.stat().st_mtime for source in SOURCES if source.is_file())
    return checkout and newest > path.stat().st_mtime


def _build_in_place() -> None:
    """``python setup.py build_ext --inplace`` in a source checkout, once for every process
    that asks at the same time (a lock file beside the library)."""
    checkout = HERE.parent.parent.name == "src" and SETUP.is_file() and SOURCE.is_file()
    if not checkout or not os.access(HERE, os.W_OK):
        return
    with open(HERE / ".trec-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _stale(library_path()):
            return
        subprocess.run(
            [sys.executable, str(SETUP), "-q", "build_ext", "--inplace"],
            cwd=SETUP.parent,
            capture_output=True,
            check=False,
            timeout=300,
        )


def build_in_place(program: str) -> None:
    """Build the native trec-eval program (``program``, beside this module) in a source
    checkout, with the kernels (``setup.py build_ext --inplace`` builds both), under the same
    lock as the library: parallel first calls build it once. Nothing where the checkout is not
    writable or the build fails: the caller then takes the Python path."""
    checkout = HERE.parent.parent.name == "src" and SETUP.is_file() and SOURCE.is_file()
    if not checkout or not os.access(HERE, os.W_OK):
        return
    names = ("_trec.c", "_trec_main.c", "_trec_prefs.c", "_trec.h")
    sources = [HERE / name for name in names if (HERE / name).is_file()]
    with open(HERE / ".trec-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            built = Path(program).stat().st_mtime
            if built >= max(s.stat().st_mtime for s in sources):
                return  # built by another process while this one waited
        except OSError:
            pass
        subprocess.run(
            [sys.executable, str(SETUP), "-q", "build_ext", "--inplace"],
            cwd=SETUP.parent, capture_output=True, check=False, timeout=300,
        )  # fmt: skip


def library() -> ctypes.CDLL:
    """The loaded kernels (built in place first in a source checkout; see the module)."""
    global _LIB
    if _LIB is not None:
        return _LIB
    path = library_path()
    if _stale(path):
        _build_in_place()
        path = library_path()
    if path is None:
        raise UserError(f"the compiled trec-eval kernels (audiorepro/core/_trec*.so) are "
                        f"missing; {BUILD_HINT}")  # fmt: skip
    lib = _load(path, "trec-eval kernels")
    for name, (result, arguments) in SIGNATURES.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = result, arguments
    if lib.atr_abi() != ABI_VERSION:
        raise UserError(f"the compiled trec-eval kernels ({path}) are from another version "
                        f"of audiorepro; {BUILD_HINT}")  # fmt: skip
    _LIB = lib
    return lib


def _load(path: Path, what: str) -> ctypes.CDLL:
    """``ctypes.CDLL(path)``, or one line saying why it cannot be loaded: a package on a
    ``noexec`` mount (no library there can be mapped executable), a truncated or foreign
    file. Nothing is copied elsewhere to get round it (a command writes no cache)."""
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        reason = str(exc).removeprefix(f"{path}: ")
        raise UserError(
            f"the compiled {what} ({path}) cannot be loaded: {reason} (a file system mounted "
            f"noexec cannot run them: install audiorepro where programs may run); {BUILD_HINT}"
        ) from None


def pointer(array: npt.NDArray[Any], dtype: type[np.generic], keep: list[Any]) -> int:
    """The address of ``array`` as a C-contiguous array of ``dtype`` (converted when it is
    not; the converted copy is kept alive in ``keep`` until the call returns). By the array's
    own methods: this module imports no numpy (``np.ascontiguousarray`` does the same)."""
    same = array.flags.c_contiguous and array.dtype == dtype
    held = array if same else array.astype(dtype, order="C")
    keep.append(held)
    address: int = held.ctypes.data
    return address


class CompiledKernels:
    """Another compiled library of the package (a plain C source beside its loader, built by
    ``setup.py`` as a setuptools ``Extension``), found, built in place in a checkout and
    loaded as the trec-eval kernels are (see the module): ``stem`` names the source
    (``HOME/STEM.c``) and the library (``HOME/STEM*.so``)."""

    def __init__(
        self, home: Path, stem: str, what: str, abi: tuple[str, int], signatures: SignatureMap
    ) -> None:
        self.home, self.stem, self.what, self.abi, self.signatures = (
            home, stem, what, abi, signatures,
        )  # fmt: skip
        self.source = home / f"{stem}.c"
        self._lib: ctypes.CDLL | None = None

    def path(self) -> Path | None:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = self.home / f"{self.stem}{suffix}"
            if path.is_file():
                return path
        return None

    def _checkout(self) -> bool:
        return self.home.parent.parent.name == "src" and SETUP.is_file() and self.source.is_file()

    def _stale(self, path: Path | None) -> bool:
        if path is None:
            return True
        return self._checkout() and self.source.stat().st_mtime > path.stat().st_mtime

    def _build(self) -> None:
        if not self._checkout() or not os.access(self.home, os.W_OK):
            return
        with open(self.home / f".{self.stem.strip('_')}-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._stale(self.path()):
                subprocess.run(
                    [sys.executable, str(SETUP), "-q", "build_ext", "--inplace"],
                    cwd=SETUP.parent, capture_output=True, check=False, timeout=300,
                )  # fmt: skip

    def library(self) -> ctypes.CDLL:
        """The loaded library (built in place first in a source checkout)."""
        if self._lib is not None:
            return self._lib
        if self._stale(self.path()):
            self._build()
        path = self.path()
        relative = f"audiorepro/{self.home.name}/{self.stem}*.so"
        if path is None:
            raise UserError(f"the compiled {self.what} ({relative}) are missing; {BUILD_HINT}")
        lib = _load(path, self.what)
        for name, (result, arguments) in self.signatures.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = result, arguments
        if getattr(lib, self.abi[0])() != self.abi[1]:
            raise UserError(f"the compiled {self.what} ({path}) are from another version of "
                            f"audiorepro; {BUILD_HINT}")  # fmt: skip
        self._lib = lib
        return lib

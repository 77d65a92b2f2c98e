"""The output folder model: one run at a time, staged inside OUT, published whole.

Everything a run needs besides its outputs lives in one hidden folder inside OUT,
:data:`AREA` (``OUT/.audiorepro-run``), which ``verify`` and the manifest ignore. Staging
there, on OUT's own file system, is what makes OUT a valid mount point (``apptainer --bind
"$PWD/out":/out``) or a folder in a read-only parent: every rename of a publication stays
inside one file system, and nothing is ever written beside OUT.

- **One run per OUT.** A run holds an exclusive lock (``fcntl.flock``) on ``AREA/lock`` from
  before its first write into OUT until after publication; a second run meets it and stops
  with one line naming the holder's process id (exit 2). The kernel releases the lock of a
  process that dies, so a killed run's lock never blocks the next one; the lock file records
  the holder's pid for that message only.
- **Staging is never shared.** Each run stages into its own ``AREA/staging-XXXX`` (a fresh
  temporary folder). A run holding the lock knows every other staging folder there is a dead
  run's leftover and removes it.
- **Publication is a journaled swap.** When every study has written its outputs and the
  top-level manifest (covering the nested studies' files) has been written last, the run
  writes ``AREA/journal.json`` (the names it will remove and add), renames each top-level
  entry its previous run published into ``AREA/old-XXXX`` and each new top-level entry from
  staging into OUT, then deletes the journal and the old entries. A publication that fails
  midway is undone at once (the previous outputs put back); one killed midway (SIGKILL, power)
  leaves the journal, ``verify`` refuses the folder with one line, and the next run rolls it
  back before anything else. So a run killed at any moment leaves OUT's outputs as they were,
  and a finished run replaces them whole: a table an earlier version of the study wrote
  cannot survive a rerun.

What belongs to OUT: the files its top-level manifest lists (the nested studies' manifests and
files among them) and the manifest itself, plus the folders that belong to no run, :data:`KEPT`
(the extraction cache, Slurm's logs), and :data:`AREA`. Anything else is *foreign* (a user's
file, a FIFO, another run's output folder such as ``OUT/sub`` with its own manifest): a run
refuses to start while OUT holds one (exit 2, naming it), and checks again before it
publishes, rather than deleting it or certifying it as an output; ``verify OUT`` fails on one.
A rerun thus removes only what its own previous run wrote.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from typing_extensions import TypedDict

from audiorepro.core.errors import UserError, WriteError
from audiorepro.core.io import atomic_write_bytes, json_dumps
from audiorepro.specs.records import ManifestRecord, read_record

#: Top-level folders of OUT that no run publishes and none removes.
KEPT = ("cache", "slurm")
#: The hidden folder inside OUT that holds the lock, the staging folders and the journal.
AREA = ".audiorepro-run"
#: Top-level names of OUT that are never outputs.
NOT_OUTPUTS = (*KEPT, AREA)

#: Processes holding a claim on an OUT (its real path -> depth): nested claims of one process
#: (``reproduce`` around ``run_studies``) share one lock.
_HELD: dict[str, int] = {}
#: The signed attestation (``audiorepro sign``): covers the run's files, so it is none of them.
ATTESTATION = "attestation.intoto.json"


class Journal(TypedDict):
    """``AREA/journal.json``: a publication in progress (what :func:`recover` undoes)."""

    staging: str  #: the staging folder's name in AREA
    old: str  #: where the previous entries go, in AREA
    remove: list[str]  #: top-level names of OUT moved to ``old``
    add: list[str]  #: top-level names moved from ``staging`` into OUT


def _folder_error(exc: OSError, folder: Path, doing: str) -> WriteError:
    """One true line for a folder that refuses: which folder, and why."""
    why = {
        errno.EROFS: "is on a read-only file system",
        errno.EACCES: "is not writable by this user (permission denied)",
        errno.EPERM: "is not writable by this user (operation not permitted)",
        errno.EXDEV: "is on another file system than the output folder (a mount point inside it?)",
        errno.EBUSY: "is a mount point (busy)",
    }.get(exc.errno or 0, f"cannot be used ({(exc.strerror or str(exc)).lower()})")
    return WriteError(f"{why}, so {doing}", source=folder)


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _make_out(out: Path) -> bool:
    """Create OUT (and its parents) when missing; returns whether it was created."""
    if out.exists() and not out.is_dir():
        raise UserError("is not a folder; expected an output folder (--out)", source=out)
    if out.is_dir():
        return False
    at_fault = _first_existing(out.parent)
    try:
        out.mkdir(parents=True)
    except FileExistsError:
        return False  # another run created it meanwhile: the lock decides
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise _folder_error(
                exc,
                at_fault,
                f"the output folder {out} cannot be created in it; create it "
                "elsewhere and bind it there, or choose another --out",
            ) from None
        raise UserError(
            f"cannot be created ({exc.strerror}); expected a writable folder (--out)", source=out
        ) from None
    return True


def _lock(out: Path) -> int:
    """The exclusive lock of a run on OUT (an open fd of ``AREA/lock``)."""
    area = out / AREA
    while True:
        try:
            area.mkdir(exist_ok=True)
            fd = os.open(area / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _folder_error(
                exc,
                out,
                "a run cannot write its outputs there; expected a writable output folder (--out)",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UserError(
                f"another audiorepro run{_holder(area / 'lock')} is writing this output folder; "
                "wait for it to finish or choose another --out",
                source=out,
            ) from None
        except OSError as exc:  # a file system without locks: say so, run unguarded
            print(
                f"audiorepro: note: {out}: cannot be locked ({exc.strerror}); make sure no "
                "other run writes into it meanwhile",
                file=sys.stderr,
            )
            return fd
        # The file may have been unlinked by the run that held it before us: lock the file
        # that is there now, or another run could lock a new one beside ours.
        try:
            same = os.fstat(fd).st_ino == os.stat(area / "lock").st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def _holder(lock: Path) -> str:
    try:
        pid = lock.read_text().strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""


def _unlock(out: Path, fd: int) -> None:
    area = out / AREA
    with contextlib.suppress(OSError):
        os.unlink(area / "lock")  # still holding it: nobody can have locked this file
    os.close(fd)
    with contextlib.suppress(OSError):
        area.rmdir()  # only when empty


@contextlib.contextmanager
def claim(out: Path) -> Iterator[None]:
    """Hold OUT for one run: create it if needed, take the lock, undo an interrupted
    publication and remove dead runs' staging folders. A run that fails leaves an OUT it
    created removed again."""
    key = os.path.realpath(out)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    created = _make_out(out)
    try:
        fd = _lock(out)
    except BaseException:
        if created:
            _unmake(out)
        raise
    _HELD[key] = 1
    try:
        recover(out)
        for leftover in sorted((out / AREA).glob("staging-*")) + sorted((out / AREA).glob("old-*")):
            shutil.rmtree(leftover, ignore_errors=True)
        yield
    except BaseException:
        if created:
            _unmake(out, fd)
            fd = -1
        raise
    finally:
        del _HELD[key]
        if fd >= 0:
            _unlock(out, fd)


def _unmake(out: Path, fd: int | None = None) -> None:
    """Remove an OUT this run created, when nothing but the run's own area is in it."""
    shutil.rmtree(out / AREA, ignore_errors=True)
    if fd is not None:
        os.close(fd)
    with contextlib.suppress(OSError):
        out.rmdir()


def run_files(out: Path) -> list[str]:
    """Every file under ``out`` a run may have written (relative POSIX paths, sorted): all
    but the top-level manifest and attestation and the :data:`NOT_OUTPUTS` folders. A FIFO,
    socket or device counts: it is never an output, so it must show (as foreign)."""
    files = []
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if rel in ("manifest.json", ATTESTATION) or rel.split("/", 1)[0] in NOT_OUTPUTS:
            continue
        if path.is_symlink() or not path.is_dir():
            files.append(rel)
    return files


def listed_files(out: Path) -> set[str]:
    """What the previous run published in ``out``: its top-level manifest's outputs (the
    nested studies' manifests and files among them) and that manifest. A manifest that cannot
    be read, or a symbolic link, lists nothing (OUT's files are then foreign). The attestation
    counts as the previous run's too, so a rerun never leaves a stale signature behind."""
    manifest = out / "manifest.json"
    if manifest.is_symlink() or not manifest.is_file():
        return set()
    try:
        record, _ = read_record(manifest, ManifestRecord)
    except UserError:
        return set()
    assert isinstance(record, ManifestRecord)
    return {"manifest.json", ATTESTATION, *record.outputs}


def check_out(out: Path) -> None:
    """Refuse an OUT a run cannot publish to (exit 2), before any work: not a folder, not
    creatable, or holding files its previous run did not write."""
    if out.exists() and not out.is_dir():
        raise UserError("is not a folder; expected an output folder (--out)", source=out)
    if not out.is_dir():
        return  # :func:`claim` creates it, or says which folder refuses
    listed = listed_files(out)
    foreign = [rel for rel in run_files(out) if rel not in listed]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise UserError(
            f"holds {foreign[0]}{more}, which its previous audiorepro run did not write; move "
            "it away or choose another --out (a run replaces its folder whole and certifies "
            "only what it wrote)",
            source=out,
        )


def new_staging(out: Path) -> Path:
    """A fresh staging folder of this run, inside OUT's :data:`AREA` (claimed by
    :func:`claim`): on OUT's file system, never shared with another run."""
    try:
        (out / AREA).mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="staging-", dir=out / AREA))
    except OSError as exc:
        raise _folder_error(exc, out, "a run cannot stage its outputs there") from None


def _entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def publish(staging: Path, out: Path) -> None:
    """Replace OUT's previous outputs by ``staging``'s, keeping :data:`KEPT` (the journaled
    swap of the module docstring). The previous run's top-level entries are removed; nothing
    else in OUT is touched (OUT is checked again for foreign files first)."""
    check_out(out)
    new = sorted(_entries(staging))
    previous = {rel.split("/", 1)[0] for rel in listed_files(out)}
    present = _entries(out) - set(NOT_OUTPUTS)
    remove = sorted((previous | set(new)) & present)
    old = Path(tempfile.mkdtemp(prefix="old-", dir=out / AREA))
    journal: Journal = {"staging": staging.name, "old": old.name, "remove": remove, "add": new}
    atomic_write_bytes(out / AREA / "journal.json", json_dumps(journal).encode())
    try:
        for name in remove:
            _rename(out / name, old / name, out)
        for name in new:
            _rename(staging / name, out / name, out)
    except BaseException as failure:
        try:
            recover(out)
        except UserError:
            raise _publish_failed(failure, out, undone=False) from None
        if isinstance(failure, UserError):
            raise _publish_failed(failure, out, undone=True) from None
        raise
    os.unlink(out / AREA / "journal.json")
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)


def _rename(src: Path, dst: Path, out: Path) -> None:
    try:
        os.rename(src, dst)
    except OSError as exc:
        folder = src if exc.errno in (errno.EXDEV, errno.EBUSY) else src.parent
        raise _folder_error(exc, folder, f"the run cannot be published into {out}") from None


def _publish_failed(failure: BaseException, out: Path, *, undone: bool) -> WriteError:
    if undone:
        return WriteError(f"{failure}; publication was undone: {out} holds its previous outputs")
    return WriteError(
        f"{failure}; publication could not be undone yet: the next run into {out} restores its "
        f"previous outputs ({AREA}/journal.json)"
    )


def recover(out: Path) -> None:
    """Undo a publication that did not finish (``AREA/journal.json``): every new entry back
    to its staging folder, every previous entry back into OUT. Safe to repeat after being
    interrupted itself; a no-op without a journal."""
    path = out / AREA / "journal.json"
    if not path.exists():
        return
    journal = _read_journal(path)
    staging, old = out / AREA / journal["staging"], out / AREA / journal["old"]
    try:
        staging.mkdir(exist_ok=True)
        for name in journal["add"]:
            new_moved = not (staging / name).exists() and not (staging / name).is_symlink()
            old_moved = name not in journal["remove"] or (old / name).exists()
            if new_moved and old_moved and ((out / name).exists() or (out / name).is_symlink()):
                os.rename(out / name, staging / name)
        for name in journal["remove"]:
            if (old / name).exists() or (old / name).is_symlink():
                os.rename(old / name, out / name)
        os.unlink(path)
    except OSError as exc:
        raise _folder_error(exc, out, "an interrupted publication cannot be undone") from None
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def _read_journal(path: Path) -> Journal:
    """The journal a run wrote; names are checked to be plain entries of OUT and AREA (a
    crafted journal must not move anything elsewhere)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        data = None

    def name_ok(n: object) -> bool:
        return isinstance(n, str) and n not in ("", ".", "..") and "/" not in n and "\0" not in n

    ok = isinstance(data, dict) and set(data) == {"staging", "old", "remove", "add"}
    ok = ok and all(name_ok(data[k]) for k in ("staging", "old"))
    ok = ok and all(
        isinstance(data[k], list) and all(map(name_ok, data[k])) for k in ("remove", "add")
    )
    if not ok or data["staging"][:8] != "staging-" or data["old"][:4] != "old-":
        raise UserError(
            "is not a publication journal audiorepro wrote; expected staging, old, remove and "
            "add naming entries of the output folder",
            source=path,
        )
    journal: Journal = data
    return journal


def publication_state(out: Path) -> str | None:
    """Why ``verify`` cannot read OUT now, or None: a publication in progress (the lock is
    held) or interrupted (a journal with no run holding the lock)."""
    if not (out / AREA / "journal.json").exists():
        return None
    try:
        fd = os.open(out / AREA / "lock", os.O_RDONLY)
    except OSError:
        held = False
    else:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held = False
        except OSError:
            held = True
        finally:
            os.close(fd)
    if held:
        return "is being published by a run right now; verify it again when that run has finished"
    return (
        "holds an interrupted publication (.audiorepro-run/journal.json); run reproduce "
        "into it again, which restores the previous outputs first"
    )


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)

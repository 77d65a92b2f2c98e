"""The output folder model: a run is staged, then published whole.

A run (every study of it, the nested ones too) writes into a staging folder next to OUT,
``.<OUT name>.staging``. Only when every study has written its outputs, and the top-level
manifest has been written last (covering the nested studies' files), is the staging folder
renamed to OUT. A run killed midway therefore leaves OUT as it was; the previous outputs are
replaced whole, so a table an earlier version of the study wrote cannot survive a rerun.

What belongs to OUT: the files its manifest lists (and the manifests themselves), plus the
folders that belong to no run, :data:`KEPT` (the extraction cache, Slurm's logs). Anything else
is *foreign*: a run refuses to start while OUT holds a foreign file (exit 2, naming it), rather
than deleting it or certifying it as an output, and ``verify OUT`` fails on one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from audiorepro.core.errors import UserError, write_error
from audiorepro.specs.records import ManifestRecord, read_record

#: Top-level folders of OUT that no run publishes and none removes.
KEPT = ("cache", "slurm")
#: The signed attestation (``audiorepro sign``): covers the run's files, so it is none of them.
ATTESTATION = "attestation.intoto.json"


def staging_path(out: Path) -> Path:
    return out.parent / f".{out.name}.staging"


def run_files(out: Path) -> list[str]:
    """Every file under ``out`` a run may have written (relative POSIX paths, sorted): all
    but the top-level manifest and attestation and the :data:`KEPT` folders."""
    files = []
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if rel in ("manifest.json", ATTESTATION) or rel.split("/", 1)[0] in KEPT:
            continue
        if path.is_file() or path.is_symlink():
            files.append(rel)
    return files


def listed_files(out: Path) -> set[str]:
    """What earlier runs published in ``out``: every manifest's outputs, and the manifests.
    A manifest that cannot be read lists nothing (its folder's files are then foreign)."""
    listed: set[str] = set()
    for manifest in sorted(out.rglob("manifest.json")):
        rel_dir = manifest.parent.relative_to(out).as_posix()
        if rel_dir.split("/", 1)[0] in KEPT:
            continue
        prefix = "" if rel_dir == "." else rel_dir + "/"
        try:
            record, _ = read_record(manifest, ManifestRecord)
        except UserError:
            continue
        assert isinstance(record, ManifestRecord)
        listed.add(prefix + "manifest.json")
        listed.update(prefix + rel for rel in record.outputs)
    return listed


def check_out(out: Path) -> None:
    """Refuse an OUT a run cannot publish to (exit 2), before any work: not a folder, not
    creatable, or holding files no audiorepro run wrote."""
    if out.exists() and not out.is_dir():
        raise UserError("is not a folder; expected an output folder (--out)", source=out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot be created ({exc.strerror}); expected a writable folder (--out)",
            source=out,
        ) from None
    if not out.is_dir():
        return
    listed = listed_files(out)
    foreign = [rel for rel in run_files(out) if rel not in listed]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise UserError(
            f"holds {foreign[0]}{more}, which no audiorepro run wrote; move it away or choose "
            "another --out (a run replaces its folder whole and certifies only what it wrote)",
            source=out,
        )


def new_staging(out: Path) -> Path:
    """An empty staging folder for ``out`` (a leftover of a killed run is discarded)."""
    staging = staging_path(out)
    try:
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
    except OSError as exc:
        raise UserError(
            f"cannot be written ({exc.strerror}); expected a writable folder (--out)", source=out
        ) from None
    return staging


def publish(staging: Path, out: Path) -> None:
    """Replace ``out`` by ``staging``, keeping OUT's :data:`KEPT` folders.

    Two renames on one file system; between them OUT is absent for an instant, never half
    written. The previous outputs (checked to be outputs by :func:`check_out`) are removed.
    """
    old = out.parent / f".{out.name}.old"
    try:
        if old.exists():
            shutil.rmtree(old)
        if out.exists():
            for name in KEPT:
                if (out / name).exists():
                    os.replace(out / name, staging / name)
            os.replace(out, old)
        os.replace(staging, out)
    except OSError as exc:
        raise write_error(exc, out) from None
    shutil.rmtree(old, ignore_errors=True)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)

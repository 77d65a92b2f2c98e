"""The ``[[cell]]`` checks that the kinds of embedding cells share (linear probe, speaker
verification: a cell is a dump or an extraction, its files hashed, its id unique, its published
values of one profile), so that each kind's spec states only what is its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.metrics.retrieval import TiePolicy
from audiorepro.specs.schema import distinct_file_names
from audiorepro.specs.study import HasId, Published, check_tolerance


def dump_or_extract(
    dump: str | None, sha256: str | None, extract: bool, source: Path, where: str
) -> None:
    """A cell's embeddings come from exactly one of a dump (with its SHA-256) or an
    extraction, or one line naming the key."""
    if (dump is None) == (not extract):
        raise UserError(
            "give exactly one of 'dump' (with 'sha256') or 'extract'",
            source=source,
            key=f"{where}.dump",
        )
    if (dump is None) != (sha256 is None):
        raise UserError(
            "is missing; 'dump' and 'sha256' go together",
            source=source,
            key=f"{where}.{'sha256' if sha256 is None else 'dump'}",
        )


def check_hashes(
    files: Sequence[tuple[Path | None, str | None, str]], source: Path, where: str
) -> None:
    """Each file that is here has the SHA-256 the study states, or one line naming the key."""
    for path, digest, key in files:
        if path is not None and path.is_file() and sha256_file(path) != digest:
            raise UserError(
                f"{path.name} has SHA-256 {sha256_file(path)}, the study expects {digest}",
                source=source,
                key=f"{where}.{key}",
            )


class PublishedTable(Protocol):
    """A ``[[published]]`` table of a kind whose values belong to one cell and one profile
    (linear probe, speaker verification): what :func:`cell_published` reads."""

    @property
    def cell(self) -> str: ...
    @property
    def tolerance(self) -> float: ...
    @property
    def provenance(self) -> str: ...
    @property
    def values(self) -> Mapping[str, float]: ...


_IdSpec = TypeVar("_IdSpec", bound=HasId)
_CellT = TypeVar("_CellT")


def unique_cells(
    source: Path, specs: Sequence[_IdSpec], make: Callable[[_IdSpec, int], _CellT]
) -> list[_CellT]:
    """Each ``[[cell]]`` of a study made by ``make`` (with its index); an id given twice, or
    two ids that would name one output file, is one line naming the key."""
    seen: set[str] = set()
    cells = []
    for i, c in enumerate(specs):
        if c.id in seen:
            raise UserError(f"repeats cell id {c.id!r}", source=source, key=f"cell[{i}].id")
        seen.add(c.id)
        cells.append(make(c, i))
    distinct_file_names(
        [(f"cell[{i}].id", c.id) for i, c in enumerate(specs)], source=str(source), what="a cell id"
    )
    return cells


def cell_published(
    source: Path,
    specs: Sequence[PublishedTable],
    cells: set[str],
    metric_problem: Callable[[str], str | None],
    profile: str,
    tie_policy: TiePolicy,
) -> tuple[Published, ...]:
    """Each ``[[published]]`` table of a study of cells: a cell of the study, metrics the kind
    computes (``metric_problem`` says why not), a tolerance that means something."""
    published = []
    for i, p in enumerate(specs):
        where = f"published[{i}]"
        if p.cell not in cells:
            raise UserError(
                f"names {p.cell!r}, which is not a cell of this study",
                source=source,
                key=f"{where}.cell",
            )
        for metric in p.values:
            problem = metric_problem(metric)
            if problem is not None:
                raise UserError(problem, source=source, key=f"{where}.values.{metric}")
        check_tolerance(dict(p.values), p.tolerance, source=source, where=where)
        values = dict(p.values)
        published.append(Published(p.cell, profile, tie_policy, p.tolerance, p.provenance, values))
    return tuple(published)

"""The records of an output folder that ``audiorepro verify OUT`` reads back:
``verification.json`` and ``manifest.json``.

They were written by a run, but a folder handed to an auditor is user input like any other:
a malformed record is one line (file, key, what was expected), exit 2, never a traceback or a
pass. Only the keys ``verify`` relies on are declared; the rest is the runner's business.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.specs.schema import Spec, validate

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="64 lowercase hex digits")]


class Record(Spec):
    """A record table: the declared keys are checked, other keys are left to the runner."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class ValueRowRecord(Record):
    cell: str
    metric: str
    published: float | None = Field(description="a number or null")
    reproduced: float | None = Field(description="a number or null")
    delta: float | None = Field(description="a number or null")
    tolerance: float = Field(description="a number")
    status: Literal["PASS", "FAIL", "NOT VERIFIED"]
    reason: str | None = Field(description="a string or null")
    provenance: str | None = None


class GoldenRecord(Record):
    rows: list[ValueRowRecord] = Field(description="a list of value rows")


class VerificationRecord(Record):
    """``verification.json`` of either study kind."""

    failures: list[str] = Field(description="a list of strings")
    golden: GoldenRecord
    #: Retrieval studies only.
    metric_parity_passed: bool | None = Field(None, description="true or false")
    #: Probe studies only.
    probe_complete: bool | None = Field(None, description="true or false")


def safe_relative(path: str) -> str:
    """``path`` if it names a file inside the folder (relative, POSIX, no ``..``); else a
    ValueError.

    >>> safe_relative("tables/parity.csv")
    'tables/parity.csv'
    >>> safe_relative("../etc/passwd")
    Traceback (most recent call last):
    ...
    ValueError: output path '../etc/passwd' leaves the folder; expected a relative path inside it
    """
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or "\\" in path or ".." in parts or "." in parts:
        raise ValueError(
            f"output path {path!r} leaves the folder; expected a relative path inside it"
        )
    return path


class ManifestRecord(Record):
    """``manifest.json``: the outputs a run wrote, by relative path."""

    outputs: dict[str, Sha256Hex] = Field(description="a table of relative path -> SHA-256")

    @field_validator("outputs")
    @classmethod
    def _paths(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value:
            safe_relative(path)
        return value


class PartRecord(Record):
    """``part_json`` of a dump part (``extract --shard``), as ``merge`` reads it."""

    kind: str = Field(description="the part kind")
    shard: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=2, max_length=2, description="[i, n]: shard i of n"
    )
    meta: dict[str, Any] = Field(description="a table: the extraction's metadata")
    audio_range: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=2, max_length=2, description="[start, stop] of the part's clips"
    )
    text_range: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=2, max_length=2, description="[start, stop] of the part's captions"
    )


def read_record(path: Path, model: type[Record]) -> tuple[Record, dict[str, Any]]:
    """A record file: the validated model and the raw document, or a UserError naming it."""
    text = read_text(path, what="a JSON record")  # a FIFO, a folder or a huge file: refused
    data = parse_json(text, source=path)  # duplicate keys, huge integers, deep nesting: refused
    if not isinstance(data, dict):
        raise UserError(f"is a JSON {type(data).__name__}; expected an object", source=path)
    return validate(model, data, source=str(path)), data

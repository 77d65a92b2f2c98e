"""The outputs every study kind writes besides its tables and manifest: ``verification.json``,
``report.html`` and ``bundle.json.gz`` (sorted keys, gzip with no name and mtime 0), and their
typed records.

Each bundle shape has its own schema id: :data:`RETRIEVAL_BUNDLE` and :data:`PROBE_BUNDLE`
(JSON Schemas in ``docs/schemas/``); the records of each kind live with it
(``runner/kinds/<kind>/``), those two kinds' in their ``records.py``.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Final, NotRequired

from typing_extensions import TypedDict

from audiorepro.core.io import atomic_write_bytes, json_dumps

RETRIEVAL_BUNDLE: Final = "audiorepro.bundle/1"
PROBE_BUNDLE: Final = "audiorepro.probe-bundle/1"


# The probe kind's parity row stays here: another ``ParityCell`` exists, so the JSON Schemas
# name this one by its module, and a move would rename a published schema definition.
class ParityCell(TypedDict):
    """One saved probe number against the number recomputed from the same run's predictions."""

    run: str
    split: str
    metric: str  #: the recomputed report path (``regression/valence/mae``)
    saved: float | None
    recomputed: float | None
    abs_delta: float | None  #: None when either side is undefined
    tolerance: float  #: 0 for counts: they must match exactly
    passed: bool


class Outcome(TypedDict):
    """What a run says to its caller: passed, and why not."""

    passed: bool
    failures: list[str]
    #: Slurm array tasks failed: nothing was computed (the failures name the tasks).
    executor_failed: NotRequired[bool]


class BootstrapRecord(TypedDict):
    resamples: int
    seed: int
    level: float


def write_outputs(
    out: Path,
    verification: Mapping[str, object],
    report_html: str,
    bundle: Mapping[str, object],
) -> None:
    """The three outputs every study kind writes besides its tables and manifest."""
    atomic_write_bytes(out / "verification.json", json_dumps(verification).encode())
    atomic_write_bytes(out / "report.html", report_html.encode())
    atomic_write_bytes(out / "bundle.json.gz", gzip_bytes(json_dumps(bundle).encode()))


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no name and mtime 0: the bytes depend only on ``data``."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()

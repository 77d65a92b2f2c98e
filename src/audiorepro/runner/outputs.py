"""The outputs every study kind writes besides its tables and manifest: ``verification.json``,
``report.html`` and ``bundle.json.gz`` (sorted keys, gzip with no name and mtime 0)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

from audiorepro.core.io import atomic_write_bytes, json_dumps

BUNDLE_SCHEMA = "audiorepro.bundle/1"


def write_outputs(
    out: Path, verification: dict[str, Any], report_html: str, bundle: dict[str, Any]
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

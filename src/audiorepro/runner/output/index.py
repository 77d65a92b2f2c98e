"""``README.txt``: the short index of an output folder, saying what each top-level entry is.

Written by every study kind just before its manifest (:func:`.manifest.write_manifest`), so
the manifest lists it and ``verify`` checks it like any output. Deterministic: it names the
study and the entries the run wrote, never a time, a host or OUT's path. Entries no run
writes into staging (the manifest, written after it; the attestation; ``cache/``; ``slurm/``)
have a fixed line each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audiorepro.core.io import atomic_write_bytes
from audiorepro.runner.output.publish import ATTESTATION

INDEX = "README.txt"

#: What each top-level entry a study writes is (a name not here is "an output of the study").
WRITTEN = {
    "report.html": "the report, one self-contained file: the verdict first, then the "
    "published values against the reproduced ones, the tables and plots (open it in a browser)",
    "verification.json": "every check with its outcome: what `audiorepro verify` re-reads",
    "bundle.json.gz": "every computed number at full precision, canonical JSON (gzip, no "
    "timestamps): what `audiorepro diff` compares",
    "tables": "the report's tables, each as CSV, Markdown and LaTeX",
    "dumps": "the embeddings the study computed (audiorepro dumps, .npz)",
    "measurements": "the measurements the study recomputed, per run",
    "probe": "a nested study (the demo's probe study), an output folder of its own with its "
    "own README.txt",
    INDEX: "this index",
}
#: Entries that are there after the run, but are not written by the study itself.
AROUND = (
    (
        "manifest.json",
        "SHA-256 of every input and output, with the environment, time and host "
        "(the one file that differs between two runs of the same study)",
    ),
    (ATTESTATION, "when signed (`audiorepro sign`, `--sign-key`): the signature over every file"),
    (
        "cache/",
        "not an output (top folder only): the extraction cache and the demo's inputs, "
        "reused by the next run into this folder",
    ),
)


def index_text(folder: Path, study: Any) -> str:
    """The index of ``folder`` as the study has written it so far (its manifest not yet).

    >>> import tempfile, types
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "tables").mkdir()
    ...     print(index_text(Path(d), types.SimpleNamespace(name="s", title="")), end="")
    audiorepro output folder of the study "s".
    <BLANKLINE>
    README.txt               this index
    tables/                  the report's tables, each as CSV, Markdown and LaTeX
    manifest.json            SHA-256 of every input and output, with the environment, time and
                             host (the one file that differs between two runs of the same
                             study)
    attestation.intoto.json  when signed (`audiorepro sign`, `--sign-key`): the signature over
                             every file
    cache/                   not an output (top folder only): the extraction cache and the
                             demo's inputs, reused by the next run into this folder
    <BLANKLINE>
    Check it with `audiorepro verify` on the top folder.
    """
    title = getattr(study, "title", "") or ""
    head = f'audiorepro output folder of the study "{study.name}"'
    lines = [head + (f": {title}." if title and title != study.name else "."), ""]
    names = sorted({p.name for p in folder.iterdir()} | {INDEX})
    rows = [
        (n + ("/" if (folder / n).is_dir() else ""), WRITTEN.get(n, "an output of the study"))
        for n in names
    ]
    for name, what in [*rows, *AROUND]:
        lines += _wrapped(name, what)
    lines += ["", "Check it with `audiorepro verify` on the top folder."]
    return "\n".join(lines) + "\n"


def _wrapped(name: str, what: str, width: int = 90, indent: int = 25) -> list[str]:
    """``name`` in a column, ``what`` wrapped beside it."""
    lines, current = [], name.ljust(indent - 1)
    for word in what.split():
        if len(current) + 1 + len(word) > width and current.strip() != name:
            lines.append(current)
            current = " " * (indent - 1)
        current += " " + word
    return [*lines, current]


def write_index(folder: Path, study: Any) -> None:
    """Write ``folder``'s ``README.txt`` (before its manifest, which then lists it)."""
    atomic_write_bytes(folder / INDEX, index_text(folder, study).encode())

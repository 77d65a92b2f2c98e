"""``extract --jobs N``: N local processes over whole batches, merged like shards.

CPU embeddings run on a fixed number of torch threads (``AUDIOREPRO_CPU_THREADS``, default 1)
so that their last bits do not follow the machine; a CPU node's other cores are used by
processes instead. Process ``i`` runs ``extract --shard i/N`` (a contiguous run of whole
batches, each seeded from its first clip) and :func:`audiorepro.extract.merge` joins the parts,
so the dump is byte-identical to the one a single process writes (the shard property the test
suite checks). Each process loads the model once: worth it when the clips take longer than
the loading.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from audiorepro.core.errors import UserError
from audiorepro.models.extract import merge


def extract_in_processes(args: list[str], out: Path, jobs: int) -> None:
    """Run ``audiorepro extract ARGS --shard i/N --out PART`` N times at once, then merge."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".extract-jobs-") as tmp:
        parts = [Path(tmp) / f"part{i}.npz" for i in range(jobs)]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "audiorepro",
                    "extract",
                    *args,
                    "--shard",
                    f"{i}/{jobs}",
                    "--out",
                    str(part),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i, part in enumerate(parts)
        ]
        errors = []
        for i, proc in enumerate(procs):
            _, err = proc.communicate()
            if proc.returncode:
                last = err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"
                errors.append(f"process {i}/{jobs}: {last}")
        if errors:
            raise UserError("; ".join(errors), key="--jobs")
        merge(parts, out)

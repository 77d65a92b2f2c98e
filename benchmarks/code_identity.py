#!/usr/bin/env python3
"""Benchmark: the cost of an encoder's code identity (part of every extraction cache key and
every dump's record), computed on every call.

Each case runs in a fresh child process (nothing memoized yet, as in one ``audiorepro``
command), which imports the kit, then times ``code_identity`` twice: ``cold`` (the first call
of the process: it reads every installed distribution's metadata once, hashes pip's
``RECORD`` of each imported wheel and the bytes of every local or editable file) and ``warm``
(the same call again: unchanged files are not read again). Best of ``--repeat`` processes:

- ``file+torch``: a ``py:`` file beside a helper module, importing torch, numpy, transformers
  and laion_clap (those installed): a torch-sized dependency set, by ``RECORD``;
- ``resemblyzer``: the bundled ``audiorepro.models.resemblyzer`` (a module of the kit's own
  package, 150 files hashed whole, its imports followed through the package);
- ``--content``: for comparison, hashing every installed file of torch by content (what a
  content hash of a wheel install would cost on every call).

    python benchmarks/code_identity.py --repeat 5
    python benchmarks/code_identity.py --repeat 5 --content
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

ENCODER = """
import numpy as np
import torch

from bench_helpers import SCALE

try:
    import laion_clap  # noqa: F401
    import transformers  # noqa: F401
except ImportError:
    pass


def make():
    return None
"""

CHILD = """
import json, sys, time
sys.path.insert(0, {src!r})
from audiorepro.models.encoder_specs import UserSpec, code_identity
spec = UserSpec("py", {target!r}, "make")
t0, c0 = time.perf_counter(), time.process_time()
code = code_identity(spec)
t1, c1 = time.perf_counter(), time.process_time()
code_identity(spec)
t2 = time.perf_counter()
print(json.dumps({{"cold": t1 - t0, "cold_cpu": c1 - c0, "warm": t2 - t1,
                  "by": {{k: v["by"] for k, v in code["distributions"].items()}},
                  "local": len(code["local"]), "source_files": code["source_files"]}}))
"""

CONTENT = """
import hashlib, sys, time
from importlib import metadata
t0 = time.perf_counter()
dist = metadata.distribution("torch")
n = size = 0
for f in dist.files or []:
    path = dist.locate_file(f)
    if path.is_file():
        data = path.read_bytes()
        hashlib.sha256(data).hexdigest()
        n += 1
        size += len(data)
print(f"{time.perf_counter() - t0:.2f} s for {n} files, {size / 2**20:.0f} MiB")
"""


def child(target: str, cwd: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(src=str(SRC), target=target)],
        check=True, capture_output=True, text=True, cwd=cwd,
    ).stdout  # fmt: skip
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--content", action="store_true", help="also hash torch by content")
    args = parser.parse_args()
    print(f"# {platform.machine()}, Python {platform.python_version()}, best of {args.repeat}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench_enc.py").write_text(ENCODER)
        (folder / "bench_helpers.py").write_text("SCALE = 1.0\n")
        cases = {
            "file+torch": str(folder / "bench_enc.py"),
            "resemblyzer": "audiorepro.models.resemblyzer",
        }
        for name, target in cases.items():
            runs = [child(target, folder) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: float(r["cold"]))  # type: ignore[arg-type]
            print(
                f"{name:<12} cold {float(best['cold']):.3f} s "  # type: ignore[arg-type]
                f"(CPU {float(best['cold_cpu']):.3f} s), "  # type: ignore[arg-type]
                f"warm {float(best['warm']) * 1000:.1f} ms; "  # type: ignore[arg-type]
                f"distributions {best['by']}, local files {best['local']}, "
                f"own source files {best['source_files']}"
            )
        if args.content:
            start = time.perf_counter()
            text = subprocess.run(
                [sys.executable, "-c", CONTENT], check=True, capture_output=True, text=True
            ).stdout.strip()
            print(f"torch by content: {text} ({time.perf_counter() - start:.2f} s with start-up)")


if __name__ == "__main__":
    main()

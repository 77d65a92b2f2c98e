"""``audiorepro selfcheck``: does this installation compute what the project says it does?

A fast (well under a minute on a CPU) check, run by the image's build, apptainer's ``%test``
and users. Everything it needs is built here from seeds; nothing is downloaded.

1. **golden**: the retrieval metrics of the synthetic Clotho-like fixture dump (five captions
   per clip) equal the project's golden values (``golden/fixtures/synthetic_5cap.yml``) to the
   last bit: they are tier a (:mod:`audiorepro.checks.tiers`), the same on every machine;
2. **parity**: the harness and the independent reference agree on every fixture dump, to the
   parity tolerance;
3. **identity**: tiny CLAP models built from seed 0 in both formats (laion-clap checkpoint,
   Hugging Face folder) are called identical, weights and embeddings (skipped, and said so,
   when the model stack is not installed);
4. **environment**: the installed versions of the packages the lock pins (``--lock`` or
   ``AUDIOREPRO_LOCK``); differing versions are listed, and fail the check only with
   ``strict_environment``. The base image (``AUDIOREPRO_BASE_IMAGE``, set by the Dockerfile) is
   reported as pinned only when it names a digest.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from audiorepro.checks.locks import environment_differences, read_lock
from audiorepro.checks.parity import DEFAULT_TOLERANCE, parity_report
from audiorepro.formats.dump import dump_from_arrays
from audiorepro.metrics.retrieval import compute_retrieval
from audiorepro.models.identity import compare, load_fixture
from audiorepro.models.registry import read_registry
from audiorepro.models.tiny import build_tiny_models
from audiorepro.synthetic.dumps import fixtures, golden_5cap

GOLDEN_TOLERANCE = 0.0  # tier a: exact on every machine


@dataclass(frozen=True)
class Check:
    """One line of the self-check: its name, whether it passed, and what it found."""

    name: str
    passed: bool | None  # None: skipped
    detail: str

    def line(self) -> str:
        status = {True: "ok", False: "FAIL", None: "skipped"}[self.passed]
        return f"{self.name:<12} {status:<8} {self.detail}"


def check_golden() -> Check:
    dump = dump_from_arrays(fixtures()["synthetic_5cap.npz"], source="synthetic_5cap")
    values = compute_retrieval(dump).metrics("pessimistic")
    deltas = {
        key: abs(values[key.split("/")[0]][key.split("/")[1]] - expected)
        for key, expected in golden_5cap().items()
    }
    worst = max(deltas, key=deltas.__getitem__)
    bad = sorted(k for k, d in deltas.items() if d > GOLDEN_TOLERANCE)
    detail = f"{len(deltas)} values of synthetic_5cap, worst |delta| {deltas[worst]:.3g} ({worst})"
    return Check("golden", not bad, detail + (f"; off: {', '.join(bad)}" if bad else ""))


def check_parity() -> Check:
    dumps = [dump_from_arrays(arrays, source=name) for name, arrays in fixtures().items()]
    block = parity_report(dumps)["metric_parity"]
    detail = (
        f"{block['n_cells']} fixture dumps, harness vs reference worst |delta| "
        f"{block['worst_abs_delta']:.3g} (tolerance {DEFAULT_TOLERANCE:g})"
    )
    return Check("parity", bool(block["passed"]), detail)


def check_identity() -> Check:
    missing = [m for m in ("torch", "laion_clap", "transformers") if not _importable(m)]
    if missing:
        return Check("identity", None, f"model stack not installed ({', '.join(missing)})")

    with tempfile.TemporaryDirectory(prefix="audiorepro-selfcheck-") as tmp:
        registry = read_registry(build_tiny_models(Path(tmp), seed=0, fusion=False))
        report = compare(registry["tiny-hf"], registry["tiny-laion"], load_fixture(None, None))
    block = report["checkpoint_identity"]
    cosines = block["audio_embedding_cosine_per_clip"] + block["text_embedding_cosine_per_clip"]
    detail = (
        f"tiny-hf vs tiny-laion (seed 0): {block['verdict']}, min cosine "
        f"{min(cosines):.6f}, {block['weights']['status']} weights"
    )
    return Check("identity", bool(report["passed"]), detail)


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def check_environment(lock: Path | None, *, strict: bool) -> Check:
    base = os.environ.get("AUDIOREPRO_BASE_IMAGE")
    if base is None:
        base_note = ""
    elif "@sha256:" in base:
        base_note = f"; base image {base}"
    else:
        base_note = f"; base image unpinned ({base}: no digest, see tools/pin-base-image)"
    if lock is None:
        return Check("environment", None, "no lock given (--lock or AUDIOREPRO_LOCK)" + base_note)
    differences = environment_differences(lock)
    pinned = len(read_lock(lock)[0])
    if not differences:
        return Check("environment", True, f"{pinned} packages as pinned by {lock}" + base_note)
    listed = "; ".join(differences)
    detail = f"{len(differences)} of {pinned} packages differ from {lock}: {listed}" + base_note
    return Check("environment", False if strict else None, detail)


def run_selfcheck(lock: Path | None = None, *, strict_environment: bool = False) -> list[Check]:
    """Every check, in order; the run passed when none has ``passed is False``."""
    if lock is None and os.environ.get("AUDIOREPRO_LOCK"):
        lock = Path(os.environ["AUDIOREPRO_LOCK"])
    return [
        check_golden(),
        check_parity(),
        check_identity(),
        check_environment(lock, strict=strict_environment),
    ]

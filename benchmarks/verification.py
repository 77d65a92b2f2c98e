"""``verification`` benchmark: every speaker-verification definition (issue 47) over a
VoxCeleb-size and a larger seeded trial list, each size in its own process for its own peak
memory, beside the twin and the toolkits' own code where they finish.

    python benchmarks/verification.py --trials 1000000 10000000 --twin 50000 --peers 20000

Seconds are one call with the scores in memory (best of ``--repeat``), CPU (user + system of
the process: what the method costs) and wall; the first line of each size is the scores
alone (the floor of memory). Run it under ``nice`` on a
shared machine; the table notes the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def trials(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """VoxCeleb1-O's shape: half target trials; float32 cosines, targets shifted up (ties as
    float32 rounding makes them)."""
    rng = np.random.default_rng(seed)
    target = rng.random(n) < 0.5
    scores = (np.tanh(rng.normal(size=n) * 0.3 + 0.6 * target)).astype(np.float32)
    return scores.astype(np.float64), target


def _best(f: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """The least wall and CPU seconds of ``repeat`` calls (CPU seconds, this process's user +
    system, move less than wall time on a shared machine), and the value."""
    wall, cpu, value = float("inf"), float("inf"), None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        value = f()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, value


def child(n: int, what: str, repeat: int) -> dict[str, Any]:
    """One measurement in this process: ``what`` over ``n`` trials."""
    from audiorepro.metrics import verification as v
    from audiorepro.metrics import verification_toolkits as kits
    from audiorepro.reference import verification as twin

    scores, target = trials(n)
    table: dict[str, Callable[[], Any]] = {
        "scores only": lambda: None,
        "operating points (DET curve)": lambda: v.operating_points(scores, target).misses.size,
        "every definition (explain --trials)": lambda: kits.compute_definitions(scores, target),
        "twin: eer + eer_rocch + min_dcf_p0.01": lambda: (
            twin.equal_error_rate(scores, target),
            twin.eer_rocch(scores, target),
            twin.min_dcf(scores, target, p_target=0.01),
        ),
    }
    for d in kits.DEFINITIONS:
        table[d.name] = lambda d=d: d.compute(kits.SharedTrials(scores, target))
    if what == "speechbrain 1.1.2 EER (own code)":
        import torch
        from speechbrain.utils.metric_stats import EER

        pos, neg = torch.from_numpy(scores[target]), torch.from_numpy(scores[~target])
        table[what] = lambda: EER(pos, neg)[0]
    if what == "pyannote.metrics 4.2 det_curve (own code)":
        from pyannote.metrics.binary_classification import det_curve

        table[what] = lambda: float(det_curve(target, scores)[3])
    wall, cpu, value = _best(table[what], repeat)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"what": what, "n": n, "wall": wall, "cpu": cpu, "peak_bytes": peak,
            "value": repr(value)}  # fmt: skip


def run(n: int, what: str, repeat: int) -> dict[str, Any] | None:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(n), what, str(repeat)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        print(f"  {what}: failed ({out.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--twin", type=int, nargs="*", default=[50_000, 1_000_000])
    parser.add_argument("--peers", type=int, nargs="*", default=[1_000_000, 20_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], int(args.child[2]))))
        return 0
    from audiorepro.metrics.verification_toolkits import DEFINITIONS

    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("| trials | what | CPU seconds | wall seconds | peak memory |")
    print("|---:|---|---:|---:|---:|")
    whole = ["scores only", "operating points (DET curve)", "every definition (explain --trials)"]
    # Above 2 million trials only the shared steps: each definition alone is the same sort.
    each = [d.name for d in DEFINITIONS]
    plan = [(n, w) for n in args.trials for w in (whole if n > 2_000_000 else whole + each)]
    plan += [(n, "twin: eer + eer_rocch + min_dcf_p0.01") for n in args.twin]
    plan += [(n, "pyannote.metrics 4.2 det_curve (own code)") for n in args.peers]
    plan += [(n, "speechbrain 1.1.2 EER (own code)") for n in args.peers if n <= 50_000]
    for n, what in plan:
        r = run(n, what, 1 if n > 2_000_000 or "twin" in what or "own" in what else args.repeat)
        if r is not None:
            gib = r["peak_bytes"] / 2**30
            print(f"| {n:,} | {what} | {r['cpu']:.3f} | {r['wall']:.3f} | {gib:.2f} GiB |",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

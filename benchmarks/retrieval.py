#!/usr/bin/env python3
"""Benchmark: audiorepro's exact retrieval metrics against the float32 floor and named peers.

For each size (clips x 5 captions, D = 512, 2% duplicated clips) one synthetic dump is written,
then every peer runs in its own subprocess on the same file, so that its peak memory (max RSS)
is its own. Printed per peer: seconds, peak memory, and ratios against audiorepro.

    python benchmarks/retrieval.py                 # 1045 x 5 and 10,000 x 5
    python benchmarks/retrieval.py --sizes 1045    # one size
    python benchmarks/retrieval.py --scale         # audiorepro alone at 100,000 x 500,000
    python benchmarks/retrieval.py --k 1,5,10,50   # also audiorepro_k: definitions 1.1 there

A peer that would exceed this machine's memory is skipped, and the reason is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

PEERS = ["floor", "floor_plain", "audiorepro", "laion_clap", "pytrec_eval", "ranx", "torchmetrics"]
#: audiorepro with ``--k``: definitions 1.1's measures (precision@k, mrr@k, ndcg@k, ndcg,
#: r_precision, ...) at those cutoffs, both tie policies and their bounds; run after
#: ``audiorepro`` when ``--k`` is given, so that both ratios to the floor are printed.
WITH_CUTOFFS = "audiorepro_k"
MEMORY_BUDGET = 20 * 2**30  # bytes a peer may plausibly use on a 24 GiB machine


def make_dump(path: Path, n_clips: int, captions: int, dim: int = 512, seed: int = 0) -> None:
    """Synthetic CLAP-like dump: unit vectors, captions = noisy clip copies, 2% duplicated clips."""
    from audiorepro.core.io import atomic_write_bytes, npz_bytes

    rng = np.random.default_rng(seed)
    audio = rng.standard_normal((n_clips, dim), dtype=np.float32)
    k = max(1, n_clips // 50)
    dst = rng.choice(n_clips, k, replace=False)
    audio[dst] = audio[rng.choice(np.setdiff1d(np.arange(n_clips), dst), k)]
    audio /= np.linalg.norm(audio, axis=1, keepdims=True)
    t2a = np.repeat(np.arange(n_clips, dtype=np.int64), captions)
    text = np.empty((n_clips * captions, dim), np.float32)
    for c0 in range(0, len(t2a), 65536):  # in pieces: bounded memory at 500,000 captions
        sl = slice(c0, min(len(t2a), c0 + 65536))
        piece = audio[t2a[sl]] + 0.28 * rng.standard_normal(
            (sl.stop - sl.start, dim), dtype=np.float32
        )
        text[sl] = piece / np.linalg.norm(piece, axis=1, keepdims=True)
    atomic_write_bytes(
        path, npz_bytes({"audio_embeds": audio, "text_embeds": text, "text_to_audio": t2a})
    )


def estimated_bytes(peer: str, n: int, m: int) -> int:
    """Rough peak memory of a peer, to skip what cannot run here (not a measurement)."""
    pairs = n * m
    if peer in ("pytrec_eval", "ranx"):
        return pairs * 2 * 200  # Python dicts of every (query, item) score, both directions
    if peer == "laion_clap":
        return pairs * (4 * 3 + 8 + 1)  # logits (x3 views/copies), argsort int64, bool mask
    if peer == "torchmetrics":
        return pairs * 4 * 2
    if peer == "floor_plain":
        return pairs * 4
    return 0


def run_peer(
    peer: str, dump: Path, repeats: int = 3, cutoffs: tuple[int, ...] | None = None
) -> dict[str, object]:
    """Inside the peer's own process: load the dump, run the peer, report time and memory.

    The floor and audiorepro run ``repeats`` times and report the best time (this machine's
    timings vary by 10-20% from run to run); the slow peers run once.
    """
    from audiorepro.metrics._exact import DEFAULT_CHUNK_ELEMENTS

    if peer in ("audiorepro", WITH_CUTOFFS):
        from audiorepro.formats.dump import load_dump
        from audiorepro.formats.dump import make_dump as mk
        from audiorepro.metrics.retrieval import compute_retrieval

        rng = np.random.default_rng(0)  # warm the compiled kernels (cached on disk)
        compute_retrieval(
            mk(
                rng.standard_normal((4, 8), dtype=np.float32),
                rng.standard_normal((8, 8), dtype=np.float32),
                np.arange(8) % 4,
            )
        )
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            d = load_dump(dump)
            res = compute_retrieval(d)
            out = {p: res.metrics(p, cutoffs) for p in ("pessimistic", "optimistic")}
            ties = res.ties(cutoffs)
            times.append(time.perf_counter() - t0)
            del d
        seconds = min(times)
        detail = {
            "r@1_t2a": out["pessimistic"]["t2a"]["r@1"],
            "ties_t2a": ties["t2a"]["queries_affected"],
            "refined_float64": res.stats.refined_float64,
            "exact": res.stats.exact,
        }
    else:
        import peers

        with np.load(dump, allow_pickle=False) as z:
            audio, text, t2a = z["audio_embeds"], z["text_embeds"], z["text_to_audio"]
        times = []
        for _ in range(repeats if peer.startswith("floor") else 1):
            t0 = time.perf_counter()
            if peer == "floor":
                peers.floor_matmul(audio, text, t2a, max(1, DEFAULT_CHUNK_ELEMENTS // len(audio)))
                detail = {}
            else:
                detail = getattr(peers, peer)(audio, text, t2a) or {}
            times.append(time.perf_counter() - t0)
        seconds = min(times)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peer": peer, "seconds": seconds, "peak_bytes": peak, "detail": detail}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1045, 10000])
    ap.add_argument("--peers", nargs="+", default=PEERS, choices=PEERS)
    ap.add_argument("--scale", action="store_true", help="audiorepro at 100,000 x 500,000 only")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per peer run")
    ap.add_argument(
        "--k",
        default=None,
        metavar="K[,K...]",
        help="also run audiorepro_k: audiorepro with definitions 1.1's measures at these cutoffs",
    )
    ap.add_argument("--run", choices=[*PEERS, WITH_CUTOFFS], help=argparse.SUPPRESS)
    ap.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--make", type=int, nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        make_dump(args.dump, *args.make)
        return 0
    cutoffs = None if args.k is None else tuple(int(k) for k in args.k.split(","))
    if args.run:
        print(json.dumps(run_peer(args.run, args.dump, 1 if args.scale else 3, cutoffs)))
        return 0

    sizes = [(100_000, 5)] if args.scale else [(n, 5) for n in args.sizes]
    peers_to_run = ["audiorepro"] if args.scale else list(args.peers)
    if cutoffs is not None:
        peers_to_run.append(WITH_CUTOFFS)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"numpy {np.__version__}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n, cpc in sizes:
            m = n * cpc
            dump = Path(tmp) / f"synthetic_{n}x{cpc}.npz"
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, __file__, "--run", "floor", "--dump", "/dev/null"],
                capture_output=True,
                check=False,
            )  # import warm-up, result unused
            # In its own process, so that generating does not count towards any peak.
            subprocess.run(
                [sys.executable, __file__, "--make", str(n), str(cpc), "--dump", str(dump)],
                check=True,
            )
            print(
                f"\n## {n} clips x {cpc} captions = {m} captions, D = 512 "
                f"(dump written in {time.perf_counter() - t0:.1f} s)"
            )
            results: dict[str, dict[str, object]] = {}
            for peer in peers_to_run:
                need = estimated_bytes(peer, n, m)
                if need > MEMORY_BUDGET:
                    print(
                        f"{peer:<13} skipped: would need about {need / 2**30:.0f} GiB "
                        f"(budget {MEMORY_BUDGET / 2**30:.0f} GiB)"
                    )
                    continue
                try:
                    proc = subprocess.run(
                        [sys.executable, __file__, "--run", peer, "--dump", str(dump)]
                        + (["--scale"] if args.scale else [])
                        + ([] if args.k is None else ["--k", args.k]),
                        capture_output=True,
                        text=True,
                        timeout=args.timeout,
                        check=False,
                    )
                except subprocess.TimeoutExpired:
                    print(f"{peer:<13} stopped: longer than {args.timeout} s")
                    continue
                if proc.returncode != 0:
                    last = (proc.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"{peer:<13} failed: {last}")
                    continue
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                results[peer] = res
            base = results.get("audiorepro")
            floor = results.get("floor")
            for peer, res in results.items():
                secs = float(res["seconds"])  # type: ignore[arg-type]
                line = f"{peer:<13} {secs:9.2f} s  peak {float(res['peak_bytes']) / 2**30:6.2f} GiB"  # type: ignore[arg-type]
                if base and peer != "audiorepro":
                    line += f"  {secs / float(base['seconds']):8.1f}x audiorepro's time"  # type: ignore[arg-type]
                if peer in ("audiorepro", WITH_CUTOFFS) and floor:
                    line += f"  {secs / float(floor['seconds']):8.2f}x the float32 floor"  # type: ignore[arg-type]
                print(line)
            if base:
                print(f"audiorepro detail: {json.dumps(base['detail'], sort_keys=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

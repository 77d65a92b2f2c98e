"""``verification_study`` benchmark: a whole speaker-verification study (``audiorepro
reproduce``) over a VoxCeleb-format trial list of synthetic trials, end to end: reading the
list, scoring, every definition, the DET curve, the twin's parity on its seeded subset of
trials, the bundle and the report.

    python benchmarks/verification_study.py --trials 1000000

The data (:func:`build`): ``speakers`` VoxCeleb-style speakers (``id10001`` ...) of
``clips`` clips each (``id10001/yt00000/00001.wav``), a float32 embedding per clip (the
speaker's seeded direction plus seeded noise, 192 dimensions as ECAPA-TDNN's), half target
and half non-target trials, every pair once, drawn by ``numpy.random.default_rng(seed)``.
Seconds are one ``reproduce`` in this process (the study's files written before the clock
starts), wall and CPU (user + system of the process: what it costs where cores are shared);
run it under ``nice`` on a shared machine.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pairs(rng: np.random.Generator, n: int, speakers: int, clips: int, same: bool) -> np.ndarray:
    """``n`` distinct unordered pairs of clip indices, of one speaker (``same``) or two."""
    total = speakers * clips
    possible = speakers * clips * (clips - 1) // 2 if same else total * (total - clips) // 2
    if n > possible // 2:  # a draw of distinct pairs would take long or never end
        raise ValueError(f"{n} pairs of {possible}: give more speakers or clips")
    got = np.empty(0, dtype=np.int64)
    while got.size < n:
        a = rng.integers(0, total, size=2 * n)
        if same:
            b = (a // clips) * clips + rng.integers(0, clips, size=2 * n)
        else:
            b = rng.integers(0, total, size=2 * n)
        keep = (a != b) & (((a // clips) == (b // clips)) == same)
        lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
        got = np.unique(np.concatenate([got, lo * total + hi]))
    return rng.permutation(got)[:n]


def build(folder: Path, n_trials: int, *, speakers: int = 1000, clips: int = 40,
          seed: int = 0, cell: str = "") -> Path:  # fmt: skip
    """The study's files in ``folder`` (a dump, a VoxCeleb trial list, ``study.toml``);
    ``cell`` adds its lines to the cell (``bootstrap = { resamples = 100 }``)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    ids = np.array([f"id1{s:04d}/yt{c // 8:05d}/{c % 8 + 1:05d}.wav"
                    for s in range(speakers) for c in range(clips)])  # fmt: skip
    centre = rng.normal(size=(speakers, 192))
    emb = np.repeat(centre, clips, axis=0) + rng.normal(scale=1.5, size=(speakers * clips, 192))
    np.savez(folder / "embeddings.npz", audio_embeds=emb.astype(np.float32), audio_ids=ids)
    half = n_trials // 2
    total = speakers * clips
    codes = np.concatenate([_pairs(rng, half, speakers, clips, True),
                            _pairs(rng, n_trials - half, speakers, clips, False)])  # fmt: skip
    label = np.repeat(np.array(["1", "0"]), [half, n_trials - half])
    order = rng.permutation(n_trials)
    codes, label = codes[order], label[order]
    swap = rng.random(n_trials) < 0.5  # either clip may come first, as in VoxCeleb's lists
    a, b = codes // total, codes % total
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    lines = np.char.add(np.char.add(np.char.add(label, " "), np.char.add(ids[a], " ")), ids[b])
    (folder / "veri_test.txt").write_text("\n".join(lines.tolist()) + "\n")
    dump, trials = folder / "embeddings.npz", folder / "veri_test.txt"
    (folder / "study.toml").write_text(
        'schema = "audiorepro.study/1"\nkind = "speaker-verification"\nname = "synthetic"\n'
        f'[[cell]]\nid = "synthetic"\nmodel = "synthetic"\ndump = "{dump.name}"\n'
        f'sha256 = "{_sha256(dump)}"\ntrials = "{trials.name}"\n'
        f'trials_sha256 = "{_sha256(trials)}"\n{cell}'
    )
    return folder / "study.toml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[1_000_000])
    args = parser.parse_args(argv)
    from audiorepro.cli.app import main as audiorepro

    print("trials  wall s  CPU s  (one audiorepro reproduce)")
    for n in args.trials:
        with tempfile.TemporaryDirectory() as tmp:
            study = build(Path(tmp) / "study", n)
            start, cpu = time.perf_counter(), time.process_time()
            rc = audiorepro(["reproduce", str(study), "--out", str(Path(tmp) / "out")])
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            if rc != 0:
                return rc
            print(f"{n:>9}  {wall:6.2f}  {cpu:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

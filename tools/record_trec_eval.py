#!/usr/bin/env python3
"""Write the seeded trec_eval inputs (``fixtures/trec/seeded/``) and record trec_eval's whole
outputs on them, or check the committed record.

The seeded files hold what trec_eval's own quicktest files do not: graded levels (-1 to 4),
tied scores, documents judged but not retrieved and retrieved but not judged, queries without
a relevant document, queries of the run without judgements, preference judgements with 1-3
judgement groups of 1-3 sub-groups, and the same documents as judgement groups. Every query of
the qrels is retrieved, and none is judged only negatively: trec_eval 10 exits on the first and
reuses a stale count on the second (the two differences audiorepro keeps, docs/retrieval.md).

For each seed ``S`` (0 to 11) two folders: ``runs-S`` (``qrels``, ``run``) for the
:data:`OPTIONS` and ``prefs-S`` (``run``, ``prefs``, ``qrels_prefs``, ``qrels_jg``, and
``prefs.c``/``qrels_jg.c``, the same with one judged query that the run lacks, for ``-c``)
for the :data:`PREFS_OPTIONS`. Each output ``out.NN`` is trec_eval's standard output for the
NN-th option list, run in that folder: ``RECORD`` holds, one tab-separated line per output,
its path, its SHA-256 and the exact command (``trec_eval OPTIONS JUDGEMENTS run``);
``SHA256SUMS`` lists every file's SHA-256 (``sha256sum -c`` reads it).

The outputs are trec_eval's, recorded with a binary built by its default ``make`` from the
commit named in ``fixtures/trec/PROVENANCE.md`` (``PROVENANCE.md`` here says how); the inputs
are rewritten by this script from the seeds alone (Python's ``random.Random``), so ``--check``
can compare them with the committed bytes without trec_eval.

Usage::

    python tools/record_trec_eval.py --trec-eval PATH/trec_eval   # rewrite fixtures/trec/seeded
    python tools/record_trec_eval.py --check                      # inputs and hashes agree
"""

from __future__ import annotations

import argparse
import hashlib
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "trec" / "seeded"
SEEDS = range(12)

#: Option lists of the ``runs-S`` folders: every measure family, each flag both tools accept.
OPTIONS = [
    ["-m", "all_trec"],
    ["-q", "-m", "all_trec"],
    ["-q", "-m", "all_trec", "-c"],
    ["-q", "-m", "all_trec", "-l2"],
    ["-q", "-m", "all_trec", "-c", "-l3", "-M5"],
    ["-q", "-m", "all_trec", "-J"],
    ["-q", "-m", "all_trec", "-M3", "-N", "1000", "-mutility.1,-1,0.5,0.001"],
    ["-q", "-m", "ndcg.0=1,1=2.5,3=7", "-m", "G.2=0.5", "-m", "rbp.p=0.5,2=4", "-m", "Rndcg"],
    ["-q", "-m", "iprec_at_recall..33,.66", "-m", "Rprec_mult.0.5,1.5", "-m", "set_F.0.25"],
    ["-q", "-m", "relstring.30", "-m", "ndcg_rel.1=1,2=1", "-m", "dcg", "-m", "ideal_dcg"],
    ["-m", "all_trec", "-m", "P.3,7", "-m", "ndcg_cut.2.9,4"],
    ["-n", "-q", "-m", "set", "-m", "unj.1,2"],
]

#: Option lists of the ``prefs-S`` folders: the three other judgement formats (``-R``).
PREFS_OPTIONS = [
    ["-q", "-m", "all_prefs", "-R", "prefs"],
    ["-q", "-m", "all_prefs", "-R", "prefs", "-M4"],
    ["-m", "prefs", "-R", "prefs", "-c"],
    ["-q", "-m", "all_prefs", "-R", "qrels_prefs"],
    ["-q", "-m", "qrels_jg", "-R", "qrels_jg"],
    ["-q", "-m", "qrels_jg", "-R", "qrels_jg", "-l2", "-M5", "-mP_avgjg.1,3"],
    ["-q", "-m", "qrels_jg", "-R", "qrels_jg", "-J", "-c"],
]


def write_runs(folder: Path, seed: int) -> tuple[Path, Path]:
    """A seeded qrels and run (``folder/qrels``, ``folder/run``)."""
    rng = random.Random(seed)
    qrels, run = [], []
    for q in range(rng.randint(2, 8)):
        qid = f"{rng.choice(['q', 'Q', 'topic-'])}{q * 7}"
        docs = [f"d{rng.randint(0, 60)}" for _ in range(rng.randint(1, 40))]
        docs = list(dict.fromkeys(docs))
        judged = list(dict.fromkeys([*rng.sample(docs, k=len(docs) // 2),
                                     *(f"x{rng.randint(0, 9)}" for _ in range(3))]))  # fmt: skip
        levels = [rng.choice([-1, 0, 0, 0, 1, 1, 2, 3, 4]) for _ in judged]
        if all(v < 0 for v in levels):
            levels[0] = 0
        qrels += [f"{qid} 0 {d} {v}" for d, v in zip(judged, levels, strict=True)]
        run += [f"{qid} Q0 {d} {r} {rng.choice([1, 2, 2.5, 3, rng.random() * 5]):.4f} s{seed}"
                for r, d in enumerate(docs)]  # fmt: skip
    run.append(f"unjudged Q0 d1 1 1.0 s{seed}")
    rng.shuffle(run)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").write_text("\n".join(qrels) + "\n")
    (folder / "run").write_text("\n".join(run) + "\n")
    return folder / "qrels", folder / "run"


def write_prefs(folder: Path, seed: int) -> Path:
    """A run, preference judgements (1-3 judgement groups of 1-3 sub-groups per query, each
    group's levels drawn once so that trec_eval's consistency checks hold, level 0 frequent),
    the same documents as judgement groups (``qid jg docno level``) and as preferences
    (``qrels_prefs``), and the ``.c`` forms of ``prefs`` and ``qrels_jg`` with a judged query
    the run lacks (trec_eval's stand-in document under ``-c``). Returns ``folder``."""
    rng = random.Random(1000 + seed)
    prefs, groups, run = [], [], []
    for q in range(rng.randint(2, 6)):
        qid = f"p{q * 3}"
        docs = list(dict.fromkeys(f"d{rng.randint(0, 30)}" for _ in range(rng.randint(1, 20))))
        pool = [*docs, *(f"x{i}" for i in range(4))]
        run += [f"{qid} Q0 {d} {r} {rng.choice([1, 2, 2.5, rng.random() * 3]):.4f} s{seed}"
                for r, d in enumerate(docs)]  # fmt: skip
        for g in range(rng.randint(1, 3)):
            hidden = {d: rng.choice([0, 0, 0, 1, 2, 3.5]) for d in pool}
            for s in range(rng.randint(1, 3)):
                for d in rng.sample(pool, k=rng.randint(1, len(pool))):
                    prefs.append(f"{qid} u{g} s{s} {d} {hidden[d]}")
            judged = rng.sample(pool, k=rng.randint(1, len(pool)))
            groups += [f"{qid} u{g} {d} {int(hidden[d]) - (d == judged[0])}" for d in judged]
    rng.shuffle(run)
    # As preferences, no negative level: with one, trec_eval's prefs_avgjg_Rnonrel can read
    # past the group's lowest class (docs/retrieval.md).
    qrels_prefs = [line.replace(" -1", " 0") for line in groups]
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in (("run", run), ("prefs", prefs), ("qrels_jg", groups),
                        ("qrels_prefs", qrels_prefs),
                        ("prefs.c", [*prefs, "zz u0 s0 a 1", "zz u0 s0 b 0"]),
                        ("qrels_jg.c", [*groups, "zz u0 a 1"])):  # fmt: skip
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def judgements(options: list[str]) -> str:
    """The judgement file an option list reads: ``-R``'s format (``qrels`` without one), its
    ``.c`` form under ``-c`` for the preference formats."""
    if "-R" not in options:
        return "qrels"
    name = options[options.index("-R") + 1]
    return f"{name}.c" if "-c" in options and name != "qrels_prefs" else name


def cases() -> list[tuple[str, str, list[str]]]:
    """(folder, output name, trec_eval arguments run in that folder), in RECORD's order."""
    found = []
    for seed in SEEDS:
        for folder, lists in ((f"runs-{seed:02d}", OPTIONS), (f"prefs-{seed:02d}", PREFS_OPTIONS)):
            for k, options in enumerate(lists):
                found.append((folder, f"out.{k:02d}", [*options, judgements(options), "run"]))
    return found


def write_inputs(out: Path) -> None:
    for seed in SEEDS:
        write_runs(out / f"runs-{seed:02d}", seed)
        write_prefs(out / f"prefs-{seed:02d}", seed)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(trec_eval: Path, out: Path) -> None:
    """Rewrite the inputs, run trec_eval on each case and write its output, RECORD and
    SHA256SUMS."""
    write_inputs(out)
    lines = []
    for folder, name, argv in cases():
        done = subprocess.run(
            [str(trec_eval.resolve()), *argv], cwd=out / folder, capture_output=True, check=True
        )
        (out / folder / name).write_bytes(done.stdout)
        command = " ".join(["trec_eval", *argv])
        lines.append(f"{folder}/{name}\t{_sha256(out / folder / name)}\t{command}\n")
    (out / "RECORD").write_text("".join(lines))
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.parent != out)
    sums = [f"{_sha256(p)}  {p.relative_to(out).as_posix()}\n" for p in files]
    (out / "SHA256SUMS").write_text("".join([*sums, f"{_sha256(out / 'RECORD')}  RECORD\n"]))


def read_record(out: Path = OUT) -> list[tuple[str, str, list[str]]]:
    """RECORD as (output path, SHA-256, trec_eval arguments)."""
    rows = []
    for line in (out / "RECORD").read_text().splitlines():
        path, digest, command = line.split("\t")
        program, *argv = command.split(" ")
        assert program == "trec_eval", line
        rows.append((path, digest, argv))
    return rows


def check_committed(out: Path = OUT) -> list[str]:
    """Problems of the committed record: a file missing, changed, or not listed in SHA256SUMS;
    RECORD's cases other than :func:`cases`; an input that the seeds no longer write."""
    pairs = (line.split("  ", 1) for line in (out / "SHA256SUMS").read_text().splitlines())
    sums = {name: digest for digest, name in pairs}
    problems = []
    for name, digest in sums.items():
        if not (out / name).is_file():
            problems.append(f"{name}: missing")
        elif _sha256(out / name) != digest:
            problems.append(f"{name}: SHA-256 differs from SHA256SUMS")
    listed = set(sums) | {"SHA256SUMS", "PROVENANCE.md"}
    problems += [
        f"{p.relative_to(out).as_posix()}: not in SHA256SUMS"
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.relative_to(out).as_posix() not in listed
    ]
    expected = [(f"{folder}/{name}", argv) for folder, name, argv in cases()]
    if [(path, argv) for path, _, argv in read_record(out)] != expected:
        problems.append("RECORD: its cases are not this script's seeds and option lists")
    problems += [
        f"{path}: SHA-256 differs from RECORD"
        for path, digest, _ in read_record(out)
        if sums.get(path) != digest
    ]
    return problems + _check_inputs(out)


def _check_inputs(out: Path) -> list[str]:
    """The inputs that the seeds write otherwise than committed (a missing one is named by the
    SHA256SUMS check)."""
    with tempfile.TemporaryDirectory() as tmp:
        write_inputs(Path(tmp))
        written = sorted(p for p in Path(tmp).rglob("*") if p.is_file())
        return [
            f"{p.relative_to(tmp).as_posix()}: the seeds write other bytes"
            for p in written
            if (out / p.relative_to(tmp)).is_file()
            and p.read_bytes() != (out / p.relative_to(tmp)).read_bytes()
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--trec-eval", type=Path, help="a trec_eval binary: record its outputs")
    group.add_argument("--check", action="store_true", help="check the committed record")
    parser.add_argument("--out", type=Path, default=OUT, help="the folder (fixtures/trec/seeded)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check_committed(args.out)
        for problem in problems:
            print(f"{args.out}: {problem}", file=sys.stderr)
        if not problems:
            print(f"{args.out}: {len(read_record(args.out))} recorded outputs agree")
        return 1 if problems else 0
    record(args.trec_eval, args.out)
    print(f"{args.out}: {len(cases())} outputs of {args.trec_eval} recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``audiorepro trec-eval`` against trec_eval itself, built from its source with its default
``make``, on seeded runs: whole outputs equal under every option both accept.

The source is not carried here (no trec_eval code is copied into audiorepro): the test builds
it from ``$TREC_EVAL_SRC`` (a checkout of usnistgov/trec_eval at the commit named in
``fixtures/trec/PROVENANCE.md``) when gcc and make are present, or runs ``$TREC_EVAL`` (a
built binary); without either it is skipped.

The seeded files hold graded levels (-1 to 4), tied scores, documents judged but not
retrieved and retrieved but not judged, queries without a relevant document and queries of
the run without judgements. Every query of the qrels is retrieved, and none is judged only
negatively: trec_eval 10 exits on the first and reuses a stale count on the second (the two
differences audiorepro keeps, docs/retrieval.md).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from audiorepro.cli import main

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


def _binary(tmp: Path) -> Path:
    given = os.environ.get("TREC_EVAL")
    if given:
        return Path(given)
    source = os.environ.get("TREC_EVAL_SRC")
    if not source or shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("needs $TREC_EVAL (a binary) or $TREC_EVAL_SRC with gcc and make")
    build = tmp / "trec_eval_src"
    shutil.copytree(source, build, ignore=shutil.ignore_patterns(".git", "trec_eval"))
    subprocess.run(["make"], cwd=build, check=True, capture_output=True)
    return build / "trec_eval"


@pytest.fixture(scope="module")
def trec_eval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _binary(tmp_path_factory.mktemp("trec_eval"))


def _files(folder: Path, seed: int) -> tuple[Path, Path]:
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
    (folder / "qrels").write_text("\n".join(qrels) + "\n")
    (folder / "run").write_text("\n".join(run) + "\n")
    return folder / "qrels", folder / "run"


@pytest.mark.parametrize("seed", range(12))
def test_whole_outputs_equal_trec_eval_s(
    seed: int, trec_eval: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _files(tmp_path, seed)
    for options in OPTIONS:
        theirs = subprocess.run(
            [str(trec_eval), *options, str(qrels), str(run)], capture_output=True, check=True
        ).stdout.decode()
        assert main(["trec-eval", *options, str(qrels), str(run)]) == 0
        assert capsys.readouterr().out == theirs, options


def _prefs_files(folder: Path, seed: int) -> tuple[Path, Path, Path]:
    """A run, preference judgements (1-3 judgement groups of 1-3 sub-groups per query, each
    group's levels drawn once so that trec_eval's consistency checks hold, level 0 frequent)
    and the same documents as judgement groups (``qid jg docno level``)."""
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
    for name, lines in (("run", run), ("prefs", prefs), ("groups", groups),
                        ("qrels_prefs", qrels_prefs)):  # fmt: skip
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder / "prefs", folder / "groups", folder / "run"


PREFS_OPTIONS = [
    ["-q", "-m", "all_prefs", "-R", "prefs"],
    ["-q", "-m", "all_prefs", "-R", "prefs", "-M4"],
    ["-m", "prefs", "-R", "prefs", "-c"],
    ["-q", "-m", "all_prefs", "-R", "qrels_prefs"],
    ["-q", "-m", "qrels_jg", "-R", "qrels_jg"],
    ["-q", "-m", "qrels_jg", "-R", "qrels_jg", "-l2", "-M5", "-mP_avgjg.1,3"],
    ["-q", "-m", "qrels_jg", "-R", "qrels_jg", "-J", "-c"],
]


@pytest.mark.parametrize("seed", range(12))
def test_preference_and_group_outputs_equal_trec_eval_s(
    seed: int, trec_eval: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefs, groups, run = _prefs_files(tmp_path, seed)
    for options in PREFS_OPTIONS:
        judged = {"prefs": prefs, "qrels_prefs": tmp_path / "qrels_prefs", "qrels_jg": groups}[
            options[options.index("-R") + 1]
        ]
        if "-c" in options:  # a judged query the run lacks: trec_eval's stand-in document
            extra = "zz u0 s0 a 1\nzz u0 s0 b 0\n" if judged == prefs else "zz u0 a 1\n"
            judged.write_text(judged.read_text() + extra)
        theirs = subprocess.run(
            [str(trec_eval), *options, str(judged), str(run)], capture_output=True, check=True
        ).stdout.decode()
        assert main(["trec-eval", *options, str(judged), str(run)]) == 0
        assert capsys.readouterr().out == theirs, options

"""Speaker-level bootstrap intervals of the EER and minDCF (issue 47): the definition of
docs/metrics.md on a case checked by hand, equal to its twin, deterministic for a seed."""

from __future__ import annotations

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.formats.speakers import parse_speakers, trial_speakers
from audiorepro.formats.trials import parse_trials
from audiorepro.metrics.verification_bootstrap import speaker_bootstrap
from audiorepro.reference import verification as twin

# Speakers A and B: a target trial of each (0.9 for A, 0.4 for B) and one non-target (0.5).
HAND = ([0.9, 0.4, 0.5], [True, True, False], ["A", "B", "A"], ["A", "B", "B"])


def test_two_speakers_by_hand() -> None:
    """Drawing A twice (or B twice) leaves only that speaker's target trial: no non-target
    trial, skipped. Drawing A and B keeps every trial once: ROC points (F, M) (0, 1)
    (0, 1/2) (1, 1/2) (1, 0), crossing F = M at 1/2; minDCF: the least of p M + (1 - p) F
    is p / 2 at (0, 1/2), normalized by p: 1/2. So every counted resample is 0.5, and the
    skipped ones are the draws of one speaker twice from default_rng(7)."""
    scores, target, enr, test = HAND
    r = speaker_bootstrap(scores, target, enr, test, resamples=40, seed=7)
    rng = np.random.default_rng(7)
    same = sum(len(set(rng.integers(0, 2, size=2).tolist())) == 1 for _ in range(40))
    assert r.n_speakers == 2 and r.skipped == same and 0 < same < 40
    assert r.values["eer"].tolist() == [0.5] * (40 - same)
    assert r.intervals == {"eer": (0.5, 0.5), "min_dcf_p0.01": (0.5, 0.5),
                           "min_dcf_p0.05": (0.5, 0.5)}  # fmt: skip


def _drawn(seed: int) -> tuple[list[float], list[bool], list[str], list[str]]:
    rng = np.random.default_rng(seed)
    spk = [f"s{i}" for i in range(7)]
    enr = [spk[int(i)] for i in rng.integers(0, 7, size=80)]
    test = [spk[int(i)] if rng.random() < 0.6 else e for i, e in
            zip(rng.integers(0, 7, size=80), enr, strict=True)]  # fmt: skip
    target = [e == t for e, t in zip(enr, test, strict=True)]
    scores = (rng.normal(size=80) + np.asarray(target)).round(2).tolist()  # ties, as float32
    return scores, target, enr, test


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_to_the_twin(seed: int) -> None:
    scores, target, enr, test = _drawn(seed)
    ours = speaker_bootstrap(scores, target, enr, test, resamples=60, seed=seed, level=0.9)
    theirs = twin.speaker_bootstrap(scores, target, enr, test, resamples=60, seed=seed,
                                    level=0.9)  # fmt: skip
    for name, got in ours.intervals.items():
        assert got is not None and theirs[name] is not None
        assert got == pytest.approx(theirs[name], abs=1e-12), name


def test_deterministic_for_a_seed_and_moved_by_another() -> None:
    scores, target, enr, test = _drawn(5)
    one = speaker_bootstrap(scores, target, enr, test, resamples=50, seed=3)
    two = speaker_bootstrap(scores, target, enr, test, resamples=50, seed=3)
    other = speaker_bootstrap(scores, target, enr, test, resamples=50, seed=4)
    assert one.intervals == two.intervals and one.intervals != other.intervals
    assert np.array_equal(one.values["eer"], two.values["eer"])


def test_speakers_of_a_voxceleb_list_and_of_a_speakers_file() -> None:
    vox = parse_trials("1 id1/a/1.wav id1/b/2.wav\n0 id1/a/1.wav id2/c/3.wav\n", source="v")
    assert trial_speakers(vox, None, source="v") == (["id1", "id1"], ["id1", "id2"])
    kit = parse_trials("enrollment,test,target\na.wav,b.wav,1\na.wav,c.wav,0\n", source="t")
    table = parse_speakers("file_name,speaker\na.wav,s1\nb.wav,s1\nc.wav,s2\n", source="spk")
    assert trial_speakers(kit, table, source="spk") == (["s1", "s1"], ["s1", "s2"])
    with pytest.raises(UserError, match=r"lacks clip 'c\.wav'"):
        trial_speakers(kit, {"a.wav": "s1", "b.wav": "s1"}, source="spk")
    with pytest.raises(UserError, match="target trial of two speakers"):
        trial_speakers(kit, {"a.wav": "s1", "b.wav": "s2", "c.wav": "s2"}, source="spk")
    with pytest.raises(UserError, match="lacks column 'speaker'"):
        parse_speakers("file_name\na.wav\n", source="spk")

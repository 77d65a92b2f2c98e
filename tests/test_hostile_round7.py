"""Hostile round 7: round 6's open defects, then ``verify`` and ``diff`` attacked across the
kinds (retrieval, probe, zero-shot, linear probe, speaker verification, HEAR) where they could
give a false PASS: rows dropped or repeated, non-finite numbers, published values in odd
spellings, tolerances, a bundle missing files, renamed keys, a bundle of another study,
symbolic links, huge inputs. Each case asserts the right outcome; those marked "fixed" failed
before their fix.
"""

from __future__ import annotations

import pytest

from audiorepro.formats.trials import parse_trials

# --- round 6's open defects -----------------------------------------------------------------


@pytest.mark.parametrize("first", ["0", "1"])
def test_a_nist_key_whose_first_model_is_0_or_1_is_a_nist_key(first: str) -> None:
    """fixed: the form was told by the first field alone, so a key whose first model id is
    ``0`` or ``1`` was read as a VoxCeleb list (its label words taken for clip names)."""
    text = f"{first} seg_a target\n{first} seg_b nontarget\nm2 seg_a nontarget\n"
    trials = parse_trials(text, source="key")
    assert trials.format == "nist"
    assert trials.enrollment == (first, first, "m2")
    assert trials.test == ("seg_a", "seg_b", "seg_a")
    assert trials.target.tolist() == [True, False, False]


def test_a_voxceleb_list_is_still_a_voxceleb_list() -> None:
    trials = parse_trials("1 id1/a.wav id1/b.wav\n0 id1/a.wav id2/c.wav\n", source="veri.txt")
    assert trials.format == "voxceleb"
    assert trials.test == ("id1/b.wav", "id2/c.wav")

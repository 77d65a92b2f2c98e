"""Trial lists as published (issue 47 item 1): VoxCeleb's lists, NIST-style keys and the kit's
CSV read as they are, each to the same trials; what is refused is one line naming the file and
the row (:mod:`audiorepro.formats.trials`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audiorepro.core.errors import UserError
from audiorepro.formats.trials import parse_trials, read_trials

#: (enrollment, test, target): VoxCeleb1-style relative paths.
PAIRS = [
    ("id10270/x6uYqmx31kE/00001.wav", "id10270/8jEAjG6SegY/00008.wav", True),
    ("id10270/x6uYqmx31kE/00001.wav", "id10300/ize_eiCFEg0/00003.wav", False),
    ("id10300/ize_eiCFEg0/00003.wav", "id10300/2CA4dUoYqYc/00001.wav", True),
    ("id10309/0cYFdtyWVds/00005.wav", "id10270/8jEAjG6SegY/00008.wav", False),
]


def _csv() -> str:
    return "enrollment,test,target\n" + "".join(f"{a},{b},{int(t)}\n" for a, b, t in PAIRS)


def _voxceleb(sep: str = " ", end: str = "\n") -> str:
    return "".join(f"{int(t)}{sep}{a}{sep}{b}{end}" for a, b, t in PAIRS)


def _nist() -> str:
    return "".join(f"{a} {b} {'target' if t else 'nontarget'}\n" for a, b, t in PAIRS)


@pytest.mark.parametrize(
    ("form", "text"),
    [
        ("csv", _csv()),
        ("voxceleb", _voxceleb()),
        ("voxceleb", _voxceleb("\t", "\r\n")),  # tabs and Windows line ends
        ("voxceleb", "\n" + _voxceleb("  ").rstrip("\n")),  # a blank first line, no last newline
        ("nist", _nist()),
    ],
)
def test_every_form_reads_to_the_same_trials(form: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "list.txt"
    path.write_bytes(text.encode())
    trials = read_trials(path)
    assert trials.format == form
    assert list(zip(trials.enrollment, trials.test, trials.target.tolist(), strict=True)) == PAIRS
    rows = [n for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    assert list(trials.rows) == (rows[1:] if form == "csv" else rows)


def test_a_voxceleb_list_names_clips_as_a_dump_keeps_them() -> None:
    trials = parse_trials(_voxceleb(), source="veri_test2.txt")
    ids = sorted({c for a, b, _ in PAIRS for c in (a, b)})
    i, j = trials.indices(ids)
    assert [ids[k] for k in i] == [a for a, _, _ in PAIRS]
    assert [ids[k] for k in j] == [b for _, b, _ in PAIRS]
    with pytest.raises(UserError) as err:
        trials.indices([c for c in ids if c != PAIRS[0][0]])
    assert str(err.value).count("\n") == 0
    assert "veri_test2.txt: key 'row 1.enrollment': names clip 'id10270/x6uYqmx31kE/00001.wav'" in (
        str(err.value)
    )


REFUSED = {
    "a clip with itself": ("1 a.wav b.wav\n0 a.wav c.wav\n1 c.wav c.wav\n",
                           "key 'row 3.test': compares clip 'c.wav' with itself"),
    "a pair twice, reversed, other label": ("1 a.wav b.wav\n0 a.wav c.wav\n0 b.wav a.wav\n",
                                            "key 'row 3': repeats the trial of row 1"),
    "a label of another form": ("1 a.wav b.wav\ntarget a.wav c.wav\n",
                                "key 'row 2.target': is 'target'; expected 1"),
    "a NIST label VoxCeleb does not use": ("m a.wav target\nm b.wav impostor\n",
                                           "key 'row 2.target': is 'impostor'; expected target"),
    "a line of four fields": ("1 a.wav b.wav\n0 a.wav c.wav x\n",
                              "key 'row 2': has 4 fields; expected three"),
    "a CSV line after a VoxCeleb line": ("1 a.wav b.wav\n0,a.wav,c.wav\n",
                                         "key 'row 2': has 1 fields; expected three"),
    "only target trials (NIST)": ("m a.wav target\nm b.wav target\n",
                                  "key 'target': has only target trials (2)"),
    "only non-target trials": ("0 a.wav b.wav\n",
                               "expected at least one target trial (target = 1)"),
    "no trial list at all": ("hello world\n", "key 'row 1': is no trial list"),
    "an empty file": ("\n\n", "is empty; expected a CSV header"),
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_is_refused_is_one_line(case: str, tmp_path: Path) -> None:
    text, message = REFUSED[case]
    path = tmp_path / "list.txt"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        read_trials(path)
    assert str(err.value).count("\n") == 0
    assert f"{path}: " in str(err.value) and message in str(err.value), str(err.value)


def test_nist_only_non_target_names_its_own_label() -> None:
    with pytest.raises(UserError, match=r"expected at least one target trial \(target = target\)"):
        parse_trials("m a.wav nontarget\n", source="key")


def test_a_million_line_voxceleb_list_reads_whole() -> None:
    """A VoxCeleb-format list of a million synthetic trials (1,500 clips, every pair once at
    most) is read as it is: counts, labels and the last line's row."""
    rng = np.random.default_rng(0)
    n_clips = 1500
    i, j = np.triu_indices(n_clips, k=1)
    pick = rng.choice(i.size, size=1_000_000, replace=False)
    labels = rng.random(pick.size) < 0.5
    text = "".join(
        f"{int(t)} id{a // 10:05d}/v/{a:05d}.wav id{b // 10:05d}/v/{b:05d}.wav\n"
        for a, b, t in zip(i[pick].tolist(), j[pick].tolist(), labels.tolist(), strict=True)
    )
    trials = parse_trials(text, source="big.txt")
    assert trials.format == "voxceleb" and trials.target.tolist() == labels.tolist()
    assert len(trials.test) == 1_000_000 and trials.rows[-1] == 1_000_000
    assert len(trials.clips()) <= n_clips

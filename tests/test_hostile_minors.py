"""Hostile inputs of issue 24's minor list that are neither fetch's nor JSON's: each one line,
exit 2, nothing written (tracebacks before): a ``.npy`` header cut inside its dict, a thread
count in digits ``int()`` refuses, published probe paths naming a target's name field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_hostile import _dump_with, _fresh, _one_line, _probe_study_with_saved, _run

#: Cut inside the header's dict: numpy's header parser tokenizes it and the tokenizer raised
#: ``tokenize.TokenError`` (an unterminated string, an unclosed brace).
CUT_HEADERS = {
    "cut-in-a-string": b"{'descr': '<f4",
    "cut-after-a-brace": b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,",
}


@pytest.mark.parametrize("case", sorted(CUT_HEADERS))
def test_a_npy_header_cut_inside_its_dict_is_one_line(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = CUT_HEADERS[case] + b"\n"
    member = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text
    dump = _dump_with(tmp_path / "d.npz", zz=member)
    code, err = _run(["metrics", str(dump), "--json", str(tmp_path / "m.json")], capsys)
    assert code == 2, err
    _one_line(err, "d.npz", "zz", "header")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("value", ["²", "١", "9" * 5000, "0", "-1", " 2"])
def test_a_thread_count_in_other_digits_is_one_line(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``str.isdigit`` takes superscripts and other scripts' digits, which ``int`` refuses (or
    5000 digits, beyond int's limit): a traceback before."""
    from audiorepro.core.errors import UserError
    from audiorepro.core.threads import cpu_threads

    monkeypatch.setenv("AUDIOREPRO_CPU_THREADS", value)
    with pytest.raises(UserError, match="AUDIOREPRO_CPU_THREADS"):
        cpu_threads()
    monkeypatch.setenv("AUDIOREPRO_CPU_THREADS", "4")
    assert cpu_threads() == 4


@pytest.mark.parametrize(
    "path", ["test/per_score/valence/score", "test/family/v/score", "test/per_score/a/b/score"]
)
def test_a_published_path_to_a_targets_name_is_refused_at_load(
    tmp_path: Path, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``per_score/<target>/score`` is the target's name (a string): verify compared it as a
    number (a ValueError traceback); ``family/<family>/score`` was NOT VERIFIED, exit 1."""
    study, _ = _probe_study_with_saved(_fresh(tmp_path / "in"))
    published = tmp_path / "in" / "pub.toml"
    published.write_text(
        'schema = "audiorepro.probe-published/1"\n[[run]]\nrun = "r"\ntolerance = 5e-5\n'
        f'values = {{ "{path}" = 0.5 }}\n',
        encoding="utf-8",
    )
    code, err = _run(["verify", str(study), "--golden", str(published)], capsys)
    assert code == 2, err
    _one_line(err, "pub.toml", path, "'score'")

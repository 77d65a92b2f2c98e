"""Hostile round 4 (issue 35, item 5): every class the round found, each with a test that
failed before its fix. Each bad input is one line on stderr naming the file (or the argument),
exit 2, no traceback, nothing written; the Python API raises :class:`audiorepro.UserError` (a
``ValueError``) naming the argument.

:data:`ROUND4` is the registry: every class of the round, and the test (here or in the
registries of :mod:`tests.test_hostile`, :mod:`tests.test_hostile_diff` and
:mod:`tests.test_hostile_trec`) that runs it. ``test_every_round4_class_has_a_test`` keeps it
honest: each test it names exists.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from audiorepro.cli import main
from tests.conftest import FIXTURES
from tests.test_hostile import PREDICTIONS, _golden, _one_line, _run

DUMP = FIXTURES / "dumps" / "synthetic_5cap.npz"

# --- writes never replace a non-regular file ------------------------------------------------


def _symlink(path: Path) -> Callable[[], bool]:
    """A symbolic link to a file holding ``keep``: still a link, and the file unchanged."""
    target = path.with_name(path.name + ".target")
    target.write_text("keep")
    path.symlink_to(target.name)
    return lambda: path.is_symlink() and target.read_text() == "keep"


def _dangling(path: Path) -> Callable[[], bool]:
    path.symlink_to(path.name + ".nowhere")
    return lambda: path.is_symlink() and not path.with_name(path.name + ".nowhere").exists()


def _fifo(path: Path) -> Callable[[], bool]:
    os.mkfifo(path)
    return lambda: stat.S_ISFIFO(os.lstat(path).st_mode)


def _folder(path: Path) -> Callable[[], bool]:
    path.mkdir()
    return lambda: path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def _device(path: Path) -> Callable[[], bool]:
    """A character device like /dev/null (1, 3), made in the test's folder (root only): the
    real /dev/null is never touched."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return lambda: stat.S_ISCHR(os.lstat(path).st_mode)


#: What an output path is: name -> (make it, then a check that it is still what it was).
NON_REGULAR: dict[str, Callable[[Path], Callable[[], bool]]] = {
    "symlink": _symlink,
    "dangling-symlink": _dangling,
    "fifo": _fifo,
    "folder": _folder,
    "device": _device,
}

#: Every output-file option: name -> argv given the output path and a work folder.
OUTPUT_OPTIONS: dict[str, Callable[[Path, Path], list[str]]] = {
    "metrics --json": lambda p, t: ["metrics", str(DUMP), "--json", str(p)],
    "parity --json": lambda p, t: ["parity", str(DUMP), "--json", str(p)],
    "explain --json": lambda p, t: ["explain", str(DUMP), "--json", str(p)],
    "probe-metrics --json": lambda p, t: ["probe-metrics", str(PREDICTIONS), "--json", str(p)],
    "verify --json": lambda p, t: [
        "verify", "--golden", str(_golden(t, DUMP)), "--dumps", str(DUMP.parent), "--json", str(p),
    ],
    "list --json": lambda p, t: ["list", "profiles", "--json", str(p)],
    "diff --json": lambda p, t: ["diff", str(t / "a.json.gz"), str(t / "b.json.gz"), "--json",
                                 str(p)],
    "diff --html": lambda p, t: ["diff", str(t / "a.json.gz"), str(t / "b.json.gz"), "--html",
                                 str(p)],
    "extract --out": lambda p, t: ["extract", "--model", "m", "--audio", str(t), "--captions",
                                   str(t / "c.csv"), "--out", str(p)],
    "extract-part --out": lambda p, t: ["extract-part", str(t / "s.toml"), "--cell", "c",
                                        "--shard", "0/2", "--key", "k", "--out", str(p)],
    "merge --out": lambda p, t: ["merge", str(DUMP), "--out", str(p)],
    "identity --write-golden": lambda p, t: ["identity", "--a", "m", "--write-golden", str(p)],
    "identity --json": lambda p, t: ["identity", "--a", "m", "--b", "n", "--json", str(p)],
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(NON_REGULAR))
@pytest.mark.parametrize("option", sorted(OUTPUT_OPTIONS))
def test_an_output_path_that_is_no_regular_file_is_refused_not_replaced(
    tmp_path: Path, option: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json PATH`` (every output option) wrote beside PATH and renamed over it: a
    symbolic link, a FIFO or a device node (as root, ``--json /dev/null``: the system's
    /dev/null) became a regular file. Refused when the option is read, before any work."""
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "out.json"
    unchanged = NON_REGULAR[kind](out)
    code, err = _run(OUTPUT_OPTIONS[option](out, work), capsys)
    assert code == 2, err
    _one_line(err, "out.json", "expected a regular file")
    assert unchanged(), f"{option} replaced the {kind}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["work", "out.json", *(["out.json.target"] if kind == "symlink" else [])]
    ), "something was written"


def test_the_writer_itself_refuses_a_non_regular_file(tmp_path: Path) -> None:
    """Below the command line (the Python API, a run's own outputs), the one writer refuses
    too, and leaves no temporary file."""
    from audiorepro.core.errors import WriteError
    from audiorepro.core.io import atomic_write_bytes

    for kind, make in sorted(NON_REGULAR.items()):
        path = tmp_path / kind
        unchanged = make(path)
        with pytest.raises(WriteError, match="expected a regular file"):
            atomic_write_bytes(path, b"x")
        assert unchanged(), kind
    atomic_write_bytes(tmp_path / "plain", b"x")  # a regular file is replaced as before
    atomic_write_bytes(tmp_path / "plain", b"y")
    assert (tmp_path / "plain").read_bytes() == b"y"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


#: Output-folder options: a FIFO, a device or a link to a file is no folder.
OUTPUT_FOLDERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "reproduce --out": lambda p, t: ["reproduce", str(t / "s.toml"), "--out", str(p)],
    "slurm-template --out": lambda p, t: ["slurm-template", str(t / "s.toml"), "--out", str(p)],
    "tiny-models --out": lambda p, t: ["tiny-models", "--out", str(p)],
    "evaluate --out": lambda p, t: ["evaluate", "m", "d", "--out", str(p)],
}


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
@pytest.mark.parametrize("option", sorted(OUTPUT_FOLDERS))
def test_an_output_folder_that_is_no_folder_is_refused(
    tmp_path: Path, option: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_outputs_folder import _study

    work = tmp_path / "work"
    work.mkdir()
    _study(work).rename(work / "s.toml")
    out = tmp_path / "out"
    unchanged = NON_REGULAR[kind](out)
    code, err = _run(OUTPUT_FOLDERS[option](out, work), capsys)
    assert code == 2, err
    _one_line(err, "out")
    assert unchanged(), f"{option} replaced the {kind}"


# --- trec-eval: numbers as trec_eval's atol/atof read them, or a refusal -----------------------

_QRELS = "1 0 a {a}\n1 0 b 2\n1 0 c 0\n"
_RUN = "1 Q0 a 1 {a} r\n1 Q0 b 2 0.5 r\n1 Q0 c 3 0.25 r\n"
#: A hostile field, and what audiorepro documents for it (CHANGELOG.md: "Numbers are read as
#: trec_eval reads them, C's atol and atof on ASCII: the leading number, 0 when there is none";
#: a level beyond ``formats.trec.MAX_LEVEL`` is refused naming line and field): the ASCII text
#: trec_eval's atol/atof read it as, or None where it is refused. Python's int() and float()
#: read ``1_0`` as 10 and an Arabic-Indic or fullwidth digit as that digit; 400 digits raised
#: OverflowError (trec_eval's strtol reads LONG_MAX, a level audiorepro refuses).
TREC_NUMBERS: dict[str, tuple[str, str, str | None]] = {
    "qrels-underscore-level": ("qrels", "1_0", "1"),
    "qrels-arabic-indic-level": ("qrels", "\u0661", "0"),
    "qrels-fullwidth-level": ("qrels", "\uff11", "0"),
    "qrels-400-digit-level": ("qrels", "1" * 400, None),
    "run-underscore-score": ("run", "0_9", "0"),
    "run-arabic-indic-score": ("run", "\u0660.\u0669", "0"),
    "run-fullwidth-score": ("run", "\uff10.9", "0"),
}


def _trec(tmp: Path, which: str, value: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    qrels, run = tmp / "qrels.txt", tmp / "run.txt"
    qrels.write_text(_QRELS.format(a=value if which == "qrels" else "1"), encoding="utf-8")
    run.write_text(_RUN.format(a=value if which == "run" else "0.9"), encoding="utf-8")
    code = main(["trec-eval", "-q", "-m", "ndcg", "-m", "map", str(qrels), str(run)])
    captured = capsys.readouterr()
    return code, captured.out if code == 0 else captured.err


@pytest.mark.parametrize("case", sorted(TREC_NUMBERS))
def test_a_trec_number_is_read_as_trec_eval_reads_it_or_refused(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each input gets its documented outcome, not either one: the values trec_eval gives
    (the field read by atol/atof: the same output as the ASCII text it reads, and not the
    output of the number Python would read) or, for the 400-digit level, one line naming the
    file, the line and the field, exit 2; never another number (``1_0`` was 10, exit 0) or a
    traceback (400 digits: OverflowError)."""
    which, value, as_read = TREC_NUMBERS[case]
    code, text = _trec(tmp_path, which, value, capsys)
    if as_read is None:
        assert code == 2, text
        field = "rel" if which == "qrels" else "score"
        _one_line(text, f"{which}.txt", "line 1", f"'{field}'")
        return
    assert code == 0, text
    _, expected = _trec(tmp_path, which, as_read, capsys)
    assert text == expected, f"{value!r} was not read as trec_eval reads it ({as_read!r})"
    python_reads = str(float(value) if which == "run" else int(value))
    if python_reads != as_read:
        assert text != _trec(tmp_path, which, python_reads, capsys)[1], "read as Python reads it"


def test_ascii_trec_numbers_read_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base of the classes: ASCII levels and scores (a sign, an exponent) evaluate."""
    code, text = _trec(tmp_path, "run", "+9e-1", capsys)
    assert code == 0, text
    assert text == _trec(tmp_path, "run", "0.9", capsys)[1]
    assert "ndcg" in text


def test_a_measure_set_with_parameters_names_the_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-m official.5`` said "measure 'official.5' takes no cutoffs; expected runid": the
    first measure of the set, not what was given."""
    qrels, run = tmp_path / "q", tmp_path / "r"
    qrels.write_text(_QRELS.format(a="1"))
    run.write_text(_RUN.format(a="0.9"))
    for spec in ("official.5", "all_trec.10"):
        assert main(["trec-eval", "-m", spec, str(qrels), str(run)]) == 2
        err = capsys.readouterr().err
        _one_line(err, "-m", repr(spec.partition(".")[0]))
        assert "runid" not in err, err


# --- the Python API: audiorepro.UserError (a ValueError) naming the argument -------------------

_E = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
_S = [[0.9, 0.1, 0.5], [0.2, 0.2, 0.7]]
#: name -> (the call, the argument its error must name). Each returned a number or raised
#: another exception (TypeError, IndexError, ZeroDivisionError, numpy's ValueError) before.
API_CASES: dict[str, tuple[Callable[[], object], str]] = {
    "relevance-float-indices": (
        lambda: _api().retrieval_metrics(_E, _E, relevance=[[0.9], [1.2], [2.0]]),
        "relevance",
    ),
    "relevance-float-array": (
        lambda: _api().retrieval_metrics(_E, _E, relevance=_np().array([[0.0], [1.0], [2.0]])),
        "relevance",
    ),
    "relevance-a-number": (lambda: _api().retrieval_metrics(_E, _E, relevance=5), "relevance"),
    "relevance-none-item": (
        lambda: _api().retrieval_metrics(_E, _E, relevance=[None, [1], [2]]),
        "relevance",
    ),
    "relevance-text": (lambda: _api().retrieval_metrics(_E, _E, relevance="abc"), "relevance"),
    "relevance-negative": (
        lambda: _api().retrieval_metrics(_E, _E, relevance=[[0], [1], [-1]]),
        "relevance",
    ),
    "audio-ragged": (
        lambda: _api().retrieval_metrics([[1.0, 0.0], [1.0]], _E, text_to_audio=[0, 1, 2]),
        "audio_embeds",
    ),
    "text-to-audio-ragged": (
        lambda: _api().retrieval_metrics(_E, _E, text_to_audio=[[0], [1, 2], 2]),
        "text_to_audio",
    ),
    "explain-float-relevance": (
        lambda: _api().explain(_E, _E, relevance=[[0.5], [1], [2]]),
        "relevance",
    ),
    "parity-float-relevance": (
        lambda: _api().parity(_E, _E, relevance=[[0.5], [1], [2]]),
        "relevance",
    ),
    "scores-nan": (lambda: _api().score_metrics([[float("nan"), 0.5, 0.1]], [[0]]), "scores"),
    "scores-inf": (lambda: _api().score_metrics([[float("inf"), 0.5, 0.1]], [[1]]), "scores"),
    "scores-ragged": (lambda: _api().score_metrics([[0.1, 0.2], [0.3]], [[0], [0]]), "scores"),
    "scores-empty": (lambda: _api().score_metrics([], []), "scores"),
    "scores-0-d": (lambda: _api().score_metrics(0.5, [[0]]), "scores"),
    "scores-3-d": (lambda: _api().score_metrics([[[0.5]]], [[0]]), "scores"),
    "scores-text": (lambda: _api().score_metrics([["a", "b"]], [[0]]), "scores"),
    "relevant-shorter-than-scores": (lambda: _api().score_metrics(_S, [[0]]), "relevant"),
    "relevant-longer-than-scores": (lambda: _api().score_metrics(_S, [[0], [1], [2]]), "relevant"),
    "relevant-negative-index": (lambda: _api().score_metrics(_S, [[-1], [1]]), "relevant"),
    "relevant-index-beyond": (lambda: _api().score_metrics(_S, [[3], [1]]), "relevant"),
    "relevant-float-index": (lambda: _api().score_metrics(_S, [[0.0], [1.0]]), "relevant"),
    "relevant-bool-index": (lambda: _api().score_metrics(_S, [[True], [1]]), "relevant"),
    "relevant-a-number": (lambda: _api().score_metrics(_S, 5), "relevant"),
    "relevant-none-item": (lambda: _api().score_metrics(_S, [None, [1]]), "relevant"),
    "relevant-empty-query": (lambda: _api().score_metrics(_S, [[0], []]), "relevant"),
    "relevant-repeated-index": (lambda: _api().score_metrics(_S, [[0, 0], [1]]), "relevant"),
    "parity-tolerance-negative": (
        lambda: _api().parity(_E, _E, text_to_audio=[0, 1, 2], tolerance=-1),
        "tolerance",
    ),
    "parity-tolerance-nan": (
        lambda: _api().parity(_E, _E, text_to_audio=[0, 1, 2], tolerance=float("nan")),
        "tolerance",
    ),
}


def _api() -> object:
    import audiorepro

    return audiorepro


def _np() -> object:
    import numpy

    return numpy


@pytest.mark.parametrize("case", sorted(API_CASES))
def test_a_malformed_api_argument_raises_user_error_naming_it(case: str) -> None:
    import audiorepro

    call, argument = API_CASES[case]
    with pytest.raises(audiorepro.UserError, match=f"'{argument}'") as info:
        call()
    assert isinstance(info.value, ValueError)
    assert len(str(info.value).splitlines()) == 1


def test_the_api_still_takes_what_it_took() -> None:
    """The base of the classes: lists, tuples and numpy arrays of integer indices."""
    import numpy as np

    import audiorepro

    a = audiorepro.score_metrics(_S, [[0], [1]])
    assert audiorepro.score_metrics(np.array(_S), np.array([[0], [1]])).metrics == a.metrics
    assert audiorepro.score_metrics(_S, ((0,), (np.int64(1),))).metrics == a.metrics
    e = audiorepro.retrieval_metrics(_E, _E, relevance=np.array([[0], [1], [2]]))
    assert e.metrics == audiorepro.retrieval_metrics(_E, _E, text_to_audio=[0, 1, 2]).metrics
    assert audiorepro.parity(_E, _E, text_to_audio=[0, 1, 2], tolerance=0).passed
    assert issubclass(audiorepro.UserError, ValueError)


# --- minors: one line, exit 2, nothing written -------------------------------------------------


@pytest.mark.parametrize(
    "formula",
    ["sum({jobs:jobs[*]})", "mean({jobs:jobs[*]}) / 2", "sum({jobs:jobs[*]} * 2)",
     "sum({jobs:jobs[*].ElapsedRaw}) + sum({jobs:jobs[*]})"],
)  # fmt: skip
def test_a_formula_over_whole_records_is_one_line(
    tmp_path: Path, formula: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sum({jobs:jobs[*]})`` summed the job records with Python's sum: a TypeError
    traceback. Now the study's formula key, and what it met."""
    from tests.test_hostile_layout import _copy, _refused

    study = _copy(tmp_path, formula)
    _refused(study, capsys, str(study), "key 'derived[0].formula'", "a record where a number")


def test_count_of_records_still_counts() -> None:
    from audiorepro.runner.kinds.probe.derived import evaluate, parse_formula, values_at

    doc = {"jobs": [{"a": 1}, {"a": 2}, None]}
    f = parse_formula("count({j:jobs[*]})", source=Path("s.toml"), key="k")
    assert evaluate(f, lambda r: values_at(doc, r.path, "j.json")) == 2.0


def _openssh_key(cipher: str) -> str:
    """An OpenSSH private key file naming ``cipher`` (with bcrypt as ssh-keygen writes an
    encrypted one; the encrypted part is random bytes: it is never decrypted)."""
    import base64
    import struct

    def string(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    public = string(b"ssh-ed25519") + string(bytes(32))
    kdf = (b"bcrypt", string(bytes(16)) + struct.pack(">I", 24)) if cipher != "none" else (
        b"none", b"")  # fmt: skip
    blob = b"openssh-key-v1\0" + string(cipher.encode()) + string(kdf[0]) + string(kdf[1])
    blob += struct.pack(">I", 1) + string(public) + string(os.urandom(160))
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", *lines,
                      "-----END OPENSSH PRIVATE KEY-----"]) + "\n"  # fmt: skip


@pytest.mark.parametrize(
    "cipher", ["chacha20-poly1305@openssh.com", "aes256-ctr", "aes256-gcm@openssh.com"]
)
def test_an_encrypted_openssh_key_says_encrypted_whole(
    tmp_path: Path, cipher: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """chacha20-poly1305 was "cannot be read as a key (Unsupported cipher:
    b'chacha20-poly1305@openssh)": cut at its first '.', and not saying "encrypted"."""
    key = tmp_path / "id_ed25519"
    key.write_text(_openssh_key(cipher))
    out = tmp_path / "out"
    out.mkdir()
    code, err = _run(["sign", str(out), "--key", str(key)], capsys)
    assert code == 2, err
    _one_line(err, "id_ed25519", "encrypted", cipher, "decrypt a copy")
    assert not any(out.iterdir())


def test_evaluate_takes_a_plain_local_model_folder_as_its_help_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluate PATH``: --help says MODEL is "hf:ORG/NAME[@REV], laion:PATH, a registry name
    or a local folder"; a plain folder was refused as "neither a registry name nor hf:...".
    A folder is a Hugging Face model, absolute in the study file (it lives in OUT/cache); a
    registry name still wins over a folder of its name."""
    from audiorepro.core.errors import UserError
    from audiorepro.runner.evaluate import study_model

    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model" / "config.json").write_text("{}")
    (tmp_path / "clap.pt").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    assert study_model("my-model", None) == f"hf:{tmp_path / 'my-model'}"
    assert study_model(str(tmp_path / "my-model"), None) == f"hf:{tmp_path / 'my-model'}"
    with pytest.raises(UserError, match="neither a registry name"):
        study_model("clap.pt", None)  # a file names its kind: laion:clap.pt
    (tmp_path / "630k-audioset-best").mkdir()
    # the registry entry wins over the folder: it is not fetched, so the way out is named
    with pytest.raises(UserError, match="audiorepro fetch 630k-audioset-best"):
        study_model("630k-audioset-best", None)
    help_text = _help("evaluate")
    assert "a local folder" in " ".join(help_text.split())


def _help(command: str) -> str:
    from click.testing import CliRunner

    from audiorepro.cli import cli

    return CliRunner().invoke(cli, [command, "--help"]).output


@pytest.mark.parametrize("clip", ["silent", "rate-2147483647"])
@pytest.mark.parametrize("command", ["reproduce", "verify-study"])
def test_a_silent_or_absurd_rate_esc50_clip_is_one_line_before_any_model(
    tmp_path: Path,
    command: str,
    clip: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The zero-shot study's clips go through the same pre-check (it failed after the
    models loaded, or asked the resampler for a 320 GiB filter)."""
    import numpy as np
    import soundfile

    from tests.test_hostile import (
        _ESC50_VALID,
        ESC50_COMMANDS,
        _fresh,
        _no_model_building,
        _tone,
        _wav_bytes,
        _zeroshot_study,
    )

    _no_model_building(monkeypatch)
    folder, work = _fresh(tmp_path / "in"), _fresh(tmp_path / "work")
    (folder / "esc50.csv").write_text(_ESC50_VALID)
    study = _zeroshot_study(folder)
    tone = np.sin(np.arange(4410) / 7.0).astype(np.float32) * 0.5
    soundfile.write(folder / "audio" / "1-100-A-0.wav", tone, 44100)
    bad = folder / "audio" / "1-200-A-1.wav"
    if clip == "silent":
        soundfile.write(bad, np.zeros(4410, np.float32), 44100, subtype="PCM_16")
    else:
        bad.write_bytes(_wav_bytes(_tone(), rate=2147483647))
    cmd = ESC50_COMMANDS[command]
    code, err = _run(cmd.argv(study, work), capsys)
    assert code == 2, err
    _one_line(err, "1-200-A-1.wav", "silent" if clip == "silent" else "2147483647 Hz")
    assert not any(p.exists() for p in cmd.outputs(work))


# --- the registry of round 4 -------------------------------------------------------------------

#: Every class of hostile round 4 (issue 35) but the critical diff-derived-numbers one and the
#: verdicts (items 1-7): class -> (major or minor, the module, the test function that runs
#: it, and its case in that test's registry: "" when the test runs only this class).
_R4, _H, _D = "test_hostile_round4.py", "test_hostile.py", "test_hostile_diff.py"
_INPUTS = "test_every_malformed_input_is_one_line_for_every_command"
_API = "test_a_malformed_api_argument_raises_user_error_naming_it"
_DIFF = "test_hostile_run_is_one_line_exit_2_and_nothing_written"
_TREC = "test_a_trec_number_is_read_as_trec_eval_reads_it_or_refused"
ROUND4: dict[str, tuple[str, str, str, str]] = {
    "write-replaces-symlink-fifo-device": (
        "major",
        _R4,
        "test_an_output_path_that_is_no_regular_file_is_refused_not_replaced",
        "",
    ),
    "writer-replaces-non-regular-file": (
        "major",
        _R4,
        "test_the_writer_itself_refuses_a_non_regular_file",
        "",
    ),
    "output-folder-not-a-folder": (
        "major",
        _R4,
        "test_an_output_folder_that_is_no_folder_is_refused",
        "",
    ),
    "sample-rate-2147483647": ("major", _H, _INPUTS, "clip-rate-2147483647"),
    "sample-rate-1e8": ("major", _H, _INPUTS, "clip-rate-1e8"),
    "sample-rate-zero-shot": (
        "major",
        _R4,
        "test_a_silent_or_absurd_rate_esc50_clip_is_one_line_before_any_model",
        "",
    ),
    "bundle-million-numbers": ("major", _D, _DIFF, "a bundle of a million numbers"),
    "trec-underscore-and-other-digits": ("major", _R4, _TREC, ""),
    "api-float-relevance-indices": ("major", _R4, _API, "relevance-float-indices"),
    "api-nan-scores": ("major", _R4, _API, "scores-nan"),
    "api-relevant-shorter-than-scores": ("major", _R4, _API, "relevant-shorter-than-scores"),
    "api-negative-index": ("major", _R4, _API, "relevant-negative-index"),
    "trec-400-digit-level": ("minor", _R4, _TREC, "qrels-400-digit-level"),
    "bundle-5000-digit-integer": ("minor", _D, _DIFF, "a 5000-digit integer in a bundle"),
    "formula-sum-of-records": ("minor", _R4, "test_a_formula_over_whole_records_is_one_line", ""),
    "api-ragged-empty-0d-float-index": ("minor", _R4, _API, ""),
    "api-relevance-5-or-none": ("minor", _R4, _API, "relevance-a-number"),
    "diff-nested-symlink-loop": ("minor", _D, _DIFF, "a nested study linking back"),
    "against-another-study-after-publish": (
        "minor",
        _D,
        "test_a_hostile_baseline_stops_reproduce_before_any_work",
        "a folder of another study",
    ),
    "encrypted-openssh-key": (
        "minor",
        _R4,
        "test_an_encrypted_openssh_key_says_encrypted_whole",
        "",
    ),
    "captions-unterminated-quote": ("minor", _H, _INPUTS, "captions-unterminated-quote"),
    "all-zero-clip": ("minor", _H, _INPUTS, "clip-all-zero"),
    "text-file-as-laion": (
        "minor",
        _H,
        "test_every_malformed_checkpoint_is_one_line_before_any_model",
        "laion-text-file",
    ),
    "evaluate-plain-local-folder": (
        "minor",
        _R4,
        "test_evaluate_takes_a_plain_local_model_folder_as_its_help_says",
        "",
    ),
    "parity-tolerance-negative-or-nan": ("minor", _R4, _API, "parity-tolerance-nan"),
    "trec-measure-set-with-cutoffs": (
        "minor",
        _R4,
        "test_a_measure_set_with_parameters_names_the_set",
        "",
    ),
}


def test_every_round4_class_has_a_test() -> None:
    """Each class names a test function that exists and, where it is one case of a registry,
    a class that registry holds (its quoted name in the module)."""
    import ast

    assert len(ROUND4) == 26
    for name, (severity, module, func, case) in ROUND4.items():
        assert severity in ("major", "minor"), name
        text = (Path(__file__).parent / module).read_text(encoding="utf-8")
        tree = ast.parse(text)
        assert func in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, name
        assert not case or f'"{case}"' in text, (name, case)

"""Hostile inputs, as a registry (issue 14): for every file format a table of malformation
classes, each run against every command that reads that format, in the way scikit-learn's
common tests run every check on every estimator. Each must give exit 2, one line on stderr
naming the file (and the key where there is one), no traceback, and no output left behind.

Adding a format or a command here gives it every class for free. The inflating-dump class also
runs under a memory ceiling (a subprocess with ``RLIMIT_AS``), and hypothesis writes malformed
TOML studies and npz archives on top of the hand-written classes.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audiorepro.cli import main
from tests.conftest import FIXTURES, ROOT

DUMP = FIXTURES / "dumps" / "synthetic_5cap.npz"
PREDICTIONS = FIXTURES / "probe" / "clap-linear__crema-like.npz"
#: The npz file being made (a test's format): its valid arrays are the base of each class.
_BASE = [DUMP]


def _arrays() -> dict[str, np.ndarray]:
    with np.load(_BASE[0], allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)  # type: ignore[no-untyped-call]
    return buf.getvalue()


def _zip(path: Path, members: list[tuple[str, bytes]], *, deflate: bool = False) -> Path:
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": the point of one class
        with zipfile.ZipFile(path, "w", compression=method) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return path


def _with_array(key: str, change: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], Path]:
    return lambda p: _dump_with(p, **{key: _npy(change(_arrays()[key]))})


def _dump_with(path: Path, **replace: bytes) -> Path:
    members = {f"{k}.npy": _npy(v) for k, v in _arrays().items()}
    members.update({f"{k}.npy": v for k, v in replace.items()})
    return _zip(path, sorted(members.items()))


def _meta(text: str) -> bytes:
    return _npy(np.asarray(text))


def _header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (63 - len(header) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def _bomb(path: Path, size: int = 64 << 20) -> Path:
    """A dump whose audio_embeds inflate to ``size`` bytes from a few kilobytes."""
    members = {f"{k}.npy": _npy(v) for k, v in _arrays().items() if k != "audio_embeds"}
    rows = size // (4 * 64)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(members.items()):
            zf.writestr(name, data)
        with zf.open("audio_embeds.npy", "w", force_zip64=True) as member:
            member.write(_header((rows, 64)))
            block = bytes(1 << 20)
            for _ in range(size >> 20):
                member.write(block)
    return path


#: Malformation classes of every .npz format (dumps, prediction files): name -> (make the
#: file, what stderr must name besides the file).
NPZ_CLASSES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "not-a-zip": (lambda p: (p.write_bytes(b"hello"), p)[1], ""),
    "truncated": (lambda p: (p.write_bytes(DUMP.read_bytes()[:500]), p)[1], ""),
    "fifo": (_fifo, "FIFO"),
    "folder": (_folder, "folder"),
    "garbage-npy-header": (
        lambda p: _dump_with(p, zz=b"\x93NUMPY\x01\x00\x10\x00{garbage!!!!!!\n"),
        "zz",
    ),
    "huge-declared-array": (
        lambda p: _dump_with(p, zz=_header((1 << 20, 1 << 20)) + bytes(64)),
        "zz",
    ),
    "short-data": (lambda p: _dump_with(p, zz=_npy(np.zeros((4, 4), np.float32))[:-8]), "zz"),
    "duplicate-member": (
        lambda p: _zip(
            p,
            [(f"{k}.npy", _npy(v)) for k, v in sorted(_arrays().items())]
            + [(f"{k}.npy", _npy(v)) for k, v in sorted(_arrays().items())][:1],
        ),
        "",
    ),
    "pickle": (
        lambda p: _dump_with(p, zz=_npy_pickled(np.asarray([{"x": 1}] * 5, dtype=object))),
        "zz",
    ),
}
#: Classes of the dump format alone.
DUMP_CLASSES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "deep-meta-json": (
        lambda p: _dump_with(p, meta_json=_meta("[" * 100_000 + "]" * 100_000)),
        "meta_json",
    ),
    "huge-int-meta": (
        lambda p: _dump_with(p, meta_json=_meta('{"logit_scale": 1' + "0" * 400 + "}")),
        "meta_json",
    ),
    "nan-meta": (lambda p: _dump_with(p, meta_json=_meta('{"logit_scale": NaN}')), "meta_json"),
    "bomb": (_bomb, "audio_embeds"),
}


#: A valid format-version-2 dump (relevance as CSR over clips, issue 18): the base of the
#: relevance classes below.
RELEVANCE_DUMP = FIXTURES / "dumps" / "synthetic_classes.npz"


def _dump_without(path: Path, *keys: str) -> Path:
    members = {f"{k}.npy": _npy(v) for k, v in _arrays().items() if k not in keys}
    return _zip(path, sorted(members.items()))


def _relevance_indptr(change: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], Path]:
    return _with_array("relevance_indptr", change)


def _relevance_indices(change: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], Path]:
    return _with_array("relevance_indices", change)


def _set(a: np.ndarray, i: int, value: int) -> np.ndarray:
    out = a.copy()
    out[i] = value
    return out


#: Classes of the relevance keys (format version 2), on :data:`RELEVANCE_DUMP`.
RELEVANCE_CLASSES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "relevance-and-text-to-audio": (
        lambda p: _dump_with(p, text_to_audio=_npy(np.zeros(9, np.int64))),
        "relevance_indptr",
    ),
    "relevance-indptr-alone": (
        lambda p: _dump_without(p, "relevance_indices", "format_version"),
        "relevance_indices",
    ),
    "relevance-neither": (
        lambda p: _dump_without(p, "relevance_indptr", "relevance_indices", "format_version"),
        "text_to_audio",
    ),
    "relevance-indptr-float": (
        _relevance_indptr(lambda a: a.astype(np.float64)),
        "relevance_indptr",
    ),
    "relevance-indptr-short": (_relevance_indptr(lambda a: a[:-1]), "relevance_indptr"),
    "relevance-indptr-start": (_relevance_indptr(lambda a: a + 1), "relevance_indptr"),
    "relevance-indptr-decreasing": (_relevance_indptr(lambda a: _set(a, 3, 0)), "relevance_indptr"),
    "relevance-indptr-end": (
        _relevance_indptr(lambda a: _set(a, -1, a[-1] + 1)),
        "relevance_indptr",
    ),
    "relevance-indptr-uint64-max": (
        _relevance_indptr(lambda a: _set(a.astype(np.uint64), -1, 2**64 - 1)),
        "relevance_indptr",
    ),
    "relevance-indptr-int64-min": (
        _relevance_indptr(lambda a: _set(a, 1, -(2**63))),
        "relevance_indptr",
    ),
    "relevance-indices-2d": (_relevance_indices(lambda a: a[:, None]), "relevance_indices"),
    "relevance-indices-bool": (_relevance_indices(lambda a: a > 0), "relevance_indices"),
    "relevance-index-out-of-range": (
        _relevance_indices(lambda a: _set(a, 0, 9)),
        "relevance_indices",
    ),
    "relevance-index-negative": (_relevance_indices(lambda a: _set(a, 0, -1)), "relevance_indices"),
    "relevance-index-huge": (
        _relevance_indices(lambda a: _set(a.astype(np.uint64), 0, 2**64 - 1)),
        "relevance_indices",
    ),
    "relevance-duplicate-in-clip": (
        _relevance_indices(lambda a: _set(a, 1, a[0])),  # clip 0 gets its first text twice
        "relevance_indices",
    ),
    "relevance-text-without-clip": (
        _relevance_indices(lambda a: np.where(a == 8, 0, a)),  # text 8 handed to text 0
        "relevance_indices",
    ),
    "relevance-format-version-1": (
        lambda p: _dump_with(p, format_version=_npy(np.asarray(1))),
        "format_version",
    ),
    "relevance-format-version-str": (
        lambda p: _dump_with(p, format_version=_npy(np.asarray("2"))),
        "format_version",
    ),
}


def _part_json(text: str) -> Callable[[Path], Path]:
    return lambda p: _dump_with(p, part_json=_meta(text))


def make_part(path: Path) -> Path:
    """A valid one-shard dump part, from the fixture dump's arrays."""
    with np.load(DUMP, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "meta_json"}
    n, m = arrays["audio_embeds"].shape[0], arrays["text_embeds"].shape[0]
    info = {
        "kind": "audiorepro.dump-part/1",
        "shard": [0, 1],
        "meta": {"inputs": {"n_clips": n}},
        "audio_range": [0, n],
        "text_range": [0, m],
    }
    arrays["part_json"] = np.asarray(json.dumps(info))
    members = sorted((f"{k}.npy", _npy(v)) for k, v in arrays.items())
    return _zip(path, members)


def test_the_base_files_are_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each class breaks one thing in a valid file: the valid files pass every command."""
    for fmt, (base, _, commands) in FORMATS.items():
        path = make_part(tmp_path / "ok.part.npz") if fmt == "part" else base
        for name, cmd in commands.items():
            work = tmp_path / f"{fmt}-{name}"
            work.mkdir()
            argv = cmd.argv(path, work)
            if name == "verify-golden":
                continue  # its golden value is made up: exit 1 (FAIL) is right
            assert main(argv) == 0, (fmt, name, capsys.readouterr().err)


#: Classes of the dump-part format alone (``merge``).
PART_CLASSES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "part-json-not-json": (_part_json("{"), "part_json"),
    "part-json-list": (_part_json("[]"), "part_json"),
    "part-json-no-shard": (
        _part_json('{"kind": "audiorepro.dump-part/1", "meta": {}}'),
        "part_json.shard",
    ),
    "part-json-shard-strings": (
        _part_json(
            '{"kind": "audiorepro.dump-part/1", "meta": {}, "shard": ["a", "b"], '
            '"audio_range": [0, 1], "text_range": [0, 1]}'
        ),
        "part_json.shard",
    ),
    "part-json-deep": (_part_json("[" * 100_000 + "]" * 100_000), "part_json"),
}
#: Classes of the prediction-file format alone.
PREDICTION_CLASSES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "repeated-target": (
        _with_array("reg_names", lambda a: np.asarray([a[0], *a[:-1]])),
        "reg_names",
    ),
    "repeated-class": (_with_array("cls_names", lambda a: np.asarray([a[1], *a[1:]])), "cls_names"),
    "near-max-float": (_with_array("reg_pred", lambda a: a * 0 + 1e308), "reg_pred"),
    "inf-value": (_with_array("reg_pred", lambda a: a * np.inf), "reg_pred"),
}


def _npy_pickled(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)  # type: ignore[no-untyped-call]
    return buf.getvalue()


@dataclass(frozen=True)
class Command:
    """A command that reads a dump: argv for the dump path, and the outputs it would write."""

    argv: Callable[[Path, Path], list[str]]
    outputs: Callable[[Path], list[Path]]


def _golden(tmp: Path, dump: Path) -> Path:
    path = tmp / "golden.toml"
    path.write_text(
        'schema = "audiorepro.published/1"\n[[cell]]\n'
        f'dump = "{dump.name}"\nprofile = "canonical"\ntolerance = 1e-9\n'
        '[cell.values]\n"t2a/r@1" = 0.5\n'
    )
    return path


PART_COMMANDS: dict[str, Command] = {
    "merge": Command(
        lambda d, t: ["merge", str(d), "--out", str(t / "merged.npz")],
        lambda t: [t / "merged.npz"],
    ),
}
PREDICTION_COMMANDS: dict[str, Command] = {
    "probe-metrics": Command(
        lambda d, t: ["probe-metrics", str(d), "--json", str(t / "p.json")],
        lambda t: [t / "p.json"],
    ),
}
DUMP_COMMANDS: dict[str, Command] = {
    "metrics": Command(
        lambda d, t: ["metrics", str(d), "--json", str(t / "m.json")], lambda t: [t / "m.json"]
    ),
    "metrics-profile": Command(
        lambda d, t: ["metrics", str(d), "--profile", "trec", "--json", str(t / "m.json")],
        lambda t: [t / "m.json"],
    ),
    "parity": Command(
        lambda d, t: ["parity", str(d), "--json", str(t / "p.json")], lambda t: [t / "p.json"]
    ),
    "explain": Command(
        lambda d, t: ["explain", str(d), "--json", str(t / "e.json")], lambda t: [t / "e.json"]
    ),
    "verify-golden": Command(
        lambda d, t: ["verify", "--golden", str(_golden(t, d)), "--dumps", str(d.parent)],
        lambda t: [],
    ),
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def _one_line(err: str, *names: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for name in names:
        assert name in lines[0], (name, lines[0])


def _clip_labels(t: Path) -> Path:
    """A labels CSV for the base dump's 40 clips (two classes, four folds)."""
    path = t / "labels.csv"
    rows = [f"clip_{i:04d}.wav,k{i % 2},{i % 4}\n" for i in range(40)]
    path.write_text("file_name,label,fold\n" + "".join(rows))
    return path


#: Commands that read a dump's clip embeddings only (audio_embeds, audio_ids).
CLIP_COMMANDS: dict[str, Command] = {
    "linear-probe": Command(
        lambda d, t: ["linear-probe", str(d), "--labels", str(_clip_labels(t)), "--json",
                      str(t / "lp.json")],
        lambda t: [t / "lp.json"],
    ),
}  # fmt: skip
#: Classes of the clip embeddings a linear probe reads.
CLIP_CLASSES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "no-audio-ids": (lambda p: _dump_without(p, "audio_ids"), "audio_ids"),
    "no-audio-embeds": (lambda p: _dump_without(p, "audio_embeds"), "audio_embeds"),
    "nan-embeds": (
        lambda p: _dump_with(p, audio_embeds=_npy(np.full((40, 32), np.nan, np.float32))),
        "audio_embeds",
    ),
    "ids-repeated": (
        lambda p: _dump_with(p, audio_ids=_npy(np.asarray(["clip_0000.wav"] * 40))),
        "audio_ids",
    ),
    "ids-not-text": (lambda p: _dump_with(p, audio_ids=_npy(np.arange(40))), "audio_ids"),
}

#: Every npz format: its valid file, its own classes, the commands that read it.
FORMATS = {
    "clip-embeddings": (DUMP, CLIP_CLASSES, CLIP_COMMANDS),
    "dump": (DUMP, DUMP_CLASSES, DUMP_COMMANDS),
    "predictions": (PREDICTIONS, PREDICTION_CLASSES, PREDICTION_COMMANDS),
    "part": (Path("part"), PART_CLASSES, PART_COMMANDS),
    "relevance-dump": (RELEVANCE_DUMP, RELEVANCE_CLASSES, DUMP_COMMANDS),
}
CASES = [
    (fmt, case, command)
    for fmt, (_, own, commands) in FORMATS.items()
    for case in sorted({*NPZ_CLASSES, *own} - {"bomb"})
    for command in sorted(commands)
]


@pytest.mark.parametrize(("fmt", "case", "command"), CASES)
def test_every_malformed_file_is_one_line_for_every_command(
    tmp_path: Path, fmt: str, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base, own, commands = FORMATS[fmt]
    make, key = {**NPZ_CLASSES, **own}[case]
    work = tmp_path / "work"
    work.mkdir()
    _BASE[0] = make_part(tmp_path / "valid.part.npz") if fmt == "part" else base
    try:
        bad = make(_fresh(tmp_path / "d") / "bad.npz")
    finally:
        _BASE[0] = DUMP
    cmd = commands[command]
    code, err = _run(cmd.argv(bad, work), capsys)
    if command == "verify-golden" and code == 1:
        pytest.fail(f"verify treated a malformed dump as NOT VERIFIED: {err}")
    assert code == 2, err
    _one_line(err, "bad.npz", key)
    assert not any(p.exists() for p in cmd.outputs(work))


def _fresh(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_inflating_dump_is_refused_within_a_memory_ceiling(tmp_path: Path) -> None:
    """A dump that inflates to 512 MiB from about half a megabyte is refused before it is
    read, in a process that may not map more than 256 MiB beyond its start."""
    bomb = _bomb(tmp_path / "bomb.npz", size=512 << 20)
    assert bomb.stat().st_size < 8 << 20
    script = (
        "import resource, sys\n"
        "from audiorepro.cli import main\n"
        # The metrics command's stack (the command imports it when it runs), before the ceiling.
        "import audiorepro.cli.metrics, audiorepro.core.io, audiorepro.formats.dump\n"
        "import audiorepro.metrics.retrieval, audiorepro.metrics.profiles\n"
        "soft = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "limit = soft + (256 << 20)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "sys.exit(main(['metrics', sys.argv[1]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    env["OPENBLAS_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", script, str(bomb)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    _one_line(done.stderr, "bomb.npz", "audio_embeds", "inflates")


# --- hypothesis: malformed npz archives and TOML studies ----------------------------------

_MEMBER = st.sampled_from(["audio_embeds", "text_embeds", "text_to_audio", "meta_json", "x"])
_RELEVANCE_MEMBER = st.sampled_from(["relevance_indptr", "relevance_indices", "format_version"])


@given(
    members=st.lists(
        st.tuples(
            _MEMBER | _RELEVANCE_MEMBER,
            st.one_of(st.binary(max_size=200), st.sampled_from([b"\x93NUMPY"])),
        ),
        max_size=5,
    ),
    deflate=st.booleans(),
)
def test_random_archives_are_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    members: list[tuple[str, bytes]],
    deflate: bool,
) -> None:
    folder = tmp_path_factory.mktemp("npz")
    path = _zip(folder / "r.npz", [(f"{n}.npy", data) for n, data in members], deflate=deflate)
    code, err = _main_capture(["metrics", str(path)])
    assert code == 2, err
    _one_line(err, "r.npz")


@given(
    text=st.one_of(
        st.text(max_size=200),
        st.lists(
            st.sampled_from(
                [
                    'schema = "audiorepro.study/1"',
                    'name = "x"',
                    "[[cell]]",
                    'id = "a"',
                    "tolerance = inf",
                    "bootstrap = { seed = -1 }",
                    'dataset = "a/b"',
                    "[[published]]",
                    "values = { x = nan }",
                    "kind = 3",
                    "[cell",
                    "a = " + "[" * 50,
                ]
            ),
            max_size=10,
        ).map("\n".join),
    )
)
def test_random_studies_are_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    folder = tmp_path_factory.mktemp("toml")
    path = folder / "study.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    code, err = _main_capture(["verify", str(path)])
    assert code == 2, err
    _one_line(err, "study.toml")


def _main_capture(argv: list[str]) -> tuple[int, str]:
    import contextlib

    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(argv)
    return code, err.getvalue()


# --- TOML formats: studies and published-values files --------------------------------------


def _valid_study(folder: Path) -> str:
    import hashlib

    (folder / "a.npz").write_bytes(DUMP.read_bytes())
    sha = hashlib.sha256(DUMP.read_bytes()).hexdigest()
    return (
        'schema = "audiorepro.study/1"\nname = "s"\nprofiles = ["canonical", "trec", "dcase"]\n'
        f'[[cell]]\nid = "c"\nmodel = "m"\ndataset = "d"\ndump = "a.npz"\nsha256 = "{sha}"\n'
        '[[published]]\ncell = "c"\ntolerance = 1e-9\nprovenance = "p"\n'
        'values = { "t2a/r@1" = 0.5 }\n'
    )


def _valid_published(folder: Path) -> str:
    (folder / "a.npz").write_bytes(DUMP.read_bytes())
    return (
        'schema = "audiorepro.published/1"\n[[cell]]\ndump = "a.npz"\nprofile = "canonical"\n'
        'tolerance = 1e-9\n[cell.values]\n"t2a/r@1" = 0.5\n'
    )


def _valid_registry(folder: Path) -> str:
    from audiorepro.models.registry import bundled_registry

    return bundled_registry().read_text(encoding="utf-8")


def _text(change: Callable[[str], str]) -> Callable[[Path, str], None]:
    def make(path: Path, valid: str) -> None:
        path.write_text(change(valid), encoding="utf-8")

    return make


def _make_fifo(path: Path, valid: str) -> None:
    os.mkfifo(path)


def _make_folder(path: Path, valid: str) -> None:
    path.mkdir()


#: Classes of every TOML format: name -> (make the file from the valid text, key to name).
TOML_CLASSES: dict[str, tuple[Callable[[Path, str], None], str]] = {
    "not-utf8": (lambda p, v: p.write_bytes(b"\xff\xfe" + v.encode()), "UTF-8"),
    "not-toml": (_text(lambda v: v + "\n[[[\n"), "TOML"),
    "deep-nesting": (_text(lambda v: "x = " + "[" * 100_000 + "]" * 100_000 + "\n" + v), ""),
    "fifo": (_make_fifo, "FIFO"),
    "folder": (_make_folder, ""),  # "is a folder" or click's "is a directory"
    # Read whole, so refused from its size (a hole: it costs no disk).
    "too-large": (lambda p, v: _sparse(p, v.encode(), 65 << 20), "bytes"),
}
#: Classes of the formats that hold published values (studies, published-values files).
NUMBER_CLASSES: dict[str, tuple[Callable[[Path, str], None], str]] = {
    "inf-tolerance": (_text(lambda v: v.replace("tolerance = 1e-9", "tolerance = inf")), "finite"),
    "nan-value": (_text(lambda v: v.replace("= 0.5", "= nan")), "finite"),
}
STUDY_CLASSES: dict[str, tuple[Callable[[Path, str], None], str]] = {
    **NUMBER_CLASSES,
    "negative-seed": (
        _text(lambda v: v.replace("profiles =", "bootstrap = { seed = -1 }\nprofiles =")),
        "seed",
    ),
    "slug-collision": (
        _text(
            lambda v: (
                v.replace('dataset = "d"', 'dataset = "a/b"')
                + v[v.index("[[cell]]") : v.index("[[published]]")]
                .replace('id = "c"', 'id = "e"')
                .replace('dataset = "d"', 'dataset = "a_b"')
            )
        ),
        "cell[1].dataset",
    ),
    "long-dataset": (_text(lambda v: v.replace('dataset = "d"', f'dataset = "{"x" * 300}"')), ""),
    "trec-name": (
        _text(
            lambda v: v.replace('"t2a/r@1" = 0.5', '"t2a/P@1" = 0.5').replace(
                'provenance = "p"', 'provenance = "p"\nprofile = "trec"'
            )
        ),
        "t2a/P@1",
    ),
}
PUBLISHED_CLASSES: dict[str, tuple[Callable[[Path, str], None], str]] = {
    **NUMBER_CLASSES,
    "dcase-name": (
        _text(
            lambda v: v.replace('"t2a/r@1" = 0.5', '"R@1" = 0.5').replace(
                'profile = "canonical"', 'profile = "dcase"'
            )
        ),
        "R@1",
    ),
}
#: Classes of the registry format alone.
REGISTRY_CLASSES: dict[str, tuple[Callable[[Path, str], None], str]] = {
    "wrong-schema": (_text(lambda v: v.replace("audiorepro.checkpoints/1", "x/1")), "schema"),
}
TOML_FORMATS: dict[str, tuple[Callable[[Path], str], dict[str, Any], dict[str, Command]]] = {
    "study": (
        _valid_study,
        STUDY_CLASSES,
        {
            "verify": Command(lambda f, t: ["verify", str(f)], lambda t: []),
            "reproduce": Command(
                lambda f, t: ["reproduce", str(f), "--out", str(t / "out")],
                lambda t: [t / "out", t / ".out.staging"],
            ),
        },
    ),
    "registry": (
        _valid_registry,
        REGISTRY_CLASSES,
        {
            "identity": Command(
                lambda f, t: [
                    "identity",
                    "--registry",
                    str(f),
                    "--a",
                    "tiny",
                    "--write-golden",
                    str(t / "g.npz"),
                ],
                lambda t: [t / "g.npz"],
            )
        },
    ),
    "published": (
        _valid_published,
        PUBLISHED_CLASSES,
        {
            "verify-golden": Command(
                lambda f, t: ["verify", "--golden", str(f), "--dumps", str(f.parent)],
                lambda t: [],
            )
        },
    ),
}
TOML_CASES = [
    (fmt, case, command)
    for fmt, (_, own, commands) in TOML_FORMATS.items()
    for case in sorted({*TOML_CLASSES, *own})
    for command in sorted(commands)
]


@pytest.mark.parametrize(("fmt", "case", "command"), TOML_CASES)
def test_every_malformed_toml_is_one_line_for_every_command(
    tmp_path: Path, fmt: str, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    valid, own, commands = TOML_FORMATS[fmt]
    make, key = {**TOML_CLASSES, **own}[case]
    folder = _fresh(tmp_path / "in")
    work = _fresh(tmp_path / "work")
    path = folder / "bad.toml"
    make(path, valid(folder))
    cmd = commands[command]
    code, err = _run(cmd.argv(path, work), capsys)
    assert code == 2, err
    _one_line(err, "bad.toml", key)
    assert not any(p.exists() for p in cmd.outputs(work))


def test_the_valid_toml_files_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from audiorepro.models.registry import read_registry
    from audiorepro.specs.published import load_published
    from audiorepro.specs.study import load_study

    for fmt, (valid, _, _) in TOML_FORMATS.items():
        folder = _fresh(tmp_path / fmt)
        path = folder / "ok.toml"
        path.write_text(valid(folder))
        if fmt == "registry":
            assert read_registry(path)
        else:
            assert (load_study(path) if fmt == "study" else load_published(path)) is not None


# --- extraction inputs: caption files and audio folders ------------------------------------
#
# Read by `extract`, `identity --audio/--captions`, and every command that loads a study with
# an extraction cell or an identity check on given clips (`reproduce`, `verify`,
# `slurm-template`; `extract-part` loads the same study). Each is checked when it is loaded,
# before any model work: exit 2, one line naming the file and the field, nothing written.

_RATE = 16_000


def _wav_bytes(
    data: bytes,
    *,
    tag: int = 1,
    channels: int = 1,
    bits: int = 16,
    declared: int | None = None,
    rate: int = _RATE,
) -> bytes:
    """A RIFF/WAVE file written field by field, so that each field can be made wrong."""
    import struct

    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", tag, channels, rate, min(rate * block, 2**32 - 1), block, bits)
    size = len(data) if declared is None else declared
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", size) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _tone(seconds: float = 0.05, freq: float = 440.0) -> bytes:
    t = np.arange(int(_RATE * seconds)) / _RATE
    return (np.sin(2 * np.pi * freq * t) * 8000).astype("<i2").tobytes()


CLIPS = ("a.wav", "b.wav", "c.wav")


def _clotho(rows: list[list[str]]) -> str:
    header = "file_name," + ",".join(f"caption_{i}" for i in range(1, 6))
    return "\n".join([header] + [",".join(r) for r in rows]) + "\n"


def _valid_inputs(folder: Path) -> tuple[Path, Path]:
    """Three short clips and a Clotho-layout caption file, five captions each."""
    audio = _fresh(folder / "audio")
    for i, name in enumerate(CLIPS):
        (audio / name).write_bytes(_wav_bytes(_tone(freq=220.0 * (i + 1))))
    rows = [[name] + [f"caption {j} of {name}" for j in range(5)] for name in CLIPS]
    (folder / "captions.csv").write_text(_clotho(rows), encoding="utf-8")
    return folder / "captions.csv", audio


def _dataset_record(captions: Path, **extra: Any) -> None:
    import hashlib

    record = {
        "schema": "audiorepro.dataset/1",
        "captions_sha256": hashlib.sha256(captions.read_bytes()).hexdigest(),
        **extra,
    }
    (captions.parent / "dataset.json").write_text(json.dumps(record), encoding="utf-8")


def _sparse(path: Path, head: bytes, size: int) -> Path:
    """A file of ``size`` bytes that costs no disk: ``head``, then a hole."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


Inputs = tuple[Path, Path]
Break = Callable[[Path, Path], Inputs]


def _captions(text: str | bytes) -> Break:
    def make(captions: Path, audio: Path) -> Inputs:
        data = text.encode() if isinstance(text, str) else text
        captions.write_bytes(data)
        return captions, audio

    return make


def _clip(name: str, make_file: Callable[[Path], object]) -> Break:
    def make(captions: Path, audio: Path) -> Inputs:
        (audio / name).unlink()
        make_file(audio / name)
        return captions, audio

    return make


def _clip_bytes(name: str, data: bytes) -> Break:
    return _clip(name, lambda p: p.write_bytes(data))


def _loop(path: Path) -> None:
    other = path.with_name(path.stem + ".loop")  # not an audio name: only b.wav is listed
    other.symlink_to(path.name)
    path.symlink_to(other.name)


def _captions_per_clip(captions: Path, audio: Path) -> Inputs:
    rows = "".join(
        f"{c},caption {j} of {c}\n" for c in CLIPS for j in range(5 if c != "b.wav" else 4)
    )
    captions.write_text("file_name,caption\n" + rows, encoding="utf-8")
    _dataset_record(captions, captions_per_clip=5)
    return captions, audio


def _dataset_json(captions: Path, audio: Path) -> Inputs:
    (captions.parent / "dataset.json").write_text("{not json", encoding="utf-8")
    return captions, audio


def _remove_audio(captions: Path, audio: Path) -> Inputs:
    import shutil

    shutil.rmtree(audio)
    return captions, audio


def _empty_audio(captions: Path, audio: Path) -> Inputs:
    for name in CLIPS:
        (audio / name).unlink()
    return captions, audio


def _extra_clip(captions: Path, audio: Path) -> Inputs:
    (audio / "d.wav").write_bytes(_wav_bytes(_tone()))
    return captions, audio


def _audio_is_a_clip(captions: Path, audio: Path) -> Inputs:
    return captions, audio / "a.wav"


def _list_not_utf8(captions: Path, audio: Path) -> Inputs:
    listing = audio.parent / "audio.txt"
    listing.write_bytes(b"a.wav\n\xff\xfeb.wav\n")
    return captions, listing


def _remove(path: Path) -> None:
    path.unlink()


_VALID_ROWS = [[name] + [f"caption {j} of {name}" for j in range(5)] for name in CLIPS]
#: Malformation classes of caption files and audio folders: name -> (break the valid inputs,
#: what stderr must name: the file, then the field or what is wrong).
INPUT_CLASSES: dict[str, tuple[Break, tuple[str, ...]]] = {
    # caption files
    "captions-missing": (lambda c, a: (_remove(c), (c, a))[1], ("captions.csv",)),
    "captions-folder": (
        lambda c, a: (_remove(c), c.mkdir(), (c, a))[2],
        ("captions.csv", "folder"),
    ),
    "captions-fifo": (lambda c, a: (_remove(c), os.mkfifo(c), (c, a))[2], ("captions.csv", "FIFO")),
    "captions-not-utf8": (
        _captions(b"file_name,caption\na.wav,\xff\xfe\n"),
        ("captions.csv", "UTF-8"),
    ),
    "captions-empty": (_captions(""), ("captions.csv", "empty")),
    "captions-header-only": (_captions(_clotho([])), ("captions.csv", "no captions")),
    "captions-wrong-columns": (
        _captions(_clotho(_VALID_ROWS).replace("file_name,", "clip,", 1)),
        ("captions.csv", "header"),
    ),
    "captions-unknown-column": (
        _captions(_clotho(_VALID_ROWS).replace("caption_5", "notes", 1)),
        ("captions.csv", "header"),
    ),
    "captions-missing-field": (
        _captions(_clotho([_VALID_ROWS[0], _VALID_ROWS[1][:4], _VALID_ROWS[2]])),
        ("captions.csv", "line 3"),
    ),
    "captions-empty-caption": (
        _captions(_clotho([_VALID_ROWS[0], [*_VALID_ROWS[1][:5], " "], _VALID_ROWS[2]])),
        ("captions.csv", "caption_5"),
    ),
    "captions-duplicate-clip": (
        _captions(_clotho([*_VALID_ROWS, _VALID_ROWS[0]])),
        ("captions.csv", "file_name", "twice"),
    ),
    "captions-unknown-clip": (
        _captions(_clotho([*_VALID_ROWS, ["z.wav", *_VALID_ROWS[0][1:]]])),
        ("captions.csv", "file_name", "z.wav"),
    ),
    "clip-without-caption": (_extra_clip, ("captions.csv", "file_name", "d.wav")),
    "captions-per-clip": (_captions_per_clip, ("captions.csv", "captions_per_clip", "b.wav")),
    "dataset-json-not-json": (_dataset_json, ("dataset.json", "JSON")),
    # Round 4 (issue 35): read to the end of the file as one caption, it was reported as
    # clips without a caption.
    "captions-unterminated-quote": (
        _captions(_clotho(_VALID_ROWS).replace("caption 0 of b.wav", '"caption 0 of b.wav', 1)),
        ("captions.csv", "line 3", "never closed"),
    ),
    "captions-huge-line": (
        _captions("file_name,caption\na.wav," + "x" * 200_000 + "\n"),
        ("captions.csv", "line", "field limit"),
    ),
    "captions-too-large": (
        lambda c, a: (_sparse(c, b"file_name,caption\n", 65 << 20), (c, a))[1],
        ("captions.csv", "bytes"),
    ),
    # audio folders and clips
    "audio-missing": (_remove_audio, ("audio",)),  # "no such audio folder" / "does not exist"
    "audio-empty-folder": (_empty_audio, ("audio", "no audio files")),
    "audio-is-a-clip": (_audio_is_a_clip, ("a.wav", "is an audio file")),
    "audio-list-not-utf8": (_list_not_utf8, ("audio.txt", "UTF-8")),
    "clip-garbage": (_clip_bytes("b.wav", b"hello, this is not audio" * 10), ("b.wav", "decoded")),
    "clip-truncated-header": (_clip_bytes("b.wav", _wav_bytes(_tone())[:20]), ("b.wav", "decoded")),
    "clip-huge-declared-size": (
        _clip_bytes("b.wav", _wav_bytes(_tone(), declared=0x7FFF0000)),
        ("b.wav", "declares 2147418112 bytes"),
    ),
    "clip-zero-samples": (_clip_bytes("b.wav", _wav_bytes(b"")), ("b.wav", "no audio frames")),
    "clip-nan-samples": (
        _clip_bytes(
            "b.wav", _wav_bytes(np.array([0.1, np.nan, 0.2], "<f4").tobytes(), tag=3, bits=32)
        ),
        ("b.wav", "NaN"),
    ),
    "clip-12-bit": (_clip_bytes("b.wav", _wav_bytes(bytes(200), bits=12)), ("b.wav", "12-bit")),
    "clip-zero-channels": (
        _clip_bytes("b.wav", _wav_bytes(bytes(200), channels=0)),
        ("b.wav", "decoded"),
    ),
    "clip-too-many-channels": (
        _clip_bytes("b.wav", _wav_bytes(_tone() * 100, channels=100)),
        ("b.wav", "100 channels"),
    ),
    "clip-too-long": (
        _clip("b.wav", lambda p: _sparse(p, _wav_bytes(b"", declared=2 << 27), (2 << 27) + 44)),
        ("b.wav", "samples"),
    ),
    "clip-symlink-loop": (_clip("b.wav", _loop), ("b.wav", "symbolic links")),
    # Round 4 (issue 35): a header's sample rate sized the resampler's filter (2147483647 Hz:
    # 320 GiB); a silent clip passed the pre-checks and failed after the models loaded.
    "clip-rate-2147483647": (
        _clip_bytes("b.wav", _wav_bytes(_tone(), rate=2147483647)),
        ("b.wav", "2147483647 Hz", "expected 1000 to 384000 Hz"),
    ),
    "clip-rate-1e8": (
        _clip_bytes("b.wav", _wav_bytes(_tone(), rate=100_000_000)),
        ("b.wav", "100000000 Hz"),
    ),
    "clip-rate-100": (_clip_bytes("b.wav", _wav_bytes(_tone(), rate=100)), ("b.wav", "100 Hz")),
    "clip-all-zero": (_clip_bytes("b.wav", _wav_bytes(bytes(4000))), ("b.wav", "silent")),
    "clip-folder": (_clip("b.wav", lambda p: p.mkdir()), ("b.wav", "folder")),
    "clip-fifo": (_clip("b.wav", os.mkfifo), ("b.wav", "FIFO")),
}


def _extract_study(captions: Path, audio: Path, folder: Path) -> Path:
    study = folder / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "s"\n[[cell]]\nid = "c"\nmodel = "m"\n'
        f'dataset = "d"\nextract = {{ model = "m", audio = "{audio}", captions = "{captions}" }}\n',
        encoding="utf-8",
    )
    return study


def _identity_study(captions: Path, audio: Path, folder: Path) -> Path:
    import hashlib

    (folder / "a.npz").write_bytes(DUMP.read_bytes())
    sha = hashlib.sha256(DUMP.read_bytes()).hexdigest()
    study = folder / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "s"\n'
        f'[[cell]]\nid = "c"\nmodel = "m"\ndataset = "d"\ndump = "a.npz"\nsha256 = "{sha}"\n'
        f'[[identity]]\na = "m"\nb = "n"\naudio = "{audio}"\ncaptions = "{captions}"\n',
        encoding="utf-8",
    )
    return study


@dataclass(frozen=True)
class InputCommand:
    """A command that reads extraction inputs: argv for (captions, audio, work folder)."""

    argv: Callable[[Path, Path, Path], list[str]]
    outputs: Callable[[Path], list[Path]]


_OUT = lambda t: [t / "out", t / ".out.staging"]  # noqa: E731
INPUT_COMMANDS: dict[str, InputCommand] = {
    "extract": InputCommand(
        lambda c, a, t: ["extract", "--model", "m", "--audio", str(a), "--captions", str(c),
                         "--out", str(t / "d.npz")],
        lambda t: [t / "d.npz"],
    ),
    "extract-jobs": InputCommand(
        lambda c, a, t: ["extract", "--model", "m", "--audio", str(a), "--captions", str(c),
                         "--out", str(t / "d.npz"), "--jobs", "2"],
        lambda t: [t / "d.npz"],
    ),
    "identity": InputCommand(
        lambda c, a, t: ["identity", "--a", "m", "--audio", str(a), "--captions", str(c),
                         "--write-golden", str(t / "g.npz")],
        lambda t: [t / "g.npz"],
    ),
    "reproduce": InputCommand(
        lambda c, a, t: ["reproduce", str(_extract_study(c, a, t)), "--out", str(t / "out")],
        _OUT,
    ),
    "verify": InputCommand(lambda c, a, t: ["verify", str(_extract_study(c, a, t))], lambda t: []),
    "slurm-template": InputCommand(
        lambda c, a, t: ["slurm-template", str(_extract_study(c, a, t)), "--out", str(t / "out")],
        _OUT,
    ),
    "reproduce-identity": InputCommand(
        lambda c, a, t: ["reproduce", str(_identity_study(c, a, t)), "--out", str(t / "out")],
        _OUT,
    ),
}  # fmt: skip
#: ``verify STUDY`` reports a value whose inputs are not here as NOT VERIFIED (as for a dump
#: that is not here), so absent inputs are not malformed ones for it.
ABSENT = {"captions-missing", "audio-missing"}
INPUT_CASES = [
    (case, command)
    for case in sorted(INPUT_CLASSES)
    for command in INPUT_COMMANDS
    if not (command == "verify" and case in ABSENT)
]


@pytest.mark.parametrize(("case", "command"), INPUT_CASES)
def test_every_malformed_input_is_one_line_for_every_command(
    tmp_path: Path, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make, names = INPUT_CLASSES[case]
    captions, audio = make(*_valid_inputs(_fresh(tmp_path / "in")))
    work = _fresh(tmp_path / "work")
    cmd = INPUT_COMMANDS[command]
    code, err = _run(cmd.argv(captions, audio, work), capsys)
    assert code == 2, err
    _one_line(err, *names)
    assert not any(p.exists() for p in cmd.outputs(work))


def test_the_valid_inputs_pass_every_check(tmp_path: Path) -> None:
    """Each input class breaks one thing in inputs that load: the caption file and clips are
    accepted (the extraction itself is tested in test_models.py), by every study kind."""
    from audiorepro.formats.captions import load_inputs
    from audiorepro.specs.study import load_study

    captions, audio = _valid_inputs(tmp_path)
    _dataset_record(captions, captions_per_clip=5)
    inputs = load_inputs(captions, audio)
    assert [p.name for p in inputs.paths] == list(CLIPS)
    assert len(inputs.captions.texts) == 15
    for make in (_extract_study, _identity_study):
        assert load_study(make(captions, audio, _fresh(tmp_path / make.__name__)))


def _huge_captions(captions: Path, audio: Path) -> Inputs:
    _sparse(captions, b"file_name,caption\na.wav,", 384 << 20)
    return captions, audio


def _huge_clip(captions: Path, audio: Path) -> Inputs:
    size = 384 << 20  # 201 million 16-bit samples: 1.5 GiB once decoded as float64
    _sparse(audio / "b.wav", _wav_bytes(b"", declared=size), size + 44)
    return captions, audio


_CEILING = (
    "import resource, sys\n"
    "from audiorepro.cli import main\n"
    # The command line imports a command's stack when it runs (cli.app): the extract
    # command's is imported here, before the ceiling, which bounds reading the input alone.
    "import audiorepro.cli.extraction, audiorepro.models.extract, audiorepro.models.preflight\n"
    "import audiorepro.models.registry, audiorepro.specs.settings\n"
    "from audiorepro.core.errors import UserError\n"
    "from audiorepro.formats.audio import read_audio\n"
    "from audiorepro.formats.captions import read_captions\n"
    "import soundfile\n"
    "soft = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
    "limit = soft + (256 << 20)\n"
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "audio, captions, out, via, huge = sys.argv[1:]\n"
    "if via == 'extract':\n"
    "    sys.exit(main(['extract', '--model', 'm', '--audio', audio, '--captions', captions,\n"
    "                   '--out', out]))\n"
    "try:  # the reader extraction decodes with, called directly\n"
    "    (read_audio if huge.endswith('.wav') else read_captions)(huge)\n"
    "except UserError as exc:\n"
    "    sys.exit(f'audiorepro: error: {exc}')\n"
)


@pytest.mark.parametrize("via", ["extract", "reader"])
@pytest.mark.parametrize(
    ("make", "names"),
    [(_huge_captions, ("captions.csv", "bytes")), (_huge_clip, ("b.wav", "samples"))],
    ids=["huge-caption-file", "huge-clip"],
)
def test_huge_inputs_are_refused_within_a_memory_ceiling(
    tmp_path: Path, make: Break, names: tuple[str, ...], via: str
) -> None:
    """A 384 MiB caption file and a WAV declaring (and holding, sparsely) 384 MiB of samples
    are refused from their sizes, in a process that may not map more than 256 MiB beyond
    its start: read whole, either would need more. Through ``extract`` and through the
    reader itself (``read_captions``, ``read_audio``)."""
    captions, audio = make(*_valid_inputs(tmp_path))
    huge = captions if make is _huge_captions else audio / "b.wav"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    env["OPENBLAS_NUM_THREADS"] = "1"
    argv = [str(audio), str(captions), str(tmp_path / "d.npz"), via, str(huge)]
    done = subprocess.run(
        [sys.executable, "-c", _CEILING, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode in ((2,) if via == "extract" else (1,)), done.stderr[-2000:]
    _one_line(done.stderr, *names)
    assert not (tmp_path / "d.npz").exists()


# --- names that become output file names: probe targets, corpora, run ids ------------------


def _predictions(path: Path, first_target: str | None = None) -> str:
    """A copy of the fixture prediction file (its first target renamed); its SHA-256."""
    import hashlib

    with np.load(PREDICTIONS, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    if first_target is not None:
        names = [str(n) for n in arrays["reg_names"]]
        arrays["reg_names"] = np.asarray([first_target, *names[1:]])
    _zip(path, sorted((f"{k}.npy", _npy(v)) for k, v in arrays.items()))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _probe_study(
    folder: Path,
    *,
    ids: tuple[str, str] = ("r1", "r2"),
    corpora: tuple[str, str] = ("crema-like", "crema-like"),
    targets: tuple[str | None, str | None] = (None, None),
) -> Path:
    lines = ['schema = "audiorepro.study/1"', 'name = "p"', 'kind = "probe"']
    for i in range(2):
        sha = _predictions(folder / f"p{i}.npz", targets[i])
        lines += ["[[run]]", f'id = "{ids[i]}"', f'model = "m{i}"', f'predictions = "p{i}.npz"']
        lines += [f'sha256 = "{sha}"', f'corpus = "{corpora[i]}"']
    study = folder / "study.toml"
    study.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return study


#: Names that would overwrite another's output files or leave their folder: name -> (the
#: study, what stderr must name: both names and the key).
NAME_CLASSES: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "corpus-slug-collision": (
        lambda f: _probe_study(f, corpora=("a/b", "a_b")),
        ("run[1].corpus", "'a_b' and 'a/b'"),
    ),
    "corpus-too-long": (lambda f: _probe_study(f, corpora=("c" * 300, "c" * 300)), ("corpus",)),
    "run-id-slug-collision": (
        lambda f: _probe_study(f, ids=("x/y", "x_y")),
        ("run[1].id", "'x_y' and 'x/y'"),
    ),
    "run-id-dotdot": (lambda f: _probe_study(f, ids=("r1", "..")), ("run[1].id", "'..'")),
    "target-slug-collision-across-runs": (
        lambda f: _probe_study(f, targets=("mood/a", "mood_a")),
        ("p1.npz", "reg_names", "'mood_a' and 'mood/a'", "p0.npz"),
    ),
    "target-slug-collision-in-a-run": (
        lambda f: _probe_study(f, targets=("emotion/01", None)),
        ("p0.npz", "reg_names", "'emotion_01' and 'emotion/01'"),
    ),
    "target-too-long": (lambda f: _probe_study(f, targets=("t" * 300, None)), ("reg_names",)),
}
#: Study-level names are refused when the study loads (verify too); target names come from
#: the prediction files, read by reproduce before it writes anything.
NAME_CASES = [
    (case, command)
    for case in sorted(NAME_CLASSES)
    for command in ("reproduce", "verify")
    if not (case.startswith("target") and command == "verify")
]


@pytest.mark.parametrize(("case", "command"), NAME_CASES)
def test_names_that_collide_as_file_names_are_refused_naming_both(
    tmp_path: Path, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make, names = NAME_CLASSES[case]
    study = make(_fresh(tmp_path / "in"))
    out = tmp_path / "out"
    argv = ["reproduce", str(study), "--out", str(out)] if command == "reproduce" else []
    code, err = _run(argv or ["verify", str(study)], capsys)
    assert code == 2, err
    _one_line(err, "study.toml", *names)
    assert not out.exists() and not (tmp_path / ".out.staging").exists()


def test_the_valid_probe_study_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The base of the name classes reproduces, and a name like ``../x`` that only looks like
    a path is kept inside OUT (its ``/`` becomes ``_``). Predictions alone give the run
    nothing to check (no saved measurement, gate or published value): NOTHING CHECKED, exit 1,
    its outputs written."""
    study = _probe_study(tmp_path, corpora=("../x", "../x"), targets=("../v", None))
    out = tmp_path / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 1, capsys.readouterr().err
    assert "p: NOTHING CHECKED; report " in capsys.readouterr().out
    assert (out / "tables" / "classification_.._x.csv").is_file()
    assert (out / "tables" / "target_.._v.csv").is_file()
    assert not list(tmp_path.glob("*.csv"))


# --- JSON formats: saved measurements, run configs, and the records verify OUT reads --------


def _replace(path: Path, make: Callable[[Path], object]) -> None:
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def _json_loop(path: Path) -> None:
    path.with_suffix(".loop").symlink_to(path.name)
    path.symlink_to(path.with_suffix(".loop").name)


#: Malformation classes of every JSON file a user gives or verify reads back: name -> (write
#: it at the path, what stderr must name besides the file).
JSON_CLASSES: dict[str, tuple[Callable[[Path], object], str]] = {
    "not-json": (lambda p: p.write_text("{", encoding="utf-8"), "JSON"),
    "deep-nesting": (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "JSON"),
    "not-utf8": (lambda p: p.write_bytes(b'{"a": "\xff\xfe"}'), "UTF-8"),
    "too-large": (lambda p: _sparse(p, b'{"a": "', 65 << 20), "bytes"),
    "fifo": (os.mkfifo, "FIFO"),
    "folder": (lambda p: p.mkdir(), "folder"),
    "symlink-loop": (_json_loop, "symbolic links"),
    "not-an-object": (lambda p: p.write_text("[1, 2]", encoding="utf-8"), ""),
}  # fmt: skip


def _probe_study_with_saved(
    folder: Path, breaks: Callable[[Path], object] | None = None
) -> tuple[Path, Path]:
    """One run with predictions and its saved test measurements (broken by ``breaks``); the
    study records the hash the file has (a file that cannot be hashed gets a made-up one)."""
    import hashlib
    import shutil

    shutil.copy(PREDICTIONS, folder / "p.npz")
    saved = folder / "test.json"
    shutil.copy(FIXTURES / "probe" / "clap-linear__crema-like__test.json", saved)
    if breaks is not None:
        _replace(saved, breaks)
    regular = saved.is_file() and not saved.is_symlink()
    sha = hashlib.sha256(saved.read_bytes()).hexdigest() if regular else "0" * 64
    psha = hashlib.sha256((folder / "p.npz").read_bytes()).hexdigest()
    study = folder / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "p"\nkind = "probe"\n[[run]]\nid = "r"\n'
        f'model = "m"\npredictions = "p.npz"\nsha256 = "{psha}"\ncorpus = "crema-like"\n'
        f'[run.metrics.test]\nfile = "test.json"\nsha256 = "{sha}"\n',
        encoding="utf-8",
    )
    return study, saved


def _saved_targets(first: str, second: str) -> Callable[[Path], object]:
    """Saved measurements whose first two per_score targets are renamed."""

    def write(path: Path) -> None:
        doc = json.loads((FIXTURES / "probe" / "clap-linear__crema-like__test.json").read_text())
        doc["per_score"][0]["score"], doc["per_score"][1]["score"] = first, second
        path.write_text(json.dumps(doc), encoding="utf-8")

    return write


def test_saved_target_names_that_collide_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Saved per_score targets name tables too (saved_target_<name>): 'v/a' and 'v_a' in
    one measurement file would write one table."""
    study, saved = _probe_study_with_saved(tmp_path, _saved_targets("v/a", "v_a"))
    out = tmp_path / "out"
    code, err = _run(["reproduce", str(study), "--out", str(out)], capsys)
    assert code == 2, err
    _one_line(err, "study.toml", saved.name, "per_score", "'v_a' and 'v/a'")
    assert not out.exists()


JSON_CASES = [
    (case, command)
    for case in sorted(JSON_CLASSES)
    for command in ("reproduce", "verify", "verify-out-verification", "verify-out-manifest")
]


@pytest.mark.parametrize(("case", "command"), JSON_CASES)
def test_every_malformed_json_is_one_line_for_every_command(
    tmp_path: Path, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make, key = JSON_CLASSES[case]
    folder = _fresh(tmp_path / "in")
    out = tmp_path / "out"
    if command.startswith("verify-out"):
        study, _ = _probe_study_with_saved(folder)
        assert main(["reproduce", str(study), "--out", str(out)]) == 0
        bad = out / ("verification.json" if command.endswith("verification") else "manifest.json")
        _replace(bad, make)
        argv, outputs = ["verify", str(out)], [tmp_path / "v.json"]
        argv += ["--json", str(tmp_path / "v.json")]
    else:
        study, bad = _probe_study_with_saved(folder, make)
        argv = ["reproduce", str(study), "--out", str(out)] if command == "reproduce" else []
        argv = argv or ["verify", str(study)]
        outputs = [out, tmp_path / ".out.staging"]
    code, err = _run(argv, capsys)
    assert code == 2, err
    _one_line(err, bad.name, key)
    assert not any(p.exists() for p in outputs)


@given(
    text=st.one_of(
        st.text(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    "file_name,caption",
                    "file_name,caption_1,caption_2,caption_3,caption_4,caption_5",
                    "file_name,caption_1,notes",
                    "a.wav,a dog",
                    "b.wav,rain,wind,sea,sun,moon",
                    "a.wav,,x,y,z,w",
                    "z.wav,unknown clip",
                    '"a.wav,"unclosed',
                    "a.wav," + "x" * 140_000,
                    ",no file",
                    "\ufeffc.wav,bom",
                ]
            ),
            max_size=8,
        ).map("\n".join),
    )
)
def test_random_caption_files_are_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    """Whatever the caption file holds, the reader gives captions or one UserError naming
    the file, and extract answers in one line (exit 2): a malformed file names itself; a
    well-formed one reaches the model spec 'm', which is unknown."""
    from audiorepro.core.errors import UserError
    from audiorepro.formats.captions import read_captions

    folder = tmp_path_factory.mktemp("captions")
    captions, audio = _valid_inputs(folder)
    captions.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        read_captions(captions)
    except UserError as exc:
        assert "captions.csv" in str(exc) and "\n" not in str(exc), str(exc)
    argv = ["extract", "--model", "m", "--audio", str(audio), "--captions", str(captions)]
    code, err = _main_capture([*argv, "--out", str(folder / "d.npz")])
    assert code == 2, err
    _one_line(err)
    assert "captions.csv" in err or "'m'" in err, err
    assert not (folder / "d.npz").exists()


# -- ESC-50's metadata CSV (zero-shot studies, issue 18) ----------------------------------------
# A separate registry: the CSV a zero-shot study names as [dataset].metadata (and `fetch esc50`
# unpacks), its malformation classes, and the commands that read it. Each class must give exit
# 2 and one line naming esc50.csv and the row/field, before any model is loaded.

_ESC50_HEADER = "filename,fold,target,category,esc10,src_file,take\n"
_ESC50_VALID = (
    _ESC50_HEADER
    + "1-100-A-0.wav,1,0,dog,True,100,A\n"
    + "1-200-A-1.wav,1,1,chirping_birds,False,200,A\n"
)


def _esc50_rows(*rows: str) -> Callable[[Path, str], None]:
    return _text(lambda v: _ESC50_HEADER + "".join(f"{r}\n" for r in rows))


#: name -> (make the file from the valid text, what the one line must name).
ESC50_CLASSES: dict[str, tuple[Callable[[Path, str], None], str]] = {
    "not-utf8": (lambda p, v: p.write_bytes(b"\xff\xfe" + v.encode()), "UTF-8"),
    "empty": (_text(lambda v: ""), "is empty"),
    "fifo": (_make_fifo, "FIFO"),
    "folder": (_make_folder, "folder"),
    "missing-column": (_text(lambda v: v.replace("fold,", "folds,", 1)), "header"),
    "repeated-column": (_text(lambda v: v.replace("take", "fold", 1)), "header"),
    "short-row": (_esc50_rows("1-100-A-0.wav,1,0,dog"), "row 2"),
    "fold-out-of-range": (_esc50_rows("1-100-A-0.wav,6,0,dog,True,100,A"), "row 2.fold"),
    "fold-not-a-number": (_esc50_rows("1-100-A-0.wav,one,0,dog,True,100,A"), "row 2.fold"),
    "negative-target": (_esc50_rows("1-100-A-0.wav,1,-1,dog,True,100,A"), "row 2.target"),
    "huge-target": (_esc50_rows("1-100-A-0.wav,1,99999999,dog,True,100,A"), "row 2.target"),
    "path-in-filename": (_esc50_rows("../1-100-A-0.wav,1,0,dog,True,100,A"), "row 2.filename"),
    "not-a-wav": (_esc50_rows("1-100-A-0.ogg,1,0,dog,True,100,A"), "row 2.filename"),
    "repeated-clip": (
        _esc50_rows("1-100-A-0.wav,1,0,dog,True,100,A", "1-100-A-0.wav,1,0,dog,True,100,A"),
        "row 3.filename",
    ),
    "class-renamed": (
        _esc50_rows("1-100-A-0.wav,1,0,dog,True,100,A", "1-101-A-0.wav,1,0,cat,True,101,A"),
        "row 3.category",
    ),
    "bad-category": (_esc50_rows("1-100-A-0.wav,1,0,<b>dog</b>,True,100,A"), "row 2.category"),
    "target-gap": (_esc50_rows("1-100-A-0.wav,1,1,dog,True,100,A"), "target"),
    "two-targets-one-name": (
        _esc50_rows("1-100-A-0.wav,1,0,dog,True,100,A", "1-101-A-1.wav,1,1,dog,True,101,A"),
        "category",
    ),
    "no-clips": (_text(lambda v: _ESC50_HEADER), "lists no clips"),
    # A field beyond csv's 131,072-character limit made the reader raise a traceback.
    "field-over-csv-limit": (
        _esc50_rows("1-100-A-0.wav,1,0,dog,True,100," + "A" * 200_000),
        "line",
    ),
}


def _zeroshot_study(folder: Path) -> Path:
    (folder / "audio").mkdir(exist_ok=True)
    study = folder / "zeroshot.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nkind = "zeroshot"\nname = "z"\n'
        '[dataset]\nname = "esc50-fold1"\naudio = "audio"\nmetadata = "esc50.csv"\nfolds = [1]\n'
        'template = "This is a sound of {class}"\n'
        '[[cell]]\nid = "m"\nmodel = "630k-audioset-best"\n'
    )
    return study


#: Commands that read esc50.csv: argv for the study file, and the outputs they would write.
ESC50_COMMANDS: dict[str, Command] = {
    "reproduce": Command(
        lambda s, t: ["reproduce", str(s), "--out", str(t / "out")], lambda t: [t / "out"]
    ),
    "verify-study": Command(lambda s, t: ["verify", str(s)], lambda t: []),
}
ESC50_CASES = [(case, command) for case in sorted(ESC50_CLASSES) for command in ESC50_COMMANDS]


@pytest.mark.parametrize(("case", "command"), ESC50_CASES)
def test_every_malformed_esc50_csv_is_one_line_for_every_command(
    tmp_path: Path, case: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _fresh(tmp_path / "in")
    work = _fresh(tmp_path / "work")
    make, key = ESC50_CLASSES[case]
    make(folder / "esc50.csv", _ESC50_VALID)
    cmd = ESC50_COMMANDS[command]
    code, err = _run(cmd.argv(_zeroshot_study(folder), work), capsys)
    assert code == 2, err
    _one_line(err, "esc50.csv", key)
    assert not any(p.exists() for p in cmd.outputs(work))


def test_the_valid_esc50_csv_passes(tmp_path: Path) -> None:
    from audiorepro.formats.esc50 import read_esc50_csv

    path = tmp_path / "esc50.csv"
    path.write_text(_ESC50_VALID)
    assert read_esc50_csv(path).classes == ("dog", "chirping birds")


@pytest.mark.parametrize("command", sorted(ESC50_COMMANDS))
@pytest.mark.parametrize("clip", ["empty", "text"])
def test_an_undecodable_esc50_clip_is_one_line_before_any_model(
    tmp_path: Path, command: str, clip: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audio of a zero-shot study is checked clip by clip from its header when the study
    loads, as for caption-file studies (it was a NOT VERIFIED cell, exit 1, outputs written)."""
    import soundfile

    folder = _fresh(tmp_path / "in")
    work = _fresh(tmp_path / "work")
    (folder / "esc50.csv").write_text(_ESC50_VALID)
    study = _zeroshot_study(folder)
    tone = np.sin(np.arange(4410) / 7.0).astype(np.float32) * 0.5
    soundfile.write(folder / "audio" / "1-100-A-0.wav", tone, 44100)
    (folder / "audio" / "1-200-A-1.wav").write_bytes(b"" if clip == "empty" else b"not audio\n")
    cmd = ESC50_COMMANDS[command]
    code, err = _run(cmd.argv(study, work), capsys)
    assert code == 2, err
    _one_line(err, "1-200-A-1.wav", "decoded")
    assert not any(p.exists() for p in cmd.outputs(work))


def test_a_bootstrap_table_in_a_zeroshot_study_is_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A zero-shot run computes no bootstrap intervals; the table was accepted and silently
    ignored, so a user asking for intervals got none without a word."""
    study = _zeroshot_study(tmp_path)
    study.write_text(study.read_text().replace('name = "z"\n', 'name = "z"\nbootstrap = {}\n'))
    code, err = _run(["verify", str(study)], capsys)
    assert code == 2, err
    _one_line(err, "zeroshot.toml", "'bootstrap'")


@pytest.mark.parametrize("escape", ["\\u0000", "\\n", "\\u001b"])
def test_a_zeroshot_template_with_a_control_character_is_refused(
    tmp_path: Path, escape: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trailing NUL was embedded in the prompts, but numpy's string arrays drop trailing NULs,
    so the dump's captions did not say what was embedded."""
    study = _zeroshot_study(tmp_path)
    study.write_text(study.read_text().replace('of {class}"', f'of {{class}}{escape}"'))
    code, err = _run(["verify", str(study)], capsys)
    assert code == 2, err
    _one_line(err, "zeroshot.toml", "dataset.template")


# --- Checkpoints: laion .pt files and Hugging Face folders ----------------------------------
#
# The classes break a small valid checkpoint (a torch.save state dict; a folder with a
# config.json and a model.safetensors) that the checkpoint preflight accepts; building the
# model would refuse them too, but only after seconds of work and, in a study, after the
# output folder was started. Every command must refuse them before any model is built.

PWNED = "pwned"  # the marker a malicious pickle's payload would create next to it


def _torch_save(path: Path, obj: Any) -> Path:
    import torch

    torch.save(obj, path)
    return path


def _valid_laion(folder: Path) -> Path:
    import torch

    return _torch_save(folder / "model.pt", {"state_dict": {"w": torch.zeros(4)}})


def _valid_hf(folder: Path) -> Path:
    import torch
    from safetensors.torch import save_file

    hf = _fresh(folder / "hf")
    (hf / "config.json").write_text('{"model_type": "clap"}', encoding="utf-8")
    save_file({"w": torch.zeros(64), "v": torch.ones(8)}, str(hf / "model.safetensors"))
    return hf


class _Payload:
    """A pickle whose loading would create the marker file (it must never run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (Path.touch, (str(self.marker),))  # type: ignore[return-value]


def _malicious(path: Path) -> None:
    import pickle

    import torch

    path.unlink(missing_ok=True)
    torch.save({"w": _Payload(path.parent / PWNED)}, path, pickle_module=pickle)


def _cut(keep: Callable[[int], int]) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: keep(len(data))])

    return make


def _st_header(header: bytes, length: int | None = None) -> Callable[[Path], None]:
    """A safetensors file whose header is ``header`` (declared as ``length`` bytes)."""

    def make(path: Path) -> None:
        size = len(header) if length is None else length
        path.write_bytes(size.to_bytes(8, "little") + header + bytes(16))

    return make


def _replace_file(make: Callable[[Path], object]) -> Callable[[Path], None]:
    def change(path: Path) -> None:
        path.unlink()
        make(path)

    return change


CkptBreak = Callable[[Path], None]
_OFFSETS = b'{"w": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]}}'
#: Malformation classes of checkpoints: name -> (laion or hf, the file to break (relative to
#: the base: "" is the .pt itself or the folder), how, what stderr must name).
CHECKPOINT_CLASSES: dict[str, tuple[str, str, CkptBreak, tuple[str, ...]]] = {
    "laion-truncated": ("laion", "", _cut(lambda n: n // 2), ("model.pt", "central directory")),
    "laion-empty": ("laion", "", _cut(lambda n: 0), ("model.pt", "empty")),
    "laion-garbage": (
        "laion", "", lambda p: p.write_bytes(b"not a checkpoint " * 64),
        ("model.pt", "neither a zip archive nor a pickle"),
    ),
    "laion-folder": ("laion", "", _replace_file(lambda p: p.mkdir()), ("model.pt", "folder")),
    "laion-fifo": ("laion", "", _replace_file(os.mkfifo), ("model.pt", "FIFO")),
    "laion-symlink-loop": ("laion", "", _replace_file(_loop), ("model.pt", "symbolic links")),
    "laion-malicious-pickle": ("laion", "", _malicious, ("model.pt", "not a plain tensor file")),
    "laion-zip-directory-cut": (
        "laion", "", _cut(lambda n: n - 30), ("model.pt", "central directory"),
    ),
    # Round 4 (issue 35): a laion: file without a pickle's suffix was not looked at, and
    # failed after the models loaded ("" above is the .pt; a name is a file beside it).
    "laion-text-file": (
        "laion", "notes.txt", lambda p: p.write_text("my notes\n", encoding="utf-8"),
        ("notes.txt", "neither a zip archive nor a pickle"),
    ),
    "hf-config-missing": ("hf", "config.json", _remove, ("hf", "no config.json")),
    "hf-config-not-json": (
        "hf", "config.json", lambda p: p.write_text("{not json", encoding="utf-8"),
        ("config.json", "JSON"),
    ),
    "hf-safetensors-truncated": (
        "hf", "model.safetensors", _cut(lambda n: n - 100), ("model.safetensors", "truncated"),
    ),
    "hf-safetensors-huge-header": (
        "hf", "model.safetensors", _st_header(b"{}", length=1 << 40),
        ("model.safetensors", "header of 1099511627776 bytes"),
    ),
    "hf-safetensors-offsets-beyond": (
        "hf", "model.safetensors", _st_header(_OFFSETS), ("model.safetensors", "byte 256"),
    ),
    "hf-safetensors-header-not-json": (
        "hf", "model.safetensors", _st_header(b"{not json"),
        ("model.safetensors", "not a JSON object"),
    ),
    "hf-malicious-pytorch-model-bin": (
        "hf", "pytorch_model.bin", _malicious, ("pytorch_model.bin", "not a plain tensor file"),
    ),
}  # fmt: skip


def _ckpt_study(spec: str, captions: Path, audio: Path, folder: Path, *, kind: str) -> Path:
    """A study that builds ``spec``: an extraction cell (with a published value of it, so that
    ``verify STUDY`` extracts it) or an identity check."""
    study = folder / "study.toml"
    head = 'schema = "audiorepro.study/1"\nname = "s"\n'
    if kind == "cell":
        body = (
            f'[[cell]]\nid = "c"\nmodel = "m"\ndataset = "d"\nextract = {{ model = "{spec}", '
            f'audio = "{audio}", captions = "{captions}", '
            "settings = { enable_fusion = true } }\n"
            '[[published]]\ncell = "c"\ntolerance = 1e-9\nprovenance = "p"\n'
            'values = { "t2a/r@1" = 0.5 }\n'
        )
    else:
        import hashlib

        (folder / "a.npz").write_bytes(DUMP.read_bytes())
        sha = hashlib.sha256(DUMP.read_bytes()).hexdigest()
        body = (
            f'[[cell]]\nid = "c"\nmodel = "m"\ndataset = "d"\ndump = "a.npz"\nsha256 = "{sha}"\n'
            f'[[identity]]\na = "{spec}"\nb = "{spec}"\naudio = "{audio}"\n'
            f'captions = "{captions}"\n'
        )
    study.write_text(head + body, encoding="utf-8")
    return study


CkptArgv = Callable[[str, Path, Path, Path], list[str]]
#: Every command that builds a model from a checkpoint: argv for (spec, captions, audio, work
#: folder), and what it would write.
CHECKPOINT_COMMANDS: dict[str, tuple[CkptArgv, Callable[[Path], list[Path]]]] = {
    "extract": (
        lambda s, c, a, t: ["extract", "--model", s, "--audio", str(a), "--captions", str(c),
                            "--out", str(t / "d.npz")],
        lambda t: [t / "d.npz"],
    ),
    "extract-jobs": (
        lambda s, c, a, t: ["extract", "--model", s, "--audio", str(a), "--captions", str(c),
                            "--out", str(t / "d.npz"), "--jobs", "2"],
        lambda t: [t / "d.npz"],
    ),
    "identity": (
        lambda s, c, a, t: ["identity", "--a", s, "--audio", str(a), "--captions", str(c),
                            "--write-golden", str(t / "g.npz")],
        lambda t: [t / "g.npz"],
    ),
    "reproduce": (
        lambda s, c, a, t: ["reproduce", str(_ckpt_study(s, c, a, t, kind="cell")),
                            "--out", str(t / "out")],
        _OUT,
    ),
    "reproduce-identity": (
        lambda s, c, a, t: ["reproduce", str(_ckpt_study(s, c, a, t, kind="identity")),
                            "--out", str(t / "out")],
        _OUT,
    ),
    "verify": (
        lambda s, c, a, t: ["verify", str(_ckpt_study(s, c, a, t, kind="cell"))],
        lambda t: [],
    ),
    "slurm-template": (
        lambda s, c, a, t: ["slurm-template", str(_ckpt_study(s, c, a, t, kind="cell")),
                            "--out", str(t / "out")],
        _OUT,
    ),
}  # fmt: skip
CHECKPOINT_CASES = [(case, cmd) for case in CHECKPOINT_CLASSES for cmd in CHECKPOINT_COMMANDS]


def _no_model_building(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a model (or starting the processes that would) is a failure of the test: the
    preflight must have refused first."""
    from audiorepro.models import pipelines

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was built from a checkpoint the preflight should refuse")

    for cls in (pipelines.HFPipeline, pipelines.LaionPipeline):
        monkeypatch.setattr(cls, "__init__", refuse)
    # extract --jobs builds its models in child processes: refused before any is started.
    monkeypatch.setattr("audiorepro.models.extract_jobs.extract_in_processes", refuse)


def _checkpoint(case: str, folder: Path) -> tuple[str, Path]:
    """The broken checkpoint of ``case``: its spec and the file that was broken."""
    kind, name, make, _ = CHECKPOINT_CLASSES[case]
    base = _valid_laion(folder) if kind == "laion" else _valid_hf(folder)
    if kind == "laion" and name:  # another file beside the checkpoint is given instead
        base = base.with_name(name)
    target = base / name if name and kind == "hf" else base
    make(target)
    return f"{kind}:{base}", target


@pytest.mark.parametrize(("case", "command"), CHECKPOINT_CASES)
def test_every_malformed_checkpoint_is_one_line_before_any_model(
    tmp_path: Path,
    case: str,
    command: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_model_building(monkeypatch)
    spec, broken = _checkpoint(case, _fresh(tmp_path / "ckpt"))
    captions, audio = _valid_inputs(_fresh(tmp_path / "in"))
    work = _fresh(tmp_path / "work")
    argv, outputs = CHECKPOINT_COMMANDS[command]
    code, err = _run(argv(spec, captions, audio, work), capsys)
    assert code == 2, err
    _one_line(err, str(broken.parent), *CHECKPOINT_CLASSES[case][3])
    assert not any(p.exists() for p in outputs(work))
    assert sorted(p.name for p in work.iterdir()) in ([], ["a.npz", "study.toml"], ["study.toml"])
    assert not (broken.parent / PWNED).exists(), "the pickle's payload ran"


def test_the_base_checkpoints_pass_the_preflight(tmp_path: Path) -> None:
    """Each class breaks one thing in checkpoints the preflight accepts."""
    from audiorepro.models.preflight import preflight
    from audiorepro.models.registry import resolve_spec

    for make, kind in ((_valid_laion, "laion"), (_valid_hf, "hf")):
        preflight(resolve_spec(f"{kind}:{make(_fresh(tmp_path / kind))}", {}))
    # torch.save's legacy format (a pickle, not a zip archive) still loads with weights only.
    import torch

    legacy = tmp_path / "legacy.pt"
    torch.save({"state_dict": {"w": torch.zeros(4)}}, legacy, _use_new_zipfile_serialization=False)
    preflight(resolve_spec(f"laion:{legacy}", {}))

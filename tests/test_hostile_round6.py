"""Hostile round 6: what the last merges added (HEAR task folders, speaker-verification trial
lists and ``explain --trials``, the per-user embedding cache, ``diff`` that asks the kind, the
lazy command group), tried as a new user and as a hostile one would. Each bad input is one
line naming file and key, exit 2, no traceback, nothing written; each good one a correct
number, byte-identical on a second run. The tests marked "fixed" failed before their fix.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.core.errors import UserError
from audiorepro.formats.hear import read_task
from audiorepro.formats.trials import parse_trials
from audiorepro.metrics.verification import trial_scores
from tests.test_hostile import _one_line, _run

IDS = [f"s{s}_{k}.wav" for s in range(3) for k in range(3)]
GOOD = "enrollment,test,target\ns0_0.wav,s0_1.wav,1\ns0_0.wav,s1_1.wav,0\ns1_0.wav,s1_2.wav,1\n"


def _dump(path: Path, emb: np.ndarray | None = None) -> Path:
    rng = np.random.default_rng(6)
    e = rng.normal(size=(len(IDS), 4)).astype(np.float32) if emb is None else emb
    np.savez(path, audio_embeds=e, audio_ids=np.array(IDS))
    return path


def _explain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trials: str | bytes, dump: Path
) -> tuple[int, str, Path]:
    tmp_path.mkdir(exist_ok=True)
    listed = tmp_path / "trials.txt"
    if isinstance(trials, bytes):
        listed.write_bytes(trials)
    else:
        listed.write_text(trials)
    out = tmp_path / "out" / "definitions.json"
    code, err = _run(["explain", str(dump), "--trials", str(listed), "--json", str(out)], capsys)
    return code, err, out


# --- trial lists ----------------------------------------------------------------------------

SAME_AS_GOOD = {
    "crlf": GOOD.replace("\n", "\r\n").encode(),
    "bom": b"\xef\xbb\xbf" + GOOD.encode(),
    "voxceleb tabs and bom": b"\xef\xbb\xbf1\ts0_0.wav\ts0_1.wav\r\n0\ts0_0.wav\ts1_1.wav\n"
    b"1 s1_0.wav  s1_2.wav\n",
    "nist key": b"s0_0.wav s0_1.wav target\ns0_0.wav s1_1.wav nontarget\n"
    b"s1_0.wav s1_2.wav target\n",
    # fixed: the docstring says empty lines are skipped and the form is told by the first line
    # that is not empty; a CSV whose header followed blank lines was refused ("lacks column")
    "csv after blank lines": ("\n \n" + GOOD).encode(),
}


@pytest.mark.parametrize("name", sorted(SAME_AS_GOOD))
def test_every_spelling_of_one_trial_list_gives_the_same_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    dump = _dump(tmp_path / "d.npz")
    code, err, good = _explain(tmp_path / "a", capsys, GOOD, dump)
    assert code == 0, err
    code, err, other = _explain(tmp_path / "b", capsys, SAME_AS_GOOD[name], dump)
    assert code == 0, err
    assert other.read_bytes() == good.read_bytes()


BAD_TRIALS = [
    ("enrollment,test,target\ns0_0.wav,s0_1.wav,1\ns0_1.wav,s0_0.wav,0\n", "row 3",
     "repeats the trial of row 2"),
    ("enrollment,test,target\ns0_0.wav,s0_0.wav,1\ns0_0.wav,s1_1.wav,0\n", "row 2.test",
     "with itself"),
    ("enrollment,test,target\ns0_0.wav,s0_1.wav,1\n\ns0_0.wav,s1_1.wav,yes\n", "row 4.target",
     "'yes'"),
    ("1 s0_0.wav s0_1.wav\n0 s0_0.wav s1_1.wav\n1 s0_0.wav s0_2.wav x\n", "row 3", "4 fields"),
    ("enrollment,test,target\ns0_0.wav,nobody.wav,1\ns0_0.wav,s1_1.wav,0\n", "row 2.test",
     "'nobody.wav'"),
    ("enrollment,test,target\ns0_0.wav,s0_1.wav,1\ns0_0.wav,s0_2.wav,1\n", "target",
     "only target trials"),
    ("enrollment,test,target,test\n", "header", "repeats a column"),
    ("enrollment,test,target\n\"s0_0.wav\nx\",s0_1.wav,1\ns0_0.wav,s1_1.wav,0\n",
     "row 2.enrollment", "not among the 9 clips"),
    ("\n\n", None, "is empty"),
    ("enrollment;test;target\n", "row 1", "is no trial list"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "key", "says"), BAD_TRIALS)
def test_a_bad_trial_list_is_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str | None, says: str
) -> None:
    code, err, out = _explain(tmp_path, capsys, text, _dump(tmp_path / "d.npz"))
    assert code == 2, err
    _one_line(err, "trials.txt", says, *([f"key '{key}'"] if key else []))
    assert not out.parent.exists()


def test_a_utf16_trial_list_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, out = _explain(tmp_path, capsys, GOOD.encode("utf-16"), _dump(tmp_path / "d.npz"))
    assert code == 2
    _one_line(err, "trials.txt", "UTF-8")
    assert not out.parent.exists()


def test_a_million_line_list_reads_in_order() -> None:
    """A large list (VoxCeleb-sized and beyond) parses; rows keep their file order."""
    n = 200_000
    lines = [f"{i % 2} e{i}.wav t{i}.wav" for i in range(n)]
    t = parse_trials("\n".join(lines) + "\n", source="big.txt")
    assert len(t.test) == n and t.test[-1] == f"t{n - 1}.wav" and int(t.target.sum()) == n // 2
    assert t.rows[-1] == n


# --- embeddings a trial scores --------------------------------------------------------------


def test_a_zero_embedding_a_trial_scores_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: was a ValueError traceback from trial_scores."""
    emb = np.random.default_rng(1).normal(size=(len(IDS), 4)).astype(np.float32)
    emb[IDS.index("s1_1.wav")] = 0
    code, err, out = _explain(tmp_path, capsys, GOOD, _dump(tmp_path / "d.npz", emb))
    assert code == 2, err
    _one_line(err, "d.npz", "key 'audio_embeds'", "'s1_1.wav'")
    assert not out.parent.exists()


def test_a_zero_embedding_no_trial_scores_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: trial_scores normalized every row, so a zero row no trial uses was a traceback
    (and the study, which refuses only the rows its trials use, had the same)."""
    emb = np.random.default_rng(1).normal(size=(len(IDS), 4)).astype(np.float32)
    emb[IDS.index("s2_2.wav")] = 0
    code, err, out = _explain(tmp_path, capsys, GOOD, _dump(tmp_path / "d.npz", emb))
    assert code == 0, err
    full = np.random.default_rng(1).normal(size=(len(IDS), 4)).astype(np.float32)
    code, err, same = _explain(tmp_path / "full", capsys, GOOD, _dump(tmp_path / "f.npz", full))
    assert code == 0, err
    assert out.read_bytes() == same.read_bytes()


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_huge_or_tiny_embeddings_keep_their_cosine(scale: float) -> None:
    """fixed: a row whose norm overflowed to inf scored 0 for every trial (a silent wrong EER
    of 0.5); one whose norm underflowed to 0 was called a zero embedding."""
    e = np.array([[3.0, 4.0], [6.0, 8.0], [4.0, -3.0]])
    scores = trial_scores(e * scale, [0, 0], [1, 2])
    assert scores.tolist() == pytest.approx([1.0, 0.0], abs=1e-15)
    assert trial_scores(e, [0, 0], [1, 2]).tolist() == pytest.approx([1.0, 0.0], abs=1e-15)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_embedding_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: float
) -> None:
    emb = np.random.default_rng(1).normal(size=(len(IDS), 4))
    emb[3, 2] = bad
    code, err, out = _explain(tmp_path, capsys, GOOD, _dump(tmp_path / "d.npz", emb))
    assert code == 2
    _one_line(err, "d.npz", "key 'audio_embeds'", "non-finite")
    assert not out.parent.exists()


def test_explain_trials_twice_is_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = _dump(tmp_path / "d.npz")
    runs = [_explain(tmp_path / str(n), capsys, GOOD, dump) for n in range(2)]
    assert [r[0] for r in runs] == [0, 0]
    assert runs[0][2].read_bytes() == runs[1][2].read_bytes()
    values = json.loads(runs[0][2].read_text())
    assert all(v is None or math.isfinite(v) for v in values.values())


def test_k_with_trials_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.csv").write_text(GOOD)
    code, err = _run(
        ["explain", str(_dump(tmp_path / "d.npz")), "--trials", str(tmp_path / "t.csv"),
         "--k", "1"], capsys,
    )  # fmt: skip
    assert code == 2
    _one_line(err, "--k")


# --- HEAR task folders ----------------------------------------------------------------------

META: dict[str, Any] = {
    "task_name": "w", "embedding_type": "scene", "prediction_type": "multiclass",
    "split_mode": "trainvaltest", "splits": ["train", "valid", "test"],
    "sample_duration": 1.0, "evaluation": ["top1_acc"],
}  # fmt: skip
SPLITS: dict[str, Any] = {
    "train": {"x1.wav": ["a"]}, "valid": {"x2.wav": ["b"]}, "test": {"x3.wav": ["a"]}
}  # fmt: skip


def _task(folder: Path, meta: Any = None, splits: Any = None, vocab: str | None = None) -> Path:
    folder.mkdir(parents=True)
    m = META if meta is None else meta
    (folder / "task_metadata.json").write_text(m if isinstance(m, str) else json.dumps(m))
    (folder / "labelvocabulary.csv").write_text(vocab or "idx,label\n0,a\n1,b\n")
    for split, table in (SPLITS if splits is None else splits).items():
        text = table if isinstance(table, str) else json.dumps(table)
        (folder / f"{split}.json").write_text(text)
    return folder


BAD_TASKS = [
    ({"meta": {**META, "task_name": 5}}, "task_metadata.json", "task_name", "got 5"),
    ({"meta": {**META, "splits": "train"}}, "task_metadata.json", "splits", "got 'train'"),
    ({"meta": {**META, "splits": [1, 2, 3]}}, "task_metadata.json", "splits", "[1, 2, 3]"),
    ({"meta": json.dumps(META).replace("1.0", "NaN")}, "task_metadata.json", "sample_duration",
     "got nan"),
    ({"meta": json.dumps(META).replace("1.0", "1e400")}, "task_metadata.json", "sample_duration",
     "got inf"),
    ({"meta": {**META, "sample_duration": True}}, "task_metadata.json", "sample_duration", "True"),
    ({"meta": {**META, "evaluation_params": []}}, "task_metadata.json", "evaluation_params",
     "JSON object"),
    # fixed: a score named twice was "names a split twice"
    ({"meta": {**META, "evaluation": ["top1_acc", "top1_acc"]}}, "task_metadata.json",
     "evaluation", "names 'top1_acc' twice; expected a list of heareval score names"),
    ({"meta": "[]"}, "task_metadata.json", None, "expected a JSON object"),
    ({"meta": "{"}, "task_metadata.json", None, "not valid JSON"),
    ({"splits": {"train": {"x1.wav": ["a"]}, "test": {"x3.wav": ["a"]}}}, "valid.json", None,
     "names split 'valid'"),
    ({"splits": {**SPLITS, "train": []}}, "train.json", None, "expected a JSON object"),
    ({"splits": {**SPLITS, "train": {"x1.wav": ["a", "b"]}}}, "train.json", "x1.wav",
     "exactly one label"),
    ({"splits": {**SPLITS, "train": '{"x1.wav": ["a"], "x1.wav": ["b"]}'}}, "train.json",
     "x1.wav", "twice"),
    ({"vocab": "idx,label\n0,NA\n1,b\n"}, "labelvocabulary.csv", "label", "pandas"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "file", "key", "says"), BAD_TASKS)
def test_a_malformed_hear_task_is_one_line_naming_file_and_key(
    tmp_path: Path, edit: dict[str, Any], file: str, key: str | None, says: str
) -> None:
    task = _task(tmp_path / "w-v1", **edit)
    with pytest.raises(UserError) as info:
        read_task(task)
    text = str(info.value)
    assert "\n" not in text and str(task / file) in text, text
    assert says in text, text
    if key is not None:
        assert f"key '{key}'" in text, text


def test_a_crlf_vocabulary_reads_as_written(tmp_path: Path) -> None:
    task = read_task(_task(tmp_path / "w-v1", vocab="idx,label\r\n0,a\r\n1,b\r\n"))
    assert task.vocabulary == ("a", "b")


def test_hear_with_no_task_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tasks").mkdir()
    out = tmp_path / "out"
    code, err = _run(
        ["hear", "hear:nowhere", "--tasks-dir", str(tmp_path / "tasks"), "--out", str(out)], capsys
    )
    assert code == 2
    _one_line(err, "tasks", "holds no HEAR task")
    assert not out.exists()


def test_hear_with_an_unknown_task_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _task(tmp_path / "tasks" / "w-v1")
    out = tmp_path / "out"
    argv = ["hear", "hear:nowhere", "--tasks-dir", str(tmp_path / "tasks"), "--task", "x"]
    code, err = _run([*argv, "--out", str(out)], capsys)
    assert code == 2
    _one_line(err, "key '--task'", "no task 'x'", "w-v1")
    assert not out.exists()


# --- the per-user embedding cache -----------------------------------------------------------

KEY = "c" * 64


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An output folder's cache holding one entry (and its record), kept in the store."""
    from audiorepro.runner import cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("AUDIOREPRO_EMBEDDING_CACHE", raising=False)
    out = tmp_path / "a" / "cache" / "dumps"
    out.mkdir(parents=True)
    cache.cache_dump_path(out, KEY).write_bytes(b"entry" * 100)
    cache.record_entry(out, KEY)
    store = cache.shared_store()
    assert store is not None and cache.cache_dump_path(store, KEY).is_file()
    return store


def test_a_store_entry_removed_by_another_process_mid_check_is_extracted_again(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fixed: a second process that found the entry damaged removed it between this one's
    is_file and its hash: sha256_file's UserError ('no such file') ended the run, exit 2."""
    from audiorepro.runner import cache

    real = cache.sha256_file

    def vanishing(path: Path) -> str:
        Path(path).unlink()
        return real(path)

    monkeypatch.setattr(cache, "sha256_file", vanishing)
    fresh = tmp_path / "b"
    fresh.mkdir()
    assert cache.take_shared(fresh, KEY) is False
    assert not any(fresh.iterdir())


@pytest.mark.parametrize("damage", ["truncate", "flip", "record"])
def test_a_damaged_store_entry_is_dropped_not_used(
    shared: Path, tmp_path: Path, damage: str
) -> None:
    from audiorepro.runner import cache

    entry, record = cache.cache_dump_path(shared, KEY), cache.entry_record_path(shared, KEY)
    fresh = tmp_path / "b"
    fresh.mkdir()
    target = record if damage == "record" else entry
    data = target.read_bytes()
    target.unlink()  # the entry is hard-linked with a's: a new file, as an editor writes one
    target.write_bytes(data[:7] if damage == "truncate" else data.replace(b"e", b"f", 1))
    assert cache.take_shared(fresh, KEY) is False
    assert not any(fresh.iterdir())
    assert not entry.exists() or damage == "record"


def test_a_store_entry_that_is_a_symlink_is_dropped_not_linked_into_out(
    shared: Path, tmp_path: Path
) -> None:
    """fixed: the link itself was hard-linked into OUT (a symlink to a file outside OUT: OUT
    no longer whole) and chmod 0444 followed it to the file outside."""
    from audiorepro.runner import cache

    entry = cache.cache_dump_path(shared, KEY)
    elsewhere = tmp_path / "elsewhere.npz"
    elsewhere.write_bytes(entry.read_bytes())
    entry.unlink()
    entry.symlink_to(elsewhere)
    fresh = tmp_path / "b"
    fresh.mkdir()
    assert cache.take_shared(fresh, KEY) is False
    assert not any(fresh.iterdir())
    assert not os.path.lexists(entry) and elsewhere.read_bytes() == b"entry" * 100
    assert stat.S_IMODE(elsewhere.stat().st_mode) & 0o200


def test_a_store_that_is_a_file_is_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audiorepro.runner import cache

    (tmp_path / "xdg").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("AUDIOREPRO_EMBEDDING_CACHE", raising=False)
    out = tmp_path / "a"
    out.mkdir()
    cache.cache_dump_path(out, KEY).write_bytes(b"entry")
    cache.record_entry(out, KEY)  # publishing is skipped, the run keeps its own entry
    assert cache.take_shared(tmp_path, KEY) is False
    assert (tmp_path / "xdg").read_text() == "not a folder"


@pytest.mark.parametrize(("value", "on"), [("", True), ("on", True), (" OFF ", False)])
def test_the_cache_switch_reads_on_and_off(
    monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    from audiorepro.runner import cache

    monkeypatch.setenv("AUDIOREPRO_EMBEDDING_CACHE", value)
    assert (cache.shared_store() is not None) is on


def test_any_other_cache_switch_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from audiorepro.runner import cache

    monkeypatch.setenv("AUDIOREPRO_EMBEDDING_CACHE", "yes")
    with pytest.raises(UserError, match=r"AUDIOREPRO_EMBEDDING_CACHE.*'yes'; expected on or off"):
        cache.shared_store()


# --- diff asks the kind ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.test_outputs_folder import _study as synthetic_study

    tmp = tmp_path_factory.mktemp("round6-diff")
    assert main(["reproduce", str(synthetic_study(tmp)), "--out", str(tmp / "out")]) == 0
    return tmp / "out"


def _gz_bundle(run: Path, path: Path, **changes: object) -> Path:
    bundle = json.loads(gzip.decompress((run / "bundle.json.gz").read_bytes()))
    path.write_bytes(gzip.compress(json.dumps({**bundle, **changes}).encode(), mtime=0))
    return path


@pytest.mark.parametrize(
    "schema", [["audiorepro.bundle/1"], {"a": 1}, None, 7, "audiorepro.nobody/1"]
)
def test_a_bundle_of_a_kind_nobody_registered_is_one_line(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], schema: object
) -> None:
    """fixed: a schema that is a list or an object was a TypeError traceback (unhashable)."""
    other = _gz_bundle(run, tmp_path / "b.json.gz", schema=schema)
    code, err = _run(["diff", str(run / "bundle.json.gz"), str(other)], capsys)
    assert code == 2, err
    _one_line(err, "b.json.gz", "key 'schema'", "expected one of")


def test_diff_of_two_kinds_is_one_line(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = {"schema": "audiorepro.probe-bundle/1", "kind": "probe", "runs": [], "leaders": []}
    other = tmp_path / "p.json.gz"
    other.write_bytes(gzip.compress(json.dumps(probe).encode(), mtime=0))
    code, err = _run(["diff", str(run / "bundle.json.gz"), str(other)], capsys)
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_diff_of_a_run_with_itself_twice_is_byte_identical(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outs = []
    for _ in range(2):
        code = main(["diff", str(run), str(run)])
        outs.append((code, capsys.readouterr().out))
    assert outs[0] == outs[1] and outs[0][0] == 0


# --- audiorepro hear ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hear_spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    import sys

    from tests.encoder_sources import write_encoders

    enc = write_encoders(tmp_path_factory.mktemp("round6-hear-enc"), "round6hear")
    sys.path.insert(0, str(enc.root / "mods"))
    return enc.hear_spec


def _audio_task(folder: Path, rate: int, odd_rate: int | None = None) -> Path:
    """A scene task of six noise clips (two labels) at ``rate``; with ``odd_rate``, the last
    test clip is written at that rate instead (a clip resampled wrongly)."""
    import soundfile

    splits: dict[str, dict[str, list[str]]] = {"train": {}, "valid": {}, "test": {}}
    rng = np.random.default_rng(6)
    for n in range(12):
        split = ("train", "train", "valid", "test")[n % 4]
        splits[split][f"c{n:02d}.wav"] = ["ab"[n % 2]]
    _task(folder, meta={**META, "task_name": folder.name.split("-")[0]}, splits=splits)
    last = sorted(splits["test"])[-1]
    for split, table in splits.items():
        (folder / str(rate) / split).mkdir(parents=True)
        for name in table:
            sr = odd_rate if (odd_rate and split == "test" and name == last) else rate
            clip = (rng.normal(size=sr // 4) * 0.1).astype(np.float32)
            soundfile.write(str(folder / str(rate) / split / name), clip, sr, subtype="FLOAT")
    return folder


def test_a_clip_at_the_wrong_rate_in_a_later_task_writes_nothing(
    hear_spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixed: the first task's embeddings and scores were written before the second task's
    clip at 8 kHz was read (OUT half-written), though the command checks "every task's
    audio before anything is written"."""
    from audiorepro.models.registry import load_registry, resolve_spec
    from audiorepro.models.user_encoders import load_user

    rate = int(load_user(resolve_spec(hear_spec, load_registry([])), "cpu").encoder.sample_rate)
    tasks = tmp_path / "tasks"
    _audio_task(tasks / "aa-v1", rate)
    _audio_task(tasks / "bb-v1", rate, odd_rate=8000)
    out = tmp_path / "out"
    code, err = _run(["hear", hear_spec, "--tasks-dir", str(tasks), "--out", str(out)], capsys)
    assert code == 2, err
    _one_line(err, "bb-v1", "8000 Hz", f"expected mono audio at {rate} Hz")
    assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))


def test_hear_twice_is_byte_identical(
    hear_spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from audiorepro.models.registry import load_registry, resolve_spec
    from audiorepro.models.user_encoders import load_user

    rate = int(load_user(resolve_spec(hear_spec, load_registry([])), "cpu").encoder.sample_rate)
    tasks = tmp_path / "tasks"
    _audio_task(tasks / "aa-v1", rate)
    _audio_task(tasks / "bb-v1", rate)
    trees = []
    for n in range(2):
        out = tmp_path / f"out{n}"
        code, err = _run(["hear", hear_spec, "--tasks-dir", str(tasks), "--out", str(out)], capsys)
        assert code == 0, err
        # every output but the manifest, which holds the run's time, host and versions
        trees.append(
            {
                str(p.relative_to(out)): p.read_bytes()
                for p in out.rglob("*")
                if p.is_file() and p.name != "manifest.json"
            }
        )
    assert trees[0] == trees[1] and any(k.endswith("predicted-scores.json") for k in trees[0])


# --- score normalization in a study ---------------------------------------------------------


@pytest.mark.parametrize(("top_n", "zero_row"), [(5, True), (1, False)])
def test_a_cohort_that_cannot_normalize_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], top_n: int, zero_row: bool
) -> None:
    """fixed: a zero cohort row, or as-norm with top_n = 1 (no deviation over one score: the
    spec allows top_n >= 1), was a ValueError traceback out of reproduce."""
    from audiorepro.core.hashing import sha256_file
    from tests.test_explain_trials import _study

    dump = _dump(tmp_path / "d.npz")
    (tmp_path / "t.csv").write_text(GOOD)
    cohort = tmp_path / "cohort.npz"
    emb = np.random.default_rng(7).normal(size=(6, 4)).astype(np.float32)
    if zero_row:
        emb[2] = 0
    np.savez(cohort, audio_embeds=emb, audio_ids=np.asarray([f"c{k}" for k in range(6)]))
    study = _study(tmp_path, dump, tmp_path / "t.csv", "")
    norm = (f'score_norm = {{ method = "as-norm", top_n = {top_n}, cohort = "cohort.npz", '
            f'cohort_sha256 = "{sha256_file(cohort)}" }}\n')  # fmt: skip
    study.write_text(study.read_text().replace('trials_sha256 = "', norm + 'trials_sha256 = "'))
    out = tmp_path / "out"
    code, err = _run(["reproduce", str(study), "--out", str(out)], capsys)
    assert code == 2, err
    _one_line(err, "cohort.npz", "key 'score_norm'")
    assert not out.exists()


# --- the encoder's code identity ------------------------------------------------------------


def test_an_editor_lock_file_in_the_encoder_package_is_not_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fixed: Emacs keeps ``.#__init__.py``, a dangling symbolic link, beside a file being
    edited; the code identity read it (FileNotFoundError traceback). A FIFO named ``*.py`` is
    not read either (it would block); an edit of the package's code changes the identity."""
    import importlib

    from audiorepro.models.encoder_specs import code_identity, parse_user_spec

    pkg = tmp_path / "round6pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    spec = parse_user_spec("py:round6pkg:make")
    assert spec is not None
    before = code_identity(spec)
    (pkg / ".#__init__.py").symlink_to("user@host.1234:1700000000")
    os.mkfifo(pkg / "pipe.py")
    assert code_identity(spec) == before
    (pkg / "__init__.py").write_text("X = 2\n")
    assert code_identity(spec)["source_sha256"] != before["source_sha256"]


@pytest.mark.parametrize("which", ["trials", "dump"])
def test_explain_json_onto_an_input_is_one_line_and_the_input_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    """fixed: ``--json`` naming the trial list (or the dump) replaced it with the JSON."""
    dump = _dump(tmp_path / "d.npz")
    listed = tmp_path / "t.csv"
    listed.write_text(GOOD)
    target = listed if which == "trials" else dump
    before = target.read_bytes()
    code, err = _run(["explain", str(dump), "--trials", str(listed), "--json", str(target)], capsys)
    assert code == 2, err
    _one_line(err, "key '--json'", "would replace the input")
    assert target.read_bytes() == before


@pytest.mark.parametrize("method", ["z-norm", "s-norm"])
def test_a_huge_cohort_row_keeps_its_cosines(method: str) -> None:
    """fixed (left open by round 6): a cohort row above about 1e154 had an infinite norm and
    was silently orthogonal to every clip; scaled like the trial scores' rows, the normalized
    scores equal those of the same cohort at ordinary scale."""
    from audiorepro.metrics.verification_norm import normalize_scores

    rng = np.random.default_rng(3)
    emb = rng.normal(size=(4, 5))
    cohort = rng.normal(size=(6, 5))
    i, j = np.array([0, 1, 2]), np.array([1, 2, 3])
    raw = trial_scores(emb, i, j)
    plain = normalize_scores(raw, i, j, emb, cohort, method=method)  # type: ignore[arg-type]
    huge = cohort.copy()
    huge[2] *= 1e200
    scaled = normalize_scores(raw, i, j, emb, huge, method=method)  # type: ignore[arg-type]
    assert scaled.tolist() == pytest.approx(plain.tolist(), rel=1e-12, abs=1e-12)

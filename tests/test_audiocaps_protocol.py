"""The published AudioCaps protocol: one caption per clip, prepared, declared and checked.

``fetch audiocaps-test --caption-selection`` against the stand-in file server of
``tests/test_fetch.py`` (a tiny AudioCaps-shaped CSV and clips), the study's declared
selection checked against what was prepared, and published values whose dump identity (clips,
captions) differs reported as not comparable instead of FAIL.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from audiorepro.core.errors import UserError
from audiorepro.specs.study import load_study
from tests.conftest import FIXTURES, GOLDEN, ROOT
from tests.standin_servers import FileServer
from tests.test_fetch import run_cli, sha256

IDS = ["abcdefghijk", "Bcdefghijkl", "c-d_efghijk", "ddddddddddd"]
CSV_URL = "/cdjkim/audiocaps/master/dataset/test.csv"


def audiocaps_csv() -> bytes:
    """Five captions per clip, their ids out of file order (the lowest is not the first)."""
    rows = ["audiocap_id,youtube_id,start_time,caption"]
    for i, ytid in enumerate(IDS):
        for k in range(5):
            cap_id = 100 * (i + 1) + (7 - 2 * k) % 5  # 102, 100, 103, 101, 104 for clip 0
            rows.append(f'{cap_id},{ytid},{30 + i},"clip {i}, caption {k}"')
    return ("\n".join(rows) + "\n").encode()


def _fetch(tmp_path: Path, *extra: str) -> tuple[int, str, str, Path]:
    import numpy as np
    import soundfile

    data = audiocaps_csv()
    tmp_path.mkdir(parents=True, exist_ok=True)
    reg = tmp_path / "datasets.toml"
    reg.write_text(
        'schema = "audiorepro.datasets/1"\n[datasets.audiocaps-test]\nkind = "audiocaps"\n'
        "captions_per_clip = 5\n"
        '[[datasets.audiocaps-test.files]]\nname = "test.csv"\n'
        f'url = "https://raw.githubusercontent.com{CSV_URL}"\n'
        f'hash = "sha256:{sha256(data)}"\nsize = {len(data)}\n'
    )
    audio = tmp_path / "clips"
    audio.mkdir(exist_ok=True)
    for ytid in IDS[:3]:  # the fourth clip is missing
        # not silent: a silent clip is refused when a study loads (issue 35, round 4)
        soundfile.write(audio / f"{ytid}.wav", np.full(1600, 0.25, np.float32), 16000)
    with FileServer({CSV_URL: data}) as srv:
        r = run_cli(
            ["fetch", "audiocaps-test", "--registry", str(reg), "--mirror", srv.url,
             "--data", str(tmp_path / "data"), "--audio", str(audio), *extra],
            {},
        )  # fmt: skip
    return r.returncode, r.stdout, r.stderr, tmp_path / "data" / "audiocaps-test"


def test_first_id_prepares_one_caption_per_clip_and_records_it(tmp_path: Path) -> None:
    from audiorepro.formats.captions import read_captions

    code, out, err, prepared = _fetch(tmp_path, "--caption-selection", "first-id")
    assert code == 0, err
    caps = read_captions(prepared / "captions.csv")
    # per clip the caption with the lowest audiocap_id: k=1 gives (7 - 2) % 5 = 0
    assert list(caps.texts) == ["clip 1, caption 1", "clip 0, caption 1", "clip 2, caption 1"]
    record = json.loads((prepared / "dataset.json").read_text())
    assert record["captions_per_clip"] == 1
    ids = sorted([100, 200, 300])
    assert record["caption_selection"] == {
        "rule": "first-id",
        "captions": 3,
        "caption_ids_sha256": sha256("".join(f"{i}\n" for i in ids).encode()),
    }
    assert (record["clips_present"], record["clips_missing"]) == (3, 1)
    digest = record["caption_selection"]["caption_ids_sha256"]
    assert f"caption selection first-id: 3 caption(s), caption-id list sha256 {digest}" in out


def test_all_is_the_default_and_an_id_list_selects_exactly(tmp_path: Path) -> None:
    from audiorepro.formats.captions import read_captions

    code, _, err, prepared = _fetch(tmp_path / "all")
    assert code == 0, err
    record = json.loads((prepared / "dataset.json").read_text())
    assert record["caption_selection"]["rule"] == "all"
    assert record["caption_selection"]["captions"] == 15 and record["captions_per_clip"] == 5
    listed = tmp_path / "ids.txt"
    listed.write_text("# the ids to keep\n104\n203\n")
    code, _, err, prepared = _fetch(tmp_path / "ids", "--caption-selection", f"ids:{listed}")
    assert code == 0, err
    assert list(read_captions(prepared / "captions.csv").texts) == [
        "clip 1, caption 2",
        "clip 0, caption 4",
    ]
    record = json.loads((prepared / "dataset.json").read_text())
    assert record["caption_selection"]["rule"] == "ids" and "captions_per_clip" not in record
    assert record["caption_selection"]["ids_file"] == "ids.txt"
    assert record["clips_present"] == 2  # clip 2 has no listed caption: not in the captions


@pytest.mark.parametrize(
    ("value", "ids", "says"),
    [
        ("first", None, "'--caption-selection': is 'first'; expected all, first-id"),
        ("ids:{f}", "104\nabc\n", "expected audiocap_id numbers, one per line; got 'abc'"),
        ("ids:{f}", "104\n104\n", "lists caption id 104 twice"),
        ("ids:{f}", "104\n999\n", "lists caption id 999 (1 id(s) in all), which the AudioCaps"),
    ],
)
def test_a_bad_selection_is_one_line_and_prepares_nothing(
    tmp_path: Path, value: str, ids: str | None, says: str
) -> None:
    listed = tmp_path / "ids.txt"
    if ids is not None:
        listed.write_text(ids)
    code, _, err, prepared = _fetch(tmp_path, "--caption-selection", value.format(f=listed))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert says in err and "Traceback" not in err
    assert not (prepared / "captions.csv").exists()


def _declaring_study(tmp_path: Path, prepared: Path, rule: str) -> Path:
    study = tmp_path / "study.toml"
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "ac"\n[[cell]]\nid = "m/audiocaps"\n'
        'model = "m"\ndataset = "audiocaps"\n'
        f'extract = {{ model = "m", audio = "{prepared}/audio.txt", '
        f'captions = "{prepared}/captions.csv", caption_selection = "{rule}" }}\n'
    )
    return study


def test_a_study_declaring_one_per_clip_refuses_all_five(tmp_path: Path) -> None:
    code, _, err, prepared = _fetch(tmp_path)
    assert code == 0, err
    with pytest.raises(UserError) as exc:
        load_study(_declaring_study(tmp_path, prepared, "first-id"))
    message = str(exc.value)
    assert "cell[0].extract.caption_selection" in message
    assert "were prepared with 'all'" in message
    assert "audiorepro fetch audiocaps-test --caption-selection first-id" in message
    assert load_study(_declaring_study(tmp_path, prepared, "all")).cells[0].extract


def test_the_shipped_study_and_golden_declare_the_published_protocol() -> None:
    from audiorepro.specs.published import load_published

    study = load_study(ROOT / "studies" / "clap_retrieval.toml", strict=False)
    audiocaps = [c for c in study.cells if c.dataset == "audiocaps"]
    assert audiocaps and all(
        c.extract is not None and c.extract.caption_selection == "first-id" for c in audiocaps
    )
    published = {p.cell: p for p in study.published}
    for cell in published.values():
        if cell.cell.endswith("/audiocaps"):
            assert (cell.n_clips, cell.n_captions) == (957, 957)
        assert "seed kit" not in cell.provenance
    for cell in load_published(GOLDEN / "published" / "clap_retrieval.toml"):
        if cell.dataset == "audiocaps":
            assert (cell.n_clips, cell.n_captions) == (957, 957)


def test_values_of_another_dump_identity_are_not_compared(tmp_path: Path) -> None:
    """A published cell whose dump had other clip/caption counts: NOT VERIFIED, saying why."""
    from audiorepro.cli import main

    dump = FIXTURES / "dumps" / "synthetic_5cap.npz"
    (tmp_path / "d.npz").write_bytes(dump.read_bytes())
    digest = hashlib.sha256(dump.read_bytes()).hexdigest()
    body = (
        'schema = "audiorepro.study/1"\nname = "ident"\nbootstrap = { resamples = 20 }\n'
        f'[[cell]]\nid = "m/d"\nmodel = "m"\ndataset = "d"\ndump = "d.npz"\nsha256 = "{digest}"\n'
        '[[published]]\ncell = "m/d"\ntolerance = 1e-9\nprovenance = "a test"\n'
        'n_clips = 957\nn_captions = 957\nvalues = { "t2a/r@1" = 0.5 }\n'
    )
    (tmp_path / "study.toml").write_text(body)
    out = tmp_path / "out"
    assert main(["reproduce", str(tmp_path / "study.toml"), "--out", str(out)]) == 1
    verification = json.loads((out / "verification.json").read_text())
    (row,) = verification["golden"]["rows"]
    assert row["status"] == "NOT VERIFIED" and row["reproduced"] is None
    assert re.search(r"the dump has \d+ clips and \d+ captions, the published values' dump "
                     r"957 and 957: not the same clips", row["reason"])  # fmt: skip


def test_the_report_shows_the_caption_selection() -> None:
    from audiorepro.render.html import _coverage

    meta = {"inputs": {"dataset": {
        "name": "audiocaps-test", "clips_present": 3, "clips_expected": 4, "clips_missing": 1,
        "present_sha256": "p" * 64,
        "caption_selection": {"rule": "first-id", "captions": 3, "caption_ids_sha256": "c" * 64},
    }}}  # fmt: skip
    html = _coverage(meta)
    assert "caption selection first-id (3 captions, caption-id list sha256" in html
    assert "c" * 64 in html

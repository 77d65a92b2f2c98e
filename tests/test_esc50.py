"""ESC-50 zero-shot: ``fetch esc50`` against a stand-in server, then the tiny study end to end.

The archive is ESC-50-shaped and built here (synthesized WAVs under the real naming
``{fold}-{clip}-{take}-{target}.wav``, a ``meta/esc50.csv`` with the real columns, everything
under one ``ESC-50-<commit>/`` folder as GitHub's source archives have it) and served by
:class:`tests.standin_servers.FileServer` under the real URL path; the models are the
project's tiny seeded laion-clap models (fused and unfused). The study runs through the real
commands: ``fetch esc50 --mirror``, ``reproduce``, ``verify``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.checks.tiers import EMBEDDING_REL_TOLERANCE, LEGEND, score_bound, tiered
from audiorepro.cli import main
from audiorepro.formats.dump import load_dump
from tests.conftest import GOLDEN
from tests.standin_servers import FileServer
from tests.test_fetch import run_cli, sha256

COMMIT = "5983fb0c35e751b452e7c562d9207f27b76ddf0d"  # the bundled registry's pin
ARCHIVE = f"ESC-50-{COMMIT}.zip"
URL_PATH = f"/karolpiczak/ESC-50/archive/{COMMIT}.zip"
CLASSES = ["dog", "chirping_birds", "rain"]
HEADER = "filename,fold,target,category,esc10,src_file,take\n"


def esc50_rows() -> list[tuple[str, int, int]]:
    """(filename, fold, target): two clips per class in fold 1, one in fold 2."""
    rows = []
    for target in range(len(CLASSES)):
        for k, fold in enumerate((1, 1, 2)):
            rows.append((f"{fold}-{1000 + 10 * target + k}-A-{target}.wav", fold, target))
    return rows


def esc50_csv(rows: list[tuple[str, int, int]]) -> str:
    return HEADER + "".join(
        f"{n},{f},{t},{CLASSES[t]},False,{n.split('-')[1]},A\n" for n, f, t in rows
    )


def esc50_archive(*, extra: list[tuple[str, bytes]] | None = None) -> bytes:
    """The source archive: audio/*.wav (a tone per class plus noise), meta/esc50.csv."""
    import soundfile

    rng = np.random.default_rng(50)
    buf = io.BytesIO()
    top = f"ESC-50-{COMMIT}"
    rows = esc50_rows()

    def member(name: str) -> zipfile.ZipInfo:
        # A fixed time: the archive (and its SHA-256, recorded downstream) is the same each run.
        info = zipfile.ZipInfo(name, date_time=(2017, 12, 13, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        return info

    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(member(f"{top}/README.md"), "# ESC-50 stand-in\n")
        for name, _, target in rows:
            t = np.arange(44100 * 5) / 44100
            wave = 0.3 * np.sin(2 * np.pi * (220 * (target + 1)) * t)
            wave += 0.05 * rng.standard_normal(t.size)
            wav = io.BytesIO()
            soundfile.write(wav, wave.astype(np.float32), 44100, format="WAV", subtype="PCM_16")
            z.writestr(member(f"{top}/audio/{name}"), wav.getvalue())
        z.writestr(member(f"{top}/meta/esc50.csv"), esc50_csv(rows))
        for name, data in extra or []:
            z.writestr(member(name), data)
    return buf.getvalue()


def esc50_registry(tmp: Path, archive: bytes, *, hash_text: str | None = None) -> Path:
    path = tmp / "esc50-datasets.toml"
    path.write_text(
        'schema = "audiorepro.datasets/1"\n[datasets.esc50]\nkind = "esc50"\n'
        f'commit = "{COMMIT}"\nclips = 9\n[[datasets.esc50.files]]\n'
        f'name = "{ARCHIVE}"\n'
        f'url = "https://github.com/karolpiczak/ESC-50/archive/{COMMIT}.zip"\n'
        f'hash = "{hash_text or "sha256:" + sha256(archive)}"\n'
    )
    return path


def _fetch(
    tmp: Path, archive: bytes, registry: Path | None, data: Path, fault: str | None = None
) -> Any:
    with FileServer({URL_PATH: archive}) as srv:
        if fault:
            srv.faults[URL_PATH.rsplit("/", 1)[1]] = fault
        args = ["fetch", "esc50", "--mirror", srv.url, "--data", str(data)]
        if registry is not None:
            args += ["--registry", str(registry)]
        return run_cli(args, {})


# -- fetch ------------------------------------------------------------------------------------


def test_esc50_is_downloaded_hash_checked_and_prepared(tmp_path: Path) -> None:
    from audiorepro.formats.esc50 import read_esc50_csv

    archive = esc50_archive(extra=[(f"ESC-50-{COMMIT}/audio/notes.txt", b"x")])
    data = tmp_path / "data"
    r = _fetch(tmp_path, archive, esc50_registry(tmp_path, archive), data, fault="truncate")
    assert r.returncode == 0, r.stderr
    assert "fetch: done" in r.stdout
    out = data / "esc50"
    meta = read_esc50_csv(out / "esc50.csv")
    assert meta.classes == ("dog", "chirping birds", "rain")
    assert sorted(p.name for p in (out / "audio").iterdir()) == sorted(meta.filenames)
    record = json.loads((out / "dataset.json").read_text())
    assert (record["clips_present"], record["clips_missing"], record["classes"]) == (9, 0, 3)
    assert record["commit"] == COMMIT
    assert record["sources"] == {ARCHIVE: f"sha256:{sha256(archive)}"}
    assert record["unverified"] == []


def test_a_tampered_archive_is_refused_and_nothing_prepared(tmp_path: Path) -> None:
    archive = esc50_archive()
    data = tmp_path / "data"
    r = _fetch(tmp_path, archive, esc50_registry(tmp_path, archive), data, fault="tamper")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "not the registered file" in r.stderr
    assert not (data / "esc50" / "audio").exists()
    assert not (data / "esc50" / "downloads" / ARCHIVE).exists()


def test_the_unpinned_archive_is_prepared_recorded_and_reported_unverified(
    tmp_path: Path,
) -> None:
    """The bundled entry (no published hash): fetch prepares the data, records the SHA-256 it
    found, prints it and exits 1, as for a checkpoint without a published hash."""
    archive = esc50_archive()
    data = tmp_path / "data"
    r = _fetch(tmp_path, archive, None, data)
    assert r.returncode == 1, r.stderr
    assert f"UNVERIFIED esc50: {ARCHIVE} has no published hash" in r.stdout
    assert sha256(archive) in r.stdout
    record = json.loads((data / "esc50" / "dataset.json").read_text())
    assert record["sources"][ARCHIVE].startswith(f"sha256:{sha256(archive)} (unverified")
    assert record["clips_present"] == 9


def test_the_bundled_entry_is_pinned_to_a_commit_not_a_branch() -> None:
    from audiorepro.core.hashing import PLACEHOLDER
    from audiorepro.fetch.datasets import bundled_datasets, read_datasets

    ds = read_datasets(bundled_datasets())["esc50"]
    assert ds.commit == COMMIT
    (f,) = ds.files
    assert f.url == f"https://github.com/karolpiczak/ESC-50/archive/{COMMIT}.zip"
    assert f.hash == PLACEHOLDER  # nobody published it: never invented


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("../evil.wav", b"x")], "outside its folder"),
        ([(f"ESC-50-{COMMIT}/audio/../../x.wav", b"x")], "outside its folder"),
        ([(f"ESC-50-{COMMIT}/audio/a.wav", b"\0" * (8 << 20))], "inflates"),
        # A second metadata file silently replaced the first (the last member won).
        ([(f"ESC-50-{COMMIT}/meta/esc50.csv", b"filename,fold\n")], "twice"),
    ],
)
def test_hostile_archive_members_are_refused(
    tmp_path: Path, members: list[tuple[str, bytes]], message: str
) -> None:
    archive = esc50_archive(extra=members)
    data = tmp_path / "data"
    r = _fetch(tmp_path, archive, esc50_registry(tmp_path, archive), data)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr
    assert not (data / "esc50" / "audio").exists()


def test_an_archive_without_metadata_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"ESC-50-{COMMIT}/audio/1-1-A-0.wav", b"RIFF")
    archive = buf.getvalue()
    r = _fetch(tmp_path, archive, esc50_registry(tmp_path, archive), tmp_path / "data")
    assert r.returncode == 2
    assert "meta/esc50.csv" in r.stderr and r.stderr.count("\n") == 1


def test_an_unpublished_hash_is_refused_for_other_kinds(tmp_path: Path) -> None:
    from audiorepro.core.errors import UserError
    from audiorepro.core.hashing import PLACEHOLDER
    from audiorepro.fetch.datasets import read_datasets

    path = tmp_path / "d.toml"
    path.write_text(
        'schema = "audiorepro.datasets/1"\n[datasets.c]\nkind = "clotho"\n'
        '[[datasets.c.files]]\nname = "a.7z"\nurl = "https://zenodo.org/a.7z"\n'
        f'hash = "{PLACEHOLDER}"\n'
    )
    with pytest.raises(UserError, match="a clotho dataset needs its published hash"):
        read_datasets(path)


def test_a_branch_url_is_refused_in_the_registry(tmp_path: Path) -> None:
    from audiorepro.core.errors import UserError
    from audiorepro.fetch.datasets import read_datasets

    path = esc50_registry(tmp_path, b"")
    path.write_text(path.read_text().replace(f"archive/{COMMIT}.zip", "archive/master.zip"))
    with pytest.raises(UserError, match="pinned to a commit"):
        read_datasets(path)


# -- the tiny study ---------------------------------------------------------------------------


def _tiers(audio: np.ndarray, text: np.ndarray, labels: np.ndarray, metrics: dict[str, Any]) -> Any:
    """Tier-b tolerances of one cell's zero-shot numbers (:mod:`audiorepro.checks.tiers`): a
    clip is fragile when another class's score is within both scores' error bounds of its own
    class's; a fraction moves by at most the fragile clips over the clips (per class for the
    recalls), mean_rank by the classes in band per clip, median_rank by the most in band."""

    def frag(float32_scores: bool) -> tuple[np.ndarray, np.ndarray]:
        bound = score_bound(
            audio,
            text,
            float32_scores=float32_scores,
            embedding_rel_error=EMBEDDING_REL_TOLERANCE,
        )
        scores = audio.astype(np.float64) @ text.astype(np.float64).T
        rows = np.arange(len(labels))
        own, own_b = scores[rows, labels][:, None], bound[rows, labels][:, None]
        band = np.abs(scores - own) <= bound + own_b
        band[rows, labels] = False
        count = band.sum(axis=1)
        return count > 0, count

    out: dict[str, Any] = {}
    fragile, _ = frag(False)
    n = len(labels)
    for tie, m in metrics["canonical"].items():
        recall_tol = {
            str(c): float(fragile[labels == c].sum() / (labels == c).sum())
            for c in np.unique(labels).tolist()
        }
        out[tie] = {
            "accuracy": tiered(m["accuracy"], float(fragile.sum() / n)),
            "top5_accuracy": tiered(m["top5_accuracy"], float(fragile.sum() / n)),
            "balanced_accuracy": tiered(
                m["balanced_accuracy"], float(np.mean(list(recall_tol.values())))
            ),
            "per_class_recall": {
                c: tiered(v, recall_tol[c]) for c, v in m["per_class_recall"].items()
            },
        }
    fragile32, count32 = frag(True)
    laion = {}
    for k, v in metrics["laion-clap-zeroshot"].items():
        tol = (
            float(count32.max())
            if k == "median_rank"
            else float(count32.sum() / n)
            if k == "mean_rank"
            else float(fragile32.sum() / n)
        )
        laion[k] = tiered(v, tol)
    out["laion-clap-zeroshot"] = laion
    return out


def study_data(out: Path) -> dict[str, Any]:
    """Every number of a zero-shot run, in its tier (all tier b: CPU-extracted embeddings)."""
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    cells = {}
    for cell in bundle["cells"]:
        with np.load(out / cell["dump"], allow_pickle=False) as z:
            audio, text = z["audio_embeds"], z["text_embeds"]
            labels = z["relevance_indices"]
            assert z["relevance_indptr"].tolist() == list(range(len(labels) + 1))
        cells[cell["id"]] = {
            "n_clips": cell["n_clips"],
            "n_classes": cell["n_classes"],
            "metrics": _tiers(audio, text, labels, cell["metrics"]),
        }
    return {
        "tiers": LEGEND,
        "cells": cells,
        "inputs": bundle["study"]["inputs"],
        "golden_counts": bundle["verification"]["golden"]["counts"],
    }


def _study(folder: Path, registries: dict[str, Path], published: str) -> Path:
    cells = "".join(
        f'[[cell]]\nid = "{name}/esc50-fold1"\nmodel = "tiny-laion"\nregistry = "{reg}"\n'
        for name, reg in registries.items()
    )
    path = folder / "esc50_zeroshot_tiny.toml"
    path.write_text(
        'schema = "audiorepro.study/1"\nkind = "zeroshot"\nname = "esc50-zeroshot-tiny"\n'
        '[dataset]\nname = "esc50-fold1"\naudio = "data/esc50/audio"\n'
        'metadata = "data/esc50/esc50.csv"\nfolds = [1]\n'
        'template = "This is a sound of {class}"\n' + cells + published
    )
    return path


# With 3 classes every clip finds its class within 5: R@5, R@10 and top-5 accuracy are 1.
TRUE_BY_DEFINITION = (
    '[[published]]\ncell = "fusion/esc50-fold1"\nprofile = "laion-clap-zeroshot"\n'
    'tolerance = 0.0\nprovenance = "definition: three classes"\n'
    'values = { "R@5" = 1.0, "R@10" = 1.0 }\n'
    '[[published]]\ncell = "no-fusion/esc50-fold1"\ntolerance = 0.0\n'
    'provenance = "definition: three classes"\nvalues = { top5_accuracy = 1.0 }\n'
)


@pytest.fixture(scope="module")
def tiny_study(
    tmp_path_factory: pytest.TempPathFactory, tiny_models: Callable[..., Path]
) -> tuple[Path, Path]:
    """fetch esc50 from the stand-in server, the tiny models, the study file, one run."""
    pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")

    tmp = tmp_path_factory.mktemp("esc50")
    folder = tmp / "study"
    archive = esc50_archive()
    r = _fetch(tmp, archive, esc50_registry(tmp, archive), folder / "data")
    assert r.returncode == 0, r.stderr
    registries = {
        "fusion": tiny_models(seed=0, fusion=True),
        "no-fusion": tiny_models(seed=0, fusion=False),
    }
    study = _study(folder, registries, TRUE_BY_DEFINITION)
    out = tmp / "out"
    assert main(["reproduce", str(study), "--out", str(out)]) == 0
    return study, out


def test_tiny_study_matches_its_golden_values(
    tiny_study: tuple[Path, Path], tiered_regression: Any
) -> None:
    _, out = tiny_study
    data = study_data(out)
    assert data["golden_counts"] == {"PASS": 3, "FAIL": 0, "NOT VERIFIED": 0}
    assert data["inputs"]["template"] == "This is a sound of {class}"
    assert data["inputs"]["classes"] == ["dog", "chirping birds", "rain"]
    assert data["inputs"]["folds"] == [1] and data["inputs"]["n_clips"] == 6
    assert data["inputs"]["prepared"]["commit"] == COMMIT  # fetch's record travels along
    tiered_regression(data, GOLDEN / "zeroshot" / "esc50_tiny.yml")


def test_tiny_study_dump_has_class_relevance_and_records_the_template(
    tiny_study: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = tiny_study
    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    cell = bundle["cells"][0]
    dump = load_dump(out / cell["dump"])
    assert dump.format_version == 2 and dump.sha256 == cell["dump_sha256"]
    with np.load(out / cell["dump"], allow_pickle=False) as z:
        assert "text_to_audio" not in z.files
        assert z["captions"].tolist() == [
            "This is a sound of dog",
            "This is a sound of chirping birds",
            "This is a sound of rain",
        ]
        assert z["relevance_indices"].tolist() == [0, 0, 1, 1, 2, 2]
        meta = json.loads(str(z["meta_json"]))
    assert meta["zeroshot"]["template"] == "This is a sound of {class}"
    assert (
        meta["zeroshot"]["metadata_sha256"]
        == hashlib.sha256(esc50_csv(esc50_rows()).encode()).hexdigest()
    )
    assert main(["metrics", str(out / cell["dump"]), "--profile", "laion-clap-zeroshot",
                 "--json", str(tmp_path / "p.json")]) == 0  # fmt: skip
    profile = json.loads((tmp_path / "p.json").read_text())
    assert profile["metrics"] == cell["metrics"]["laion-clap-zeroshot"]
    verification = json.loads((out / "verification.json").read_text())
    assert verification["metric_parity_passed"] is True
    rows = {r["metric"]: r for r in verification["metric_parity"]["cells"][0]["rows"]}
    assert rows["accuracy = a2t/r@1"]["equal"] and rows["top5_accuracy = a2t/r@5"]["equal"]


def test_tiny_study_rerun_is_byte_identical_and_verifies(
    tiny_study: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import audiorepro.runner.kinds.zeroshot.extraction as zeroshot

    study, out = tiny_study
    extracted: list[str] = []
    extract_cell = zeroshot.extract_cell

    def counting(cell: Any, *args: Any, **kwargs: Any) -> Any:
        extracted.append(cell.id)
        return extract_cell(cell, *args, **kwargs)

    monkeypatch.setattr(zeroshot, "extract_cell", counting)
    again = tmp_path / "again"
    assert main(["reproduce", str(study), "--out", str(again)]) == 0
    assert extracted == ["fusion/esc50-fold1", "no-fusion/esc50-fold1"]
    first = json.loads((out / "manifest.json").read_text())["outputs"]
    second = json.loads((again / "manifest.json").read_text())["outputs"]
    assert first == second and "dumps/fusion_esc50-fold1.npz" in first
    # The same OUT again: every dump comes from OUT/cache, no model embeds anything, and the
    # outputs keep their bytes.
    assert len(list((again / "cache" / "dumps").glob("*.npz"))) == 2
    assert main(["reproduce", str(study), "--out", str(again)]) == 0
    assert len(extracted) == 2
    assert json.loads((again / "manifest.json").read_text())["outputs"] == first
    # A damaged entry is not trusted: that cell alone is extracted again, to the same bytes.
    damaged = sorted((again / "cache" / "dumps").glob("*.npz"))[0]
    damaged.write_bytes(damaged.read_bytes()[:-1] + bytes([damaged.read_bytes()[-1] ^ 1]))
    assert main(["reproduce", str(study), "--out", str(again)]) == 0
    assert len(extracted) == 3
    assert json.loads((again / "manifest.json").read_text())["outputs"] == first
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert main(["verify", str(study)]) == 0
    assert "PASS  3 passed, 0 failed, 0 not verified" in capsys.readouterr().out


def test_a_wrong_published_value_fails_the_study(
    tiny_study: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study, _ = tiny_study
    wrong = study.with_name("wrong.toml")
    wrong.write_text(
        study.read_text().split("[[published]]")[0]
        + '[[published]]\ncell = "fusion/esc50-fold1"\nprofile = "laion-clap-zeroshot"\n'
        'tolerance = 0.0\nprovenance = "deliberately wrong"\nvalues = { "R@5" = 0.5 }\n'
    )
    capsys.readouterr()
    assert main(["verify", str(wrong)]) == 1
    assert "FAIL         fusion/esc50-fold1  R@5  published 0.5  reproduced 1" in (
        capsys.readouterr().out
    )
    assert main(["reproduce", str(wrong), "--out", str(tmp_path / "o")]) == 1
    assert main(["verify", str(tmp_path / "o")]) == 1


def test_the_bundled_study_loads_with_the_published_values() -> None:
    from audiorepro.specs.study import ZeroshotStudy, load_study

    study = load_study(
        Path(__file__).parent.parent / "studies" / "esc50_zeroshot.toml", strict=False
    )
    assert isinstance(study, ZeroshotStudy)
    assert study.dataset.folds == (1,)
    assert study.dataset.template == "This is a sound of {class}"
    values = {p.cell: p.values for p in study.published}
    assert values["630k-audioset-fusion-best/esc50-fold1"] == {
        "mean_rank": 1.2425, "median_rank": 1.0, "R@1": 0.9050, "R@5": 0.9900,
        "R@10": 0.9925, "mAP@10": 0.9407,
    }  # fmt: skip
    assert values["630k-audioset-best/esc50-fold1"] == {
        "mean_rank": 1.1450, "median_rank": 1.0, "R@1": 0.9275, "R@5": 0.9975,
        "R@10": 1.0, "mAP@10": 0.9556,
    }  # fmt: skip


def test_the_bundled_study_without_its_data_is_not_verified(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Here (no ESC-50, no checkpoints) every published value is NOT VERIFIED, never a pass."""
    study = Path(__file__).parent.parent / "studies" / "esc50_zeroshot.toml"
    if (study.parent / "data" / "esc50").exists():
        pytest.skip("studies/data/esc50 is present: this checks the checkout without data")
    assert main(["verify", str(study)]) == 1
    out = capsys.readouterr().out
    assert "PASS" not in out.replace("PASS  0 passed", "")
    assert "NOT VERIFIED  0 passed, 0 failed, 12 not verified" in out.splitlines()[-1]
    assert "run `audiorepro fetch esc50` first" in out

"""``audiorepro fetch`` against stand-in servers on 127.0.0.1 (no network needed).

Each case runs the real command in a subprocess (huggingface_hub reads ``HF_ENDPOINT`` when
imported) against :mod:`tests.standin_servers`: pinned revision and hashes checked, a tampered
file refused and removed, a wrong revision, a truncated transfer resumed, a server gone
mid-file, no server at all; datasets through the file server with ``--mirror``.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.standin_servers import FileServer, StandinHub

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_cli(
    args: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "5",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "audiorepro", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def toy_bin(n: int = 64) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.arange(n * n, dtype=torch.float32).reshape(n, n)}, buf)
    return buf.getvalue()


def _resumed_at(request: str) -> int:
    """The first byte a ranged request asks for (0 without a range)."""
    return int(request.split("range=bytes=")[1].split("-")[0]) if "range=" in request else 0


TOY = {"config.json": b'{"toy": true}\n'}


def toy_registry(tmp: Path, files: dict[str, bytes], revision: str = COMMIT) -> Path:
    weights = {k: v for k, v in files.items() if k.endswith(".bin")}
    other = {k: v for k, v in files.items() if k not in weights}
    lines = [
        'schema = "audiorepro.checkpoints/1"',
        '[checkpoints."toy"]',
        'format = "hf"',
        'repo = "org/toy"',
        f'revision = "{revision}"',
        '[checkpoints."toy".weights]',
        *(f'"{k}" = "{sha256(v)}"' for k, v in weights.items()),
        '[checkpoints."toy".files]',
        *(f'"{k}" = "{sha256(v)}"' for k, v in other.items()),
        '[checkpoints."toy".sizes]',
        *(f'"{k}" = {len(v)}' for k, v in files.items()),
    ]
    path = tmp / "registry.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture()
def toy_files() -> dict[str, bytes]:
    # 32 MiB: more than the library's 10 MiB download chunk, so that a transfer cut half-way
    # has written whole chunks to its partial file, as a real 615 MB one has.
    return {**TOY, "pytorch_model.bin": toy_bin(2896)}


def _snapshot(cache: Path, commit: str = COMMIT) -> Path:
    return cache / "models--org--toy" / "snapshots" / commit


def test_fetch_pins_the_revision_and_checks_every_hash(
    tmp_path: Path, toy_files: dict[str, bytes]
) -> None:
    registry = toy_registry(tmp_path, toy_files)
    cache = tmp_path / "cache"
    with StandinHub() as hub:
        hub.add("org/toy", COMMIT, toy_files)
        # main has moved on to other bytes: fetch must take the pinned commit, not main
        hub.add("org/toy", OTHER, {**toy_files, "config.json": b"{}"})
        hub.faults["pytorch_model.bin"] = "truncate"
        r = run_cli(
            ["fetch", "toy", "--registry", str(registry), "--cache", str(cache)],
            {"HF_ENDPOINT": hub.url},
        )
        requests = list(hub.requests)
    assert r.returncode == 0, r.stderr
    snap = _snapshot(cache)
    for name, data in toy_files.items():
        assert (snap / name).read_bytes() == data
    assert not _snapshot(cache, OTHER).exists()
    assert f"/org/toy/resolve/{COMMIT}/config.json" in " ".join(requests)
    assert "/resolve/main/" not in " ".join(requests)
    # the first transfer stopped half-way; the library resumed it with a range request
    first, second = (q for q in requests if q.startswith("GET /lfs/"))
    assert _resumed_at(first) == 0
    assert 0 < _resumed_at(second) <= len(toy_files["pytorch_model.bin"]) // 2
    assert "verified" in r.stdout


def test_tampered_file_is_refused_and_removed(tmp_path: Path, toy_files: dict[str, bytes]) -> None:
    registry = toy_registry(tmp_path, toy_files)
    cache = tmp_path / "cache"
    with StandinHub() as hub:
        hub.add("org/toy", COMMIT, toy_files)
        hub.faults["pytorch_model.bin"] = "tamper"
        r = run_cli(
            ["fetch", "toy", "--registry", str(registry), "--cache", str(cache)],
            {"HF_ENDPOINT": hub.url},
        )
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    expected = sha256(toy_files["pytorch_model.bin"])
    assert "pytorch_model.bin" in line and f"expected {expected}" in line
    tampered = bytes(b ^ 0x5A for b in toy_files["pytorch_model.bin"][:64])
    assert f"found {sha256(tampered + toy_files['pytorch_model.bin'][64:])}" in line
    # nothing extract could load: neither the snapshot link nor the blob
    assert not (_snapshot(cache) / "pytorch_model.bin").exists()
    blobs = cache / "models--org--toy" / "blobs"
    assert all(sha256(p.read_bytes()) != sha256(tampered) for p in blobs.iterdir())
    assert not any(p.stat().st_size == len(toy_files["pytorch_model.bin"]) for p in blobs.iterdir())


def test_wrong_revision_is_a_clear_error(tmp_path: Path, toy_files: dict[str, bytes]) -> None:
    registry = toy_registry(tmp_path, toy_files, revision=OTHER)
    with StandinHub() as hub:
        hub.add("org/toy", COMMIT, toy_files)
        r = run_cli(
            ["fetch", "toy", "--registry", str(registry), "--cache", str(tmp_path / "c")],
            {"HF_ENDPOINT": hub.url},
        )
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert f"revision {OTHER} of org/toy does not exist" in line


def test_server_gone_mid_file_leaves_nothing_and_a_rerun_completes(
    tmp_path: Path, toy_files: dict[str, bytes]
) -> None:
    registry = toy_registry(tmp_path, toy_files)
    cache = tmp_path / "cache"
    args = ["fetch", "toy", "--registry", str(registry), "--cache", str(cache)]
    with StandinHub() as hub:
        hub.add("org/toy", COMMIT, toy_files)
        hub.faults["pytorch_model.bin"] = "die"
        r = run_cli(args, {"HF_ENDPOINT": hub.url})
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "pytorch_model.bin" in line and "place it by hand" in line
    assert not (_snapshot(cache) / "pytorch_model.bin").exists()
    # huggingface_hub 2.x downloads into a file unique to the call and drops it on failure
    blobs = cache / "models--org--toy" / "blobs"
    assert all(p.stat().st_size != len(toy_files["pytorch_model.bin"]) for p in blobs.iterdir())
    assert not list(blobs.glob("*.incomplete"))
    with StandinHub() as hub2:
        hub2.add("org/toy", COMMIT, toy_files)
        r = run_cli(args, {"HF_ENDPOINT": hub2.url})
    assert r.returncode == 0, r.stderr
    assert (_snapshot(cache) / "pytorch_model.bin").read_bytes() == toy_files["pytorch_model.bin"]


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.slow  # the library retries a lost server with backoff (about 25 s)
def test_no_server_at_all_names_the_url_and_the_hand_route(
    tmp_path: Path, toy_files: dict[str, bytes]
) -> None:
    registry = toy_registry(tmp_path, toy_files)
    url = _closed_port()
    r = run_cli(
        ["fetch", "toy", "--registry", str(registry), "--cache", str(tmp_path / "c")],
        {"HF_ENDPOINT": url},
    )
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert f"{url}/org/toy/resolve/{COMMIT}/" in line and "place it by hand" in line


# -- datasets -----------------------------------------------------------------------------


def clotho_files(tmp: Path) -> dict[str, bytes]:
    """A Clotho-shaped evaluation split: three clips under the real file names."""
    import numpy as np
    import py7zr
    import soundfile

    src = tmp / "clotho-src" / "evaluation"
    src.mkdir(parents=True)
    rng = np.random.default_rng(0)
    names = ["a dog.wav", "rain, heavy.wav", "z.wav"]
    for i, name in enumerate(names):
        soundfile.write(
            src / name,
            rng.uniform(-0.5, 0.5, 44100 * (i + 1)).astype(np.float32),
            44100,
            subtype="PCM_16",
        )
    archive = tmp / "clotho-src" / "clotho_audio_evaluation.7z"
    with py7zr.SevenZipFile(archive, "w") as z:
        for name in names:
            z.write(src / name, f"evaluation/{name}")
    header = "file_name,caption_1,caption_2,caption_3,caption_4,caption_5\n"
    rows = "".join(
        f'"{n}",' + ",".join(f'"{n[:-4]} caption {k}"' for k in range(1, 6)) + "\n" for n in names
    )
    return {
        "clotho_audio_evaluation.7z": archive.read_bytes(),
        "clotho_captions_evaluation.csv": (header + rows).encode(),
        "clotho_metadata_evaluation.csv": b"file_name,keywords\n"
        + b"".join(f'"{n}",x\n'.encode() for n in names),
    }


def datasets_registry(
    tmp: Path, files: dict[str, bytes], md5_of_archive: str | None = None
) -> Path:
    lines = [
        'schema = "audiorepro.datasets/1"',
        "[datasets.clotho-eval]",
        'kind = "clotho"',
        "clips = 3",
        "captions_per_clip = 5",
    ]
    for name, data in files.items():
        md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
        if name.endswith(".7z") and md5_of_archive:
            md5 = md5_of_archive
        lines += [
            "[[datasets.clotho-eval.files]]",
            f'name = "{name}"',
            f'url = "https://zenodo.org/record/4783391/files/{name}?download=1"',
            f'hash = "md5:{md5}"',
        ]
    path = tmp / "datasets.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def served(files: dict[str, bytes]) -> dict[str, bytes]:
    return {f"/record/4783391/files/{n}": d for n, d in files.items()}


def test_clotho_is_downloaded_md5_checked_and_prepared(tmp_path: Path) -> None:
    from audiorepro.formats.captions import list_audio, match_audio, read_captions
    from audiorepro.formats.coverage import dataset_record

    files = clotho_files(tmp_path)
    reg = datasets_registry(tmp_path, files)
    data = tmp_path / "data"
    with FileServer(served(files)) as srv:
        srv.faults["clotho_audio_evaluation.7z"] = "truncate"  # restarted, then complete
        r = run_cli(
            [
                "fetch",
                "clotho-eval",
                "--registry",
                str(reg),
                "--mirror",
                srv.url,
                "--data",
                str(data),
            ],
            {},
        )
    assert r.returncode == 0, r.stderr
    out = data / "clotho-eval"
    caps = read_captions(out / "captions.csv")
    paths = match_audio(caps, list_audio(out / "audio"), source="captions")
    assert [p.name for p in paths] == ["a dog.wav", "rain, heavy.wav", "z.wav"]
    record = dataset_record(out / "captions.csv")
    assert record is not None
    assert (record["clips_present"], record["clips_missing"], record["clips_expected"]) == (3, 0, 3)
    # The registry's captions per clip travel in the record, for extract to check against.
    assert record["captions_per_clip"] == 5
    assert "attempt 1 failed" in r.stdout


def test_clotho_with_a_wrong_md5_leaves_nothing(tmp_path: Path) -> None:
    files = clotho_files(tmp_path)
    reg = datasets_registry(tmp_path, files, md5_of_archive="0" * 32)
    data = tmp_path / "data"
    with FileServer(served(files)) as srv:
        r = run_cli(
            [
                "fetch",
                "clotho-eval",
                "--registry",
                str(reg),
                "--mirror",
                srv.url,
                "--data",
                str(data),
            ],
            {},
        )
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    got = hashlib.md5(files["clotho_audio_evaluation.7z"], usedforsecurity=False).hexdigest()
    assert f"md5 expected {'0' * 32}, found {got}" in line
    assert not (data / "clotho-eval" / "downloads" / "clotho_audio_evaluation.7z").exists()
    assert not (data / "clotho-eval" / "audio").exists()


def test_dataset_without_a_server_names_the_url_and_the_hand_route(tmp_path: Path) -> None:
    files = clotho_files(tmp_path)
    reg = datasets_registry(tmp_path, files)
    mirror = _closed_port()
    r = run_cli(
        [
            "fetch",
            "clotho-eval",
            "--registry",
            str(reg),
            "--mirror",
            mirror,
            "--data",
            str(tmp_path / "data"),
        ],
        {},
    )
    assert r.returncode == 2
    line = r.stderr.strip().splitlines()[-1]
    assert len(r.stderr.strip().splitlines()) == 1
    assert f"cannot download {mirror}/record/4783391/files/" in line
    assert "put it at" in line and "rerun fetch" in line


def audiocaps_csv(ids: list[str]) -> bytes:
    rows = ["audiocap_id,youtube_id,start_time,caption"]
    n = 0
    for i, ytid in enumerate(ids):
        for k in range(5):
            n += 1
            rows.append(f'{n},{ytid},{30 + i},"clip {i}, caption {k}"')
    return ("\n".join(rows) + "\n").encode()


def test_audiocaps_lists_only_present_clips_and_counts_the_rest(tmp_path: Path) -> None:
    import numpy as np
    import soundfile

    from audiorepro.formats.captions import list_audio, match_audio, read_captions
    from audiorepro.formats.coverage import dataset_record, present_digest

    ids = ["abcdefghijk", "Bcdefghijkl", "c-d_efghijk", "dddddddddddd"[:11], "eeeeeeeeeee"]
    csv_bytes = audiocaps_csv(ids)
    reg = tmp_path / "datasets.toml"
    reg.write_text(
        'schema = "audiorepro.datasets/1"\n[datasets.audiocaps-test]\nkind = "audiocaps"\n'
        '[[datasets.audiocaps-test.files]]\nname = "test.csv"\n'
        'url = "https://raw.githubusercontent.com/cdjkim/audiocaps/master/dataset/test.csv"\n'
        f'hash = "sha256:{sha256(csv_bytes)}"\nsize = {len(csv_bytes)}\n'
    )
    audio = tmp_path / "clips"
    audio.mkdir()
    tone = np.zeros(1600, np.float32)
    # three namings, wav and flac; a clip missing, an unrelated file, a start that does not fit
    for name in [
        "abcdefghijk.wav",
        "YBcdefghijkl.flac",
        "c-d_efghijk_32.000.wav",
        "zzzzzzzzzzz.wav",
        "eeeeeeeeeee_99.wav",
    ]:
        soundfile.write(audio / name, tone, 16000)
    with FileServer({"/cdjkim/audiocaps/master/dataset/test.csv": csv_bytes}) as srv:
        r = run_cli(
            [
                "fetch",
                "audiocaps-test",
                "--registry",
                str(reg),
                "--mirror",
                srv.url,
                "--data",
                str(tmp_path / "data"),
                "--audio",
                str(audio),
            ],
            {},
        )
    assert r.returncode == 0, r.stderr
    out = tmp_path / "data" / "audiocaps-test"
    record = dataset_record(out / "captions.csv")
    assert record is not None
    present = ["Bcdefghijkl", "abcdefghijk", "c-d_efghijk"]
    assert (record["clips_expected"], record["clips_present"], record["clips_missing"]) == (5, 3, 2)
    assert record["extra_files"] == 2
    assert record["missing"] == ["dddddddddddd"[:11], "eeeeeeeeeee"]
    assert record["present_sha256"] == sha256("".join(f"{c}\n" for c in sorted(present)).encode())
    assert record["present_sha256"] == present_digest(present)
    assert "3 of 5 clips present, 2 missing, 2 extra" in r.stdout
    caps = read_captions(out / "captions.csv")
    paths = match_audio(caps, list_audio(out / "audio.txt"), source="captions")
    assert [p.name for p in paths] == [
        "YBcdefghijkl.flac",
        "abcdefghijk.wav",
        "c-d_efghijk_32.000.wav",
    ]
    assert len(caps.texts) == 15 and caps.texts[0] == "clip 1, caption 0"


def test_unknown_name_and_misplaced_audio_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from audiorepro.cli import main

    assert main(["fetch", "no-such-thing"]) == 2
    assert main(["fetch", "clotho-eval", "--audio", str(tmp_path)]) == 2
    capsys.readouterr()
    # A mirror without a scheme is refused before anything is downloaded, naming the option.
    data = tmp_path / "data"
    assert main(["fetch", "clotho-eval", "--mirror", "mirror.example", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "--mirror" in err and "http(s) URL" in err and len(err.strip().splitlines()) == 1
    assert not data.exists()


# -- pickled weights ----------------------------------------------------------------------


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_pytorch_model_bin_is_read_weights_only(tmp_path: Path) -> None:
    import pickle

    import torch

    from audiorepro.core.errors import UserError
    from audiorepro.models.safeload import load_weights_only

    good = tmp_path / "pytorch_model.bin"
    good.write_bytes(toy_bin())
    state = load_weights_only(good)
    assert torch.equal(state["w"], torch.arange(4096, dtype=torch.float32).reshape(64, 64))

    marker = tmp_path / "payload-ran"
    evil = tmp_path / "evil.bin"
    torch.save({"w": _Payload(marker)}, evil)
    with pytest.raises(UserError, match="refused: not a plain tensor file"):
        load_weights_only(evil)
    legacy = tmp_path / "legacy.bin"
    legacy.write_bytes(pickle.dumps({"w": _Payload(marker)}))
    with pytest.raises(UserError, match="refused"):
        load_weights_only(legacy)
    assert not marker.exists()


def test_extract_refuses_a_malicious_pytorch_model_bin(tmp_path: Path) -> None:
    import torch

    from tests.conftest import FIXTURES

    marker = tmp_path / "payload-ran"
    folder = tmp_path / "evil-hf"
    folder.mkdir()
    torch.save({"w": _Payload(marker)}, folder / "pytorch_model.bin")
    (folder / "config.json").write_text("{}")
    reg = tmp_path / "registry.toml"
    reg.write_text(
        'schema = "audiorepro.checkpoints/1"\n[checkpoints."evil"]\nformat = "hf"\n'
        'path = "evil-hf"\n[checkpoints."evil".weights]\n'
        f'"pytorch_model.bin" = "{sha256((folder / "pytorch_model.bin").read_bytes())}"\n'
    )
    r = run_cli(
        [
            "extract",
            "--registry",
            str(reg),
            "--model",
            "evil",
            "--audio",
            str(FIXTURES / "audio"),
            "--captions",
            str(FIXTURES / "audio" / "captions.csv"),
            "--out",
            str(tmp_path / "d.npz"),
        ],
        {"HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "pytorch_model.bin" in line and "refused" in line
    assert not marker.exists()


# -- from fetch to verdict: a tiny variant of the CLAP study ---------------------------------

HF_COMMIT = "c1a9c1a9c1a9c1a9c1a9c1a9c1a9c1a9c1a9c1a9"
LAION_COMMIT = "1a10c1a91a10c1a91a10c1a91a10c1a91a10c1a9"


def _hub_snapshot_files(cache: Path, repo: str) -> dict[str, bytes]:
    base = cache / ("models--" + repo.replace("/", "--"))
    revision = (base / "refs" / "main").read_text().strip()
    return {p.name: p.read_bytes() for p in (base / "snapshots" / revision).iterdir()}


@pytest.mark.slow
def test_tiny_clap_study_runs_from_fetch_to_verdict(
    tmp_path: Path, tiny_models: Callable[..., Path]
) -> None:
    """The real commands on tiny models served under the real names and pinned text-model
    revisions: fetch (models, laion-clap's text models, a Clotho-shaped split), then
    reproduce offline, ending in the verdict table and the identity finding."""
    import json

    import torch
    from safetensors.torch import load_file

    from audiorepro.models.registry import load_support

    a = tiny_models(seed=0).parent  # the "Hugging Face port" (the run's shared tiny models)
    b = tiny_models(seed=1).parent  # "laion_clap's checkpoint"
    hf_files = {p.name: p.read_bytes() for p in (a / "tiny-hf").iterdir()}
    buf = io.BytesIO()
    torch.save(load_file(a / "tiny-hf" / "model.safetensors"), buf)
    del hf_files["model.safetensors"]  # as on the pinned hub revision: pytorch_model.bin only
    hf_files["pytorch_model.bin"] = buf.getvalue()
    laion = (b / "tiny-laion.pt").read_bytes()
    registry = tmp_path / "registry.toml"
    registry.write_text(
        'schema = "audiorepro.checkpoints/1"\n'
        '[checkpoints."laion/clap-htsat-fused"]\nformat = "hf"\n'
        f'repo = "laion/clap-htsat-fused"\nrevision = "{HF_COMMIT}"\n'
        '[checkpoints."laion/clap-htsat-fused".weights]\n'
        f'"pytorch_model.bin" = "{sha256(hf_files["pytorch_model.bin"])}"\n'
        '[checkpoints."laion/clap-htsat-fused".files]\n'
        + "".join(
            f'"{n}" = "{sha256(d)}"\n' for n, d in sorted(hf_files.items()) if n[-4:] != ".bin"
        )
        + '[checkpoints."laion/clap-htsat-fused".architecture]\nenable_fusion = true\n'
        '[checkpoints."630k-audioset-fusion-best"]\nformat = "laion"\n'
        'file = "630k-audioset-fusion-best.pt"\nrepo = "lukewys/laion_clap"\n'
        f'revision = "{LAION_COMMIT}"\n'
        'support = ["bert-base-uncased", "roberta-base", "facebook/bart-base"]\n'
        '[checkpoints."630k-audioset-fusion-best".weights]\n'
        f'"630k-audioset-fusion-best.pt" = "{sha256(laion)}"\n'
        '[checkpoints."630k-audioset-fusion-best".architecture]\nenable_fusion = true\n'
    )
    clotho = clotho_files(tmp_path)
    datasets = datasets_registry(tmp_path, clotho)
    study_dir = tmp_path / "study"
    cache = tmp_path / "hub-cache"
    with StandinHub() as hub, FileServer(served(clotho)) as files:
        hub.add("laion/clap-htsat-fused", HF_COMMIT, hf_files)
        hub.add("lukewys/laion_clap", LAION_COMMIT, {"630k-audioset-fusion-best.pt": laion})
        for s in load_support().values():  # the stand-ins, under the bundled pinned revisions
            hub.add(s.repo, s.revision, _hub_snapshot_files(a / "hub", s.repo))
        r = run_cli(
            ["fetch", "laion/clap-htsat-fused", "630k-audioset-fusion-best", "clotho-eval",
             "--registry", str(registry), "--registry", str(datasets), "--cache", str(cache),
             "--mirror", files.url, "--data", str(study_dir / "data")],
            {"HF_ENDPOINT": hub.url},
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "fetch: done" in r.stdout
    study = study_dir / "tiny_clap.toml"
    cells = "".join(
        f'[[cell]]\nid = "{m}/clotho5"\nmodel = "{m}"\ndataset = "clotho5"\n'
        f'extract = {{ model = "{m}", audio = "data/clotho-eval/audio", '
        f'captions = "data/clotho-eval/captions.csv", registry = "../registry.toml" }}\n'
        for m in ("laion/clap-htsat-fused", "630k-audioset-fusion-best")
    )
    study.write_text(
        'schema = "audiorepro.study/1"\nname = "tiny-clap"\nbootstrap = { resamples = 20 }\n'
        + cells
        + '[[identity]]\na = "laion/clap-htsat-fused"\nb = "630k-audioset-fusion-best"\n'
        'registry = "../registry.toml"\nexpect = "different checkpoints"\n'
        # With three clips every caption finds its clip within 5: t2a r@5 is 1 by definition.
        '[[published]]\ncell = "laion/clap-htsat-fused/clotho5"\ntolerance = 0.0\n'
        'provenance = "definition: three clips"\nvalues = { "t2a/r@5" = 1.0 }\n'
    )
    out = tmp_path / "out"
    r = run_cli(
        ["reproduce", str(study), "--out", str(out)],
        {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_ENDPOINT": _closed_port()},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    verification = json.loads((out / "verification.json").read_text())
    assert verification["checkpoint_identity"]["verdict"] == "different checkpoints"
    assert verification["golden"]["counts"]["PASS"] == 1
    import gzip

    bundle = json.loads(gzip.decompress((out / "bundle.json.gz").read_bytes()))
    for cell in bundle["cells"]:
        dataset = cell["model_meta"]["inputs"]["dataset"]
        assert (dataset["name"], dataset["clips_present"], dataset["clips_missing"]) == (
            "clotho-eval", 3, 0,
        )  # fmt: skip
    assert "clotho-eval: 3 of 3 clips present" in (out / "report.html").read_text()

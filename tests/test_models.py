"""Extraction and checkpoint identity on tiny models built offline from a seed.

One tiny fused model (seed 0) in both formats, and a second one (seed 1) as a different
checkpoint. Every command runs in this process through ``audiorepro.cli.main``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.formats.dump import load_dump
from tests.conftest import FIXTURES, ROOT

torch = pytest.importorskip("torch", reason="the model stack is not installed (tox -e py311)")
pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311)")
pytest.importorskip("torchaudio", reason="fused laion-clap models need torchaudio")

AUDIO = FIXTURES / "audio"
CAPTIONS = AUDIO / "captions.csv"
PUBLISHED_KEYS = {
    "fixture",
    "n",
    "hf_checkpoint",
    "control",
    "audio_embedding_cosine_per_clip",
    "text_embedding_cosine_per_clip",
    "similarity_matrix_correlation",
    "similarity_matrix_max_abs_diff",
    "verdict",
}


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny0")
    assert main(["tiny-models", "--out", str(out), "--seed", "0"]) == 0
    return out


@pytest.fixture(scope="session")
def tiny_other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny1")
    assert main(["tiny-models", "--out", str(out), "--seed", "1"]) == 0
    return out


@pytest.fixture(scope="session")
def tiny_unfused(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-unfused")
    assert main(["tiny-models", "--out", str(out), "--seed", "0", "--no-fusion"]) == 0
    return out


def _identity(tiny: Path, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "identity.json"
    code = main(["identity", "--registry", str(tiny / "registry.toml"), "--json", str(out), *args])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_tiny_models_are_the_same_weights_in_both_formats(tiny: Path) -> None:
    from audiorepro.models.mapping import check_key_sets
    from audiorepro.models.offline import STANDIN_TOKEN
    from audiorepro.models.pipelines import load_clap
    from audiorepro.models.registry import load_registry

    registry = load_registry([tiny / "registry.toml"])
    hf = load_clap(registry["tiny-hf"])
    laion = load_clap(registry["tiny-laion"])
    keys = check_key_sets(laion.raw_state(), hf.raw_state())
    assert keys["missing"] == [] and keys["unexpected"] == []
    assert keys["hf_only"] == [
        "text_model.embeddings.position_ids",
        "text_model.embeddings.token_type_ids",
    ]
    only = {
        k.split(".")[1] if k.startswith("audio_branch") else k.split(".")[0]
        for k in keys["laion_only"]
    }
    assert only == {
        "spectrogram_extractor",
        "logmel_extractor",
        "tscam_conv",
        "head",
        "layers",
        "audio_transform",
        "text_transform",
    }
    assert all(k.endswith("attn_mask") for k in keys["laion_only"] if ".layers." in k)
    # The tokenizers are the stand-ins, not a broken fallback.
    assert STANDIN_TOKEN in hf.tokenizer.get_vocab()
    assert STANDIN_TOKEN in laion.module.tokenize.get_vocab()


def test_different_inputs_give_clearly_different_embeddings(tiny: Path) -> None:
    from audiorepro.models.embedder import load_embedder
    from audiorepro.models.identity import load_fixture
    from audiorepro.models.registry import load_registry

    fixture = load_fixture(None, None)
    pipeline = load_embedder(load_registry([tiny / "registry.toml"])["tiny-laion"])
    audio = pipeline.embed_audio(list(fixture.waveforms))
    text = pipeline.embed_text(list(fixture.captions))
    for emb in (audio, text):
        cos = emb @ emb.T
        np.testing.assert_allclose(np.diag(cos), 1.0, atol=1e-5)
        off = cos[~np.eye(len(cos), dtype=bool)]
        # Exact duplicates aside, no two inputs may look alike: "cosine 1" must mean something.
        assert off.max() < 0.99, off.max()


def test_identical_weights_and_matched_preprocessing(tiny: Path, tmp_path: Path) -> None:
    code, report = _identity(tiny, tmp_path, "--a", "tiny-hf", "--b", "tiny-laion")
    block = report["checkpoint_identity"]
    assert code == 0
    assert PUBLISHED_KEYS <= set(block)
    assert block["verdict"] == "identical"
    assert block["weights"]["status"] == "identical"
    assert block["weights"]["tensors_compared"] > 300
    assert min(block["audio_embedding_cosine_per_clip"]) > 0.99999
    assert min(block["text_embedding_cosine_per_clip"]) > 0.99999
    assert block["n"] == 5 and len(block["text_embedding_cosine_per_clip"]) == 25
    assert block["similarity_matrix_max_abs_diff"] < 1e-4


def test_unfused_models_are_identical_and_keep_their_mel_band(
    tiny_unfused: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _identity(tiny_unfused, tmp_path, "--a", "tiny-hf", "--b", "tiny-laion")
    assert code == 0 and report["checkpoint_identity"]["verdict"] == "identical"
    # Unfused laion-clap computes its mel inside the network from checkpoint tensors: the band
    # cannot be a setting there, and asking for one is an error, not a silent no-op.
    code, _ = _identity(
        tiny_unfused, tmp_path, "--a", "tiny-hf", "--b", "tiny-laion", "--b-set", "frequency_min=0"
    )
    assert code == 2
    assert "laion-clap fixes this to 50.0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, setting",
    [
        ("frequency_min=0", "frequency_min"),
        ("is_longer=extractor", "is_longer"),
        ("int16_roundtrip=false", "int16_roundtrip"),
    ],
)
def test_preprocessing_difference_is_named(
    tiny: Path, tmp_path: Path, override: str, setting: str
) -> None:
    code, report = _identity(
        tiny, tmp_path, "--a", "tiny-hf", "--b", "tiny-laion", "--a-set", override
    )
    block = report["checkpoint_identity"]
    assert code == 1
    assert block["verdict"] == "same weights, preprocessing differs"
    assert block["weights"]["status"] == "identical"
    assert min(block["audio_embedding_cosine_per_clip"]) < 0.9999
    assert block["diagnosis"]["closing_setting"] == setting
    assert list(block["diagnosis"]["differing_settings"]) == [setting]


def test_different_seeds_are_different_checkpoints(
    tiny: Path, tiny_other: Path, tmp_path: Path
) -> None:
    code, report = _identity(
        tiny,
        tmp_path,
        "--a", "tiny-hf",
        "--b", f"laion:{tiny_other / 'tiny-laion.pt'}",
        "--b-set", "enable_fusion=true",
    )  # fmt: skip
    block = report["checkpoint_identity"]
    assert code == 1
    assert block["verdict"] == "different checkpoints"
    assert block["weights"]["status"] == "different"
    assert block["weights"]["tensors_differing"] > 100
    assert max(block["audio_embedding_cosine_per_clip"]) < 0.9
    assert block["diagnosis"] is None


def _extract(tiny: Path, out: Path, *extra: str, model: str = "tiny-laion") -> int:
    return main(
        [
            "extract",
            "--registry", str(tiny / "registry.toml"),
            "--model", model,
            "--audio", str(AUDIO),
            "--captions", str(CAPTIONS),
            "--out", str(out),
            "--set", "batch_size=2",
            *extra,
        ]
    )  # fmt: skip


def test_extraction_is_byte_identical_and_sharding_merges_exactly(
    tiny: Path, tmp_path: Path
) -> None:
    assert _extract(tiny, tmp_path / "a.npz") == 0
    assert _extract(tiny, tmp_path / "b.npz") == 0
    parts = [tmp_path / f"p{i}.part.npz" for i in range(3)]
    for i, part in enumerate(parts):
        assert _extract(tiny, part, "--shard", f"{i}/3") == 0
    assert main(["merge", *map(str, parts), "--out", str(tmp_path / "m.npz")]) == 0
    # --jobs: local processes over whole batches, merged like shards
    assert _extract(tiny, tmp_path / "j.npz", "--jobs", "3") == 0
    digests = {
        p: hashlib.sha256((tmp_path / p).read_bytes()).hexdigest()
        for p in ("a.npz", "b.npz", "m.npz", "j.npz")
    }
    assert len(set(digests.values())) == 1, digests

    dump = load_dump(tmp_path / "a.npz")
    assert dump.n_clips == 6 and dump.n_captions == 30 and dump.captions_per_clip == 5
    assert dump.audio_ids[0] == "tone_440.wav"
    meta = dump.meta
    assert meta["model"] == "tiny-laion" and meta["device"] == "cpu" and meta["dtype"] == "float32"
    assert (
        meta["weights_sha256"]["tiny-laion.pt"]
        == hashlib.sha256((tiny / "tiny-laion.pt").read_bytes()).hexdigest()
    )
    assert meta["preprocessing"]["seed"] == 0 and meta["preprocessing"]["batch_size"] == 2
    assert meta["versions"]["torch"] and meta["versions"]["laion_clap"] == "1.1.7"
    assert meta["inputs"]["captions_sha256"] == hashlib.sha256(CAPTIONS.read_bytes()).hexdigest()
    assert meta["logit_scale"] > 1
    # Metrics and the laion-clap profile run on it.
    assert main(["metrics", str(tmp_path / "a.npz"), "--profile", "laion-clap"]) == 0


def test_merge_refuses_parts_that_do_not_belong_together(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(2):
        assert _extract(tiny, tmp_path / f"p{i}.part.npz", "--shard", f"{i}/2") == 0
    other = tmp_path / "other.part.npz"
    assert _extract(tiny, other, "--shard", "1/2", "--set", "seed=5") == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "p0.part.npz"), "--out", str(tmp_path / "m.npz")]) == 2
    assert "missing [1]" in capsys.readouterr().err
    assert (
        main(["merge", str(tmp_path / "p0.part.npz"), str(other), "--out", str(tmp_path / "m.npz")])
        == 2
    )
    assert "different extraction" in capsys.readouterr().err
    assert not (tmp_path / "m.npz").exists()


def test_long_caption_layout_gives_the_same_dump(tiny: Path, tmp_path: Path) -> None:
    import csv

    rows = list(csv.reader(CAPTIONS.read_text().splitlines()))
    audio = tmp_path / "audio"
    shutil.copytree(AUDIO, audio)
    (audio / "captions.csv").unlink()
    long_csv = tmp_path / "long.csv"
    long_csv.write_text(
        "file_name,caption\n" + "".join(f"{r[0]},{c}\n" for r in rows[1:] for c in r[1:])
    )
    args = [
        "extract",
        "--registry",
        str(tiny / "registry.toml"),
        "--model",
        "tiny-laion",
        "--set",
        "batch_size=2",
    ]
    assert (
        main(
            [
                *args,
                "--audio",
                str(audio),
                "--captions",
                str(long_csv),
                "--out",
                str(tmp_path / "l.npz"),
            ]
        )
        == 0
    )
    assert _extract(tiny, tmp_path / "c.npz") == 0
    long_dump, clotho_dump = load_dump(tmp_path / "l.npz"), load_dump(tmp_path / "c.npz")
    np.testing.assert_array_equal(long_dump.audio_embeds, clotho_dump.audio_embeds)
    np.testing.assert_array_equal(long_dump.text_embeds, clotho_dump.text_embeds)


def test_golden_reference_embeddings(
    tiny: Path, tiny_other: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = tmp_path / "golden.npz"
    reg = ["--registry", str(tiny / "registry.toml")]
    assert main(["identity", *reg, "--a", "tiny-laion", "--write-golden", str(golden)]) == 0
    assert main(["identity", *reg, "--a", "tiny-hf", "--golden", str(golden)]) == 0
    assert "matches golden" in capsys.readouterr().out
    swapped = ["--a", f"laion:{tiny_other / 'tiny-laion.pt'}", "--a-set", "enable_fusion=true"]
    out = tmp_path / "g.json"
    assert main(["identity", *reg, *swapped, "--golden", str(golden), "--json", str(out)]) == 1
    block = json.loads(out.read_text())["golden_identity"]
    assert block["verdict"] == "differs from golden" and block["min_cosine"] < 0.9


def _bad_registry(
    tiny: Path, tmp_path: Path, digest: str | None = None, name: str = "tiny-laion.pt"
) -> Path:
    text = (tiny / "registry.toml").read_text()
    text = text.replace('file = "tiny-laion.pt"', f'file = "{tiny / name}"')
    text = text.replace('hub_cache = "hub"', f'hub_cache = "{tiny / "hub"}"')
    text = text.replace('path = "tiny-hf"', f'path = "{tiny / "tiny-hf"}"')
    if digest is not None:
        good = hashlib.sha256((tiny / "tiny-laion.pt").read_bytes()).hexdigest()
        text = text.replace(good, digest)
    path = tmp_path / "registry.toml"
    path.write_text(text)
    return path


def test_wrong_hash_is_refused(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = _bad_registry(tiny, tmp_path, digest="f" * 64)
    code = main(
        [
            "extract",
            "--registry",
            str(reg),
            "--model",
            "tiny-laion",
            "--audio",
            str(AUDIO),
            "--captions",
            str(CAPTIONS),
            "--out",
            str(tmp_path / "x.npz"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "refusing to load" in err and "Traceback" not in err
    assert not (tmp_path / "x.npz").exists()


def test_corrupt_and_malicious_checkpoints_are_refused(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes((tiny / "tiny-laion.pt").read_bytes()[: 1 << 20])
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (Path.touch, (str(marker),))  # type: ignore[return-value]

    evil = tmp_path / "evil.pt"
    evil.write_bytes(b"")
    torch.save(
        {"state_dict": {"x": torch.zeros(1)}, "extra": Payload()}, evil, pickle_module=pickle
    )
    for path in (corrupt, evil):
        code = main(
            [
                "identity",
                "--a",
                f"laion:{path}",
                "--a-set",
                "enable_fusion=true",
                "--write-golden",
                str(tmp_path / "g.npz"),
            ]
        )
        err = capsys.readouterr().err
        assert code == 2, err
        # Refused by the checkpoint preflight, before laion-clap builds a model.
        why = "central directory" if path == corrupt else "refused: not a plain tensor file"
        assert str(path) in err and why in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not marker.exists(), "the checkpoint's pickle payload ran"


def test_corrupt_hf_weights_are_refused(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "hf"
    shutil.copytree(tiny / "tiny-hf", folder)
    (folder / "model.safetensors").write_bytes(
        (tiny / "tiny-hf" / "model.safetensors").read_bytes()[:4096]
    )
    code = main(["identity", "--a", f"hf:{folder}", "--write-golden", str(tmp_path / "g.npz")])
    err = capsys.readouterr().err
    # The checkpoint preflight reads the header, which runs past the cut.
    assert code == 2 and "safetensors header of" in err and "truncated" in err, err
    assert str(folder) in err and "Traceback" not in err


def test_the_tiny_checkpoints_pass_the_preflight(tiny: Path, tiny_unfused: Path) -> None:
    """The checkpoint preflight accepts real checkpoints of both formats, by registry name
    (registry entries' local files) and by path spec."""
    from audiorepro.models.preflight import preflight
    from audiorepro.models.registry import load_registry, resolve_spec

    for folder in (tiny, tiny_unfused):
        registry = load_registry([folder / "registry.toml"])
        for name in ("tiny-hf", "tiny-laion", f"hf:{folder / 'tiny-hf'}"):
            preflight(resolve_spec(name, registry))
        preflight(resolve_spec(f"laion:{folder / 'tiny-laion.pt'}", registry))


def test_a_malicious_pickle_in_an_hf_folder_is_one_line(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused by torch's weights_only loader (the payload never ran), once a traceback.
    folder = tmp_path / "hf"
    shutil.copytree(tiny / "tiny-hf", folder)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (Path.touch, (str(marker),))  # type: ignore[return-value]

    torch.save({"x": Payload()}, folder / "pytorch_model.bin", pickle_module=pickle)
    code = main(["identity", "--a", f"hf:{folder}", "--write-golden", str(tmp_path / "g.npz")])
    err = capsys.readouterr().err
    # Refused before transformers sees it (audiorepro.models.safeload), naming the file.
    assert code == 2 and "refused: not a plain tensor file" in err, err
    assert "pytorch_model.bin" in err and len(err.strip().splitlines()) == 1, err
    assert "two options" not in err  # torch's advice on bypassing the check is not repeated
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not marker.exists(), "the pickle payload ran"


def test_a_laion_spec_without_a_hub_cache_is_one_line(tiny: Path, tmp_path: Path) -> None:
    # laion-clap builds its text tower from roberta-base: with no cache, that was a traceback.
    # A subprocess: the hub reads HF_HOME once, when it is imported.
    empty = tmp_path / "empty-hf"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HOME=str(empty), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "audiorepro",
            "identity",
            "--a",
            f"laion:{tiny / 'tiny-laion.pt'}",
            "--write-golden",
            str(tmp_path / "g.npz"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "roberta-base" in err[-1]
    assert str(tiny / "tiny-laion.pt") in err[-1]


@pytest.mark.parametrize("problem", ["undecodable", "silent", "caption mismatch"])
def test_bad_audio_inputs_are_clear_errors(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str
) -> None:
    audio = tmp_path / "audio"
    shutil.copytree(AUDIO, audio)
    captions = audio / "captions.csv"
    if problem == "undecodable":
        (audio / "clicks.wav").write_bytes(b"RIFF....WAVEfmt garbage")
        expected = "clicks.wav: cannot be decoded"
    elif problem == "silent":
        import wave

        with wave.open(str(audio / "clicks.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(22_050)
            w.writeframes(b"\0\0" * 22_050)
        expected = "clicks.wav: is silent"
    else:
        (audio / "clicks.wav").rename(audio / "renamed.wav")
        expected = "no audio file, first ['clicks.wav']"
    code = main(
        [
            "extract",
            "--registry",
            str(tiny / "registry.toml"),
            "--model",
            "tiny-laion",
            "--audio",
            str(audio),
            "--captions",
            str(captions),
            "--out",
            str(tmp_path / "x.npz"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and expected in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "x.npz").exists()


@pytest.mark.gpu
def test_cuda_extraction_is_deterministic_and_close_to_cpu(tiny: Path, tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here (tools/gpu_check.sh runs this on a lent GPU)")
    for name in ("c1.npz", "c2.npz"):
        assert _extract(tiny, tmp_path / name, "--device", "cuda") == 0
    assert (tmp_path / "c1.npz").read_bytes() == (tmp_path / "c2.npz").read_bytes()
    assert _extract(tiny, tmp_path / "cpu.npz") == 0
    gpu, cpu = load_dump(tmp_path / "c1.npz"), load_dump(tmp_path / "cpu.npz")
    for a, b in ((gpu.audio_embeds, cpu.audio_embeds), (gpu.text_embeds, cpu.text_embeds)):
        cos = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
        assert cos.min() > 0.9999, cos.min()

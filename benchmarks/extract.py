#!/usr/bin/env python3
"""Benchmark: audio extraction cost with real-size CLAP audio towers, beside the peers' loops.

The models are random, built offline from a seed (``audiorepro.models.tiny``): their audio
tower is laion-clap's HTSAT-tiny, the audio encoder of every public CLAP checkpoint
(laion/clap-htsat-fused and -unfused, 630k-*.pt), with the real dimensions; only the text
tower is the two-layer stand-in, so caption embedding is not what this measures. Clips are
synthetic 44.1 kHz WAV files of 10 s and 30 s. Each run is its own subprocess, so its peak
memory (max RSS) is its own:

- ``audiorepro-hf`` / ``audiorepro-laion``: audiorepro's pipelines (decode, 48 kHz resample,
  batches of ``batch_size``, fixed torch threads ``AUDIOREPRO_CPU_THREADS``, default 1);
- ``peer-hf``: ``ClapProcessor`` + ``ClapModel.get_audio_features`` one clip at a time in a
  plain loop, torch's default threads;
- ``peer-laion``: laion-clap's ``get_audio_embedding_from_filelist`` on the same files.

    python benchmarks/extract.py                    # 8 clips of 10 s and of 30 s
    python benchmarks/extract.py --clips 16 --jobs 2

``--jobs N`` also times ``audiorepro extract --jobs N`` (processes over whole batches).

``--speech`` times a real pretrained network instead: resemblyzer's ``VoiceEncoder`` (its
shipped weights, extra ``speech``) on the fixture speech set (``fixtures/speech``, 48 clips of
16 kHz speech), one thread, each run in its own process after a warm-up (resemblyzer's first
mel spectrogram compiles librosa's numba kernels, seconds, once per process), best of
``--repeat`` (CPU time of the process, and wall time):

- ``speech-forward``: the model's forward pass alone (``VoiceEncoder.forward`` on each clip's
  partial mel spectrograms, computed beforehand by resemblyzer's own code);
- ``speech-encoder``: the encoder as audiorepro calls it (``preprocess_wav`` and
  ``embed_utterance`` per clip), on the clips already decoded in memory: the model's own work;
- ``speech-own``: resemblyzer's own loop, ``preprocess_wav(path)`` then ``embed_utterance``
  (its preprocessing: volume, webrtcvad trimming, mel spectrogram, partials);
- ``speech-audiorepro``: ``audiorepro extract --model resemblyzer`` in process, from the
  folder to the dump (input checks, hashes, decoding, batches, seeds, the encoder, the dump).

    python benchmarks/extract.py --speech --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

RUNS = ("audiorepro-hf", "audiorepro-laion", "peer-hf", "peer-laion", "hf-text-realsize")


def make_clips(folder: Path, n: int, seconds: int) -> list[Path]:
    import numpy as np
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seconds)
    paths = []
    for i in range(n):
        path = folder / f"clip{i:03d}.wav"
        soundfile.write(path, rng.uniform(-0.3, 0.3, 44100 * seconds).astype(np.float32), 44100)
        paths.append(path)
    (folder / "captions.csv").write_text(
        "file_name,caption\n" + "".join(f"{p.name},a sound {i}\n" for i, p in enumerate(paths))
    )
    return paths


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(kind: str, models: Path, clips: Path) -> dict[str, Any]:
    """One run in this process; returns seconds (model loading excluded) and peak memory."""
    import contextlib

    from audiorepro.models.offline import activate_hub_cache

    activate_hub_cache(models / "hub")
    files = sorted(clips.glob("*.wav"))
    if kind == "hf-text-realsize":
        # Captions through a random text tower of roberta-base's dimensions (12 layers, 768,
        # vocabulary 50,265: ClapTextConfig's defaults, those of the public checkpoints).
        import torch
        from transformers import ClapAudioConfig, ClapConfig, ClapModel, ClapTextConfig

        from audiorepro.models.pipelines import TEXT_MAX_LENGTH, configure_determinism

        configure_determinism("cpu")
        config = ClapConfig(
            text_config=ClapTextConfig().to_dict(),
            audio_config=ClapAudioConfig(enable_fusion=True).to_dict(),
        )
        model = ClapModel(config).eval()
        texts = [f"a sound number {i} with some words in it" for i in range(5 * len(files))]
        ids = torch.randint(3, 50000, (len(texts), TEXT_MAX_LENGTH))
        t0 = time.perf_counter()
        with torch.inference_mode():
            for start in range(0, len(texts), 8):
                batch = ids[start : start + 8]
                model.get_text_features(input_ids=batch, attention_mask=torch.ones_like(batch))
        return {
            "seconds": time.perf_counter() - t0,
            "clips": len(texts),
            "unit": "captions",
            "peak_mib": _peak_mib(),
            "torch_threads": torch.get_num_threads(),
        }
    if kind.startswith("audiorepro"):
        from audiorepro.formats.audio import read_audio
        from audiorepro.models.embedder import load_embedder
        from audiorepro.models.pipelines import configure_determinism
        from audiorepro.models.registry import load_registry

        configure_determinism("cpu")
        spec = load_registry([models / "registry.toml"])[
            "tiny-hf" if kind.endswith("hf") else "tiny-laion"
        ]
        pipeline = load_embedder(spec)
        t0 = time.perf_counter()
        pipeline.embed_audio([read_audio(p) for p in files])
    elif kind == "peer-hf":
        import librosa
        import torch
        from transformers import ClapModel, ClapProcessor

        model = ClapModel.from_pretrained(models / "tiny-hf").eval()
        processor = ClapProcessor.from_pretrained(models / "tiny-hf")
        t0 = time.perf_counter()
        for path in files:
            audio, _ = librosa.load(path, sr=48000)
            inputs = processor.feature_extractor(audio, sampling_rate=48000, return_tensors="pt")
            with torch.no_grad():
                model.get_audio_features(**inputs)
    else:
        import laion_clap

        with contextlib.redirect_stdout(sys.stderr):
            module = laion_clap.CLAP_Module(enable_fusion=True, amodel="HTSAT-tiny")
            import torch

            original = torch.load
            torch.load = lambda *a, **k: original(*a, **{**k, "weights_only": True})  # type: ignore[assignment]
            module.load_ckpt(str(models / "tiny-laion.pt"), verbose=False)
            torch.load = original
            t0 = time.perf_counter()
            module.get_audio_embedding_from_filelist(x=[str(p) for p in files], use_tensor=False)
    import torch

    return {
        "seconds": time.perf_counter() - t0,
        "clips": len(files),
        "peak_mib": _peak_mib(),
        "torch_threads": torch.get_num_threads(),
    }


SPEECH_RUNS = ("speech-forward", "speech-encoder", "speech-own", "speech-audiorepro")


def _timed(work: Any, repeat: int) -> dict[str, float]:
    """Best of ``repeat`` calls of ``work()``: CPU seconds of this process and wall seconds."""
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        work()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return {"cpu": min(cpu), "wall": min(wall)}


def run_speech(kind: str, clips: Path, repeat: int, out: Path) -> dict[str, Any]:
    """One resemblyzer run (module docstring) on the clips of ``clips``, after a warm-up."""
    import numpy as np
    import torch

    from audiorepro.models.pipelines import configure_determinism

    configure_determinism("cpu")  # one thread (AUDIOREPRO_CPU_THREADS), as extract runs
    files = sorted(clips.glob("*.wav"))
    if kind == "speech-audiorepro":
        from audiorepro.models.extract import extract
        from audiorepro.models.registry import load_registry

        spec = load_registry()["resemblyzer"]
        extract(spec, clips, None, out)  # warm-up: loads the encoder once per process

        def work() -> None:
            extract(spec, clips, None, out)
    else:
        from resemblyzer import audio, preprocess_wav

        from audiorepro.models.resemblyzer import ResemblyzerEncoder

        encoder = ResemblyzerEncoder()
        model = encoder.model
        model.embed_utterance(preprocess_wav(files[0]))  # warm-up (numba, torch)
        if kind == "speech-encoder":
            from audiorepro.formats.audio import read_audio

            waveforms = [read_audio(p, 16_000) for p in files]

            def work() -> None:
                encoder.embed_audio(waveforms)
        elif kind == "speech-own":

            def work() -> None:
                for path in files:
                    model.embed_utterance(preprocess_wav(path))
        else:
            mels = []
            for path in files:
                wav = preprocess_wav(path)
                wav_slices, mel_slices = model.compute_partial_slices(len(wav), 1.3, 0.75)
                wav = np.pad(wav, (0, max(0, wav_slices[-1].stop - len(wav))))
                mel = audio.wav_to_mel_spectrogram(wav)
                mels.append(torch.from_numpy(np.array([mel[s] for s in mel_slices])))

            def work() -> None:
                with torch.no_grad():
                    for m in mels:
                        model(m)

    times = _timed(work, repeat)
    return {**times, "clips": len(files), "torch_threads": torch.get_num_threads()}


def speech_main(repeat: int, env: dict[str, str]) -> int:
    """The resemblyzer runs, each in its own process; prints times and the overheads."""
    clips = HERE.parent / "fixtures" / "speech"
    results = {}
    with tempfile.TemporaryDirectory(prefix="audiorepro-bench-") as tmp:
        for kind in SPEECH_RUNS:
            cmd = [sys.executable, __file__, "--speech-one", kind, str(clips), str(repeat), tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if proc.returncode:
                print(f"{kind:<18} failed: {proc.stderr.strip()[-300:]}")
                return 1
            results[kind] = r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                f"{kind:<18} cpu {r['cpu']:6.3f} s  wall {r['wall']:6.3f} s  "
                f"({r['clips']} clips, torch threads {r['torch_threads']})"
            )
    forward, encoder, own, ours = (results[k]["cpu"] for k in SPEECH_RUNS)
    print(
        f"CPU time over the forward pass alone: resemblyzer's preprocessing in memory "
        f"+{encoder / forward - 1:.1%}, its own loop from files +{own / forward - 1:.1%}, "
        f"audiorepro extract +{ours / forward - 1:.1%}"
    )
    print(
        f"audiorepro's pipeline over the encoder's own work: {ours / encoder - 1:+.1%} "
        f"({ours - encoder:+.3f} s); over resemblyzer's own loop {ours / own - 1:+.1%}"
    )
    return 0


def run_jobs(jobs: int, models: Path, clips: Path, out: Path) -> dict[str, Any]:
    """``audiorepro extract --jobs N`` end to end (wall time, models loaded per process)."""
    cmd = [
        sys.executable, "-m", "audiorepro", "extract", "--registry",
        str(models / "registry.toml"), "--model", "tiny-hf", "--audio", str(clips),
        "--captions", str(clips / "captions.csv"), "--out", str(out), "--jobs", str(jobs),
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return {"seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=8, help="clips per length")
    parser.add_argument("--lengths", default="10,30", help="clip lengths in seconds")
    parser.add_argument("--runs", default=",".join(RUNS))
    parser.add_argument("--jobs", type=int, default=0, help="also time extract --jobs N")
    parser.add_argument("--speech", action="store_true", help="resemblyzer on real speech")
    parser.add_argument("--repeat", type=int, default=3, help="--speech: best of N runs")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # KIND MODELS CLIPS
    parser.add_argument("--speech-one", nargs=4, help=argparse.SUPPRESS)  # KIND CLIPS N TMP
    parser.add_argument("--build", help=argparse.SUPPRESS)  # MODELS folder
    args = parser.parse_args(argv)
    if args.build:
        from audiorepro.models.tiny import build_tiny_models

        build_tiny_models(Path(args.build), seed=0, fusion=True)
        return 0
    if args.one:
        kind, models, clips = args.one
        print(json.dumps(run_one(kind, Path(models), Path(clips))))
        return 0
    if args.speech_one:
        kind, clips, repeat, tmp = args.speech_one
        result = run_speech(kind, Path(clips), int(repeat), Path(tmp) / f"{kind}.npz")
        print(json.dumps(result))
        return 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), env.get("PYTHONPATH", "")])
    if args.speech:
        return speech_main(args.repeat, env)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}; AUDIOREPRO_CPU_THREADS="
        f"{os.environ.get('AUDIOREPRO_CPU_THREADS', '1')}"
    )
    with tempfile.TemporaryDirectory(prefix="audiorepro-bench-") as tmp:
        root = Path(tmp)
        # In a child process: a parent's peak memory would be inherited by every run's.
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, __file__, "--build", str(root / "models")],
            check=True, env=env, capture_output=True,
        )  # fmt: skip
        print(f"built the random fused HTSAT-tiny models in {time.perf_counter() - t0:.1f} s")
        for seconds in (int(s) for s in args.lengths.split(",")):
            clips = root / f"clips{seconds}"
            make_clips(clips, args.clips, seconds)
            for kind in args.runs.split(","):
                proc = subprocess.run(
                    [sys.executable, __file__, "--one", kind, str(root / "models"), str(clips)],
                    capture_output=True, text=True, env=env, check=False,
                )  # fmt: skip
                if proc.returncode:
                    print(f"{seconds:>3} s  {kind:<18} failed: {proc.stderr.strip()[-300:]}")
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                unit = r.get("unit", "clips")
                print(
                    f"{seconds:>3} s  {kind:<18} {r['clips'] / r['seconds']:6.2f} {unit}/s  "
                    f"peak {r['peak_mib']:7.0f} MiB  torch threads {r['torch_threads']}"
                )
            if args.jobs:
                for jobs in sorted({1, args.jobs}):
                    r = run_jobs(jobs, root / "models", clips, root / f"dump{seconds}-{jobs}.npz")
                    if "error" in r:
                        print(f"{seconds:>3} s  extract --jobs {jobs}: failed {r['error']}")
                    else:
                        print(
                            f"{seconds:>3} s  extract --jobs {jobs:<4} {r['seconds']:6.1f} s wall "
                            "(model loading, text and writing included)"
                        )
            if args.jobs:
                a, b = (root / f"dump{seconds}-{j}.npz" for j in (1, args.jobs))
                if a.is_file() and b.is_file():
                    same = a.read_bytes() == b.read_bytes()
                    print(
                        f"{seconds:>3} s  dumps of --jobs 1 and {args.jobs} byte-identical: {same}"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

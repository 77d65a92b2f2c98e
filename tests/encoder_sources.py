"""Encoder modules nobody in the kit wrote, made from seeds for the tests of
``tests/test_encoders.py``: a NumPy encoder with a text tower (``py:`` module, ``py:`` file,
an installed plugin) and a torch HEAR 2021 module (audio only).

Each module's weights are a file beside it, written from a seed; the modules never import
audiorepro, as a user's would not.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

#: A NumPy encoder: log-magnitude spectra of 400-sample frames (mean over frames) projected by a
#: seeded matrix; texts as byte counts projected by another. 16 kHz. Every waveform it is given
#: is kept in RECEIVED (the sample-for-sample test reads it).
NUMPY_ENCODER = '''
"""A tiny seeded encoder: frame spectra and byte counts, each projected."""
from pathlib import Path

import numpy as np

WEIGHTS = Path(__file__).with_name(Path(__file__).stem + ".npz")
RECEIVED = []


class SeedEncoder:
    name = "seedenc"
    sample_rate = 16000

    def __init__(self, path=WEIGHTS):
        self.path = Path(path)
        with np.load(self.path, allow_pickle=False) as w:
            self.audio_proj = np.array(w["audio"])
            self.text_proj = np.array(w["text"])

    def embed_audio(self, waveforms):
        rows = []
        for w in waveforms:
            RECEIVED.append(np.array(w))
            n = max(1, len(w) // 400)
            frames = np.resize(np.asarray(w, np.float64), n * 400).reshape(n, 400)
            spectrum = np.log1p(np.abs(np.fft.rfft(frames, axis=1))).mean(axis=0)
            rows.append(spectrum @ self.audio_proj)
        return np.asarray(rows, dtype=np.float32)

    def embed_text(self, texts):
        counts = np.zeros((len(texts), 256))
        for i, text in enumerate(texts):
            for byte in text.encode():
                counts[i, byte] += 1.0
        return (counts @ self.text_proj).astype(np.float32)

    def weight_files(self):
        return [self.path]


def make():
    return SeedEncoder()


def write_weights(path, seed):
    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        np.savez(f, audio=rng.standard_normal((201, 16)), text=rng.standard_normal((256, 16)))
'''

#: A HEAR 2021 module (torch): a seeded linear layer over frame spectra, 16 kHz, 8 dimensions.
HEAR_MODULE = '''
"""A tiny HEAR 2021 module: a seeded linear layer over log frame spectra."""
import torch


class Model(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = 8
    timestamp_embedding_size = 8

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(201, 8)


def load_model(model_file_path=""):
    model = Model()
    if model_file_path:
        model.load_state_dict(torch.load(model_file_path, weights_only=True))
    return model.eval()


def _spectrum(audio):
    n = max(1, audio.shape[1] // 400)
    if audio.shape[1] < 400:
        audio = torch.nn.functional.pad(audio, (0, 400 - audio.shape[1]))
    frames = audio[:, : n * 400].reshape(audio.shape[0], n, 400)
    return torch.log1p(torch.fft.rfft(frames, dim=-1).abs()).mean(dim=1)


def get_scene_embeddings(audio, model):
    return model.proj(_spectrum(audio))


def get_timestamp_embeddings(audio, model):
    raise NotImplementedError


def write_weights(path, seed):
    torch.manual_seed(seed)
    torch.save(Model().state_dict(), path)
'''


@dataclass(frozen=True)
class Encoders:
    """Where the test encoders were written, and the spec of each."""

    root: Path
    module_spec: str  # py:MODULE:FACTORY
    file_spec: str  # py:PATH.py:FACTORY
    plugin_spec: str  # an entry point's name
    hear_spec: str  # hear:MODULE:WEIGHTS
    file_path: Path
    hear_weights: Path


def _run(source: str, name: str, folder: Path, weights: Path, seed: int) -> None:
    """Write ``source`` as ``folder/name.py`` and its weights from ``seed``."""
    import runpy

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(source).lstrip())
    namespace = runpy.run_path(str(folder / f"{name}.py"))
    namespace["write_weights"](weights, seed)


def write_encoders(root: Path, tag: str) -> Encoders:
    """Every test encoder under ``root``; ``tag`` makes the module names unique (modules stay
    in ``sys.modules`` for the session). ``root/mods`` and ``root/plugin`` go on sys.path."""
    mods, plugin, files = root / "mods", root / "plugin", root / "files"
    module = f"seedenc_{tag}"
    _run(NUMPY_ENCODER, module, mods, mods / f"{module}.npz", 1)
    _run(NUMPY_ENCODER, "my_encoder", files, files / "my_encoder.npz", 2)
    plug = f"seedplug_{tag}"
    _run(NUMPY_ENCODER, plug, plugin, plugin / f"{plug}.npz", 3)
    info = plugin / f"{plug}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {plug}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[audiorepro.encoders]\nseed-{tag} = {plug}:make\n")
    (info / "top_level.txt").write_text(f"{plug}\n")
    (info / "RECORD").write_text(f"{plug}.py,,\n")
    hear = f"hearseed_{tag}"
    weights = root / "hear-weights" / "hearseed.pt"
    weights.parent.mkdir()
    _run(HEAR_MODULE, hear, mods, weights, 4)
    return Encoders(
        root=root,
        module_spec=f"py:{module}:make",
        file_spec=f"py:{files / 'my_encoder.py'}:make",
        plugin_spec=f"seed-{tag}",
        hear_spec=f"hear:{hear}:{weights}",
        file_path=files / "my_encoder.py",
        hear_weights=weights,
    )

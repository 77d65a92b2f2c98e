"""resemblyzer's pretrained speaker encoder as an audiorepro encoder (extra ``speech``).

resemblyzer (PyPI 0.1.4) ships the trained weights of its ``VoiceEncoder`` (a three-layer
LSTM over 40-band mel frames, 256-dimensional L2-normalized speaker embeddings) inside its
wheel, as ``resemblyzer/pretrained.pt``: a real pretrained network that runs offline. Each
clip goes through resemblyzer's own code, exactly as its README does it::

    wav = preprocess_wav(waveform)          # volume to -30 dBFS (raise only), webrtcvad
                                            # trimming of silences longer than 6 x 30 ms
    embedding = encoder.embed_utterance(wav)  # 1.6 s partials at 1.3 per second, the
                                            # L2-normalized mean of their embeddings

``preprocess_wav(path)`` decodes and resamples the file with librosa
(``librosa.load(path, sr=None)``, then ``librosa.resample(wav, orig_sr=rate,
target_sr=16000)``, librosa's default ``soxr_hq``): the wrapper's ``load_audio`` makes exactly
these two calls for every clip (the kit's own decoder and ``resample_poly`` are not used, so
a 22.05 kHz clip gets resemblyzer's embedding to the last bit, not one at cosine 0.99997 of
it), and ``embed_audio`` runs the rest of ``preprocess_wav`` (no ``source_sr``: volume and
VAD only) and ``embed_utterance``. Dumps record it as their ``audio_loader``. Its embeddings
are returned unchanged (float32). Audio only: it has no text tower. (Waveforms given in
memory at another rate, as ``identity``'s fixture, are resampled by the kit first.)

The weights file is checked to be plain tensors (``torch.load(weights_only=True)``) before
resemblyzer loads it (which, under torch 2.9, loads with ``weights_only=True`` as well).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.models.safeload import load_weights_only

#: resemblyzer's ``hparams.sampling_rate``.
SAMPLE_RATE = 16_000
#: The embedding size of ``VoiceEncoder`` (``hparams.model_embedding_size``).
EMBEDDING_SIZE = 256

Array = npt.NDArray[np.float32]


def shipped_weights() -> Path:
    """``resemblyzer/pretrained.pt`` of the installed wheel."""
    try:
        import resemblyzer
    except ImportError:
        raise UserError(
            "resemblyzer is not installed: pip install 'audiorepro[speech]'", key="resemblyzer"
        ) from None
    return Path(resemblyzer.__file__).resolve().parent / "pretrained.pt"


class ResemblyzerEncoder:
    """resemblyzer's ``VoiceEncoder`` with its shipped (or given) weights, on the CPU."""

    name = "resemblyzer"
    sample_rate = SAMPLE_RATE

    def __init__(self, weights: str | Path | None = None, device: str = "cpu") -> None:
        path = Path(weights) if weights is not None else shipped_weights()
        if not path.is_file():
            raise UserError("no such weights file", source=path)
        load_weights_only(path)  # plain tensors, or one line and exit 2
        from resemblyzer import VoiceEncoder

        with contextlib.redirect_stdout(io.StringIO()):
            self.model = VoiceEncoder(device=device, verbose=False, weights_fpath=path)
        self.model.eval()
        self.weights = path
        self.device = device

    def weight_files(self) -> Sequence[Path]:
        return [self.weights]

    @property
    def audio_loader(self) -> str:
        """How :meth:`load_audio` decodes and resamples (recorded in every dump)."""
        return (
            f"resemblyzer's preprocess_wav: librosa {metadata.version('librosa')} load(sr=None), "
            f"resample(orig_sr, target_sr={SAMPLE_RATE}) (res_type soxr_hq)"
        )

    def load_audio(self, path: Path) -> Array:
        """A clip as ``preprocess_wav(path)`` has it before its volume and VAD steps: decoded
        by ``librosa.load(path, sr=None)`` and resampled by ``librosa.resample`` to 16 kHz
        (resemblyzer's own two calls; librosa returns a 16 kHz clip unchanged)."""
        import librosa

        wav, rate = librosa.load(str(path), sr=None)
        wav = librosa.resample(wav, orig_sr=rate, target_sr=SAMPLE_RATE)
        return np.asarray(wav, dtype=np.float32)

    def preprocess(self, waveform: Array) -> Array:
        """resemblyzer's ``preprocess_wav`` on a 16 kHz clip; an all-silent result is refused."""
        from resemblyzer import preprocess_wav

        wav = preprocess_wav(np.asarray(waveform, dtype=np.float32))
        if wav.size == 0:
            raise UserError("has no voiced audio (resemblyzer's VAD trims it all)", key=self.name)
        return np.asarray(wav, dtype=np.float32)

    def embed_audio(self, waveforms: Sequence[Array]) -> Array:
        """One ``embed_utterance`` per clip (mono float32 at 16 kHz) -> ``[n, 256]`` float32."""
        import torch

        rows = np.zeros((len(waveforms), EMBEDDING_SIZE), dtype=np.float32)
        with torch.inference_mode():
            for i, waveform in enumerate(waveforms):
                rows[i] = self.model.embed_utterance(self.preprocess(waveform))
        return rows

    def embed_frames(self, waveforms: Sequence[Array]) -> list[tuple[Array, npt.NDArray[Any]]]:
        """Per clip (mono float32 at 16 kHz), resemblyzer's partial embeddings and their
        times: ``embed_utterance(wav, return_partials=True)`` (1.6 s partials at 1.3 per
        second, the last zero-padded when at least 75 % covered) after ``preprocess_wav``'s
        volume step (``normalize_volume`` to -30 dBFS, raise only) but without its VAD
        trimming, which would move every frame off the clip's time axis; each partial's
        timestamp is the centre of its audio slice in ms."""
        import torch
        from resemblyzer import hparams, normalize_volume

        out = []
        with torch.inference_mode():
            for waveform in waveforms:
                wav = normalize_volume(
                    np.asarray(waveform, dtype=np.float32),
                    hparams.audio_norm_target_dBFS,
                    increase_only=True,
                )
                _, partials, slices = self.model.embed_utterance(wav, return_partials=True)
                stamps = [(s.start + s.stop) / 2 / SAMPLE_RATE * 1000.0 for s in slices]
                out.append(
                    (np.asarray(partials, dtype=np.float32), np.asarray(stamps, dtype=np.float64))
                )
        return out

    def state_dict(self) -> dict[str, Any]:
        """The network's tensors by name (for ``identity``, tensor by tensor)."""
        return dict(self.model.state_dict())


def voice_encoder(weights: str | None = None, device: str = "cpu") -> ResemblyzerEncoder:
    """The factory a ``py:`` spec or the bundled registry's ``resemblyzer`` entry names: the
    shipped weights, or ``weights`` (a ``py:PATH.py:FACTORY`` file may pass another file)."""
    return ResemblyzerEncoder(weights, device)

"""The kit's side of every encoder: batches, seeds, resampling, checks and the record.

:func:`load_embedder` loads any model spec (a CLAP checkpoint, a ``py:`` encoder, a HEAR
module, a registry entry or a plugin) as an :class:`Embedder` around its
:class:`~audiorepro.models.encoder.Encoder`. Everything after it (extraction, shards and
``--jobs``, the extraction cache, identity, the zero-shot cells, Slurm array tasks) calls the
embedder, never the encoder's family:

- **Resampling**: clips are decoded to the encoder's ``sample_rate`` by the kit's own recorded
  code (:func:`audiorepro.formats.audio.read_audio`, :data:`~audiorepro.formats.audio.RESAMPLER`);
  a clip already at that rate reaches the encoder sample for sample (decoded as float64 and
  stored as float32, which holds every 16- and 24-bit sample exactly).
- **Batches**: ``batch_size`` clips (or texts) per call; each audio batch starts by seeding
  Python's, NumPy's and torch's generators from ``(seed, index of its first clip)``, so a
  sharded run embeds every batch as an unsharded one does.
- **Checks**: every answer is a finite float32 ``[n, d]`` array with one ``d``
  (:func:`~audiorepro.models.encoder.check_embeddings`), kept as it is.
- **Record** (:meth:`Embedder.meta`): the spec, the SHA-256 of every weight file, the
  encoder's code (:func:`Embedder.code`), its name, rate and towers, the settings and device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.progress import progress_bar
from audiorepro.formats.audio import RESAMPLER, read_audio, resample
from audiorepro.models.encoder import (
    Encoder,
    check_embeddings,
    has_text_tower,
    no_text_tower,
    require_text_tower,
)
from audiorepro.models.encoder_specs import code_identity
from audiorepro.models.pipelines import Pipeline, batch_seed, clap_code, load_clap, seed_all
from audiorepro.models.registry import USER_FORMATS, ModelSpec
from audiorepro.models.user_encoders import (
    call_user,
    load_user,
    user_has_text,
    user_settings,
    user_state,
    user_weight_hashes,
)
from audiorepro.specs.settings import Preprocessing

Array = npt.NDArray[np.float32]


@dataclass
class Embedder:
    """One loaded encoder and how the kit runs it (module docstring)."""

    spec: ModelSpec
    encoder: Encoder
    settings: Preprocessing
    device: str
    weight_hashes: dict[str, str]
    code: dict[str, Any]
    _dim: int | None = field(default=None, repr=False)
    #: The encoder's ``sample_rate`` when it loaded: clips are decoded at it and it is recorded
    #: (an encoder that changes it later is refused: :meth:`embed_audio`).
    _rate: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self._rate = int(self.encoder.sample_rate)

    @property
    def sample_rate(self) -> int:
        return self._rate

    @property
    def is_user_code(self) -> bool:
        """A user's encoder (``py``, ``hear``, a plugin): its calls are the user's code."""
        return self.spec.format in USER_FORMATS

    def _call(self, method: str, batch: list[Any]) -> Any:
        func = getattr(self.encoder, method)
        if not self.is_user_code:
            return func(batch)
        return call_user(func, method, self.spec.name, batch)

    def read_clip(self, path: Path) -> Array:
        """One clip, mono float32 at :attr:`sample_rate`: decoded and resampled by the kit's
        recorded code (:func:`~audiorepro.formats.audio.read_audio`), or by the encoder's own
        ``load_audio(path)`` where it has one (a wrapper whose library decodes and resamples
        its own way, as resemblyzer's ``preprocess_wav`` does with librosa)."""
        load = getattr(self.encoder, "load_audio", None)
        if not callable(load):
            return read_audio(path, self._rate)
        wav = load(path) if not self.is_user_code else call_user(
            load, "load_audio", self.spec.name, path
        )  # fmt: skip
        if not isinstance(wav, np.ndarray) or wav.dtype != np.float32 or wav.ndim != 1:
            raise UserError(
                f"load_audio returned {type(wav).__name__} "
                f"{getattr(wav, 'dtype', '')}{getattr(wav, 'shape', '')} for {path.name}; "
                "expected a mono float32 numpy array [samples]",
                key=self.spec.name,
            )
        return wav

    def _check_rate(self) -> None:
        now = getattr(self.encoder, "sample_rate", None)
        if now != self._rate:
            raise UserError(
                f"changed its sample_rate from {self._rate} to {now!r} while embedding; the "
                f"clips were decoded at {self._rate} Hz (an encoder's sample_rate is read once, "
                "when it loads, and must not change)",
                key=self.spec.name,
            )

    @property
    def has_text(self) -> bool:
        return has_text_tower(self.encoder)

    def embed_audio(
        self,
        waveforms: Sequence[Array],
        *,
        rate: int | None = None,
        first_index: int = 0,
        progress: bool = False,
    ) -> Array:
        """Embed mono float32 clips (at ``rate`` Hz; None: already at the encoder's rate) in
        batches; row ``i`` is clip ``first_index + i``."""
        if rate is not None and rate != self.sample_rate:
            waveforms = [
                resample(w.astype(np.float64), rate, self.sample_rate).astype(np.float32)
                for w in waveforms
            ]
        rows = []
        size = self.settings.batch_size
        for start in progress_bar(
            range(0, len(waveforms), size), "embedding audio batches", progress
        ):
            seed_all(batch_seed(self.settings.seed, first_index + start))
            batch = list(waveforms[start : start + size])
            out = self._call("embed_audio", batch)
            self._check_rate()
            rows.append(self._checked(out, len(batch), "embed_audio"))
        return np.concatenate(rows) if rows else np.zeros((0, 0), np.float32)

    def embed_text(self, texts: Sequence[str], *, progress: bool = False) -> Array:
        """Embed texts in batches (an encoder without a text tower: one line)."""
        require_text_tower(self.encoder, self.spec.name, needed_by="embedding text")
        rows = []
        size = self.settings.batch_size
        for start in progress_bar(range(0, len(texts), size), "embedding text batches", progress):
            batch = list(texts[start : start + size])
            rows.append(self._checked(self._call("embed_text", batch), len(batch), "embed_text"))
        return np.concatenate(rows) if rows else np.zeros((0, 0), np.float32)

    def _checked(self, out: Any, n: int, what: str) -> Array:
        checked = check_embeddings(out, n, what=what, spec=self.spec.name, dim=self._dim)
        self._dim = int(checked.shape[1])
        return checked

    def state(self) -> dict[str, Any] | None:
        """The weights tensor by tensor (CLAP: under its library's names; a user's encoder:
        every torch, safetensors or npz weight file's tensors, as ``file/name``), or None
        when some weight file is none of these (identity then compares hashes)."""
        if isinstance(self.encoder, Pipeline):
            return self.encoder.raw_state()
        return user_state(self.encoder, self.spec.name)

    def meta(self) -> dict[str, Any]:
        """What every dump and identity report records of the model (module docstring)."""
        spec = self.spec
        described = (
            self.encoder.describe()
            if isinstance(self.encoder, Pipeline)
            else {
                "library": spec.format,
                "location": Path(spec.location).name if spec.location.endswith(".py")
                else spec.location,
                "revision": None,
            }
        )  # fmt: skip
        extra = {} if spec.factory is None else {"factory": spec.factory}
        if spec.plugin is not None:
            extra["plugin"] = spec.plugin
        return {
            "model": recorded_name(spec),
            "format": spec.format,
            **described,
            **extra,
            "weights_sha256": dict(sorted(self.weight_hashes.items())),
            "encoder": {
                "name": self.encoder.name,
                "sample_rate": self.sample_rate,
                "text_tower": self.has_text,
            },
            "encoder_code": self.code,
            "preprocessing": self.settings.to_json(),
            "device": self.device,
            "dtype": "float32",
        }

    def embedding_meta(self) -> dict[str, Any]:
        """How clips reached the encoder, and the model's logit scale where it has one."""
        import soundfile

        scale = self.encoder.logit_scale() if isinstance(self.encoder, Pipeline) else None
        own = getattr(self.encoder, "audio_loader", None)
        if callable(getattr(self.encoder, "load_audio", None)):
            # The encoder decodes and resamples by itself (read_clip): its own words for how.
            return {
                **({} if scale is None else {"logit_scale": scale}),
                "audio_loader": str(own or f"{type(self.encoder).__name__}.load_audio"),
                "sample_rate": self.sample_rate,
            }
        return {
            **({} if scale is None else {"logit_scale": scale}),
            "audio_decoder": (
                f"soundfile {soundfile.__version__} (libsndfile {soundfile.__libsndfile_version__})"
            ),
            "resampler": RESAMPLER,
            "sample_rate": self.sample_rate,
            "mono": "mean of channels",
        }


def recorded_name(spec: ModelSpec) -> str:
    """The spec as dumps record it, without paths (the docs promise none): a ``py:``/``hear:``
    spec's files by their names (``hear:/home/me/enc.py:/data/w.pt`` -> ``hear:enc.py:w.pt``);
    their contents are recorded by hash beside it (weights, code)."""
    user = spec.user
    if user is None or not spec.name.startswith(("py:", "hear:")):
        return spec.name
    target = Path(user.target).name if user.is_file else user.target
    if user.format == "py":
        return f"py:{target}:{user.factory}"
    return f"hear:{target}" + ("" if user.weights is None else f":{Path(user.weights).name}")


def load_embedder(
    spec: ModelSpec, overrides: dict[str, Any] | None = None, device: str = "cpu"
) -> Embedder:
    """Load any model spec as an :class:`Embedder` (its weights' hashes checked first where
    a registry records them)."""
    overrides = dict(overrides or {})
    if spec.format in USER_FORMATS:
        settings = user_settings(spec, overrides)
        loaded = load_user(spec, device)
        return Embedder(spec, loaded.encoder, settings, device, loaded.hashes, loaded.code)
    clap = load_clap(spec, overrides, device)
    return Embedder(spec, clap, clap.settings, device, clap.weight_hashes, clap.code())


def require_text(embedder: Embedder, *, needed_by: str) -> None:
    """One line when ``needed_by`` needs a text tower the encoder lacks (before any work)."""
    require_text_tower(embedder.encoder, embedder.spec.name, needed_by=needed_by)


def spec_code(spec: ModelSpec) -> dict[str, Any]:
    """The encoder's code as the extraction cache's key records it, read without importing
    (a user's module: its source's SHA-256 and version; CLAP: the library's version); the
    same value :attr:`Embedder.code` records in the dump."""
    user = spec.user
    return clap_code(spec.format) if user is None else code_identity(user)


def spec_weight_hashes(spec: ModelSpec, device: str = "cpu") -> dict[str, str] | None:
    """A user encoder's weights' SHA-256 for the cache key (:func:`user_weight_hashes`);
    None for a CLAP spec (the cache hashes its files itself)."""
    return None if spec.user is None else user_weight_hashes(spec, device)


def require_text_spec(spec: ModelSpec, *, needed_by: str) -> None:
    """Before any work: one line when ``needed_by`` (retrieval, zero-shot) names an encoder
    without a text tower (a HEAR module; a ``py`` encoder without ``embed_text``, built once
    to ask). A CLAP model has one."""
    if spec.user is not None and not user_has_text(spec):
        raise no_text_tower(spec.name, needed_by)

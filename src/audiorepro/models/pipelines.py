"""Two CLAP pipelines behind one interface: Hugging Face ``ClapModel`` and laion-clap.

Both load their weights with the library's own code (``ClapModel.from_pretrained(repo_or_dir,
revision=...)``; ``CLAP_Module(...).load_ckpt(path)``) after :func:`verify_weights` has hashed
every file, run in eval mode under :func:`configure_determinism`, and return L2-normalized
float32 embeddings (both libraries normalize; audiorepro does not normalize again, which would
move last bits).

The waveform reaching a model is decided here, not inside a library, so that both pipelines can
be given exactly the same samples: decoded, mono, 48 kHz (:mod:`audiorepro.formats.audio`), then the
optional int16 round trip (:func:`int16_roundtrip`, bit-identical to laion-clap's
``int16_to_float32(float32_to_int16(x))``). Each batch starts by seeding Python's, NumPy's and
torch's generators from ``(seed, index of the batch's first clip)``, so random crops repeat and
do not depend on how a run is sharded (shards split on batch boundaries).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import random
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.threads import cpu_threads, cublas_workspace_config
from audiorepro.formats.audio import SAMPLE_RATE
from audiorepro.models.mapping import laion_to_hf
from audiorepro.models.offline import activate_hub_cache
from audiorepro.models.quiet import quiet_model_library
from audiorepro.models.registry import ModelSpec, verify_weights, weight_files
from audiorepro.models.safeload import check_pickled
from audiorepro.specs.settings import Preprocessing

#: laion-clap's text length (``CLAP_Module.tokenizer``); the Hugging Face side uses the same.
TEXT_MAX_LENGTH = 77
HOP_LENGTH = 480

Array = npt.NDArray[np.float32]


def int16_roundtrip(waveform: Array) -> Array:
    """Quantize to int16 and back exactly as laion-clap does (clip, scale by 32767, truncate).

    >>> int16_roundtrip(np.array([0.5, -2.0, 1e-6], dtype=np.float32))
    array([ 0.49998474, -1.        ,  0.        ], dtype=float32)
    """
    quantized = (np.clip(waveform, -1.0, 1.0) * 32767.0).astype(np.int16)
    return (quantized / 32767.0).astype(np.float32)


def is_longer(n_samples: int, settings: Preprocessing) -> bool:
    """The fusion flag both libraries compute from a clip's length (before any random flip).

    A clip longer than ``max_samples`` whose mel has as many frames as a 10 s crop (fewer than
    one hop longer) is not "longer" under fusion: both libraries stack the whole mel four times.

    >>> s = Preprocessing(truncation="fusion")
    >>> is_longer(480_000, s), is_longer(480_100, s), is_longer(480_480, s)
    (False, False, True)
    """
    if n_samples <= settings.max_samples:
        return False
    if settings.truncation == "fusion":
        return n_samples // HOP_LENGTH != settings.max_samples // HOP_LENGTH
    return True


def batch_seed(seed: int, first_index: int) -> int:
    """A 32-bit seed for the batch starting at clip ``first_index``.

    >>> batch_seed(0, 0) == batch_seed(0, 0) != batch_seed(0, 8)
    True
    """
    digest = hashlib.sha256(f"audiorepro:{seed}:{first_index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def seed_all(seed: int) -> None:
    import torch

    random.seed(seed)
    # The libraries draw their crops from NumPy's legacy global generator: seed that one.
    np.random.seed(seed)  # noqa: NPY002
    torch.manual_seed(seed)


def configure_determinism(device: str) -> dict[str, Any]:
    """Deterministic kernels, no TF32, no cuDNN autotuning; returns what was set (for meta)."""
    import torch

    # cuBLAS needs this before its first use to be deterministic.
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = cublas_workspace_config()
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {device!r} requested but CUDA is not available", key="--device")
    # CPU kernels split work by thread and the last bits of a sum follow the split (measured:
    # audio embeddings move by 4e-8 between 1 and 2 threads). A fixed count, not the machine's,
    # makes CPU embeddings independent of OMP_NUM_THREADS and of the core count.
    threads = cpu_threads()
    torch.set_num_threads(threads)
    return {
        "use_deterministic_algorithms": True,
        "cudnn_benchmark": False,
        "allow_tf32": False,
        "cublas_workspace_config": os.environ["CUBLAS_WORKSPACE_CONFIG"],
        "cpu_threads": threads,
    }


@contextlib.contextmanager
def _weights_only_torch_load() -> Iterator[None]:
    """Force ``torch.load(weights_only=True)`` inside laion-clap's ``load_ckpt``.

    laion-clap 1.1.7 calls ``torch.load(..., weights_only=False)``, which would unpickle
    arbitrary objects from the checkpoint; audiorepro never unpickles untrusted files.
    """
    import torch

    original = torch.load

    def safe_load(*args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = True
        return original(*args, **kwargs)

    torch.load = safe_load
    try:
        yield
    finally:
        torch.load = original


#: The library each CLAP format loads its model with.
LIBRARIES = {"hf": "transformers", "laion": "laion_clap"}


def clap_code(fmt: str) -> dict[str, Any]:
    """A CLAP format's code as the cache key and the dump record it: the library that
    embeds and its installed version (read without importing it)."""
    library = LIBRARIES[fmt]
    try:
        version: str | None = metadata.version(library.replace("_", "-"))
    except metadata.PackageNotFoundError:
        version = None
    return {"package": library, "version": version}


class Pipeline:
    """One loaded CLAP model, an :class:`~audiorepro.models.encoder.Encoder` with a text
    tower (:class:`~audiorepro.models.encoder.TextEncoder`). Subclasses implement the library
    calls; batching, seeding and the record are the kit's (:mod:`audiorepro.models.embedder`),
    the same for every encoder."""

    spec: ModelSpec
    settings: Preprocessing
    device: str
    weight_hashes: dict[str, str]

    library: str = ""
    sample_rate: int = SAMPLE_RATE

    @property
    def name(self) -> str:
        return self.spec.name

    def _embed_audio_batch(self, waveforms: list[Array]) -> Array:
        raise NotImplementedError

    def _embed_text_batch(self, texts: list[str]) -> Array:
        raise NotImplementedError

    def hf_state(self) -> dict[str, Any]:
        """Weights under Hugging Face names (see :mod:`audiorepro.models.mapping`)."""
        raise NotImplementedError

    def raw_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def logit_scale(self) -> float:
        raise NotImplementedError

    def prepare(self, waveform: Array) -> Array:
        return int16_roundtrip(waveform) if self.settings.int16_roundtrip else waveform

    def embed_audio(self, waveforms: Sequence[Array]) -> Array:
        """One batch of 48 kHz mono float32 clips (the int16 round trip first, if set)."""
        import torch

        with torch.inference_mode():
            return self._embed_audio_batch([self.prepare(w) for w in waveforms])

    def embed_text(self, texts: Sequence[str]) -> Array:
        import torch

        with torch.inference_mode():
            return self._embed_text_batch(list(texts))

    def weight_files(self) -> list[Path]:
        return list(weight_files(self.spec).values())

    def code(self) -> dict[str, Any]:
        """The code that embeds (:func:`clap_code`)."""
        return clap_code(self.spec.format)

    def describe(self) -> dict[str, Any]:
        """What the record says of this model beside what every encoder records."""
        return {
            "library": self.library,
            "location": self.spec.location if self.spec.is_hub else Path(self.spec.location).name,
            "revision": self.spec.revision,
            "architecture": self.spec.architecture.to_json(),
        }


def _to_numpy(tensor: Any) -> Array:
    return np.ascontiguousarray(tensor.detach().to("cpu").numpy(), dtype=np.float32)


class HFPipeline(Pipeline):
    library = "transformers"

    def __init__(self, spec: ModelSpec, overrides: dict[str, Any], device: str) -> None:
        self.spec, self.device = spec, device
        self.weight_hashes = verify_weights(spec)
        # A pickled pytorch_model.bin is opened with weights_only=True before transformers is.
        check_pickled(weight_files(spec))
        activate_hub_cache(spec.hub_cache)
        from safetensors import SafetensorError
        from transformers import ClapFeatureExtractor, ClapModel, ClapProcessor

        source = spec.location
        try:
            # A pytorch_model.bin is a pickle: never unpickled beyond plain tensors, whatever
            # the transformers version passes to torch.load.
            with _weights_only_torch_load():
                model = ClapModel.from_pretrained(source, revision=spec.revision)
                processor = ClapProcessor.from_pretrained(source, revision=spec.revision)
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            RuntimeError,
            EOFError,
            pickle.UnpicklingError,
            SafetensorError,
        ) as exc:
            raise UserError(
                f"cannot be loaded as a Hugging Face CLAP model: {_first_line(exc)}", source=source
            ) from None
        fe = processor.feature_extractor
        defaults = Preprocessing(
            truncation=fe.truncation,
            padding=fe.padding,
            int16_roundtrip=False,
            frequency_min=float(fe.frequency_min),
            frequency_max=float(fe.frequency_max),
            is_longer="extractor",
        )
        self.settings = spec.preprocessing.with_overrides(overrides).resolved(defaults)
        if model.config.audio_config.enable_fusion != (self.settings.truncation == "fusion"):
            raise UserError(
                f"truncation {self.settings.truncation!r} does not fit a model with "
                f"enable_fusion={model.config.audio_config.enable_fusion}",
                key=f"{spec.name}: truncation",
            )
        if (fe.frequency_min, fe.frequency_max) != (
            self.settings.frequency_min,
            self.settings.frequency_max,
        ):
            # The filter banks are computed in __init__: rebuild the extractor with the band.
            fe = ClapFeatureExtractor(
                feature_size=fe.feature_size,
                sampling_rate=fe.sampling_rate,
                hop_length=fe.hop_length,
                max_length_s=fe.max_length_s,
                fft_window_size=fe.fft_window_size,
                padding_value=fe.padding_value,
                return_attention_mask=fe.return_attention_mask,
                frequency_min=self.settings.frequency_min,
                frequency_max=self.settings.frequency_max,
                top_db=fe.top_db,
                truncation=self.settings.truncation,
                padding=self.settings.padding,
            )
        self.extractor = fe
        self.tokenizer = processor.tokenizer
        self.model = model.to(device).eval()

    def _embed_audio_batch(self, waveforms: list[Array]) -> Array:
        import torch

        feats = self.extractor(
            [w.astype(np.float64) for w in waveforms],
            sampling_rate=SAMPLE_RATE,
            truncation=self.settings.truncation,
            padding=self.settings.padding,
            max_length=self.settings.max_samples,
            return_tensors="pt",
        )
        longer = feats["is_longer"]
        if self.settings.is_longer == "length":
            longer = torch.tensor([[is_longer(len(w), self.settings)] for w in waveforms])
        out = self.model.get_audio_features(
            input_features=feats["input_features"].to(self.device, torch.float32),
            is_longer=longer.to(self.device),
        )
        return _to_numpy(out.pooler_output)

    def _embed_text_batch(self, texts: list[str]) -> Array:
        tokens = self.tokenizer(
            texts,
            padding="max_length",
            truncation=True,
            max_length=TEXT_MAX_LENGTH,
            return_tensors="pt",
        )
        out = self.model.get_text_features(
            input_ids=tokens["input_ids"].to(self.device),
            attention_mask=tokens["attention_mask"].to(self.device),
        )
        return _to_numpy(out.pooler_output)

    def hf_state(self) -> dict[str, Any]:
        return dict(self.model.state_dict())

    def raw_state(self) -> dict[str, Any]:
        return self.hf_state()

    def logit_scale(self) -> float:
        return float(self.model.logit_scale_a.detach().exp().cpu())


class LaionPipeline(Pipeline):
    library = "laion_clap"

    def __init__(self, spec: ModelSpec, overrides: dict[str, Any], device: str) -> None:
        self.spec, self.device = spec, device
        self.weight_hashes = verify_weights(spec)
        activate_hub_cache(spec.hub_cache)
        arch = spec.architecture
        with quiet_model_library():
            try:
                import laion_clap

                module = laion_clap.CLAP_Module(
                    enable_fusion=arch.enable_fusion,
                    device=device,
                    amodel=arch.amodel,
                    tmodel=arch.tmodel,
                )
            except OSError as exc:
                # laion-clap builds its text tower from the hub's roberta-base, offline here.
                raise UserError(
                    "needs laion-clap's text model (roberta-base) in a local Hugging Face "
                    "cache, which has none: give its registry entry a hub_cache, or set "
                    f"HF_HOME to a cache that holds it ({_first_line(exc)})",
                    source=spec.location,
                ) from None
            _check_tokenizer(module, spec)
            try:
                with _weights_only_torch_load():
                    # The verified file: beside the registry, or where fetch put it.
                    (checkpoint,) = weight_files(spec).values()
                    module.load_ckpt(str(checkpoint), verbose=False)
            except (
                RuntimeError,
                EOFError,
                OSError,
                KeyError,
                ValueError,
                pickle.UnpicklingError,
            ) as exc:
                raise UserError(
                    f"cannot be loaded as a laion-clap {arch.amodel}/{arch.tmodel} checkpoint "
                    f"(enable_fusion={arch.enable_fusion}): {_first_line(exc)}",
                    source=spec.location,
                ) from None
        audio_cfg = module.model_cfg["audio_cfg"]
        defaults = Preprocessing(
            truncation="fusion" if arch.enable_fusion else "rand_trunc",
            padding="repeatpad",
            int16_roundtrip=True,
            frequency_min=float(audio_cfg["fmin"]),
            frequency_max=float(audio_cfg["fmax"]),
            is_longer="length",
        )
        settings = spec.preprocessing.with_overrides(overrides).resolved(defaults)
        fixed: dict[str, Any] = {
            "truncation": defaults.truncation,
            "padding": "repeatpad",
            "is_longer": "length",
        }
        if not arch.enable_fusion:
            # Unfused models compute the mel inside the network from checkpoint tensors
            # (logmel_extractor.melW): the band is part of the weights, not a setting.
            fixed.update(frequency_min=defaults.frequency_min, frequency_max=defaults.frequency_max)
        for key, value in fixed.items():
            if getattr(settings, key) != value:
                raise UserError(
                    f"laion-clap fixes this to {value!r} for this architecture; got "
                    f"{getattr(settings, key)!r}",
                    key=f"{spec.name}: {key}",
                )
        audio_cfg["fmin"], audio_cfg["fmax"] = settings.frequency_min, settings.frequency_max
        self.settings = settings
        self.module = module
        module.model.eval()

    def _embed_audio_batch(self, waveforms: list[Array]) -> Array:
        import torch

        # use_tensor=True: the int16 round trip is decided (and done) by audiorepro.
        tensors = [torch.from_numpy(np.ascontiguousarray(w)) for w in waveforms]
        with quiet_model_library():
            out = self.module.get_audio_embedding_from_data(tensors, use_tensor=True)
        return _to_numpy(out)

    def _embed_text_batch(self, texts: list[str]) -> Array:
        out = self.module.get_text_embedding(texts, use_tensor=True)
        return _to_numpy(out)

    def raw_state(self) -> dict[str, Any]:
        return dict(self.module.model.state_dict())

    def hf_state(self) -> dict[str, Any]:
        return laion_to_hf(self.raw_state())

    def logit_scale(self) -> float:
        return float(self.module.model.logit_scale_a.detach().exp().cpu())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_tokenizer(module: Any, spec: ModelSpec) -> None:
    """Refuse a tokenizer that does not fit the text model (an empty hub cache gives one)."""
    vocab = len(module.tokenize.get_vocab())
    rows = module.model.text_branch.embeddings.word_embeddings.num_embeddings
    if vocab != rows:
        raise UserError(
            f"the roberta-base tokenizer found has {vocab} tokens but the text model has {rows} "
            "embeddings: the hub cache lacks the right tokenizer (HF_HUB_CACHE, or hub_cache "
            "in the registry entry)",
            key=spec.name,
        )


def load_clap(
    spec: ModelSpec, overrides: dict[str, Any] | None = None, device: str = "cpu"
) -> Pipeline:
    """Verify the weights' hashes, then load the CLAP model with its own library (the
    kit loads every encoder through :func:`audiorepro.models.embedder.load_embedder`)."""
    overrides = overrides or {}
    if spec.format == "hf":
        return HFPipeline(spec, overrides, device)
    return LaionPipeline(spec, overrides, device)

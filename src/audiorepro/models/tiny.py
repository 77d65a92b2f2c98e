"""Tiny random CLAP models in both formats with the same weights, built offline from a seed.

``build_tiny_models(out, seed)`` writes::

    out/hub/             a local hub cache: tokenizer stand-ins for roberta-base,
                         bert-base-uncased and facebook/bart-base, and the roberta-base text
                         stand-in laion-clap builds its text branch from
    out/tiny-laion.pt    a laion-clap checkpoint ({"state_dict": ...}, tensors only)
    out/tiny-hf/         the same weights as a Hugging Face ClapModel folder (safetensors),
                         with its ClapProcessor (feature extractor and tokenizer)
    out/registry.toml    entries ``tiny-hf`` and ``tiny-laion`` with every file's SHA-256 and
                         matched preprocessing, so ``audiorepro identity`` calls them identical

The audio tower is laion-clap's HTSAT-tiny (the smallest HTSAT it builds); the text tower is
the two-layer stand-in of :func:`audiorepro.models.offline.standin_text_config`. laion-clap builds
the model, every randomly initialized tensor is redrawn from the seed with numpy's PCG64 stream
(torch's samplers follow the CPU's instruction set, numpy's integers do not: the models, their
hashes and every cache key are the same on every machine), the text tower with a wide spread
(std 0.2, see the stand-in's docstring), and the Hugging Face model is
filled through :mod:`audiorepro.models.mapping`, asserting the exact missing/unexpected keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes
from audiorepro.models.mapping import is_hf_only, laion_to_hf
from audiorepro.models.offline import activate_hub_cache, build_tokenizer_cache, standin_text_config
from audiorepro.models.quiet import quiet_model_library
from audiorepro.models.seeded import redraw_initialization, uniform_fill
from audiorepro.specs.registry import SCHEMA

TEXT_STD = 0.2


def _randomize_text_tower(tower: Any, seed: int) -> None:
    import torch

    rng = np.random.Generator(np.random.PCG64(seed))
    with torch.no_grad():
        for name, param in sorted(tower.named_parameters()):
            if "LayerNorm" in name:
                continue
            uniform_fill(param, TEXT_STD if name.endswith("weight") else TEXT_STD / 10, rng)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _entry(name: str, fields: dict[str, Any], tables: dict[str, dict[str, Any]]) -> str:
    lines = [f'[checkpoints."{name}"]']
    lines += [f"{k} = {_toml_value(v)}" for k, v in fields.items()]
    for table, values in tables.items():
        lines.append(f'[checkpoints."{name}".{table}]')
        lines += [f'"{k}" = {_toml_value(v)}' for k, v in values.items()]
    return "\n".join(lines) + "\n"


def build_tiny_models(out: str | Path, seed: int = 0, fusion: bool = True) -> Path:
    """Write the tiny models, hub cache and registry into ``out``; returns the registry path."""
    out = Path(out)
    hub = build_tokenizer_cache(out / "hub", text_model=True)
    activate_hub_cache(hub)
    laion_path = out / "tiny-laion.pt"
    state = _save_laion(laion_path, seed, fusion)
    hf_dir = out / "tiny-hf"
    _save_hf(hf_dir, state, fusion)
    path = out / "registry.toml"
    atomic_write_bytes(path, _registry(seed, fusion, hf_dir, laion_path).encode())
    return path


def _save_laion(laion_path: Path, seed: int, fusion: bool) -> dict[str, Any]:
    """The seeded laion-clap model's state, written as a laion checkpoint; returns it."""
    import torch

    with quiet_model_library():
        import laion_clap

        torch.manual_seed(seed)
        module = laion_clap.CLAP_Module(
            enable_fusion=fusion, device="cpu", amodel="HTSAT-tiny", tmodel="roberta"
        )
    model = module.model.eval()
    redraw_initialization(model, seed)
    _randomize_text_tower(model.text_branch, seed)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    # laion-clap's load_ckpt deletes this key unconditionally; current transformers no longer
    # saves it, so put it back as the real checkpoints have it.
    state.setdefault(
        "text_branch.embeddings.position_ids",
        torch.arange(model.text_branch.config.max_position_embeddings).unsqueeze(0),
    )
    laion_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = laion_path.with_name(".tiny-laion.pt.tmp")
    torch.save({"state_dict": dict(sorted(state.items()))}, tmp)
    tmp.replace(laion_path)
    return state


def _save_hf(hf_dir: Path, state: dict[str, Any], fusion: bool) -> None:
    """The same weights as a transformers ``ClapModel`` with its processor, in ``hf_dir``."""
    import torch

    with quiet_model_library():
        from transformers import (
            ClapAudioConfig,
            ClapConfig,
            ClapFeatureExtractor,
            ClapModel,
            ClapProcessor,
            ClapTextConfig,
            RobertaTokenizer,
        )
    text = standin_text_config()
    text_config = ClapTextConfig(
        **{
            k: v
            for k, v in text.items()
            if k not in ("architectures", "model_type", "initializer_range")
        }
    )
    audio_config = ClapAudioConfig(enable_fusion=fusion, fusion_type="aff_2d" if fusion else None)
    config = ClapConfig(text_config=text_config.to_dict(), audio_config=audio_config.to_dict())
    with torch.device("cpu"):
        hf = ClapModel(config)
    result = hf.load_state_dict(laion_to_hf(state), strict=False)
    missing = sorted(result.missing_keys)
    if result.unexpected_keys or any(not is_hf_only(k) for k in missing):
        raise RuntimeError(
            f"laion -> HF mapping incomplete: missing {missing}, "
            f"unexpected {result.unexpected_keys}"
        )
    hf.eval().save_pretrained(hf_dir)
    extractor = ClapFeatureExtractor(
        frequency_min=50.0,
        frequency_max=14000.0,
        truncation="fusion" if fusion else "rand_trunc",
        padding="repeatpad",
    )
    tokenizer = RobertaTokenizer.from_pretrained("roberta-base")
    ClapProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(hf_dir)


def _registry(seed: int, fusion: bool, hf_dir: Path, laion_path: Path) -> str:
    """The registry of the two tiny models, with their files' hashes."""
    arch = {"enable_fusion": fusion, "amodel": "HTSAT-tiny", "tmodel": "roberta"}
    hf_files = {p.name: sha256_file(p) for p in sorted(hf_dir.iterdir()) if p.is_file()}
    return (
        f'schema = "{SCHEMA}"\n\n'
        + _entry(
            "tiny-hf",
            {
                "format": "hf",
                "path": "tiny-hf",
                "hub_cache": "hub",
                "description": f"tiny random CLAP, seed {seed}",
            },
            {
                "weights": hf_files,
                "architecture": arch,
                # Matched to laion-clap's pipeline: int16 round trip, is_longer by length.
                "preprocessing": {"int16_roundtrip": True, "is_longer": "length"},
            },
        )
        + "\n"
        + _entry(
            "tiny-laion",
            {
                "format": "laion",
                "file": "tiny-laion.pt",
                "hub_cache": "hub",
                "description": f"tiny random CLAP, seed {seed}",
            },
            {"weights": {"tiny-laion.pt": sha256_file(laion_path)}, "architecture": arch},
        )
    )

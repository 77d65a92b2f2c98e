"""State-dict names: laion-clap (``CLAP_Module.model``) to Hugging Face (``ClapModel``).

The two codebases hold the same network under different names. The mapping, rule by rule
(applied in this order to a laion-clap name):

==========================================  =================================================
laion-clap                                  Hugging Face
==========================================  =================================================
``text_branch.``                            ``text_model.``
``audio_branch.``                           ``audio_model.audio_encoder.``
``audio_branch.bn0.``                       ``audio_model.audio_encoder.batch_norm.``
``….blocks.N.norm1.`` / ``norm2.``          ``….blocks.N.layernorm_before.`` / ``layernorm_after.``
``….blocks.N.attn.qkv.{weight,bias}``       split in three equal row blocks, in this order:
                                            ``attention.self.query`` / ``key`` / ``value``
``….blocks.N.attn.proj.``                   ``….blocks.N.attention.output.dense.``
``….blocks.N.attn.relative_position_*``     ``….blocks.N.attention.self.relative_position_*``
``….blocks.N.mlp.fc1.`` / ``mlp.fc2.``      ``….blocks.N.intermediate.dense.`` / ``output.dense.``
``{text,audio}_projection.0.`` / ``.2.``    ``{text,audio}_projection.linear1.`` / ``linear2.``
==========================================  =================================================

Everything else keeps its name (``logit_scale_a``, the patch embedding, fusion, downsampling,
the final norm). Some tensors exist on one side only, and the sets are asserted exactly:

- laion-clap only (:data:`LAION_ONLY`): the torchlibrosa front end (STFT kernels and the mel
  filter bank; Hugging Face computes the mel spectrogram in its feature extractor instead), the
  AudioSet classification head (``tscam_conv``, ``head``) and the training-only MLPs
  ``audio_transform`` / ``text_transform``, and the shifted-window attention masks (constant
  buffers that Hugging Face computes on the fly). None of them is a learned weight that touches
  an embedding.
- Hugging Face only (:data:`HF_ONLY`): the text model's ``position_ids`` and
  ``token_type_ids`` buffers (constants, not weights).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Patterns of laion-clap names with no Hugging Face counterpart (see the module docstring).
LAION_ONLY = (
    re.compile(r"^audio_branch\.spectrogram_extractor\."),
    re.compile(r"^audio_branch\.logmel_extractor\."),
    re.compile(r"^audio_branch\.(tscam_conv|head)\."),
    re.compile(r"^(audio|text)_transform\."),
    re.compile(r"^audio_branch\.layers\.\d+\.blocks\.\d+\.attn_mask$"),
    re.compile(r"^text_branch\.embeddings\.position_ids$"),
)
#: Patterns of Hugging Face names with no laion-clap counterpart.
HF_ONLY = (re.compile(r"^text_model\.embeddings\.(position_ids|token_type_ids)$"),)

_RENAMES = (
    (re.compile(r"^text_branch\."), "text_model."),
    (re.compile(r"^audio_branch\.bn0\."), "audio_branch.batch_norm."),
    (re.compile(r"^audio_branch\."), "audio_model.audio_encoder."),
    (re.compile(r"\.blocks\.(\d+)\.norm1\."), r".blocks.\1.layernorm_before."),
    (re.compile(r"\.blocks\.(\d+)\.norm2\."), r".blocks.\1.layernorm_after."),
    (re.compile(r"\.blocks\.(\d+)\.attn\.proj\."), r".blocks.\1.attention.output.dense."),
    (re.compile(r"\.blocks\.(\d+)\.attn\.relative_"), r".blocks.\1.attention.self.relative_"),
    (re.compile(r"\.blocks\.(\d+)\.mlp\.fc1\."), r".blocks.\1.intermediate.dense."),
    (re.compile(r"\.blocks\.(\d+)\.mlp\.fc2\."), r".blocks.\1.output.dense."),
    (re.compile(r"^(text|audio)_projection\.0\."), r"\1_projection.linear1."),
    (re.compile(r"^(text|audio)_projection\.2\."), r"\1_projection.linear2."),
)
_QKV = re.compile(r"^(.*\.blocks\.\d+)\.attn\.qkv\.(weight|bias)$")


def is_laion_only(name: str) -> bool:
    return any(p.search(name) for p in LAION_ONLY)


def is_hf_only(name: str) -> bool:
    return any(p.search(name) for p in HF_ONLY)


def hf_names(laion_name: str) -> list[str]:
    """The Hugging Face name(s) of one laion-clap tensor (three for a fused qkv projection).

    >>> hf_names("audio_branch.layers.0.blocks.1.attn.qkv.bias")  # doctest: +NORMALIZE_WHITESPACE
    ['audio_model.audio_encoder.layers.0.blocks.1.attention.self.query.bias',
     'audio_model.audio_encoder.layers.0.blocks.1.attention.self.key.bias',
     'audio_model.audio_encoder.layers.0.blocks.1.attention.self.value.bias']
    >>> hf_names("text_projection.2.weight")
    ['text_projection.linear2.weight']
    >>> hf_names("audio_branch.bn0.running_mean")
    ['audio_model.audio_encoder.batch_norm.running_mean']
    """
    qkv = _QKV.match(laion_name)
    if qkv:
        base = hf_names(f"{qkv.group(1)}.attn.placeholder.{qkv.group(2)}")[0]
        return [
            base.replace(".attn.placeholder.", f".attention.self.{part}.")
            for part in ("query", "key", "value")
        ]
    name = laion_name
    for pattern, repl in _RENAMES:
        name = pattern.sub(repl, name)
    return [name]


def laion_to_hf(state: Mapping[str, Any]) -> dict[str, Any]:
    """Rename (and split) a laion-clap state dict into Hugging Face names.

    Tensors that exist only in laion-clap are dropped; the caller can list them with
    :func:`is_laion_only`. A fused qkv tensor of ``3d`` rows becomes three ``d``-row tensors.
    """
    out: dict[str, Any] = {}
    for name, tensor in state.items():
        if is_laion_only(name):
            continue
        targets = hf_names(name)
        if len(targets) == 1:
            out[targets[0]] = tensor
            continue
        rows = tensor.shape[0]
        if rows % 3:
            raise ValueError(f"{name}: {rows} rows cannot split into query/key/value")
        d = rows // 3
        for i, target in enumerate(targets):
            out[target] = tensor[i * d : (i + 1) * d]
    return out


def check_key_sets(laion_keys: Iterable[str], hf_keys: Iterable[str]) -> dict[str, list[str]]:
    """Compare mapped laion-clap names with a Hugging Face model's names.

    Returns ``missing`` (Hugging Face tensors the mapping does not fill), ``unexpected``
    (mapped names the Hugging Face model lacks) and ``laion_only`` / ``hf_only`` (the documented
    one-sided tensors). A correct mapping has empty ``missing`` and ``unexpected``.
    """
    laion_keys = list(laion_keys)
    hf_keys = list(hf_keys)
    mapped = {t for k in laion_keys if not is_laion_only(k) for t in hf_names(k)}
    hf_set = {k for k in hf_keys if not is_hf_only(k)}
    return {
        "missing": sorted(hf_set - mapped),
        "unexpected": sorted(mapped - hf_set),
        "laion_only": sorted(k for k in laion_keys if is_laion_only(k)),
        "hf_only": sorted(k for k in hf_keys if is_hf_only(k)),
    }

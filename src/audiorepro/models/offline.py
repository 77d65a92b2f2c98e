"""Offline stand-ins for the Hugging Face hub: tiny tokenizers in a local hub cache.

``import laion_clap`` loads three tokenizers at import time (``bert-base-uncased``,
``roberta-base``, ``facebook/bart-base``). Offline, point ``HF_HUB_CACHE`` at a folder made by
:func:`build_tokenizer_cache` and set ``HF_HUB_OFFLINE=1``: the import then finds these tiny
stand-ins instead of retrying the network. Each stand-in's vocabulary is marked with
:data:`STANDIN_TOKEN`, so a test can assert that the stand-in (and not a broken or real
tokenizer) was loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import string
import sys
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.io import atomic_write_bytes
from audiorepro.models.seeded import redraw_initialization

#: A token present only in the stand-in vocabularies.
STANDIN_TOKEN = "audioreprostandin"
REPOS = ("roberta-base", "facebook/bart-base", "bert-base-uncased")


def _bpe_files() -> dict[str, bytes]:
    """GPT-2 style byte-level BPE (roberta, bart): letters, the space marker, a few merges."""
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    letters = list(string.ascii_lowercase + string.ascii_uppercase + string.digits + ".,!?'-")
    pieces = letters + ["\u0120" + c for c in letters] + ["\u0120"]
    merges = ["t h", "\u0120 t", "\u0120t h", "e r", "i n", "\u0120 a", "o n", "a n"]
    vocab_list = specials + pieces + [m.replace(" ", "") for m in merges] + [STANDIN_TOKEN]
    vocab_list.append("<mask>")
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(vocab_list))}
    return {
        "vocab.json": json.dumps(vocab, ensure_ascii=False, sort_keys=True).encode(),
        "merges.txt": ("#version: 0.2\n" + "\n".join(merges) + "\n").encode(),
        "tokenizer_config.json": json.dumps({"model_max_length": 512}).encode(),
    }


def _wordpiece_files() -> dict[str, bytes]:
    """BERT uncased WordPiece: specials, letters, a few words and ## pieces."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", STANDIN_TOKEN]
    words += list(string.ascii_lowercase + string.digits + ".,!?'-")
    words += ["the", "a", "dog", "bird", "rain", "car", "music"]
    words += ["##" + c for c in string.ascii_lowercase]
    return {
        "vocab.txt": ("\n".join(words) + "\n").encode(),
        "tokenizer_config.json": json.dumps(
            {"do_lower_case": True, "model_max_length": 512}
        ).encode(),
    }


def standin_text_config() -> dict[str, Any]:
    """The stand-in ``roberta-base`` architecture (a ``RobertaConfig``).

    Hidden size 768 because laion-clap's text projection is hard-coded to 768 inputs; two
    layers and a narrow feed-forward keep it small. ``initializer_range`` 0.2: at the usual 0.02
    every caption embeds with cosine > 0.995 to every other, and identity tests would prove
    nothing.
    """
    vocab = json.loads(_bpe_files()["vocab.json"])
    return {
        "architectures": ["RobertaModel"],
        "model_type": "roberta",
        "vocab_size": len(vocab),
        "hidden_size": 768,
        "num_hidden_layers": 2,
        "num_attention_heads": 12,
        "intermediate_size": 512,
        "hidden_act": "gelu",
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "initializer_range": 0.2,
        "layer_norm_eps": 1e-5,
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
    }


def _text_model_files() -> dict[str, bytes]:
    """``config.json`` and ``model.safetensors`` of the stand-in ``roberta-base`` (seed 0).

    laion-clap builds its text branch with ``RobertaModel.from_pretrained('roberta-base')``;
    every weight is then replaced by the checkpoint's, so only the architecture matters here.
    """
    import torch
    from safetensors.torch import save
    from transformers import RobertaConfig, RobertaModel

    config = standin_text_config()
    torch.manual_seed(0)
    model = RobertaModel(RobertaConfig(**config), add_pooling_layer=True)
    redraw_initialization(model, 0)  # the same bytes, hence the same revision, on every CPU
    state = {k: v.contiguous() for k, v in sorted(model.state_dict().items())}
    return {
        "config.json": json.dumps(config, sort_keys=True).encode(),
        "model.safetensors": save(state),
    }


def build_tokenizer_cache(cache_dir: str | Path, *, text_model: bool = False) -> Path:
    """Write the stand-in tokenizers into a hub cache layout; returns the cache folder.

    Layout: ``models--{org}--{name}/snapshots/{revision}/...`` and ``refs/main`` holding the
    revision, which is the SHA-1 of the snapshot's files (deterministic). With ``text_model``
    the ``roberta-base`` snapshot also holds the stand-in text model (needs torch and
    transformers), which laion-clap loads when it builds a CLAP model.
    """
    cache = Path(cache_dir)
    for repo in REPOS:
        files = _wordpiece_files() if repo.startswith("bert") else _bpe_files()
        if text_model and repo == "roberta-base":
            files.update(_text_model_files())
        digest = hashlib.sha1(usedforsecurity=False)
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name])
        revision = digest.hexdigest()
        base = cache / ("models--" + repo.replace("/", "--"))
        for name, data in files.items():
            atomic_write_bytes(base / "snapshots" / revision / name, data)
        atomic_write_bytes(base / "refs" / "main", revision.encode())
    return cache


def activate_hub_cache(cache_dir: str | Path | None) -> None:
    """Read models and tokenizers from ``cache_dir`` (when given), never from the network.

    Sets ``HF_HUB_OFFLINE=1`` always: audiorepro loads only weights that are already on disk and
    verified. huggingface_hub reads its settings when first imported, so when it already is, its
    constants are updated too.
    """
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if cache_dir is not None:
        env["HF_HUB_CACHE"] = str(Path(cache_dir).resolve())
    os.environ.update(env)
    constants: Any = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
        if cache_dir is not None:
            constants.HF_HUB_CACHE = env["HF_HUB_CACHE"]


#: Set by apptainer (and singularity) in every container it runs.
CONTAINER_VARIABLES = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")
#: Where the container lines of docs/hpc.md bind the host's hub cache.
CONTAINER_HUB_CACHE = "/hf"


def require_hub_cache_in_container(model: str, cache_dir: Path | None = None) -> None:
    """Inside an apptainer container, the hub cache a model needs must be there.

    ``--containall --cleanenv`` drop the host's ``HF_HUB_CACHE`` and give a fresh, empty
    ``HOME``, so without a bind and a variable the container looks in a cache that does not
    exist and every hub model is "not in the cache". That is a set-up error, said in one line
    naming the bind and the variable to add (exit 2), before anything is written. Outside a
    container a missing cache is left to the loader, which names the model.
    """
    if not any(os.environ.get(v) for v in CONTAINER_VARIABLES):
        return
    if cache_dir is None:
        from huggingface_hub import constants

        cache_dir = Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE)
        named = "HF_HUB_CACHE" if os.environ.get("HF_HUB_CACHE") else "HF_HUB_CACHE is not set"
    else:
        named = "the registry's hub_cache"
    if cache_dir.is_dir():
        return
    raise UserError(
        f"the hub cache {cache_dir} ({named}) is not there inside the container: bind the "
        f"host's cache read-only and name it, add --bind HOST_CACHE:{CONTAINER_HUB_CACHE}:ro "
        f"--env HF_HUB_CACHE={CONTAINER_HUB_CACHE} to the apptainer command (or export "
        f"APPTAINERENV_HF_HUB_CACHE={CONTAINER_HUB_CACHE} before it)",
        key=model,
    )

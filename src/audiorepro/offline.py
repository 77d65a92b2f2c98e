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
import string
from pathlib import Path

from audiorepro.io import atomic_write_bytes

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


def build_tokenizer_cache(cache_dir: str | Path) -> Path:
    """Write the stand-in tokenizers into a hub cache layout; returns the cache folder.

    Layout: ``models--{org}--{name}/snapshots/{revision}/...`` and ``refs/main`` holding the
    revision, which is the SHA-1 of the snapshot's files (deterministic).
    """
    cache = Path(cache_dir)
    for repo in REPOS:
        files = _wordpiece_files() if repo.startswith("bert") else _bpe_files()
        digest = hashlib.sha1(usedforsecurity=False)
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name])
        revision = digest.hexdigest()
        base = cache / ("models--" + repo.replace("/", "--"))
        for name, data in files.items():
            atomic_write_bytes(base / "snapshots" / revision / name, data)
        atomic_write_bytes(base / "refs" / "main", revision.encode())
    return cache

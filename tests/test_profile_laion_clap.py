"""The laion-clap profile against laion-clap 1.1.7's own evaluation code, on the same features.

``get_metrics`` is called directly; ``evaluate_clotho_audiocaps`` is driven with a stand-in
model that returns the dump's features and a one-batch data loader, so that laion-clap's own
code computes every number. The package is imported offline with tiny tokenizers in a local
hub cache (see :mod:`audiorepro.models.offline`; ``tests/conftest.py`` sets ``HF_HUB_CACHE``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from audiorepro.formats.dump import Dump, load_dump, make_dump
from audiorepro.metrics.profiles import compute_profile, laion_clap_inputs
from tests.conftest import FIXTURES

torch = pytest.importorskip("torch", reason="torch is not installed (tox -e py311 installs it)")
train = pytest.importorskip(
    "laion_clap.training.train", reason="laion-clap is not installed (tox -e py311 installs it)"
)


def test_import_used_the_stand_in_tokenizers() -> None:
    from laion_clap.training import data

    from audiorepro.models.offline import STANDIN_TOKEN

    assert STANDIN_TOKEN in data.roberta_tokenizer.get_vocab()
    assert STANDIN_TOKEN in data.bert_tokenizer.get_vocab()
    assert STANDIN_TOKEN in data.bart_tokenizer.get_vocab()


def _with_scale(dump: Dump, scale: float) -> Dump:
    return make_dump(
        dump.audio_embeds,
        dump.text_embeds,
        dump.text_to_audio,
        meta={"logit_scale": scale},
        source=dump.source,
    )


def _tied_one_caption() -> Dump:
    # Quantized values: many exact ties between clips, so the tie order of torch.argsort matters.
    rng = np.random.default_rng(3)
    audio = (np.round(rng.standard_normal((30, 4)) * 2) / 2).astype(np.float32)
    audio[5] = audio[9]
    text = (np.round(rng.standard_normal((30, 4)) * 2) / 2).astype(np.float32)
    return make_dump(audio, text, np.arange(30))


ONE_CAPTION = {
    "synthetic_1cap": lambda: load_dump(FIXTURES / "dumps" / "synthetic_1cap.npz"),
    "synthetic_1cap_scaled": lambda: _with_scale(
        load_dump(FIXTURES / "dumps" / "synthetic_1cap.npz"), 33.37
    ),
    "tied": _tied_one_caption,
}


@pytest.mark.parametrize("name", list(ONE_CAPTION))
def test_get_metrics_bit_identical(name: str) -> None:
    dump = ONE_CAPTION[name]()
    audio, text, scale, cpc, _ = laion_clap_inputs(dump)
    assert cpc == 1
    theirs = train.get_metrics(audio_features=audio, text_features=text, logit_scale_a=scale)
    ours = compute_profile(dump, "laion-clap")
    assert ours.metrics == {k: float(v) for k, v in theirs.items()}


class _Model:
    """Stands in for CLAP: returns the dump's features and the logit scale."""

    def __init__(self, audio: Any, text: Any, scale: Any) -> None:
        self.audio, self.text, self.scale = audio, text, scale

    def __call__(self, audios: Any, texts: Any, device: Any) -> Any:
        if audios is None and texts is None:
            return self.scale, self.scale
        return self.audio if texts is None else self.text


def _tied_five_captions() -> Dump:
    rng = np.random.default_rng(4)
    audio = (np.round(rng.standard_normal((12, 3)) * 2) / 2 + 0.01).astype(np.float32)
    audio[2] = audio[7]
    t2a = np.repeat(np.arange(12), 5)
    text = (np.round(rng.standard_normal((60, 3))) + 0.01).astype(np.float32)
    return make_dump(audio, text, t2a)


FIVE_CAPTIONS = {
    "synthetic_5cap": lambda: load_dump(FIXTURES / "dumps" / "synthetic_5cap.npz"),
    "synthetic_5cap_scaled": lambda: _with_scale(
        load_dump(FIXTURES / "dumps" / "synthetic_5cap.npz"), 33.37
    ),
    "tied": _tied_five_captions,
}


@pytest.mark.parametrize("name", list(FIVE_CAPTIONS))
def test_evaluate_clotho_audiocaps_bit_identical(name: str) -> None:
    dump = FIVE_CAPTIONS[name]()
    audio, text, scale, cpc, _ = laion_clap_inputs(dump)
    assert cpc == 5
    n = audio.shape[0]
    batch = {
        "__url__": [f"/data/clotho/test/{i}.tar" for i in range(n)],
        "full_text": [[f"caption {5 * d + k}" for k in range(5)] for d in range(n)],
    }
    data = {"val": SimpleNamespace(dataloader=[batch])}
    args = SimpleNamespace(tmodel="transformer")
    out = train.evaluate_clotho_audiocaps(
        _Model(audio, text, scale), data, 0, args, contextlib.nullcontext, "cpu"
    )
    (theirs,) = out.values()
    theirs = {k.split("/", 1)[1]: float(v) for k, v in theirs.items()}
    ours = compute_profile(dump, "laion-clap")
    assert ours.metrics == theirs
    assert any("neither sorts" in note for note in ours.notes)


def test_profile_refuses_other_caption_counts(tmp_path: Path) -> None:
    from audiorepro.core.errors import UserError

    dump = load_dump(FIXTURES / "dumps" / "synthetic_ties.npz")  # 3 captions per clip
    with pytest.raises(UserError, match="1 or 5 captions per clip"):
        compute_profile(dump, "laion-clap")

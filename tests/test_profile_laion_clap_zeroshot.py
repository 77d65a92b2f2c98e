"""The laion-clap zero-shot profile against laion-clap 1.1.7's own ``evaluate_zeroshot``.

The installed ``laion_clap/evaluate/eval_zeroshot_classification.py`` cannot be imported as a
module (it imports ``wandb`` and ``clap_module``/``training`` as top-level packages, as in the
repository's ``src/`` layout, which the pip package does not provide), so the test compiles the
function ``evaluate_zeroshot`` from that installed file, unchanged, with ``training.data``
resolved to the package's ``laion_clap.training.data`` (its tokenizer; the stand-in model
ignores the tokens), with the names it uses (torch, ``F``, numpy, logging) and a
recorder standing in for ``wandb``: with ``args.wandb`` set, laion-clap's own code hands every
metric, at full precision, to ``wandb.log``. A stand-in model returns the features; the
features have exact unit norm, so its ``F.normalize`` leaves them unchanged and its numbers
are the ones the README check computes on the same features.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from audiorepro.formats.dump import make_dump
from audiorepro.metrics.profiles import compute_profile
from audiorepro.metrics.zeroshot import laion_clap_zeroshot

torch = pytest.importorskip("torch", reason="torch is not installed (tox -e py311 installs it)")
pytest.importorskip("laion_clap", reason="laion-clap is not installed (tox -e py311 installs it)")


def _evaluate_zeroshot(recorder: Any) -> Any:
    spec = importlib.util.find_spec("laion_clap")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "evaluate" / "eval_zeroshot_classification.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    (fn,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "evaluate_zeroshot"
    ]
    module = ast.Module(body=[fn], type_ignores=[])
    namespace: dict[str, Any] = {
        "torch": torch,
        "F": torch.nn.functional,
        "np": np,
        "logging": logging,
        "wandb": recorder,
    }
    exec(compile(module, str(path), "exec"), namespace)  # laion-clap's own function, unchanged
    return namespace["evaluate_zeroshot"]


class _Recorder:
    def __init__(self) -> None:
        self.logged: dict[str, float] = {}

    def log(self, item: dict[str, Any]) -> None:
        for k, v in item.items():
            if k.startswith("val/"):
                self.logged[k[4:]] = v


class _Model:
    def __init__(self, audio: Any, text: Any) -> None:
        self.audio, self.text = audio, text

    def eval(self) -> None:
        pass

    def __call__(self, audios: Any, texts: Any, device: Any) -> Any:
        if audios is None and texts is None:
            one = torch.tensor(1.0)
            return one, one
        return self.audio if texts is None else self.text


def _unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    # Entries +-0.5 in 4 dimensions: norm exactly 1, and many exact ties between classes.
    return (rng.integers(0, 2, size=(n, 4)) - 0.5).astype(np.float32)


CASES = {
    "ties": (3, 40, 6),
    "esc50-sized": (7, 400, 50),
    "one-class": (11, 5, 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_equals_laion_clap_evaluate_zeroshot(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import laion_clap.training
    import laion_clap.training.data

    monkeypatch.setitem(sys.modules, "training", laion_clap.training)
    monkeypatch.setitem(sys.modules, "training.data", laion_clap.training.data)
    seed, n, c = CASES[name]
    rng = np.random.default_rng(seed)
    audio, text = _unit_rows(rng, n), _unit_rows(rng, c)
    labels = rng.integers(0, c, size=n)
    recorder = _Recorder()
    evaluate = _evaluate_zeroshot(recorder)
    batch = {"class_label": torch.nn.functional.one_hot(torch.from_numpy(labels), c).float()}
    args = SimpleNamespace(
        device="cpu",
        class_index_dict={f"class {i}": i for i in range(c)},
        tmodel="roberta",
        datasetnames=["esc50"],
        val_dataset_names=["esc50"],
        wandb=True,
    )
    model = _Model(torch.from_numpy(audio), torch.from_numpy(text))
    evaluate(model, {"val": SimpleNamespace(dataloader=[batch])}, 0, args, None)
    theirs = {k.removeprefix("esc50_"): float(v) for k, v in recorder.logged.items()}
    assert theirs.pop("num_samples") == n
    theirs.pop("epoch")
    assert laion_clap_zeroshot(audio, text, labels) == theirs
    # The same through a dump with class relevance, as `metrics --profile` computes it.
    dump = make_dump(audio, text, None, relevance_indptr=np.arange(n + 1), relevance_indices=labels)
    assert compute_profile(dump, "laion-clap-zeroshot").metrics == theirs


def test_profile_refuses_a_clip_with_several_relevant_texts() -> None:
    from audiorepro.core.errors import UserError

    dump = make_dump(
        np.eye(2, dtype=np.float32),
        np.eye(2, dtype=np.float32),
        None,
        relevance_indptr=[0, 2, 3],
        relevance_indices=[0, 1, 1],
    )
    with pytest.raises(UserError, match="clip 0 has 2 relevant texts"):
        compute_profile(dump, "laion-clap-zeroshot")


def test_median_rank_rounds_a_half_down_unlike_the_canonical_median() -> None:
    a = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    out = laion_clap_zeroshot(a, a, [0, 0])  # 0-based positions 0 and 1
    assert out["median_rank"] == 1.0  # floor(0.5) + 1, where the ranks' median is 1.5
    assert out["mean_rank"] == 1.5

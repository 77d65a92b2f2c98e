"""The bundled demo study: ``audiorepro reproduce`` with no study file runs it, offline.

:func:`prepare_demo` writes into a work folder (``OUT/cache/demo``) everything the study needs,
all made here from seeds: two synthetic fixture dumps (:mod:`audiorepro.synthetic.dumps`), the
synthetic fixture clips (:mod:`audiorepro.synthetic.audio`), and tiny CLAP models of seeds 0 and 1
in both formats (:mod:`audiorepro.models.tiny`); then ``study.toml``, whose paths are relative
to it, so the study's bytes do not depend on where it runs. The study has three datasets: the
two synthetic dumps (with published values: the project's golden values of those dumps) and
the fixture clips embedded by tiny-laion, tiny-hf (same weights) and tiny-laion of seed 1 (a
different checkpoint); a checkpoint-identity check expects tiny-hf and tiny-laion identical.
A couple of minutes on a laptop CPU; later runs reuse the work folder (weights are still
verified by hash on every load).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from audiorepro.core.io import atomic_write_bytes, npz_bytes
from audiorepro.models.tiny import build_tiny_models
from audiorepro.synthetic.audio import build as build_audio
from audiorepro.synthetic.dumps import fixtures, golden_5cap
from audiorepro.synthetic.probe import (
    EVENT_CLASSES,
    MODELS,
    TAMPERED,
    TARGETS,
    write_probe_fixtures,
)

_STUDY = """\
schema = "audiorepro.study/1"
name = "demo"
title = "audiorepro demo: synthetic dumps and tiny CLAP models"
profiles = ["canonical", "laion-clap", "trec"]
tie_policy = "pessimistic"
bootstrap = {{ resamples = 1000, seed = 0, level = 0.95 }}

{cells}
[[identity]]
a = "tiny-hf"
b = "tiny-laion"
registry = "tiny/registry.toml"
expect = "identical"

[[published]]
cell = "synthetic/5cap"
profile = "canonical"
tolerance = 0.0
provenance = "audiorepro golden values, golden/fixtures/synthetic_5cap.yml (definitions v1)"
values = {{ {values} }}
"""


#: (cell id, table row, registry, model) of the tiny-model cells, all on the fixture clips.
_TINY_CELLS = (
    ("tiny-laion/fixture-audio", "tiny-laion (seed 0)", "tiny/registry.toml", "tiny-laion"),
    ("tiny-hf/fixture-audio", "tiny-hf (seed 0)", "tiny/registry.toml", "tiny-hf"),
    (
        "tiny-laion-seed1/fixture-audio",
        "tiny-laion (seed 1)",
        "tiny-seed1/registry.toml",
        "tiny-laion",
    ),
)


def _cells(hashes: dict[str, str]) -> str:
    blocks = [
        f'[[cell]]\nid = "synthetic/{n}"\nmodel = "synthetic"\ndataset = "synthetic-{n}"\n'
        f'dump = "dumps/synthetic_{n}.npz"\nsha256 = "{hashes[f"synthetic_{n}.npz"]}"\n'
        for n in ("5cap", "1cap")
    ]
    blocks += [
        f'[[cell]]\nid = "{cell}"\nmodel = "{row}"\ndataset = "fixture-audio"\n\n'
        f'[cell.extract]\nmodel = "{model}"\nregistry = "{registry}"\naudio = "audio"\n'
        'captions = "audio/captions.csv"\nsettings = { batch_size = 2 }\n'
        for cell, row, registry, model in _TINY_CELLS
    ]
    return "\n".join(blocks)


def prepare_demo(work: Path) -> Path:
    """Write the demo's inputs and ``study.toml`` into ``work``; returns the study path."""
    work = Path(work)
    dumps = fixtures()
    hashes = {}
    for name in ("synthetic_5cap.npz", "synthetic_1cap.npz"):
        data = npz_bytes(dumps[name])
        atomic_write_bytes(work / "dumps" / name, data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    build_audio(work / "audio")
    for folder, seed in (("tiny", 0), ("tiny-seed1", 1)):
        if not (work / folder / "registry.toml").is_file():
            build_tiny_models(work / folder, seed=seed)
    values = ", ".join(f'"{k}" = {v!r}' for k, v in golden_5cap().items())
    text = _STUDY.format(cells=_cells(hashes), values=values)
    path = work / "study.toml"
    atomic_write_bytes(path, text.encode())
    return path


_PROBE_HEAD = """\
schema = "audiorepro.study/1"
kind = "probe"
name = "probe-demo"
title = "audiorepro demo: a synthetic probe study of three audio encoders"
"""


#: Top-level keys: before the first table of the study.
_PROBE_TOP = """\
config_fields = ["stages", "epochs_per_stage", "train_clips", "parameters", "backbone_revision"]
credits = "Synthetic data made by audiorepro.synthetic.probe: no real audio, labels or weights."
event_classes = [{event_classes}]
"""
_PROBE_KEYS = """\
[families]
emotion = "emotion_"
valence = "valence"

[completion]
runs = [{completion}]
targets = {targets}

[[leaders]]
task = "Emotion targets"
metric = "test/family/emotion/normalized_mae"
label = "mean normalized MAE"
direction = "lower"
candidates = {{ kind = "frozen probe" }}
baselines = ["whisper-ft/crema-like"]

[[leaders]]
task = "Timbre vectors"
metric = "test/speaker_cosine/timbre/mean"
label = "mean cosine"
direction = "higher"
candidates = {{ kind = "frozen probe" }}
baselines = ["whisper-ft/crema-like"]

[[leaders]]
task = "Burst events"
metric = "test/burst_localization/0.5/f1"
label = "event F1 at IoU 0.5"
direction = "higher"
percent = true
candidates = {{ kind = "frozen probe", phase = "tuned" }}
baselines = ["whisper-ft/crema-like"]

[[leaders]]
task = "Human benchmark, at least two raters"
metric = "public/emo-like/min_2_raters/mean_prompt_spearman"
label = "mean prompt Spearman"
direction = "higher"
candidates = {{ kind = "frozen probe" }}
baselines = ["whisper-ft/human"]

[[leaders]]
task = "Acted emotion (ravdess-like)"
metric = "adapter_ravdess/metrics/accuracy"
label = "accuracy"
direction = "higher"
percent = true
candidates = {{ kind = "frozen probe" }}
baselines = ["whisper-ft/ravdess-like"]
"""


def _saved(name: str, split: str, hashes: dict[str, str]) -> list[str]:
    return [f"[run.{split}]", f'file = "runs/{name}"', f'sha256 = "{hashes[name]}"']


def prepare_probe_demo(work: Path, *, tampered: bool = False) -> Path:
    """Write the synthetic probe runs (:mod:`audiorepro.synthetic.probe`) and their study.

    Per model: a legacy run with saved measurements only (phase legacy, domain "held-out A"),
    and tuned runs with predictions and saved measurements: crema-like (domain "held-out B"),
    ravdess-like (an adapter result) and a human benchmark (public scores). ``tampered``: the
    failing variant, where one saved number of clap-mlp/crema-like is off
    (:data:`~audiorepro.synthetic.probe.TAMPERED`).
    """
    work = Path(work)
    hashes = write_probe_fixtures(work / "runs")
    classes = ", ".join(f'"{c}"' for c in EVENT_CLASSES)
    lines = [_PROBE_HEAD + _PROBE_TOP.format(event_classes=classes)]
    ids = []
    for run, model, family, _ in MODELS:
        kind = "full fine-tune" if run.startswith("whisper") else "frozen probe"
        head = run.rpartition("-")[2] if kind == "frozen probe" else "multitask"
        common = [f'model = "{model}"', f'family = "{family}"']
        legacy = f"{run}__legacy"
        ids += [f"{run}/legacy", f"{run}/crema-like"]
        lines += [
            "[[run]]",
            f'id = "{run}/legacy"',
            *common,
            f'attributes = {{ phase = "legacy", domain = "held-out A", kind = "{kind}", '
            f'head = "{head}" }}',
            *_saved(f"{legacy}__test.json", "metrics.test", hashes),
            *_saved(f"{legacy}__p3.json", "metrics.p3", hashes),
            *_saved(f"{legacy}__config.json", "config", hashes),
            "",
        ]
        for corpus, domain in (
            ("crema-like", "held-out B"),
            ("ravdess-like", "ravdess-like"),
            ("human", "emo-like"),
        ):
            name = f"{run}__{corpus}"
            lines += [
                "[[run]]",
                f'id = "{run}/{corpus}"',
                *common,
                f'attributes = {{ phase = "tuned", domain = "{domain}", kind = "{kind}", '
                f'head = "{head}" }}',
            ]
            if corpus != "human":
                lines.append(f'corpus = "{corpus}"')
            lines += [f'predictions = "runs/{name}.npz"', f'sha256 = "{hashes[name + ".npz"]}"']
            if corpus == "crema-like":
                test = f"{name}__test.json"
                if tampered and f"{run}/{corpus}" == TAMPERED[0]:
                    test = f"tampered__{test}"
                lines += [
                    f"n_targets = {len(TARGETS)}",
                    *_saved(test, "metrics.test", hashes),
                    *_saved(f"{name}__p3.json", "metrics.p3", hashes),
                    *_saved(f"{name}__config.json", "config", hashes),
                ]
            elif corpus == "ravdess-like":
                lines += _saved(f"{name}__adapter.json", "metrics.adapter_ravdess", hashes)
            else:
                lines += _saved(f"{name}__public.json", "metrics.public", hashes)
            lines.append("")
    lines += [
        "[[section]]",
        'title = "Reading these tables"',
        'file = "runs/notes.md"',
        f'sha256 = "{hashes["notes.md"]}"',
        "",
    ]
    completion = ", ".join(f'"{i}"' for i in ids)
    lines.append(_PROBE_KEYS.format(completion=completion, targets=len(TARGETS)))
    path = work / ("study_tampered.toml" if tampered else "study.toml")
    atomic_write_bytes(path, "\n".join(lines).encode())
    return path

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
from audiorepro.synthetic.probe import MODELS, TARGETS, write_probe_fixtures

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


def prepare_probe_demo(work: Path) -> Path:
    """Write the synthetic probe runs (:mod:`audiorepro.synthetic.probe`) and their study."""
    work = Path(work)
    hashes = write_probe_fixtures(work / "runs")
    lines = [_PROBE_HEAD]
    for run, model, family, _ in MODELS:
        for corpus in ("crema-like", "ravdess-like"):
            name = f"{run}__{corpus}.npz"
            lines += [
                "[[run]]",
                f'id = "{run}/{corpus}"',
                f'model = "{model}"',
                f'family = "{family}"',
                f'corpus = "{corpus}"',
                f'predictions = "runs/{name}"',
                f'sha256 = "{hashes[name]}"',
            ]
            if corpus == "crema-like":
                lines.append(f"n_targets = {len(TARGETS)}")
            lines.append("")
    path = work / "study.toml"
    atomic_write_bytes(path, "\n".join(lines).encode())
    return path

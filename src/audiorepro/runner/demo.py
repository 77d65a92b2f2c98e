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

The tiny models (about 330 MB a seed) are built once per user, outside OUT, in
:func:`model_cache` (``$XDG_CACHE_HOME/audiorepro/demo-models``, else
``~/.cache/audiorepro/demo-models``), in a folder named by a hash of what decides their bytes
(the source of the modules that build them and the versions of the libraries they are built
with). The folder lists its files' SHA-256 in ``CONTENTS.sha256`` (``sha256sum -c`` reads
it), its files are read-only, and it is checked against that list on every use: a folder
that does not match (a file changed, missing or added) is rebuilt, with one line saying so.
``OUT/cache/demo/tiny`` is a real folder, never a link into the cache: each checked file is
hard-linked into it (read-only; a copy where the cache is on another file system), so a copy
of OUT (``cp -a``) shares nothing with the cache and a change made in it cannot reach the
cache, and the study's bytes and every output are what they were. A folder is built in a
temporary folder beside it and renamed into place whole, so a concurrent run never sees a
half-built one. Where that cache cannot be written (a read-only HOME in a container), the
models are built in OUT as before.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import audiorepro.models.mapping
import audiorepro.models.offline
import audiorepro.models.seeded
import audiorepro.models.tiny
from audiorepro.core.errors import WriteError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes, npz_bytes
from audiorepro.core.paths import user_cache
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


#: The modules whose source decides the tiny models' bytes, and the libraries that build them.
_MODEL_SOURCES = (
    audiorepro.models.tiny,
    audiorepro.models.offline,
    audiorepro.models.seeded,
    audiorepro.models.mapping,
)
_MODEL_LIBRARIES = ("numpy", "torch", "transformers", "laion_clap", "safetensors")


def model_cache() -> Path:
    """Where the demo's tiny models are kept between runs, outside any output folder."""
    return user_cache("demo-models")


def models_key(seed: int) -> str:
    """A folder name over everything that decides the tiny models' bytes of this seed."""
    digest = hashlib.sha256(f"seed {seed}\n".encode())
    for module in _MODEL_SOURCES:
        assert module.__file__ is not None
        digest.update(module.__name__.encode() + b"\0" + Path(module.__file__).read_bytes())
    for name in _MODEL_LIBRARIES:
        try:
            version = importlib.metadata.version(name.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name} {version}\n".encode())
    return f"seed{seed}-{digest.hexdigest()[:20]}"


#: The list of a model folder's files and their SHA-256 (``sha256sum`` format).
CONTENTS = "CONTENTS.sha256"


def _listing(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` but the list itself: its path (POSIX, relative) -> SHA-256."""
    return {
        p.relative_to(folder).as_posix(): sha256_file(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != CONTENTS
    }


def _write_contents(folder: Path) -> None:
    """Write ``CONTENTS.sha256`` and make every file of ``folder`` read-only."""
    listing = _listing(folder)
    text = "".join(f"{digest}  {rel}\n" for rel, digest in listing.items())
    atomic_write_bytes(folder / CONTENTS, text.encode())
    for rel in [*listing, CONTENTS]:
        (folder / rel).chmod(0o444)


def _contents(folder: Path) -> dict[str, str] | None:
    """The recorded list of ``folder`` (None: there is none, or it is not one)."""
    path = folder / CONTENTS
    if path.is_symlink() or not path.is_file():
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    out = {}
    for line in lines:
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or not rel:
            return None
        out[rel] = digest
    return out or None


def mismatch(folder: Path) -> str | None:
    """What in ``folder`` differs from its ``CONTENTS.sha256`` (None: every file matches,
    and no file is missing, added or a link)."""
    listed = _contents(folder)
    if listed is None:
        return f"{CONTENTS} is missing or unreadable"
    found = {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink()) and p.name != CONTENTS
    }
    for rel in sorted(found - set(listed)):
        return f"{rel} is not in {CONTENTS}"
    for rel, digest in listed.items():
        path = folder / rel
        if path.is_symlink() or not path.is_file():
            return f"{rel} is missing"
        if sha256_file(path) != digest:
            return f"{rel} differs from its SHA-256 in {CONTENTS}"
    return None


def _remove(folder: Path) -> None:
    """Remove a folder of read-only files (its folders are writable, so unlinking works)."""
    aside = folder.with_name(f".stale-{folder.name}-{os.getpid()}")
    try:
        folder.rename(aside)
    except OSError:
        aside = folder
    shutil.rmtree(aside, ignore_errors=True)


def _shared_models(
    seed: int, build: Callable[..., Path], say: Callable[[str], None]
) -> Path | None:
    """The shared folder of this seed's models, checked against its list (rebuilt whole,
    saying so, when it does not match) or built whole if missing; None where the cache
    cannot be written (the caller builds in OUT instead)."""
    final = model_cache() / models_key(seed)
    if final.is_dir() and not final.is_symlink():
        problem = mismatch(final)
        if problem is None:
            return final
        say(f"demo model cache {final} does not match its {CONTENTS} ({problem}); rebuilding it")
        _remove(final)
    elif final.is_symlink() or final.exists():
        say(f"demo model cache {final} is not a folder; rebuilding it")
        final.unlink(missing_ok=True)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
    except OSError:
        return None
    try:
        build(building, seed=seed)
        _write_contents(building)
        try:
            building.rename(final)
        except OSError:
            if mismatch(final) is not None:  # not a concurrent run that won
                raise
    except (OSError, WriteError):  # e.g. the cache's disk is full: build in OUT instead
        return None
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return final


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _fill(folder: Path, shared: Path) -> None:
    """``folder`` made to hold the files of ``shared`` (checked): each hard-linked (the
    cache's files are read-only), or copied where a link cannot be made (another file
    system); built beside it and swapped in whole."""
    listed = _contents(shared) or {}
    if folder.is_dir() and not folder.is_symlink() and _contents(folder) == listed:
        if all(_same_file(folder / r, shared / r) for r in listed) or mismatch(folder) is None:
            return
    folder.parent.mkdir(parents=True, exist_ok=True)
    placing = Path(tempfile.mkdtemp(prefix=f".{folder.name}.placing-", dir=folder.parent))
    try:
        for rel in [*listed, CONTENTS]:
            target = placing / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(shared / rel, target)
            except OSError:
                shutil.copyfile(shared / rel, target)
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.exists():
            _remove(folder)
        placing.rename(folder)
    finally:
        shutil.rmtree(placing, ignore_errors=True)


def place_models(
    folder: Path, seed: int, build: Callable[..., Path], say: Callable[[str], None] = print
) -> None:
    """Make ``folder`` (``OUT/cache/demo/tiny``) hold this seed's models: the checked files
    of the shared folder (:func:`_shared_models`) linked or copied in (:func:`_fill`), or,
    where that cannot be, models built in it. A real folder an earlier version built in OUT
    (no ``CONTENTS.sha256``) is kept and used."""
    if not folder.is_symlink() and (folder / "registry.toml").is_file():
        if _contents(folder) is None:
            return
    shared = _shared_models(seed, build, say)
    if shared is None:
        if folder.is_symlink():
            folder.unlink()
        if _contents(folder) is not None and mismatch(folder) is None:
            return
        build(folder, seed=seed)
        return
    _fill(folder, shared)


def prepare_demo(work: Path, say: Callable[[str], None] = print) -> Path:
    """Write the demo's inputs and ``study.toml`` into ``work``; returns the study path
    (``say``: the line said when the model cache is rebuilt)."""
    work = Path(work)
    dumps = fixtures()
    hashes = {}
    for name in ("synthetic_5cap.npz", "synthetic_1cap.npz"):
        data = npz_bytes(dumps[name])
        atomic_write_bytes(work / "dumps" / name, data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    build_audio(work / "audio")
    for folder, seed in (("tiny", 0), ("tiny-seed1", 1)):
        place_models(work / folder, seed, build_tiny_models, say)
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

"""``audiorepro evaluate MODEL DATASET...``: one model on prepared datasets, as a study.

The command writes the study it runs (``OUT/cache/evaluate/study.toml``, absolute paths, as
the demo keeps its own study under ``OUT/cache``), so that the output folder is an ordinary
study run: ``verify OUT`` checks it, and ``reproduce`` of that file reruns it. Retrieval
datasets (Clotho's and AudioCaps' prepared folders, or any folder in that form) become cells of
one retrieval study; ESC-50 becomes a zero-shot study (nested in ``OUT/esc50`` when retrieval
datasets are evaluated beside it).

A dataset is a registry name, looked up in ``DATA/<name>`` as ``fetch --data DATA`` prepares
it, or a folder path. A dataset that is not here is one line naming the ``fetch`` command that
prepares it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from audiorepro.checks.catalog import checkpoint_present, hub_cache
from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import atomic_write_bytes
from audiorepro.fetch.datasets import Dataset, bundled_datasets, read_datasets
from audiorepro.formats.audio import AUDIO_SUFFIXES
from audiorepro.metrics.profile_registry import canonical_profile, is_canonical
from audiorepro.models.registry import load_registry, resolve_spec
from audiorepro.specs.selection import check_device

#: The prompt of laion-clap's README zero-shot check (see studies/esc50_zeroshot.toml).
ESC50_TEMPLATE = "This is a sound of {class}"
ESC50_FOLDS = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class EvalDataset:
    """One prepared dataset: its name (the table), kind, and the files the study reads."""

    name: str
    kind: str  # "retrieval" or "zeroshot"
    audio: Path
    captions: Path | None = None
    metadata: Path | None = None


def _fetch_hint(name: str, known: dict[str, Dataset], data: Path) -> str:
    if name not in known:
        return f"a registry dataset ({', '.join(sorted(known))}) or a prepared folder"
    # One caption per clip, the published AudioCaps protocol (fetch's default is all five).
    audiocaps = known[name].kind == "audiocaps"
    extra = " --audio YOUR_CLIPS --caption-selection first-id" if audiocaps else ""
    return f"prepare it with: audiorepro fetch {name} --data {data}{extra}"


def _from_folder(name: str, folder: Path) -> EvalDataset | None:
    """The dataset a prepared folder holds, or None when it holds neither form."""
    if (folder / "esc50.csv").is_file() and (folder / "audio").is_dir():
        return EvalDataset(name, "zeroshot", (folder / "audio").resolve(), None,
                           (folder / "esc50.csv").resolve())  # fmt: skip
    if (folder / "captions.csv").is_file():
        audio = folder / "audio.txt" if (folder / "audio.txt").is_file() else folder / "audio"
        if audio.exists():
            return EvalDataset(name, "retrieval", audio.resolve(),
                               (folder / "captions.csv").resolve())  # fmt: skip
    return None


def _layout_hint(folder: Path) -> str:
    """What to do with a folder that is not in either form: clips lying beside
    ``captions.csv`` (the form ``extract --audio FOLDER`` also takes) go into ``audio/``."""
    if not (folder / "captions.csv").is_file():
        return ""
    clips = [p for p in folder.iterdir() if p.suffix.lower() in AUDIO_SUFFIXES]
    if not clips:
        return ""
    return (
        f"; its {len(clips)} clips lie beside captions.csv: move them into {folder / 'audio'}/ "
        f"(mkdir {folder / 'audio'} && mv {folder}/*{clips[0].suffix} {folder / 'audio'}/)"
    )


def resolve_dataset(arg: str, data: Path, known: dict[str, Dataset]) -> EvalDataset:
    """A registry name (in ``data/<name>``) or a folder path, as a prepared dataset."""
    path = Path(arg)
    is_name = arg in known or not path.exists()
    folder = data / arg if is_name else path
    name = arg if is_name else path.resolve().name
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    found = _from_folder(name, folder) if folder.is_dir() else None
    if found is None:
        where = f"{folder} is not prepared" if folder.exists() else f"{folder} does not exist"
        if arg not in known and not folder.exists():
            # Not a registry name: the folder the user named, as given (then DATA/<name>).
            where = f"{arg} does not exist (nor {folder})"
        raise UserError(
            f"{where} (expected captions.csv with audio/ or audio.txt, or esc50.csv with "
            f"audio/){_layout_hint(folder) if folder.is_dir() else ''}; "
            f"{_fetch_hint(arg, known, data)}",
            key=arg,
        )
    return found


def _distinct_names(args: Sequence[str], datasets: list[EvalDataset]) -> None:
    """Each dataset's name names its study file and output folder (``study-<name>.toml``):
    one dataset given twice, or two folders whose names become one (``a b`` and ``a_b``,
    its characters outside letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``), would
    share them; refused naming both. A name too long for a file name is refused too."""
    first: dict[str, str] = {}
    for arg, ds in zip(args, datasets, strict=True):
        if len(f"study-{ds.name}.toml".encode()) > 255:
            raise UserError(
                f"names a dataset {ds.name[:40]!r}... of {len(ds.name.encode())} bytes; expected "
                "a folder name of at most 240 bytes (it names a study file)",
                key=arg,
            )
        seen = first.setdefault(ds.name, arg)
        if seen == arg:
            if args.count(arg) > 1:
                raise UserError("is given twice; expected each dataset once", key=arg)
            continue
        raise UserError(
            f"and {seen!r} both name the dataset {ds.name!r} (its study file and output "
            "folder); expected datasets whose names differ in letters, digits, '.', '_' or '-'",
            key=arg,
        )


def _q(text: str | Path) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(str(text), ensure_ascii=False)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text).strip("_") or "model"


def retrieval_study(
    model: str,
    datasets: list[EvalDataset],
    *,
    profiles: tuple[str, ...],
    device: str,
    registry: Path | None,
) -> str:
    """The TOML text of a retrieval study: one extraction cell per dataset."""
    lines = [
        'schema = "audiorepro.study/1"',
        f"name = {_q('evaluate-' + _slug(model))}",
        f"title = {_q(model + ' on ' + ', '.join(d.name for d in datasets))}",
        "profiles = [" + ", ".join(_q(p) for p in profiles) + "]",
    ]
    for ds in datasets:
        assert ds.captions is not None, "a retrieval dataset has captions"
        extract = [f"model = {_q(model)}", f"audio = {_q(ds.audio)}"]
        extract += [f"captions = {_q(ds.captions)}", f"device = {_q(device)}"]
        if registry is not None:
            extract.append(f"registry = {_q(registry.resolve())}")
        lines += ["", "[[cell]]", f"id = {_q(model + '/' + ds.name)}", f"model = {_q(model)}"]
        lines += [f"dataset = {_q(ds.name)}", "extract = { " + ", ".join(extract) + " }"]
    return "\n".join(lines) + "\n"


def zeroshot_study(model: str, ds: EvalDataset, *, device: str, registry: Path | None) -> str:
    """The TOML text of a zero-shot study on an ESC-50-form folder, every fold."""
    assert ds.metadata is not None, "a zero-shot dataset has ESC-50's metadata"
    lines = [
        'schema = "audiorepro.study/1"',
        'kind = "zeroshot"',
        f"name = {_q('evaluate-' + _slug(model) + '-' + ds.name)}",
        f"title = {_q(model + ' zero-shot on ' + ds.name)}",
        "",
        "[dataset]",
        f"name = {_q(ds.name)}",
        f"audio = {_q(ds.audio)}",
        f"metadata = {_q(ds.metadata)}",
        "folds = [" + ", ".join(str(f) for f in ESC50_FOLDS) + "]",
        f"template = {_q(ESC50_TEMPLATE)}",
        "",
        "[[cell]]",
        f"id = {_q(model + '/' + ds.name)}",
        f"model = {_q(model)}",
        f"device = {_q(device)}",
    ]
    if registry is not None:
        lines.append(f"registry = {_q(registry.resolve())}")
    return "\n".join(lines) + "\n"


def linear_probe_study(model: str, ds: EvalDataset, *, device: str, registry: Path | None) -> str:
    """The TOML text of a linear-probe study on an ESC-50-form folder: the clips of every fold
    extracted (through the cache, as the zero-shot study extracts them), ``linear-v1``
    leaving each of ESC-50's five folds out once."""
    assert ds.metadata is not None, "an ESC-50 dataset has its metadata"
    extract = [f"model = {_q(model)}", f"audio = {_q(ds.audio)}", f"device = {_q(device)}"]
    if registry is not None:
        extract.append(f"registry = {_q(registry.resolve())}")
    lines = [
        'schema = "audiorepro.study/1"',
        'kind = "linear-probe"',
        f"name = {_q('evaluate-' + _slug(model) + '-' + ds.name + '-linear-probe')}",
        f"title = {_q(model + ' linear probe on ' + ds.name)}",
        "",
        "[[cell]]",
        f"id = {_q(model + '/' + ds.name)}",
        f"model = {_q(model)}",
        f"labels = {_q(ds.metadata)}",
        f"labels_sha256 = {_q(sha256_file(ds.metadata))}",
        'protocol = "leave-one-fold-out"',
        'definition = "linear-v1"',
        "extract = { " + ", ".join(extract) + " }",
    ]
    return "\n".join(lines) + "\n"


#: What ``evaluate --task`` runs on ESC-50: zero-shot classification, or a linear probe.
TASKS = ("zeroshot", "linear-probe")


def study_model(model: str, registry: Path | None) -> str:
    """The model spec as the study file should name it, checked now (exit 2 before any
    write): a registry name or a pinned hub id as given, a local folder or file absolute (the
    study file lives in OUT/cache, not where the command ran)."""
    known = load_registry([registry] if registry is not None else [])
    if model not in known and ":" not in model and Path(model).is_dir():
        # A plain local folder, as --help says, is a Hugging Face model folder (it was
        # refused as "neither a registry name nor hf:... nor laion:...").
        model = f"hf:{model}"
    spec = resolve_spec(model, known)
    if model == spec.name and not model.startswith(("hf:", "laion:")):
        # Only a registry checkpoint is fetched (py:/hear: encoders load the user's own files).
        if spec.format in ("hf", "laion") and not checkpoint_present(spec, hub_cache(None)):
            # Said now, as `list` says it: a run would only fail its cell, in a whole folder.
            raise UserError(
                f"is not fetched here: audiorepro fetch {model} (then evaluate again)", key=model
            )
        return model  # a registry name or a user's encoder spec, as given
    if spec.format == "hf" and spec.is_hub:
        return model
    return f"{spec.format}:{spec.location}"


def prepare_evaluate(
    model: str,
    dataset_args: tuple[str, ...],
    work: Path,
    *,
    data: Path,
    profiles: tuple[str, ...] | None = None,
    device: str = "cpu",
    registry: Path | None = None,
    task: str = "zeroshot",
) -> list[tuple[Path, str]]:
    """Write the study files of one evaluation into ``work``; returns each study file with
    its folder in OUT (``"."`` first; ESC-50 beside retrieval datasets goes to its name).
    ``task``: what ESC-50 runs, zero-shot classification or a ``linear-v1`` probe."""
    if task not in TASKS:
        raise UserError(f"is {task!r}; expected one of {', '.join(TASKS)}", key="--task")
    check_device(device)
    known = read_datasets(bundled_datasets())
    datasets = [resolve_dataset(arg, data, known) for arg in dataset_args]
    _distinct_names(dataset_args, datasets)
    profiles = profiles or (canonical_profile(),)
    retrieval = [d for d in datasets if d.kind == "retrieval"]
    if not retrieval and any(not is_canonical(p) for p in profiles):
        raise UserError("applies to retrieval datasets only (none given)", key="--profile")
    model = study_model(model, registry)
    studies: list[tuple[str, str, str]] = []  # (file name, TOML text, dataset name)
    if retrieval:
        text = retrieval_study(
            model, retrieval, profiles=profiles, device=device, registry=registry
        )
        studies.append(("study.toml", text, retrieval[0].name))
    for ds in (d for d in datasets if d.kind == "zeroshot"):
        if task == "linear-probe":
            text = linear_probe_study(model, ds, device=device, registry=registry)
        else:
            text = zeroshot_study(model, ds, device=device, registry=registry)
        studies.append((f"study-{ds.name}.toml", text, ds.name))
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot be created ({exc.strerror})", source=work) from None
    jobs: list[tuple[Path, str]] = []
    for i, (file, text, name) in enumerate(studies):
        atomic_write_bytes(work / file, text.encode())
        jobs.append((work / file, "." if i == 0 else name))
    return jobs

"""A user's encoder: a ``py:`` factory's :class:`~audiorepro.models.encoder.Encoder`, or a
HEAR 2021 module used as it is (:class:`HearEncoder`).

**Loading runs the user's code.** Importing the module named by a ``py:`` or ``hear:`` spec
(or an installed plugin) executes it, as installing and importing it would: give only specs of
code you trust. The kit itself never unpickles anything: weight files it reads for
``identity`` are opened with ``torch.load(weights_only=True)``, safetensors or
``numpy.load(allow_pickle=False)``, and a HEAR module's weights file passes the checkpoint
preflight before ``load_model`` sees it. What the module does with its files is its own code.

A ``py`` factory is called with no arguments (or ``device=...`` when its signature has that
parameter) and must return an Encoder; its ``weight_files()`` are hashed once it returns, and a
registry entry's recorded ``weights`` are checked then, before any clip is embedded.

A HEAR module is checked first, the way HEAR's ``hearvalidator`` checks a submission
(:func:`check_hear`): ``load_model`` and ``get_scene_embeddings`` are functions, the model's
``sample_rate`` is one of HEAR's rates and ``scene_embedding_size`` a positive int, and
``get_scene_embeddings`` of two seeded one-second noise clips returns a float torch tensor
of ``[2, scene_embedding_size]`` with finite values (float32, or float64/float16: the
validator asks float32, but heareval's embedding runner takes any and its
``memmap_embeddings`` casts each file to float32, which the kit does to the same rows).
The first failed check is one line naming what is missing. The adapter embeds one clip
per call (HEAR takes a ``[n, samples]`` tensor: clips of different lengths are not padded)
and converts the tensor to numpy (on the CPU); it adds no text tower.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.models.encoder import Encoder, check_encoder, has_text_tower, weight_paths
from audiorepro.models.encoder_specs import (
    UserSpec,
    add_import_folder,
    code_identity,
    find_top,
)
from audiorepro.models.preflight import check_weight_file
from audiorepro.models.registry import ModelSpec, check_recorded, verify_weights, weight_files
from audiorepro.models.safeload import PICKLED, load_weights_only
from audiorepro.specs.settings import Preprocessing

Array = npt.NDArray[np.float32]
#: The sample rates HEAR 2021 allows (hearvalidator's list).
HEAR_RATES = (16_000, 22_050, 32_000, 44_100, 48_000)
#: The settings a user's encoder takes: the rest are CLAP's preprocessing.
USER_SETTINGS = ("seed", "batch_size")


@dataclass(frozen=True)
class Loaded:
    """A user's encoder as loaded: the object, its weights' hashes, its code's identity."""

    encoder: Encoder
    hashes: dict[str, str]
    code: dict[str, Any]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _exited(exc: SystemExit) -> str:
    return (
        f"called sys.exit({exc.code!r}); an encoder returns its answer or raises an "
        "exception, it never ends the process"
    )


def call_user(func: Callable[..., Any], what: str, spec: str, *args: Any, **kw: Any) -> Any:
    """Call the user's code: an exception it raises is one line naming ``what`` (exit 2), and
    ``sys.exit()`` inside it is refused the same way (a command never ends with the user's
    exit status and no output)."""
    try:
        return func(*args, **kw)
    except UserError:
        raise
    except (SystemExit, Exception) as exc:  # the user's code: one line, never a fallback
        raise call_user_error(what, spec, exc) from None


def call_user_error(what: str, spec: str, exc: BaseException) -> UserError:
    """The one line :func:`call_user` says when the user's ``what`` raised ``exc``."""
    if isinstance(exc, SystemExit):
        return UserError(f"{what} {_exited(exc)}", key=spec)
    return UserError(f"{what} failed: {_first_line(exc)}", key=spec)


def import_user_module(user: UserSpec, spec: str) -> ModuleType:
    """Import the module of ``user`` (a file under a name derived from its path): this runs
    the user's code. An import that fails is one line naming the error."""
    try:
        if not user.is_file:
            find_top(user.target.split(".")[0])  # the working folder too, as HEAR's runner
            return importlib.import_module(user.target)
        path = Path(user.target)
        add_import_folder(path.parent)  # its sibling modules, as `python PATH.py` has them
        name = "audiorepro_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
        found = importlib.util.spec_from_file_location(name, path)
        if found is None or found.loader is None:
            raise UserError("cannot be imported as a Python file", source=path, key=spec)
        module = importlib.util.module_from_spec(found)
        sys.modules[name] = module
        found.loader.exec_module(module)
        return module
    except UserError:
        raise
    except SystemExit as exc:  # sys.exit() in the user's code: never the command's exit status
        raise UserError(f"importing {user.target} {_exited(exc)}", key=spec) from None
    except Exception as exc:  # the user's code: any error it raises is reported, not hidden
        raise UserError(f"importing {user.target} failed: {_first_line(exc)}", key=spec) from None


def _attribute(module: ModuleType, dotted: str, spec: str) -> Any:
    obj: Any = module
    for part in dotted.split("."):
        if not hasattr(obj, part):
            raise UserError(f"module {module.__name__} has no {dotted!r}", key=spec)
        obj = getattr(obj, part)
    return obj


def _load_py(spec: ModelSpec, device: str) -> Encoder:
    user = spec.user
    assert user is not None and user.factory is not None
    module = import_user_module(user, spec.name)
    factory = _attribute(module, user.factory, spec.name)
    if not callable(factory):
        raise UserError(f"{user.factory} in {user.target} is not callable", key=spec.name)
    try:
        takes_device = "device" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_device = False
    kwargs = {"device": device} if takes_device else {}
    made = call_user(factory, f"{user.factory}()", spec.name, **kwargs)
    return check_encoder(made, spec=spec.name)


#: Encoders loaded in this process, by spec, device and code: a study asks a ``py`` encoder
#: for its weights (the cache key) and its towers before it embeds, and builds it once.
_LOADED: dict[tuple[Any, ...], Loaded] = {}


def json_key(value: Any) -> str:
    """A JSON record as one hashable key (sorted keys)."""
    return json.dumps(value, sort_keys=True)


def load_user(spec: ModelSpec, device: str) -> Loaded:
    """Load a ``py`` or ``hear`` spec (module docstring): the encoder, its weights' SHA-256
    (checked against a registry entry's record) and its code's identity. Loaded once per
    process for the same spec, device, code and weights' bytes (a changed source or weight
    file loads it again)."""
    user = spec.user
    assert user is not None
    code = code_identity(user)
    # the whole identity: an edited helper module or editable package loads it again
    memo = (user, tuple(sorted(spec.weights.items())), spec.registry, device, json_key(code))
    known = _LOADED.get(memo)
    if known is not None:
        files = weight_paths(known.encoder, spec=spec.name)
        if {p.name: sha256_file(p) for p in files} == known.hashes:
            return known
    _LOADED[memo] = loaded = _load_user(spec, device, code)
    return loaded


def _load_user(spec: ModelSpec, device: str, code: dict[str, Any]) -> Loaded:
    if spec.format == "hear":
        hashes = verify_weights(spec)  # before the module sees its weights
        encoder: Encoder = load_hear(spec, device)
    else:
        present = weight_files(spec)  # a registry entry's files beside it: before import
        if present:
            only = {n: spec.weights[n] for n in present}
            check_recorded(dataclasses.replace(spec, weights=only, files={}), present)
        encoder = _load_py(spec, device)
        files = weight_paths(encoder, spec=spec.name)
        hashes = check_recorded(spec, {p.name: p for p in files})
    return Loaded(encoder, hashes, code)


def user_settings(spec: ModelSpec, overrides: dict[str, Any]) -> Preprocessing:
    """A user's encoder takes ``seed`` and ``batch_size`` (CLAP's preprocessing settings are
    refused in one line: the encoder does its own)."""
    settings = spec.preprocessing.with_overrides(overrides)
    for key in sorted(set(Preprocessing.__dataclass_fields__) - {*USER_SETTINGS, "max_samples"}):
        if getattr(settings, key) is not None:
            raise UserError(
                f"is a CLAP preprocessing setting; a {spec.format} encoder takes only "
                f"{', '.join(USER_SETTINGS)} (it preprocesses by itself)",
                key=f"{spec.name}: {key}",
            )
    if settings.max_samples != Preprocessing().max_samples:
        raise UserError(
            f"a {spec.format} encoder takes only {', '.join(USER_SETTINGS)}",
            key=f"{spec.name}: max_samples",
        )
    return settings


def user_has_text(spec: ModelSpec) -> bool:
    """Does this user's encoder have a text tower? A HEAR module never; a ``py`` encoder is
    built (once: :func:`load_user`) to ask it."""
    if spec.format == "hear":
        return False
    return has_text_tower(load_user(spec, "cpu").encoder)


def user_weight_hashes(spec: ModelSpec, device: str = "cpu") -> dict[str, str]:
    """The SHA-256 of a user encoder's weight files (for the extraction cache's key): a
    registry entry's record, else those of the files it names (a ``py`` encoder is built to
    ask it; a ``hear`` spec's weights file is hashed)."""
    if spec.weights:
        return dict(spec.weights)
    if spec.format == "hear":
        return verify_weights(spec)
    return load_user(spec, device).hashes


# ---------------------------------------------------------------------------- HEAR


class HearEncoder:
    """A HEAR 2021 module as an :class:`~audiorepro.models.encoder.Encoder` (audio only)."""

    def __init__(self, module: ModuleType, model: Any, weights: Path | None, name: str) -> None:
        self.module, self.model, self.weights = module, model, weights
        self.name = name
        self.sample_rate = int(model.sample_rate)
        self.scene_embedding_size = int(model.scene_embedding_size)

    def _device(self) -> Any:
        params = getattr(self.model, "parameters", None)
        if callable(params):
            for p in params():
                return p.device
        return "cpu"

    def embed_audio(self, waveforms: Sequence[Array]) -> Array:
        """One clip per ``get_scene_embeddings`` call (HEAR batches hold equal lengths); each
        answer checked as :func:`check_hear` checks the validator's (a float32 tensor of
        ``[1, scene_embedding_size]``, on a real device), else one line naming the clip's
        length."""
        import torch

        rows = []
        with torch.no_grad():
            for w in waveforms:
                audio = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))[None, :]
                out = call_user(
                    self.module.get_scene_embeddings, "get_scene_embeddings", self.name,
                    audio.to(self._device()), self.model,
                )  # fmt: skip
                what = f"for a clip of {len(w)} samples"
                rows.append(scene_rows(out, 1, self.scene_embedding_size, self.name, what))
        return (
            np.concatenate(rows) if rows else np.zeros((0, self.scene_embedding_size), np.float32)
        )

    def embed_batch(self, waveforms: Sequence[Array]) -> Array:
        """Clips of one length in one ``get_scene_embeddings`` call, stacked, as heareval's
        embedding runner batches them (a module may depend on its batch: a model left in
        training mode normalises over it); clips of several lengths one per call."""
        import torch

        if len({len(w) for w in waveforms}) != 1:
            return self.embed_audio(waveforms)
        audio = torch.from_numpy(np.stack([np.asarray(w, dtype=np.float32) for w in waveforms]))
        with torch.no_grad():
            out = call_user(
                self.module.get_scene_embeddings, "get_scene_embeddings", self.name,
                audio.to(self._device()), self.model,
            )  # fmt: skip
        what = f"for {len(waveforms)} clips of {audio.shape[1]} samples"
        return scene_rows(out, len(waveforms), self.scene_embedding_size, self.name, what)

    def weight_files(self) -> list[Path]:
        return [] if self.weights is None else [self.weights]


def _hear_fail(spec: str, what: str) -> UserError:
    return UserError(
        f"is not a HEAR 2021 module: {what} (the API: load_model(path), "
        "get_scene_embeddings(audio, model), model.sample_rate, model.scene_embedding_size)",
        key=spec,
    )


def scene_rows(out: Any, n: int, size: int, spec: str, what: str) -> Array:
    """``get_scene_embeddings``' answer for ``n`` clips as float32 numpy: a float torch tensor
    (float32, or float64/float16 cast as heareval's memmap casts them) of ``[n, size]`` with
    finite values, on a device that holds values (not torch's ``meta``),
    else one line (``what``: which call, e.g. the clip's length)."""
    import torch

    if not isinstance(out, torch.Tensor):
        raise _hear_fail(spec, f"get_scene_embeddings returned {type(out).__name__} {what}, "
                         "not a torch tensor")  # fmt: skip
    if out.device.type == "meta":
        raise _hear_fail(spec, f"get_scene_embeddings returned a tensor on torch's meta device "
                         f"{what} (it holds no values: load the model's weights)")  # fmt: skip
    if out.dtype not in (torch.float32, torch.float64, torch.float16):
        raise _hear_fail(spec, f"get_scene_embeddings returned {out.dtype} {what}, "
                         "expected float32 (or float64, float16)")  # fmt: skip
    if tuple(out.shape) != (n, size):
        raise _hear_fail(
            spec, f"get_scene_embeddings gave shape {tuple(out.shape)} {what}, "
            f"expected ({n}, {size}) (scene_embedding_size)",
        )  # fmt: skip
    # heareval's runner takes any float tensor (hearvalidator's float32 rule is not applied)
    # and its memmap_embeddings casts each file with astype(np.float32): the same rows here
    rows: Array = out.detach().to("cpu").numpy().astype(np.float32)
    if not np.all(np.isfinite(rows)):
        raise _hear_fail(spec, f"get_scene_embeddings returned NaN or infinite values {what}")
    return rows


def _on_meta(model: Any) -> bool:
    for method in ("parameters", "buffers"):
        tensors = getattr(model, method, None)
        if callable(tensors) and any(t.device.type == "meta" for t in tensors()):
            return True
    return False


def check_hear(module: ModuleType, model: Any, spec: str) -> None:
    """hearvalidator's checks of a module and its loaded model (module docstring)."""
    import torch

    rate = getattr(model, "sample_rate", None)
    if isinstance(rate, bool) or not isinstance(rate, int) or rate not in HEAR_RATES:
        raise _hear_fail(spec, f"model.sample_rate is {rate!r}, expected one of {HEAR_RATES}")
    size = getattr(model, "scene_embedding_size", None)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise _hear_fail(spec, f"model.scene_embedding_size is {size!r}, expected an int >= 1")
    if _on_meta(model):
        raise _hear_fail(spec, "the model's tensors are on torch's meta device (they hold no "
                         "values): load_model must return a model with its weights")  # fmt: skip
    noise = np.random.default_rng(0).uniform(-1.0, 1.0, (2, rate)).astype(np.float32)
    encoder = HearEncoder(module, model, None, spec)
    audio = torch.from_numpy(noise).to(encoder._device())
    with torch.no_grad():
        out = call_user(module.get_scene_embeddings, "get_scene_embeddings", spec, audio, model)
    scene_rows(out, 2, size, spec, "for 2 one-second clips")


def load_hear(spec: ModelSpec, device: str) -> HearEncoder:
    """Import a HEAR module, check its functions, load its model, check it (module
    docstring); its weights file passed the preflight and its hash the registry first."""
    user = spec.user
    assert user is not None
    weights = None if user.weights is None else Path(user.weights)
    if weights is not None:
        check_weight_file(weights, what="a HEAR model's weights file")
    module = import_user_module(user, spec.name)
    for func in ("load_model", "get_scene_embeddings"):
        if not callable(getattr(module, func, None)):
            raise _hear_fail(spec.name, f"module {user.target} has no function {func}")
    args = [] if weights is None else [str(weights)]
    model = call_user(module.load_model, "load_model", spec.name, *args)
    to = getattr(model, "to", None)
    if device != "cpu" and callable(to):
        model = call_user(to, f"model.to({device!r})", spec.name, device)
    check_hear(module, model, spec.name)
    name = Path(user.target).stem if user.is_file else user.target
    return HearEncoder(module, model, weights, name)


# ---------------------------------------------------------------------------- identity


def _file_tensors(path: Path) -> dict[str, Any] | None:
    """A weight file's tensors (torch), or None when it is not a tensor file the kit reads
    without unpickling (safetensors, a weights-only torch pickle, a plain ``.npz``)."""
    import torch

    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        from safetensors.torch import load_file

        return dict(load_file(str(path)))
    if suffix in PICKLED:
        loaded = load_weights_only(path)
        flat: dict[str, Any] = {}
        _flatten(loaded, "", flat)
        return flat or None
    if suffix == ".npz" and zipfile.is_zipfile(path):
        with np.load(path, allow_pickle=False) as arrays:
            return {k: torch.from_numpy(np.array(arrays[k])) for k in sorted(arrays.files)}
    return None


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        out[prefix or "tensor"] = obj
    elif isinstance(obj, dict):
        for key in sorted(obj, key=str):
            _flatten(obj[key], f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _flatten(item, f"{prefix}.{i}" if prefix else str(i), out)


def user_state(encoder: Encoder, spec: str) -> dict[str, Any] | None:
    """Every weight file's tensors (by name for one file, as ``file/name`` for several), or
    None when a file is not a tensor file (identity then compares the files' hashes)."""
    state: dict[str, Any] = {}
    paths = weight_paths(encoder, spec=spec)
    for path in paths:
        tensors = _file_tensors(path)
        if tensors is None:
            return None
        prefix = "" if len(paths) == 1 else f"{path.name}/"
        state.update({f"{prefix}{k}": v for k, v in tensors.items()})
    return state if paths else None

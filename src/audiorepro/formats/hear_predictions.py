"""heareval's saved test predictions, ``<test split>.predictions.pkl``, read without running
any code they could carry.

heareval 2021.1.3's ``task_predictions`` writes, per data split, ``pickle.dump(
predictor.test_predictions, fp)`` to ``<embedding folder>/<test split>.predictions.pkl``, the
test split's name being ``"|".join(split["test"])`` (``test``, ``fold00``, ...): a dict of CPU
tensors, ``target`` (rows x labels, 0/1), ``prediction`` (the class scores: softmax for
multiclass, sigmoid for multilabel) and ``prediction_logit``; an event task's adds
``target_events`` and ``predicted_events`` (file name -> a list of ``{"label", "start",
"end"}``, ms, the post-processing chosen on validation applied) and ``timestamp``. Scene rows
follow the order of the split's stacked embeddings (heareval's shuffle).

A pickle can run any code while it loads. This reader never hands the file to ``pickle.load``:
its unpickler resolves only the names a pickled CPU tensor and these containers need
(``torch._utils._rebuild_tensor_v2``, ``collections.OrderedDict``, numpy's scalar and dtype),
and a tensor's storage bytes (``torch.storage._load_from_bytes``) are read by
``torch.load(..., weights_only=True)``; any other name is refused in one line naming the file
and the name, before anything it names is imported.
"""

from __future__ import annotations

import collections
import io
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import check_regular_file
from audiorepro.formats.hear import HearEvent

__all__ = ["SavedPredictions", "predictions_file", "read_predictions"]

#: What a file may be before it is read (heareval's largest tasks are tens of MB).
MAX_BYTES = 1 << 30


def predictions_file(folder: Path, test: tuple[str, ...]) -> Path:
    """heareval's file of one data split's test predictions.

    >>> predictions_file(Path("e"), ("fold00",)).as_posix()
    'e/fold00.predictions.pkl'
    """
    return folder / f"{'|'.join(test)}.predictions.pkl"


@dataclass(frozen=True)
class SavedPredictions:
    """One data split's saved test predictions."""

    target: npt.NDArray[np.float64]  #: rows x labels, 0/1
    prediction: npt.NDArray[np.float64]  #: rows x labels, the class scores
    #: event tasks: file name -> the predicted events; None for scene tasks
    events: dict[str, list[HearEvent]] | None


def _storage(data: bytes) -> Any:
    import torch

    return torch.load(io.BytesIO(data), weights_only=True)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: Any, path: Path) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        import torch._utils

        allowed: dict[tuple[str, str], Any] = {
            ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
            ("torch.storage", "_load_from_bytes"): _storage,
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("numpy", "dtype"): np.dtype,
            ("numpy.core.multiarray", "scalar"): np.core.multiarray.scalar,  # type: ignore[attr-defined]
            ("numpy._core.multiarray", "scalar"): np.core.multiarray.scalar,  # type: ignore[attr-defined]
        }
        found = allowed.get((module, name))
        if found is None:
            raise UserError(
                f"names {module}.{name}; expected only tensors, numbers, strings, lists and "
                "dicts as heareval writes them (refused unread: a pickle can run code)",
                source=self.path,
            )
        return found


def _array(doc: dict[str, Any], key: str, path: Path) -> npt.NDArray[np.float64]:
    value: Any = doc.get(key)
    try:
        array = np.asarray(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        array = np.zeros(0)
    if array.ndim != 2 or array.shape[0] == 0:
        raise UserError(
            f"is {type(value).__name__}; expected a rows x labels tensor", source=path, key=key
        )
    return array


def _events(doc: dict[str, Any], path: Path) -> dict[str, list[HearEvent]]:
    raw = doc.get("predicted_events")
    if not isinstance(raw, dict):
        raise UserError("expected file name -> events", source=path, key="predicted_events")
    out: dict[str, list[HearEvent]] = {}
    for name, events in raw.items():
        where = f"predicted_events.{name}"
        if not isinstance(events, list):
            raise UserError("expected a list of events", source=path, key=where)
        out[str(name)] = []
        for i, e in enumerate(events):
            try:
                event = HearEvent(str(e["label"]), float(e["start"]), float(e["end"]))
            except (TypeError, KeyError, ValueError):
                raise UserError(
                    "expected {label, start, end} (ms)", source=path, key=f"{where}[{i}]"
                ) from None
            out[str(name)].append(event)
    return out


def read_predictions(path: Path, event: bool) -> SavedPredictions:
    """One ``<test split>.predictions.pkl`` (module docstring); a missing, oversized or
    malformed file, or one naming anything but what heareval writes, is one line."""
    check_regular_file(path, what="heareval's saved predictions")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise UserError(f"is {size} bytes; expected at most {MAX_BYTES}", source=path)
    try:
        doc = _Unpickler(io.BytesIO(path.read_bytes()), path).load()
    except UserError:
        raise
    except Exception as exc:  # a damaged pickle: any error its parser raises is one line
        raise UserError(f"cannot be read as heareval's predictions ({exc})", source=path) from None
    if not isinstance(doc, dict):
        raise UserError(f"holds a {type(doc).__name__}; expected heareval's dict", source=path)
    target, prediction = _array(doc, "target", path), _array(doc, "prediction", path)
    if target.shape != prediction.shape:
        raise UserError(
            f"is {prediction.shape}; expected the target's shape {target.shape}",
            source=path,
            key="prediction",
        )
    return SavedPredictions(target, prediction, _events(doc, path) if event else None)

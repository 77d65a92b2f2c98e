"""Probe-study prediction files (``.npz``); their metric report is :mod:`audiorepro.metrics.probe`.

A prediction file holds any of three sections; each present section is validated and scored.

========================  ====================  ==============================================
key                       dtype, shape          meaning
========================  ====================  ==============================================
``reg_names``             str [K]               regression targets
``reg_pred``, ``reg_true``  float [N, K]        predictions and references (NaN = not annotated)
``reg_train_sd``          float [K]             frozen training-set SD per target
``reg_train_mean``        float [K], optional   frozen training-set mean per target
``cls_names``             str [L]               class names
``cls_true``, ``cls_pred``  int [M]             class indices in [0, L)
``cls_group``             str [M], optional     group per item (e.g. actor), for the bootstrap
``ev_ref``, ``ev_pred``   float [E, 2], [P, 2]  event start/end seconds (end > start)
``ev_ref_clip``, ``ev_pred_clip``  int [E], [P]  clip id of each event
``frame_true``            0/1 [F]               frame labels on one grid
``frame_prob``            float [F]             frame probabilities in [0, 1]
``ev_ref_class``          int [E], optional     class of each reference event
``ev_pred_class``         int [P], optional     class of each predicted event
``ev_oracle_class``       int [E], optional     class predicted on each reference (oracle) span
``spk_pred``, ``spk_ref``  float [S, V], opt.   speaker vectors, predicted and reference
``spk_valid``             bool [S], optional    which speaker vectors count
``spk_pred__<set>``, ...  as above, optional    a named speaker-vector set (``timbre``,
                                                ``identity``): ``spk_pred__<set>``,
                                                ``spk_ref__<set>``, ``spk_valid__<set>``
``hb_bench``              str [H]               human benchmark of each item
``hb_prompt``, ``hb_clip``  str [H]             the item's prompt and clip
``hb_score``              float [H]             the model's score for the item
``hb_label``              0/1 [H]               the human label (1 = positive)
``hb_cut_names``          str [C], optional     named label cuts ("min_2_raters")
``hb_cut``                bool [H, C], opt.     which items each named cut keeps
``hb_dimension``          str [H], optional     the dimension (category) of the item's prompt
========================  ====================  ==============================================

Read with ``allow_pickle=False``. Every problem is a :class:`UserError` naming file and key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.formats.dump import read_npz

#: The largest magnitude of a value: squares and sums of n values must stay finite.
MAX_MAGNITUDE = 1e100
SECTIONS = {
    "regression": ("reg_names", "reg_pred", "reg_true", "reg_train_sd"),
    "classification": ("cls_names", "cls_true", "cls_pred"),
    "events": ("ev_ref", "ev_pred", "ev_ref_clip", "ev_pred_clip", "frame_true", "frame_prob"),
    "human": ("hb_bench", "hb_prompt", "hb_clip", "hb_score", "hb_label"),
}
#: The speaker-vector section (``spk_pred``, ``spk_ref``, ``spk_valid``) is checked apart.
OPTIONAL = (
    "reg_train_mean", "cls_group",
    "ev_ref_class", "ev_pred_class", "ev_oracle_class",
    "spk_pred", "spk_ref", "spk_valid",
    "hb_cut_names", "hb_cut", "hb_dimension",
)  # fmt: skip
#: A named speaker-vector set's keys: ``spk_pred__timbre``; the set name after ``__``.
SPEAKER_SET = re.compile(r"^spk_(pred|ref|valid)__([A-Za-z0-9._-]{1,64})$")


def speaker_sets(arrays: dict[str, npt.NDArray[Any]]) -> list[str]:
    """The named speaker-vector sets of a prediction file, sorted by name.

    >>> speaker_sets({"spk_pred__timbre": None, "spk_ref__timbre": None, "spk_pred": None})
    ['timbre']
    """
    return sorted({m.group(2) for k in arrays if (m := SPEAKER_SET.match(k))})


def load_predictions(path: str | Path) -> dict[str, npt.NDArray[Any]]:
    """Read and validate a prediction file; returns its arrays."""
    path = Path(path)
    name = str(path)
    arrays = read_npz(path, what="an .npz prediction file")
    validate_predictions(arrays, source=name)
    return arrays


def validate_predictions(arrays: dict[str, npt.NDArray[Any]], *, source: str) -> None:
    def fail(key: str | None, msg: str) -> UserError:
        return UserError(msg, source=source, key=key)

    known = {k for keys in SECTIONS.values() for k in keys} | set(OPTIONAL)
    unknown = sorted(k for k in set(arrays) - known if not SPEAKER_SET.match(k))
    if unknown:
        raise fail(
            unknown[0], "is not a prediction-file key (expected: " + ", ".join(sorted(known)) + ")"
        )
    present = [s for s, keys in SECTIONS.items() if any(k in arrays for k in keys)]
    if not present and "spk_pred" not in arrays and not speaker_sets(arrays):
        raise fail(None, "has no regression, classification, event or human-benchmark section")
    for section in present:
        for key in SECTIONS[section]:
            if key not in arrays:
                raise fail(key, f"is missing (required by the {section} section)")

    def floats(key: str, shape: tuple[int, ...], *, nan_ok: bool = False) -> None:
        a = arrays[key]
        if a.dtype.kind != "f":
            raise fail(key, f"has dtype {a.dtype}, expected a float dtype")
        if a.shape != shape:
            raise fail(key, f"has shape {a.shape}, expected {shape}")
        bad = ~np.isfinite(a) if not nan_ok else np.isinf(a)
        if bool(np.any(bad)):
            raise fail(
                key,
                "has a non-finite value"
                + ("" if not nan_ok else " (inf)")
                + ("" if nan_ok else "; NaN is allowed only in reg_true"),
            )
        if bool(np.any(np.abs(a) > MAX_MAGNITUDE)):  # NaN compares False: allowed above
            raise fail(
                key,
                f"has a value of magnitude above {MAX_MAGNITUDE:g}; expected values whose "
                "squares and sums a float holds (1e308 overflowed to inf in the metrics)",
            )

    def ints(key: str, shape: tuple[int, ...], low: int, high: int | None) -> None:
        a = arrays[key]
        if a.dtype.kind not in "iu":
            raise fail(key, f"has dtype {a.dtype}, expected an integer dtype")
        if a.shape != shape:
            raise fail(key, f"has shape {a.shape}, expected {shape}")
        if a.size and (int(a.min()) < low or (high is not None and int(a.max()) >= high)):
            raise fail(key, f"has a value outside [{low}, {high if high is not None else 'inf'})")

    def strings(key: str, shape: tuple[int, ...], *, unique: bool = False) -> None:
        a = arrays[key]
        if a.dtype.kind != "U":
            raise fail(key, f"has dtype {a.dtype}, expected str")
        if a.shape != shape:
            raise fail(key, f"has shape {a.shape}, expected {shape}")
        if unique:
            # Reports are keyed by name: a repeated name silently dropped a target or class.
            seen: set[str] = set()
            for i, name in enumerate(a.tolist()):
                if name in seen:
                    raise fail(key, f"repeats the name {name!r} (at {i}); expected unique names")
                seen.add(name)

    if "regression" in present:
        names = arrays["reg_names"]
        if names.ndim != 1 or names.size == 0:
            raise fail("reg_names", f"has shape {names.shape}, expected [K] with K >= 1")
        strings("reg_names", names.shape, unique=True)
        k = names.size
        pred = arrays["reg_pred"]
        if pred.ndim != 2 or pred.shape[1] != k:
            raise fail("reg_pred", f"has shape {pred.shape}, expected [N, {k}]")
        floats("reg_pred", pred.shape)
        floats("reg_true", pred.shape, nan_ok=True)
        floats("reg_train_sd", (k,))
        if "reg_train_mean" in arrays:
            floats("reg_train_mean", (k,))
    if "classification" in present:
        names = arrays["cls_names"]
        if names.ndim != 1 or names.size == 0:
            raise fail("cls_names", f"has shape {names.shape}, expected [L] with L >= 1")
        strings("cls_names", names.shape, unique=True)
        m = arrays["cls_true"].shape
        if len(m) != 1:
            raise fail("cls_true", f"has shape {m}, expected [M]")
        ints("cls_true", m, 0, names.size)
        ints("cls_pred", m, 0, names.size)
        if "cls_group" in arrays:
            strings("cls_group", m)
    if "events" in present:
        for key, clip_key in (("ev_ref", "ev_ref_clip"), ("ev_pred", "ev_pred_clip")):
            ev = arrays[key]
            if ev.ndim != 2 or ev.shape[1] != 2:
                raise fail(key, f"has shape {ev.shape}, expected [E, 2] (start, end)")
            floats(key, ev.shape)
            if bool(np.any(ev[:, 1] <= ev[:, 0])):
                i = int(np.argmax(ev[:, 1] <= ev[:, 0]))
                raise fail(key, f"has event {i} with end <= start, expected end > start")
            ints(clip_key, (ev.shape[0],), 0, None)
        ft = arrays["frame_true"]
        if ft.ndim != 1:
            raise fail("frame_true", f"has shape {ft.shape}, expected [F]")
        if not bool(np.all((ft == 0) | (ft == 1))):
            raise fail("frame_true", "has a value other than 0 or 1")
        floats("frame_prob", ft.shape)
        fp = arrays["frame_prob"]
        if fp.size and (float(fp.min()) < 0 or float(fp.max()) > 1):
            raise fail("frame_prob", "has a value outside [0, 1]")
        for key, n in (
            ("ev_ref_class", arrays["ev_ref"].shape[0]),
            ("ev_oracle_class", arrays["ev_ref"].shape[0]),
            ("ev_pred_class", arrays["ev_pred"].shape[0]),
        ):
            if key in arrays:
                ints(key, (n,), 0, None)
    if "human" in present:
        h = arrays["hb_score"].shape
        if len(h) != 1:
            raise fail("hb_score", f"has shape {h}, expected [H]")
        floats("hb_score", h)
        for key in ("hb_bench", "hb_prompt", "hb_clip"):
            strings(key, h)
        ints("hb_label", h, 0, 2)
        if ("hb_cut" in arrays) != ("hb_cut_names" in arrays):
            raise fail("hb_cut", "and hb_cut_names go together")
        if "hb_cut" in arrays:
            names = arrays["hb_cut_names"]
            if names.ndim != 1:
                raise fail("hb_cut_names", f"has shape {names.shape}, expected [C]")
            strings("hb_cut_names", names.shape)
            if "all" in names.tolist() or len(set(names.tolist())) != names.size:
                raise fail("hb_cut_names", "repeats a name or uses 'all' (the uncut rows)")
            cut = arrays["hb_cut"]
            if cut.dtype != np.bool_ or cut.shape != (h[0], names.size):
                raise fail(
                    "hb_cut",
                    f"has dtype {cut.dtype} and shape {cut.shape}, expected bool "
                    f"({h[0]}, {names.size})",
                )
    if "hb_dimension" in arrays and "human" in present:
        strings("hb_dimension", arrays["hb_score"].shape)
    for key in ("hb_cut_names", "hb_cut", "hb_dimension"):
        if key in arrays and "human" not in present:
            raise fail(key, "needs the human-benchmark section (hb_bench, hb_score, ...)")
    for key in ("ev_ref_class", "ev_pred_class", "ev_oracle_class"):
        if key in arrays and "events" not in present:
            raise fail(key, "needs the event section (ev_ref, ev_pred, ...)")
    for suffix in ("", *(f"__{name}" for name in speaker_sets(arrays))):
        pk, rk, vk = (f"spk_{part}{suffix}" for part in ("pred", "ref", "valid"))
        if not any(k in arrays for k in (pk, rk, vk)):
            continue
        for key in (pk, rk, vk):
            if key not in arrays:
                raise fail(key, "is missing (required by the speaker-vector section)")
        sp = arrays[pk]
        if sp.ndim != 2:
            raise fail(pk, f"has shape {sp.shape}, expected [S, V]")
        floats(pk, sp.shape)
        floats(rk, sp.shape)
        valid = arrays[vk]
        if valid.dtype != np.bool_ or valid.shape != (sp.shape[0],):
            raise fail(
                vk,
                f"has dtype {valid.dtype} and shape {valid.shape}, expected bool ({sp.shape[0]},)",
            )
        zero = (np.linalg.norm(sp, axis=1) == 0) | (np.linalg.norm(arrays[rk], axis=1) == 0)
        if bool(np.any(zero & valid)):
            raise fail(
                vk,
                f"marks item {int(np.argmax(zero & valid))} valid, but one "
                "of its vectors is zero (expected it marked invalid)",
            )

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
    """Every key of a prediction file is known, every section it starts is complete and
    well-formed (:data:`SECTION_CHECKS`, in that order), optional keys come with their
    section, and each speaker-vector set is whole. The first problem raises one line."""
    check = _Checker(arrays, source)
    known = {k for keys in SECTIONS.values() for k in keys} | set(OPTIONAL)
    unknown = sorted(k for k in set(arrays) - known if not SPEAKER_SET.match(k))
    if unknown:
        raise check.fail(
            unknown[0], "is not a prediction-file key (expected: " + ", ".join(sorted(known)) + ")"
        )
    present = [s for s, keys in SECTIONS.items() if any(k in arrays for k in keys)]
    if not present and "spk_pred" not in arrays and not speaker_sets(arrays):
        raise check.fail(
            None, "has no regression, classification, event or human-benchmark section"
        )
    for section in present:
        for key in SECTIONS[section]:
            if key not in arrays:
                raise check.fail(key, f"is missing (required by the {section} section)")
    for section, section_check in SECTION_CHECKS.items():
        if section in present:
            section_check(check)
    for key, section, needs in OPTIONAL_NEEDS:
        if key in arrays and section not in present:
            raise check.fail(key, f"needs the {needs}")
    for suffix in ("", *(f"__{name}" for name in speaker_sets(arrays))):
        _check_speakers(check, suffix)


class _Checker:
    """The arrays of one prediction file and the checks of one array each."""

    def __init__(self, arrays: dict[str, npt.NDArray[Any]], source: str) -> None:
        self.arrays = arrays
        self.source = source

    def fail(self, key: str | None, msg: str) -> UserError:
        return UserError(msg, source=self.source, key=key)

    def floats(self, key: str, shape: tuple[int, ...], *, nan_ok: bool = False) -> None:
        a = self.arrays[key]
        if a.dtype.kind != "f":
            raise self.fail(key, f"has dtype {a.dtype}, expected a float dtype")
        if a.shape != shape:
            raise self.fail(key, f"has shape {a.shape}, expected {shape}")
        bad = ~np.isfinite(a) if not nan_ok else np.isinf(a)
        if bool(np.any(bad)):
            raise self.fail(
                key,
                "has a non-finite value"
                + ("" if not nan_ok else " (inf)")
                + ("" if nan_ok else "; NaN is allowed only in reg_true"),
            )
        if bool(np.any(np.abs(a) > MAX_MAGNITUDE)):  # NaN compares False: allowed above
            raise self.fail(
                key,
                f"has a value of magnitude above {MAX_MAGNITUDE:g}; expected values whose "
                "squares and sums a float holds (1e308 overflowed to inf in the metrics)",
            )

    def ints(self, key: str, shape: tuple[int, ...], low: int, high: int | None) -> None:
        a = self.arrays[key]
        if a.dtype.kind not in "iu":
            raise self.fail(key, f"has dtype {a.dtype}, expected an integer dtype")
        if a.shape != shape:
            raise self.fail(key, f"has shape {a.shape}, expected {shape}")
        if a.size and (int(a.min()) < low or (high is not None and int(a.max()) >= high)):
            raise self.fail(
                key, f"has a value outside [{low}, {high if high is not None else 'inf'})"
            )

    def strings(self, key: str, shape: tuple[int, ...], *, unique: bool = False) -> None:
        a = self.arrays[key]
        if a.dtype.kind != "U":
            raise self.fail(key, f"has dtype {a.dtype}, expected str")
        if a.shape != shape:
            raise self.fail(key, f"has shape {a.shape}, expected {shape}")
        if unique:
            # Reports are keyed by name: a repeated name silently dropped a target or class.
            seen: set[str] = set()
            for i, name in enumerate(a.tolist()):
                if name in seen:
                    raise self.fail(
                        key, f"repeats the name {name!r} (at {i}); expected unique names"
                    )
                seen.add(name)

    def names(self, key: str, letter: str) -> npt.NDArray[Any]:
        """A section's unique names, ``[K]`` with ``K >= 1`` (``letter``: K or L)."""
        names = self.arrays[key]
        if names.ndim != 1 or names.size == 0:
            raise self.fail(key, f"has shape {names.shape}, expected [{letter}] with {letter} >= 1")
        self.strings(key, names.shape, unique=True)
        return names


def _check_regression(c: _Checker) -> None:
    k = c.names("reg_names", "K").size
    pred = c.arrays["reg_pred"]
    if pred.ndim != 2 or pred.shape[1] != k:
        raise c.fail("reg_pred", f"has shape {pred.shape}, expected [N, {k}]")
    c.floats("reg_pred", pred.shape)
    c.floats("reg_true", pred.shape, nan_ok=True)
    c.floats("reg_train_sd", (k,))
    if "reg_train_mean" in c.arrays:
        c.floats("reg_train_mean", (k,))


def _check_classification(c: _Checker) -> None:
    n_classes = c.names("cls_names", "L").size
    m = c.arrays["cls_true"].shape
    if len(m) != 1:
        raise c.fail("cls_true", f"has shape {m}, expected [M]")
    c.ints("cls_true", m, 0, n_classes)
    c.ints("cls_pred", m, 0, n_classes)
    if "cls_group" in c.arrays:
        c.strings("cls_group", m)


def _check_events(c: _Checker) -> None:
    for key, clip_key in (("ev_ref", "ev_ref_clip"), ("ev_pred", "ev_pred_clip")):
        ev = c.arrays[key]
        if ev.ndim != 2 or ev.shape[1] != 2:
            raise c.fail(key, f"has shape {ev.shape}, expected [E, 2] (start, end)")
        c.floats(key, ev.shape)
        if bool(np.any(ev[:, 1] <= ev[:, 0])):
            i = int(np.argmax(ev[:, 1] <= ev[:, 0]))
            raise c.fail(key, f"has event {i} with end <= start, expected end > start")
        c.ints(clip_key, (ev.shape[0],), 0, None)
    ft = c.arrays["frame_true"]
    if ft.ndim != 1:
        raise c.fail("frame_true", f"has shape {ft.shape}, expected [F]")
    if not bool(np.all((ft == 0) | (ft == 1))):
        raise c.fail("frame_true", "has a value other than 0 or 1")
    c.floats("frame_prob", ft.shape)
    fp = c.arrays["frame_prob"]
    if fp.size and (float(fp.min()) < 0 or float(fp.max()) > 1):
        raise c.fail("frame_prob", "has a value outside [0, 1]")
    for key, rows in (("ev_ref_class", "ev_ref"), ("ev_oracle_class", "ev_ref"),
                      ("ev_pred_class", "ev_pred")):  # fmt: skip
        if key in c.arrays:
            c.ints(key, (c.arrays[rows].shape[0],), 0, None)


def _check_human(c: _Checker) -> None:
    h = c.arrays["hb_score"].shape
    if len(h) != 1:
        raise c.fail("hb_score", f"has shape {h}, expected [H]")
    c.floats("hb_score", h)
    for key in ("hb_bench", "hb_prompt", "hb_clip"):
        c.strings(key, h)
    c.ints("hb_label", h, 0, 2)
    if ("hb_cut" in c.arrays) != ("hb_cut_names" in c.arrays):
        raise c.fail("hb_cut", "and hb_cut_names go together")
    if "hb_cut" in c.arrays:
        names = c.arrays["hb_cut_names"]
        if names.ndim != 1:
            raise c.fail("hb_cut_names", f"has shape {names.shape}, expected [C]")
        c.strings("hb_cut_names", names.shape)
        if "all" in names.tolist() or len(set(names.tolist())) != names.size:
            raise c.fail("hb_cut_names", "repeats a name or uses 'all' (the uncut rows)")
        cut = c.arrays["hb_cut"]
        if cut.dtype != np.bool_ or cut.shape != (h[0], names.size):
            raise c.fail(
                "hb_cut",
                f"has dtype {cut.dtype} and shape {cut.shape}, expected bool "
                f"({h[0]}, {names.size})",
            )
    if "hb_dimension" in c.arrays:
        c.strings("hb_dimension", h)


def _check_speakers(c: _Checker, suffix: str) -> None:
    """One speaker-vector set (``suffix``: ``""`` or ``__<name>``), when any of its keys is
    given: all three keys, ``[S, V]`` vectors alike, a bool validity that marks no zero
    vector valid."""
    pk, rk, vk = (f"spk_{part}{suffix}" for part in ("pred", "ref", "valid"))
    if not any(k in c.arrays for k in (pk, rk, vk)):
        return
    for key in (pk, rk, vk):
        if key not in c.arrays:
            raise c.fail(key, "is missing (required by the speaker-vector section)")
    sp = c.arrays[pk]
    if sp.ndim != 2:
        raise c.fail(pk, f"has shape {sp.shape}, expected [S, V]")
    c.floats(pk, sp.shape)
    c.floats(rk, sp.shape)
    valid = c.arrays[vk]
    if valid.dtype != np.bool_ or valid.shape != (sp.shape[0],):
        raise c.fail(
            vk,
            f"has dtype {valid.dtype} and shape {valid.shape}, expected bool ({sp.shape[0]},)",
        )
    zero = (np.linalg.norm(sp, axis=1) == 0) | (np.linalg.norm(c.arrays[rk], axis=1) == 0)
    if bool(np.any(zero & valid)):
        raise c.fail(
            vk,
            f"marks item {int(np.argmax(zero & valid))} valid, but one "
            "of its vectors is zero (expected it marked invalid)",
        )


_HUMAN = "human-benchmark section (hb_bench, hb_score, ...)"
_EVENTS = "event section (ev_ref, ev_pred, ...)"
#: Optional keys that need their section: (key, section, what the error line names).
OPTIONAL_NEEDS = (
    ("hb_cut_names", "human", _HUMAN),
    ("hb_cut", "human", _HUMAN),
    ("hb_dimension", "human", _HUMAN),
    ("ev_ref_class", "events", _EVENTS),
    ("ev_pred_class", "events", _EVENTS),
    ("ev_oracle_class", "events", _EVENTS),
)
#: Each section's checks, in the order they run.
SECTION_CHECKS = {
    "regression": _check_regression,
    "classification": _check_classification,
    "events": _check_events,
    "human": _check_human,
}

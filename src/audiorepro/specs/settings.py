"""Preprocessing settings: every decision between the audio file and the model, named.

Two pipelines that load identical weights can still disagree because of how the audio reaches
the model. Each such decision is one field of :class:`Preprocessing`, recorded in every dump
and compared by ``audiorepro identity``:

``truncation``       ``fusion`` (fused checkpoints: a mel of the whole clip shrunk to 10 s
                     plus three random 10 s crops) or ``rand_trunc`` (one random 10 s crop).
``padding``          how a clip shorter than 10 s is filled: ``repeatpad`` (repeat whole
                     copies, then zeros), ``repeat`` or ``pad``.
``int16_roundtrip``  quantize the waveform to int16 and back first, as laion-clap's
                     ``get_audio_embedding_from_data`` does unless ``use_tensor=True``.
``frequency_min``,   the mel filter bank's band in Hz. laion-clap's configs use 50-14000;
``frequency_max``    Hugging Face's ``ClapFeatureExtractor`` defaults to 0 (the checkpoint's
                     ``preprocessor_config.json`` may say otherwise).
``is_longer``        the fusion flag of each clip: ``length`` (longer than 10 s, as laion-clap
                     computes it) or ``extractor`` (as Hugging Face's extractor returns it:
                     when no clip of a batch is longer, it marks one random clip as longer).
``seed``             seeds Python's, NumPy's and torch's generators at the start of every
                     batch, so random crops and choices repeat exactly.
``batch_size``       clips (or captions) per forward pass; shards split on batch boundaries.
===================  ===============================================================

``None`` means "the library's or checkpoint's own value"; a loaded pipeline reports the value
it actually used (:meth:`Preprocessing.resolved`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.specs.schema import NOT_FINITE

TRUNCATIONS = ("fusion", "rand_trunc")
PADDINGS = ("repeatpad", "repeat", "pad")
IS_LONGER = ("length", "extractor")
#: The settings that the identity diagnosis tries to align, in the order it tries them.
SWITCHES = (
    "frequency_min",
    "frequency_max",
    "is_longer",
    "int16_roundtrip",
    "truncation",
    "padding",
)


@dataclass(frozen=True)
class Preprocessing:
    truncation: str | None = None
    padding: str | None = None
    int16_roundtrip: bool | None = None
    frequency_min: float | None = None
    frequency_max: float | None = None
    is_longer: str | None = None
    seed: int = 0
    batch_size: int = 8
    max_samples: int = 480_000

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def resolved(self, defaults: Preprocessing) -> Preprocessing:
        """Fill every ``None`` from ``defaults``."""
        values = {
            f.name: getattr(defaults, f.name)
            if getattr(self, f.name) is None
            else getattr(self, f.name)
            for f in fields(self)
        }
        return Preprocessing(**values)

    def with_overrides(self, overrides: dict[str, Any]) -> Preprocessing:
        return replace(self, **overrides)


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _choice(options: tuple[str, ...]) -> Any:
    def parse(value: str) -> str:
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value

    return parse


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError("expected an integer >= 1")
    return number


def _frequency(value: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(NOT_FINITE)
    if not 0 <= number < 1e6:
        raise ValueError("expected a frequency in Hz >= 0")
    return number


_PARSERS: dict[str, Any] = {
    "truncation": _choice(TRUNCATIONS),
    "padding": _choice(PADDINGS),
    "int16_roundtrip": parse_bool,
    "frequency_min": _frequency,
    "frequency_max": _frequency,
    "is_longer": _choice(IS_LONGER),
    "seed": int,
    "batch_size": _positive_int,
    "max_samples": _positive_int,
}


#: Model-constructor arguments a study's ``extract.settings`` may hold beside preprocessing
#: settings (a ``laion:`` path spec has no registry entry to give them).
#: A setting's value as a study or ``--set`` gives it, parsed (:func:`parse_value`).
SettingValue = str | int | float | bool
#: A cell's settings by key: preprocessing and architecture (``enable_fusion``, ...).
Settings = dict[str, SettingValue]

ARCHITECTURE_KEYS = ("enable_fusion", "amodel", "tmodel")


def parse_architecture(key: str, value: Any, *, source: str) -> Any:
    """Validate one architecture setting: ``enable_fusion`` a bool, the towers strings."""
    if key == "enable_fusion":
        if isinstance(value, bool):
            return value
        try:
            return parse_bool(str(value))
        except ValueError as exc:
            raise UserError(f"{value!r} is not valid: {exc}", source=source, key=key) from None
    if not isinstance(value, str) or not value:
        raise UserError(f"is {value!r}; expected a model name (a string)", source=source, key=key)
    return value


def parse_value(key: str, value: Any, *, source: str) -> Any:
    """Validate one setting (a string from the command line or a TOML value)."""
    if key not in _PARSERS:
        raise UserError(
            f"unknown preprocessing setting; expected one of {', '.join(sorted(_PARSERS))}",
            source=source,
            key=key,
        )
    try:
        if isinstance(value, bool) and key == "int16_roundtrip":
            return value
        return _PARSERS[key](str(value))
    except ValueError as exc:
        raise UserError(f"{value!r} is not valid: {exc}", source=source, key=key) from None


def check_settings(settings: Mapping[str, Any], *, source: str) -> None:
    """Every entry of a study's ``settings`` table checked as the architecture or preprocessing
    setting it names (one line naming ``source`` and the key when it is not one); every kind
    whose cells name a model reads its table this way."""
    for key, value in settings.items():
        parse = parse_architecture if key in ARCHITECTURE_KEYS else parse_value
        parse(key, value, source=source)


def parse_overrides(items: tuple[str, ...] | list[str], *, source: str) -> dict[str, Any]:
    """``KEY=VALUE`` strings (``--a-set frequency_min=0``) to validated settings.

    >>> parse_overrides(["frequency_min=0", "int16_roundtrip=no"], source="--a-set")
    {'frequency_min': 0.0, 'int16_roundtrip': False}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"{item!r} is not KEY=VALUE", source=source)
        out[key.strip()] = parse_value(key.strip(), value.strip(), source=source)
    return out


def preprocessing_from_table(table: dict[str, Any], *, source: str) -> Preprocessing:
    values = {key: parse_value(key, value, source=source) for key, value in table.items()}
    return Preprocessing(**values)


def differing(a: Preprocessing, b: Preprocessing) -> list[str]:
    """The switch names whose values differ, in :data:`SWITCHES` order."""
    return [name for name in SWITCHES if getattr(a, name) != getattr(b, name)]

"""The one interface every audio encoder implements, and what the kit checks of its answers.

An encoder is any object with these members (a :class:`typing.Protocol`: structural, no base
class to inherit)::

    class Encoder(Protocol):
        name: str            # shown in reports and recorded in every dump
        sample_rate: int     # Hz; the kit resamples to it with its own recorded code, and audio
                             # already at this rate reaches the encoder sample for sample
        def embed_audio(self, waveforms: Sequence[np.ndarray]) -> np.ndarray: ...
            # mono float32 clips in (any lengths), [n, d] float32 out, one row per clip
        def weight_files(self) -> Sequence[Path]: ...
            # the files whose bytes decide the embeddings: hashed (SHA-256) for the
            # extraction cache's key, the dump's record and `identity`

and optionally ``embed_text(texts: Sequence[str]) -> np.ndarray`` ([m, d] float32): the text
tower that retrieval and zero-shot classification need (:func:`has_text_tower`). An encoder
without it is audio-only: ``extract`` without ``--captions`` writes an audio-only dump, and
retrieval or zero-shot is refused in one line (:func:`require_text_tower`).

The kit calls ``embed_audio`` with one batch at a time (``batch_size`` clips, each batch
preceded by seeding Python's, NumPy's and torch's generators from the run's seed and the
batch's first clip), and takes the answer as it is: a float32 array of ``[len(batch), d]``,
every value finite, ``d`` the same in every batch. Anything else is refused in one line
(:func:`check_embeddings`), never cast or normalized behind the user's back: a dump holds
exactly what the encoder returned. The two CLAP pipelines
(:mod:`audiorepro.models.pipelines`), a user's ``py:`` module and a HEAR 2021 module
(:mod:`audiorepro.models.user_encoders`) are all implementations of this one interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError

Array = npt.NDArray[np.float32]


@runtime_checkable
class Encoder(Protocol):
    """An audio encoder (module docstring). ``embed_text`` is optional: see :class:`TextEncoder`."""

    @property
    def name(self) -> str:
        """Shown in reports and recorded in every dump."""

    @property
    def sample_rate(self) -> int:
        """The rate (Hz) the waveforms given to :meth:`embed_audio` are at."""

    def embed_audio(self, waveforms: Sequence[Array]) -> Array:
        """Mono float32 clips in, ``[n, d]`` float32 out (row ``i`` is clip ``i``)."""

    def weight_files(self) -> Sequence[Path]:
        """The files whose bytes decide the embeddings (hashed for identity and the cache)."""


@runtime_checkable
class TextEncoder(Encoder, Protocol):
    """An encoder with a text tower: retrieval and zero-shot classification need one."""

    def embed_text(self, texts: Sequence[str]) -> Array:
        """Texts in, ``[m, d]`` float32 out, in the audio embeddings' space."""


def has_text_tower(encoder: object) -> bool:
    """Does ``encoder`` embed text (a callable ``embed_text``)?

    >>> class A:
    ...     def embed_text(self, texts): ...
    >>> has_text_tower(A()), has_text_tower(object())
    (True, False)
    """
    return callable(getattr(encoder, "embed_text", None))


def no_text_tower(name: str, needed_by: str) -> UserError:
    """The one line for an audio-only encoder asked for text: the task that needs it, and the
    paths an audio-only encoder takes."""
    return UserError(
        f"has no text tower (no embed_text): {needed_by} needs text embeddings; an audio-only "
        "encoder takes every path that needs only audio (evaluate --task linear-probe, "
        "linear-probe and speaker-verification studies, extract without --captions, identity)",
        key=name,
    )


def require_text_tower(encoder: object, name: str, *, needed_by: str) -> None:
    """One line when ``needed_by`` (retrieval, zero-shot, captions) asks an audio-only encoder
    for text embeddings."""
    if not has_text_tower(encoder):
        raise no_text_tower(name, needed_by)


def _member_problem(encoder: object) -> str | None:
    name = getattr(encoder, "name", None)
    if not isinstance(name, str) or not name:
        return "has no name (a non-empty str attribute)"
    rate = getattr(encoder, "sample_rate", None)
    if isinstance(rate, bool) or not isinstance(rate, int) or not 0 < rate <= 768_000:
        return f"sample_rate is {rate!r}; expected an int in Hz (1 .. 768000)"
    for method in ("embed_audio", "weight_files"):
        if not callable(getattr(encoder, method, None)):
            return f"has no {method}() method"
    text = getattr(encoder, "embed_text", None)
    if text is not None and not callable(text):
        return "embed_text is not a method"
    return None


def check_encoder(encoder: object, *, spec: str) -> Encoder:
    """``encoder`` has every member of :class:`Encoder` (name, sample_rate, embed_audio,
    weight_files; embed_text callable where present), or one line naming the first missing.

    >>> class Tiny:
    ...     name, sample_rate = "tiny", 16000
    ...     def embed_audio(self, waveforms): ...
    ...     def weight_files(self): return []
    >>> check_encoder(Tiny(), spec="py:tiny:make").name
    'tiny'
    """
    problem = _member_problem(encoder)
    if problem is not None:
        raise UserError(
            f"the encoder ({type(encoder).__name__}) {problem}: an Encoder has name, "
            "sample_rate, embed_audio(waveforms) and weight_files() (docs/models.md)",
            key=spec,
        )
    assert isinstance(encoder, Encoder)
    return encoder


def weight_paths(encoder: Encoder, *, spec: str) -> tuple[Path, ...]:
    """``encoder.weight_files()`` as paths to regular files, or one line naming the first
    that is not one."""
    try:
        files = list(encoder.weight_files())
    except TypeError:
        raise UserError("weight_files() does not return a sequence of paths", key=spec) from None
    except SystemExit as exc:
        raise UserError(f"weight_files() called sys.exit({exc.code!r})", key=spec) from None
    except Exception as exc:  # the user's code: one line, as every call into it
        raise UserError(f"weight_files() failed: {type(exc).__name__}: {exc}", key=spec) from None
    out = []
    for item in files:
        if not isinstance(item, (str, Path)):
            raise UserError(f"weight_files() gave {item!r}; expected paths", key=spec)
        path = Path(item)
        if not path.is_file():
            raise UserError(
                "a file weight_files() names is not a regular file", source=path, key=spec
            )
        out.append(path)
    names = [p.name for p in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(
            f"weight_files() names two files called {twice[0]!r}; expected distinct names "
            "(they key the recorded hashes)",
            key=spec,
        )
    return tuple(out)


def check_embeddings(out: Any, n: int, *, what: str, spec: str, dim: int | None = None) -> Array:
    """An encoder's answer for ``n`` inputs: a float32 ndarray ``[n, d]`` of finite values
    (``d == dim`` when given), returned as it is; anything else is one line.

    >>> check_embeddings(np.zeros((2, 3), np.float32), 2, what="embed_audio", spec="s").shape
    (2, 3)
    >>> check_embeddings(np.zeros((2, 3)), 2, what="embed_audio", spec="s")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    audiorepro.core.errors.UserError: 's': embed_audio returned float64; expected float32 ...
    """
    if not isinstance(out, np.ndarray):
        raise UserError(
            f"{what} returned {type(out).__name__}; expected a numpy float32 array [n, d]",
            key=spec,
        )
    if out.dtype != np.float32:
        raise UserError(
            f"{what} returned {out.dtype}; expected float32 (the kit never casts an "
            "encoder's output)",
            key=spec,
        )
    if out.ndim != 2 or out.shape[0] != n or out.shape[1] < 1:
        raise UserError(
            f"{what} returned shape {tuple(out.shape)} for {n} inputs; expected [{n}, d]",
            key=spec,
        )
    if dim is not None and out.shape[1] != dim:
        raise UserError(
            f"{what} returned {out.shape[1]} dimensions, an earlier batch {dim}; expected "
            "the same d for every input",
            key=spec,
        )
    if not np.all(np.isfinite(out)):
        raise UserError(f"{what} returned NaN or infinite values", key=spec)
    return out

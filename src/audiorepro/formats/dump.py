"""The embedding dump format (``.npz``) and its validation.

A dump holds the embeddings of one model on one dataset:

=====================  ==========================  =========================================
key                    dtype / shape               meaning
=====================  ==========================  =========================================
``audio_embeds``       float32 or float64 [N, D]   one row per clip
``text_embeds``        same dtype [M, D]           one row per text (caption, class prompt)
``text_to_audio``      integer [M]                 caption ``i`` describes clip
                                                   ``text_to_audio[i]`` (format version 1)
``relevance_indptr``   integer [N+1]               CSR over clips (format version 2, instead
                                                   of ``text_to_audio``): the text rows
``relevance_indices``  integer [nnz]               relevant to clip ``i`` are
                                                   ``relevance_indices[relevance_indptr[i]:
                                                   relevance_indptr[i+1]]``
``relevance_gains``    integer [nnz] (optional)    with the relevance keys only: graded
                                                   relevance, the gain (>= 0) of each entry
                                                   (float64 when declared, next row)
``relevance_gains_kind`` str scalar (optional)     ``"float"``: the gains are float64
                                                   (``"integer"``, the default: integers)
``format_version``     integer scalar (optional)   1 or 2; when given, must match the keys
``audio_ids``          str [N] (optional)          clip identifiers, e.g. file names
``captions``           str [M] (optional)          the texts
``meta_json``          str scalar (optional)       JSON object: model, revision, dataset, ...
=====================  ==========================  =========================================

Format versions
---------------
- **Version 1** (every dump before relevance existed): ``text_to_audio`` maps each caption to
  exactly one clip; a clip may have any number of captions (at least one). Its meaning is
  unchanged, and such files are read and written byte for byte as before (they carry no
  ``format_version`` key; their version is derived from their keys).
- **Version 2**: a general audio-text relevance given as CSR over clips, for example class
  prompts relevant to every clip of their class (zero-shot classification). Exactly one of
  ``text_to_audio`` and the two relevance keys is given. Every clip is relevant to at least one
  text, every text row to at least one clip, indices are in ``[0, M)`` and not repeated within
  a clip. :func:`save_dump` writes ``format_version = 2`` into such files, so that they say
  what they are; a version-1 reader refuses them (unknown keys) rather than misreading them.

**Graded relevance** (optional, version 2 only): ``relevance_gains`` gives an integer gain
>= 0 per entry of ``relevance_indices`` (at most 2**53). nDCG uses the gains; every other
measure counts an entry as relevant when its gain is > 0, so an entry of gain 0 is judged not
relevant (the emptiness rules above apply to the entries of gain > 0). A dump without it is
read and written exactly as before. **Float gains** are declared: ``relevance_gains`` of dtype
float64 (finite, >= 0, at most 2**53) together with ``relevance_gains_kind = "float"``; a
float array without the declaration, the declaration with integer gains, or float16/float32
gains are refused. Every float64 is a dyadic rational, so the engine stays exact (the gains
enter its sums exactly, as integers do); an integer dump is read and written as before.

Either way :attr:`Dump.relevance` gives the (binary) relevance as CSR over clips, indices ascending
within a clip (for a version-1 dump derived from ``text_to_audio``), so that every metric has
one code path. Files are read with ``allow_pickle=False``: an object array is refused, never
unpickled.

>>> import numpy as np
>>> d = make_dump(np.eye(3), np.eye(3)[[0, 1, 2, 2]], None,
...               relevance_indptr=[0, 2, 3, 4], relevance_indices=[3, 0, 1, 2])
>>> d.format_version, d.relevance.indices.tolist(), d.relevance.texts_per_clip.tolist()
(2, [0, 3, 1, 2], [2, 1, 1])
>>> d.relevance.transpose().indices.tolist()  # clips relevant to each text row
[0, 1, 2, 0]
"""

from __future__ import annotations

import json
import math
import tokenize
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from audiorepro.core.errors import UserError, param_error
from audiorepro.core.hashing import check_regular_file, sha256_file
from audiorepro.core.io import atomic_write_bytes, npz_bytes, parse_json

NOT_FINITE_JSON = "expected a finite number (nan and inf are refused)"
REQUIRED_KEYS = ("audio_embeds", "text_embeds", "text_to_audio")
#: Given instead of ``text_to_audio`` (format version 2).
RELEVANCE_KEYS = ("relevance_indptr", "relevance_indices")
#: Optional with the relevance keys: an integer gain per relevance entry (graded relevance).
GAINS_KEY = "relevance_gains"
#: Optional with the gains: ``"float"`` declares float64 gains (``"integer"``: the default).
GAINS_KIND_KEY = "relevance_gains_kind"
GAIN_KINDS = ("integer", "float")
OPTIONAL_KEYS = ("audio_ids", "captions", "meta_json", "format_version", GAINS_KEY, GAINS_KIND_KEY)
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: The newest format version (see the module docstring); 1 is ``text_to_audio``.
FORMAT_VERSION = 2
#: What the metrics do with a query that has no relevant item (a clip without a text, a text
#: relevant to no clip): ``skip`` leaves it out of every mean (trec_eval, for a query absent
#: from the qrels), ``zero`` counts it as 0 (scikit-learn-style averaging). Without a policy
#: (None, the default) such a dump is refused, as it always was.
EmptyPolicy = Literal["skip", "zero"]
EMPTY_POLICIES: tuple[EmptyPolicy, ...] = ("skip", "zero")
#: Appended to the refusal of a query without a relevant item: the option that accepts it.
EMPTY_HINT = (
    "(--empty-queries skip|zero, or a study's empty_queries, accepts queries without a "
    "relevant item)"
)


@dataclass(frozen=True)
class Relevance:
    """Audio-text relevance as CSR over clips: the texts relevant to clip ``i`` are
    ``indices[indptr[i]:indptr[i+1]]``, ascending. Arrays are read-only int64.

    >>> r = Relevance.from_text_to_audio(np.array([1, 0, 1]), n_clips=2)
    >>> r.indptr.tolist(), r.indices.tolist(), r.clips_per_text.tolist()
    ([0, 1, 3], [1, 0, 2], [1, 1, 1])
    """

    indptr: npt.NDArray[np.int64]
    indices: npt.NDArray[np.int64]
    n_texts: int

    @classmethod
    def from_text_to_audio(cls, text_to_audio: npt.NDArray[Any], *, n_clips: int) -> Relevance:
        """The CSR of a version-1 dump: each clip's captions in caption-index order."""
        t2a = np.asarray(text_to_audio, dtype=np.int64)
        indptr = np.zeros(n_clips + 1, np.int64)
        np.cumsum(np.bincount(t2a, minlength=n_clips), out=indptr[1:])
        indices = np.argsort(t2a, kind="stable").astype(np.int64)
        return cls._frozen(indptr, indices, int(t2a.shape[0]))

    @classmethod
    def _frozen(cls, indptr: npt.NDArray[Any], indices: npt.NDArray[Any], m: int) -> Relevance:
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        indptr.setflags(write=False)
        indices.setflags(write=False)
        return cls(indptr=indptr, indices=indices, n_texts=m)

    @property
    def n_clips(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def texts_per_clip(self) -> npt.NDArray[np.int64]:
        return np.diff(self.indptr)

    @property
    def clips_per_text(self) -> npt.NDArray[np.int64]:
        return np.bincount(self.indices, minlength=self.n_texts).astype(np.int64)

    def clip_of_each_entry(self) -> npt.NDArray[np.int64]:
        """The clip (CSR row) of each entry of :attr:`indices`."""
        return np.repeat(np.arange(self.n_clips, dtype=np.int64), self.texts_per_clip)

    def transpose(self) -> Relevance:
        """The same relevance as CSR over texts: the clips relevant to each text, ascending
        (``n_texts`` of the result is the number of clips)."""
        order = np.argsort(self.indices, kind="stable")  # rows ascend within each text
        indptr = np.zeros(self.n_texts + 1, np.int64)
        np.cumsum(self.clips_per_text, out=indptr[1:])
        return Relevance._frozen(indptr, self.clip_of_each_entry()[order], self.n_clips)

    def one_clip_per_text(self) -> npt.NDArray[np.int64] | None:
        """``text_to_audio`` when every text is relevant to exactly one clip, else None."""
        if not bool(np.all(self.clips_per_text == 1)):
            return None
        t2a = np.empty(self.n_texts, np.int64)
        t2a[self.indices] = self.clip_of_each_entry()
        return t2a


#: Embeddings, one row per clip or text: float32 or float64 ``[N, D]``.
Embeddings = npt.NDArray[np.floating[Any]]


class GainLevels(TypedDict):
    """A graded dump's gains as an auditor reads them (:meth:`Dump.gain_levels`)."""

    #: ``integer`` or ``float`` (declared, ``relevance_gains_kind``)
    kind: str
    #: gain (as text: an integer, or a float's repr) -> number of relevance entries
    levels: dict[str, int]


@dataclass(frozen=True)
class Dump:
    """A validated embedding dump. Arrays are read-only."""

    audio_embeds: Embeddings
    text_embeds: Embeddings
    #: Version 1: the clip of each caption. None for a version-2 (relevance) dump.
    text_to_audio: npt.NDArray[np.int64] | None
    audio_ids: tuple[str, ...] | None = None
    captions: tuple[str, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"
    sha256: str | None = None
    #: Version 2: the relevance as given (validated, indices ascending within each clip).
    relevance_csr: Relevance | None = None
    #: The policy under which queries without a relevant item were accepted (:data:`EmptyPolicy`);
    #: None: the dump has none (they are refused without a policy). Not stored in the file.
    empty_queries: EmptyPolicy | None = None
    #: Graded relevance (``relevance_gains``): the gain of each entry of :attr:`relevance_csr`
    #: (int64 >= 0, or float64 >= 0 when declared, aligned with its indices); None: binary.
    gains: npt.NDArray[Any] | None = None

    @property
    def format_version(self) -> int:
        """1 for a ``text_to_audio`` dump, 2 for a relevance dump."""
        return 1 if self.text_to_audio is not None else 2

    @cached_property
    def relevance(self) -> Relevance:
        """The relevance as CSR over clips, for either format version (one code path)."""
        if self.relevance_csr is not None:
            if self.gains is None:
                return self.relevance_csr
            # Binary relevance of a graded dump: the entries with a gain > 0.
            keep = self.gains > 0
            csr = self.relevance_csr
            clip = csr.clip_of_each_entry()[keep]
            indptr = np.zeros(self.n_clips + 1, np.int64)
            np.cumsum(np.bincount(clip, minlength=self.n_clips), out=indptr[1:])
            return Relevance._frozen(indptr, csr.indices[keep], csr.n_texts)
        assert self.text_to_audio is not None  # guaranteed by validation
        return Relevance.from_text_to_audio(self.text_to_audio, n_clips=self.n_clips)

    def gain_levels(self) -> GainLevels | None:
        """What the graded relevance holds, for an auditor: the gains' kind and how many
        relevance entries have each gain (0 included: judged, not relevant); None if binary.

        >>> d = make_dump(np.eye(2), np.eye(2), relevance_indptr=[0, 2, 2],
        ...               relevance_indices=[0, 1], relevance_gains=[2, 0], empty_queries="skip")
        >>> d.gain_levels()
        {'kind': 'integer', 'levels': {'0': 1, '2': 1}}
        """
        if self.gains is None:
            return None
        floats = self.gains.dtype.kind == "f"
        values, counts = np.unique(self.gains, return_counts=True)
        levels = {
            (repr(float(v)) if floats else str(int(v))): int(c)
            for v, c in zip(values.tolist(), counts.tolist(), strict=True)
        }
        return {"kind": "float" if floats else "integer", "levels": levels}

    @cached_property
    def relevance_gains(self) -> npt.NDArray[Any] | None:
        """The gains (all > 0) of :attr:`relevance`'s entries, aligned; None if binary."""
        if self.gains is None:
            return None
        out = np.ascontiguousarray(self.gains[self.gains > 0])
        out.setflags(write=False)
        return out

    @property
    def n_clips(self) -> int:
        return int(self.audio_embeds.shape[0])

    @property
    def n_captions(self) -> int:
        return int(self.text_embeds.shape[0])

    @property
    def captions_per_clip(self) -> int | None:
        """The number of texts relevant to every clip, or None when it varies."""
        counts = self.relevance.texts_per_clip
        return int(counts[0]) if bool(np.all(counts == counts[0])) else None

    @property
    def multi_positive(self) -> bool:
        """True when some query has several relevant items: a clip with more than one text
        (a2t), or (version 2 only) a text relevant to more than one clip (t2a)."""
        rel = self.relevance
        return bool(rel.texts_per_clip.max() > 1 or rel.clips_per_text.max() > 1)


#: A member that inflates more than this many times its stored size is refused before it is
#: read: numbers (embeddings, indices) compress little, a zip bomb about a thousandfold.
MAX_INFLATION = 100
#: The same for string members (ids, captions): numpy stores them as fixed-width UTF-32, whose
#: zero bytes and padding compress far better than numbers.
MAX_INFLATION_STRINGS = 1000
#: Members smaller than this are never refused for their inflation (a short caption list or a
#: metadata string may compress well).
INFLATION_FLOOR = 1 << 20


def inspect_npz(path: Path, *, source: str) -> None:
    """Check an archive before any array is read, from its directory and each member's .npy
    header only (bounded memory, whatever the file declares): each member once, a
    well-formed header, no member that inflates beyond :data:`MAX_INFLATION` (strings
    :data:`MAX_INFLATION_STRINGS`), and a declared shape
    and dtype whose size is the member's size."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            seen: set[str] = set()
            for info in infos:
                key = info.filename.removesuffix(".npy")
                if info.filename in seen:
                    raise UserError(
                        "is in the archive twice; expected each array once (which one would "
                        "be read is up to the reader)",
                        source=source,
                        key=key,
                    )
                seen.add(info.filename)
                _check_member(zf, info, source=source, key=key)
    except zipfile.BadZipFile as exc:
        raise UserError(f"is not a readable .npz archive ({exc})", source=source) from None
    except (OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise UserError(f"cannot be read ({exc})", source=source) from None


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, *, source: str, key: str) -> None:
    fmt: Any = np.lib.format
    with zf.open(info) as member:
        try:
            version = fmt.read_magic(member)
            read_header = (
                fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            )
            shape, _, dtype = read_header(member, max_header_size=1 << 16)
        except (
            ValueError,
            SyntaxError,
            TypeError,
            OverflowError,
            MemoryError,
            RecursionError,
            tokenize.TokenError,  # a header cut inside its dict (numpy tokenizes it)
        ) as exc:
            raise UserError(
                f"has a malformed .npy header ({str(exc)[:200]})", source=source, key=key
            ) from None
        header = member.tell()
    limit = MAX_INFLATION_STRINGS if dtype.kind in "US" else MAX_INFLATION
    if info.file_size > INFLATION_FLOOR and info.file_size > limit * max(info.compress_size, 1):
        raise UserError(
            f"inflates {info.compress_size} stored bytes to {info.file_size} "
            f"(more than {limit} times); refused before reading",
            source=source,
            key=key,
        )
    if dtype.hasobject:
        return  # refused when read (never unpickled), with its own message
    declared = math.prod(shape) * dtype.itemsize
    if declared != info.file_size - header:
        raise UserError(
            f"declares shape {shape} of {dtype} ({declared} bytes), but holds "
            f"{info.file_size - header} bytes of data",
            source=source,
            key=key,
        )


def read_npz(path: Path, *, what: str) -> dict[str, npt.NDArray[Any]]:
    r"""Every array of an .npz file, never unpickling; problems are :class:`UserError`\s.

    The file type is checked before it is opened (a FIFO would block, a folder is not a
    dump), and the archive is inspected (:func:`inspect_npz`) before any array is read."""
    name = str(path)
    check_regular_file(path, what=what)
    with open(path, "rb") as f:
        if f.read(6) == b"\x93NUMPY":  # refused before np.load allocates what it declares
            raise UserError("is a single .npy array, expected an .npz archive", source=name)
    inspect_npz(path, source=name)
    try:
        loaded = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UserError(f"is not a readable .npz archive ({exc})", source=name) from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise UserError("is a single .npy array, expected an .npz archive", source=name)
    arrays = {}
    with loaded as npz:
        for key in npz.files:
            try:
                arrays[key] = npz[key]
            except ValueError as exc:
                if "allow_pickle" in str(exc):
                    raise UserError(
                        "holds a pickled object array, which is never loaded "
                        "(expected numeric or string arrays)",
                        source=name,
                        key=key,
                    ) from None
                raise UserError(f"cannot be read ({exc})", source=name, key=key) from None
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise UserError(f"cannot be read ({exc})", source=name, key=key) from None
    return arrays


def make_dump(
    audio_embeds: npt.ArrayLike,
    text_embeds: npt.ArrayLike,
    text_to_audio: npt.ArrayLike | None = None,
    *,
    relevance_indptr: npt.ArrayLike | None = None,
    relevance_indices: npt.ArrayLike | None = None,
    relevance_gains: npt.ArrayLike | None = None,
    relevance_gains_kind: str | None = None,
    audio_ids: npt.ArrayLike | None = None,
    captions: npt.ArrayLike | None = None,
    meta: dict[str, Any] | None = None,
    source: str = "<memory>",
    sha256: str | None = None,
    empty_queries: EmptyPolicy | None = None,
) -> Dump:
    """Validate arrays and build a :class:`Dump` (the same checks as for a file).

    Give either ``text_to_audio`` (version 1) or both ``relevance_indptr`` and
    ``relevance_indices`` (version 2), as in the file format. ``empty_queries``: accept
    queries without a relevant item under that policy (:data:`EmptyPolicy`)."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "audio_embeds": np.asarray(audio_embeds),
        "text_embeds": np.asarray(text_embeds),
    }
    for key, value in (
        ("text_to_audio", text_to_audio),
        ("relevance_indptr", relevance_indptr),
        ("relevance_indices", relevance_indices),
        (GAINS_KEY, relevance_gains),
        (GAINS_KIND_KEY, relevance_gains_kind),
    ):
        if value is not None:
            arrays[key] = np.asarray(value)
    if audio_ids is not None:
        arrays["audio_ids"] = np.asarray(audio_ids, dtype=str)
    if captions is not None:
        arrays["captions"] = np.asarray(captions, dtype=str)
    if meta is not None:
        arrays["meta_json"] = np.asarray(json.dumps(meta, sort_keys=True))
    return _validate(arrays, source=source, sha256=sha256, empty_queries=empty_queries)


def dump_from_arrays(
    arrays: dict[str, npt.NDArray[Any]], *, source: str, empty_queries: EmptyPolicy | None = None
) -> Dump:
    """Validate the arrays of a dump file (as read from it) and build a :class:`Dump`."""
    return _validate(arrays, source=source, sha256=None, empty_queries=empty_queries)


def load_dump(path: str | Path, *, empty_queries: EmptyPolicy | None = None) -> Dump:
    """Load and validate a dump file; any problem raises :class:`UserError` naming file and key.

    ``empty_queries``: accept queries without a relevant item under that policy (else refused)."""
    path = Path(path)
    arrays = read_npz(path, what="an .npz embedding dump")
    name = str(path)
    return _validate(
        arrays,
        source=path.name,
        sha256=sha256_file(path),
        path_for_errors=name,
        empty_queries=empty_queries,
    )


def _validate(
    arrays: dict[str, npt.NDArray[Any]],
    *,
    source: str,
    sha256: str | None,
    path_for_errors: str | None = None,
    empty_queries: EmptyPolicy | None = None,
) -> Dump:
    where = path_for_errors or source
    if empty_queries is not None and empty_queries not in EMPTY_POLICIES:
        raise param_error("empty_queries", "load_dump", "None, 'skip' or 'zero'", empty_queries)
    accept = empty_queries is not None

    def fail(key: str | None, msg: str) -> UserError:
        return UserError(msg, source=where, key=key)

    has_relevance = _check_keys(arrays, fail)
    audio, text = arrays["audio_embeds"], arrays["text_embeds"]
    _check_embeddings(audio, text, fail)
    n, m = audio.shape[0], text.shape[0]
    t2a64: npt.NDArray[np.int64] | None = None
    relevance: Relevance | None = None
    gains: npt.NDArray[Any] | None = None
    if GAINS_KEY in arrays and not has_relevance:
        raise fail(GAINS_KEY, "is given without relevance_indptr and relevance_indices")
    if GAINS_KIND_KEY in arrays and GAINS_KEY not in arrays:
        raise fail(GAINS_KIND_KEY, f"is given without {GAINS_KEY}")
    if has_relevance:
        relevance, gains = _relevance(
            arrays["relevance_indptr"],
            arrays["relevance_indices"],
            n,
            m,
            fail,
            accept=accept,
            gains=arrays.get(GAINS_KEY),
            kind=_gain_kind(arrays, fail),
        )
    else:
        t2a64 = _text_to_audio(arrays["text_to_audio"], n, m, fail, accept=accept)
    _check_format_version(arrays, bool(has_relevance), fail)
    audio_ids = _strings(arrays, "audio_ids", n, fail)
    captions = _strings(arrays, "captions", m, fail)
    meta = _meta(arrays, where, fail)

    audio = np.ascontiguousarray(audio)
    text = np.ascontiguousarray(text)
    for arr in (audio, text):
        arr.setflags(write=False)
    return Dump(
        audio_embeds=audio,
        text_embeds=text,
        text_to_audio=t2a64,
        audio_ids=audio_ids,
        captions=captions,
        meta=meta,
        source=source,
        sha256=sha256,
        relevance_csr=relevance,
        empty_queries=empty_queries,
        gains=gains,
    )


def _check_keys(arrays: dict[str, npt.NDArray[Any]], fail: Any) -> list[str]:
    """The keys present are a dump's: no unknown key, one relevance form; which relevance
    keys are given (none: ``text_to_audio``, format version 1)."""
    if not arrays:
        raise fail(None, "is empty (expected keys " + ", ".join(REQUIRED_KEYS) + ")")
    unknown = sorted(set(arrays) - set(REQUIRED_KEYS) - set(RELEVANCE_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        allowed = ", ".join(REQUIRED_KEYS + RELEVANCE_KEYS + OPTIONAL_KEYS)
        raise fail(unknown[0], f"is not a dump key (expected only: {allowed})")
    has_relevance = [key for key in RELEVANCE_KEYS if key in arrays]
    if has_relevance and "text_to_audio" in arrays:
        raise fail(
            has_relevance[0],
            "is given together with text_to_audio; expected either text_to_audio (format "
            "version 1) or relevance_indptr and relevance_indices (version 2), not both",
        )
    if len(has_relevance) == 1:
        other = RELEVANCE_KEYS[1 - RELEVANCE_KEYS.index(has_relevance[0])]
        raise fail(other, f"is missing (required with {has_relevance[0]})")
    for key in REQUIRED_KEYS:
        if key not in arrays and not (key == "text_to_audio" and has_relevance):
            raise fail(key, "is missing (required)")
    return has_relevance


def _check_embeddings(audio: npt.NDArray[Any], text: npt.NDArray[Any], fail: Any) -> None:
    """Both embedding matrices: float32/float64, 2-D, non-empty, finite, alike."""
    for key, arr in (("audio_embeds", audio), ("text_embeds", text)):
        if arr.dtype not in FLOAT_DTYPES:
            raise fail(key, f"has dtype {arr.dtype}, expected float32 or float64")
        if arr.ndim != 2:
            raise fail(key, f"has shape {arr.shape}, expected 2 dimensions [rows, D]")
        if arr.shape[0] == 0:
            raise fail(key, "has no rows, expected at least one")
        if arr.shape[1] == 0:
            raise fail(key, "has D = 0, expected at least one dimension")
        if not bool(np.all(np.isfinite(arr))):
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise fail(key, f"has a non-finite value at row {bad[0]}, column {bad[1]}")
    if text.dtype != audio.dtype:
        raise fail(
            "text_embeds", f"has dtype {text.dtype}, expected {audio.dtype} like audio_embeds"
        )
    if text.shape[1] != audio.shape[1]:
        raise fail(
            "text_embeds",
            f"has D = {text.shape[1]}, expected D = {audio.shape[1]} like audio_embeds",
        )


def _text_to_audio(
    t2a: npt.NDArray[Any], n: int, m: int, fail: Any, *, accept: bool
) -> npt.NDArray[np.int64]:
    """Validate version 1's ``text_to_audio`` (``accept``: a clip without a caption is
    accepted under a policy); read-only int64."""
    if t2a.dtype.kind not in "iu":
        raise fail("text_to_audio", f"has dtype {t2a.dtype}, expected an integer dtype")
    if t2a.shape != (m,):
        raise fail("text_to_audio", f"has shape {t2a.shape}, expected ({m},) (one per caption)")
    if m and (int(t2a.min()) < 0 or int(t2a.max()) >= n):
        bad_i = int(np.argmax((t2a < 0) | (t2a >= n)))
        raise fail(
            "text_to_audio",
            f"has value {int(t2a[bad_i])} at caption {bad_i}, expected a clip index in [0, {n})",
        )
    t2a64 = t2a.astype(np.int64)
    counts = np.bincount(t2a64, minlength=n)
    if bool(np.any(counts == 0)) and not accept:
        raise fail(
            "text_to_audio",
            f"gives clip {int(np.argmin(counts))} no caption, expected at least one per clip "
            + EMPTY_HINT,
        )
    t2a64.setflags(write=False)
    return t2a64


def _check_format_version(
    arrays: dict[str, npt.NDArray[Any]], has_relevance: bool, fail: Any
) -> None:
    """A given ``format_version`` is an integer scalar matching the keys' version."""
    if "format_version" not in arrays:
        return
    raw_v = arrays["format_version"]
    derived = 2 if has_relevance else 1
    if raw_v.dtype.kind not in "iu" or raw_v.ndim != 0:
        raise fail(
            "format_version",
            f"has dtype {raw_v.dtype} and shape {raw_v.shape}, expected an integer scalar",
        )
    if int(raw_v) != derived:
        keys = "relevance_indptr/relevance_indices" if has_relevance else "text_to_audio"
        raise fail(
            "format_version",
            f"is {int(raw_v)}, expected {derived} (the version of a dump with {keys})",
        )


def _meta(arrays: dict[str, npt.NDArray[Any]], where: str, fail: Any) -> dict[str, Any]:
    """``meta_json`` as a dict (``{}`` when absent): a str scalar holding a JSON object."""
    if "meta_json" not in arrays:
        return {}
    raw = arrays["meta_json"]
    if raw.dtype.kind != "U" or raw.ndim != 0:
        raise fail(
            "meta_json", f"has dtype {raw.dtype} and shape {raw.shape}, expected a str scalar"
        )
    meta = parse_json(str(raw), source=where, key="meta_json", finite=True)
    if not isinstance(meta, dict):
        raise fail("meta_json", "is JSON but not an object, expected {...}")
    return meta


def _relevance(
    indptr: npt.NDArray[Any],
    indices: npt.NDArray[Any],
    n: int,
    m: int,
    fail: Any,
    *,
    accept: bool = False,
    gains: npt.NDArray[Any] | None = None,
    kind: str = "integer",
) -> tuple[Relevance, npt.NDArray[Any] | None]:
    """Validate the version-2 relevance keys; indices come back ascending within each clip.
    ``accept``: a clip without a text and a text without a clip are accepted (a policy for
    queries without a relevant item was chosen), but not a relevance without any pair.
    ``gains``: graded relevance, an integer >= 0 per entry; an entry of gain 0 is not
    relevant (so a clip whose gains are all 0 has no relevant text); ``kind`` ``"float"``:
    float64 gains instead."""
    for key, arr in (("relevance_indptr", indptr), ("relevance_indices", indices)):
        if arr.dtype.kind not in "iu":
            raise fail(key, f"has dtype {arr.dtype}, expected an integer dtype")
        if arr.ndim != 1:
            raise fail(key, f"has shape {arr.shape}, expected 1 dimension")
    if indptr.shape != (n + 1,):
        raise fail("relevance_indptr", f"has shape {indptr.shape}, expected ({n + 1},) (clips + 1)")
    nnz = int(indices.shape[0])
    # Compared in the arrays' own dtypes: a uint64 beyond int64 must not wrap when cast.
    if int(indptr[0]) != 0:
        raise fail("relevance_indptr", f"starts at {int(indptr[0])}, expected 0")
    steps = indptr[1:] < indptr[:-1]
    if bool(np.any(steps)):
        i = int(np.argmax(steps))
        raise fail(
            "relevance_indptr",
            f"decreases from {int(indptr[i])} to {int(indptr[i + 1])} at clip {i}, "
            "expected non-decreasing offsets",
        )
    if int(indptr[-1]) != nnz:
        raise fail(
            "relevance_indptr",
            f"ends at {int(indptr[-1])}, expected {nnz} (the length of relevance_indices)",
        )
    if nnz and (bool(np.any(indices < 0)) or bool(np.any(indices >= m))):
        k = int(np.argmax((indices < 0) | (indices >= m)))
        raise fail(
            "relevance_indices",
            f"has value {int(indices[k])} at entry {k}, expected a text row in [0, {m})",
        )
    ptr64 = indptr.astype(np.int64)
    idx64 = indices.astype(np.int64)
    clip = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr64))
    positive = np.ones(nnz, bool) if gains is None else _gains(gains, nnz, fail, kind)
    per_clip = np.bincount(clip[positive], minlength=n)
    if bool(np.any(per_clip == 0)) and not accept:
        raise fail(
            "relevance_indptr",
            f"gives clip {int(np.argmin(per_clip))} no relevant text, expected at least one "
            "per clip " + EMPTY_HINT,
        )
    if not bool(positive.any()):  # reached only with a policy: no query would have a value
        raise fail("relevance_indices", "is empty, expected at least one relevant (clip, text)")
    order = np.lexsort((idx64, clip))  # ascending texts within each clip
    idx_sorted = idx64[order]
    same = (idx_sorted[1:] == idx_sorted[:-1]) & (clip[1:] == clip[:-1])
    if bool(np.any(same)):
        k = int(np.argmax(same))
        raise fail(
            "relevance_indices",
            f"lists text row {int(idx_sorted[k])} twice for clip {int(clip[k])}, expected "
            "each relevant text once per clip",
        )
    per_text = np.bincount(idx64[positive], minlength=m)
    if bool(np.any(per_text == 0)) and not accept:
        raise fail(
            "relevance_indices",
            f"makes text row {int(np.argmin(per_text))} relevant to no clip, expected every "
            "text row relevant to at least one clip " + EMPTY_HINT,
        )
    if gains is None:
        return Relevance._frozen(ptr64, idx_sorted, m), None
    dtype = np.float64 if kind == "float" else np.int64
    gains64 = np.ascontiguousarray(gains.astype(dtype)[order])
    gains64.setflags(write=False)
    return Relevance._frozen(ptr64, idx_sorted, m), gains64


def _gain_kind(arrays: dict[str, npt.NDArray[Any]], fail: Any) -> str:
    """The declared kind of the gains (``relevance_gains_kind``; ``"integer"`` when absent)."""
    if GAINS_KIND_KEY not in arrays:
        return "integer"
    value = arrays[GAINS_KIND_KEY]
    if value.dtype.kind != "U" or value.shape != () or str(value) not in GAIN_KINDS:
        raise fail(GAINS_KIND_KEY, f"is {value!r}, expected the string 'integer' or 'float'")
    return str(value)


def _gains(gains: npt.NDArray[Any], nnz: int, fail: Any, kind: str) -> npt.NDArray[np.bool_]:
    """Validate ``relevance_gains``; which entries are relevant (gain > 0)."""
    if kind == "float":
        if gains.dtype != np.float64:
            raise fail(
                GAINS_KEY,
                f"has dtype {gains.dtype}, expected float64 ({GAINS_KIND_KEY} is 'float')",
            )
        if not bool(np.all(np.isfinite(gains))):
            k = int(np.argmax(~np.isfinite(gains)))
            raise fail(GAINS_KEY, f"has value {gains[k]} at entry {k}, expected a finite gain")
    elif gains.dtype.kind == "f":
        raise fail(
            GAINS_KEY,
            f"has dtype {gains.dtype}, expected an integer dtype (float64 gains must be "
            f"declared: {GAINS_KIND_KEY} = 'float')",
        )
    elif gains.dtype.kind not in "iu":
        raise fail(GAINS_KEY, f"has dtype {gains.dtype}, expected an integer dtype")
    if gains.shape != (nnz,):
        raise fail(
            GAINS_KEY,
            f"has shape {gains.shape}, expected ({nnz},) (one gain per relevance_indices entry)",
        )
    if nnz and bool(np.any(gains < 0)):
        k = int(np.argmax(gains < 0))
        raise fail(
            GAINS_KEY, f"has value {_num(gains[k])} at entry {k}, expected {_what(kind)} >= 0"
        )
    if nnz and gains.max() > 2**53:  # exact as a float64 in every gain sum's term
        k = int(np.argmax(gains > 2**53))
        raise fail(GAINS_KEY, f"has value {_num(gains[k])} at entry {k}, expected at most 2**53")
    return np.asarray(gains > 0)


def _num(value: Any) -> str:
    """A gain as the error line prints it: an integer as an integer, a float by repr."""
    return repr(float(value)) if isinstance(value, np.floating) else str(int(value))


def _what(kind: str) -> str:
    return "a float" if kind == "float" else "an integer"


def _strings(
    arrays: dict[str, npt.NDArray[Any]], key: str, n: int, fail: Any
) -> tuple[str, ...] | None:
    if key not in arrays:
        return None
    arr = arrays[key]
    if arr.dtype.kind != "U":
        raise fail(key, f"has dtype {arr.dtype}, expected str")
    if arr.shape != (n,):
        raise fail(key, f"has shape {arr.shape}, expected ({n},)")
    return tuple(str(x) for x in arr)


def dump_arrays(dump: Dump) -> dict[str, npt.NDArray[Any]]:
    """The arrays of a dump file, keyed as in the format table."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "audio_embeds": np.asarray(dump.audio_embeds),
        "text_embeds": np.asarray(dump.text_embeds),
        "meta_json": np.asarray(json.dumps(dump.meta, sort_keys=True)),
    }
    if dump.text_to_audio is not None:
        arrays["text_to_audio"] = np.asarray(dump.text_to_audio, dtype=np.int64)
    else:
        # A version-1 file keeps its exact bytes (no new key); version 2 says what it is.
        csr = dump.relevance_csr if dump.relevance_csr is not None else dump.relevance
        arrays["relevance_indptr"] = np.asarray(csr.indptr, dtype=np.int64)
        arrays["relevance_indices"] = np.asarray(csr.indices, dtype=np.int64)
        arrays["format_version"] = np.asarray(FORMAT_VERSION, dtype=np.int64)
        if dump.gains is not None:  # absent for binary relevance: bytes unchanged
            floats = dump.gains.dtype.kind == "f"
            arrays[GAINS_KEY] = np.asarray(dump.gains, dtype=np.float64 if floats else np.int64)
            if floats:  # declared; an integer dump's bytes are unchanged
                arrays[GAINS_KIND_KEY] = np.asarray("float")
    if dump.audio_ids is not None:
        arrays["audio_ids"] = np.asarray(dump.audio_ids, dtype=str)
    if dump.captions is not None:
        arrays["captions"] = np.asarray(dump.captions, dtype=str)
    return arrays


def save_dump(path: str | Path, dump: Dump) -> None:
    """Write a dump atomically; the bytes depend only on its contents (:func:`npz_bytes`)."""
    atomic_write_bytes(path, npz_bytes(dump_arrays(dump)))

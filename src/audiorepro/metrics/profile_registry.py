"""The one registry of metric profiles: each profile declares here, once, everything that the
rest of the package derives from it.

A :class:`Profile` names the dumps it applies to (``retrieval`` or ``zeroshot`` dumps, binary
or graded relevance, one clip per caption or any number), its computation, the names of its
metrics (the published-value checks and the JSON Schemas follow them), the canonical concept
each name denotes (what ``explain`` puts side by side), its tier rule, its tie rule and its
notes. The CLI's ``--profile`` choices, the published-value name checks, ``explain``, the
tiers and the schemas all read this registry: adding a profile is one :func:`register_profile`
call (the built-in ones: :mod:`audiorepro.metrics.profiles`).

>>> import audiorepro.metrics.profiles  # registers the built-in profiles
>>> profile_names("retrieval"), profile_names("zeroshot")
(('canonical', 'laion-clap', 'trec', 'dcase'), ('laion-clap-zeroshot',))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from audiorepro.formats.dump import Dump

if TYPE_CHECKING:
    from audiorepro.metrics.retrieval import RetrievalResult, TiePolicy

DumpKind = Literal["retrieval", "zeroshot"]
SCHEMA = "audiorepro.profile/1"


@dataclass(frozen=True)
class ProfileResult:
    """One profile's metrics under the peer's own names, and notes on what it does."""

    profile: str
    metrics: dict[str, float]
    notes: list[str] = field(default_factory=list)
    #: Profiles whose peer breaks ties in a way that is not a defined number (``dcase``):
    #: direction -> ``queries_affected`` and ``bounds`` (metric -> ``[optimistic,
    #: pessimistic]`` over every order of the tied items). None for the others.
    ties: dict[str, Any] | None = None

    def to_json(self, dump: Dump) -> dict[str, Any]:
        doc = {
            "schema": SCHEMA,
            "profile": self.profile,
            "source": dump.source,
            "sha256": dump.sha256,
            "n_clips": dump.n_clips,
            "n_captions": dump.n_captions,
            "captions_per_clip": dump.captions_per_clip,
            "metrics": self.metrics,
            "notes": self.notes,
        }
        if self.ties is not None:
            doc["ties"] = self.ties  # a key added to audiorepro.profile/1: readers skip it
        return doc


@dataclass(frozen=True)
class ProfileRequest:
    """What a profile's computation receives: the dump, the exact rank counts when the caller
    already has them (``result``), the canonical tie policy and the cutoffs (``--k``, a study's
    ``k``; None for a profile whose cutoffs are its peer's own)."""

    dump: Dump
    result: RetrievalResult | None
    tie_policy: TiePolicy
    cutoffs: Sequence[int] | None


@dataclass(frozen=True)
class Cause:
    """One difference ``explain`` explains: a profile's value of a concept against the
    canonical value, its canonical tie bounds and (profiles with ``ties``) its tie interval."""

    concept: str
    direction: str
    value: float
    canonical: float
    bounds: tuple[float, float]
    interval: list[float] | None


@dataclass(frozen=True)
class Profile:
    """One profile, declared once (see the module docstring)."""

    name: str
    #: The dumps it applies to: retrieval dumps (``explain`` runs it) or zero-shot dumps (one
    #: relevant text, the class prompt, per clip).
    kind: DumpKind
    compute: Callable[[ProfileRequest], ProfileResult]
    #: Whether it accepts graded relevance (``relevance_gains``); a binary peer refuses it.
    graded: bool = False
    #: Whether its text-to-audio has exactly one relevant clip per caption (refuses others).
    one_clip_per_text: bool = False
    #: Whether ``--k`` / a study's ``k`` set its cutoffs (else they are its peer's own).
    cutoffs: bool = False
    #: Why a published metric name is not one of its metrics, or None; None: any name (its
    #: names are its peer's own keys and are not checked before the run).
    metric_problem: Callable[[str], str | None] | None = None
    #: Its metric names as a JSON Schema rule on ``values``' keys (``enum``, ``pattern``).
    names_schema: Mapping[str, Any] | None = None
    #: The fixed list of its metric names, where it has one (``names_schema`` is its enum).
    metric_names: tuple[str, ...] | None = None
    #: canonical metric name (``r@1``) -> its name here, ``{d}`` the direction (``t2a``),
    #: ``{long}`` its long form (``text_to_audio``): the rows ``explain`` fills.
    concepts: Mapping[str, str] = field(default_factory=dict)
    #: The same at definitions 1.1's cutoffs (a profile with ``cutoffs``); None: ``concepts``.
    concepts_at: Callable[[Sequence[int]], Mapping[str, str]] | None = None
    #: The cutoffs at which it must run to report the published names beside a study's cutoffs.
    published_cutoffs: Callable[[Sequence[str], Sequence[int] | None], tuple[int, ...] | None] | (
        None
    ) = None
    #: How its peer orders tied scores (``explain``'s cause of a difference within tie bounds).
    tie_rule: str = ""
    #: A profile's own cause of a difference, or None for the general ones.
    cause: Callable[[Cause], str | None] | None = None
    #: Whether its peer evaluates text-to-audio only.
    t2a_only: bool = False
    #: Tier rule: its values come from float32 scores of its own (tier b on every dump, within
    #: a tolerance from the dump's logit scale); else exact-engine values (tier a).
    float32_scores: bool = False
    #: Why its value can move between machines (``explain`` reports it with its tie interval).
    machine_dependence: str | None = None
    #: What ``metrics --help`` says of it, after its name.
    hint: str = ""
    #: What the catalog says of where it comes from.
    origin: str = "built in"


_REGISTRY: dict[str, Profile] = {}


def register_profile(profile: Profile) -> Profile:
    """Add ``profile`` (a ValueError when its name is taken); returns it."""
    if profile.name in _REGISTRY:
        raise ValueError(f"profile {profile.name!r} is already registered")
    _REGISTRY[profile.name] = profile
    return profile


def unregister_profile(name: str) -> None:
    """Remove a profile added by :func:`register_profile` (tests clean up with it)."""
    del _REGISTRY[name]


def registered_profiles(kind: DumpKind | None = None) -> tuple[Profile, ...]:
    """Every profile (of ``kind``), in registration order."""
    return tuple(p for p in _REGISTRY.values() if kind is None or p.kind == kind)


def profile_names(kind: DumpKind | None = None) -> tuple[str, ...]:
    """The names of :func:`registered_profiles`."""
    return tuple(p.name for p in registered_profiles(kind))


def find_profile(name: str) -> Profile | None:
    """The profile called ``name``, or None."""
    return _REGISTRY.get(name)


#: The kit's own definitions of each dump kind (no peer's profile): the name a study reports
#: first and that published values without a ``profile`` are read as. Every module asks
#: these functions instead of comparing a profile's name.
CANONICAL: dict[DumpKind, str] = {"retrieval": "canonical", "zeroshot": "zeroshot"}


def canonical_profile(kind: DumpKind = "retrieval") -> str:
    """The canonical name of ``kind``.

    >>> canonical_profile(), canonical_profile("zeroshot")
    ('canonical', 'zeroshot')
    """
    return CANONICAL[kind]


def is_canonical(name: str) -> bool:
    """Is ``name`` the kit's own definitions (of any kind), not a peer's profile?

    >>> is_canonical("canonical"), is_canonical("zeroshot"), is_canonical("trec")
    (True, True, False)
    """
    return name in CANONICAL.values()


def reported_profiles(kind: DumpKind) -> tuple[str, ...]:
    """The canonical name of ``kind`` and every profile registered for it, in that order."""
    peers = (n for n in profile_names(kind) if not is_canonical(n))
    return (canonical_profile(kind), *peers)


def float32_profile(name: str) -> bool:
    """Does the profile score in float32 (its numbers are tier b over any dump)?"""
    found = find_profile(name)
    return found is not None and found.float32_scores

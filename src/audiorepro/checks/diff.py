"""Why did it move: two runs' numbers compared, each move attributed to what it depends on.

Three pure stages, each over typed records, each asking the study kind that wrote the
bundle (its :class:`~audiorepro.checks.moves.DiffRules`, found by the bundle's ``schema``)
and knowing no kind's keys:

1. **Flatten** a bundle into :class:`NumberRecord` s (:func:`bundle_view`): every number the
   kind's ``numbers`` yields, with its path, its direction, its reproducibility tier
   (:mod:`audiorepro.checks.tiers`) and the keys of the records that can move it, as the
   kind's ``moves`` declares them (a number no cell owns depends on every cell; a probe
   study's derived number on the aliased files its formula reads, each a record of its own).
2. **Identities** (:class:`Identity`): what each cell's numbers depend on, each of one kind of
   :data:`KINDS`, as the kind's ``records`` reads them from the bundle (and, for an output
   folder, the machine from its manifest: :func:`manifest_identities`).
3. **Compare** (:func:`compare_runs`): per number equal or moved, ``|delta|``, and whether the
   move is within the bound that its differences allow; the causes of a move are the differing
   identities it depends on, never guessed from the numbers. A number that moved although
   nothing it depends on differs is a defect (a missing identity or a bug): ``changed,
   unexplained``.

Bounds: a tier-a number depends on no environment identity (the exact engine is bit-identical
on every machine), so a tier-a move under another CPU is unexplained. A tier-b number may move
within its derived tolerance when only environment identities (:data:`ENVIRONMENT`: software,
hardware, threads, image) differ: ``within tier``. Any other difference (weights, inputs, ...)
lifts the bound: the move is ``changed, explained``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from audiorepro.checks.moves import CAUSES, MACHINE, STUDY_CELL, Cause, DiffRules, Identity
from audiorepro.checks.moves import DEFINITIONS_KEY as DEFINITIONS_KEY
from audiorepro.checks.moves import RUN_MACHINE_KEYS as RUN_ENVIRONMENT_KEYS
from audiorepro.checks.moves import STUDY_KEY as STUDY_KEY
from audiorepro.checks.moves import identity as _identity
from audiorepro.checks.moves import pick as _pick
from audiorepro.checks.tiers import Tier

#: The fixed vocabulary of causes (:data:`audiorepro.checks.moves.Cause`).
Kind = Cause
KINDS: Final[tuple[Kind, ...]] = CAUSES
#: Identities of the machine and its software (:data:`audiorepro.checks.moves.MACHINE`).
ENVIRONMENT: Final = MACHINE
__all__ = ["DEFINITIONS_KEY", "RUN_ENVIRONMENT_KEYS", "STUDY_KEY", "Identity"]

Verdict = Literal["identical", "within tier", "changed, explained", "changed, unexplained"]
#: Worst last: a run's verdict is its worst cell's.
VERDICTS: Final[tuple[Verdict, ...]] = (
    "identical",
    "within tier",
    "changed, explained",
    "changed, unexplained",
)
Number = float | int | None
#: The study kinds ``diff`` asks, by the ``schema`` of the bundles they write
#: (:func:`audiorepro.runner.kinds.diff_kinds`).
Kinds = Mapping[str, DiffRules]


@dataclass(frozen=True)
class NumberRecord:
    """One number of a run."""

    path: str  #: ``<cell>/<group>/.../<metric>``, unique in the run
    cell: str  #: the cell (or ``<nested>/<cell>``) whose identities it depends on
    value: Number
    higher_is_better: bool | None
    tier: Tier
    depends_on: frozenset[str]  #: identity keys
    #: How a tier-b tolerance is derived (:data:`audiorepro.checks.moves.Rule`).
    rule: str | None = None
    metric: str = ""  #: the metric path the rule reads (``t2a/r@1``, ``text_to_audio_R@1``)
    float32: bool = False  #: laion-clap's float32 logits


@dataclass(frozen=True)
class RunView:
    """A run as the comparison sees it: its kind, study, numbers and identities."""

    kind: str  #: the bundle schema
    study: str
    numbers: Mapping[str, NumberRecord]
    identities: Mapping[str, Identity]


# ---------------------------------------------------------------------------- flattening


def higher_is_better(name: str) -> bool | None:
    """The direction of a metric from its name (ranks, losses and errors: lower is better).

    >>> higher_is_better("t2a/r@1"), higher_is_better("a2t/mean_rank"), higher_is_better("n")
    (True, False, None)
    """
    leaf = name.rsplit("/", 1)[-1].lower()
    if any(w in leaf for w in ("rank", "loss", "mae", "error", "rmse", "mse")):
        return False
    if leaf.startswith(("n_", "num_")) or leaf in ("n", "support", "count", "counts"):
        return None
    return True


#: The bundle parts that hold one entry per cell (retrieval, zero-shot, ...) or run (probe):
#: the study frame's, shown under the entry's id.
_PER_CELL: Final = ("cells", "runs")


def flatten(bundle: Mapping[str, Any], kind: DiffRules) -> list[NumberRecord]:
    """Every number the kind yields for ``bundle``, as compared: a cell's (or run's) under its
    id, a study-level one under its path in the bundle; its tier and the records that can
    move it as the kind's ``moves`` says."""
    _shape(bundle)
    out = []
    for number in kind.numbers(bundle):
        p = kind.moves(bundle, number)
        path = number.path
        if number.where[0] in _PER_CELL and p.cell != STUDY_CELL:
            path = path.split("/", 1)[1]  # cells/<id>/... -> <id>/...
        tier = p.tier
        if isinstance(number.value, int) and p.rule != "ranks":
            tier = "a"  # a count of clips, captions, samples: exact on every machine
        better = {"higher": True, "lower": False}.get(number.direction or "")
        out.append(
            NumberRecord(
                path=path,
                cell=p.cell,
                value=number.value,
                higher_is_better=higher_is_better(path) if better is None else better,
                tier=tier,
                depends_on=p.depends_on if tier == p.tier else _demote(p.depends_on),
                rule=p.rule if tier == "b" else None,
                metric=p.metric if tier == "b" else "",
                float32=p.float32 and tier == "b",
            )
        )
    return out


#: The parts of a cell or run that are tables (of numbers, or of tables) in every bundle.
_TABLES: Final = ("metrics", "profiles", "curves", "intervals", "report", "saved", "model_meta")


def _shape(bundle: Mapping[str, Any]) -> None:
    """A ValueError unless every cell (or run) is a table with an id and its parts that are
    tables are tables (or null): a bundle of another shape is bad input, not numbers."""
    for key in _PER_CELL:
        entries = bundle.get(key, [])
        if not isinstance(entries, list):
            raise ValueError(f"{key} is a {type(entries).__name__}; expected a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or "id" not in entry:
                raise ValueError(f"{key}[{i}] is not a table with an id")
            for part in _TABLES:
                value = entry.get(part)
                if value is not None and not isinstance(value, Mapping):
                    raise ValueError(
                        f"{key}[{i}].{part} is a {type(value).__name__}; expected a table"
                    )


def _demote(depends_on: frozenset[str]) -> frozenset[str]:
    """A tier-a count of a tier-b cell does not depend on the machine."""
    return frozenset(k for k in depends_on if k.rpartition(":")[2] not in ENVIRONMENT)


# ---------------------------------------------------------------------------- identities


def _distinct(values: list[Any]) -> list[Any]:
    """The distinct values, sorted: each identity compares the set of what the pools record
    (a run that loaded the model stack lists one more copy of OpenMP than a run served from
    the cache: the same library, architecture and thread counts, once more).

    >>> _distinct([2, 1, 2]), _distinct([{"v": None}, {"v": None}])
    ([1, 2], [{'v': None}])
    """
    keyed = {json.dumps(v, sort_keys=True, default=str): v for v in values}
    return [keyed[k] for k in sorted(keyed)]


def manifest_identities(manifest: Mapping[str, Any]) -> list[Identity]:
    """The run's environment from ``manifest.json``: package versions and BLAS (software), CPU
    dispatch, CPU and GPU (hardware), thread settings and pools (threads), the image."""
    env = manifest.get("environment", {})
    blas = dict(env.get("blas") or {})
    # threadpoolctl lists the pools in import order, which differs between two runs on one
    # machine, and lists one pool per copy of a library loaded (three copies of OpenMP when
    # the models loaded, two when the run was served from the cache): compared as a set of
    # distinct pools (sorted by everything recorded), not as a list.
    distinct = {
        json.dumps(p, sort_keys=True, default=str): p
        for p in blas.pop("threadpools", None) or []
        if isinstance(p, Mapping)
    }
    pools = [distinct[k] for k in sorted(distinct)]
    software = {
        "packages": env.get("packages"),
        "python": env.get("python"),
        "blas": blas,
        "threadpools": _distinct(
            [_pick(p, ("internal_api", "user_api", "version")) for p in pools]
        ),
    }
    hardware = {
        "cpu": env.get("cpu"),
        "machine": env.get("machine"),
        "cpu_dispatch": env.get("cpu_dispatch"),
        "gpus": env.get("gpus"),
        "threadpool_architectures": _distinct([p.get("architecture") for p in pools]),
    }
    threads = {
        "thread_variables": env.get("thread_variables"),
        "cpu_count": env.get("cpu_count"),
        "threadpool_threads": _distinct([p.get("num_threads") for p in pools]),
    }
    return [
        _identity("run", "software", software),
        _identity("run", "hardware", hardware),
        _identity("run", "threads", threads),
        _identity("run", "image", env.get("container")),
    ]


def bundle_view(bundle: Mapping[str, Any], kind: DiffRules, prefix: str = "") -> RunView:
    """A bundle's numbers and identities as its ``kind`` declares them; ``prefix``
    (``probe/``) names a nested study's."""
    ids = [prefixed_identity(i, prefix) for i in kind.records(bundle)]
    numbers = [prefixed_number(n, prefix) for n in flatten(bundle, kind)]
    seen: set[str] = set()
    for n in numbers:
        # A cell (or run) listed twice, or keys that flatten alike (``t2a/r@1`` beside
        # ``t2a: {r@1}``): one value would hide the other, and a moved copy could diff as
        # identical.
        if n.path in seen:
            raise ValueError(f"it lists the number {n.path} twice (a cell or run repeated?)")
        seen.add(n.path)
    return RunView(
        kind=str(bundle["schema"]),
        study=str(bundle["study"]["name"]),
        numbers={n.path: n for n in numbers},
        identities={i.key: i for i in ids},
    )


def prefixed_identity(identity: Identity, prefix: str) -> Identity:
    if not prefix:
        return identity
    scope = prefix + identity.scope
    return Identity(f"{scope}:{identity.kind}", identity.kind, scope, identity.value)


def prefixed_number(number: NumberRecord, prefix: str) -> NumberRecord:
    if not prefix:
        return number
    return _with(
        number,
        path=prefix + number.path,
        cell=prefix + number.cell,
        depends_on=frozenset(prefix + k for k in number.depends_on),
    )


def merge_views(views: Sequence[RunView]) -> RunView:
    """One view of a folder's studies (the top-level one first, nested ones prefixed)."""
    return RunView(
        kind="+".join(v.kind for v in views),
        study="+".join(v.study for v in views),
        numbers={k: n for v in views for k, n in v.numbers.items()},
        identities={k: i for v in views for k, i in v.identities.items()},
    )


def _with(record: NumberRecord, **changes: Any) -> NumberRecord:
    return NumberRecord(**{**record.__dict__, **changes})


def is_nan(value: Number) -> bool:
    return isinstance(value, float) and math.isnan(value)

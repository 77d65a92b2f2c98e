"""Why did it move: two runs' numbers compared, each move attributed to what it depends on.

Three pure stages, each over typed records:

1. **Flatten** a bundle into :class:`NumberRecord` s (one function per study kind:
   :func:`flatten_retrieval`, :func:`flatten_probe`, :func:`flatten_zeroshot`,
   :func:`flatten_linear_probe`, :func:`flatten_speaker_verification`): every number
   of the kind's typed view (:class:`audiorepro.checks.numbers.NumberRecord`, what the kind's
   ``numbers`` yields; the same walk without it), with its path, its direction, its
   reproducibility tier (:mod:`audiorepro.checks.tiers`) and the keys of the identities it
   depends on (a number no cell owns depends on every cell; a probe study's derived number
   on the aliased files its formula reads, each an identity of its own).
2. **Identities** (:class:`Identity`): what each cell's numbers depend on, each of one kind of
   :data:`KINDS`, from the bundle (and, for an output folder, its manifest:
   :func:`manifest_identities`).
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
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args

from audiorepro.checks.numbers import NumberRecord as TypedRecord
from audiorepro.checks.numbers import numeric_leaves, readable
from audiorepro.checks.tiers import Tier
from audiorepro.metrics.profiles import find_profile

Kind = Literal[
    "study",
    "weights",
    "encoder code",
    "preprocessing",
    "inputs",
    "definitions",
    "software",
    "hardware",
    "threads",
    "image",
]
#: The fixed vocabulary of causes, in the order they are reported (the Literal's own order).
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
#: Identities of the machine and its software: a tier-b number may move within its tolerance
#: when only these differ; a tier-a number does not depend on them at all.
ENVIRONMENT: Final = frozenset({"software", "hardware", "threads", "image"})
#: Keys of the run-wide identities (every number of the run depends on the first two).
STUDY_KEY: Final = "run:study"
DEFINITIONS_KEY: Final = "run:definitions"
RUN_ENVIRONMENT_KEYS: Final = tuple(
    f"run:{k}" for k in ("software", "hardware", "threads", "image")
)

Verdict = Literal["identical", "within tier", "changed, explained", "changed, unexplained"]
#: Worst last: a run's verdict is its worst cell's.
VERDICTS: Final[tuple[Verdict, ...]] = (
    "identical",
    "within tier",
    "changed, explained",
    "changed, unexplained",
)
Number = float | int | None


@dataclass(frozen=True)
class NumberRecord:
    """One number of a run."""

    path: str  #: ``<cell>/<group>/.../<metric>``, unique in the run
    cell: str  #: the cell (or ``<nested>/<cell>``) whose identities it depends on
    value: Number
    higher_is_better: bool | None
    tier: Tier
    depends_on: frozenset[str]  #: identity keys
    #: How a tier-b tolerance is derived (:mod:`audiorepro.checks.diff_load`): ``retrieval``
    #: (tiers.tier_b_tolerance over ``metric``), ``ranks`` (0 when no query is fragile),
    #: ``verification`` (an EER: no bound derived yet), or None.
    rule: str | None = None
    metric: str = ""  #: the metric path the rule reads (``t2a/r@1``, ``text_to_audio_R@1``)
    float32: bool = False  #: laion-clap's float32 logits


@dataclass(frozen=True)
class Identity:
    """One thing numbers depend on, as recorded: compared by its canonical JSON."""

    key: str  #: ``<cell>:<kind>`` or ``run:<kind>``
    kind: Kind
    scope: str  #: the cell id, or ``run``
    value: Any

    @property
    def canonical(self) -> str:
        return json.dumps(self.value, sort_keys=True, separators=(",", ":"))


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


def _keys(cell: str, kinds: Sequence[str], *, tier: Tier) -> frozenset[str]:
    """What a cell's numbers of ``tier`` depend on: its own identities of ``kinds``, the run's
    study and definitions, and (tier b only) the environment of the cell and of the run."""
    own = {f"{cell}:{k}" for k in kinds if tier == "b" or k not in ENVIRONMENT}
    run = {STUDY_KEY, DEFINITIONS_KEY} | (set(RUN_ENVIRONMENT_KEYS) if tier == "b" else set())
    return frozenset(own | run)


class TypedNumber(Protocol):
    """A number of the one typed view (:class:`audiorepro.checks.numbers.NumberRecord`, what a
    study kind's ``numbers`` yields): the comparison reads these fields."""

    @property
    def path(self) -> str: ...
    @property
    def where(self) -> tuple[str | int, ...]: ...
    @property
    def value(self) -> float | int: ...
    @property
    def direction(self) -> Literal["higher", "lower"] | None: ...


#: A bundle's typed view: every number, as its kind's ``numbers`` yields them.
TypedView = Callable[[Mapping[str, Any]], Iterable[TypedNumber]]
#: Where a number of a bundle part that no cell owns is said to be (the leaders, derived
#: numbers, result manifests, parity rows, counts): it depends on every cell and run.
STUDY_CELL: Final = "(study)"
#: The bundle parts that hold one entry per cell (retrieval, zero-shot) or run (probe).
_PER_CELL: Final = ("cells", "runs")


def plain_view(bundle: Mapping[str, Any]) -> Iterator[TypedRecord]:
    """Every number of ``bundle`` under the typed view's paths (cells and runs by id), for a
    bundle read without its kind (:func:`bundle_view` is normally handed the kind's view)."""
    for where, value in numeric_leaves(bundle):
        head = where[0]
        if head in _PER_CELL and len(where) > 1 and isinstance(where[1], int):
            entry = bundle[str(head)][where[1]]
            path = f"{head}/{entry['id']}/{readable(where[2:])}" if len(where) > 2 else ""
        else:
            path = readable(where)
        yield TypedRecord(path.rstrip("/"), where, value, None, None)


@dataclass(frozen=True)
class _Part:
    """How a number is compared: its cell, tier, rule and what it depends on."""

    cell: str
    tier: Tier
    depends_on: frozenset[str]
    rule: str | None = None
    metric: str = ""
    float32: bool = False


def _extracted(cell: Mapping[str, Any]) -> bool:
    return "weights_sha256" in (cell.get("model_meta") or {})


def _every(bundle: Mapping[str, Any], kinds: Sequence[str], extra: Sequence[str] = ()) -> _Part:
    """A number no cell owns: it depends on every cell's (or run's) identities, and on the
    run's environment when any cell is tier b (the tier of a whole-study number is the
    worst of its cells')."""
    cells = [c for key in _PER_CELL for c in bundle.get(key, [])]
    tier: Tier = "b" if any(_extracted(c) for c in cells) else "a"
    keys = frozenset().union(*(_keys(str(c["id"]), kinds, tier=tier) for c in cells))
    return _Part(STUDY_CELL, tier, keys | _keys("run", (), tier=tier) | frozenset(extra))


def _owner(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> Mapping[str, Any] | None:
    """The cell a study-level number belongs to, when a table on its way names it (a parity
    row's or a published value's ``cell``): its numbers follow that cell."""
    cells = {str(c.get("id")): c for c in bundle.get("cells", []) if isinstance(c, Mapping)}
    node: Any = bundle
    owner = None
    for key in where[:-1]:
        node = node[key]
        if isinstance(node, Mapping) and str(node.get("cell")) in cells:
            owner = cells[str(node["cell"])]
    return owner


def _retrieval_part(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> _Part:
    """A retrieval number: a cell's metric (tier a over a shipped dump, b over an extracted
    one; the laion-clap profile's float32 logits b always), its rank counts (rank rule),
    its input counts (tier a); a paired difference depends on both cells."""
    if where[0] == "paired_bootstrap" and len(where) > 2 and isinstance(where[1], int):
        pair = bundle["paired_bootstrap"][where[1]]
        a, b = str(pair["a"]), str(pair["b"])
        cells = {str(c["id"]): c for c in bundle["cells"]}
        tier: Tier = "b" if any(_extracted(cells.get(x, {})) for x in (a, b)) else "a"
        deps = _keys(a, _CELL_KINDS, tier=tier) | _keys(b, _CELL_KINDS, tier=tier)
        return _Part(f"{a} | {b}", tier, deps, rule="ranks")
    if where[0] != "cells" or len(where) < 3 or not isinstance(where[1], int):
        owner = _owner(bundle, where)
        if owner is None:
            return _every(bundle, _CELL_KINDS)
        oid, tier = str(owner["id"]), "b" if _extracted(owner) else "a"
        return _Part(oid, tier, _keys(oid, _CELL_KINDS, tier=tier))
    cell = bundle["cells"][where[1]]
    cid, below = str(cell["id"]), where[2:]
    tier = "b" if _extracted(cell) else "a"
    head = below[0]
    rest = "/".join(map(str, below[1:]))
    if head == "metrics":
        return _Part(cid, tier, _keys(cid, _CELL_KINDS, tier=tier), "retrieval", rest)
    if head == "profiles" and len(below) > 2:
        declared = find_profile(str(below[1]))  # its tier rule, as checks.tiers reads it
        own = declared is not None and declared.float32_scores
        tier = "b" if own else tier
        name = "/".join(map(str, below[2:]))
        return _Part(cid, tier, _keys(cid, _CELL_KINDS, tier=tier), "retrieval", name, own)
    if head == "curves" and len(below) == 3 and isinstance(below[2], int):
        metric = f"{below[1]}/r@{below[2] + 1}"
        return _Part(cid, tier, _keys(cid, _CELL_KINDS, tier=tier), "retrieval", metric)
    if head in ("intervals", "rank_histogram", "ties"):
        return _Part(cid, tier, _keys(cid, _CELL_KINDS, tier=tier), "ranks")
    # input counts, settings: exact on every machine
    return _Part(cid, "a", _keys(cid, _CELL_KINDS, tier="a"))


def _zeroshot_part(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> _Part:
    """A zero-shot number: a cell's metric tier b (the embeddings are extracted here, rank
    rule), its counts and settings tier a."""
    if where[0] != "cells" or len(where) < 3 or not isinstance(where[1], int):
        owner = _owner(bundle, where)
        if owner is None:
            return _every(bundle, _CELL_KINDS)
        return _Part(str(owner["id"]), "b", _keys(str(owner["id"]), _CELL_KINDS, tier="b"))
    cid = str(bundle["cells"][where[1]]["id"])
    if where[2] == "metrics":
        return _Part(cid, "b", _keys(cid, _CELL_KINDS, tier="b"), "ranks")
    return _Part(cid, "a", _keys(cid, _CELL_KINDS, tier="a"))


_ALIAS = re.compile(r"\{\*?([A-Za-z_][A-Za-z0-9_-]*):")


def file_key(rel: str) -> str:
    """The identity key of a file a study names (its path as the manifest names it)."""
    return f"{rel}:inputs"


def _probe_part(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> _Part:
    """A probe number (tier a: float64 over the shipped files, order-fixed sums): a run's
    depends on its own files and config; a derived number on the files its formula names
    (and, per run, that run's); the result manifest, leaders and means on every run and
    every aliased file."""
    files = (bundle.get("study") or {}).get("files") or {}
    every_file = [file_key(str(f["path"])) for f in files.values()]
    if where[0] == "runs" and len(where) > 2 and isinstance(where[1], int):
        rid = str(bundle["runs"][where[1]]["id"])
        return _Part(rid, "a", _keys(rid, ("inputs",), tier="a"))
    if where[:2] == ("result_manifest", "derived") and len(where) > 2:
        # the manifest's copy of a derived number: on what that number reads
        at = [i for i, d in enumerate(bundle.get("derived") or []) if d.get("name") == where[2]]
        where = ("derived", *at[:1], "values", "")
    if where[0] == "derived" and len(where) > 1 and isinstance(where[1], int):
        entry = bundle["derived"][where[1]]
        text = f"{entry.get('formula', '')} {entry.get('of') or ''}"
        named = [file_key(str(files[a]["path"])) for a in _ALIAS.findall(text) if a in files]
        values = entry.get("per_run") and len(where) > 3 and where[2] in ("values", "of_values")
        if values and str(where[3]) in {str(r["id"]) for r in bundle["runs"]}:
            rid = str(where[3])
            return _Part(rid, "a", _keys(rid, ("inputs",), tier="a") | frozenset(named))
        return _every(bundle, ("inputs",), named)
    return _every(bundle, ("inputs",), every_file)


def _numbers(
    bundle: Mapping[str, Any],
    typed: Iterable[TypedNumber] | None,
    part: Callable[[Mapping[str, Any], tuple[str | int, ...]], _Part],
) -> list[NumberRecord]:
    """Every number of the typed view (``typed``, else :func:`plain_view`), as compared:
    a cell's (or run's) under its id, a study-level one under its path in the bundle."""
    _shape(bundle)
    out = []
    for number in plain_view(bundle) if typed is None else typed:
        p = part(bundle, number.where)
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
                depends_on=p.depends_on if tier == p.tier else _demote(p),
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


def _demote(p: _Part) -> frozenset[str]:
    """A tier-a count of a tier-b cell does not depend on the machine."""
    return frozenset(k for k in p.depends_on if k.rpartition(":")[2] not in ENVIRONMENT)


_CELL_KINDS: Final = ("weights", "encoder code", "preprocessing", "inputs", "software")


def flatten_retrieval(
    bundle: Mapping[str, Any], typed: Iterable[TypedNumber] | None = None
) -> list[NumberRecord]:
    """Every number of a retrieval bundle (``audiorepro.bundle/1``), from its typed view.

    A cell's numbers are tier a over a shipped dump and tier b over an extracted one (its
    vectors follow the CPU); the ``laion-clap`` profile is tier b always, counts tier a
    (:func:`audiorepro.checks.tiers.tier_cell`). The paired bootstrap depends on both cells;
    a number of no cell (parity rows, study counts) on every cell.
    """
    return _numbers(bundle, typed, _retrieval_part)


def flatten_probe(
    bundle: Mapping[str, Any], typed: Iterable[TypedNumber] | None = None
) -> list[NumberRecord]:
    """Every number of a probe bundle (``audiorepro.probe-bundle/1``): each run's recomputed
    report, saved measurements and config (tier a: float64 over the shipped files,
    order-fixed sums); the derived numbers (on the files their formulas name), the result
    manifest, the leaders and family means (on every run and aliased file)."""
    return _numbers(bundle, typed, _probe_part)


def flatten_zeroshot(
    bundle: Mapping[str, Any], typed: Iterable[TypedNumber] | None = None
) -> list[NumberRecord]:
    """Every number of a zero-shot bundle (``audiorepro.zeroshot-bundle/1``): tier b (the
    embeddings are extracted here), counts tier a."""
    return _numbers(bundle, typed, _zeroshot_part)


def _linear_probe_part(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> _Part:
    """A linear-probe number: a cell's accuracies and reports tier b (an iterative solver over
    float64 BLAS), on the cell's identities and the probe definition; counts are tier a."""
    kinds = (*_CELL_KINDS, "definitions")
    if where[0] != "cells" or len(where) < 3 or not isinstance(where[1], int):
        owner = _owner(bundle, where)
        if owner is None:
            return _every(bundle, kinds)
        return _Part(str(owner["id"]), "b", _keys(str(owner["id"]), kinds, tier="b"))
    cid = str(bundle["cells"][where[1]]["id"])
    if where[2] in ("n_clips", "n_dims"):
        return _Part(cid, "a", _keys(cid, _CELL_KINDS, tier="a"))
    return _Part(cid, "b", _keys(cid, kinds, tier="b"))


def flatten_linear_probe(
    bundle: Mapping[str, Any], typed: Iterable[TypedNumber] | None = None
) -> list[NumberRecord]:
    """Every number of a linear-probe bundle (``audiorepro.linear-probe-bundle/1``): the
    accuracies and other metrics of each split and of the pooled predictions (tier b: an
    iterative solver over float64 BLAS), the counts (tier a)."""
    return _numbers(bundle, typed, _linear_probe_part)


def _speaker_part(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> _Part:
    """A speaker-verification number: a cell's EER tier b (cosines of its embeddings; no
    tolerance is derived for it: rule ``verification``), on the cell's identities; its counts
    and its dump's meta tier a."""
    if where[0] != "cells" or len(where) < 3 or not isinstance(where[1], int):
        owner = _owner(bundle, where)
        if owner is None:
            return _every(bundle, _CELL_KINDS)
        return _Part(str(owner["id"]), "b", _keys(str(owner["id"]), _CELL_KINDS, tier="b"))
    cid = str(bundle["cells"][where[1]]["id"])
    if where[2] == "eer":
        return _Part(cid, "b", _keys(cid, _CELL_KINDS, tier="b"), "verification")
    return _Part(cid, "a", _keys(cid, _CELL_KINDS, tier="a"))


def flatten_speaker_verification(
    bundle: Mapping[str, Any], typed: Iterable[TypedNumber] | None = None
) -> list[NumberRecord]:
    """Every number of a speaker-verification bundle
    (``audiorepro.speaker-verification-bundle/1``): each cell's EER (tier b), the counts of
    clips and trials (tier a)."""
    return _numbers(bundle, typed, _speaker_part)


_HEAR_SCORES: Final = ("scores", "validation_scores", "leaderboard")


def _hear_part(bundle: Mapping[str, Any], where: tuple[str | int, ...]) -> _Part:
    """A HEAR number: a cell's scores tier b (a probe over its embeddings), on the cell's
    identities; its counts and sizes tier a."""
    if where[0] != "cells" or len(where) < 3 or not isinstance(where[1], int):
        owner = _owner(bundle, where)
        if owner is None:
            return _every(bundle, _CELL_KINDS)
        return _Part(str(owner["id"]), "b", _keys(str(owner["id"]), _CELL_KINDS, tier="b"))
    cid = str(bundle["cells"][where[1]]["id"])
    tier: Tier = "b" if where[2] in _HEAR_SCORES else "a"
    return _Part(cid, tier, _keys(cid, _CELL_KINDS, tier=tier))


def flatten_hear(
    bundle: Mapping[str, Any], typed: Iterable[TypedNumber] | None = None
) -> list[NumberRecord]:
    """Every number of a HEAR bundle (``audiorepro.hear-bundle/1``): each cell's scores per
    test split, validation scores and leaderboard values (tier b), its counts (tier a)."""
    return _numbers(bundle, typed, _hear_part)


def hear_identities(bundle: Mapping[str, Any]) -> list[Identity]:
    """What each HEAR cell depends on: the module's weights and code, the predictor, and the
    task's files."""
    out = _run_identities(None, None)
    for cell in bundle["cells"]:
        cid = str(cell["id"])
        meta = cell.get("model_meta") or {}
        out += [
            _identity(cid, "weights", _pick(meta, _WEIGHT_KEYS) | {"model": cell.get("model")}),
            _identity(cid, "encoder code", meta.get("code")),
            _identity(cid, "preprocessing", _pick(cell, ("predictor", "sample_rate"))),
            _identity(cid, "inputs", _pick(cell, ("task", "task_files_sha256", "clips"))),
        ]
    return out


# ---------------------------------------------------------------------------- identities


def _identity(scope: str, kind: Kind, value: Any) -> Identity:
    return Identity(key=f"{scope}:{kind}", kind=kind, scope=scope, value=value)


def _pick(meta: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: meta[k] for k in keys if k in meta}


_WEIGHT_KEYS: Final = ("model", "revision", "weights_sha256", "architecture", "spec")
_PREPROCESSING_KEYS: Final = (
    "preprocessing", "audio_decoder", "resampler", "sample_rate", "mono", "captions_layout",
)  # fmt: skip


def _extraction(cid: str, meta: Mapping[str, Any]) -> list[Identity]:
    inputs = dict(meta.get("inputs", {}))
    layout = inputs.pop("captions_layout", None)
    pre = _pick(meta, _PREPROCESSING_KEYS) | ({"captions_layout": layout} if layout else {})
    return [
        _identity(cid, "weights", _pick(meta, _WEIGHT_KEYS)),
        # The encoder's code (its source's SHA-256 and version; CLAP: the library's version),
        # absent from dumps written before it was recorded.
        _identity(cid, "encoder code", meta.get("encoder_code")),
        _identity(cid, "preprocessing", pre),
        _identity(cid, "inputs", inputs),
        _identity(cid, "software", meta.get("versions")),
    ]


def retrieval_identities(bundle: Mapping[str, Any]) -> list[Identity]:
    """What each retrieval cell depends on: weights, preprocessing, inputs and software of an
    extracted dump (its recorded meta), or the shipped dump itself (``inputs``)."""
    out = _run_identities(
        {"tie_policy": bundle["study"]["tie_policy"], "bootstrap": bundle["study"]["bootstrap"]},
        bundle["definitions_version"],
    )
    for cell in bundle["cells"]:
        cid = str(cell["id"])
        meta = cell.get("model_meta", {})
        if "weights_sha256" in meta:
            out += _extraction(cid, meta)
        else:
            dump = _pick(cell, ("dump_sha256", "n_clips", "n_captions", "error"))
            out.append(_identity(cid, "inputs", dump))
    return out


def probe_identities(bundle: Mapping[str, Any]) -> list[Identity]:
    """What each probe run depends on: its prediction file and saved measurement files (both
    hashes) and its recorded config. The probe bundle records no study settings: a change of
    them shows as unexplained (a missing identity)."""
    out = _run_identities(None, None)
    for run in bundle["runs"]:
        value = _pick(run, ("predictions_sha256", "saved_sha256", "saved_files", "config"))
        out.append(_identity(str(run["id"]), "inputs", value))
    # Each aliased file (job records, normalization, workflow, ...) is an identity of its
    # own, named by its path: a derived number that moves names the file that changed.
    files = (bundle.get("study") or {}).get("files") or {}
    for record in files.values():
        out.append(_identity(str(record["path"]), "inputs", record.get("sha256")))
    return out


def zeroshot_identities(bundle: Mapping[str, Any]) -> list[Identity]:
    """What each zero-shot cell depends on: its dump's recorded meta, the evaluated clips."""
    study = bundle["study"]
    out = _run_identities({"tie_policy": study["tie_policy"]}, study["definitions_version"])
    record = dict(study["inputs"])
    for cell in bundle["cells"]:
        cid = str(cell["id"])
        weights, code, pre, _, software = _extraction(cid, cell["model_meta"])
        template = {"template": record.get("template")}
        pre = _identity(cid, "preprocessing", pre.value | template)
        clips = {k: v for k, v in record.items() if k != "template"}
        out += [weights, code, pre, _identity(cid, "inputs", clips), software]
    return out


def linear_probe_identities(bundle: Mapping[str, Any]) -> list[Identity]:
    """What each linear-probe cell depends on: its embeddings (the dump's hash, and an
    extracted dump's recorded meta), its labels and protocol, and the probe's definition
    (definition, C or grid, scikit-learn's version)."""
    study = bundle["study"]
    out = _run_identities({"bootstrap": study["bootstrap"]}, study["definitions_version"])
    for cell in bundle["cells"]:
        cid = str(cell["id"])
        meta = cell.get("model_meta") or {}
        if "weights_sha256" in meta:
            weights, code, pre, _, software = _extraction(cid, meta)
            out += [weights, code, pre, software]
        inputs = _pick(cell, ("dump_sha256", "labels_sha256", "fold_column", "protocol"))
        out.append(_identity(cid, "inputs", inputs))
        out.append(_identity(cid, "definitions", cell.get("probe")))
    return out


def speaker_verification_identities(bundle: Mapping[str, Any]) -> list[Identity]:
    """What each speaker-verification cell depends on: an extracted dump's recorded meta
    (weights, encoder code, preprocessing, clips, software) or a given dump's hash, and the
    trial list's hash."""
    out = _run_identities(None, bundle["study"]["definitions_version"])
    for cell in bundle["cells"]:
        cid = str(cell["id"])
        meta = cell.get("model_meta") or {}
        inputs = _pick(cell, ("trials_sha256",))
        if "weights_sha256" in meta:
            weights, code, pre, clips, software = _extraction(cid, meta)
            out += [weights, code, pre, software]
            inputs["clips"] = clips.value
        else:
            inputs |= _pick(cell, ("dump_sha256",))
        out.append(_identity(cid, "inputs", inputs))
    return out


def _run_identities(study: Any, definitions: Any) -> list[Identity]:
    return [_identity("run", "study", study), _identity("run", "definitions", definitions)]


def manifest_identities(manifest: Mapping[str, Any]) -> list[Identity]:
    """The run's environment from ``manifest.json``: package versions and BLAS (software), CPU
    dispatch, CPU and GPU (hardware), thread settings and pools (threads), the image."""
    env = manifest.get("environment", {})
    blas = dict(env.get("blas") or {})
    # threadpoolctl lists the pools in import order, which differs between two runs on one
    # machine: compared as a set (sorted by everything recorded), not as a list.
    pools = sorted(
        (p for p in blas.pop("threadpools", None) or [] if isinstance(p, Mapping)),
        key=lambda p: json.dumps(p, sort_keys=True, default=str),
    )
    software = {
        "packages": env.get("packages"),
        "python": env.get("python"),
        "blas": blas,
        "threadpools": [_pick(p, ("internal_api", "user_api", "version")) for p in pools],
    }
    hardware = {
        "cpu": env.get("cpu"),
        "machine": env.get("machine"),
        "cpu_dispatch": env.get("cpu_dispatch"),
        "gpus": env.get("gpus"),
        "threadpool_architectures": [p.get("architecture") for p in pools],
    }
    threads = {
        "thread_variables": env.get("thread_variables"),
        "cpu_count": env.get("cpu_count"),
        "threadpool_threads": [p.get("num_threads") for p in pools],
    }
    return [
        _identity("run", "software", software),
        _identity("run", "hardware", hardware),
        _identity("run", "threads", threads),
        _identity("run", "image", env.get("container")),
    ]


#: schema -> (flattener, identity extractor): the one place that knows each bundle kind.
KIND_VIEWS: Final[
    dict[
        str,
        tuple[
            Callable[[Mapping[str, Any], Iterable[TypedNumber] | None], list[NumberRecord]],
            Callable[[Mapping[str, Any]], list[Identity]],
        ],
    ]
] = {
    "audiorepro.bundle/1": (flatten_retrieval, retrieval_identities),
    "audiorepro.probe-bundle/1": (flatten_probe, probe_identities),
    "audiorepro.zeroshot-bundle/1": (flatten_zeroshot, zeroshot_identities),
    "audiorepro.linear-probe-bundle/1": (flatten_linear_probe, linear_probe_identities),
    "audiorepro.speaker-verification-bundle/1": (
        flatten_speaker_verification,
        speaker_verification_identities,
    ),
    "audiorepro.hear-bundle/1": (flatten_hear, hear_identities),
}


def bundle_view(
    bundle: Mapping[str, Any], prefix: str = "", typed: TypedView | None = None
) -> RunView:
    """A bundle's numbers and identities; ``prefix`` (``probe/``) names a nested study's.
    ``typed``: the bundle's typed view (its kind's ``numbers``): every number of it is
    compared; without it, every number of the bundle under the same paths."""
    flatten, identities = KIND_VIEWS[str(bundle["schema"])]
    ids = [prefixed_identity(i, prefix) for i in identities(bundle)]
    view = None if typed is None else list(typed(bundle))
    numbers = [prefixed_number(n, prefix) for n in flatten(bundle, view)]
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

"""Why did it move: two runs' numbers compared, each move attributed to what it depends on.

Three pure stages, each over typed records:

1. **Flatten** a bundle into :class:`NumberRecord` s (one function per study kind:
   :func:`flatten_retrieval`, :func:`flatten_probe`, :func:`flatten_zeroshot`): every number
   with its path, its direction, its reproducibility tier (:mod:`audiorepro.checks.tiers`) and
   the keys of the identities it depends on.
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

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
    #: (tiers.tier_b_tolerance over ``metric``), ``ranks`` (0 when no query is fragile), or None.
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


def _label(item: Mapping[str, Any], index: int) -> str:
    names = [str(item[k]) for k in ("id", "task", "metric", "family", "name", "model") if k in item]
    return "/".join(n for n in names if n) or str(index)


def leaves(data: Any, path: str = "") -> Iterator[tuple[str, Number]]:
    """Every number under ``data`` with its path (a list of records is keyed by their names;
    strings and booleans are not numbers).

    >>> list(leaves({"b": [1, 2.5], "a": {"x": None, "s": "text"}, "ok": True}))
    [('a/x', None), ('b/0', 1), ('b/1', 2.5)]
    """
    if isinstance(data, Mapping):
        for key in sorted(data, key=str):
            yield from leaves(data[key], f"{path}/{key}" if path else str(key))
    elif isinstance(data, list | tuple):
        for i, item in enumerate(data):
            name = _label(item, i) if isinstance(item, Mapping) else str(i)
            yield from leaves(item, f"{path}/{name}" if path else name)
    elif data is None or (isinstance(data, int | float) and not isinstance(data, bool)):
        yield path, data


def _keys(cell: str, kinds: Sequence[str], *, tier: Tier) -> frozenset[str]:
    """What a cell's numbers of ``tier`` depend on: its own identities of ``kinds``, the run's
    study and definitions, and (tier b only) the environment of the cell and of the run."""
    own = {f"{cell}:{k}" for k in kinds if tier == "b" or k not in ENVIRONMENT}
    run = {STUDY_KEY, DEFINITIONS_KEY} | (set(RUN_ENVIRONMENT_KEYS) if tier == "b" else set())
    return frozenset(own | run)


def _record(
    cell: str, path: str, value: Number, kinds: Sequence[str], tier: Tier, **rule: Any
) -> NumberRecord:
    if isinstance(value, int) and rule.get("rule") != "ranks":
        tier = "a"  # a count of clips, captions, samples: exact on every machine
    return NumberRecord(
        path=f"{cell}/{path}",
        cell=cell,
        value=value,
        higher_is_better=higher_is_better(path),
        tier=tier,
        depends_on=_keys(cell, kinds, tier=tier),
        **(rule if tier == "b" else {}),
    )


_CELL_KINDS: Final = ("weights", "encoder code", "preprocessing", "inputs", "software")


def _retrieval_cell(cell: Mapping[str, Any]) -> Iterator[NumberRecord]:
    cid = str(cell["id"])
    extracted = "weights_sha256" in cell.get("model_meta", {})
    tier: Tier = "b" if extracted else "a"
    for direction, values in cell.get("metrics", {}).items():
        for name, v in leaves(values):
            m = f"{direction}/{name}"
            yield _record(cid, f"metrics/{m}", v, _CELL_KINDS, tier, rule="retrieval", metric=m)
    for profile, values in cell.get("profiles", {}).items():
        declared = find_profile(profile)  # its tier rule, as checks.tiers reads it
        own = declared is not None and declared.float32_scores
        for name, v in leaves(values):
            yield _record(
                cid, f"profiles/{profile}/{name}", v, _CELL_KINDS, "b" if own else tier,
                rule="retrieval", metric=name, float32=own,
            )  # fmt: skip
    for direction, curve in cell.get("curves", {}).items():
        for k, v in enumerate(curve, start=1):
            m = f"{direction}/r@{k}"
            yield _record(cid, f"curves/{m}", v, _CELL_KINDS, tier, rule="retrieval", metric=m)
    for group in ("intervals", "rank_histogram", "ties"):
        for name, v in leaves(cell.get(group, {})):
            yield _record(cid, f"{group}/{name}", v, _CELL_KINDS, tier, rule="ranks")
    for name in ("n_clips", "n_captions", "captions_per_clip"):
        if name in cell:
            yield _record(cid, name, cell[name], _CELL_KINDS, "a")


def flatten_retrieval(bundle: Mapping[str, Any]) -> list[NumberRecord]:
    """Every number of a retrieval bundle (``audiorepro.bundle/1``).

    A cell's numbers are tier a over a shipped dump and tier b over an extracted one (its
    vectors follow the CPU); the ``laion-clap`` profile is tier b always, counts tier a
    (:func:`audiorepro.checks.tiers.tier_cell`). The paired bootstrap depends on both cells.
    """
    records = [r for cell in bundle["cells"] for r in _retrieval_cell(cell)]
    tiers = {str(c["id"]): "weights_sha256" in c.get("model_meta", {}) for c in bundle["cells"]}
    for p in bundle.get("paired_bootstrap", []):
        a, b = str(p["a"]), str(p["b"])
        tier: Tier = "b" if tiers.get(a) or tiers.get(b) else "a"
        name = f"paired/{p['dataset']}/{a} - {b}/{p['direction']}/{p['metric']}"
        for field in ("difference", "low", "high", "fraction_not_better"):
            one = _record("paired", f"{name[7:]}/{field}", p[field], (), tier, rule="ranks")
            deps = _keys(a, _CELL_KINDS, tier=one.tier) | _keys(b, _CELL_KINDS, tier=one.tier)
            records.append(_with(one, depends_on=deps, cell=f"{a} | {b}"))
    return records


def _with(record: NumberRecord, **changes: Any) -> NumberRecord:
    return NumberRecord(**{**record.__dict__, **changes})


def flatten_probe(bundle: Mapping[str, Any]) -> list[NumberRecord]:
    """Every number of a probe bundle (``audiorepro.probe-bundle/1``): each run's recomputed
    report and saved measurements (tier a: float64 over the shipped files, order-fixed sums),
    and the leaders and family means, which depend on every run."""
    records: list[NumberRecord] = []
    for run in bundle["runs"]:
        rid = str(run["id"])
        for group in ("report", "saved"):
            for name, v in leaves(run.get(group) or {}):
                records.append(_record(rid, f"{group}/{name}", v, ("inputs",), "a"))
    every = frozenset().union(*(_keys(str(r["id"]), ("inputs",), tier="a") for r in bundle["runs"]))
    for group in ("leaders", "family_means", "task_leaders"):
        for name, v in leaves(bundle.get(group, [])):
            one = _record(group, name, v, (), "a")
            records.append(_with(one, depends_on=every, cell="(all runs)"))
    return records


def flatten_zeroshot(bundle: Mapping[str, Any]) -> list[NumberRecord]:
    """Every number of a zero-shot bundle (``audiorepro.zeroshot-bundle/1``): tier b (the
    embeddings are extracted here), counts tier a."""
    records: list[NumberRecord] = []
    for cell in bundle["cells"]:
        cid = str(cell["id"])
        for name, v in leaves(cell["metrics"]):
            records.append(_record(cid, f"metrics/{name}", v, _CELL_KINDS, "b", rule="ranks"))
        for name in ("n_clips", "n_classes"):
            records.append(_record(cid, name, cell[name], _CELL_KINDS, "a"))
    return records


def flatten_linear_probe(bundle: Mapping[str, Any]) -> list[NumberRecord]:
    """Every number of a linear-probe bundle (``audiorepro.linear-probe-bundle/1``): the
    accuracies and other metrics of each split and of the pooled predictions (tier b: an
    iterative solver over float64 BLAS), the counts (tier a)."""
    records: list[NumberRecord] = []
    kinds = (*_CELL_KINDS, "definitions")
    for cell in bundle["cells"]:
        cid = str(cell["id"])
        records.append(_record(cid, "mean_accuracy", cell["mean_accuracy"], kinds, "b"))
        for fold in cell["folds"]:
            name = f"folds/{fold['fold']}"
            for key in ("accuracy", "min_margin", "n_train", "n_test", "near_ties"):
                records.append(_record(cid, f"{name}/{key}", fold[key], kinds, "b"))
            for leaf, v in leaves(fold["report"]):
                records.append(_record(cid, f"{name}/report/{leaf}", v, kinds, "b"))
        for leaf, v in leaves(cell["pooled"]):
            records.append(_record(cid, f"pooled/{leaf}", v, kinds, "b"))
        for name in ("n_clips", "n_dims"):
            records.append(_record(cid, name, cell[name], _CELL_KINDS, "a"))
    return records


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
            weights, pre, _, software = _extraction(cid, meta)
            out += [weights, pre, software]
        inputs = _pick(cell, ("dump_sha256", "labels_sha256", "fold_column", "protocol"))
        out.append(_identity(cid, "inputs", inputs))
        out.append(_identity(cid, "definitions", cell.get("probe")))
    return out


def _run_identities(study: Any, definitions: Any) -> list[Identity]:
    return [_identity("run", "study", study), _identity("run", "definitions", definitions)]


def manifest_identities(manifest: Mapping[str, Any]) -> list[Identity]:
    """The run's environment from ``manifest.json``: package versions and BLAS (software), CPU
    dispatch, CPU and GPU (hardware), thread settings and pools (threads), the image."""
    env = manifest.get("environment", {})
    blas = dict(env.get("blas") or {})
    pools = blas.pop("threadpools", None) or []
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
            Callable[[Mapping[str, Any]], list[NumberRecord]],
            Callable[[Mapping[str, Any]], list[Identity]],
        ],
    ]
] = {
    "audiorepro.bundle/1": (flatten_retrieval, retrieval_identities),
    "audiorepro.probe-bundle/1": (flatten_probe, probe_identities),
    "audiorepro.zeroshot-bundle/1": (flatten_zeroshot, zeroshot_identities),
    "audiorepro.linear-probe-bundle/1": (flatten_linear_probe, linear_probe_identities),
}


def bundle_view(bundle: Mapping[str, Any], prefix: str = "") -> RunView:
    """A bundle's numbers and identities; ``prefix`` (``probe/``) names a nested study's."""
    flatten, identities = KIND_VIEWS[str(bundle["schema"])]
    ids = [prefixed_identity(i, prefix) for i in identities(bundle)]
    numbers = [prefixed_number(n, prefix) for n in flatten(bundle)]
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


def is_nan(value: Number) -> bool:
    return isinstance(value, float) and math.isnan(value)

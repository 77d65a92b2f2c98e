"""``audiorepro reproduce``: a study's inputs -> every table, the report, a bundle, a manifest.

Stages, in order (each with a progress bar on a terminal): **extract** what is missing (cached
under ``OUT/cache`` by a key over the model's weight hashes, the settings and the inputs'
hashes), **metrics** (canonical definitions, the study's profiles, 95% bootstrap intervals of
the headline numbers, paired bootstrap between models on the same queries), **parity** (harness
against the independent reference), **identity**, **golden** (published values), **tables**,
**report**, **bundle**, **manifest**.

Outputs (every file written atomically):

``tables/``            per dataset and direction (models x metrics), and beside it, when the
                       study asks for profiles other than canonical, ``*_profiles`` (rows:
                       model and profile, columns: measures; :func:`_profile_table`);
                       parity, identity and published-vs-reproduced tables; each as
                       ``.csv``, ``.md`` and ``.tex``
``report.html``        one self-contained page (:mod:`audiorepro.render.html`)
``bundle.json.gz``     every number and every input's identity; sorted keys, gzip mtime 0; no
                       time, host or path
``verification.json``  ``metric_parity``, ``checkpoint_identity``, ``metric_parity_passed``,
                       ``cross_pipeline_comparable``, ``failures``, and ``golden``
``manifest.json``      SHA-256 of every input and output, environment, time
                       (``SOURCE_DATE_EPOCH`` when set) and host

Everything but the manifest is a function of the inputs alone, so a rerun is byte-identical.
A study with a failing cell still writes everything, says so first, and exits 1.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from audiorepro.checks.explain import CONCEPTS, peer_name
from audiorepro.checks.moves import (
    CELL_CAUSES,
    Identity,
    Moves,
    extracted,
    extraction_records,
    identity,
    in_cell,
    keys,
    pick,
    run_records,
    study_level,
)
from audiorepro.checks.parity import DEFAULT_TOLERANCE, ParityBlock, ParityCell, parity_cell
from audiorepro.checks.tiers import Tier
from audiorepro.checks.verify import (
    FAIL,
    NOT_VERIFIED,
    PASS,
    Summary,
    ValueRow,
    summarize,
    value_rows,
)
from audiorepro.core.errors import UserError, WriteError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.core.io import JsonObject

#: The numbers every table leads with; each carries a bootstrap interval.
from audiorepro.core.progress import progress_bar
from audiorepro.formats.dump import Dump, EmptyPolicy, load_dump
from audiorepro.metrics.bootstrap import bootstrap_interval, paired_bootstrap
from audiorepro.metrics.profile_registry import canonical_profile, float32_profile, is_canonical
from audiorepro.metrics.profiles import (
    check_profile_applies,
    compute_profile,
    published_cutoffs,
)
from audiorepro.metrics.retrieval import (
    DEFINITIONS_MINOR,
    DEFINITIONS_VERSION,
    DIRECTIONS,
    METRICS,
    RetrievalResult,
    TieSummary,
    compute_retrieval,
    hit_rate_at_k,
    is_metric_name,
    metric_by_name,
    metric_names,
)
from audiorepro.render.html import render_report
from audiorepro.render.tables import Column, Table, slug
from audiorepro.runner.kinds import (
    Better,
    BundlePart,
    Context,
    KindState,
    NumberRecord,
    NumberTier,
    StudyKind,
    cell_records,
    dump_identities,
    register_kind,
    rest_records,
)
from audiorepro.runner.kinds.retrieval.records import (
    BundleCell,
    PairedRecord,
    RankHistogram,
    RetrievalBundle,
    RetrievalVerification,
)
from audiorepro.runner.output.outputs import RETRIEVAL_BUNDLE
from audiorepro.specs.study import Cell, Published

if TYPE_CHECKING:
    from audiorepro.models.identity_block import IdentityBlock
    from audiorepro.runner.executors.extraction import CellExtraction, StudyExtraction
    from audiorepro.runner.kinds.retrieval.spec import IdentityCheck, RetrievalStudy

# A retrieval run's extraction (the cache, the executors, the model registry), its spec's
# models, the datasets' registry and the identity check are imported by the steps that use
# them: ``diff`` and ``verify OUT`` read a retrieval bundle with numbers/records/moves alone
# (issue 48 item 4).

HEADLINE = ("r@1", "r@5", "r@10", "map")
T = TypeVar("T")


@dataclass
class CellResult:
    cell: Cell
    dump: Dump | None = None
    error: str | None = None
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    ties: dict[str, TieSummary] = field(default_factory=dict)
    profiles: dict[str, dict[str, float]] = field(default_factory=dict)
    intervals: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    parity: ParityCell | None = None
    retrieval: RetrievalResult | None = None
    curves: dict[str, list[float]] = field(default_factory=dict)
    rank_histogram: dict[str, RankHistogram] = field(default_factory=dict)


def _progress(items: list[T], stage: str, enabled: bool) -> Iterable[T]:
    shown: Iterable[T] = progress_bar(items, f"{stage:<9}", enabled, unit="item")
    return shown


def _cell_metrics(res: CellResult, study: RetrievalStudy) -> None:
    assert res.dump is not None
    tie = study.tie_policy
    res.retrieval = compute_retrieval(res.dump)
    res.metrics = res.retrieval.metrics(tie, study.cutoffs)
    res.ties = res.retrieval.ties(study.cutoffs)
    for profile in res.cell.profiles:
        if is_canonical(profile):
            continue
        res.profiles[profile] = compute_profile(
            res.dump,
            profile,
            result=res.retrieval,
            tie_policy=tie,
            cutoffs=study.cutoffs,
        ).metrics
    b = study.bootstrap
    for direction in DIRECTIONS:
        ranking = res.retrieval.ranking(direction, tie)
        res.intervals[direction] = {
            m: list(
                bootstrap_interval(ranking, m, n_resamples=b.resamples, seed=b.seed, level=b.level)
            )
            for m in HEADLINE
        }
        res.curves[direction] = [hit_rate_at_k(ranking, k=k) for k in range(1, 11)]
        res.rank_histogram[direction] = rank_histogram(ranking.first)


#: Bins of the first-relevant-rank histogram: (label, lowest rank, highest rank).
RANK_BINS = (
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4-5", 4, 5),
    ("6-10", 6, 10),
    ("11-20", 11, 20),
    ("21-50", 21, 50),
    ("51-100", 51, 100),
    (">100", 101, None),
)


def rank_histogram(first: npt.ArrayLike) -> RankHistogram:
    """Counts of queries by the position of their first relevant item.

    >>> rank_histogram(np.array([1, 1, 4, 300]))["counts"]
    [2, 0, 0, 1, 0, 0, 0, 0, 1]
    """
    ranks = np.asarray(first)
    counts = [
        int(np.count_nonzero((ranks >= lo) & ((ranks <= hi) if hi is not None else True)))
        for _, lo, hi in RANK_BINS
    ]
    return {"bins": [label for label, _, _ in RANK_BINS], "counts": counts}


def _paired(results: list[CellResult], study: RetrievalStudy) -> list[PairedRecord]:
    """Paired bootstrap of every later model against the first, per dataset, same queries."""
    out: list[PairedRecord] = []
    by_dataset: dict[str, list[CellResult]] = {}
    for r in results:
        if r.retrieval is not None:
            by_dataset.setdefault(r.cell.dataset, []).append(r)
    b = study.bootstrap
    for dataset, group in by_dataset.items():
        base = group[0]
        for other in group[1:]:
            assert base.dump is not None and other.dump is not None
            assert base.retrieval is not None and other.retrieval is not None
            rel_a, rel_b = base.dump.relevance, other.dump.relevance
            if not (
                np.array_equal(rel_a.indptr, rel_b.indptr)
                and np.array_equal(rel_a.indices, rel_b.indices)
            ):
                continue  # not the same queries and relevant items: nothing to pair
            for direction in DIRECTIONS:
                ra = other.retrieval.ranking(direction, study.tie_policy)
                rb = base.retrieval.ranking(direction, study.tie_policy)
                for m in HEADLINE:
                    d = paired_bootstrap(
                        ra, rb, m, n_resamples=b.resamples, seed=b.seed, level=b.level
                    )
                    out.append(
                        PairedRecord(
                            dataset=dataset,
                            a=other.cell.id,
                            b=base.cell.id,
                            direction=direction,
                            metric=m,
                            difference=d["difference"],
                            low=d["low"],
                            high=d["high"],
                            fraction_not_better=d["fraction_not_better"],
                        )
                    )
    return out


def _profile_table(
    dataset: str, rows: list[CellResult], direction: str, tie_policy: str
) -> Table | None:
    """The requested profiles beside canonical, for one dataset and direction (None when no
    cell of it asks for a profile other than canonical).

    Layout: rows are (model, profile), the canonical row first, then the profiles in the
    order the study asks for them; columns are the measures (:data:`CONCEPTS` of ``explain``)
    that at least one requested profile defines in this direction. So the table reads like
    the canonical one (models by measures), each profile's number sits right under the
    canonical number it is compared with, and a measure the profile does not define reads
    "Not recorded / undefined". One table per profile would put the numbers to compare in
    different tables; profile columns would make a table of up to 44 columns. No best value
    is marked: the rows are not rivals (the canonical table marks the best model).
    """
    requested = list(dict.fromkeys(p for r in rows for p in r.cell.profiles if not is_canonical(p)))
    if not requested:
        return None

    def peer(profile: str, concept: str) -> str | None:
        return peer_name(profile, concept, direction)

    concepts = [c for c in CONCEPTS if any(peer(p, c) for p in requested)]
    if not concepts:
        return None
    body: list[tuple[str, tuple[float | str | None, ...]]] = []
    for r in rows:
        canonical = r.metrics.get(direction, {})
        own = (canonical_profile(), *(canonical.get(CONCEPTS[c]) for c in concepts))
        body.append((r.cell.model, own))
        for p in (p for p in requested if p in r.cell.profiles):
            values = r.profiles.get(p, {})
            body.append(
                (
                    r.cell.model,
                    (p, *(values.get(n) if (n := peer(p, c)) else None for c in concepts)),
                )
            )
    names = "; ".join(
        f"{p}: " + ", ".join(f"{c} = {n}" for c in concepts if (n := peer(p, c))) for p in requested
    )
    word = "text to audio" if direction == "t2a" else "audio to text"
    return Table(
        f"{dataset}, {word}: requested profiles beside canonical",
        (Column("profile"), *(Column(c) for c in concepts)),
        tuple(body),
        notes=(
            f"Canonical: definitions v{DEFINITIONS_VERSION}, {tie_policy} ties. Each profile's "
            f"value under the peer's own name ({names}); not defined by the profile: "
            "Not recorded / undefined.",
        ),
    )


def _dataset_tables(
    dataset: str, rows: list[CellResult], tie_policy: str, names: tuple[str, ...]
) -> dict[str, Table]:
    """Per direction: the canonical table (models x metrics, intervals under the headline
    numbers) and, when the study asks for other profiles, the profiles beside it."""
    tables: dict[str, Table] = {}
    for direction in DIRECTIONS:
        columns = tuple(Column(n, metric_by_name(n).higher_is_better) for n in names)
        body = tuple(
            (r.cell.model, tuple(r.metrics.get(direction, {}).get(n) for n in names)) for r in rows
        )
        name = f"{slug(dataset)}_{direction}"
        intervals = tuple(
            tuple(
                (r.intervals[direction][n][0], r.intervals[direction][n][1])
                if n in HEADLINE and r.intervals
                else None
                for n in names
            )
            for r in rows
        )
        tables[name] = Table(
            f"{dataset}, {'text to audio' if direction == 't2a' else 'audio to text'}",
            columns,
            body,
            notes=(
                f"Canonical definitions v{DEFINITIONS_VERSION}, {tie_policy} ties. "
                "Report: 95% bootstrap intervals over queries under r@1, r@5, r@10, map.",
            ),
            intervals=intervals,
        )
        profiles = _profile_table(dataset, rows, direction, tie_policy)
        if profiles is not None:
            tables[f"{name}_profiles"] = profiles
    return tables


def _tables(
    results: list[CellResult],
    parity: list[ParityCell],
    identity: list[IdentityBlock],
    golden: Summary,
    tie_policy: str,
    names: tuple[str, ...] = tuple(METRICS),
) -> dict[str, Table]:
    tables: dict[str, Table] = {}
    for dataset in dict.fromkeys(r.cell.dataset for r in results):
        rows = [r for r in results if r.cell.dataset == dataset]
        tables |= _dataset_tables(dataset, rows, tie_policy, names)
    tables["parity"] = Table(
        "Metric parity: harness against the independent reference",
        (Column("worst abs delta", False), Column("passed")),
        tuple((p["cell"], (p["worst_abs_delta"], "yes" if p["passed"] else "NO")) for p in parity),
        row_header="cell",
        digits=3,
    )
    tables["identity"] = Table(
        "Checkpoint identity",
        (
            Column("min audio cosine", True),
            Column("min text cosine", True),
            Column("similarity correlation", True),
            Column("verdict"),
        ),
        tuple(
            (
                f"{b['hf_checkpoint']} vs {b['control']}",
                (
                    min(b["audio_embedding_cosine_per_clip"], default=None),
                    min(b["text_embedding_cosine_per_clip"], default=None),
                    b["similarity_matrix_correlation"],
                    b["verdict"],
                ),
            )
            for b in identity
        ),
        row_header="pair",
        digits=6,
    )
    tables["published"] = Table(
        "Published against reproduced",
        (
            Column("published"),
            Column("reproduced"),
            Column("delta"),
            Column("tolerance"),
            Column("status"),
        ),
        tuple(
            (
                f"{row['cell']} {row['metric']}",
                (
                    row["published"],
                    row["reproduced"],
                    row["delta"],
                    row["tolerance"],
                    row["status"],
                ),
            )
            for row in golden["rows"]
        ),
        row_header="cell / metric",
        digits=6,
    )
    return tables


@dataclass
class RetrievalState(KindState):
    """A retrieval study between the steps of :class:`RetrievalKind`."""

    study: RetrievalStudy | None = None
    ctx: Context | None = None
    results: list[CellResult] = field(default_factory=list)
    paired: list[PairedRecord] = field(default_factory=list)
    parity: ParityBlock | None = None
    identity: list[IdentityBlock] = field(default_factory=list)

    def loaded(self) -> list[CellResult]:
        return [r for r in self.results if r.dump is not None]


def _cell_extraction(cell: Cell) -> CellExtraction:
    from audiorepro.models.extract import merge
    from audiorepro.runner.cache import extract_cell, extract_key
    from audiorepro.runner.executors.extraction import CellExtraction

    def write_part(shard: tuple[int, int], key: str, out: Path) -> None:
        extract_cell(cell, out, key, shard)

    def merge_parts(parts: list[Path], key: str, dest: Path) -> None:
        merge(parts, dest)

    return CellExtraction(cell.id, lambda: extract_key(cell), True, write_part, merge_parts)


def retrieval_extraction(study: RetrievalStudy) -> StudyExtraction:
    """Every extraction cell of a retrieval study (a dump-only cell extracts nothing), with
    the folders of its clips, captions and registries."""
    from audiorepro.runner.executors.extraction import ModelUse, StudyExtraction

    cells = [c for c in study.cells if c.extract is not None]
    read_only = {study.source.parent.resolve()}
    for cell in cells:
        e = cell.extract
        assert e is not None
        read_only |= {e.audio.resolve(), e.captions.resolve().parent}
        if e.registry is not None:
            read_only.add(e.registry.resolve().parent)
    models = [
        ModelUse(c.id, c.extract.model, c.extract.registry, "retrieval")
        for c in cells
        if c.extract is not None
    ]
    models += [ModelUse(None, m, i.registry, None) for i in study.identity for m in (i.a, i.b)]
    return StudyExtraction(
        study.name,
        study.source,
        tuple(map(_cell_extraction, cells)),
        frozenset(read_only),
        tuple(models),
    )


@register_kind
class RetrievalKind(StudyKind["RetrievalStudy", RetrievalState]):  # the spec: imported to parse
    """Audio-text retrieval over dumps (given or extracted through the cache)."""

    name = "retrieval"
    bundle_schema = RETRIEVAL_BUNDLE
    run_checks = "metric parity and identity checks"
    extracts = True
    table_progress = True

    def parse(self, doc: dict[str, Any], source: Path, strict: bool) -> RetrievalStudy:
        """Its spec: :mod:`.spec`."""
        from audiorepro.runner.kinds.retrieval.spec import parse_retrieval

        return parse_retrieval(doc, source, strict)

    def extraction(self, study: RetrievalStudy) -> StudyExtraction:
        return retrieval_extraction(study)

    def load(self, study: RetrievalStudy, ctx: Context) -> RetrievalState:
        state = RetrievalState(study=study, ctx=ctx, results=[CellResult(c) for c in study.cells])
        for res in _progress(state.results, "extract", ctx.progress):
            load_cell(res, ctx.cache, empty_queries=study.empty_queries)
            if res.error is not None:
                state.failures.append(f"cell {res.cell.id}: {res.error}")
        return state

    def compute(self, state: RetrievalState) -> None:
        assert state.study is not None and state.ctx is not None
        for res in _progress(state.loaded(), "metrics", state.ctx.progress):
            _cell_metrics(res, state.study)
        state.paired = _paired(state.results, state.study)

    def check_parity(self, state: RetrievalState) -> None:
        """Harness against the reference per cell, then each identity check (its verdict is
        checked against the study's ``expect``, like parity against the reference)."""
        assert state.study is not None and state.ctx is not None
        study, progress = state.study, state.ctx.progress
        cells: list[ParityCell] = []
        for res in _progress(state.loaded(), "parity", progress):
            assert res.dump is not None
            cell = parity_cell(
                res.dump,
                tolerance=DEFAULT_TOLERANCE,
                tie_policy=study.tie_policy,
                cutoffs=study.cutoffs,
            )
            cell["cell"] = res.cell.id
            res.parity = cell
            cells.append(cell)
            if not cell["passed"]:
                state.failures.append(
                    f"metric parity failed for cell {res.cell.id} "
                    f"(worst {cell['worst_abs_delta']:.3g})"
                )
        state.parity = {
            "cells": cells,
            "n_cells": len(cells),
            "cells_with_multi_positive_ap": sum(1 for c in cells if c["multi_positive"]),
            "tolerance": DEFAULT_TOLERANCE,
            "worst_abs_delta": max((c["worst_abs_delta"] for c in cells), default=0.0),
            "passed": all(c["passed"] for c in cells) and len(cells) == len(state.results),
        }
        for check in _progress(list(study.identity), "identity", progress):
            block = _identity(check)
            state.identity.append(block)
            if check.expect is not None and block["verdict"] != check.expect:
                state.failures.append(
                    f"identity {check.a} vs {check.b}: {block['verdict']} (expected {check.expect})"
                )

    def compare_published(self, state: RetrievalState) -> Summary:
        assert state.study is not None and state.ctx is not None
        return summarize(golden_rows(state.study, state.results, state.ctx.progress))

    def tables(self, state: RetrievalState, golden: Summary) -> dict[str, Table]:
        assert state.study is not None and state.parity is not None
        study = state.study
        return _tables(
            state.results, state.parity["cells"], state.identity, golden, study.tie_policy,
            metric_names(study.cutoffs),
        )  # fmt: skip

    def bundle_part(
        self, state: RetrievalState, golden: Summary, tables: dict[str, Table]
    ) -> BundlePart:
        assert state.study is not None and state.parity is not None
        identity = state.identity
        verification: RetrievalVerification = {
            "metric_parity": state.parity,
            "checkpoint_identity": identity[0] if identity else None,
            "checkpoint_identities": identity,
            "metric_parity_passed": state.parity["passed"],
            "cross_pipeline_comparable": bool(identity)
            and all(b["verdict"] == "identical" for b in identity),
            "failures": state.failures,
            "golden": golden,
        }
        bundle = _bundle(state.study, state.results, state.paired, verification)
        report = render_report(state.study, bundle, tables)
        dumps = [r.dump for r in state.results if r.dump is not None]
        return BundlePart(verification, report, bundle, dumps)

    def verify(self, study: RetrievalStudy, cache: Path) -> Summary:
        needed = {p.cell for p in study.published}
        results = [CellResult(c) for c in study.cells if c.id in needed]
        for res in results:
            load_cell(res, cache, empty_queries=study.empty_queries)
        return summarize(golden_rows(study, results))

    def numbers(self, bundle: JsonObject) -> Iterator[NumberRecord]:
        yield from cell_records(bundle, "cells", classify=_classify, identities=dump_identities)
        yield from rest_records(bundle, ("cells",), _classify_rest)

    def records(self, bundle: JsonObject) -> list[Identity]:
        """What each retrieval cell depends on: weights, encoder code, preprocessing, inputs
        and software of an extracted dump (its recorded meta), or the shipped dump itself
        (``inputs``); the run's tie policy and bootstrap (``study``)."""
        study = bundle["study"]
        out = run_records(
            {"tie_policy": study["tie_policy"], "bootstrap": study["bootstrap"]},
            bundle["definitions_version"],
        )
        for cell in bundle["cells"]:
            cid = str(cell["id"])
            if extracted(cell):
                out += extraction_records(cid, cell["model_meta"])
            else:
                dump = pick(cell, ("dump_sha256", "n_clips", "n_captions", "error"))
                out.append(identity(cid, "inputs", dump))
        return out

    def moves(self, bundle: JsonObject, number: NumberRecord) -> Moves:
        return _moves(bundle, number.where)


def _moves(bundle: JsonObject, where: tuple[str | int, ...]) -> Moves:
    """A retrieval number: a cell's metric (tier a over a shipped dump, b over an extracted
    one; the laion-clap profile's float32 logits b always), its rank counts (rank rule), its
    input counts (tier a, moved by its inputs and preprocessing only); a paired difference
    depends on both cells; a study-level number on the cell a table on its way names, else
    on every cell."""
    if where[0] == "paired_bootstrap" and len(where) > 2 and isinstance(where[1], int):
        pair = bundle["paired_bootstrap"][where[1]]
        a, b = str(pair["a"]), str(pair["b"])
        cells = {str(c["id"]): c for c in bundle["cells"]}
        tier: Tier = "b" if any(extracted(cells.get(x, {})) for x in (a, b)) else "a"
        deps = keys(a, CELL_CAUSES, tier=tier) | keys(b, CELL_CAUSES, tier=tier)
        return Moves(f"{a} | {b}", tier, deps, rule="ranks")
    if not in_cell(where):
        return study_level(bundle, where, CELL_CAUSES)
    cell = bundle["cells"][where[1]]
    cid, below = str(cell["id"]), where[2:]
    tier = "b" if extracted(cell) else "a"
    head, rest = below[0], "/".join(map(str, below[1:]))
    deps = keys(cid, CELL_CAUSES, tier=tier)
    if head == "metrics":
        return Moves(cid, tier, deps, "retrieval", rest)
    if head == "profiles" and len(below) > 2:
        own = float32_profile(str(below[1]))  # its tier rule, as checks.tiers reads it
        tier = "b" if own else tier
        name = "/".join(map(str, below[2:]))
        return Moves(cid, tier, keys(cid, CELL_CAUSES, tier=tier), "retrieval", name, own)
    if head == "curves" and len(below) == 3 and isinstance(below[2], int):
        return Moves(cid, tier, deps, "retrieval", f"{below[1]}/r@{below[2] + 1}")
    if head in ("intervals", "rank_histogram", "ties"):
        return Moves(cid, tier, deps, "ranks")
    if head in ("n_clips", "n_captions", "captions_per_clip"):
        # how many clips and captions: only another clip set or captions layout moves them
        return Moves(cid, "a", keys(cid, ("preprocessing", "inputs"), tier="a"))
    return Moves(cid, "a", keys(cid, CELL_CAUSES, tier="a"))  # settings: exact everywhere


#: Parts of a retrieval cell that describe its inputs, not a computed number.
_INPUT_KEYS = ("n_clips", "n_captions", "captions_per_clip", "model_meta")


def _classify(cell: JsonObject, below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A cell's number: a metric with its direction, tier a over a shipped dump and tier b
    over an extracted one (its meta names the weights) or in the float32 laion-clap
    profile; or an input count (no tier)."""
    head = below[0] if below else ""
    if head in _INPUT_KEYS:
        return None, None
    extracted = "weights_sha256" in (cell.get("model_meta") or {})
    float32 = head == "profiles" and len(below) > 1 and float32_profile(str(below[1]))
    tier: NumberTier = "b" if extracted or float32 else "a"
    if head in ("metrics", "profiles") and len(below) >= 3:
        return _better(str(below[-1])), tier
    if head == "intervals" and len(below) >= 3:
        return _better(str(below[2])), tier
    if head == "curves":
        return "higher", tier
    return None, tier


def _better(name: str) -> Better:
    if not is_metric_name(name):
        return None
    return "higher" if metric_by_name(name).higher_is_better else "lower"


def _classify_rest(below: tuple[str | int, ...]) -> tuple[Better, NumberTier]:
    """A study-level number: identity cosines and correlation (tier b, higher), parity
    deltas (lower), paired differences, settings and counts."""
    name = str(below[-1]) if below else ""
    if "checkpoint_identities" in below or "checkpoint_identity" in below:
        return ("higher" if "cosine" in name or "correlation" in name else None), "b"
    if "worst_abs_delta" in name or name == "abs_delta":
        return "lower", "a"
    if below and below[0] == "paired_bootstrap":
        return None, "a"
    return None, None


def load_cell(res: CellResult, cache: Path, *, empty_queries: EmptyPolicy | None = None) -> None:
    """Load (or extract) a cell's dump; a problem is recorded on the cell, not raised.
    ``empty_queries``: the study's policy for queries without a relevant item."""
    from audiorepro.runner.executors.local import extract_local

    try:
        if res.cell.extract is not None:
            res.dump = extract_local(res.cell, cache)
        elif res.cell.dump is None or not res.cell.dump.is_file():
            res.error = f"dump {res.cell.dump} is not available here"
        else:
            res.dump = load_dump(res.cell.dump, empty_queries=empty_queries)
            if res.cell.sha256 == PLACEHOLDER:
                res.error = (
                    f"the study has no verified SHA-256 for {res.cell.dump.name} yet "
                    f"(this file: {res.dump.sha256})"
                )
                res.dump = None
            elif res.dump.sha256 != res.cell.sha256:
                res.error = (
                    f"dump {res.cell.dump.name} has SHA-256 {res.dump.sha256}, "
                    f"the study expects {res.cell.sha256}"
                )
                res.dump = None
        if res.dump is not None:
            # A profile whose definition cannot apply to this relevance (laion-clap or dcase
            # on class prompts) is the cell's problem, said before any metric is computed.
            for profile in res.cell.profiles:
                check_profile_applies(res.dump, profile)
    except WriteError:
        raise  # an output (the cache) that cannot be written stops the run: not a bad cell
    except UserError as exc:
        res.error = str(exc) + _fetch_hint(res)
        res.dump = None


def _fetch_hint(res: CellResult) -> str:
    """The ``fetch`` that prepares a cell's missing extraction input: a folder under DATA
    named after a bundled dataset (``DATA/clotho-eval/audio`` -> ``fetch clotho-eval``)."""
    extract = res.cell.extract
    if extract is None:
        return ""
    for path in (extract.audio, extract.captions):
        if path.exists():
            continue
        for folder in path.parents:
            kind = _fetchable().get(folder.name)
            if kind is not None:
                # The cell's caption selection (the published protocol: one caption per
                # clip); fetch's default, all five, would make a dump the values refuse.
                selection = {None: "first-id", "ids": "ids:FILE"}.get(
                    extract.caption_selection, extract.caption_selection
                )
                extra = (
                    f" --audio AUDIOCAPS_TEST_AUDIO --caption-selection {selection}"
                    if kind == "audiocaps"
                    else ""
                )
                return (
                    f" (get it: audiorepro fetch {folder.name} --data {folder.parent}{extra}; "
                    f"and the checkpoint: audiorepro fetch {extract.model})"
                )
    return ""


@functools.cache
def _fetchable() -> dict[str, str]:
    """The datasets ``audiorepro fetch`` prepares (the bundled registry): name -> kind."""
    from audiorepro.fetch.datasets import bundled_datasets, read_datasets

    return {name: ds.kind for name, ds in read_datasets(bundled_datasets()).items()}


def identity_mismatch(pub: Published, dump: Dump | None) -> str | None:
    """Why a dump is not the one the published values were computed on (its clip or caption
    count differs: another subset, another caption selection), or None. Such values are not
    compared (NOT VERIFIED, with this reason), never counted as a FAIL."""
    if dump is None:
        return None
    for what, want, got in (
        ("clips", pub.n_clips, dump.n_clips),
        ("captions", pub.n_captions, dump.n_captions),
    ):
        if want is not None and got != want:
            return (
                f"the dump has {dump.n_clips} clips and {dump.n_captions} captions, the "
                f"published values' dump {pub.n_clips} and {pub.n_captions}: not the same "
                f"{what}, so the values do not compare (see the study's caption_selection)"
            )
    return None


def golden_rows(
    study: RetrievalStudy, results: list[CellResult], progress: bool = False
) -> list[ValueRow]:
    """One row per published value: PASS, FAIL, or NOT VERIFIED when its cell has no dump."""
    rows: list[ValueRow] = []
    by_id = {r.cell.id: r for r in results}
    for pub in _progress(list(study.published), "golden", progress):
        res = by_id[pub.cell]
        reason = res.error if res.error is not None else identity_mismatch(pub, res.dump)
        reproduced: dict[str, float] = {}
        if reason is None and res.dump is not None:
            if res.retrieval is None:
                res.retrieval = compute_retrieval(res.dump)
            if is_canonical(pub.profile):
                m = res.retrieval.metrics(pub.tie_policy, study.cutoffs)
                reproduced = {f"{d}/{n}": v for d in DIRECTIONS for n, v in m[d].items()}
                for key in pub.values:  # a published metric at a cutoff the study has not
                    d, _, n = key.partition("/")
                    if key not in reproduced and d in DIRECTIONS and is_metric_name(n):
                        reproduced[key] = res.retrieval.value(d, n, pub.tie_policy)
            else:
                try:
                    check_profile_applies(res.dump, pub.profile)
                except UserError as exc:  # its definition cannot apply to this dump
                    reason = str(exc)
                else:
                    reproduced = compute_profile(
                        res.dump,
                        pub.profile,
                        result=res.retrieval,
                        tie_policy=pub.tie_policy,
                        cutoffs=published_cutoffs(pub.profile, list(pub.values), study.cutoffs),
                    ).metrics
        rows += [
            ValueRow(**r, provenance=pub.provenance)
            for r in value_rows(
                pub.cell, pub.values, pub.tolerance, reproduced, reason, pub.profile
            )
        ]
    return rows


def _identity(check: IdentityCheck) -> IdentityBlock:
    from audiorepro.models.identity import compare, load_fixture
    from audiorepro.models.registry import load_registry, resolve_spec

    registry = load_registry([check.registry] if check.registry else [])
    report = compare(
        resolve_spec(check.a, registry),
        resolve_spec(check.b, registry),
        load_fixture(check.audio, check.captions),
        a_overrides=check.a_settings,
        b_overrides=check.b_settings,
    )
    return report["checkpoint_identity"]


def _bundle(
    study: RetrievalStudy,
    results: list[CellResult],
    paired: list[PairedRecord],
    verification: RetrievalVerification,
) -> RetrievalBundle:
    from audiorepro.specs.selection import selection_record

    cells = []
    for r in results:
        entry: BundleCell = {
            "id": r.cell.id,
            "model": r.cell.model,
            "dataset": r.cell.dataset,
            "error": r.error,
        }
        if r.dump is not None:
            entry |= {
                "dump_sha256": r.dump.sha256,
                "n_clips": r.dump.n_clips,
                "n_captions": r.dump.n_captions,
                "captions_per_clip": r.dump.captions_per_clip,
                "model_meta": {
                    k: r.dump.meta[k]
                    for k in (
                        "model",
                        "revision",
                        "weights_sha256",
                        "encoder_code",
                        "preprocessing",
                        "inputs",
                        "versions",
                    )
                    if k in r.dump.meta
                },
                "curves": r.curves,
                "rank_histogram": r.rank_histogram,
                "metrics": r.metrics,
                "ties": r.ties,
                "profiles": r.profiles,
                "intervals": r.intervals,
            }
            levels = r.dump.gain_levels()
            if levels is not None:  # absent for binary relevance: bytes unchanged
                entry["graded_relevance"] = levels
        cells.append(entry)
    bundle: RetrievalBundle = {
        "schema": RETRIEVAL_BUNDLE,
        "definitions_version": DEFINITIONS_VERSION,
        "study": {
            "name": study.name,
            "title": study.title,
            "sha256": sha256_file(study.source),
            "tie_policy": study.tie_policy,
            "bootstrap": {
                "resamples": study.bootstrap.resamples,
                "seed": study.bootstrap.seed,
                "level": study.bootstrap.level,
            },
        },
        "cells": cells,
        "paired_bootstrap": paired,
        "verification": verification,
        "status": {
            "passed": not verification["failures"],
            "counts": verification["golden"]["counts"],
            "statuses": [PASS, FAIL, NOT_VERIFIED],
        },
    }
    if study.cutoffs is not None:  # absent for a study without k: bytes unchanged
        bundle["study"]["k"] = list(study.cutoffs)
        bundle["definitions_minor"] = DEFINITIONS_MINOR
    if study.empty_queries is not None:  # absent without a policy: bytes unchanged
        bundle["study"]["empty_queries"] = study.empty_queries
    selection = selection_record(study.selection)
    if selection is not None:  # absent for a whole study on its own devices: bytes unchanged
        bundle["selection"] = selection
    return bundle

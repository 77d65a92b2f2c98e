"""Probe tables from saved measurements, and their parity with recomputed numbers.

A probe run may name saved metric files (``[run.metrics.<split>]``, :mod:`.measurements`)
as well as, or instead of, a prediction file. From the saved files alone this module builds

``task_leaders``     per ``[[leaders]]`` task: the best run among the candidates (runs whose
                     attributes match the task's filter) by a saved metric path, its value, the
                     baseline runs' values beside it, and the best observed run over both
``families``         per run (of the study's primary split): each ``[families]`` family's mean
                     normalized MAE and Spearman (:func:`family_mean`)
``burst_speaker``    per run: clips, frame and event F1, boundary MAE, span class accuracies,
                     each named speaker-vector set's mean cosine with its valid count, CPS MAE
``saved_target_<t>`` per target: n, raw/normalized MAE, Pearson, Spearman of every run
``public_<bench>``   per public benchmark: every recorded cut of every run
``adapters``         per run: each supervised adapter's accuracy
``retention``        one model's runs of different phases on each identical extra split
``summary_<split>``  per ``summaries`` entry: one row per run that has the split, the
                     held-out summary columns of ``burst_speaker`` or the declared key paths
``completion``       declared vs found runs and targets
``training``         the ``config_fields`` the study names, from each run's ``[run.config]``
``panel_<run>_<split>``  every recorded number of one saved file

Where a run has predictions too, :func:`parity` compares each saved number of the parity split
with the number recomputed from the predictions: one cell per metric with ``saved``,
``recomputed``, ``abs_delta`` and ``tolerance``. A saved number that differs by more than the
tolerance fails the study, and so does one where the predictions give an undefined number; a
saved null (not recorded) claims nothing and is not compared. :func:`parity_table` lists every
compared number (``metric_parity``); :func:`parity_summary_table` sums them up per run and split
(``metric_parity_summary``: compared, failed, the largest difference and where), which is what
the report shows, the full list on demand.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from audiorepro.core.errors import UserError
from audiorepro.formats.keypath import KeyPathError, locate
from audiorepro.metrics.probe import family_mean
from audiorepro.metrics.probe_records import HumanCutReport, ProbeReport
from audiorepro.reference import probe as ref
from audiorepro.render.tables import (
    NOT_APPLICABLE,
    NOT_APPLICABLE_NOTE,
    Cell,
    Column,
    Table,
    slug,
)
from audiorepro.runner.kinds.probe.content import read_key_paths
from audiorepro.runner.kinds.probe.measured import Measurements
from audiorepro.runner.kinds.probe.measurements import number_at
from audiorepro.runner.kinds.probe.records import (
    MetricParity,
    ProbeRun,
    SavedLeaderRecord,
)
from audiorepro.runner.kinds.probe.spec import ProbeStudy
from audiorepro.runner.output.outputs import ParityCell

IOU = ("0.1", "0.3", "0.5")
SCORE_FIELDS = ("n", "raw_mae", "normalized_mae", "pearson", "spearman")
#: saved held-out field -> recomputed probe-report path (``audiorepro.probe/1``)
EVENT_PARITY = {
    "frame_f1": "events/frame_f1",
    "burst_start_mae_s": "events/start_mae_s",
    "burst_end_mae_s": "events/end_mae_s",
    "burst_class_oracle_span_accuracy": "events/oracle_span_class_accuracy",
    "burst_matched_event_class_accuracy": "events/detected_span_class_accuracy",
}
#: saved per-score field -> recomputed regression field
SCORE_PARITY = {
    "n": "n",
    "raw_mae": "mae",
    "normalized_mae": "normalized_mae",
    "pearson": "pearson",
    "spearman": "spearman",
}


def split_of(path: str) -> tuple[str, str, str]:
    """A saved-measurement path's split, separator and rest: ``test/frame_f1`` (a path of the
    split's shape) or ``test:per_score[score=a].n`` (a key path into the whole file).

    >>> split_of("test/per_score/a:b/n"), split_of("history:[epoch=3].val_loss")
    (('test', '/', 'per_score/a:b/n'), ('history', ':', '[epoch=3].val_loss'))
    """
    cut = min((i for i in (path.find("/"), path.find(":")) if i >= 0), default=len(path))
    return path[:cut], path[cut : cut + 1], path[cut + 1 :]


def saved_value(
    saved: dict[str, Any],
    path: str,
    families: dict[str, str],
    documents: Mapping[str, Measurements] | None = None,
) -> float | int | None:
    """A number in a run's saved files by path: ``<split>/<field>/...`` or
    ``<split>:<key path>`` (:mod:`audiorepro.formats.keypath`, over the whole file as it was
    saved, unknown keys and JSONL lines included; a non-number there is exit 2).

    ``per_score/<score>/<field>`` names a target's field, ``family/<name>/<field>`` a family
    mean; anything else walks the JSON tables. A missing split, key or null value is None.

    >>> saved = {"test": {"frame_f1": 0.5, "per_score": [{"score": "a/b", "n": 3}],
    ...                   "burst_localization": {"0.5": {"f1": 0.25}}}}
    >>> [saved_value(saved, p, {}) for p in ("test/frame_f1", "test/per_score/a/b/n",
    ...                                      "test/burst_localization/0.5/f1", "val/loss")]
    [0.5, 3, 0.25, None]
    """
    split, sep, rest = split_of(path)
    if sep == ":":
        document = (documents or {}).get(split)
        return None if document is None else number_at(document, rest)
    node: Any = saved.get(split)
    if node is None:
        return None
    parts = rest.split("/")
    if parts[0] == "per_score" and len(parts) >= 3:
        score, field = "/".join(parts[1:-1]), parts[-1]
        hit = next((s for s in node.get("per_score", []) if s["score"] == score), None)
        value = None if hit is None else hit.get(field)
        # A number only: ``score`` is the target's name (a string), not a measurement.
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if parts[0] == "family" and len(parts) == 3:
        prefix = families.get(parts[1])
        if prefix is None:
            return None
        return family_mean(node.get("per_score", []), prefix, parts[2])
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return node


def _label(run: ProbeRun) -> str:
    """A run's row label: its model, phase and domain (one model has runs in several)."""
    parts = [run["model"], *(run["attributes"].get(a) for a in ("phase", "domain"))]
    return " / ".join(str(p) for p in parts if p)


def _attribute_names(runs: list[ProbeRun]) -> list[str]:
    return list(dict.fromkeys(k for r in runs for k in r["attributes"]))


def _matches(run: ProbeRun, wanted: dict[str, str]) -> bool:
    return all(run["attributes"].get(k) == v for k, v in wanted.items())


@dataclass(frozen=True)
class SavedLeader:
    """A ``[[leaders]]`` task over saved measurements (the bundle's ``task_leaders`` entries,
    :func:`dataclasses.asdict`): the best candidate and its value, each baseline's value by
    run id (None: the baseline's files hold no such number), the best observed run."""

    task: str
    metric: str
    label: str
    higher_is_better: bool
    percent: bool
    best_candidate_run: str | None
    best_candidate_value: float | int | None
    baselines: dict[str, float | int | None]
    highest_measured_run: str | None

    def record(self) -> SavedLeaderRecord:
        """As the bundle keeps it (the fields as a JSON object)."""
        return {
            "task": self.task,
            "metric": self.metric,
            "label": self.label,
            "higher_is_better": self.higher_is_better,
            "percent": self.percent,
            "best_candidate_run": self.best_candidate_run,
            "best_candidate_value": self.best_candidate_value,
            "baselines": dict(self.baselines),
            "highest_measured_run": self.highest_measured_run,
        }


def task_leaders(study: ProbeStudy, runs: list[ProbeRun]) -> list[SavedLeader]:
    """Per ``[[leaders]]`` task: best candidate, baselines' values, best observed run."""
    by_id = {r["id"]: r for r in runs}
    out = []
    for lead in study.leaders:

        def value(run: ProbeRun, metric: str = lead.metric) -> float | int | None:
            return saved_value(run["saved"], metric, study.families, run.get("documents"))

        def pick(pool: list[ProbeRun], higher: bool = lead.higher) -> ProbeRun | None:
            defined = [r for r in pool if value(r) is not None]
            if not defined:
                return None
            # Ties: the first declared run wins (min/max keep the first extreme).
            key = (lambda r: -float(value(r) or 0)) if higher else (lambda r: float(value(r) or 0))
            return min(defined, key=key)

        candidates = [r for r in runs if _matches(r, lead.candidates)]
        best = pick(candidates)
        baselines = [by_id[b] for b in lead.baselines]
        overall = pick(([best] if best else []) + baselines)
        out.append(
            SavedLeader(
                task=lead.task,
                metric=lead.metric,
                label=lead.label,
                higher_is_better=lead.higher,
                percent=lead.percent,
                best_candidate_run=None if best is None else best["id"],
                best_candidate_value=None if best is None else value(best),
                baselines={b["id"]: value(b) for b in baselines},
                highest_measured_run=None if overall is None else overall["id"],
            )
        )
    return out


def percent_cell(value: float | int | None, percent: bool) -> float | int | None:
    # Percent columns carry 100 x the fraction, so that every rendering shows the module's
    # percentage (with the table's decimals); the fraction stays in the bundle.
    return None if value is None else (100.0 * value if percent else value)


@dataclass(frozen=True)
class FieldColumn:
    """A declared column: the field it shows (a key of a run's report section, or of a saved
    split's shape), its column, and whether the fraction is shown as a percentage
    (:func:`percent_cell`). The recomputed tables (:mod:`.runs`) and the saved ones share it."""

    field: str
    column: Column
    percent: bool = False


#: burst_speaker's timing columns, after clips, frame F1 and the event F1 at each IoU
BURST_TIMING = (
    FieldColumn("burst_start_mae_s", Column("start_mae_s", False)),
    FieldColumn("burst_end_mae_s", Column("end_mae_s", False)),
    FieldColumn(
        "burst_class_oracle_span_accuracy", Column("oracle_span_class_accuracy (%)", True), True
    ),
    FieldColumn(
        "burst_matched_event_class_accuracy",
        Column("detected_span_class_accuracy (%)", True),
        True,
    ),
)
SCORE_COLUMNS = (
    Column("n"),
    Column("raw_mae", False),
    Column("normalized_mae", False),
    Column("pearson", True),
    Column("spearman", True),
)
#: The fields a public benchmark's cut may record, in the table's order; a field no run
#: records is left out. Neutral (no best marked): counts and rates; lower is better: errors.
PUBLIC_FIELDS = (
    "n",
    "prompts",
    "positive_rate",
    "mean_prompt_spearman",
    "balanced_accuracy_oracle_per_prompt",
    "balanced_accuracy_oracle_overall",
    "balanced_accuracy_5fold_clip_grouped",
    "mae",
    "rmse",
    "pearson",
    "spearman",
)
PUBLIC_NEUTRAL = frozenset({"n", "prompts", "positive_rate"})
PUBLIC_LOWER = frozenset({"mae", "rmse"})
# Accuracy and F1 as percentages, as the published probe report shows them: the recomputed
# classification tables and the saved adapters' alike.
CLASSIFICATION_FIELDS = (
    FieldColumn("n", Column("n")),
    FieldColumn("accuracy", Column("accuracy (%)", True), True),
    FieldColumn("balanced_accuracy", Column("balanced_accuracy (%)", True), True),
    FieldColumn("macro_f1", Column("macro_f1 (%)", True), True),
)
PROMPT_FIELDS = (
    FieldColumn("prompt", Column("prompt")),
    FieldColumn("n", Column("n")),
    FieldColumn("spearman", Column("spearman", True)),
    FieldColumn("balanced_accuracy_oracle", Column("balanced_accuracy_oracle", True)),
)
DIMENSION_FIELDS = (
    FieldColumn("dimension", Column("dimension")),
    FieldColumn("n", Column("n")),
    FieldColumn("prompts", Column("prompts")),
    FieldColumn("mean_prompt_spearman", Column("mean_prompt_spearman", True)),
    FieldColumn(
        "balanced_accuracy_oracle_per_prompt", Column("balanced_accuracy_oracle_per_prompt", True)
    ),
)
CATEGORY_FIELDS = ("n", "mae", "rmse", "pearson", "spearman")


def _task_leaders_table(runs: list[ProbeRun], lead: list[SavedLeader]) -> Table:
    """Per task: the best candidate and its value, each baseline's value, the best observed."""
    by_id = {r["id"]: r for r in runs}
    baseline_ids = list(dict.fromkeys(b for t in lead for b in t.baselines))
    cols = [Column("metric"), Column("best candidate"), Column("value")]
    cols += [Column(_label(by_id[b])) for b in baseline_ids]
    cols += [Column("best observed")]
    rows = []
    for t in lead:
        arrow = " ↑" if t.higher_is_better else " ↓"
        pct = t.percent
        best = t.best_candidate_run
        win = t.highest_measured_run
        cells: list[Cell] = [
            t.label + (" (%)" if pct else "") + arrow,
            None if best is None else _label(by_id[best]),
            percent_cell(t.best_candidate_value, pct),
        ]
        # A baseline the task does not compare has no value by design (a dash), one it
        # compares but whose files hold no such number was expected ("not recorded").
        cells += [
            percent_cell(t.baselines[b], pct) if b in t.baselines else NOT_APPLICABLE
            for b in baseline_ids
        ]
        cells.append(None if win is None else _label(by_id[win]))
        rows.append((t.task, tuple(cells)))
    return Table(
        "Task leaders from saved measurements (best candidate, baselines beside it)",
        tuple(cols),
        tuple(rows),
        row_header="task",
        notes=("Candidates: runs whose attributes match the task's filter.",)
        + (
            (NOT_APPLICABLE_NOTE.removesuffix(".") + ": a baseline the task does not compare.",)
            if any(NOT_APPLICABLE in cells for _, cells in rows)
            else ()
        ),
    )


def _families_table(study: ProbeStudy, held: list[ProbeRun], attrs: list[str]) -> Table:
    """Per run of the primary split: each family's mean normalized MAE and Spearman."""
    split = study.parity_split
    cols = [Column(a) for a in attrs]
    for name in study.families:
        cols += [Column(f"{name} normalized_mae", False), Column(f"{name} spearman", True)]
    rows = []
    for r in held:
        scores = r["saved"][split]["per_score"]
        means = [
            family_mean(scores, prefix, measure)
            for prefix in study.families.values()
            for measure in ("normalized_mae", "spearman")
        ]
        rows.append((_label(r), (*(r["attributes"].get(a) for a in attrs), *means)))
    return Table(
        f"Target families ({split}): equal-weight means over each run's valid targets",
        tuple(cols),
        tuple(rows),
        notes=tuple(f"{n}: targets named {p}*" for n, p in study.families.items()),
    )


def _burst_speaker_table(held: list[ProbeRun], attrs: list[str], split: str) -> Table:
    """Per run: clips, frame and event F1, timing, span classes, speaker sets, CPS MAE."""
    speakers = list(dict.fromkeys(n for r in held for n in r["saved"][split]["speaker_cosine"]))
    cols = [Column(a) for a in attrs] + [
        Column("clips"),
        Column("frame_f1 (%)", True),
        *(Column(f"event_f1@{t} (%)", True) for t in IOU),
        *(c.column for c in BURST_TIMING),
    ]
    for name in speakers:
        cols += [Column(f"{name} cosine", True), Column(f"{name} n")]
    cols.append(Column("cps_raw_mae", False))
    rows = []
    for r in held:
        x = r["saved"][split]
        loc = x["burst_localization"]
        row: list[Cell] = [r["attributes"].get(a) for a in attrs]
        row += [
            x["clips"],
            percent_cell(x["frame_f1"], True),
            *(percent_cell(loc.get(t, {}).get("f1"), True) for t in IOU),
            *(percent_cell(x[c.field], c.percent) for c in BURST_TIMING),
        ]
        for name in speakers:
            vec = x["speaker_cosine"].get(name, {})
            row += [vec.get("mean"), vec.get("n")]
        row.append(x["cps_raw_mae"])
        rows.append((_label(r), tuple(row)))
    return Table(
        f"Speaker vectors, speaking rate and vocal-burst timing ({split})",
        tuple(cols),
        tuple(rows),
        notes=("Compare within a test domain; N is each speaker-vector set's valid count.",),
    )


def _summary_table(
    runs: list[ProbeRun], attrs: list[str], split: str, metrics: list[str] | None
) -> Table:
    """A cross-run table of one split: the held-out summary, or the numbers at ``metrics``."""
    have = [r for r in runs if split in r["saved" if metrics is None else "documents"]]
    if metrics is None:
        table = _burst_speaker_table(have, attrs, split)
        return dataclasses.replace(table, title=f"Across runs ({split}): {table.title}")
    return Table(
        f"Across runs ({split}): {', '.join(metrics)}",
        (*(Column(a) for a in attrs), *(Column(m) for m in metrics)),
        tuple(
            (
                _label(r),
                (
                    *(r["attributes"].get(a) for a in attrs),
                    *(number_at(r["documents"][split], m) for m in metrics),
                ),
            )
            for r in have
        ),
        notes=("One row per run that has the split.",),
    )


def _held_out_tables(held: list[ProbeRun], attrs: list[str], split: str) -> dict[str, Table]:
    """burst_speaker, burst_classes and one saved_target table per target of the split."""
    tables = {"burst_speaker": _burst_speaker_table(held, attrs, split)}
    class_rows = [
        (_label(r), (c["name"], c["support"], percent_cell(c["oracle_span_accuracy"], True)))
        for r in held
        for c in r["saved"][split]["burst_per_class"]
    ]
    if class_rows:
        tables["burst_classes"] = Table(
            f"Vocal-burst classes ({split}): support and oracle-span accuracy per class",
            (Column("class"), Column("support"), Column("oracle_span_accuracy (%)", True)),
            tuple(class_rows),
            notes=("Support: reference events of the class.",),
        )
    targets = list(dict.fromkeys(s["score"] for r in held for s in r["saved"][split]["per_score"]))
    for target in targets:
        rows = []
        for r in held:
            hit = next((s for s in r["saved"][split]["per_score"] if s["score"] == target), None)
            if hit is not None:
                rows.append((_label(r), tuple(hit[c.name] for c in SCORE_COLUMNS)))
        tables[f"saved_target_{slug(target)}"] = Table(
            f"Target {target} ({split}, saved)", SCORE_COLUMNS, tuple(rows)
        )
    return tables


def _cuts(public: list[ProbeRun], bench: str) -> list[tuple[ProbeRun, str, Any]]:
    """(run, cut, numbers) of every label cut of a public benchmark (lists are not cuts)."""
    return [
        (r, cut, value)
        for r in public
        for cut, value in r["saved"]["public"].get(bench, {}).items()
        if isinstance(value, dict)
    ]


def _public_table(public: list[ProbeRun], bench: str) -> Table:
    """A public benchmark's every recorded cut of every run; the fields some run records."""
    cut_rows = _cuts(public, bench)
    fields = [f for f in PUBLIC_FIELDS if any(v.get(f) is not None for _, _, v in cut_rows)]
    return Table(
        f"Public benchmark {bench}: every recorded cut",
        (
            Column("cut"),
            *(Column(f, None if f in PUBLIC_NEUTRAL else f not in PUBLIC_LOWER) for f in fields),
        ),
        tuple((_label(r), (cut, *(v.get(f) for f in fields))) for r, cut, v in cut_rows),
    )


def _adapters_table(runs: list[ProbeRun], adapters: list[str]) -> Table:
    return Table(
        "Supervised adapters: outer-fold accuracy, balanced accuracy, macro F1 (%)",
        (Column("adapter"), *(c.column for c in CLASSIFICATION_FIELDS)),
        tuple(
            (
                _label(r),
                (
                    a,
                    *(
                        percent_cell(r["saved"][a]["metrics"].get(c.field), c.percent)
                        for c in CLASSIFICATION_FIELDS
                    ),
                ),
            )
            for a in adapters
            for r in runs
            if a in r["saved"]
        ),
    )


class TableFiles(dict[str, Table]):
    """Tables by the name of their files (``tables/<name>.csv``, ...). Names are made from a
    user's names (runs, benchmarks, splits, list keys) by :func:`slug`, which is not
    injective: a run ``a`` with a saved file ``b_c`` and a run ``a_b`` with ``c`` both name
    ``panel_a_b_c``, and a benchmark ``a_per_emotion`` and the ``per_emotion`` list of a
    benchmark ``a`` both ``public_a_per_emotion``. A second table of one name would silently
    replace the first's file, so it is refused (one line naming both tables, exit 2) before
    anything is written.

    >>> files = TableFiles("study.toml")
    >>> files["t"] = Table("one", (), ())
    >>> try:
    ...     files["t"] = Table("two", (), ())
    ... except UserError as e:
    ...     print(e)  # doctest: +NORMALIZE_WHITESPACE
    study.toml: key 'tables': two tables would be written to tables/t.*: 'one' and 'two';
    rename one of the names they are made from
    """

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def __setitem__(self, name: str, table: Table) -> None:
        if name in self:
            raise UserError(
                f"two tables would be written to tables/{name}.*: {self[name].title!r} and "
                f"{table.title!r}; rename one of the names they are made from",
                source=self.source,
                key="tables",
            )
        super().__setitem__(name, table)

    def update(self, other: Any = (), /, **more: Table) -> None:
        for name, table in dict(other, **more).items():
            self[name] = table


def _panel_tables(runs: list[ProbeRun], source: str) -> TableFiles:
    """Per run and saved file: every recorded number."""
    tables = TableFiles(source)
    for r in runs:
        for name, doc in r["saved"].items():
            tables[f"panel_{slug(r['id'])}_{slug(name)}"] = Table(
                f"{r['id']}: {name} (every recorded number)",
                (Column("recorded"),),
                tuple((path, (value,)) for path, value in _numbers(doc)),
                row_header="measurement",
            )
    return tables


def saved_tables(
    study: ProbeStudy, runs: list[ProbeRun], lead: list[SavedLeader]
) -> dict[str, Table]:
    """Every table built from saved measurements alone (see the module docstring), in the
    order the report shows them."""
    tables = TableFiles(str(study.source))
    split = study.parity_split
    attrs = _attribute_names(runs)
    if lead:
        tables["task_leaders"] = _task_leaders_table(runs, lead)
    held = [r for r in runs if split in r["saved"]]
    if study.families and held:
        tables["families"] = _families_table(study, held, attrs)
    if held:
        tables.update(_held_out_tables(held, attrs, split))
    for sm in study.content.summaries:
        tables[f"summary_{slug(sm.split)}"] = _summary_table(runs, attrs, sm.split, sm.metrics)
    public = [r for r in runs if "public" in r["saved"]]
    benches = list(dict.fromkeys(b for r in public for b in r["saved"]["public"]))
    tables.update({f"public_{slug(b)}": _public_table(public, b) for b in benches})
    for bench in benches:
        tables.update(_human_tables(public, bench))
    adapters = sorted({s for r in runs for s in r["saved"] if s.startswith("adapter")})
    if adapters:
        tables["adapters"] = _adapters_table(runs, adapters)
    retention = _retention(runs, split)
    if retention:
        tables["retention"] = retention
    if study.completion is not None:
        tables["completion"] = completion_table(study, runs)
    configured = [r for r in runs if r.get("config") is not None]
    if study.config_fields and configured:
        tables["training"] = _training_table(study, configured)
    tables.update(_panel_tables(runs, str(tables.source)))
    return tables


def _listed_rows(
    cuts: list[tuple[ProbeRun, str, Any]], key: str, fields: tuple[FieldColumn, ...]
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """One row per item of each cut's list ``key`` (per_prompt, per_dimension), the cut named
    in the first column."""
    return tuple(
        (_label(r), (cut, *(item[f.field] for f in fields)))
        for r, cut, value in cuts
        for item in value[key]
    )


def _human_tables(public: list[ProbeRun], bench: str) -> dict[str, Table]:
    """A public benchmark's per-prompt and per-dimension tables (every label cut's rows, the
    cut named in a column) and each per-category list (``per_emotion``) as its own table."""
    tables: dict[str, Table] = {}
    cuts = _cuts(public, bench)
    prompts = _listed_rows(cuts, "per_prompt", PROMPT_FIELDS)
    if prompts:
        tables[f"human_prompts_{slug(bench)}"] = Table(
            f"{bench}: every prompt, per label cut",
            (Column("cut"), *(f.column for f in PROMPT_FIELDS)),
            prompts,
            notes=("Oracle balanced accuracy: the best threshold on the prompt's own labels.",),
        )
    dims = _listed_rows(cuts, "per_dimension", DIMENSION_FIELDS)
    if dims:
        tables[f"human_dimensions_{slug(bench)}"] = Table(
            f"{bench}: every dimension, per label cut",
            (Column("cut"), *(f.column for f in DIMENSION_FIELDS)),
            dims,
        )
    lists = list(
        dict.fromkeys(
            key
            for r in public
            for key, value in r["saved"]["public"].get(bench, {}).items()
            if isinstance(value, list)
        )
    )
    for key in lists:
        tables[f"public_{slug(bench)}_{slug(key)}"] = Table(
            f"{bench}: {key.removeprefix('per_')} categories",
            (
                Column("category"),
                Column("n"),
                Column("mae", False),
                Column("rmse", False),
                Column("pearson", True),
                Column("spearman", True),
            ),
            tuple(
                (_label(r), (c["category"], *(c[f] for f in CATEGORY_FIELDS)))
                for r in public
                for c in r["saved"]["public"].get(bench, {}).get(key, [])
            ),
        )
    return tables


def _training_table(study: ProbeStudy, configured: list[ProbeRun]) -> Table:
    """The ``config_fields`` of each run's config; a dash where ``config_applies`` says the
    field is not one of the run's (its config lacks it by design), "not recorded" where it was
    expected."""

    def cell(r: ProbeRun, f: str) -> Cell:
        where = study.config_applies.get(f, {})
        if any(r["attributes"].get(k) != v for k, v in where.items()):
            return NOT_APPLICABLE
        return _config_cell((r["config"] or {}).get(f))

    rows = tuple((_label(r), tuple(cell(r, f) for f in study.config_fields)) for r in configured)
    dashed = any(NOT_APPLICABLE in cells for _, cells in rows)
    return Table(
        "Training and provenance (from each run's config)",
        tuple(Column(f) for f in study.config_fields),
        rows,
        notes=(
            (NOT_APPLICABLE_NOTE.removesuffix(".") + ": a field this kind of run does not have.",)
            if dashed
            else ()
        ),
    )


def _config_cell(value: Any) -> float | int | str | None:
    """A config value as a table cell: numbers and text as they are, a list of scalars joined,
    anything else as canonical JSON (so that nothing recorded is hidden)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _retention(runs: list[ProbeRun], primary: str) -> Table | None:
    """One model before/after: its runs of different phases on each shared extra held-out
    split (same split name = the identical selection)."""
    rows = []
    for model in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == model]
        if len({r["attributes"].get("phase") for r in mine}) < 2:
            continue
        splits = [
            s
            for s in dict.fromkeys(s for r in mine for s in r["saved"])
            # The validation split has its own cross-run summary (summary_validation): the
            # retention audit is the other shared selections (the module's P3 files).
            if s not in (primary, "public", "validation")
            and not s.startswith("adapter")
            and sum(s in r["saved"] for r in mine) >= 2
        ]
        for s in splits:
            for r in mine:
                x = r["saved"].get(s)
                if x is None:
                    continue
                speakers = x["speaker_cosine"]
                rows.append(
                    (
                        _label(r),
                        (
                            s,
                            x["clips"],
                            percent_cell(x["frame_f1"], True),
                            percent_cell(x["burst_localization"].get("0.5", {}).get("f1"), True),
                            x["burst_start_mae_s"],
                            x["burst_end_mae_s"],
                            "; ".join(
                                f"{n} {v['mean']:.4f}" if v["mean"] is not None else f"{n} -"
                                for n, v in speakers.items()
                            ),
                        ),
                    )
                )
    if not rows:
        return None
    return Table(
        "Retention: one model before and after, on identical selections",
        (
            Column("selection"),
            Column("clips"),
            Column("frame_f1 (%)", True),
            Column("event_f1@0.5 (%)", True),
            Column("start_mae_s", False),
            Column("end_mae_s", False),
            Column("speaker cosine"),
        ),
        tuple(rows),
    )


def completion_table(study: ProbeStudy, runs: list[ProbeRun]) -> Table:
    """Declared vs found: each expected run, whether it was found, and its targets."""
    assert study.completion is not None
    c = study.completion
    by_id = {r["id"]: r for r in runs}
    rows = []
    for run_id in c.runs or tuple(by_id):
        r = by_id.get(run_id)
        found = r is not None and c.split in r["saved"]
        n = len(r["saved"][c.split]["per_score"]) if found and r is not None else None
        rows.append((run_id, ("yes" if found else "no", c.targets, n)))
    return Table(
        f"Completion: declared vs found runs and targets ({c.split})",
        (Column("found"), Column("targets declared"), Column("targets found")),
        tuple(rows),
        row_header="run",
    )


def completion_problems(study: ProbeStudy, runs: list[ProbeRun]) -> list[str]:
    """What the ``[completion]`` table declares and the saved files do not have."""
    c = study.completion
    if c is None:
        return []
    by_id = {r["id"]: r for r in runs}
    problems = []
    for run_id in c.runs:
        if run_id not in by_id:
            problems.append(f"completion: expected run {run_id} is not declared")
        elif c.split not in by_id[run_id]["saved"]:
            problems.append(f"completion: run {run_id} has no saved {c.split} measurements")
        elif c.targets is not None:
            n = len(by_id[run_id]["saved"][c.split]["per_score"])
            if n < c.targets or (c.exact and n != c.targets):
                exactly = "exactly " if c.exact else ""
                problems.append(
                    f"completion: run {run_id} has {n} targets, {exactly}{c.targets} expected"
                )
    return problems


def _numbers(doc: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of a saved file by path; per-score and per-category lists by their name."""
    out: list[tuple[str, Any]] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _numbers(value, f"{prefix}/{key}" if prefix else str(key))
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            name = (
                next((str(item[k]) for k in ("score", "category", "prompt") if k in item), str(i))
                if isinstance(item, dict)
                else str(i)
            )
            if isinstance(item, dict):
                item = {k: v for k, v in item.items() if k not in ("score", "category", "prompt")}
                out += _numbers(item, f"{prefix}/{name}")
            else:
                out.append((f"{prefix}/{name}", item))
    elif doc is None or isinstance(doc, int | float | str):
        out.append((prefix, doc))
    return out


def _exact(path: str) -> bool:
    """Counts are compared exactly."""
    return path.endswith(("/n", "/matched", "/prompts", "/support"))


#: saved adapter metric -> recomputed classification path (the adapter's outer-fold result
#: is the classification section of the run's predictions)
ADAPTER_PARITY = ("n", "accuracy", "balanced_accuracy", "macro_f1")


def _human_pairs(saved: dict[str, Any]) -> list[SavedPair]:
    """Human benchmarks: benchmark -> cut -> numbers, recomputed as human/<bench>/<cut>/...,
    each prompt as .../per_prompt/<prompt>/<field>, each dimension as
    .../per_dimension/<dimension>/<field>."""
    pairs: list[SavedPair] = []
    for bench, cuts in saved.items():
        for cut, value in cuts.items():
            if not isinstance(value, dict):
                continue  # a per-category list (per_emotion): the predictions have none
            at = f"human/{bench}/{cut}"
            for field, number in value.items():
                if field not in ("per_prompt", "per_dimension"):
                    pairs.append((f"{at}/{field}", number))
            for p in value.get("per_prompt", []):
                pairs += [
                    (f"{at}/per_prompt/{p['prompt']}/{f}", p.get(f))
                    for f in ("n", "spearman", "balanced_accuracy_oracle")
                ]
            for d in value.get("per_dimension", []):
                pairs += [
                    (f"{at}/per_dimension/{d['dimension']}/{f}", d.get(f))
                    for f in (
                        "n",
                        "prompts",
                        "mean_prompt_spearman",
                        "balanced_accuracy_oracle_per_prompt",
                    )
                ]
    return pairs


def _speaker_pairs(
    vectors: dict[str, dict[str, float | int | None]], recomputed: Mapping[str, float | None]
) -> list[SavedPair]:
    """Each saved speaker-vector set against the predictions' set of the same name
    (``spk_*__<set>``); the predictions' unnamed set (``spk_pred``) stands for the one saved
    set left when exactly one is (the saved file alone cannot say which set it is otherwise)."""
    pairs: list[SavedPair] = []
    left = []
    for name, vec in vectors.items():
        if f"speaker_sets/{name}/n" in recomputed:
            pairs += [
                (f"speaker_sets/{name}/mean_cosine", vec.get("mean")),
                (f"speaker_sets/{name}/n", vec.get("n")),
            ]
        else:
            left.append(vec)
    if len(left) == 1:
        (vec,) = left
        pairs += [("vectors/mean_cosine", vec.get("mean")), ("vectors/n", vec.get("n"))]
    return pairs


#: A saved number by the recomputed report's path it is compared with (None: not recorded).
SavedPair = tuple[str, float | int | None]


def _class_index(name: str, event_classes: tuple[str, ...]) -> str | None:
    """A saved event class's index in the predictions: its place in the study's
    ``event_classes``, or the name itself when it is an index; None when neither."""
    if name in event_classes:
        return str(event_classes.index(name))
    return name if name.isdigit() and not event_classes else None


def parity(
    run_id: str,
    split: str,
    saved: dict[str, Any],
    recomputed: Mapping[str, float | None],
    tolerance: float,
    event_classes: tuple[str, ...] = (),
) -> list[ParityCell]:
    """Each saved number of ``split`` that the predictions also give, against the recomputed
    one. Counts must match exactly; a saved number the predictions leave undefined fails; a
    saved null (not recorded) is not compared."""
    pairs: list[SavedPair] = []
    if split == "public":
        pairs = _human_pairs(saved)
        saved = {}
    elif split.startswith("adapter"):
        metrics = saved.get("metrics", {})
        pairs = [(f"classification/{f}", metrics.get(f)) for f in ADAPTER_PARITY]
        saved = {}
    for s in saved.get("per_score", []):
        for field, target in SCORE_PARITY.items():
            pairs.append((f"regression/{s['score']}/{target}", s.get(field)))
    for field, path in EVENT_PARITY.items():
        pairs.append((path, saved.get(field)))
    for level, loc in saved.get("burst_localization", {}).items():
        for field in ("precision", "recall", "f1", "matched"):
            pairs.append((f"events/iou/{level}/{field}", loc.get(field)))
    for c in saved.get("burst_per_class", []):
        index = _class_index(c["name"], event_classes)
        if index is not None:
            pairs += [
                (f"events/classes/{index}/support", c.get("support")),
                (f"events/classes/{index}/oracle_span_accuracy", c.get("oracle_span_accuracy")),
            ]
    pairs += _speaker_pairs(saved.get("speaker_cosine", {}), recomputed)
    cells: list[ParityCell] = []
    for path, value in pairs:
        if path not in recomputed or value is None:
            # The predictions do not give this number, or the saved file records none (null
            # claims nothing): neither provable nor refutable.
            continue
        got = recomputed[path]
        if got is None:
            delta, ok = None, False  # a saved number for what the predictions leave undefined
        else:
            delta = abs(float(value) - float(got))
            ok = delta == 0 if _exact(path) else delta <= tolerance
        cells.append(
            {
                "run": run_id,
                "split": split,
                "metric": path,
                "saved": value,
                "recomputed": got,
                "abs_delta": delta,
                "tolerance": 0.0 if _exact(path) else tolerance,
                "passed": ok,
            }
        )
    return cells


#: Recomputed (fast) against reference (slow, exact-fraction) definitions: both compute the same
#: float64 quantity by different routes, so they agree to rounding error only.
REFERENCE_TOLERANCE = 1e-9


#: One comparison with the reference: (recomputed path, recomputed value, reference value).
RefPair = tuple[str, float | None, float | None]
#: A prediction file's arrays by name (:func:`audiorepro.formats.predictions.load_predictions`).
Arrays = Mapping[str, npt.NDArray[np.generic]]
T = TypeVar("T")


def _reference_regression(arrays: Arrays, report: ProbeReport) -> list[RefPair]:
    """Each regression target's errors and correlations against the reference."""
    pairs: list[RefPair] = []
    for k, name in enumerate(arrays.get("reg_names", np.array([])).tolist()):
        pred, true = arrays["reg_pred"][:, k], arrays["reg_true"][:, k]
        got = report["regression"][str(name)]
        mae = ref.mae(pred, true)
        sd = float(arrays["reg_train_sd"][k])
        pairs += [
            (f"regression/{name}/mae", got["mae"], mae),
            (f"regression/{name}/rmse", got["rmse"], ref.rmse(pred, true)),
            (f"regression/{name}/pearson", got["pearson"], ref.pearson(pred, true)),
            (f"regression/{name}/spearman", got["spearman"], ref.spearman(pred, true)),
            (
                f"regression/{name}/normalized_mae",
                got["normalized_mae"],
                None if mae is None or not sd > 0 else mae / sd,
            ),
        ]
    return pairs


def _reference_scalars(arrays: Arrays, report: ProbeReport) -> list[RefPair]:
    """Classification, frame F1, the speaker vectors and each named speaker set."""
    pairs: list[RefPair] = []
    if "cls_names" in arrays:
        expect = ref.classification(
            arrays["cls_true"], arrays["cls_pred"], len(arrays["cls_names"])
        )
        pairs += [
            (f"classification/{m}", report["classification"][m], expect[m])
            for m in ("accuracy", "balanced_accuracy", "macro_f1")
        ]
    if "frame_true" in arrays:
        frame_f1 = ref.frame_f1(arrays["frame_true"], arrays["frame_prob"])
        pairs.append(("events/frame_f1", report["events"]["frame_f1"], frame_f1))
    if "spk_pred" in arrays:
        cosine = ref.mean_cosine(arrays["spk_pred"], arrays["spk_ref"], arrays["spk_valid"])
        pairs.append(("vectors/mean_cosine", report["vectors"]["mean_cosine"], cosine))
    for name, got_set in report.get("speaker_sets", {}).items():
        cosine = ref.mean_cosine(
            arrays[f"spk_pred__{name}"], arrays[f"spk_ref__{name}"], arrays[f"spk_valid__{name}"]
        )
        pairs.append((f"speaker_sets/{name}/mean_cosine", got_set["mean_cosine"], cosine))
    return pairs


def _reference_classes(arrays: Arrays, report: ProbeReport) -> list[RefPair]:
    """Each event class's support and oracle-span accuracy (and the set of classes)."""
    if "classes" not in report.get("events", {}):
        return []
    pairs: list[RefPair] = []
    expect_classes = ref.span_class_support(arrays["ev_ref_class"], arrays["ev_oracle_class"])
    got_classes = report["events"]["classes"]
    if sorted(got_classes) != sorted(str(c) for c in expect_classes):
        pairs.append(("events/classes", len(got_classes), len(expect_classes)))
    for c, (support, accuracy) in expect_classes.items():
        got_c = got_classes.get(str(c))
        pairs += [
            (f"events/classes/{c}/support", _at(got_c, "support"), support),
            (
                f"events/classes/{c}/oracle_span_accuracy",
                _at(got_c, "oracle_span_accuracy"),
                accuracy,
            ),
        ]
    return pairs


def _reference_cut(
    at: str, got: HumanCutReport, s: list[float], y: list[int], g: list[str], c: list[str]
) -> list[RefPair]:
    """One human benchmark cut's summary numbers against the reference."""
    return [
        (
            f"{at}/mean_prompt_spearman",
            got["mean_prompt_spearman"],
            ref.mean_prompt_spearman(s, y, g),
        ),
        (
            f"{at}/balanced_accuracy_oracle_per_prompt",
            got["balanced_accuracy_oracle_per_prompt"],
            ref.oracle_balanced_accuracy_per_prompt(s, y, g),
        ),
        (
            f"{at}/balanced_accuracy_oracle_overall",
            got["balanced_accuracy_oracle_overall"],
            ref.oracle_balanced_accuracy(s, y),
        ),
        (
            f"{at}/balanced_accuracy_5fold_clip_grouped",
            got["balanced_accuracy_5fold_clip_grouped"],
            ref.heldout_threshold_balanced_accuracy(s, y, c),
        ),
    ]


def _reference_human(arrays: Arrays, report: ProbeReport) -> list[RefPair]:
    """Every human benchmark cut: its prompts, dimensions and summary numbers."""
    if "hb_score" not in arrays:
        return []
    pairs: list[RefPair] = []
    bench = arrays["hb_bench"]
    names = arrays["hb_cut_names"].tolist() if "hb_cut_names" in arrays else []
    for b in dict.fromkeys(bench.tolist()):
        cuts = {"all": bench == b}
        cuts.update({n: (bench == b) & arrays["hb_cut"][:, j] for j, n in enumerate(names)})
        for cut, keep in cuts.items():
            s, y = arrays["hb_score"][keep].tolist(), arrays["hb_label"][keep].tolist()
            g, c = arrays["hb_prompt"][keep].tolist(), arrays["hb_clip"][keep].tolist()
            got = report["human"][b][cut]
            at = f"human/{b}/{cut}"
            pairs += _reference_prompts(at, got, s, y, g)
            if "hb_dimension" in arrays:
                dims = arrays["hb_dimension"][keep].tolist()
                pairs += _reference_dimensions(at, got, s, y, g, dims)
            pairs += _reference_cut(at, got, s, y, g, c)
    return pairs


def reference_check(run_id: str, arrays: Arrays, report: ProbeReport) -> list[ParityCell]:
    """The run's recomputed numbers against :mod:`audiorepro.reference.probe`: regression
    errors and correlations, classification, frame F1, speaker-vector cosine and every human
    benchmark cut. (Event
    matching is left to the tests: the reference's exhaustive search is exponential.)"""
    pairs = _reference_regression(arrays, report)
    pairs += _reference_scalars(arrays, report)
    pairs += _reference_classes(arrays, report)
    pairs += _reference_human(arrays, report)
    cells: list[ParityCell] = []
    for path, got, expected in pairs:
        delta = None if got is None or expected is None else abs(float(got) - float(expected))
        cells.append(
            {
                "run": run_id,
                "split": "reference",
                "metric": path,
                # ``saved`` holds the reference's number here: the independent definition.
                "saved": expected,
                "recomputed": got,
                "abs_delta": delta,
                "tolerance": REFERENCE_TOLERANCE,
                "passed": delta <= REFERENCE_TOLERANCE
                if delta is not None
                else got is None and expected is None,
            }
        )
    return cells


def _at(record: Mapping[str, object] | None, key: str) -> float | None:
    """A number of a report's record (None: the report has no such record, or it is null)."""
    value = None if record is None else record.get(key)
    assert value is None or isinstance(value, int | float), key
    return value


def _subset(keep: list[int], *columns: Sequence[T]) -> list[list[T]]:
    return [[col[i] for i in keep] for col in columns]


def _reference_prompts(
    at: str, got: HumanCutReport, s: list[float], y: list[int], g: list[str]
) -> list[RefPair]:
    """Each prompt's n, Spearman and oracle balanced accuracy against the reference."""
    pairs: list[RefPair] = []
    for prompt in dict.fromkeys(g):
        keep = [i for i, p in enumerate(g) if p == prompt]
        ps, py = _subset(keep, s, y)
        mine = got["per_prompt"].get(str(prompt))
        base = f"{at}/per_prompt/{prompt}"
        pairs += [
            (f"{base}/n", _at(mine, "n"), len(keep)),
            (f"{base}/spearman", _at(mine, "spearman"), ref.spearman(ps, py)),
            (
                f"{base}/balanced_accuracy_oracle",
                _at(mine, "balanced_accuracy_oracle"),
                ref.oracle_balanced_accuracy(ps, py),
            ),
        ]
    return pairs


def _reference_dimensions(
    at: str, got: HumanCutReport, s: list[float], y: list[int], g: list[str], dims: list[str]
) -> list[RefPair]:
    """Each dimension's numbers (its prompts alone) against the reference."""
    pairs: list[RefPair] = []
    for dim in dict.fromkeys(dims):
        keep = [i for i, d in enumerate(dims) if d == dim]
        ds, dy, dg = _subset(keep, s, y, g)
        mine = got.get("per_dimension", {}).get(str(dim))
        base = f"{at}/per_dimension/{dim}"
        pairs += [
            (f"{base}/n", _at(mine, "n"), len(keep)),
            (f"{base}/prompts", _at(mine, "prompts"), len(set(dg))),
            (
                f"{base}/mean_prompt_spearman",
                _at(mine, "mean_prompt_spearman"),
                ref.mean_prompt_spearman(ds, dy, dg),
            ),
            (
                f"{base}/balanced_accuracy_oracle_per_prompt",
                _at(mine, "balanced_accuracy_oracle_per_prompt"),
                ref.oracle_balanced_accuracy_per_prompt(ds, dy, dg),
            ),
        ]
    return pairs


def parity_table(metric_parity: MetricParity) -> Table:
    """Saved vs recomputed (and recomputed vs reference), disagreements first."""
    cells = [*metric_parity["cells"], *metric_parity["reference"]]
    ordered = sorted(cells, key=lambda c: c["passed"])  # stable: failures first, then as made
    return Table(
        "Saved numbers against the predictions, and recomputed numbers against the reference",
        (
            Column("metric"),
            Column("split"),
            Column("saved or reference"),
            Column("recomputed"),
            Column("abs_delta"),
            Column("tolerance"),
            Column("status"),
        ),
        tuple(
            (
                c["run"],
                (
                    c["metric"],
                    c["split"],
                    c["saved"],
                    c["recomputed"],
                    c["abs_delta"],
                    c["tolerance"],
                    "PASS" if c["passed"] else "FAIL",
                ),
            )
            for c in ordered
        ),
        row_header="run",
        digits=9,
    )


def parity_summary_table(metric_parity: MetricParity) -> Table:
    """Saved vs recomputed per run and split: how many numbers were compared, how many failed,
    the largest difference and where; the full list is :func:`parity_table`."""
    groups: dict[tuple[str, str], list[ParityCell]] = {}
    for c in [*metric_parity["cells"], *metric_parity["reference"]]:
        groups.setdefault((c["run"], c["split"]), []).append(c)
    # A run's splits side by side (its reference check after its saved files), runs in order.
    runs = list(dict.fromkeys(run for run, _ in groups))
    rows = []
    for (run, split), cells in sorted(groups.items(), key=lambda g: runs.index(g[0][0])):
        failed = [c for c in cells if not c["passed"]]
        deltas = [c for c in cells if c["abs_delta"] is not None]
        worst = max(deltas, key=lambda c: c["abs_delta"] or 0.0, default=None)
        # The cell to name: the first failure (a failure may have no delta), else the largest.
        named = failed[0] if failed else worst if worst and worst["abs_delta"] else None
        if failed:
            result = f"{len(failed)} FAIL"
        elif all(c["abs_delta"] == 0 for c in cells):
            result = "all equal"
        else:
            result = "all within tolerance"
        rows.append(
            (
                run,
                (
                    split,
                    len(cells),
                    len(failed),
                    # Three significant digits: a rounding difference (1e-16) stays visible.
                    NOT_APPLICABLE if worst is None else f"{worst['abs_delta'] or 0.0:.3g}",
                    NOT_APPLICABLE if named is None else named["metric"],
                    result,
                ),
            )
        )
    return Table(
        "Saved numbers against the predictions (and recomputed against the reference), per run",
        (
            Column("split"),
            Column("compared"),
            Column("failed"),
            Column("largest abs_delta"),
            Column("first failure or largest delta at"),
            Column("result"),
        ),
        tuple(rows),
        row_header="run",
        digits=9,
        notes=(
            "Every compared number: the table metric_parity (tables/metric_parity.csv).",
            NOT_APPLICABLE_NOTE.removesuffix(".") + ": every compared number is equal.",
        ),
    )


def _used_at(documents: Mapping[str, Measurements], paths: list[str]) -> set[tuple[Any, ...]]:
    """The locations the study's own key paths (``<split>:<key path>``) read, by split."""
    out: set[tuple[Any, ...]] = set()
    for path in paths:
        split, sep, rest = split_of(path)
        if sep != ":" or split not in documents:
            continue
        try:
            found = locate(documents[split].document, rest)
        except KeyPathError:
            continue  # reported where the value is read
        if found is not None:
            out.add((split, *found[0]))
    return out


def _not_read(doc: Any, where: tuple[Any, ...], read: list[tuple[Any, ...]]) -> list[Any]:
    """The parts of the unknown branch at ``where`` that no read location covers: the whole
    branch where none is inside it, nothing where one covers it, else its children, each so.

    >>> doc = {"x": {"a": 1, "b": {"c": 2, "d": 3}}}
    >>> _not_read(doc, ("x",), [("x", "b", "c")])
    [('x', 'a'), ('x', 'b', 'd')]
    """
    if any(where[: len(r)] == r for r in read):
        return []
    inside = [r for r in read if r[: len(where)] == where]
    if not inside:
        return [where]
    node = doc
    for part in where:
        node = node[part]
    # Each child is given only the locations below it: with every line of a 10**5-line JSONL
    # read, handing all of them to every line would be quadratic.
    below: dict[Any, list[tuple[Any, ...]]] = {}
    for r in inside:  # each is longer than `where` (an equal one covers it, above)
        below.setdefault(r[len(where)], []).append(r)
    children = range(len(node)) if isinstance(node, list) else list(node)
    return [w for c in children for w in _not_read(doc, (*where, c), below.get(c, []))]


def unused_keys(study: ProbeStudy, runs: list[ProbeRun]) -> Table | None:
    """Per saved file, what no table used: the keys its split's shape does not know that no
    key path of the study reads (a run dict gains ``unused``: split -> key paths). None when
    every saved number was used."""
    metrics = [lead.metric for lead in study.leaders]
    rows = []
    for r in runs:
        documents: Mapping[str, Measurements] = r.get("documents", {})
        used = _used_at(documents, metrics + read_key_paths(study, documents))
        unused: dict[str, list[str]] = {}
        for split, m in documents.items():
            mine = [u[1:] for u in used if u[0] == split]
            kept = [w for where in m.unknown for w in _not_read(m.document, where, mine)]
            paths = Measurements(m.shape, m.document, tuple(kept), m.source).unknown_paths()
            if paths:
                unused[split] = paths
                rows += [(f"{r['id']} {split}", (r["saved_files"][split], p)) for p in paths]
        if unused:
            r["unused"] = unused
    if not rows:
        return None
    return Table(
        "Saved keys no table used (kept in the byte copies, listed so that nothing is dropped "
        "unseen)",
        (Column("file"), Column("key path")),
        tuple(rows),
        row_header="run and split",
        notes=("A study reads any of them by a key path: '<split>:<key path>'.",),
    )

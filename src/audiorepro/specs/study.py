"""Study files (``audiorepro.study/1``, TOML): what ``audiorepro reproduce`` regenerates.

A study is cells of model x dataset, identity checks, and published values to verify::

    schema = "audiorepro.study/1"
    name = "demo"                       # [A-Za-z0-9._-]+
    title = "A short description"       # optional
    profiles = ["canonical", "laion-clap"]   # optional, default ["canonical"]
    tie_policy = "pessimistic"          # optional
    bootstrap = { resamples = 1000, seed = 0, level = 0.95 }   # optional

    [[cell]]
    id = "tiny-laion/fixture"           # unique
    model = "tiny-laion"                # the table row
    dataset = "fixture"                 # one table per dataset and direction
    dump = "dumps/x.npz"                # relative to the study file ...
    sha256 = "<64 hex>"                 # ... with the hash it must have
    # or, instead of dump/sha256, how to make it:
    # extract = { model = "tiny-laion", audio = "audio/", captions = "captions.csv",
    #             registry = "registry.toml", settings = { batch_size = 2 } }

    [[identity]]
    a = "tiny-hf"
    b = "tiny-laion"
    registry = "registry.toml"          # optional

    [[published]]
    cell = "tiny-laion/fixture"
    profile = "canonical"               # optional, default canonical
    tolerance = 1e-9
    provenance = "paper, table, URL, or 'seed kit output'"
    values = { "t2a/r@1" = 0.5 }

:func:`load_study` checks everything before any work starts: unknown or missing keys, unknown
profile and metric names, duplicate or unknown cell ids, missing files, and every dump's
SHA-256 against the study's. Each problem is a :class:`~audiorepro.core.errors.UserError` naming the
file and the key (``cell[2].sha256``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiorepro.core.errors import UserError
from audiorepro.core.hashing import PLACEHOLDER, sha256_file
from audiorepro.core.io import read_text
from audiorepro.metrics.profiles import PROFILES
from audiorepro.metrics.retrieval import DIRECTIONS, METRICS, TIE_POLICIES
from audiorepro.specs.settings import parse_value

SCHEMA = "audiorepro.study/1"
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TOP = {
    "schema",
    "kind",
    "run",
    "name",
    "title",
    "profiles",
    "tie_policy",
    "bootstrap",
    "cell",
    "identity",
    "published",
}
_CELL = {"id", "model", "dataset", "dump", "sha256", "extract", "profiles"}
_EXTRACT = {"model", "audio", "captions", "registry", "settings", "device"}
_IDENTITY = {"a", "b", "registry", "a_settings", "b_settings", "audio", "captions", "expect"}
VERDICTS = ("identical", "same weights, preprocessing differs", "different checkpoints")
_PUBLISHED = {"cell", "profile", "tie_policy", "tolerance", "provenance", "values"}
_BOOTSTRAP = {"resamples", "seed", "level"}
_RUN = {"id", "model", "family", "predictions", "sha256", "corpus", "n_targets"}
KINDS = ("retrieval", "probe")
#: Published probe values are named by their path in the ``audiorepro.probe/1`` report.
PROBE_METRIC = re.compile(
    r"^(regression/[^/]+/(n|mae|normalized_mae|rmse|pearson|spearman)"
    r"|classification/(n|accuracy|balanced_accuracy|macro_f1)"
    r"|events/(frame_f1|start_mae_s|end_mae_s|oracle_span_class_accuracy"
    r"|detected_span_class_accuracy|iou/(0\.1|0\.3|0\.5)/(precision|recall|f1|matched))"
    r"|vectors/(n|mean_cosine))$"
)


@dataclass(frozen=True)
class Run:
    """One probe run: a model's prediction file (for one classification corpus)."""

    id: str
    model: str
    family: str
    predictions: Path
    sha256: str
    corpus: str | None = None
    n_targets: int | None = None


@dataclass(frozen=True)
class Extraction:
    model: str
    audio: Path
    captions: Path
    registry: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"


@dataclass(frozen=True)
class Cell:
    id: str
    model: str
    dataset: str
    dump: Path | None
    sha256: str | None
    extract: Extraction | None
    profiles: tuple[str, ...]


@dataclass(frozen=True)
class IdentityCheck:
    a: str
    b: str
    registry: Path | None = None
    a_settings: dict[str, Any] = field(default_factory=dict)
    b_settings: dict[str, Any] = field(default_factory=dict)
    audio: Path | None = None
    captions: Path | None = None
    #: The verdict the study requires; another verdict is a failure. None: record only.
    expect: str | None = None


@dataclass(frozen=True)
class Published:
    cell: str
    profile: str
    tie_policy: str
    tolerance: float
    provenance: str
    values: dict[str, float]


@dataclass(frozen=True)
class Bootstrap:
    resamples: int = 1000
    seed: int = 0
    level: float = 0.95


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    source: Path
    profiles: tuple[str, ...]
    tie_policy: str
    bootstrap: Bootstrap
    cells: tuple[Cell, ...]
    identity: tuple[IdentityCheck, ...]
    published: tuple[Published, ...]
    kind: str = "retrieval"
    runs: tuple[Run, ...] = ()

    def cell(self, cell_id: str) -> Cell:
        return next(c for c in self.cells if c.id == cell_id)


class _Reader:
    """Typed access to one TOML table, every error naming the file and the key path."""

    def __init__(self, table: Any, where: str, source: Path, allowed: set[str]) -> None:
        self.source, self.where = source, where
        if not isinstance(table, dict):
            raise self.error(None, "must be a table")
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.error(
                unknown[0], f"unknown key; expected some of {', '.join(sorted(allowed))}"
            )
        self.table = table

    def key(self, name: str | None) -> str:
        if name is None:
            return self.where
        return f"{self.where}.{name}" if self.where else name

    def error(self, name: str | None, message: str) -> UserError:
        return UserError(message, source=self.source, key=self.key(name))

    def get(
        self, name: str, kind: type | tuple[type, ...], default: Any = ..., *, what: str
    ) -> Any:
        if name not in self.table:
            if default is ...:
                raise self.error(name, f"is missing; expected {what}")
            return default
        value = self.table[name]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            raise self.error(name, f"is {value!r}; expected {what}")
        return value

    def path(self, name: str, default: Any = ..., *, must_exist: bool = True) -> Path | None:
        text = self.get(name, str, default, what="a path (relative to the study file)")
        if text is None:
            return None
        path: Path = (self.source.parent / text).resolve()
        if must_exist and not path.exists():
            raise self.error(name, f"{text!r} does not exist (looked for {path})")
        return path


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _profiles(r: _Reader, name: str, default: Any) -> tuple[str, ...]:
    value = r.get(name, list, default, what=f"a list of profiles ({', '.join(PROFILES)})")
    if value is None:
        return ()
    for p in value:
        if p not in PROFILES:
            raise r.error(name, f"unknown profile {p!r}; expected one of {', '.join(PROFILES)}")
    return tuple(value)


def _cell(raw: Any, i: int, source: Path, profiles: tuple[str, ...], strict: bool) -> Cell:
    r = _Reader(raw, f"cell[{i}]", source, _CELL)
    cell_id = r.get("id", str, what="a unique cell id")
    has_dump, has_extract = "dump" in r.table, "extract" in r.table
    if has_dump == has_extract:
        raise r.error("dump", "give exactly one of 'dump' (with 'sha256') or 'extract'")
    dump = sha = None
    extraction = None
    if has_dump:
        dump = r.path("dump", must_exist=strict)
        sha = r.get("sha256", str, what="the dump's SHA-256 (64 hex digits)")
        if sha != PLACEHOLDER and not _SHA256.match(sha):
            raise r.error(
                "sha256", f"is {sha!r}; expected 64 lowercase hex digits or {PLACEHOLDER!r}"
            )
    else:
        e = _Reader(r.table["extract"], f"cell[{i}].extract", source, _EXTRACT)
        extraction = Extraction(
            model=e.get("model", str, what="a model spec or registry name"),
            audio=e.path("audio", must_exist=strict),  # type: ignore[arg-type]
            captions=e.path("captions", must_exist=strict),  # type: ignore[arg-type]
            registry=e.path("registry", None),
            settings=dict(e.get("settings", dict, {}, what="a table of preprocessing settings")),
            device=e.get("device", str, "cpu", what="a torch device name"),
        )

        for key, value in extraction.settings.items():
            parse_value(key, value, source=f"{source}: cell[{i}].extract.settings")
    return Cell(
        id=cell_id,
        model=r.get("model", str, what="the model's name (the table row)"),
        dataset=r.get("dataset", str, what="the dataset's name (one table per dataset)"),
        dump=dump,
        sha256=sha,
        extract=extraction,
        profiles=_profiles(r, "profiles", None) or profiles,
    )


def _published(
    raw: Any, i: int, source: Path, cells: set[str], tie: str, kind: str = "retrieval"
) -> Published:
    r = _Reader(raw, f"published[{i}]", source, _PUBLISHED)
    what = "cell" if kind == "retrieval" else "run"
    cell = r.get("cell", str, what=f"the id of a {what} of this study")
    if cell not in cells:
        raise r.error("cell", f"names {cell!r}, which is not a {what} of this study")
    profile = r.get("profile", str, "canonical", what="a profile name")
    if profile not in PROFILES:
        raise r.error(
            "profile", f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}"
        )
    tie_policy = r.get("tie_policy", str, tie, what=f"one of {', '.join(TIE_POLICIES)}")
    if tie_policy not in TIE_POLICIES:
        raise r.error("tie_policy", f"is {tie_policy!r}; expected one of {', '.join(TIE_POLICIES)}")
    tolerance = float(r.get("tolerance", (int, float), what="a tolerance >= 0"))
    if not tolerance >= 0:
        raise r.error("tolerance", f"is {tolerance}; expected a number >= 0")
    values = r.get("values", dict, what="a table of metric -> published value")
    if not values:
        raise r.error("values", "is empty; expected at least one published value")
    for metric, value in values.items():
        if kind == "probe" and not PROBE_METRIC.match(metric):
            raise r.error(
                f"values.{metric}",
                "unknown probe metric; expected regression/<target>/<mae|normalized_mae|rmse|"
                "pearson|spearman|n>, classification/<accuracy|balanced_accuracy|macro_f1|n>, "
                "events/<frame_f1|start_mae_s|end_mae_s|iou/<0.1|0.3|0.5>/<precision|recall|f1|"
                "matched>> or vectors/<mean_cosine|n>",
            )
        if kind == "retrieval" and profile == "canonical":
            direction, _, name = metric.partition("/")
            if direction not in DIRECTIONS or name not in METRICS:
                raise r.error(
                    f"values.{metric}",
                    f"unknown metric; expected <direction>/<metric> with direction in "
                    f"{', '.join(DIRECTIONS)} and metric in {', '.join(METRICS)}",
                )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise r.error(f"values.{metric}", f"is {value!r}; expected a number")
    return Published(
        cell=cell,
        profile=profile,
        tie_policy=tie_policy,
        tolerance=tolerance,
        provenance=r.get("provenance", str, what="where the value was published"),
        values={k: float(v) for k, v in values.items()},
    )


def _verdict(r: _Reader) -> str | None:
    expect = r.get("expect", str, None, what=f"one of {', '.join(VERDICTS)}")
    if expect is not None and expect not in VERDICTS:
        raise r.error("expect", f"is {expect!r}; expected one of {', '.join(VERDICTS)}")
    return str(expect) if expect is not None else None


def parse_study(text: str, source: Path, *, strict: bool = True) -> Study:
    """Parse and validate a study. ``strict=False`` (for ``verify``) lets a dump be missing or
    differ from its hash: such a cell's values are then reported NOT VERIFIED, not an error."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"is not valid TOML ({exc})", source=source) from None
    r = _Reader(doc, "", source, _TOP)
    if doc.get("schema") != SCHEMA:
        raise r.error("schema", f"is {doc.get('schema')!r}; expected {SCHEMA!r}")
    name = r.get("name", str, what="the study's name ([A-Za-z0-9._-]+)")
    if not _NAME.match(name):
        raise r.error("name", f"is {name!r}; expected letters, digits, '.', '_' or '-'")
    profiles = _profiles(r, "profiles", ["canonical"])
    tie = r.get("tie_policy", str, "pessimistic", what=f"one of {', '.join(TIE_POLICIES)}")
    if tie not in TIE_POLICIES:
        raise r.error("tie_policy", f"is {tie!r}; expected one of {', '.join(TIE_POLICIES)}")
    b = _Reader(r.get("bootstrap", dict, {}, what="a table"), "bootstrap", source, _BOOTSTRAP)
    bootstrap = Bootstrap(
        resamples=b.get("resamples", int, 1000, what="an integer >= 1"),
        seed=b.get("seed", int, 0, what="an integer"),
        level=float(b.get("level", float, 0.95, what="a level in (0, 1)")),
    )
    if bootstrap.resamples < 1 or not 0 < bootstrap.level < 1:
        raise b.error(None, "needs resamples >= 1 and 0 < level < 1")
    kind = r.get("kind", str, "retrieval", what=f"one of {', '.join(KINDS)}")
    if kind not in KINDS:
        raise r.error("kind", f"is {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "probe":
        return _probe_study(r, name, source, tie, bootstrap, strict)
    raw_cells = r.get("cell", list, what="at least one [[cell]]")
    if not raw_cells:
        raise r.error("cell", "is empty; expected at least one [[cell]]")
    cells = tuple(_cell(c, i, source, profiles, strict) for i, c in enumerate(raw_cells))
    seen: set[str] = set()
    for i, c in enumerate(cells):
        if c.id in seen:
            raise UserError(f"repeats cell id {c.id!r}", source=source, key=f"cell[{i}].id")
        seen.add(c.id)
    identity = []
    for i, raw in enumerate(r.get("identity", list, [], what="a list of [[identity]] tables")):
        ir = _Reader(raw, f"identity[{i}]", source, _IDENTITY)
        identity.append(
            IdentityCheck(
                a=ir.get("a", str, what="a model spec"),
                b=ir.get("b", str, what="a model spec"),
                registry=ir.path("registry", None),
                a_settings=dict(ir.get("a_settings", dict, {}, what="a table")),
                b_settings=dict(ir.get("b_settings", dict, {}, what="a table")),
                audio=ir.path("audio", None),
                captions=ir.path("captions", None),
                expect=_verdict(ir),
            )
        )
    published = tuple(
        _published(p, i, source, seen, tie)
        for i, p in enumerate(r.get("published", list, [], what="a list of [[published]] tables"))
    )
    study = Study(
        name=name,
        title=r.get("title", str, name, what="a title"),
        source=source,
        profiles=profiles,
        tie_policy=tie,
        bootstrap=bootstrap,
        cells=cells,
        identity=tuple(identity),
        published=published,
    )
    if strict:
        check_dump_hashes(study)
    return study


def _probe_study(
    r: _Reader, name: str, source: Path, tie: str, bootstrap: Bootstrap, strict: bool
) -> Study:
    for key in ("cell", "identity", "profiles"):
        if key in r.table:
            raise r.error(key, "is for retrieval studies; a probe study has [[run]] tables")
    raw_runs = r.get("run", list, what="at least one [[run]]")
    if not raw_runs:
        raise r.error("run", "is empty; expected at least one [[run]]")
    runs = []
    for i, raw in enumerate(raw_runs):
        rr = _Reader(raw, f"run[{i}]", source, _RUN)
        sha = rr.get("sha256", str, what="the prediction file's SHA-256 (64 hex digits)")
        if not _SHA256.match(sha):
            raise rr.error("sha256", f"is {sha!r}; expected 64 lowercase hex digits")
        n_targets = rr.get("n_targets", int, None, what="the number of regression targets")
        runs.append(
            Run(
                id=rr.get("id", str, what="a unique run id"),
                model=rr.get("model", str, what="the model's name"),
                family=rr.get("family", str, what="the model family (for family means)"),
                # A declared run whose file is missing is an incomplete study, reported by the
                # runner (exit 1), not a malformed one.
                predictions=rr.path("predictions", must_exist=False),  # type: ignore[arg-type]
                sha256=sha,
                corpus=rr.get("corpus", str, None, what="the classification corpus's name"),
                n_targets=n_targets,
            )
        )
    seen: set[str] = set()
    for i, run in enumerate(runs):
        if run.id in seen:
            raise UserError(f"repeats run id {run.id!r}", source=source, key=f"run[{i}].id")
        seen.add(run.id)
        if strict and run.predictions.is_file() and sha256_file(run.predictions) != run.sha256:
            raise UserError(
                f"predictions {run.predictions.name} have SHA-256 "
                f"{sha256_file(run.predictions)}, the study expects {run.sha256}",
                source=source,
                key=f"run[{i}].sha256",
            )
    published = tuple(
        _published(p, i, source, seen, tie, kind="probe")
        for i, p in enumerate(r.get("published", list, [], what="a list of [[published]] tables"))
    )
    return Study(
        name=name,
        title=r.get("title", str, name, what="a title"),
        source=source,
        profiles=(),
        tie_policy=tie,
        bootstrap=bootstrap,
        cells=(),
        identity=(),
        published=published,
        kind="probe",
        runs=tuple(runs),
    )


def check_dump_hashes(study: Study) -> None:
    """Every dump the study names must have the SHA-256 the study states."""
    for i, cell in enumerate(study.cells):
        if cell.dump is None:
            continue
        got = sha256_file(cell.dump)
        if cell.sha256 == PLACEHOLDER:
            raise UserError(
                f"has no verified SHA-256 for dump {cell.dump.name} yet ({PLACEHOLDER!r}); the "
                f"file here hashes to {got}: record it once the dump is verified",
                source=study.source,
                key=f"cell[{i}].sha256",
            )
        if got != cell.sha256:
            raise UserError(
                f"dump {cell.dump.name} has SHA-256 {got}, the study expects {cell.sha256}",
                source=study.source,
                key=f"cell[{i}].sha256",
            )


def load_study(path: str | Path, *, strict: bool = True) -> Study:
    path = Path(path)
    return parse_study(read_text(path, what="a .toml study"), path.resolve(), strict=strict)

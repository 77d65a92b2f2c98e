"""Reading two runs for ``audiorepro diff``: an output folder of ``reproduce`` (its bundle,
its manifest, its nested studies such as the demo's ``probe/``, the dumps it extracted) or a
``bundle.json.gz`` alone; and each tier-b number's derived tolerance from those dumps.

A run handed to ``diff`` is input like any other: a missing, truncated, non-gzip or
foreign file is one line naming it (exit 2), never a traceback.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

import numpy as np

from audiorepro.checks.diff import (
    Kinds,
    NumberRecord,
    RunView,
    bundle_view,
    manifest_identities,
    merge_views,
    prefixed_identity,
)
from audiorepro.checks.tiers import (
    EMBEDDING_REL_TOLERANCE,
    dump_relevance_matrix,
    fragility,
    identity_number_tolerance,
    score_bound,
    tier_b_tolerance,
)
from audiorepro.core.errors import UserError
from audiorepro.core.hashing import sha256_file
from audiorepro.core.io import TEXT_MAX_BYTES, parse_json, read_text
from audiorepro.formats.dump import Dump, load_dump
from audiorepro.specs.records import safe_relative

BUNDLE: Final = "bundle.json.gz"
MANIFEST: Final = "manifest.json"
#: A bundle decompresses to a few MB; more is not a bundle (and not read whole).
MAX_BUNDLE_BYTES: Final = TEXT_MAX_BYTES
#: A bundle holds a few thousand numbers (a probe study of 40 runs: 3543), a 1,000-cell
#: retrieval study 100,000 to 250,000 (100 to 250 a cell); a few KiB of gzip can hold
#: millions. diff walks them in linear time (127,310 numbers: 27 s on a loaded 2-core
#: machine), so twice the largest real study is accepted and more refused while parsing, as
#: are an integer of more than JSON_MAX_DIGITS digits and nesting deeper than JSON_MAX_DEPTH.
MAX_BUNDLE_NUMBERS: Final = 500_000
EXPECTED: Final = "expected an output folder of audiorepro reproduce or its bundle.json.gz"


@dataclass
class LoadedRun:
    """A run read from disk: its view, and where each cell's dump is (for tolerances)."""

    source: Path
    view: RunView  #: every study of the run (a folder's nested ones prefixed)
    top: RunView  #: the top-level study alone: what a bundle alone is compared with
    dumps: dict[str, Path] = field(default_factory=dict)  #: cell -> dump file
    folder: bool = False
    #: bundle schema -> its kind in a sentence (``zero-shot``), as the kinds name themselves
    labels: Mapping[str, str] = field(default_factory=dict)


def read_bundle(path: Path, kinds: Kinds) -> dict[str, Any]:
    """A ``bundle.json.gz`` decompressed and parsed, of a schema that one of ``kinds``
    writes, or a UserError."""
    if not path.is_file():
        raise UserError(f"is not a file; {EXPECTED}", source=path)
    try:
        with gzip.open(path, "rb") as f:
            data = f.read(MAX_BUNDLE_BYTES + 1)
    except gzip.BadGzipFile as exc:
        raise UserError(f"is not gzip ({exc}); {EXPECTED}", source=path) from None
    except EOFError:
        raise UserError(
            f"is truncated (the gzip stream ends early); {EXPECTED}", source=path
        ) from None
    except (zlib.error, OSError) as exc:
        raise UserError(f"cannot be decompressed ({exc}); {EXPECTED}", source=path) from None
    if len(data) > MAX_BUNDLE_BYTES:
        raise UserError(
            f"decompresses to over {MAX_BUNDLE_BYTES >> 20} MiB; {EXPECTED}", source=path
        )
    bundle = parse_bundle(data, path)
    if not isinstance(bundle, dict):
        raise UserError(f"is a JSON {type(bundle).__name__}; expected an object", source=path)
    schema = bundle.get("schema")
    if not isinstance(schema, str) or schema not in kinds:  # a list or object is unhashable
        raise UserError(
            f"schema is {schema!r}; expected one of {', '.join(sorted(kinds))}",
            source=path,
            key="schema",
        )
    return bundle


def parse_bundle(data: bytes, path: Path) -> Any:
    """A decompressed bundle's JSON, bounded (:data:`MAX_BUNDLE_NUMBERS`, and
    :func:`~audiorepro.core.io.parse_json`'s digits and depth), or one line naming it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"is not valid JSON (not UTF-8: {exc.reason}); {EXPECTED}", source=path
        ) from None
    return parse_json(text, source=path, max_numbers=MAX_BUNDLE_NUMBERS)


def _view(bundle: Mapping[str, Any], path: Path, prefix: str, kinds: Kinds) -> RunView:
    """The bundle's view, as the kind that writes its schema declares it; a bundle of a
    known schema that lacks what it must hold is one line."""
    try:
        return bundle_view(bundle, kinds[str(bundle["schema"])], prefix)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        what = f"key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UserError(
            f"is not a well-formed {bundle['schema']} bundle ({what}); written by another "
            "version or edited?",
            source=path,
        ) from None


def _manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    data = parse_json(read_text(path, what="a run's manifest"), source=path)
    if not isinstance(data, dict) or not isinstance(data.get("environment", {}), dict):
        raise UserError(
            "is not a run's manifest (expected an object)", source=path, key="environment"
        )
    return data


def _table(manifest: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = manifest.get(key)
    return dict(value) if isinstance(value, dict) else {}


def _inside(rel: str) -> bool:
    """A path a run recorded is followed only inside its folder."""
    try:
        safe_relative(rel)
    except ValueError:
        return False
    return True


def _dumps(
    folder: Path, bundle: Mapping[str, Any], manifest: Mapping[str, Any], prefix: str
) -> dict[str, Path]:
    """Each cell's dump in the folder: a zero-shot cell names it; a retrieval cell's dump is
    the manifest input of its SHA-256, in the folder's cache (hash checked)."""
    out: dict[str, Path] = {}
    inputs = _table(manifest, "inputs")
    cache_dir = folder / "cache"
    for cell in bundle.get("cells", []):
        cid = prefix + str(cell.get("id"))
        named = cell.get("dump")
        if isinstance(named, str) and _inside(named) and (folder / named).is_file():
            out[cid] = folder / named
            continue
        sha = cell.get("dump_sha256")
        for name in sorted(n for n, h in inputs.items() if h == sha and sha):
            found = [p for p in sorted(cache_dir.rglob(Path(name).name)) if p.is_file()]
            hit = next((p for p in found if sha256_file(p) == sha), None)
            if hit is not None:
                out[cid] = hit
                break
    return out


def _not_linked(folder: Path, rel: str) -> None:
    """A nested study's folder is a folder of the run, never reached through a symbolic link:
    a link to ``.`` was followed 40 levels deep (until the system's own limit)."""
    at = folder
    for part in Path(rel).parts:
        at = at / part
        if at.is_symlink():
            raise UserError(
                "is a symbolic link; expected a nested study's folder inside the run (a link "
                "is not followed: it could lead back into the run, or out of it)",
                source=at,
            )


def _folder(
    folder: Path,
    prefix: str,
    views: list[RunView],
    dumps: dict[str, Path],
    kinds: Kinds,
) -> None:
    path = folder / BUNDLE
    bundle = read_bundle(path, kinds)
    view = _view(bundle, path, prefix, kinds)
    manifest = _manifest(folder)
    if manifest is not None:
        env = [prefixed_identity(i, prefix) for i in manifest_identities(manifest)]
        view = RunView(
            view.kind, view.study, view.numbers, {**view.identities, **{i.key: i for i in env}}
        )
        dumps.update(_dumps(folder, bundle, manifest, prefix))
        nested = sorted(
            rel[: -len(BUNDLE)]
            for rel in map(str, _table(manifest, "outputs"))
            if rel.endswith("/" + BUNDLE) and _inside(rel)
        )
        views.append(view)
        for rel in nested:
            _not_linked(folder, rel)
            if (folder / rel / BUNDLE).is_file():
                _folder(folder / rel, prefix + rel, views, dumps, kinds)
        return
    views.append(view)


def load_run(path: Path, kinds: Kinds) -> LoadedRun:
    """A run: an output folder (bundle, manifest, nested studies, dumps) or a bundle alone;
    ``kinds``: the study kinds by the schema of their bundles (each bundle is read as its
    kind declares it: :func:`audiorepro.runner.kinds.diff_kinds`)."""
    path = Path(path)
    if path.is_dir():
        if not (path / BUNDLE).is_file():
            raise UserError(f"holds no {BUNDLE}; {EXPECTED}", source=path)
        views: list[RunView] = []
        dumps: dict[str, Path] = {}
        _folder(path, "", views, dumps, kinds)
        merged = merge_views(views)
        return LoadedRun(path, merged, views[0], dumps, True, _labels(kinds, merged))
    if not path.exists():
        raise UserError(f"does not exist; {EXPECTED}", source=path)
    bundle = read_bundle(path, kinds)
    view = _view(bundle, path, "", kinds)
    return LoadedRun(path, view, view, labels=_labels(kinds, view))


def _labels(kinds: Kinds, view: RunView) -> dict[str, str]:
    """The kinds of ``view``'s bundles in a sentence, by schema: only the kinds the run names
    (``kinds`` imports a built-in kind when it is first asked for)."""
    return {schema: kinds[schema].label for schema in view.kind.split("+") if schema in kinds}


def views(a: LoadedRun, b: LoadedRun) -> tuple[RunView, RunView]:
    """What is compared: every study of two folders; the top-level study when either run is
    a bundle alone (it holds no nested study)."""
    return (a.view, b.view) if a.folder and b.folder else (a.top, b.top)


def check_comparable(a: LoadedRun, b: LoadedRun) -> None:
    """Two runs of one study kind and one study, or a UserError naming both."""
    va, vb = views(a, b)
    if va.kind != vb.kind:
        ka = "+".join(a.labels.get(k, k) for k in va.kind.split("+"))
        kb = "+".join(b.labels.get(k, k) for k in vb.kind.split("+"))
        raise UserError(
            f"is a {ka} run ({va.kind}), {b.source} a {kb} run ({vb.kind}); "
            "diff compares two runs of the same study",
            source=a.source,
        )
    if va.study != vb.study:
        raise UserError(
            f"is a run of study {va.study!r}, {b.source} of study {vb.study!r}; "
            "diff compares two runs of the same study",
            source=a.source,
        )


def check_baseline(baseline: LoadedRun, study: str, kind: str) -> None:
    """``reproduce --against``: the baseline is a run of the study about to run (its name
    and kind), or a UserError naming it, before the run (it failed only after the whole
    run was published)."""
    top = baseline.top
    was = baseline.labels.get(top.kind, top.kind)
    if top.study != study or was.replace("-", "") != kind.replace("-", ""):
        raise UserError(
            f"is a {was} run of study {top.study!r}; the study to run is the {kind} study "
            f"{study!r} (--against compares two runs of the same study)",
            source=baseline.source,
        )


@cache
def _dump(path: Path) -> Dump:
    return load_dump(path)


@cache
def _fragile(path: Path) -> int:
    """Queries of either direction whose ranks could move under another CPU's embeddings."""
    d = _dump(path)
    scores = d.audio_embeds.astype(np.float64) @ d.text_embeds.astype(np.float64).T
    bound = score_bound(
        d.audio_embeds,
        d.text_embeds,
        float32_scores=True,
        embedding_rel_error=EMBEDDING_REL_TOLERANCE,
    )
    relevant = dump_relevance_matrix(d)
    return sum(
        fragility(scores, bound, relevant, direction, among_relevant=True).fragile
        for direction in ("t2a", "a2t")
    )


def _value_at(view: RunView) -> Callable[[str], float | None]:
    def value(path: str) -> float | None:
        record = view.numbers.get(path)
        return None if record is None or record.value is None else float(record.value)

    return value


def tolerance_from(*runs: LoadedRun) -> Any:
    """The tolerance function of :func:`~audiorepro.checks.diff_compare.compare_runs` over the
    dumps of ``runs`` (the first that has the cell's), by the rule its kind declared
    (:data:`audiorepro.checks.moves.Rule`): :func:`.tiers.tier_b_tolerance` for a retrieval
    metric; for the rank rule 0 when no query is fragile (no rank can move) and None (no
    bound) when some is; None for a number of no rule (an EER, a probe's accuracy: no bound
    is derived for them, and their dumps need not hold texts to rank)."""

    def tolerance(record: NumberRecord) -> float | None:
        if record.value is not None and record.rule is None:
            # a number of an identity check: from the scale each run recorded, the larger
            tols = [identity_number_tolerance(record.path, _value_at(r.view)) for r in runs]
            if tols and all(t is not None for t in tols):
                return max(t for t in tols if t is not None)
        path = next((r.dumps[record.cell] for r in runs if record.cell in r.dumps), None)
        if path is None or record.value is None or record.rule not in ("retrieval", "ranks"):
            return None
        if record.rule == "retrieval" and isinstance(record.value, float):
            d = _dump(path)
            scale = float(d.meta.get("logit_scale", d.meta.get("logit_scale_a", 1.0)))
            try:
                return tier_b_tolerance(
                    record.metric, record.value, audio=d.audio_embeds, text=d.text_embeds,
                    relevance=dump_relevance_matrix(d), scale=scale if record.float32 else 1.0,
                    float32_scores=record.float32, extracted=True,
                )  # fmt: skip
            except ValueError:  # a metric with no rule of its own: the rank rule below
                pass
        return 0.0 if _fragile(path) == 0 else None

    return tolerance

"""One typed view of every number a run produces (:class:`audiorepro.runner.kinds.NumberRecord`),
the same for every kind: over the demo's retrieval and probe outputs and a zero-shot study's,
the view reaches every number of the bundle, once, under a unique path, with its value,
direction, tier and identities.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from audiorepro.runner import study  # noqa: F401 (registers the built-in kinds)
from audiorepro.runner.kinds import NumberRecord, kind_named
from tests.test_esc50 import tiny_study  # noqa: F401 (a fixture)


def _bundle(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((folder / "bundle.json.gz").read_bytes()))
    return data


def _numbers(node: Any, where: tuple[str | int, ...] = ()) -> dict[tuple[str | int, ...], Any]:
    """The test's own walk: every int or float leaf (bools are not numbers) by its keys."""
    found: dict[tuple[str | int, ...], Any] = {}
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in items:
        if isinstance(value, dict | list):
            found |= _numbers(value, (*where, key))
        elif type(value) in (int, float):
            found[(*where, key)] = value
    return found


def _view(kind: str, bundle: dict[str, Any]) -> dict[str, NumberRecord]:
    """The kind's view of ``bundle``: it covers every number, once, by a unique path."""
    view = list(kind_named(kind).numbers(bundle))
    leaves = _numbers(bundle)
    assert leaves, "a bundle without numbers proves nothing"
    assert sorted(map(repr, (r.where for r in view))) == sorted(map(repr, leaves))
    for record in view:
        assert record.value == leaves[record.where] and type(record.value) is type(
            leaves[record.where]
        )
    by_path = {r.path: r for r in view}
    assert len(by_path) == len(view), "two numbers under one path"
    return by_path


def test_the_view_of_the_demo_retrieval_bundle(demo: Path) -> None:
    bundle = _bundle(demo)
    view = _view("retrieval", bundle)
    cells = {c["id"]: c for c in bundle["cells"]}
    r1 = view["cells/synthetic/5cap/metrics/t2a/r@1"]
    assert (r1.value, r1.direction, r1.tier) == (
        cells["synthetic/5cap"]["metrics"]["t2a"]["r@1"],
        "higher",
        "a",
    )
    assert r1.identities.dump == cells["synthetic/5cap"]["dump_sha256"]
    assert view["cells/synthetic/5cap/metrics/t2a/mean_rank"].direction == "lower"
    # An extracted cell's numbers are tier b and name the weights and preprocessing.
    tiny = view["cells/tiny-laion/fixture-audio/metrics/a2t/r@5"]
    meta = cells["tiny-laion/fixture-audio"]["model_meta"]
    assert tiny.tier == "b" and tiny.identities.weights == meta["weights_sha256"]
    assert tiny.identities.settings and all("=" in s for s in tiny.identities.settings)
    laion = [r for p, r in view.items() if "/profiles/laion-clap/" in p]
    assert laion and all(r.tier == "b" for r in laion)
    assert view["cells/synthetic/5cap/n_clips"].tier is None
    # Study-level numbers carry no cell identity.
    assert all(r.identities.dump is None for p, r in view.items() if not p.startswith("cells/"))


def test_the_view_of_the_demo_probe_bundle(demo: Path) -> None:
    bundle = _bundle(demo / "probe")
    view = _view("probe", bundle)
    run = next(r for r in bundle["runs"] if r["predictions_sha256"] and r["config"])
    mine = {p: r for p, r in view.items() if p.startswith(f"runs/{run['id']}/")}
    assert mine and all(run["predictions_sha256"] in r.identities.files for r in mine.values())
    # Recomputed and saved numbers are tier a; a run's config holds settings (no tier).
    assert {r.tier for p, r in mine.items() if "/report/" in p} == {"a"}
    assert {r.tier for p, r in mine.items() if "/config/" in p} == {None}
    directions = {p.rpartition("/")[2]: r.direction for p, r in view.items()}
    assert directions.get("normalized_mae") == "lower" and directions.get("spearman") == "higher"


def test_the_view_of_a_zeroshot_bundle(tiny_study: tuple[Path, Path]) -> None:  # noqa: F811
    _, out = tiny_study
    bundle = _bundle(out)
    view = _view("zeroshot", bundle)
    cell = bundle["cells"][0]
    acc = view[f"cells/{cell['id']}/metrics/canonical/pessimistic/accuracy"]
    assert (acc.direction, acc.tier) == ("higher", "b")
    assert acc.identities.dump == cell["dump_sha256"]
    rank = view[f"cells/{cell['id']}/metrics/laion-clap-zeroshot/mean_rank"]
    assert rank.direction == "lower"
    recalls = [r for p, r in view.items() if "/per_class_recall/" in p]
    assert recalls and {r.direction for r in recalls} == {"higher"}

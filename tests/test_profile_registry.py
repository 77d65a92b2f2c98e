"""One registry of profiles: a toy profile registered here, in a test module, appears in
`metrics --profile`, `explain`, the published-value checks, the tiers, the catalog and the
JSON Schemas, without any change to the package; the built-in profiles' derived values are
the ones the package had before the registry (the schemas on disk stay byte-identical:
tests/test_schemas.py)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest

from audiorepro.checks.catalog import profile_entries
from audiorepro.checks.explain import concepts, explain, explain_text
from audiorepro.checks.tiers import tier_cell
from audiorepro.checks.verify import verify_published
from audiorepro.cli import main
from audiorepro.cli.evaluate import RetrievalProfile
from audiorepro.cli.metrics import profile_help
from audiorepro.core.errors import UserError
from audiorepro.formats.dump import Dump, make_dump, save_dump
from audiorepro.metrics.profiles import (
    PROFILES,
    ZEROSHOT_PROFILES,
    Profile,
    ProfileRequest,
    ProfileResult,
    compute_profile,
    names_problem,
    profile_names,
    register_profile,
    unregister_profile,
)
from audiorepro.metrics.retrieval import compute_retrieval
from audiorepro.specs.published import load_published, profile_metric_problem
from tests.conftest import ROOT

TOY = "toy-first-hit"
TOY_METRICS = ("t2a_first_hit", "a2t_first_hit")


def _first_hit(request: ProfileRequest) -> ProfileResult:
    """The toy peer: the share of queries whose top item, the FIRST index among equal float64
    scores (numpy.argmax), is relevant; its own code, not the exact engine's."""
    dump = request.dump
    scores = dump.audio_embeds.astype(np.float64) @ dump.text_embeds.astype(np.float64).T
    assert dump.text_to_audio is not None
    t2a = dump.text_to_audio
    t2a_hit = np.argmax(scores, axis=0) == t2a
    a2t_hit = t2a[np.argmax(scores, axis=1)] == np.arange(dump.n_clips)
    metrics = {"t2a_first_hit": float(np.mean(t2a_hit)), "a2t_first_hit": float(np.mean(a2t_hit))}
    return ProfileResult(TOY, metrics, ["numpy.argmax: the first index among tied scores"])


@pytest.fixture
def toy() -> Iterator[Profile]:
    profile = register_profile(
        Profile(
            TOY,
            "retrieval",
            _first_hit,
            metric_problem=names_problem(TOY, TOY_METRICS),
            names_schema={"enum": list(TOY_METRICS)},
            metric_names=TOY_METRICS,
            concepts={"r@1": "{d}_first_hit"},
            tie_rule="the first index (numpy.argmax)",
            origin="registered by a test",
        )
    )
    try:
        yield profile
    finally:
        unregister_profile(TOY)
    assert TOY not in profile_names()


def _dump(seed: int = 3) -> Dump:
    rng = np.random.default_rng(seed)
    audio = rng.standard_normal((6, 8)).astype(np.float32)
    text = (audio[[0, 1, 2, 3, 4, 5, 0, 2, 4]] + rng.standard_normal((9, 8))).astype(np.float32)
    return make_dump(audio, text, [0, 1, 2, 3, 4, 5, 0, 2, 4], source="toy.npz")


def _tied_dump() -> Dump:
    """Captions 0 and 2 tie clips 0 and 1 exactly; caption 0's clip is 1 (the first index
    misses it), caption 2's is 0 (the first index finds it); caption 1 has no tie."""
    audio = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    text = np.array([[1, 0], [0, 1], [1, 0.5]], dtype=np.float32)
    return make_dump(audio, text, [1, 2, 0])


def test_the_built_in_registry_is_the_former_constants() -> None:
    assert profile_names("retrieval") == PROFILES == ("canonical", "laion-clap", "trec", "dcase")
    assert profile_names("zeroshot") == ZEROSHOT_PROFILES == ("laion-clap-zeroshot",)
    with pytest.raises(ValueError, match="already registered"):
        register_profile(Profile("trec", "retrieval", _first_hit))


def test_the_toy_profile_computes_its_own_definition(toy: Profile) -> None:
    dump = _dump()
    got = compute_profile(dump, TOY).metrics
    exact = compute_retrieval(dump).metrics("pessimistic")
    # Without ties the first index is the exact top item: the canonical r@1.
    assert got == {"t2a_first_hit": exact["t2a"]["r@1"], "a2t_first_hit": exact["a2t"]["r@1"]}
    tied = compute_profile(_tied_dump(), TOY).metrics
    exact = compute_retrieval(_tied_dump()).metrics("optimistic")
    pessimistic = compute_retrieval(_tied_dump()).metrics("pessimistic")
    assert tied["t2a_first_hit"] == pytest.approx(2 / 3)
    assert (exact["t2a"]["r@1"], pessimistic["t2a"]["r@1"]) == (1.0, pytest.approx(1 / 3))


def test_metrics_profile_offers_the_toy(
    toy: Profile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "toy.npz"
    save_dump(path, _dump())
    out = tmp_path / "toy.json"
    assert main(["metrics", str(path), "--profile", TOY, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"profile {TOY}" in text and "t2a_first_hit" in text
    doc = json.loads(out.read_text())
    assert doc["profile"] == TOY and set(doc["metrics"]) == set(TOY_METRICS)
    # Its cutoffs are its own (not declared settable), like laion-clap's and dcase's.
    assert main(["metrics", str(path), "--profile", TOY, "--k", "1,5"]) == 2
    err = capsys.readouterr().err
    assert "applies to the canonical and trec profiles" in err and err.count("\n") == 1
    assert main(["metrics", str(path), "--profile", "no-such-peer"]) == 2
    err = capsys.readouterr().err
    assert f"laion-clap-zeroshot, {TOY}" in err and err.count("\n") == 1


def test_explain_shows_the_toy(toy: Profile) -> None:
    report = explain(_tied_dump())
    row = next(r for r in report["directions"]["t2a"]["rows"] if r["concept"] == "R@1")
    assert row["profiles"][TOY] == {"name": "t2a_first_hit", "value": pytest.approx(2 / 3)}
    (diff,) = [d for d in report["directions"]["t2a"]["differences"] if d["profile"] == TOY]
    assert "the first index (numpy.argmax)" in diff["text"]
    assert "within the canonical tie bounds" in diff["text"]
    assert TOY in explain_text(report)
    assert concepts([1, 5])["R@1"][1][TOY] == "{d}_first_hit"


def _published(tmp_path: Path, values: dict[str, float]) -> Path:
    lines = "\n".join(f'"{k}" = {v!r}' for k, v in values.items())
    path = tmp_path / "published.toml"
    path.write_text(
        'schema = "audiorepro.published/1"\n\n[[cell]]\ndump = "toy.npz"\n'
        f'profile = "{TOY}"\ntolerance = 1e-9\n\n[cell.values]\n{lines}\n'
    )
    return path


def test_published_values_name_the_toys_metrics(toy: Profile, tmp_path: Path) -> None:
    dump = _dump()
    save_dump(tmp_path / "toy.npz", dump)
    value = compute_profile(dump, TOY).metrics["t2a_first_hit"]
    cells = load_published(_published(tmp_path, {"t2a_first_hit": value}))
    summary = verify_published(cells, tmp_path)
    assert summary["counts"]["PASS"] == 1 and summary["passed"]
    assert profile_metric_problem(TOY, "t2a_hit@1") == (
        f"unknown {TOY} metric; expected one of t2a_first_hit, a2t_first_hit"
    )
    with pytest.raises(UserError) as err:
        load_published(_published(tmp_path, {"t2a_hit@1": value}))
    message = str(err.value)
    assert "\n" not in message and "published.toml" in message and "t2a_first_hit" in message


def test_an_unregistered_profile_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        load_published(_published(tmp_path, {"t2a_first_hit": 0.5}))
    message = str(err.value)
    assert "\n" not in message and f"unknown profile '{TOY}'" in message


def _schemas() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("schemas_tool", ROOT / "tools" / "schemas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: json.loads(text) for name, text in module.build().items()}


def _find(node: Any, pred: Any) -> list[Any]:
    found = [node] if pred(node) else []
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        found += _find(child, pred)
    return found


def test_the_schemas_derive_the_toy(toy: Profile) -> None:
    built = _schemas()
    published = built["published.schema.json"]
    enums = _find(
        published, lambda n: isinstance(n, dict) and n.get("enum") == list(profile_names())
    )
    assert enums and TOY in enums[0]["enum"]
    rules = _find(published, lambda n: isinstance(n, dict) and n.get("const") == TOY)
    assert rules, "no if/then rule for the toy's metric names"
    assert _find(published, lambda n: isinstance(n, dict) and n.get("enum") == list(TOY_METRICS))
    study = built["study.schema.json"]
    assert _find(study, lambda n: isinstance(n, dict) and TOY in n.get("enum", []))


def test_the_schemas_forget_the_toy_after_it_is_unregistered() -> None:
    for name, doc in _schemas().items():
        text = json.dumps(doc)
        assert TOY not in text, name
        assert text == json.dumps(json.loads((ROOT / "docs" / "schemas" / name).read_text()))


def test_tiers_and_catalog_follow_the_declaration(toy: Profile) -> None:
    dump = _dump()
    values = compute_profile(dump, TOY).metrics
    tiered = tier_cell({}, {TOY: values}, dump, extracted=False)
    assert tiered["profiles"][TOY] == values  # exact (tier a): not declared float32_scores
    float32 = register_profile(Profile("toy-float32", "retrieval", _first_hit, float32_scores=True))
    try:
        # Its values (named as the tiers' rank rule reads them) are tier b on a shipped dump.
        named = {"text_to_audio_R@1": values["t2a_first_hit"]}
        leaf = tier_cell({}, {float32.name: named}, dump, extracted=False)["profiles"]
        assert leaf[float32.name]["text_to_audio_R@1"]["tier"] == "b"
    finally:
        unregister_profile(float32.name)
    (entry,) = [e for e in profile_entries() if e.name == TOY]
    assert entry.description == "retrieval dumps" and entry.state == "registered by a test"


def test_evaluate_and_help_read_the_registry(toy: Profile) -> None:
    assert RetrievalProfile().convert(TOY, None, None) == TOY
    with pytest.raises(click.BadParameter, match=TOY):
        RetrievalProfile().convert("no-such-peer", None, None)
    assert profile_help().endswith(
        "laion-clap-zeroshot (a dump with one relevant text, the class prompt, per clip), "
        f"or {TOY}."
    )


def test_a_zeroshot_study_computes_every_zeroshot_profile_of_the_registry() -> None:
    """A zero-shot cell's metrics are the canonical ones and every zero-shot profile the
    registry holds, each under its own name: a profile registered once reaches the study."""
    from audiorepro.metrics.zeroshot import laion_clap_zeroshot
    from audiorepro.runner.kinds.zeroshot import cell_metrics

    rng = np.random.default_rng(5)
    audio = rng.standard_normal((6, 4)).astype(np.float32)
    text = rng.standard_normal((3, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2], dtype=np.int64)
    dump = make_dump(audio, text, relevance_indptr=np.arange(7), relevance_indices=labels)

    def clips(request: ProfileRequest) -> ProfileResult:
        return ProfileResult("toy-zeroshot", {"clips": float(request.dump.n_clips)})

    register_profile(Profile("toy-zeroshot", "zeroshot", clips, metric_names=("clips",)))
    try:
        metrics = cell_metrics(dump, labels)
    finally:
        unregister_profile("toy-zeroshot")
    assert metrics.profiles["toy-zeroshot"] == {"clips": 6.0}
    assert metrics.profiles["laion-clap-zeroshot"] == laion_clap_zeroshot(audio, text, labels)
    assert set(metrics.canonical) == {"pessimistic", "optimistic"}

"""The JSON Schemas in docs/schemas/ accept exactly what the validators accept.

An editor (or another tool) checks a study with the schema; audiorepro checks it with the
pydantic declarations the schema is generated from. Where they disagree a file passes one and
fails the other. Checked here by machine, with jsonschema (extra ``test``): every valid example
the project ships (studies, published values, the registry, saved measurements) and, for each,
every mutation of a class of invalid input (each value replaced by a value of every other JSON
type, a negative or fractional count, an unknown key in every table, each required key
removed, an empty table or list). A mutation accepted by one and refused by the other fails the
test, naming the file, the path and the mutation.

What a JSON Schema cannot say is listed in :data:`SEMANTIC` and checked here to be refused by
the loader (and accepted by the schema): uniqueness of names inside lists and references
between tables. NaN and infinity have no JSON spelling, so they are not compared; the
validators refuse them (tests/test_hostile.py, tests/test_study.py).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from audiorepro.core.errors import UserError
from audiorepro.models.registry import bundled_registry
from audiorepro.runner.demo import prepare_probe_demo
from audiorepro.runner.kinds.hear.spec import HearStudyFile
from audiorepro.runner.kinds.probe.measurements import kind_of, parse_measurements
from audiorepro.runner.kinds.probe.published import ProbePublishedFile
from audiorepro.specs.published import PublishedFile
from audiorepro.specs.registry import RegistryFile
from audiorepro.specs.schema import validate
from audiorepro.specs.study import (
    LinearProbeStudyFile,
    ProbeStudyFile,
    RetrievalStudyFile,
    SpeakerVerificationStudyFile,
    ZeroshotStudyFile,
)
from tests import test_hostile as hostile
from tests.conftest import FIXTURES, GOLDEN, ROOT

SCHEMAS = ROOT / "docs" / "schemas"
#: Values of every JSON type, put in place of each value of a valid document.
REPLACEMENTS: tuple[Any, ...] = (True, "x", 1.5, -1, 0, None, [], {}, [1], {"k": 1})
UNKNOWN = "zz_not_a_key"
Schema = jsonschema.Draft202012Validator


@functools.cache
def _schema(stem: str, branch: str | None = None) -> Schema:
    """The checker of a schema file (of one member of its top-level union, by a name in it)."""
    doc: dict[str, Any] = json.loads((SCHEMAS / f"{stem}.schema.json").read_text())
    if branch is not None:
        (member,) = [m for m in doc["anyOf"] if branch in json.dumps(m)]
        doc = {"$defs": doc["$defs"], **member}
    jsonschema.Draft202012Validator.check_schema(doc)
    return jsonschema.Draft202012Validator(doc)


def _accepts_schema(schema: Schema, doc: Any) -> bool:
    return bool(schema.is_valid(doc))


def _accepts(check: Callable[[Any], object], doc: Any) -> bool:
    try:
        check(doc)
    except UserError:
        return False
    return True


def _study(doc: Any) -> object:
    kind = doc.get("kind", "retrieval") if isinstance(doc, dict) else None
    kinds = {
        "probe": ProbeStudyFile,
        "zeroshot": ZeroshotStudyFile,
        "linear-probe": LinearProbeStudyFile,
        "speaker-verification": SpeakerVerificationStudyFile,
        "hear": HearStudyFile,
    }
    model = kinds.get(kind, RetrievalStudyFile) if isinstance(kind, str) else RetrievalStudyFile
    return validate(model, doc, source="s.toml")


def _measurements(split: str) -> Callable[[Any], object]:
    return lambda doc: parse_measurements(doc, split, source="m.json")


def _branch(split: str) -> str | None:
    return {"held-out": "HeldOutFile", "adapter": "AdapterFile", "public": "CutMetrics"}[
        kind_of(split)
    ]


def _examples(tmp: Path) -> list[tuple[str, Any, Schema, Callable[[Any], object]]]:
    """(name, document, schema, validator) for every valid example."""
    out: list[tuple[str, Any, Schema, Callable[[Any], object]]] = []
    probe_study = prepare_probe_demo(tmp / "probe")
    for path in [*sorted((ROOT / "studies").glob("*.toml")), probe_study]:
        out.append((path.name, tomllib.loads(path.read_text()), _schema("study"), _study))
    from tests.test_documented_commands import blocks

    # docs/hear.md's hear study (its task folders are not needed to check its form).
    (hear,) = [b.body for b in blocks("docs/hear.md") if b.lang == "toml"]
    out.append(("hear-study.toml", tomllib.loads(hear), _schema("study"), _study))
    for path in (
        GOLDEN / "published" / "clap_retrieval.toml",
        ROOT / "src" / "audiorepro" / "data" / "demo_published.toml",
    ):
        doc = tomllib.loads(path.read_text())
        out.append(
            (path.name, doc, _schema("published"), lambda d: validate(PublishedFile, d, source="p"))
        )
    doc = tomllib.loads((GOLDEN / "published" / "probe_demo.toml").read_text())
    out.append(
        (
            "probe_demo.toml",
            doc,
            _schema("probe-published"),
            lambda d: validate(ProbePublishedFile, d, source="p"),
        )
    )
    out.append(
        (
            "checkpoints.toml",
            tomllib.loads(bundled_registry().read_text()),
            _schema("registry"),
            lambda d: validate(RegistryFile, d, source="r"),
        )
    )
    # One saved file of each split kind (held-out with two speaker sets and event classes,
    # public with prompts, dimensions and categories, adapter), and the saved-only legacy file.
    for name, split in (
        ("whisper-ft__crema-like__test.json", "test"),
        ("clap-mlp__legacy__p3.json", "p3"),
        ("clap-mlp__human__public.json", "public"),
        ("clap-mlp__ravdess-like__adapter.json", "adapter_ravdess"),
    ):
        doc = json.loads((FIXTURES / "probe" / name).read_text())
        out.append((name, doc, _schema("measurements", _branch(split)), _measurements(split)))
    return out


def _tables(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, node) of a parsed document, tables and lists included."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _tables(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _tables(value, (*path, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def _drop(doc: Any, path: tuple[Any, ...]) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return out


def _mutations(doc: Any, *, toml: bool) -> Iterator[tuple[str, Any]]:
    """Invalid-input classes: each applied wherever it can be (lists: their first three items,
    which keeps the count of cases in the seconds while every kind of item is reached). TOML
    has no null: a TOML format's document never holds one, so None is not put in."""
    nodes = [
        (p, n) for p, n in _tables(doc) if not any(isinstance(part, int) and part > 2 for part in p)
    ]
    replacements = [v for v in REPLACEMENTS if not (toml and v is None)]
    for path, node in nodes:
        where = "/".join(str(p) for p in path) or "<top>"
        if path:
            for value in replacements:
                if type(value) is not type(node) or value != node:
                    yield f"{where} = {value!r}", _set(doc, path, value)
            if not isinstance(path[-1], int):
                yield f"{where} removed", _drop(doc, path)
        if isinstance(node, dict):
            yield (
                f"{where}.{UNKNOWN} = 1",
                _set(doc, (*path, UNKNOWN), 1)
                if path
                else {
                    **doc,
                    UNKNOWN: 1,
                },
            )
            if path:
                yield f"{where} = {{}}", _set(doc, path, {})
        if isinstance(node, list) and path:
            yield f"{where} = []", _set(doc, path, [])


@pytest.fixture(scope="module")
def examples(
    tmp_path_factory: pytest.TempPathFactory,
) -> list[tuple[str, Any, Schema, Callable[[Any], object]]]:
    return _examples(tmp_path_factory.mktemp("schema-agreement"))


def test_valid_examples_pass_both(
    examples: list[tuple[str, Any, Schema, Callable[[Any], object]]],
) -> None:
    for name, doc, schema, check in examples:
        assert _accepts(check, doc), name
        assert _accepts_schema(schema, doc), name


def test_schema_and_validator_agree_on_every_mutation(
    examples: list[tuple[str, Any, Schema, Callable[[Any], object]]],
) -> None:
    disagreements = []
    compared = 0
    for name, doc, schema, check in examples:
        for what, mutated in _mutations(doc, toml=not name.endswith(".json")):
            compared += 1
            ours, theirs = _accepts(check, mutated), _accepts_schema(schema, mutated)
            if ours != theirs:
                disagreements.append(
                    f"{name}: {what}: validator {'accepts' if ours else 'refuses'}, "
                    f"schema {'accepts' if theirs else 'refuses'}"
                )
    assert compared > 1000  # every example was mutated, not a few
    assert not disagreements, "\n".join(disagreements[:40])


def _held_out() -> dict[str, Any]:
    return {"per_score": [{"score": "a", "n": 1}], "burst_per_class": [{"name": "laugh"}]}


#: What a JSON Schema cannot say: (what, split or format, document). The loader refuses each.
SEMANTIC: list[tuple[str, str, Any]] = [
    (
        "a score named twice",
        "test",
        {"per_score": [{"score": "a"}, {"score": "a"}]},
    ),
    (
        "an event class named twice",
        "test",
        {"burst_per_class": [{"name": "laugh"}, {"name": "laugh"}]},
    ),
]


@pytest.mark.parametrize(("what", "split", "doc"), SEMANTIC, ids=[s[0] for s in SEMANTIC])
def test_what_the_schema_cannot_say_is_refused_by_the_loader(
    what: str, split: str, doc: Any
) -> None:
    schema = _schema("measurements", _branch(split))
    assert _accepts_schema(schema, doc)
    assert not _accepts(_measurements(split), doc)
    assert _accepts(_measurements(split), _held_out())


def _finite(doc: Any) -> bool:
    return all(not isinstance(node, float) or math.isfinite(node) for _, node in _tables(doc))


def test_the_hostile_toml_classes_agree(tmp_path: Path) -> None:
    """tests/test_hostile.py's malformed TOML files, where they parse (a FIFO, bad UTF-8 or
    broken TOML never reaches either check) and hold no NaN or infinity (no JSON spelling)."""
    checks: dict[str, tuple[Schema, Callable[[Any], object]]] = {
        "study": (_schema("study"), _study),
        "published": (_schema("published"), lambda d: validate(PublishedFile, d, source="p")),
        "registry": (_schema("registry"), lambda d: validate(RegistryFile, d, source="r")),
    }
    compared = []
    for fmt, (valid, own, _) in hostile.TOML_FORMATS.items():
        schema, check = checks[fmt]
        for case, (make, _) in sorted({**hostile.TOML_CLASSES, **own}.items()):
            folder = tmp_path / fmt / case
            folder.mkdir(parents=True)
            path = folder / "bad.toml"
            make(path, valid(folder))
            if not path.is_file():
                continue  # a FIFO or a folder: refused before anything is read
            try:
                doc = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError, RecursionError):
                continue
            if not _finite(doc):
                continue
            compared.append(f"{fmt}/{case}")
            assert _accepts(check, doc) == _accepts_schema(schema, doc), (fmt, case)
    assert {"study/negative-seed", "study/trec-name", "published/dcase-name",
            "registry/wrong-schema"} <= set(compared)  # fmt: skip

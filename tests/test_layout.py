"""The package's layout: layers in one declared order, no import circle, imports at the top.

Imports inside functions count as imports here: a circle hidden by a lazy import is still a
circle. A module may import its own layer and the layers below it, never one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "audiorepro"

#: The layers, lowest first. A module belongs to the longest entry its name starts with.
LAYERS = (
    "audiorepro.core",  # errors, atomic deterministic output, hashing, progress, threads
    "audiorepro.formats",  # data files: dump, audio, captions, probe predictions
    "audiorepro.metrics",  # pure metric functions over dumps and predictions; the profile registry
    "audiorepro.reference",  # the independent reference, sharing nothing with metrics
    "audiorepro.specs",  # files a user writes: study, published values, settings, registry
    "audiorepro.render",  # tables and the HTML report
    "audiorepro.synthetic",  # seeded fixture data
    "audiorepro.models",  # everything that loads weights
    "audiorepro.fetch",  # the one downloader: pinned checkpoints and hashed datasets
    "audiorepro.checks",  # parity, verify, explain, selfcheck, locks
    "audiorepro.runner.cache",  # the extraction cache, shared by the executors
    "audiorepro.runner.executors",  # local and Slurm extraction, called by the runner
    "audiorepro.runner",  # study -> output folder
    "audiorepro.api",  # the Python API that `import audiorepro` re-exports
    "audiorepro.cli",  # argument parsing and printing
    "audiorepro",  # entry points only: __init__, __main__
)
#: The study kinds: name -> the module whose :class:`audiorepro.runner.kinds.StudyKind` runs it
#: (registered with ``@register_kind``). A new kind is one such module plus its spec; the
#: interface and driver (``runner.kinds``) know no kind, and ``runner.study`` imports the
#: kinds only to register them, never branching on a kind's name.
KINDS = {
    "retrieval": "audiorepro.runner.kinds.retrieval",
    "probe": "audiorepro.runner.kinds.probe",  # an adapter over its runs, content and saved
    "zeroshot": "audiorepro.runner.kinds.zeroshot",
    "linear-probe": "audiorepro.runner.kinds.linear_probe",
    "speaker-verification": "audiorepro.runner.kinds.speaker_verification",
    "hear": "audiorepro.runner.kinds.hear",
}
#: Dependencies heavy enough to import lazily, inside the function that needs them: the
#: optional model stack (with fetch's downloaders), Slurm and browser stacks, and scipy.signal
#: (half a second at every start of the command line, for the few clips that need resampling).
LAZY = {
    "scipy.signal",
    # scipy's optimizers, half a second at import: the event metrics' matching
    # (linear_sum_assignment), not the renderer that imports them (every report, diff's too).
    "scipy.optimize",
    "resemblyzer",
    "librosa",
    "torch",
    "torchaudio",
    "laion_clap",
    "transformers",
    "safetensors",
    "soundfile",
    "huggingface_hub",
    "pooch",
    "py7zr",
    "requests",
    "submitit",
    "selenium",
    "tqdm",
    "threadpoolctl",
    # scikit-learn: the linear-v1 and ridge-v1 probes (a second at import, for one command).
    "sklearn",
    # The compiled passes of the exact rank counts (C, loaded with ctypes) load when a rank
    # count is computed, not for a profile's declaration (verify OUT, diff).
    "audiorepro.metrics._exact_kernels",
    # What ``diff`` and ``verify OUT`` never use (issue 48 item 4): the markdown parser (a
    # report's notes), cryptography (only with --key/--trusted-keys, and to sign), and the
    # probe kind's computation and spec models (a probe bundle is read with its records alone).
    "markdown_it",
    "cryptography",
    "audiorepro.runner.output.keys",
    "audiorepro.runner.kinds.probe.content",
    "audiorepro.runner.kinds.probe.gates",
    "audiorepro.runner.kinds.probe.runs",
    "audiorepro.runner.kinds.probe.saved",
    "audiorepro.runner.kinds.probe.spec",
    # ... and the retrieval kind's: its extraction (the cache, the executors, the model
    # registry), its spec, the datasets' registry, the identity check, the caption selection.
    "audiorepro.models.extract",
    "audiorepro.runner.cache",
    "audiorepro.runner.executors.extraction",
    "audiorepro.runner.executors.local",
    "audiorepro.models.registry",
    "audiorepro.models.identity",
    "audiorepro.fetch.datasets",
    "audiorepro.runner.kinds.retrieval.spec",
    "audiorepro.specs.selection",
    # The Python API behind `import audiorepro` (audiorepro.__getattr__): the whole runner,
    # seconds of imports that no command, worker or `import audiorepro.core...` should pay.
    "audiorepro.api",
}


#: Modules that import their stack inside the function that needs it, whatever it is: a
#: command's module declares its options and help at its top (click only) and imports its
#: work when it runs, so that ``audiorepro CMD --help`` loads no numeric stack (issue 48;
#: tests/test_cli_startup.py runs every command's help in a fresh process).
LAZY_IMPORTERS = ("audiorepro.cli.",)


def _lazy_ok(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in LAZY)


def modules(root: Path = SRC) -> dict[str, Path]:
    out = {}
    for path in sorted((root / "audiorepro").rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        out[name] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported module of the package, line, inside a function) for every import in ``path``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nested: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            nested |= {id(n) for n in ast.walk(node) if n is not node}
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                out.append((target, node.lineno, id(node) in nested))
    return out


def graph(root: Path = SRC) -> dict[str, set[str]]:
    mods = modules(root)
    return {m: {t for t, _, _ in imports(m, p, set(mods))} for m, p in mods.items()}


def layer(module: str) -> int:
    matches = [i for i, p in enumerate(LAYERS) if module == p or module.startswith(p + ".")]
    assert matches, f"{module} is in no layer: add its folder to LAYERS"
    return max(matches, key=lambda i: len(LAYERS[i]))


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} -> {b}" for a, targets in edges.items() for b in targets if layer(b) > layer(a)
    )


def test_no_import_circle() -> None:
    assert circles(graph()) == []


def test_no_upward_import() -> None:
    assert upward(graph()) == []


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer(module)


def test_imports_at_module_top_unless_heavy() -> None:
    mods = modules()
    lazy = []
    for name, path in mods.items():
        if name.startswith(LAZY_IMPORTERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                else:
                    continue
                lazy += [f"{name}:{node.lineno} {n}" for n in names if not _lazy_ok(n)]
    assert lazy == []


def test_top_level_holds_only_entry_points() -> None:
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert top == {"__init__.py", "__main__.py"}


# The checks themselves must be able to fail: a circle and an upward import on a toy package.
def _toy(tmp: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for rel, text in files.items():
        path = tmp / "audiorepro" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return graph(tmp)


def test_a_circle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    edges = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "runner/__init__.py": "",
            "runner/a.py": "from audiorepro.runner.b import g\n",
            "runner/b.py": "def g():\n    from audiorepro.runner import a\n",
        },
    )
    assert circles(edges) == [["audiorepro.runner.a", "audiorepro.runner.b"]]


def test_a_relative_circle_is_found(tmp_path: Path) -> None:
    edges = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/a.py": "from .b import x\n",
            "core/b.py": "from . import a\n",
        },
    )
    assert circles(edges) == [["audiorepro.core.a", "audiorepro.core.b"]]


UPWARD = [
    ("metrics/x.py", "from audiorepro.models import y\n", "audiorepro.metrics.x", "models"),
    ("runner/executors/x.py", "def f():\n    import audiorepro.runner.y\n",
     "audiorepro.runner.executors.x", "runner"),
]  # fmt: skip


@pytest.mark.parametrize(("module", "text", "lower", "upper"), UPWARD)
def test_an_upward_import_is_found(
    tmp_path: Path, module: str, text: str, lower: str, upper: str
) -> None:
    edges = _toy(tmp_path, {module: text, "models/y.py": "", "runner/y.py": ""})
    assert upward(edges) == [f"{lower} -> audiorepro.{upper}.y"]


def test_each_kind_is_registered_by_its_module() -> None:
    from audiorepro.runner import study  # noqa: F401 (imports the kinds: they register)
    from audiorepro.runner.kinds import kind_named, kind_names

    assert set(kind_names()) == set(KINDS)
    for name, module in KINDS.items():
        assert type(kind_named(name)).__module__ == module


def imports_interface(path: Path) -> bool:
    """Whether ``path`` imports from the kinds' interface (``audiorepro.runner.kinds``): its
    own package for a kind inside ``runner/kinds/``, which :func:`graph` leaves out."""
    return any(
        isinstance(node, ast.ImportFrom) and node.module == "audiorepro.runner.kinds"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )


def test_the_interface_knows_no_kind() -> None:
    edges = graph()
    paths = modules()
    assert edges["audiorepro.runner.kinds"] & set(KINDS.values()) == set()
    assert not imports_interface(paths["audiorepro.runner.study"].parent / "cache.py")
    for module in KINDS.values():
        assert imports_interface(paths[module]), module
    assert set(KINDS.values()) <= edges["audiorepro.runner.study"]


#: ``runner/executors/``: the executors (local, Slurm) and the interface they run any kind's
#: extraction through; what a kind extracts, and how, lives with the kind in ``runner/kinds/``.
EXECUTORS = {
    "audiorepro.runner.executors",
    "audiorepro.runner.executors.extraction",
    "audiorepro.runner.executors.local",
    "audiorepro.runner.executors.slurm",
}


def _is_spec(module: str | None) -> bool:
    """The study frame, or a kind's own spec (``runner/kinds/<kind>/spec.py``: a kind's spec
    moved beside its computation, issue 45)."""
    return module == "audiorepro.specs.study" or (
        module is not None
        and module.startswith("audiorepro.runner.kinds.")
        and module.endswith(".spec")
    )


def kind_studies_imported(path: Path) -> list[str]:
    """The study classes of a kind (``RetrievalStudy``, ``ZeroshotStudy``...) ``path`` imports."""
    return [
        alias.name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and _is_spec(node.module)
        for alias in node.names
        if alias.name.endswith("Study")
    ]


def test_the_executors_know_no_kind() -> None:
    paths = modules()
    assert {m for m in paths if m.startswith("audiorepro.runner.executors")} == EXECUTORS
    assert kind_studies_imported(paths["audiorepro.runner.kinds.zeroshot"]) == ["ZeroshotStudy"]
    for module in EXECUTORS:
        assert kind_studies_imported(paths[module]) == [], module


def branches_on_kind(text: str) -> list[int]:
    """Lines comparing a ``.kind`` with something (``study.kind == "probe"``)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Compare)
        and any(
            isinstance(x, ast.Attribute) and x.attr == "kind"
            for x in (node.left, *node.comparators)
        )
    ]


def test_the_runner_does_not_branch_on_a_kind() -> None:
    assert branches_on_kind("if study.kind == 'probe':\n    pass\n") == [1]
    assert branches_on_kind((PACKAGE / "runner" / "study.py").read_text(encoding="utf-8")) == []

"""Derived numbers (``[[derived]]``): a study's formula over saved numbers of one or more files.

A published report often shows numbers its pipeline never saved: the CPS MAE in training
standard deviations (the saved raw MAE over the SD in ``training_normalization.json``), the
GPU-hours of the study's Slurm allocations, the count of runs with a validation file. A study
declares each with its formula, and the report and bundle show the formula beside the value::

    files = { norm = "release/training_normalization.json", jobs = "job_audit.json" }

    [[derived]]
    name = "cps_normalized_mae"
    formula = "{test:cps_raw_mae} / {norm:cps_std}"           # per run: a split of the run

    [[derived]]
    name = "gpu_hours"
    formula = "sum({jobs:jobs[*].ElapsedRaw} * tres({jobs:jobs[*].AllocTRES}, 'gres/gpu')) / 3600"

    [[derived]]
    name = "validation_runs"
    formula = "count({*validation:clips})"                  # over every run
    of = "count({*test:clips})"                             # shown as 11/40

A reference ``{name:key path}`` names a split of the run (the formula is then per run) or a
file alias of ``files`` (relative to the study's ``root``); ``{*split:key path}`` is the list
of that number over every run (None where a run lacks it). ``[*]`` in a key path is every
item of a list. The formula is parsed with :mod:`ast` and only this grammar is accepted:
numbers, references, ``+ - * /``, unary minus, parentheses, one ``==`` or ``!=`` (1 where
it holds, 0 where not: ``tres(..., 'gres/gpu') == 4`` keeps the four-GPU allocations), and the
functions ``sum``,
``count``, ``mean`` (of a list, over its recorded items: None is left out), ``tres(x, 'kind')``
(the count of one resource in a Slurm TRES text such as ``cpu=72,gres/gpu=4``; 0 where it is
absent). Nothing is ever passed to :func:`eval`. Arithmetic on two lists is item by item
(equal lengths), on a list and a number with each item; any None makes the result None (not
recorded), and so does a division by zero (undefined).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field

from audiorepro.core.errors import UserError
from audiorepro.core.io import parse_json, read_text
from audiorepro.formats.keypath import KeyPathError, locate, parse
from audiorepro.specs.schema import Spec

#: ``{name:key path}`` or ``{*split:key path}`` inside a formula
_REF = re.compile(r"\{(?P<all>\*?)(?P<name>[A-Za-z_][A-Za-z0-9_-]*):(?P<path>[^{}]+)\}")
FUNCTIONS = ("sum", "count", "mean", "tres")
MAX_FORMULA = 2000
MAX_DEPTH = 100
GRAMMAR = "numbers, {file:key path} references, + - * /, == !=, sum/count/mean/tres"

Value = float | list[float | None] | None


class DerivedSpec(Spec):
    """``[[derived]]``: a number the study derives from saved numbers, with its formula."""

    name: str = Field(description="the number's name (a table column or row)", min_length=1)
    formula: str = Field(description="the formula (the grammar of docs/probe-layout.md)")
    of: str | None = Field(None, description="a second formula: the value is shown as 'x/of'")
    label: str | None = Field(None, description="the label the report shows (default: name)")


@dataclass(frozen=True)
class Ref:
    """One reference of a formula."""

    name: str
    path: str
    every_run: bool
    #: the reference is tres()'s first argument, the one place a formula reads text
    in_tres: bool = False

    @property
    def text(self) -> str:
        return "{" + ("*" if self.every_run else "") + f"{self.name}:{self.path}" + "}"


@dataclass(frozen=True)
class Formula:
    """A parsed formula: its text, references and checked syntax tree."""

    text: str
    refs: tuple[Ref, ...]
    tree: ast.expr
    #: where the formula was written (the study file and its key), for errors in evaluation
    source: Path | None = None
    key: str | None = None


@dataclass(frozen=True)
class Derived:
    """A ``[[derived]]`` number, its formulas parsed; ``per_run`` when it names a run's split."""

    name: str
    label: str
    formula: Formula
    of: Formula | None
    per_run: bool


def _check_node(node: ast.AST, names: int, where: str, source: Path) -> None:
    """Only the grammar: anything else (attributes, subscripts, lambdas ...) is refused."""
    bad: str | None = None
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
            bad = f"operator {type(node.op).__name__}"
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub | ast.UAdd):
            bad = f"operator {type(node.op).__name__}"
    elif isinstance(node, ast.Compare):
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq | ast.NotEq):
            bad = "a comparison other than one == or !="
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float | str):
            bad = f"constant {node.value!r}"
    elif isinstance(node, ast.Name):
        if not re.fullmatch(r"__ref\d+", node.id) or int(node.id[5:]) >= names:
            bad = f"name {node.id!r} (write a reference as {{file:key path}})"
    elif isinstance(node, ast.Call):
        func = node.func.id if isinstance(node.func, ast.Name) else None
        arity = 2 if func == "tres" else 1
        if func not in FUNCTIONS or node.keywords or len(node.args) != arity:
            bad = f"call of {ast.unparse(node.func)!r} (functions: sum, count, mean of one "
            bad += "list; tres(x, 'kind'))"
        elif func == "tres" and not (
            isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
        ):
            bad = "tres(x, 'kind') without a quoted kind"
        if bad is None:
            for arg in node.args[:1]:  # tres()'s kind is the one text a formula may hold
                _check_node(arg, names, where, source)
            return
    elif not isinstance(node, ast.Expression):
        bad = type(node).__name__
    if bad is None and isinstance(node, ast.Constant) and isinstance(node.value, str):
        bad = f"text {node.value!r} outside tres()"
    if bad is not None:
        raise UserError(f"{bad} is not allowed; a formula has {GRAMMAR}", source=source, key=where)
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.operator | ast.unaryop | ast.cmpop | ast.expr_context):
            _check_node(child, names, where, source)


def _depth(tree: ast.AST) -> int:
    """The syntax tree's depth, found without recursion (a deep one must not overflow).

    >>> _depth(ast.parse("1 + 2", mode="eval"))  # Expression, BinOp, its operands
    3
    """
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    return deepest


def parse_formula(text: str, *, source: Path, key: str) -> Formula:
    """Parse and check a formula (UserError naming ``key``, exit 2, when it is not one).

    >>> f = parse_formula("{test:a.b} / {norm:sd}", source=Path("s.toml"), key="f")
    >>> [r.text for r in f.refs], ast.unparse(f.tree)
    (['{test:a.b}', '{norm:sd}'], '__ref0 / __ref1')
    """
    refs: list[Ref] = []

    def placeholder(m: re.Match[str]) -> str:
        refs.append(Ref(m["name"], m["path"].strip(), bool(m["all"])))
        return f"__ref{len(refs) - 1}"

    code = _REF.sub(placeholder, text)
    if "{" in code or "}" in code:
        raise UserError(
            f"cannot read {text!r}: a reference is {{file:key path}}", source=source, key=key
        )
    if len(text) > MAX_FORMULA:
        raise UserError(f"is {len(text)} characters; a formula has at most {MAX_FORMULA}",
                        source=source, key=key)  # fmt: skip
    try:
        tree = ast.parse(code.strip(), mode="eval")
        # Nesting deeper than the parser's own limit, or a NUL byte, is no formula either.
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise UserError(
            f"cannot read {text!r}; a formula has {GRAMMAR}", source=source, key=key
        ) from None
    if _depth(tree) > MAX_DEPTH:
        raise UserError(f"nests deeper than {MAX_DEPTH} levels", source=source, key=key)
    _check_node(tree, len(refs), key, source)
    for ref in refs:
        try:
            for part in ref.path.split("[*]"):
                if part.strip("."):
                    parse(part.strip("."))
        except KeyPathError as exc:
            raise UserError(f"reference {ref.text}: {exc}", source=source, key=key) from None
    in_tres = {
        int(node.args[0].id[5:])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "tres" and isinstance(node.args[0], ast.Name)
    }  # fmt: skip
    refs = [replace(r, in_tres=True) if i in in_tres else r for i, r in enumerate(refs)]
    return Formula(text, tuple(refs), tree.body, source, key)


def load_derived(
    specs: Sequence[DerivedSpec], aliases: Mapping[str, Path], splits: set[str], source: Path
) -> tuple[Derived, ...]:
    """The study's ``[[derived]]``, each reference checked: a file alias or a split some run
    has (``{*split:...}`` a split only); a name given twice is refused."""
    out: list[Derived] = []
    for i, spec in enumerate(specs):
        if spec.name in {d.name for d in out}:
            raise UserError(
                f"repeats derived name {spec.name!r}", source=source, key=f"derived[{i}].name"
            )
        parsed: list[Formula | None] = []
        for field in ("formula", "of"):
            text = getattr(spec, field)
            if text is None:
                parsed.append(None)
                continue
            formula = parse_formula(text, source=source, key=f"derived[{i}].{field}")
            for ref in formula.refs:
                known = splits if ref.every_run else splits | set(aliases)
                if ref.name not in known:
                    raise UserError(
                        f"reference {ref.text} names {ref.name!r}, which is neither a file of "
                        f"'files' ({', '.join(sorted(aliases)) or 'none'}) nor a split of a run"
                        f" ({', '.join(sorted(splits)) or 'none'})",
                        source=source,
                        key=f"derived[{i}].{field}",
                    )
            parsed.append(formula)
        main, of = parsed
        assert main is not None  # formula is required
        per_run = any(r.name not in aliases and not r.every_run for r in main.refs)
        out.append(Derived(spec.name, spec.label or spec.name, main, of, per_run))
    return tuple(out)


def read_document(path: Path) -> Any:
    """A study file as it is: JSON, or a ``.jsonl`` file as the list of its lines."""
    text = read_text(path, what="a JSON file of the study's tree")
    if path.suffix != ".jsonl":
        return parse_json(text, source=path)
    return [
        parse_json(line, source=f"{path} line {n}")
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip()
    ]


def values_at(doc: Any, path: str, source: str, *, text: bool = True, at: str = "") -> Value:
    """The value(s) a key path names; ``[*]`` gives a list (None for items lacking it).
    ``text=False``: a text value is refused too (only tres() reads text), naming the file;
    ``at``: the key path of ``doc`` in its file, so that an error names the item
    (``jobs[2].ElapsedRaw``).

    >>> values_at({"jobs": [{"s": 2}, {"s": 3}, {}]}, "jobs[*].s", "f")
    [2, 3, None]
    """
    head, star, rest = path.partition("[*]")
    try:
        found = locate(doc, head) if head.strip(".") else ((), doc)
    except KeyPathError as exc:
        raise UserError(str(exc), source=source, key=at + path) from None
    node = None if found is None else found[1]
    if not star:
        number: Value = _number(node, source, at + path, text)
        return number
    if node is None:
        return None
    if not isinstance(node, list):
        raise UserError(
            f"is {type(node).__name__}; [*] expects a list", source=source, key=at + head
        )
    out: list[Any] = []
    for i, item in enumerate(node):
        value = (
            values_at(item, rest.lstrip("."), source, text=text, at=f"{at}{head}[{i}].")
            if rest.strip(".")
            else item
        )
        out.append(value if not isinstance(value, list) else None)
    return out


#: a number written as text, as Slurm's sacct writes ``ElapsedRaw`` and ``JobIDRaw``: digits,
#: an optional sign and decimal fraction; no exponent, blank, underscore, nan or inf
DECIMAL_TEXT = re.compile(r"[+-]?\d+(\.\d+)?")


def decimal_text(value: str) -> int | float | None:
    """The number a decimal text says (as the module's ``int()``/``float()`` read sacct's
    fields, but strictly), or None where it is no decimal text.

    >>> decimal_text("1800"), decimal_text("-2.50"), decimal_text("18e2x"), decimal_text(" 18")
    (1800, -2.5, None, None)
    """
    if DECIMAL_TEXT.fullmatch(value) is None:
        return None
    return int(value) if "." not in value else float(value)


def _number(value: Any, source: str, path: str, text: bool = True) -> Any:
    if value is None or (text and isinstance(value, str)):  # text: only tres() reads it
        return value
    if isinstance(value, str):
        number = decimal_text(value)
        if number is None:
            raise UserError(
                f'is text {value[:40]!r}; expected a number (or decimal text such as "1800")',
                source=source,
                key=path,
            )
        return number
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(
            f"is {type(value).__name__}; expected a number, or null", source=source, key=path
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"is {value}; expected a finite number", source=source, key=path)
    return value


def _tres(text: Any, kind: str) -> float | None:
    """``tres('cpu=72,gres/gpu=4', 'gres/gpu')`` -> 4.0; 0 where the kind is absent."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"tres() reads TRES text, not {type(text).__name__}")
    for part in text.split(","):
        name, _, count = part.partition("=")
        if name.strip() == kind:
            return float(count) if re.fullmatch(r"\d+(\.\d+)?", count.strip()) else None
    return 0.0


def _scalar(value: Any) -> Any:
    """A number, None or text (tres()'s), as arithmetic and sum/mean take; a record, a list
    or a boolean (what ``{jobs:jobs[*]}`` gives) is a ValueError, never Python's own sum
    of dicts (a TypeError traceback)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(
            f"a {'record' if isinstance(value, dict) else type(value).__name__} where a number "
            "is expected (name a number in each item, e.g. {file:list[*].field})"
        )
    return value


def _arith(op: ast.operator, a: Any, b: Any) -> Any:
    if isinstance(a, list) or isinstance(b, list):
        left = a if isinstance(a, list) else [a] * len(b)
        right = b if isinstance(b, list) else [b] * len(a)
        if len(left) != len(right):
            raise ValueError(f"lists of {len(left)} and {len(right)} items")
        return [_arith(op, x, y) for x, y in zip(left, right, strict=True)]
    a, b = _scalar(a), _scalar(b)
    if a is None or b is None:
        return None
    for v in (a, b):
        if isinstance(v, str):
            raise ValueError(f"text {v[:40]!r} in arithmetic (tres() reads TRES text)")
    if isinstance(op, ast.Add):
        return float(a + b)
    if isinstance(op, ast.Sub):
        return float(a - b)
    if isinstance(op, ast.Mult):
        return float(a * b)
    return None if b == 0 else float(a / b)


def _equal(a: Any, b: Any) -> Any:
    """``a == b`` as 1.0 or 0.0, item by item over lists; None where either is None."""
    if isinstance(a, list) or isinstance(b, list):
        left = a if isinstance(a, list) else [a] * len(b)
        right = b if isinstance(b, list) else [b] * len(a)
        if len(left) != len(right):
            raise ValueError(f"lists of {len(left)} and {len(right)} items")
        return [_equal(x, y) for x, y in zip(left, right, strict=True)]
    if a is None or b is None:
        return None
    for v in (a, b):
        if isinstance(v, str):
            raise ValueError(f"text {v[:40]!r} compared (tres() reads TRES text)")
    return 1.0 if a == b else 0.0


def _call(func: str, arg: Any, kind: str | None) -> Any:
    if func == "tres":
        assert kind is not None
        return [_tres(x, kind) for x in arg] if isinstance(arg, list) else _tres(arg, kind)
    if arg is None:  # a list not recorded (a missing key before [*]): so is its sum
        return None
    if not isinstance(arg, list):
        raise ValueError(f"{func}() of one number; it takes a list ([*] or {{*split:...}})")
    known = [x for x in arg if x is not None]
    if func == "count":  # of any recorded items, records too
        return float(len(known))
    known = [_scalar(x) for x in known]
    if any(isinstance(x, str) for x in known):
        raise ValueError(f"{func}() of text")
    if func == "sum":
        return float(sum(known))
    return float(sum(known) / len(known)) if known else None


def evaluate(formula: Formula, resolve: Callable[[Ref], Value]) -> float | None:
    """The formula's value, each reference given by ``resolve``; None where not recorded.

    >>> f = parse_formula("sum({j:x[*].e} * tres({j:x[*].t}, 'gpu')) / 3600",
    ...                   source=Path("s"), key="k")
    >>> doc = {"x": [{"e": 3600, "t": "cpu=4,gpu=4"}, {"e": 1800, "t": "cpu=2"}]}
    >>> evaluate(f, lambda r: values_at(doc, r.path, "job.json"))
    4.0
    """
    values = [resolve(r) for r in formula.refs]

    def walk(node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            value = node.value  # checked by parse_formula: a number, or tres()'s kind
            return float(value) if isinstance(value, int | float) else value
        if isinstance(node, ast.Name):
            return values[int(node.id[5:])]
        if isinstance(node, ast.UnaryOp):
            inner = walk(node.operand)
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            return _arith(ast.Mult(), inner, sign)
        if isinstance(node, ast.BinOp):
            return _arith(node.op, walk(node.left), walk(node.right))
        if isinstance(node, ast.Compare):
            same = _equal(walk(node.left), walk(node.comparators[0]))
            return _arith(ast.Sub(), 1.0, same) if isinstance(node.ops[0], ast.NotEq) else same
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        kind = node.args[1].value if len(node.args) == 2 else None  # type: ignore[attr-defined]
        return _call(node.func.id, walk(node.args[0]), kind)

    def fail(problem: str) -> UserError:  # the study's line (file, key), not the data's
        return UserError(
            f"derived formula {formula.text!r} {problem}", source=formula.source, key=formula.key
        )

    try:
        result = walk(formula.tree)
    except ValueError as exc:
        raise fail(f"fails: {exc}") from None
    except OverflowError:  # float() of an integer beyond a float's range
        raise fail("gives a value too large for a float, not a finite number") from None
    if isinstance(result, list):
        raise fail("gives a list; sum, count or mean it")
    if isinstance(result, str):
        raise fail("gives text, not a number")
    if result is not None and not math.isfinite(result):
        # An overflow (1e308 * 10, a division by a subnormal) is no number to record or show.
        raise fail(f"gives {result}, not a finite number (a value too large for a float)")
    return None if result is None else float(result)

"""One declarative validator for every file a user writes (pydantic v2 models).

Each format declares its tables once, as a :class:`Spec` model: keys, types, defaults,
choices, ranges and patterns, and a description per key that says what is expected. The same
declarations give

- the checks: :func:`validate` turns the first problem into one :class:`UserError` in the
  project's style, naming the file, the key path (``cell[2].sha256``) and what was expected
  (``is 'abc'; expected the dump's SHA-256: 64 lowercase hex digits``), exit code 2;
- the JSON Schemas in ``docs/schemas/`` (``tools/schemas.py``), so that an editor can check a
  study while it is typed.

Why pydantic rather than a reader of our own: it is well kept, already in every lock, and
exports JSON Schema from the very declarations that validate; strict mode keeps TOML's types
apart (``true`` is not a number, ``"0.5"`` is not a float). What a declaration cannot say (a
path relative to the study file must exist, a dump must have its stated hash, ids must be
unique) stays in each format's loader, with the same error style.
"""

from __future__ import annotations

import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from audiorepro.core.errors import UserError
from audiorepro.core.io import SLUG_MAX, slug

M = TypeVar("M", bound=BaseModel)

#: What a value of each kind is, when a key's own description does not say more.
_KINDS = {
    "float": "a number",
    "int": "an integer",
    "string": "a string",
    "bool": "true or false",
    "dict": "a table",
    "model": "a table",
    "list": "a list",
}


#: The one message for a non-finite number, wherever a number is read (published values,
#: tolerances, settings, probe values): TOML and JSON can spell nan and inf, and a tolerance
#: of inf would pass anything.
NOT_FINITE = "expected a finite number (nan and inf are refused)"


class KeyProblem(Exception):
    """A problem a model validator finds at a known key path (``("cell", 2, "id")``).

    Raised from a validator it passes through pydantic untouched (it is not a ValueError);
    :func:`validate` reports it like every other problem.
    """

    def __init__(self, loc: tuple[int | str, ...], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message


class Spec(BaseModel):
    """A table of a user's file: unknown keys are errors, TOML types are kept apart."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def key_path(loc: tuple[int | str, ...]) -> str:
    """``('cell', 2, 'sha256')`` -> ``cell[2].sha256``.

    >>> key_path(("published", 0, "values", "t2a/r@1"))
    'published[0].values.t2a/r@1'
    >>> key_path(())
    ''
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields by the key a user writes (the alias, where there is one)."""
    return {(f.alias or name): f for name, f in model.model_fields.items()}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's annotation holds (``list[Cell]``, ``Cell | None``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _description(field: Any) -> str | None:
    """A field's description, or that of the constrained type it is declared with
    (``Sha256 | None``: the ``Field(description=...)`` inside ``Sha256``)."""
    if field.description:
        return str(field.description)
    return _description_of(field.annotation)


def _description_of(annotation: Any) -> str | None:
    stack = [annotation]
    while stack:
        annotation = stack.pop()
        for meta in getattr(annotation, "__metadata__", ()):
            if getattr(meta, "description", None):
                return str(meta.description)
        stack.extend(typing.get_args(annotation))
    return None


def _expected(model: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """The description of what belongs at ``loc``: its key's, or for a value of a table of
    values (``weights."c.pt"``), that of the values' declared type."""
    current: list[type[BaseModel]] = [model]
    annotation: Any = None
    what = None
    for part in loc:
        if isinstance(part, int):
            what = None
            continue
        found = next((_fields(m)[part] for m in current if part in _fields(m)), None)
        if found is not None:
            annotation, what = found.annotation, _description(found)
        else:
            value = _dict_value(annotation)
            if value is None:
                return None
            annotation, what = value, _description_of(value)
        current = _models_in(annotation)
    return what


def _without_union_tags(
    model: type[BaseModel], loc: tuple[int | str, ...]
) -> tuple[int | str, ...]:
    """``loc`` without the member names pydantic adds inside a union (``provenance.str``): a
    user wrote ``provenance``, and that is the key to name."""
    current: list[type[BaseModel]] = [model]
    annotation: Any = None
    out: list[int | str] = []
    for part in loc:
        if isinstance(part, int):
            out.append(part)
            continue
        found = next((_fields(m)[part] for m in current if part in _fields(m)), None)
        if found is not None:
            annotation = found.annotation
        elif _is_union(annotation) and part not in _fields_of(annotation):
            continue  # a union member's tag
        else:
            annotation = _dict_value(annotation)
        out.append(part)
        current = _models_in(annotation)
    return tuple(out)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _fields_of(annotation: Any) -> set[str]:
    return {name for m in _models_in(annotation) for name in _fields(m)}


def _dict_value(annotation: Any) -> Any:
    """The value type of a ``dict[str, X]`` annotation (also inside ``| None``), or None."""
    if typing.get_origin(annotation) is dict:
        return typing.get_args(annotation)[1]
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is dict:
            return typing.get_args(arg)[1]
    return None


def _allowed(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table holding ``loc``'s last key may have."""
    current: list[type[BaseModel]] = [model]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        found = next((_fields(m)[part] for m in current if part in _fields(m)), None)
        current = _models_in(found.annotation) if found is not None else current
    return sorted({name for m in current for name in _fields(m)})


def _message(model: type[BaseModel], error: Any) -> str:
    loc = tuple(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown key; expected some of {', '.join(_allowed(model, loc))}"
    if kind in ("value_error", "assertion_error"):
        return str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind == "finite_number":
        return f"is {error['input']!r}; {NOT_FINITE}"
    what = _expected(model, loc)
    if what is None:
        what = _KINDS.get(kind.split("_")[0], str(error["msg"]).lower())
    if kind == "missing":
        return f"is missing; expected {what}"
    if kind == "literal_error":
        return f"is {error['input']!r}; expected {error['ctx']['expected']}"
    if kind in ("too_short",) and isinstance(error.get("input"), list | dict):
        return f"is empty; expected {what}"
    return f"is {error['input']!r}; expected {what}"


def validate(model: type[M], data: Any, *, source: str, where: tuple[int | str, ...] = ()) -> M:
    """``data`` (a parsed TOML or JSON document, or a part at ``where``) as ``model``, or the
    first problem as a :class:`UserError` naming ``source`` and the key path.

    An unknown key is reported before anything else: a misspelled key is then named as such,
    not as the required key it was meant to be.
    """
    try:
        return model.model_validate(data)
    except KeyProblem as exc:
        raise UserError(exc.message, source=source, key=key_path((*where, *exc.loc))) from None
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        errors.sort(key=lambda e: e["type"] != "extra_forbidden")
        loc = _without_union_tags(model, tuple(errors[0]["loc"]))
        first = dict(errors[0], loc=loc)
        key = key_path((*where, *loc)) or None
        raise UserError(_message(model, first), source=source, key=key) from None


def distinct_file_names(items: list[tuple[str, str]], *, source: str, what: str) -> None:
    """Names that become parts of output file names (``(key, name)`` pairs, in file order)
    must give distinct, not too long file names: ``a/b`` and ``a_b`` would write the same
    tables, and the second would silently overwrite the first. A name may repeat (several
    runs on one corpus); ``.``/``..`` and names with nothing to keep are refused, and no name
    can leave its folder (:func:`~audiorepro.core.io.slug` replaces every ``/``).

    >>> try:
    ...     distinct_file_names([("a", "x/y"), ("b", "x/y"), ("c", "x_y")], source="s", what="")
    ... except UserError as exc:
    ...     print(exc.key, "names the same files as", str(exc).split(" (")[1].split(")")[0])
    c names the same files as a
    """
    seen: dict[str, tuple[str, str]] = {}
    for key, name in items:
        made = slug(name)
        if made in ("", ".", ".."):
            # As a folder name ("measurements/<run>/") ".." would write outside its folder.
            raise UserError(
                f"is {name!r}; expected {what} with a letter or digit (it names output files)",
                source=source,
                key=key,
            )
        if len(made.encode("utf-8")) > SLUG_MAX:
            # File systems count bytes (255): 100 four-byte characters would not fit.
            raise UserError(
                f"is {len(made.encode('utf-8'))} bytes long as a file name; expected {what} "
                f"of at most {SLUG_MAX} bytes (UTF-8)",
                source=source,
                key=key,
            )
        first = seen.setdefault(made, (key, name))
        if first[1] != name:
            raise UserError(
                f"{name!r} and {first[1]!r} ({first[0]}) name the same output files "
                f"({made}); expected {what}s that differ in letters, digits, '-', '_' or '.'",
                source=source,
                key=key,
            )


def json_schema(model: Any, *, title: str, schema_id: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a format: a model, or a union of models."""
    adapter: TypeAdapter[Any] = TypeAdapter(model)
    doc = adapter.json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        **{k: v for k, v in doc.items() if k != "title"},
    }

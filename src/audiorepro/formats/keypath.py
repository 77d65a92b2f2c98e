"""Key paths: how a study names one number inside a saved JSON or JSONL document.

A key path is a dotted list of steps, read left to right from the document's top:

``name``            a key of an object (``frame_f1``); a key holding dots (``0.5``) may be
                    written plainly (the longest key that matches wins) or quoted, ``["0.5"]``
``[field=value]``   the one item of a list whose ``field`` is ``value`` (compared as text:
                    ``[epoch=3]`` matches ``"epoch": 3``): ``per_score[score=emo_anger]``
``[3]``             a list item by its index (from 0)

``per_score[score=emo_anger].normalized_mae`` and, in a JSONL file (a list of its lines),
``[epoch=3].val_loss``. A step that finds nothing is "not recorded" (None), never an error:
saved files record what their pipeline measured. A selector matching two items is ambiguous,
and that is an error (:class:`KeyPathError`), as is a malformed path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: one step: a quoted key, a selector, an index, or a plain name (up to the next . or [)
_STEP = re.compile(
    r'\["(?P<quoted>[^"]*)"\]|\[(?P<field>[^=\]\[]+)=(?P<value>[^\]]*)\]|\[(?P<index>\d+)\]'
    r"|(?P<name>[^.\[\]]+)"
)


class KeyPathError(ValueError):
    """A malformed key path, or one that selects more than one item."""


@dataclass(frozen=True)
class Step:
    """One step of a key path: a key, a selector (``field=value``), or an index."""

    key: str | None = None
    field: str | None = None
    value: str | None = None
    index: int | None = None


def parse(path: str) -> tuple[Step, ...]:
    """A key path's steps.

    >>> [s.key or f"{s.field}={s.value}" for s in parse('per_score[score=a.b].n')]
    ['per_score', 'score=a.b', 'n']
    >>> [(s.key, s.index) for s in parse('x["0.5"][2]')]
    [('x', None), ('0.5', None), (None, 2)]
    """
    steps: list[Step] = []
    at = 0
    while at < len(path):
        if steps and path[at] == ".":
            at += 1
        m = _STEP.match(path, at)
        if m is None or m.end() == at:
            raise KeyPathError(f"cannot read key path {path!r} at character {at + 1}")
        if m["quoted"] is not None:
            steps.append(Step(key=m["quoted"]))
        elif m["field"] is not None:
            steps.append(Step(field=m["field"], value=m["value"]))
        elif m["index"] is not None:
            steps.append(Step(index=int(m["index"])))
        else:
            steps.append(Step(key=m["name"]))
        at = m.end()
    if not steps:
        raise KeyPathError("is an empty key path")
    return tuple(steps)


def _as_text(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return value if isinstance(value, str) else repr(value)


def _select(node: list[Any], step: Step, path: str) -> tuple[int | None, Any]:
    hits = [
        (i, item)
        for i, item in enumerate(node)
        if isinstance(item, dict) and _as_text(item.get(step.field)) == step.value
    ]
    if len(hits) > 1:
        raise KeyPathError(
            f"key path {path!r}: [{step.field}={step.value}] matches {len(hits)} items "
            f"(indexes {', '.join(str(i) for i, _ in hits[:5])}); expected one"
        )
    return hits[0] if hits else (None, None)


def locate(doc: Any, path: str) -> tuple[tuple[int | str, ...], Any] | None:
    """Where ``path`` leads in ``doc`` (its keys and indexes) and what is there; None where a
    step finds nothing.

    >>> doc = {"a": {"0.5": {"f1": 1}}, "per": [{"k": 3, "v": 2.5}]}
    >>> locate(doc, "a.0.5.f1"), locate(doc, "per[k=3].v"), locate(doc, "per[k=4].v")
    ((('a', '0.5', 'f1'), 1), (('per', 0, 'v'), 2.5), None)
    """
    steps = list(parse(path))
    node: Any = doc
    where: list[int | str] = []
    while steps:
        step = steps.pop(0)
        if step.key is not None:
            if not isinstance(node, dict):
                return None
            key = step.key
            # A key with dots, written plainly: the longest run of steps naming a key.
            for n in range(len(steps), 0, -1):
                joined = ".".join([key, *(s.key or "" for s in steps[:n])])
                if all(s.key is not None for s in steps[:n]) and joined in node:
                    key, steps = joined, steps[n:]
                    break
            if key not in node:
                return None
            where.append(key)
            node = node[key]
        elif not isinstance(node, list):
            return None
        elif step.index is not None:
            if step.index >= len(node):
                return None
            where.append(step.index)
            node = node[step.index]
        else:
            i, node = _select(node, step, path)
            if i is None:
                return None
            where.append(i)
    return tuple(where), node


def format_path(doc: Any, where: tuple[int | str, ...]) -> str:
    """The key path of a location in ``doc``, list items named by an identifying field where
    they have one (``per_score[score=a]``), else by index.

    >>> format_path({"per_score": [{"score": "a", "x": 1}]}, ("per_score", 0, "x"))
    'per_score[score=a].x'
    >>> format_path({"l": {"0.5": [5]}}, ("l", "0.5", 0))
    'l["0.5"][0]'
    """
    out = ""
    node = doc
    for part in where:
        if isinstance(part, int):
            item = node[part]
            named = _identity(node, item)
            out += f"[{named}]" if named else f"[{part}]"
        else:
            plain = re.fullmatch(r"[^.\[\]\"]+", part) is not None
            out += (("." if out else "") + part) if plain else f'["{part}"]'
        node = node[part]
    return out


#: fields that name a list's items, in the order tried
ID_FIELDS = ("score", "name", "prompt", "dimension", "category", "class", "family", "fold", "epoch")


def _identity(items: list[Any], item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for field in ID_FIELDS:
        text = _as_text(item.get(field))
        if text is None or re.search(r"[\]\[=]", text):
            continue
        same = [x for x in items if isinstance(x, dict) and _as_text(x.get(field)) == text]
        if len(same) == 1:
            return f"{field}={text}"
    return None

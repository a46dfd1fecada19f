"""The prompt-chain schema notation, to and from JSON Schema.

Prompt-chain Agent definitions describe the JSON a parser node expects as a
short string, not as JSON Schema:

    {"character": "Array<String>", "year": "Number", "studio": {"name": "String"}}

Type names: `String`, `Number`, `Integer`, `Boolean`, `Object` (any mapping),
`Any`, `Array<T>` (and `Array` for a list of anything); a mapping is an object
whose keys are all required, except a key written with a trailing `?`
(`"nickname?": "String"`).  Names are case-insensitive.  The `parser` block
takes either form, so a chain's schema string stays as its author wrote it
and every error shows it that way.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

__all__ = ["NotationError", "notation_to_schema", "schema_to_notation", "TYPE_NAMES"]

TYPE_NAMES = ("String", "Number", "Integer", "Boolean", "Object", "Any", "Array<T>")

_SCALARS = {"string": {"type": "string"}, "number": {"type": "number"},
            "integer": {"type": "integer"}, "int": {"type": "integer"},
            "boolean": {"type": "boolean"}, "bool": {"type": "boolean"},
            "object": {"type": "object"}, "any": {}, "array": {"type": "array"}}


class NotationError(ValueError):
    """A schema string that cannot be read; the message names the place."""


def notation_to_schema(notation: str | dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema a notation string (or its parsed mapping) stands for."""
    try:
        if isinstance(notation, str):
            return _cached(notation)
        return _convert(notation, "schema")
    except RecursionError:
        raise NotationError("the schema is nested too deeply") from None


@lru_cache(maxsize=256)
def _cached(text: str) -> dict[str, Any]:
    stripped = text.strip()
    if not stripped:
        raise NotationError("the schema string is empty: write it as JSON, e.g. "
                            '{"character": "Array<String>"}')
    if stripped[0] in "{[\"":
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise NotationError(f"the schema string is not JSON (line {exc.lineno}, column "
                                f"{exc.colno}: {exc.msg}); write it as, e.g. "
                                '{"character": "Array<String>"}') from None
    else:
        data = stripped                     # a bare type: "Array<String>"
    return _convert(data, "schema")


def _convert(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, dict):
        properties: dict[str, Any] = {}
        required: list[str] = []
        for key, item in value.items():
            name = key[:-1] if isinstance(key, str) and key.endswith("?") else key
            properties[name] = _convert(item, f"{where}.{name}")
            if name == key:
                required.append(name)
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        return schema
    if isinstance(value, list):
        if len(value) != 1:
            raise NotationError(f"{where}: a list in the schema names one item type, e.g. "
                                f'["String"] (got {len(value)} items)')
        return {"type": "array", "items": _convert(value[0], f"{where}[]")}
    if not isinstance(value, str):
        raise NotationError(f"{where}: expected a type name such as \"String\", got "
                            f"{json.dumps(value)}")
    text = value.strip()
    inner = _array_item(text)
    if inner is not None:
        return {"type": "array", "items": _convert(inner, f"{where}[]")}
    known = _SCALARS.get(text.lower())
    if known is None:
        shown = text if len(text) <= 60 else f"{text[:57]}..."
        raise NotationError(f"{where}: unknown type {shown!r}; write one of "
                            f"{', '.join(TYPE_NAMES)} or a nested object")
    return dict(known)


def _array_item(text: str) -> str | None:
    """The item type of `Array<T>`, `List<T>` or `T[]` (`text` stripped), else None.

    String operations, not a regular expression: `^(.+?)\\s*\\[` tried every
    split of a run of spaces, and a schema string of 100,000 spaces held the
    server for 36 s."""
    head = text[:5].lower()
    if head.startswith("list"):
        rest = text[4:]
    elif head == "array":
        rest = text[5:]
    else:
        rest = None
    if rest is not None:
        rest = rest.lstrip()
        if rest.startswith("<") and rest.endswith(">"):
            inner = rest[1:-1].strip()
            if inner:
                return inner
    if text.endswith("]"):
        opened = text[:-1].rstrip()
        if opened.endswith("["):
            inner = opened[:-1].rstrip()
            if inner:
                return inner
    return None


def schema_to_notation(schema: dict[str, Any]) -> str:
    """The notation string of a JSON Schema made of what the notation can say
    (NotationError otherwise): the inverse of `notation_to_schema`."""
    return json.dumps(_back(schema, "schema"), ensure_ascii=False)


_BACK = {"string": "String", "number": "Number", "integer": "Integer", "boolean": "Boolean"}


def _back(schema: Any, where: str) -> Any:
    if not isinstance(schema, dict):
        raise NotationError(f"{where}: not a JSON Schema object")
    kind = schema.get("type")
    if not schema or (kind is None and set(schema) <= {"description", "title"}):
        return "Any"
    if kind in _BACK:
        return _BACK[kind]
    if kind == "array":
        items = schema.get("items")
        if items is None:
            return "Array"
        inner = _back(items, f"{where}[]")
        if isinstance(inner, str):
            return f"Array<{inner}>"
        return [inner]
    if kind == "object":
        properties = schema.get("properties")
        if not properties:
            return "Object"
        required = set(schema.get("required") or [])
        return {(name if name in required else f"{name}?"): _back(item, f"{where}.{name}")
                for name, item in properties.items()}
    raise NotationError(f"{where}: the chain notation cannot express {json.dumps(schema)[:120]}")

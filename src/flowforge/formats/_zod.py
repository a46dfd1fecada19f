"""Flowise's Advanced Structured Output Parser writes its schema in Zod
(`z.object({title: z.string()})`); flowforge blocks take JSON Schema.  This
reads the common subset (object, array, string, number, boolean, enum,
literal values, `.array()`, `.optional()`, `.describe()`, `.int()`,
`.min()`/`.max()`, `//` comments); anything else is a ZodError naming it,
so the report can say what to write by hand.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["ZodError", "zod_schema"]

_TOKEN = re.compile(r'\s*(//[^\n]*|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|-?\d+(?:\.\d+)?'
                    r'|[A-Za-z_$][\w$]*|[(){}\[\],:.])')


class ZodError(ValueError):
    pass


def _tokens(text: str) -> list[str]:
    out, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or not match.group(1):
            if text[position:].strip() == "":
                break
            raise ZodError(f"cannot read {text[position:position + 20]!r}")
        position = match.end()
        if not match.group(1).startswith("//"):
            out.append(match.group(1))
    return out


class _Parser:
    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or expected is not None and token != expected:
            raise ZodError(f"expected {expected or 'more'}, found {token or 'the end'!r}")
        self.at += 1
        return token

    def literal(self) -> Any:
        token = self.take()
        if token[0] in "\"'":
            return json.loads('"' + token[1:-1].replace('"', '\\"') + '"') \
                if token[0] == "'" else json.loads(token)
        if re.fullmatch(r"-?\d+(\.\d+)?", token):
            return json.loads(token)
        raise ZodError(f"expected a value, found {token!r}")

    def args(self) -> list[Any]:
        self.take("(")
        values = []
        while self.peek() != ")":
            values.append(self.schema() if self.peek() == "z" else
                          self.items() if self.peek() == "[" else self.fields()
                          if self.peek() == "{" else self.literal())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return values

    def items(self) -> list[Any]:
        self.take("[")
        values = []
        while self.peek() != "]":
            values.append(self.literal())
            if self.peek() == ",":
                self.take()
        self.take("]")
        return values

    def fields(self) -> dict[str, Any]:
        self.take("{")
        properties: dict[str, Any] = {}
        while self.peek() != "}":
            key = self.take()
            key = key[1:-1] if key[0] in "\"'" else key
            self.take(":")
            properties[key] = self.schema()
            if self.peek() == ",":
                self.take()
        self.take("}")
        return properties

    def schema(self) -> dict[str, Any]:
        self.take("z")
        self.take(".")
        kind = self.take()
        args = self.args()
        if kind in ("string", "number", "boolean"):
            schema: dict[str, Any] = {"type": kind}
        elif kind == "enum" and args and isinstance(args[0], list):
            schema = {"type": "string", "enum": args[0]}
        elif kind == "literal" and args:
            schema = {"const": args[0]}
        elif kind == "array" and args:
            schema = {"type": "array", "items": args[0]}
        elif kind == "object" and args and isinstance(args[0], dict):
            schema = {"type": "object", "properties": args[0],
                      "required": [k for k, v in args[0].items() if not v.pop("_optional", 0)]}
        else:
            raise ZodError(f"z.{kind}(...) is not read")
        while self.peek() == ".":
            self.take()
            method = self.take()
            margs = self.args()
            if method == "array":
                schema = {"type": "array", "items": schema}
            elif method in ("optional", "nullable", "nullish"):
                schema["_optional"] = True
            elif method == "describe" and margs:
                schema["description"] = margs[0]
            elif method == "int":
                schema["type"] = "integer"
            elif method in ("min", "max") and margs and isinstance(margs[0], (int, float)):
                key = {"string": "Length", "array": "Items"}.get(schema.get("type"), "imum")
                schema[f"{method}{key}"] = margs[0]
            elif method not in ("default", "trim", "email", "url", "positive", "nonnegative"):
                raise ZodError(f".{method}(...) is not read")
        return schema


def zod_schema(text: str) -> dict[str, Any]:
    """A JSON Schema for a Zod schema's source."""
    parser = _Parser(text)
    schema = parser.schema()
    if parser.peek():
        raise ZodError(f"unexpected {parser.peek()!r} after the schema")
    schema.pop("_optional", None)
    return schema

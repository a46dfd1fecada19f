"""n8n expressions (`={{ $json.x }}`, `$('Node').item.json.x`) as flowforge
references.

An n8n parameter that starts with `=` is text with `{{ JavaScript }}`
segments.  The segments that only read a field of an item (the current
input's `$json`, a named node's `$('Node').item.json`, `$node["Node"].json`,
`$input.item.json`) become `{{block.field}}` references: which block and
field is the converter's business (`Resolve`), since a Set node passes
fields through and an agent's `output` is flowforge's `content`.  Any other
JavaScript (calls, operators, `$now`, `$workflow`) has no flowforge meaning:
it is replaced by a visible marker and reported, naming the node.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

__all__ = ["parse_reference", "convert_text", "convert_value", "Resolve", "UNMAPPED"]

#: (node name or None for `$json`, path) -> a flowforge reference path or None
Resolve = Callable[[str | None, list[str]], str | None]

UNMAPPED = "[n8n expression not converted: {}]"

_SEGMENT = re.compile(r"\{\{(.*?)\}\}", re.S)
_PATH = r"((?:\s*\.\s*[A-Za-z_$][\w$]*|\s*\[\s*(?:'[^']*'|\"[^\"]*\"|\d+)\s*\])*)"
_ITEM = r"(?:item|first\(\s*\)|last\(\s*\)|all\(\s*\)\s*\[\s*0\s*\]|itemMatching\(\s*0\s*\))"
_FORMS = [
    re.compile(r"^\$json" + _PATH + r"$"),
    re.compile(r"^\$input\s*\.\s*" + _ITEM + r"\s*\.\s*json" + _PATH + r"$"),
    re.compile(r"^\$\(\s*(['\"])(.+?)\1\s*\)\s*\.\s*" + _ITEM + r"\s*\.\s*json" + _PATH + r"$"),
    re.compile(r"^\$node\s*\[\s*(['\"])(.+?)\1\s*\]\s*\.\s*json" + _PATH + r"$"),
]
_STEP = re.compile(r"\.\s*([A-Za-z_$][\w$]*)|\[\s*(?:'([^']*)'|\"([^\"]*)\"|(\d+))\s*\]")


def _steps(text: str) -> list[str]:
    return [next(group for group in match.groups() if group is not None)
            for match in _STEP.finditer(text)]


def parse_reference(expression: str) -> tuple[str | None, list[str]] | None:
    """`$('Prep').item.json.body.query` -> ('Prep', ['body', 'query']);
    `$json.x` -> (None, ['x']); anything else -> None."""
    text = expression.strip()
    for index, form in enumerate(_FORMS):
        match = form.match(text)
        if match is None:
            continue
        if index < 2:
            return None, _steps(match.group(1))
        return match.group(2), _steps(match.group(3))
    return None


def _reference(expression: str, resolve: Resolve) -> str | None:
    parsed = parse_reference(expression)
    if parsed is None:
        return None
    return resolve(*parsed)


def convert_text(value: Any, resolve: Resolve, unmapped: Callable[[str], None]) -> Any:
    """A parameter value as flowforge text: `=...{{ $json.x }}...` with its
    field reads as `{{block.field}}`; other JavaScript segments replaced by a
    marker and passed to `unmapped`.  A value without the leading `=` is
    literal text and stays as it is."""
    if not isinstance(value, str) or not value.startswith("="):
        return value
    body = value[1:]

    def one(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        path = _reference(expression, resolve)
        if path is not None:
            return "{{" + path + "}}"
        unmapped(expression)
        return UNMAPPED.format(expression)

    return _SEGMENT.sub(one, body)


def convert_value(value: Any, resolve: Resolve, unmapped: Callable[[str], None]) -> Any:
    """`convert_text` through lists and mappings (a Set node's values, an
    HTTP body)."""
    if isinstance(value, dict):
        return {key: convert_value(item, resolve, unmapped) for key, item in value.items()}
    if isinstance(value, list):
        return [convert_value(item, resolve, unmapped) for item in value]
    return convert_text(value, resolve, unmapped)


def as_operand(value: Any, resolve: Resolve, kind: str = "string") -> str | None:
    """A condition operand as an expression of flowforge's expression
    language: a reference path, or a literal; None when it cannot be one."""
    if isinstance(value, str) and value.startswith("="):
        body = value[1:].strip()
        whole = _SEGMENT.fullmatch(body)
        if whole is not None:
            return _reference(whole.group(1), resolve)
        if "{{" in body:
            return None
        value = body
    if kind == "number" and isinstance(value, str):
        try:
            value = float(value) if "." in value else int(value)
        except ValueError:
            return None
    if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    return "none" if value is None else json.dumps(value) if isinstance(value, str) \
        else repr(value)

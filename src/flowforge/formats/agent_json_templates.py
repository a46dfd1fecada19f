"""Agent JSON's `{field}` templates, and how they become native ones.

A chain writes `{name}` (and, in real definitions, `${name}` too) for the
current value of a variable.  The importer knows, for every node, which
native template holds that value (`{{input.script}}`, `{{plots.content}}`),
so a chain template becomes a native template: a whole `{name}` becomes the
whole reference (the raw value: a list stays a list), text around it becomes
interpolation.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping

__all__ = ["REF_RE", "refs", "to_prompt", "splice", "data_template", "NATIVE_REF_RE",
           "native_to_chain"]

#: `{name}` or `${name}`: a chain variable reference
REF_RE = re.compile(r"\$?\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: `{{root.path}}`: a native whole-value reference
NATIVE_REF_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)*)\s*\}\}")


def refs(text: str) -> list[str]:
    """The variable names a chain template reads, in order, once each."""
    return list(dict.fromkeys(REF_RE.findall(text)))


def to_prompt(text: str) -> str:
    """A chain prompt as the `llm` block's prompt: `${name}` becomes `{name}`
    (the block fills `{name}` from its `inputs`)."""
    return REF_RE.sub(lambda m: "{" + m.group(1) + "}", text)


def splice(text: str, lookup: Callable[[str], str]) -> str:
    """A chain template as a native template: `lookup(name)` gives the native
    template of each variable.  A template that is one reference becomes that
    reference whole."""
    whole = REF_RE.fullmatch(text.strip()) if text.strip() == text else None
    if whole:
        return lookup(whole.group(1))
    return REF_RE.sub(lambda m: lookup(m.group(1)), text)


# Private-use characters: valid inside a JSON string, never in a real template.
_SENTINEL = "\ue000{}\ue001"
_SENTINEL_RE = re.compile("\ue000(\\d+)\ue001")


def data_template(text: str, lookup: Callable[[str], str]) -> Any:
    """An event node's `data`: JSON text with `{name}` references, where a
    reference may stand for a whole value (`"characters": {characters}`) or sit
    inside a JSON string (`"title": "About {title}"`).  Returns the body as
    native data: whole references become whole native references, so a list
    is sent as a list.  ValueError when the text is not JSON once filled."""
    names: list[str] = []
    out: list[str] = []
    in_string = escaped = False
    position = 0
    for match in REF_RE.finditer(text):
        before = text[position:match.start()]
        for char in before:                  # track whether the reference is inside "..."
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = not in_string
        out.append(before)
        names.append(match.group(1))
        token = _SENTINEL.format(len(names) - 1)
        out.append(token if in_string else json.dumps(token))
        position = match.end()
    out.append(text[position:])
    try:
        parsed = json.loads("".join(out))
    except json.JSONDecodeError as exc:
        raise ValueError(f"`data` is not JSON once its {{fields}} are filled ({exc.msg} at "
                         f"line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise ValueError("`data` is nested too deeply") from None

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            whole = _SENTINEL_RE.fullmatch(value)
            if whole:
                return lookup(names[int(whole.group(1))])
            return _SENTINEL_RE.sub(lambda m: lookup(names[int(m.group(1))]), value)
        if isinstance(value, dict):
            return {fill(key): fill(item) for key, item in value.items()}
        if isinstance(value, list):
            return [fill(item) for item in value]
        return value

    return fill(parsed)


def native_to_chain(text: str, variable_of: Mapping[str, str]) -> str:
    """A native template as a chain template: each `{{ref}}` becomes `{name}`,
    `variable_of` mapping a reference (`plots.content`) to its variable name.
    KeyError names a reference with no chain equivalent."""
    return NATIVE_REF_RE.sub(lambda m: "{" + variable_of[m.group(1)] + "}", text)

"""`{{ns.dotted.path}}` templates, compiled once and resolved many times.

A block's `with` mapping is compiled when the workflow is loaded into a tree
of resolvers, so a run does no parsing: a value with no template at all is
returned as it is, a whole-string reference returns the raw value (a list
stays a list), mixed text interpolates (dicts and lists as JSON), and a
mapping written `{expr: "..."}` is evaluated as an expression.  A missing
path inside a known root resolves to None (the safe fallback users rely on);
unknown roots are caught earlier, by validation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from flowforge.errors import ValueTooLarge
from flowforge.workflow import expressions

__all__ = [
    "RENDERING",
    "TEMPLATE_RE",
    "Reference",
    "normalize_name",
    "parse_path",
    "path_problem",
    "references_in",
    "compile_value",
    "lookup",
    "interpolate_value",
    "has_templates",
]

#: `{{ ... }}` with no brace inside; group 1 is the reference with the spaces
#: around it (`parse_path` drops them).  The possessive `*+` keeps matching
#: linear: the old `\s*([^{}]*?)\s*` tried every split of a run of spaces, so
#: `{{` and 3,000 spaces took the server 24 s to reject.
TEMPLATE_RE = re.compile(r"\{\{([^{}]*+)\}\}")
_INDEX_RE = re.compile(r"^-?\d+$")


class _Rendering:
    """What text one block's `with:` may still render (characters), or None:
    no limit.  The scheduler sets it before it resolves a block and clears it
    after; resolving is synchronous, so no other block's resolution can come
    between.  31 `set` blocks, each `"{{a.v}}{{a.v}}"` of the one before,
    once grew a server to 19 GB: each text is measured before it is joined."""

    __slots__ = ("left", "limit", "setting")

    def __init__(self) -> None:
        self.left: int | None = None
        self.limit = 0
        self.setting = ""

    def start(self, limit: int | None, setting: str) -> None:
        self.left, self.limit, self.setting = limit, limit or 0, setting

    def spend(self, size: int) -> None:
        left = self.left
        if left is not None:
            if size > left:
                raise ValueTooLarge("the text rendered from its templates", size + self.limit
                                    - left, self.limit, self.setting)
            self.left = left - size


#: The one budget of the block being resolved (see `_Rendering`).
RENDERING = _Rendering()
_NORMALIZE_RE = re.compile(r"[^a-z0-9_]")


def normalize_name(name: str) -> str:
    """`Customer Support Agent` -> `customersupportagent` (Sim's convention)."""
    return _NORMALIZE_RE.sub("", name.lower())


def parse_path(text: str) -> tuple[str, ...]:
    """`results.0.content` -> ("results", "0", "content"); brackets accepted."""
    text = text.replace("[", ".").replace("]", "")
    return tuple(part.strip() for part in text.split(".") if part.strip() != "")


#: What no segment of a path holds: spaces inside it, operators, calls,
#: quotes.  `{{ input.n + }}` read as the path ("input", "n +") resolved to
#: None at run time, silently; validation names it instead (`path_problem`).
_NOT_IN_SEGMENT_RE = re.compile(r"""[\s(){}+*/%=<>!&|,'"`?:;~^]""")


def path_problem(inner: str) -> str:
    """Why the text between `{{` and `}}` is not one reference path, or ""
    (an empty one is reported on its own, as an empty reference)."""
    parts = [part.strip() for part in inner.replace("[", ".").replace("]", "").split(".")]
    bad = next((part for part in parts if _NOT_IN_SEGMENT_RE.search(part)), None)
    if bad is None:
        return ""
    return (f"{{{{{inner}}}}} is not a reference: a template holds one path such as "
            f"{{{{input.name}}}} or {{{{block.field}}}} ('{bad}' is not a name); write "
            f"arithmetic or a comparison as an expression, e.g. {{expr: \"a.x * 2\"}}")


@dataclass(frozen=True)
class Reference:
    """One reference found in a document: where it was and what it names;
    `problem` says why a template's text is not a path (`path_problem`)."""

    where: str
    path: tuple[str, ...]
    text: str
    problem: str = ""

    @property
    def root(self) -> str:
        return self.path[0] if self.path else ""


def lookup(value: Any, path: tuple[str, ...] | list[str]) -> Any:
    """Walk `path` into nested dicts/lists; anything missing gives None."""
    for key in path:
        if value is None:
            return None
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, (list, tuple)):
            if not _INDEX_RE.match(key):
                if key == "length":
                    value = len(value)
                    continue
                return None
            index = int(key)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            value = getattr(value, key, None) if not key.startswith("_") else None
    return value


def interpolate_value(value: Any) -> str:
    """How a resolved value reads inside text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple, bool)):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        # "Refund 300 EUR?", not "300.0": a whole number reads as one in text,
        # whether it came from JSON, YAML or arithmetic (the value itself is kept)
        return str(int(value))
    return str(value)


def has_templates(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value and TEMPLATE_RE.search(value) is not None
    if isinstance(value, dict):
        if _is_expr(value):
            return True
        return any(has_templates(v) for v in value.values())
    if isinstance(value, list):
        return any(has_templates(v) for v in value)
    return False


def _is_expr(value: dict) -> bool:
    return len(value) == 1 and "expr" in value and isinstance(value["expr"], str)


def references_in(value: Any, where: str) -> Iterator[Reference]:
    """Every template and expression reference inside `value`, located."""
    if isinstance(value, str):
        for match in TEMPLATE_RE.finditer(value):
            yield Reference(where, parse_path(match.group(1)), match.group(0),
                            path_problem(match.group(1)))
    elif isinstance(value, dict):
        if _is_expr(value):
            for path in expressions.names_in(value["expr"]):
                yield Reference(f"{where}.expr", path, value["expr"])
            return
        for key, item in value.items():
            yield from references_in(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from references_in(item, f"{where}[{index}]")


Resolver = Callable[[dict], Any]


def compile_value(value: Any) -> Resolver | None:
    """Compile `value` into `resolver(scope) -> resolved`, or None when the
    value holds no template and can be used as it is."""
    if isinstance(value, str):
        return _compile_string(value)
    if isinstance(value, dict):
        if _is_expr(value):
            compiled = expressions.compile_expression(value["expr"])
            return compiled.evaluate
        parts = {key: compile_value(item) for key, item in value.items()}
        if all(part is None for part in parts.values()):
            return None
        static = dict(value)
        dynamic = [(key, fn) for key, fn in parts.items() if fn is not None]

        def resolve_dict(scope: dict) -> dict:
            out = dict(static)
            for key, fn in dynamic:
                try:
                    out[key] = fn(scope)
                except ValueTooLarge as exc:       # located: `with.a.b`
                    raise exc.located(str(key)) from None
            return out

        return resolve_dict
    if isinstance(value, list):
        items = [compile_value(item) for item in value]
        if all(item is None for item in items):
            return None
        pairs = list(zip(value, items))

        def resolve_list(scope: dict) -> list:
            return [item if fn is None else fn(scope) for item, fn in pairs]

        return resolve_list
    return None


def _compile_string(text: str) -> Resolver | None:
    if "{{" not in text:
        return None
    matches = list(TEMPLATE_RE.finditer(text))
    if not matches:
        return None
    if len(matches) == 1 and matches[0].span() == (0, len(text)):
        path = parse_path(matches[0].group(1)) or ("",)    # `{{ }}`: reported by validation
        root, rest = path[0], path[1:]
        if not rest:
            return lambda scope: scope.get(root)
        return lambda scope: lookup(scope.get(root), rest)
    pieces: list[str | tuple[str, tuple[str, ...]]] = []
    last = 0
    for match in matches:
        if match.start() > last:
            pieces.append(text[last:match.start()])
        path = parse_path(match.group(1)) or ("",)
        pieces.append((path[0], path[1:]))
        last = match.end()
    if last < len(text):
        pieces.append(text[last:])

    def resolve_text(scope: dict) -> str:
        out = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
            else:
                out.append(interpolate_value(lookup(scope.get(piece[0]), piece[1])))
        if RENDERING.left is not None:     # measured before the join makes it
            RENDERING.spend(sum(map(len, out)))
        return "".join(out)

    return resolve_text

"""flowforge references as Dify's, the inverse of dify_refs.py.

`{{block.field}}` in text becomes `{{#block.field#}}` and a whole-string
reference a selector `[block, field]`; `input.*` is the start node's (or
`sys.*` for the chat message, the conversation and the files), `vars.*`
`env.*`, `memory.*` `conversation.*`, `loop.item`/`loop.index` the
enclosing iteration's, and an output field takes back the name Dify gives it
(an llm's `content` is its `text`).  Condition expressions are read back
into Dify's comparisons (the shapes dify_nodes.py writes), with Python's
`ast` as a parser only: nothing is evaluated.  What has no Dify spelling is
added to `problems`, naming the block.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from flowforge.formats.dify_refs import RENAMES
from flowforge.workflow.templates import TEMPLATE_RE, normalize_name

__all__ = ["Paths", "comparisons"]

#: flowforge output field -> Dify's, per flowforge block type (the first Dify
#: name wins where two map to one: an http block's `data` is Dify's `body`)
_BACK: dict[str, dict[str, str]] = {}
for _kind, _names in RENAMES.items():
    for _dify, _ours in _names.items():
        _BACK.setdefault(_kind, {}).setdefault(_ours, _dify)
_PATH = re.compile(r"[^\s#|(){}'\"]+")


@dataclass
class Paths:
    """What writing a reference the Dify way needs to know of the document."""

    start_id: str
    types: dict[str, str]                         # block id -> flowforge type
    sys_inputs: dict[str, str] = field(default_factory=dict)   # input -> sys field
    names: dict[str, str] = field(default_factory=dict)        # normalised name -> id
    problems: list[str] = field(default_factory=list)
    block: str = ""                               # the block being written (messages)
    iteration: str | None = None                  # the enclosing iteration's node id

    def problem(self, text: str) -> None:
        line = f"{self.block}: {text}" if self.block else text
        if line not in self.problems:
            self.problems.append(line)

    def selector(self, path: str) -> list[str] | None:
        """`a.b.c` (flowforge) -> `[a, b', c]` (Dify), or None with a problem."""
        parts = [part for part in path.replace("[", ".").replace("]", "").split(".") if part]
        if len(parts) < 2:
            self.problem(f"`{{{{{path}}}}}` reads a whole output; Dify reads a field "
                         f"(`{{{{{path}.field}}}}`)")
            return None
        ns, rest = parts[0], parts[1:]
        if ns == "input":
            if rest[0] in self.sys_inputs:
                return ["sys", self.sys_inputs[rest[0]], *rest[1:]]
            return [self.start_id, *rest]
        if ns in ("vars", "memory"):
            return ["env" if ns == "vars" else "conversation", *rest]
        if ns == "user" and rest == ["id"]:
            return ["sys", "user_id"]
        if ns == "loop" and self.iteration and rest in (["item"], ["index"]):
            return [self.iteration, rest[0]]
        block = ns if ns in self.types else self.names.get(normalize_name(ns))
        if block is None:
            self.problem(f"`{{{{{path}}}}}` has no Dify counterpart (Dify reads the start "
                         f"node, env and conversation variables, and node outputs)")
            return None
        kind = self.types[block]
        if kind == "input":
            return [self.start_id, *rest]
        return [block, _BACK.get(kind, {}).get(rest[0], rest[0]), *rest[1:]]

    def text(self, value: Any) -> Any:
        """Text with each `{{a.b}}` written `{{#a.b#}}` (other values as they are)."""
        if not isinstance(value, str):
            return value

        def one(match: re.Match) -> str:
            inner = match.group(1).strip()
            if not _PATH.fullmatch(inner):
                return match.group(0)             # not a reference (Dify's own `{{#x#}}`)
            selector = self.selector(inner)
            return "{{#" + ".".join(selector) + "#}}" if selector else match.group(0)

        return TEMPLATE_RE.sub(one, value)

    def whole(self, value: Any, setting: str) -> list[str]:
        """A whole-string reference `{{a.b}}` as a selector ([] with a problem)."""
        match = TEMPLATE_RE.fullmatch(value.strip()) if isinstance(value, str) else None
        if match is None or not _PATH.fullmatch(match.group(1).strip()):
            self.problem(f"{setting}: Dify takes a variable here, not {value!r}")
            return []
        return self.selector(match.group(1).strip()) or []


_COMPARE = {ast.Eq: "=", ast.NotEq: "≠", ast.Gt: ">", ast.Lt: "<", ast.GtE: "≥",
            ast.LtE: "≤", ast.In: "in", ast.NotIn: "not in"}


def comparisons(expression: str, paths: Paths) -> tuple[str, list[dict]] | None:
    """A condition's `when` as (logical operator, Dify comparisons), or None
    when it is not a conjunction or disjunction of comparisons Dify writes."""
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError:
        return None
    operator, atoms = "and", [tree]
    if isinstance(tree, ast.BoolOp):
        operator, atoms = ("and" if isinstance(tree.op, ast.And) else "or"), tree.values
    out = []
    for atom in atoms:
        found = _atom(atom, expression, paths)
        if found is None:
            return None
        out.append(found)
    return operator, out


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _call(node: ast.AST, name: str, count: int) -> list[ast.AST] | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == name and len(node.args) == count and not node.keywords:
        return node.args
    return None


def _atom(node: ast.AST, source: str, paths: Paths) -> dict | None:
    """One comparison -> `{variable_selector, comparison_operator, value, varType}`."""
    def made(path: str | None, op: str, value: ast.AST | None = None) -> dict | None:
        selector = paths.selector(path) if path else None
        if not selector:
            return None
        text, kind = "", "string"
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            text = value.value
        elif isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) and \
                not isinstance(value.value, bool):
            text, kind = ast.get_source_segment(source, value) or str(value.value), "number"
        elif value is not None:
            return None
        return {"variable_selector": selector, "comparison_operator": op, "value": text,
                "varType": kind}

    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        right, op = node.comparators[0], type(node.ops[0])
        if isinstance(right, ast.Constant) and right.value is None and op in (ast.Eq, ast.NotEq):
            return made(_dotted(node.left), "null" if op is ast.Eq else "not null")
        if op in _COMPARE:
            return made(_dotted(node.left), _COMPARE[op], right)
        return None
    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    inner = node.operand if negated else node
    args = _call(inner, "contains", 2)
    if args:
        return made(_dotted(args[0]), "not contains" if negated else "contains", args[1])
    if negated:
        return made(_dotted(inner), "empty")
    args = _call(node, "bool", 1)
    if args:
        return made(_dotted(args[0]), "not empty")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("startswith", "endswith") and len(node.args) == 1:
        target = _call(node.func.value, "str", 1)
        if target:
            op = "start with" if node.func.attr == "startswith" else "end with"
            return made(_dotted(target[0]), op, node.args[0])
    return None

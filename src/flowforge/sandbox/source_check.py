"""The sandbox's source check: a lint that refuses what reflection escapes need.

The operating system is the sandbox's boundary (bubblewrap, rlimits and
seccomp: see runner.py and confine.py); this check is the innermost layer
and the one that explains itself: it rejects names and attributes starting
with `_` (`__subclasses__`, `__globals__`, ...), the builtins that reach them
by string, and imports outside the allow-list, each problem with its line.

Standard library only: the parent imports it (to refuse a block before a
process is spent on it) and the child loads it by path next to runner.py
(in bubblewrap both are copied to /sandbox), so the rules are written once.
"""

from __future__ import annotations

import ast
import re

__all__ = ["ALLOWED_MODULES", "NETWORK_MODULES", "check_source"]

#: What untrusted code may import (submodules listed explicitly).
ALLOWED_MODULES = frozenset({
    "json", "math", "statistics", "collections", "collections.abc", "itertools", "functools",
    "re", "datetime", "random", "textwrap", "copy", "decimal", "fractions", "unicodedata",
    "calendar", "heapq", "bisect", "base64", "hashlib", "html", "difflib", "urllib.parse",
    "time",
})
# Left out on purpose, though pure: `string` (Formatter.get_field), `operator`
# (attrgetter) and `typing` (get_type_hints evaluates strings) reach private
# attributes by name, around the source check.
#: Importable only when the block declares network access (served by the parent).
NETWORK_MODULES = frozenset({"httpx"})

_FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "open", "input", "breakpoint", "help", "globals", "locals",
    "vars", "getattr", "setattr", "delattr", "memoryview", "exit", "quit", "__import__",
    "__builtins__", "__loader__", "__spec__",
})
#: Attributes that lead from an object to interpreter frames and their globals.
_FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
    "ag_code", "ag_await", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "tb_frame", "tb_next", "co_code", "co_consts", "mro", "format_map",
    # copy's (copyreg's) table of reducers: a reducer's state is set on the copy
    # with setattr, by names the source never shows
    "dispatch_table",
})
#: Special methods a block's own classes may define; the others change how the
#: interpreter treats an object (`__instancecheck__`, `__match_args__`,
#: `__setattr__`, `__init_subclass__`, ...) and are what escapes are built from.
_ORDINARY_DUNDERS = frozenset({
    "__init__", "__repr__", "__str__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__len__", "__iter__", "__next__", "__getitem__", "__contains__",
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__neg__",
    "__bool__", "__call__",
})
#: Built-in types a positional class pattern may name: they match themselves, so
#: `case int(x)` reads no attribute; any other class's `__match_args__` may name one.
_SELF_MATCHING = frozenset({"int", "str", "list", "dict", "tuple", "set", "frozenset",
                            "bytes", "bytearray", "float", "bool"})
_DUNDER_TEXT = re.compile(r"__\w+__")


def check_source(source: str) -> list[str]:
    """Problems that stop `source` from running, each with its line; empty
    when the code may run.  Rejects what reflection escapes need: names and
    attributes starting with `_` (`__subclasses__`, `__globals__`, ...) and
    the builtins that reach them by string."""
    try:
        tree = ast.parse(source, "<block>")
    except SyntaxError as exc:
        return [f"line {exc.lineno}: syntax error: {exc.msg}"]
    problems = []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        # Structural pattern matching reads attributes too: `case C(attr=x)`
        # is getattr(subject, "attr"), and `case name` binds a name.
        for attr in (node.kwd_attrs if isinstance(node, ast.MatchClass) else ()):
            if attr in _FORBIDDEN_ATTRIBUTES or attr.startswith("_"):
                problems.append(f"line {line}: attribute '{attr}' is not allowed in a "
                                f"sandboxed block (a class pattern reads it)")
        bound = [node.name] if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name \
            else [node.rest] if isinstance(node, ast.MatchMapping) and node.rest else []
        for name in bound:
            if name in _FORBIDDEN_NAMES or name.startswith("__"):
                problems.append(f"line {line}: '{name}' is not available in a sandboxed block")
        if isinstance(node, ast.MatchClass) and node.patterns and not (
                isinstance(node.cls, ast.Name) and node.cls.id in _SELF_MATCHING):
            problems.append(f"line {line}: positional class patterns are allowed only on "
                            f"built-in types ({', '.join(sorted(_SELF_MATCHING))}); use "
                            f"keyword patterns")
        defined = [node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.ClassDef)) else \
            [node.arg] if isinstance(node, ast.arg) else \
            [node.arg] if isinstance(node, ast.keyword) and node.arg else []
        for name in _bound_names(node):
            if name in _SELF_MATCHING:
                problems.append(f"line {line}: '{name}' names a built-in type and cannot be "
                                f"rebound in a sandboxed block (class patterns trust it); "
                                f"choose another name")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "type" and (len(node.args) != 1 or node.keywords):
            problems.append(f"line {line}: type() takes exactly one argument in a sandboxed "
                            f"block (three-argument type() builds classes at run time); "
                            f"use a class statement")
        if isinstance(node, ast.ClassDef) and any(isinstance(base, ast.Name) and
                                                  base.id == "type" for base in node.bases):
            problems.append(f"line {line}: classes derived from type (metaclasses) are not "
                            f"allowed in a sandboxed block")
        for name in defined:
            if name.startswith("__") and name not in _ORDINARY_DUNDERS:
                problems.append(f"line {line}: '{name}' is not allowed in a sandboxed block "
                                f"(special names change how the interpreter treats objects)")
        if isinstance(node, ast.ClassDef) and any(k.arg == "metaclass" for k in node.keywords):
            problems.append(f"line {line}: metaclasses are not allowed in a sandboxed block")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                _DUNDER_TEXT.search(node.value):
            problems.append(f"line {line}: text naming a special attribute "
                            f"({_DUNDER_TEXT.search(node.value).group()}) is not allowed")
        if isinstance(node, ast.Attribute) and node.attr == "format":
            problems.extend(f"line {line}: {p}" for p in _format_problems(node, parents))
        if isinstance(node, ast.Attribute) and node.attr in _FORBIDDEN_ATTRIBUTES:
            problems.append(f"line {line}: attribute '{node.attr}' is not allowed in a sandboxed "
                            f"block (it reaches the interpreter's internals)")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            problems.append(f"line {line}: attribute '{node.attr}' is not allowed in a sandboxed "
                            f"block (names starting with '_' are private)")
        elif isinstance(node, ast.Name) and (node.id in _FORBIDDEN_NAMES or
                                             node.id.startswith("__")):
            problems.append(f"line {line}: '{node.id}' is not available in a sandboxed block")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names]
            if isinstance(node, ast.ImportFrom) and node.level:
                problems.append(f"line {line}: relative imports are not allowed")
            for alias in node.names:
                if alias.name.startswith("_") or alias.name in _FORBIDDEN_ATTRIBUTES:
                    problems.append(f"line {line}: importing '{alias.name}' is not allowed")
            for name in names:
                if name not in ALLOWED_MODULES and name not in NETWORK_MODULES:
                    problems.append(f"line {line}: module '{name}' is not allowed; allowed: "
                                    f"{', '.join(sorted(ALLOWED_MODULES))} (httpx with network)")
    found = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "execute"]
    if not found:
        problems.append("the block must define `async def execute(inputs, context) -> dict`")
    return problems


def _format_problems(node: ast.Attribute, parents: dict) -> list[str]:
    """`.format` reads attributes by the names in its template (`{0.attr}`):
    only a literal template, called at once, whose fields read no private
    attribute; a template computed at run time could name any."""
    call = parents.get(node)
    if not (isinstance(call, ast.Call) and call.func is node):
        return ["`.format` may only be called directly, on a string literal"]
    template = node.value
    if isinstance(template, ast.Name) and template.id == "str" and call.args:
        template = call.args[0]                        # str.format(template, ...)
    if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
        return ["`.format` is allowed only on a string literal (a template computed at "
                "run time can read any attribute); use an f-string or concatenation"]
    import string

    def fields(text: str) -> list[str]:        # with those nested in a spec (`{0:{1}}`)
        parsed = list(string.Formatter().parse(text))
        return [name for _, name, _, _ in parsed if name] + \
            [name for _, _, spec, _ in parsed if spec for name in fields(spec)]

    try:
        names = fields(template.value)
    except ValueError as exc:
        return [f"the format string is malformed ({exc})"]
    if any("._" in name or name.startswith("_") for name in names):
        return ["a format field may not read a private attribute ('{0._name}')"]
    return []


def _bound_names(node: ast.AST) -> list[str]:
    """Names a node binds (assignment, def, argument, import alias, except, match)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.partition(".")[0]]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    return []

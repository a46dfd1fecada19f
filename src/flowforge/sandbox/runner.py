"""The child side of the sandbox: runs ONE untrusted Python block and exits.

This file is executed by a bare interpreter (`python -I -S -B runner.py`)
inside bubblewrap or a plain subprocess, so it imports nothing from
flowforge and only the standard library.  The parent imports `check_source`
and `ALLOWED_MODULES` from it too, so the rules are written once.

Layers, outermost first (each one alone stops the escape tests):
  1. the process boundary (bubblewrap, see bwrap.py: uid 65534 in its own user
     namespace, no capabilities, no network, read-only /proc and /dev, no files
     but a scratch tmpfs counted in the memory limit; or a subprocess run as
     `nobody` that may open no file at all),
  2. rlimits (CPU seconds, address space, file size, open files) and a
     seccomp filter (no sockets, no exec, no fork/clone, no rlimit changes;
     in the plain-subprocess mode also no opening files at all), both set by
     confine.py, which is loaded from next to this file,
  3. a source check (no names or attributes starting with `_`, no
     `getattr`-style reflection) and restricted builtins with a whitelist
     importer that hands out copies of modules without their private parts.

Protocol: one JSON line in on stdin (the job), JSON lines out on stdout: an
`{"op": "http", ...}` request (answered by one line on stdin) or the final
`{"op": "result", "ok": ..., ...}`.
"""

from __future__ import annotations

import ast
import io
import json
import sys
import types

__all__ = ["ALLOWED_MODULES", "NETWORK_MODULES", "check_source", "main"]

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
#: Members of allowed modules that read attributes by name (left out of the copies).
_DENIED_MEMBERS = {"functools": frozenset({"update_wrapper", "wraps", "singledispatch",
                                           "singledispatchmethod", "WRAPPER_ASSIGNMENTS",
                                           "WRAPPER_UPDATES"}),
                   "copy": frozenset({"dispatch_table"})}
_DUNDER_TEXT = __import__("re").compile(r"__\w+__")
_SAFE_BUILTINS = (
    "abs all any ascii bin bool bytearray bytes callable chr complex dict dir divmod "
    "enumerate filter float format frozenset hash hex id int isinstance issubclass iter len "
    "list map max min next object oct ord pow print range repr reversed round set slice "
    "sorted str sum tuple type zip hasattr super property staticmethod classmethod "
    "ArithmeticError AssertionError AttributeError Exception IndexError KeyError LookupError "
    "NameError NotImplementedError OverflowError RuntimeError StopIteration TypeError "
    "ValueError ZeroDivisionError UnicodeError True False None NotImplemented"
).split()


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


def _one_argument_type(real_type: type):
    """The block's `type`: type(obj) only.  Three-argument type() builds a
    class (or a metaclass, with `__instancecheck__` or `__match_args__`) from
    a dict whose keys may be made at run time, around the source check; and
    type(C) for a class would hand back the real type (or ABCMeta), so a
    metaclass comes back as this same guard."""

    def type(obj, *more, **keywords):                    # noqa: A001 - the block's `type`
        if more or keywords:
            raise TypeError("type() takes exactly one argument in a sandboxed block")
        kind = real_type(obj)
        return type if issubclass(kind, real_type) else kind

    return type


# -- the child process ---------------------------------------------------------------

class _HttpRequest:
    """Awaitable that suspends the block until the parent answers the request."""

    def __init__(self, payload: dict) -> None:
        self.payload = payload

    def __await__(self):
        answer = yield self
        return answer


class _Response:
    def __init__(self, data: dict) -> None:
        self.status_code = data.get("status", 0)
        self.headers = dict(data.get("headers") or {})
        self.text = data.get("text", "")
        self.url = data.get("url", "")

    def json(self):
        return json.loads(self.text)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError(f"HTTP {self.status_code} for {self.url}")


def _http_module() -> types.ModuleType:
    """A tiny `httpx` look-alike: every request goes to the parent, which
    sends it through the SSRF guard. `await httpx.get(url)`."""
    module = types.ModuleType("httpx")

    async def request(method, url, *, params=None, headers=None, json=None, data=None,
                      timeout=None):
        answer = await _HttpRequest({"op": "http", "method": method.upper(), "url": str(url),
                                     "params": params, "headers": headers, "json": json,
                                     "data": data})
        if answer.get("error"):
            raise RuntimeError(answer["error"])
        return _Response(answer)

    def verb(method):
        async def call(url, **kwargs):
            return await request(method, url, **kwargs)
        call.__name__ = method.lower()
        return call

    class AsyncClient:
        """`async with httpx.AsyncClient(base_url=..., headers=...) as client:
        await client.get(path)`, as blocks written for the seed do; each
        request still goes to the parent through the SSRF guard."""

        def __init__(self, *, base_url="", headers=None, params=None, timeout=None,
                     **_ignored):
            self.base_url = str(base_url or "")
            self.headers = dict(headers or {})
            self.params = dict(params or {})

        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return False

        async def aclose(self):
            return None

        async def request(self, method, url, *, params=None, headers=None, **kwargs):
            url = str(url)
            if self.base_url and "://" not in url:
                url = self.base_url.rstrip("/") + "/" + url.lstrip("/")
            return await request(method, url, params={**self.params, **(params or {})},
                                 headers={**self.headers, **(headers or {})}, **kwargs)

    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        setattr(module, method.lower(), verb(method))

        async def bound(self, url, _method=method, **kwargs):
            return await self.request(_method, url, **kwargs)
        setattr(AsyncClient, method.lower(), bound)
    module.request, module.Response, module.AsyncClient = request, _Response, AsyncClient
    return module


def _public_copy(module: types.ModuleType, allowed: frozenset) -> types.ModuleType:
    """The module's public names only, minus other modules (`collections.sys`).

    The copy's name is not the module's: `from json import decoder` finds no
    `decoder` in the copy, and CPython then looks for `sys.modules["json.decoder"]`
    by the module's name; under another name that lookup finds nothing."""
    copy = types.ModuleType(f"sandboxed {module.__name__}")
    denied = _DENIED_MEMBERS.get(module.__name__, frozenset())
    for name in dir(module):
        if name.startswith("_") or name in denied:
            continue
        value = getattr(module, name)
        if isinstance(value, types.ModuleType):
            full = f"{module.__name__}.{name}"
            if full not in allowed:
                continue
            value = _public_copy(value, allowed)
        setattr(copy, name, value)
    return copy


def _sibling(name: str) -> types.ModuleType:
    """confine.py, which sits next to this file (in bubblewrap both are copied
    to /sandbox); loaded by path, as `-I` puts no folder of ours on sys.path."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"flowforge_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _block_context(context):
    """The block's `context` argument: its `user` and `memory` are read-only
    views (a write raises TypeError: memory changes go through the block's
    outputs and the workflow's `memory:` keys, never through the context)."""
    view = dict(context)
    for key in ("user", "memory"):
        if isinstance(view.get(key), dict):
            view[key] = types.MappingProxyType(view[key])
    return view


def _drive(coro, write, read):
    """Run the block's coroutine without an event loop (asyncio needs
    sockets): the only thing it may await is an HTTP request to the parent."""
    value = None
    while True:
        try:
            request = coro.send(value)
        except StopIteration as stop:
            return stop.value
        if not isinstance(request, _HttpRequest):
            raise RuntimeError("a sandboxed block may only await httpx requests")
        write(request.payload)
        value = read()


def _user_error(exc: BaseException) -> str:
    lines, tb = [], exc.__traceback__
    while tb is not None:                   # no `traceback` import: files may be closed
        if tb.tb_frame.f_code.co_filename == "<block>":
            lines.append(f"line {tb.tb_lineno}")
        tb = tb.tb_next
    where = f" ({lines[-1]})" if lines else ""
    return f"{type(exc).__name__}: {exc}{where}"


def main() -> None:
    stdin, stdout = sys.stdin, sys.stdout

    def write(message: dict) -> None:
        stdout.write(json.dumps(message, default=str) + "\n")
        stdout.flush()

    def read() -> dict:
        line = stdin.readline()
        return json.loads(line) if line else {"error": "the parent closed the channel"}

    # Everything up to reading the job depends on nothing in it, and is done
    # while a waiting process waits (see process.py's pool): libseccomp, and in
    # the mode where no file may be opened later, every allowed module.
    import importlib
    modules = {}
    internal = {}
    preload = "--preload" in sys.argv[1:]

    def load(name):
        if name not in modules:
            modules[name] = _public_copy(importlib.import_module(name), ALLOWED_MODULES)
        if name == "datetime" and "_strptime" not in internal:
            internal["_strptime"] = importlib.import_module("_strptime")
        return modules[name]

    if preload:                  # all at once, before any confinement
        for name in sorted(ALLOWED_MODULES, reverse=True):   # collections.abc before the
            # copy of collections is made, so `import collections.abc` finds it there
            load(name)
        "x".encode("idna"), "x".encode("utf-16"), "x".encode("latin-1")
    try:
        confine = _sibling("confine")
        seccomp, seccomp_error = confine.load_seccomp(), None
    except OSError as exc:
        seccomp, seccomp_error = None, exc

    first = stdin.readline()
    if not first:
        return                   # a waiting process that was never given a job
    job = json.loads(first)
    limits, network = job["limits"], bool(job.get("network"))
    problems = check_source(job["source"]) if job.get("check", True) else []
    if problems:
        write({"op": "result", "ok": False, "kind": "rejected", "message": "; ".join(problems)})
        return
    allowed = ALLOWED_MODULES | (NETWORK_MODULES if network else frozenset())
    deny_files = bool(job.get("deny_files"))
    if deny_files and not preload:
        write({"op": "result", "ok": False, "kind": "setup",
               "message": "could not confine the block: a process that may not open files "
                          "must be started with --preload"})
        return
    if network:
        modules["httpx"] = _http_module()
    try:
        if seccomp_error is not None:
            raise seccomp_error
        if limits.get("scratch_bytes"):
            confine.mount_scratch(seccomp, limits["scratch_bytes"], limits["scratch_files"])
        confine.set_limits(limits)
        if job.get("drop_root"):
            confine.drop_root(seccomp)
        else:                        # bubblewrap left two, for the scratch mount alone
            confine.drop_capabilities(seccomp)
        confine.install_seccomp(seccomp, deny_files=deny_files)
    except OSError as exc:
        write({"op": "result", "ok": False, "kind": "setup",
               "message": f"could not confine the block: {exc}"})
        return

    def importer(name, globals=None, locals=None, fromlist=(), level=0):
        if name in internal and not level:     # lazy imports of the stdlib's C code
            return internal[name]
        if level or name not in allowed:
            raise ImportError(f"module '{name}' is not allowed in a sandboxed block")
        module = modules[name] if name in modules else load(name)
        if fromlist or "." not in name:
            return module
        top, _, rest = name.partition(".")
        if top in allowed:
            return modules[top] if top in modules else load(top)
        holder = types.ModuleType(top)                 # `import urllib.parse` -> urllib.parse
        setattr(holder, rest, module)
        return holder

    import builtins
    safe = {name: getattr(builtins, name) for name in _SAFE_BUILTINS if hasattr(builtins, name)}
    captured = io.StringIO()
    budget = int(limits["output_bytes"])
    log_budget = min(budget // 4, 100_000)

    def safe_print(*args, sep=" ", end="\n", **_ignored):
        if captured.tell() < log_budget:
            captured.write(sep.join(str(a) for a in args) + end)

    safe.update(type=_one_argument_type(builtins.type))
    safe.update(__import__=importer, print=safe_print, __build_class__=builtins.__build_class__,
                __name__="block")
    namespace = {"__builtins__": safe, "__name__": "block"}
    sys.stdout = io.StringIO()
    try:
        exec(compile(job["source"], "<block>", "exec"), namespace)
        execute = namespace.get("execute")
        outcome = _drive(execute(job["inputs"], _block_context(job.get("context") or {})),
                         write, read)
        if not isinstance(outcome, dict):
            raise TypeError(f"execute() must return a dict, not {type(outcome).__name__}")
        size = len(json.dumps(outcome))
        text = json.dumps({"op": "result", "ok": True, "output": outcome,
                           "logs": captured.getvalue()[:log_budget]})
    except MemoryError:
        write({"op": "result", "ok": False, "kind": "memory",
               "message": f"the block exceeded its memory limit of {limits['memory_mb']} MB"})
        return
    except RecursionError as exc:
        write({"op": "result", "ok": False, "kind": "error", "message": _user_error(exc)})
        return
    except BaseException as exc:                         # the block's own error
        write({"op": "result", "ok": False, "kind": "error", "message": _user_error(exc)})
        return
    if size > budget:
        write({"op": "result", "ok": False, "kind": "output",
               "message": f"the block's output is {size} bytes, over the limit of "
                          f"{budget} bytes"})
        return
    stdout.write(text + "\n")
    stdout.flush()


if __name__ == "__main__":
    main()

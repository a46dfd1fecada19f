"""The child side of the sandbox: runs ONE untrusted Python block and exits.

This file is executed by a bare interpreter (`python -I -S -B runner.py`)
inside bubblewrap or a plain subprocess, so it imports nothing from
flowforge and only the standard library; the files it needs besides (the
source check, confine.py) are loaded by path from next to it.

Layers, outermost first (each one alone stops the escape tests):
  1. the process boundary (bubblewrap, see bwrap.py: uid 65534 in its own user
     namespace, no capabilities, no network, read-only /proc and /dev, no files
     but a scratch tmpfs counted in the memory limit; or a subprocess run as
     `nobody` that may open no file at all),
  2. rlimits (CPU seconds, address space, file size, open files) and a
     seccomp filter (no sockets, no exec, no fork/clone, no rlimit changes;
     in the plain-subprocess mode also no opening files at all), both set by
     confine.py, which is loaded from next to this file,
  3. a source check (source_check.py: no names or attributes starting with
     `_`, no `getattr`-style reflection) and restricted builtins with a whitelist
     importer that hands out copies of modules without their private parts.

Protocol: one JSON line in on stdin (the job), JSON lines out on stdout: an
`{"op": "http", ...}` request (answered by one line on stdin) or the final
`{"op": "result", "ok": ..., ...}`.
"""

from __future__ import annotations

import io
import json
import sys
import types

__all__ = ["main"]

#: Members of allowed modules that read attributes by name (left out of the copies).
_DENIED_MEMBERS = {"functools": frozenset({"update_wrapper", "wraps", "singledispatch",
                                           "singledispatchmethod", "WRAPPER_ASSIGNMENTS",
                                           "WRAPPER_UPDATES"}),
                   "copy": frozenset({"dispatch_table"})}
_SAFE_BUILTINS = (
    "abs all any ascii bin bool bytearray bytes callable chr complex dict dir divmod "
    "enumerate filter float format frozenset hash hex id int isinstance issubclass iter len "
    "list map max min next object oct ord pow print range repr reversed round set slice "
    "sorted str sum tuple type zip hasattr super property staticmethod classmethod "
    "ArithmeticError AssertionError AttributeError Exception IndexError KeyError LookupError "
    "NameError NotImplementedError OverflowError RuntimeError StopIteration TypeError "
    "ValueError ZeroDivisionError UnicodeError True False None NotImplemented"
).split()


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
    """confine.py or source_check.py, which sit next to this file (in bubblewrap
    all three are copied to /sandbox); loaded by path, as `-I` puts no folder of ours on sys.path."""
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
    rules = _sibling("source_check")

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
            modules[name] = _public_copy(importlib.import_module(name), rules.ALLOWED_MODULES)
        if name == "datetime" and "_strptime" not in internal:
            internal["_strptime"] = importlib.import_module("_strptime")
        return modules[name]

    if preload:                  # all at once, before any confinement
        for name in sorted(rules.ALLOWED_MODULES, reverse=True):   # collections.abc before the
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
    problems = rules.check_source(job["source"]) if job.get("check", True) else []
    if problems:
        write({"op": "result", "ok": False, "kind": "rejected", "message": "; ".join(problems)})
        return
    allowed = rules.ALLOWED_MODULES | (rules.NETWORK_MODULES if network else frozenset())
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

"""Python callables registered by name: `@flowforge.function("explode")`.

The `function` block calls them, and agents can use them as tools, so the
registry lives in the tools layer below both.  A function's parameters,
type hints and docstring are kept so a tool schema can be derived from them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from flowforge.errors import NotFound

__all__ = ["RegisteredFunction", "function", "get_function", "registered_functions",
           "unregister_function", "unknown_function", "is_registered"]


@dataclass(frozen=True)
class RegisteredFunction:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    description: str

    @property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.fn)


_FUNCTIONS: dict[str, RegisteredFunction] = {}


def function(name: str | None = None, *, description: str | None = None):
    """Register a callable under `name` (default: its own name).

        @flowforge.function("explode")
        def explode(n: int) -> dict: ...
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        key = name or fn.__name__
        _FUNCTIONS[key] = RegisteredFunction(
            name=key, fn=fn, is_async=inspect.iscoroutinefunction(fn),
            description=description or inspect.getdoc(fn) or "")
        return fn

    if callable(name):  # used bare: @function
        fn, name = name, None
        return decorate(fn)
    return decorate


def get_function(name: str) -> RegisteredFunction:
    try:
        return _FUNCTIONS[name]
    except KeyError:
        raise NotFound(unknown_function(name)) from None


def unknown_function(name: str) -> str:
    """Why `name` cannot be called, with the closest registered name: what a run
    says when it meets it and what `flowforge validate` says before."""
    from flowforge.hints import did_you_mean

    known = ", ".join(sorted(_FUNCTIONS)) or "none"
    return (f"no function registered as '{name}'{did_you_mean(name, _FUNCTIONS)} "
            f"(registered: {known}); register it with @flowforge.function({name!r}) in a "
            f"module the run imports (`--import my_functions.py`)")


def is_registered(name: str) -> bool:
    return name in _FUNCTIONS


def registered_functions() -> dict[str, RegisteredFunction]:
    return dict(_FUNCTIONS)


def unregister_function(name: str) -> None:
    _FUNCTIONS.pop(name, None)

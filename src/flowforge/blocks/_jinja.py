"""Jinja2 templates (Dify's template-transform node, prompts written in
Jinja2) rendered on Jinja2's own `ImmutableSandboxedEnvironment`, within
the run's value limit and a time limit.

The sandbox stops a template from reaching Python's internals or mutating
what it is given; it does not stop one from making a huge string or
spinning.  Every value a run makes is bounded (DESIGN.md), so here:

- every piece of text is counted as it is produced (`Template.generate`),
  against the value limit (`FLOWFORGE_MAX_VALUE_MB`, or a server's
  `max_value_mb`, as `engine.limits` reads it: 16 million characters);
- an operation that would make a value over that limit in one step is
  refused before it runs: `*` of a text or list by a number, `+` of two
  texts or lists, `**` with a large result, a number argument above the
  limit (`"x"|center(10**9)`, `"x".ljust(...)`), a field width in a format
  (`"%999999999d"`, `"{:>999999999}"`), a text argument over the limit (a
  macro doubling its argument), a namespace attribute over it;
- the template's own lines are traced and stop past `SECONDS` of rendering
  (nested loops with nothing in them produce no text to count).

Every refusal is a `TemplateLimit` saying which limit and how to set it.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
import time
from typing import Any, Mapping

from jinja2 import TemplateError
from jinja2.runtime import Namespace
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["TemplateLimit", "render", "syntax_problem", "template_variables", "value_limit",
           "SECONDS", "VALUE_VARIABLE"]

#: How long one template may render (seconds of its own lines).
SECONDS = 5.0
#: engine.limits.LIMIT_SETTINGS["max_value_mb"] (a test keeps the two in step)
VALUE_VARIABLE, VALUE_SERVICE, VALUE_DEFAULT_MB = "FLOWFORGE_MAX_VALUE_MB", "max_value_mb", 16
_FILENAME = "<template>"
_WIDTH = re.compile(r"%[-+ #0]*(\d+)|\{[^{}]*:[^{}]*?(\d+)[^{}]*\}")


class TemplateLimit(Exception):
    """A template stopped by a limit (not a mistake in its syntax)."""


def value_limit(services: Mapping[str, Any] | None) -> int:
    """The run's value limit in characters: its services', else the
    environment's, else 16 million (as `engine.limits.ValueLimits.of`)."""
    value = (services or {}).get(VALUE_SERVICE)
    if value is None:
        text = os.environ.get(VALUE_VARIABLE, "").strip()
        value = float(text) if text.replace(".", "", 1).isdigit() else VALUE_DEFAULT_MB
    return int(float(value) * 1_000_000)


def _too_large(what: str, size: int, limit: int) -> TemplateLimit:
    return TemplateLimit(f"{what} would be {size:,} characters, over the value limit of "
                         f"{limit:,} ({VALUE_VARIABLE}, in millions)")


class _Environment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "+", "**", "%"})

    def __init__(self, limit: int) -> None:
        super().__init__(keep_trailing_newline=True)
        self.limit = limit
        self.filters = {name: self._guarded(func) for name, func in self.filters.items()}
        self.globals["namespace"] = self._namespace_class()

    def _check_args(self, args: Any, what: str) -> None:
        for value in args:
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > self.limit:
                raise _too_large(f"{what} with the number {value}", abs(value), self.limit)
            if isinstance(value, (str, list, tuple, dict)) and len(value) > self.limit:
                raise _too_large(what, len(value), self.limit)
            if isinstance(value, str) and ("%" in value or "{" in value):
                for match in _WIDTH.finditer(value):
                    width = int(match.group(1) or match.group(2))
                    if width > self.limit:
                        raise _too_large(f"a field of width {width}", width, self.limit)

    def _guarded(self, func: Any) -> Any:
        @functools.wraps(func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._check_args([*args, *kwargs.values()], f"the filter {func.__name__}")
            return func(*args, **kwargs)
        return guarded

    def _namespace_class(self) -> type:
        env = self

        class BoundedNamespace(Namespace):
            def __setitem__(self, name: str, value: Any) -> None:
                env._check_args([value], f"namespace attribute {name}")
                super().__setitem__(name, value)
        return BoundedNamespace

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        # A text method's numbers are widths ("x".ljust(10**9)); any call's text
        # argument is bounded (a macro doubling its argument); `range` is
        # bounded by the sandbox itself.
        if isinstance(getattr(__obj, "__self__", None), str):
            __self._check_args([__obj.__self__, *args, *kwargs.values()], "a text method")
        else:
            __self._check_args([value for value in (*args, *kwargs.values())
                                if not isinstance(value, int)], "a call")
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        sized = (str, list, tuple)
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, sized) and isinstance(count, int) and \
                        len(seq) * count > self.limit:
                    raise _too_large("a repetition", len(seq) * count, self.limit)
        elif operator == "+" and isinstance(left, sized) and isinstance(right, sized):
            if len(left) + len(right) > self.limit:
                raise _too_large("a concatenation", len(left) + len(right), self.limit)
        elif operator == "**" and isinstance(left, (int, float)) and isinstance(right, int) \
                and abs(left) > 1 and right > 0:
            digits = right * math.log10(abs(left))
            if digits > 4300:
                raise TemplateLimit(f"{left} ** {right} would have about {int(digits):,} "
                                    f"digits; the limit is 4,300")
        elif operator == "%" and isinstance(left, str):
            self._check_args([left, *(right if isinstance(right, tuple) else [right])],
                             "a % format")
        return super().call_binop(context, operator, left, right)


def syntax_problem(template: str) -> str | None:
    """A template's syntax error (`line 2: unexpected '}'`), or None."""
    try:
        _Environment(1).parse(template)
    except TemplateError as exc:
        line = getattr(exc, "lineno", None)
        return f"line {line}: {exc.message}" if line else str(exc)
    return None


def template_variables(template: str) -> set[str]:
    """The names a template reads that it does not set itself."""
    from jinja2 import meta

    return set(meta.find_undeclared_variables(_Environment(1).parse(template)))


def render(template: str, variables: Mapping[str, Any], *, limit: int,
           seconds: float = SECONDS) -> str:
    """The rendered text; TemplateLimit past a limit, jinja2's TemplateError
    (with its line) for a template that fails."""
    env = _Environment(limit)
    compiled = env.from_string(template)
    deadline = time.monotonic() + seconds
    count = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != _FILENAME:
            return None
        count[0] += 1
        if count[0] % 1000 == 0 and time.monotonic() > deadline:
            raise TemplateLimit(f"the template rendered for more than {seconds:g} s and was "
                                f"stopped (a loop too long?)")
        return trace

    pieces, size = [], 0
    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        for piece in compiled.generate(**dict(variables)):
            size += len(piece)
            if size > limit:
                raise _too_large("the rendered text", size, limit)
            pieces.append(piece)
    finally:
        sys.settrace(previous)
    return "".join(pieces)


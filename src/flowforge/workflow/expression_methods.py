"""The methods an expression may call on a value, and the attributes it may read.

An allow-list: a method not listed here cannot be called, so a method a future
Python adds is refused until someone looks at it.  Methods that change a value
(`list.append`, `list.sort`) are not listed, because an expression must never
change a block's output under the next block's feet.  Mappings have no methods
in expressions at all: `results.count` reads the field `count` (see
`expressions`).  Each method that can grow a value checks the size of its
result before building it.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import simpleeval

from flowforge.workflow.expression_limits import CALL, ITEM, MAX_ITEMS, VISIT, current
from flowforge.workflow.expression_ops import scan_cost

__all__ = ["METHODS", "DATA_ATTRIBUTES", "call_method", "read_attribute"]

def _scan(name: str) -> Callable[..., Any]:
    """A method that reads its string once and returns a number, a truth value or
    a part of it (never more than it was given)."""
    method = getattr(str, name)

    def run(text: str, *args: Any) -> Any:
        current().chars(len(text) + sum(len(a) for a in args if isinstance(a, str)))
        return method(text, *args)
    return run


def _recase(name: str) -> Callable[..., str]:
    """A case change: may grow a string (`'ß'.upper()` is 'SS'), checked once built,
    its size being at most three times its input."""
    method = getattr(str, name)

    def run(text: str) -> str:
        current().chars(len(text))
        result = method(text)
        current().string(len(result), given=len(text))
        return result
    return run


def _pad(name: str) -> Callable[..., str]:
    method = getattr(str, name)

    def run(text: str, width: int, *fill: str) -> str:
        if isinstance(width, int):
            current().string(max(width, len(text)), given=len(text))
        return method(text, width, *fill)
    return run


def _expandtabs(text: str, tabsize: int = 8) -> str:
    if isinstance(tabsize, int):
        current().string(len(text) + text.count("\t") * max(tabsize, 0), given=len(text))
    return text.expandtabs(tabsize)


def _replace(text: str, old: str, new: str, count: int = -1) -> str:
    if isinstance(old, str) and isinstance(new, str) and isinstance(count, int):
        found = text.count(old) if old else len(text) + 1
        if count >= 0:
            found = min(found, count)
        current().string(len(text) + found * (len(new) - len(old)), given=len(text))
    return text.replace(old, new, count)


def _join(separator: str, items: Any) -> str:
    budget = current()
    members = list(items) if isinstance(items, (dict, set, frozenset)) else items
    budget.charge(2 * len(members) * ITEM)         # two passes: types, then lengths
    if isinstance(members, str):
        length = len(members) + len(separator) * max(len(members) - 1, 0)
    else:
        if not set(map(type, members)) <= {str}:
            budget.charge(len(members) * VISIT)
            if not all(isinstance(member, str) for member in members):
                return separator.join(members)    # raises TypeError, naming the bad item
        length = sum(map(len, members)) + len(separator) * max(len(members) - 1, 0)
    budget.string(length)
    return separator.join(members)


def _split(name: str) -> Callable[..., list]:
    method = getattr(str, name)

    def run(text: str, sep: Any = None, maxsplit: int = -1) -> list:
        budget = current()
        budget.chars(len(text))
        if isinstance(maxsplit, int) and (maxsplit < 0 or maxsplit > MAX_ITEMS):
            maxsplit = MAX_ITEMS        # at most MAX_ITEMS + 1 pieces are ever built
        result = method(text, sep, maxsplit)
        budget.items(len(result) + 1)
        return result
    return run


_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def _splitlines(text: str, keepends: bool = False) -> list:
    budget = current()
    budget.chars(len(text) * len(_LINE_BREAKS))
    budget.items(sum(text.count(c) for c in _LINE_BREAKS) + 2)
    return text.splitlines(keepends)


def _seq_search(name: str) -> Callable[..., Any]:
    """list/tuple `index` and `count`: compare the value with every item."""
    def run(items: Any, value: Any, *bounds: Any) -> Any:
        scan_cost(items, value)
        return getattr(items, name)(value, *bounds)
    return run


def _list_copy(items: list) -> list:
    current().charge(len(items) * ITEM)
    return items.copy()


def _number(name: str) -> Callable[..., Any]:
    return lambda value, *args: getattr(value, name)(*args)


_STR_METHODS: dict[str, Callable[..., Any]] = {
    **{name: _scan(name) for name in (
        "count", "endswith", "startswith", "find", "rfind", "index", "rindex",
        "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
        "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
        "strip", "lstrip", "rstrip", "removeprefix", "removesuffix",
        "partition", "rpartition")},
    **{name: _recase(name) for name in (
        "lower", "upper", "casefold", "swapcase", "title", "capitalize")},
    **{name: _pad(name) for name in ("center", "ljust", "rjust", "zfill")},
    "expandtabs": _expandtabs,
    "replace": _replace,
    "join": _join,
    "split": _split("split"),
    "rsplit": _split("rsplit"),
    "splitlines": _splitlines,
}
_INT_METHODS = {name: _number(name) for name in ("bit_length", "conjugate", "as_integer_ratio")}
_FLOAT_METHODS = {name: _number(name) for name in ("is_integer", "conjugate",
                                                   "as_integer_ratio")}
_TUPLE_METHODS = {"index": _seq_search("index"), "count": _seq_search("count")}

# Methods an expression may call, by the type of the value (subclasses use their
# base's list: bool is looked up as int).
METHODS: dict[type, dict[str, Callable[..., Any]]] = {
    str: _STR_METHODS,
    list: {**_TUPLE_METHODS, "copy": _list_copy},
    tuple: _TUPLE_METHODS,
    int: _INT_METHODS,
    float: _FLOAT_METHODS,
    complex: {"conjugate": _number("conjugate")},
}

for _methods in METHODS.values():
    for _name, _method in _methods.items():
        _method.__qualname__ = _method.__name__ = _name    # "zfill() takes ..." in errors

# Attributes an expression may read that are values, not methods.
DATA_ATTRIBUTES: dict[type, frozenset[str]] = {
    int: frozenset({"real", "imag", "numerator", "denominator"}),
    float: frozenset({"real", "imag"}),
    complex: frozenset({"real", "imag"}),
}


def _kind(value: Any) -> type | None:
    for kind in (str, bool, int, float, complex, list, tuple):
        if isinstance(value, kind):
            return int if kind is bool else kind
    return None


def call_method(target: Any, name: str, args: list, keywords: dict) -> Any:
    """`target.name(*args, **keywords)`, for an allowed method of a plain value."""
    kind = _kind(target)
    methods = METHODS.get(kind) if kind is not None else None
    if methods is not None and name in methods:
        current().charge(CALL)
        return methods[name](target, *args, **keywords)
    if target is None:
        raise TypeError(f"'.{name}()' was called on None")
    if isinstance(target, dict):
        raise simpleeval.FeatureNotAvailable(
            f"'.{name}' reads the field '{name}' of a mapping, and mappings have no methods "
            f"in expressions")
    kind_name = type(target).__name__
    if methods:
        raise simpleeval.FeatureNotAvailable(
            f"'.{name}()' is not available on {kind_name} values in expressions; "
            f"available: {', '.join(sorted(methods))}")
    raise simpleeval.FeatureNotAvailable(
        f"{kind_name} values have no methods in expressions (called '.{name}()')")


_MISSING = object()


def read_attribute(value: Any, name: str) -> Any:
    """`value.name` for a value that is not a mapping, a list's `length` or None
    (the evaluator handles those): a data attribute of a number, or a plain
    attribute of an object a registered function returned."""
    kind = _kind(value)
    if kind is not None:
        if name in DATA_ATTRIBUTES.get(kind, ()):
            return getattr(value, name)
        if name in METHODS.get(kind, {}):
            raise simpleeval.FeatureNotAvailable(
                f"'.{name}' is a method: call it, e.g. `x.{name}()`")
        raise simpleeval.InvalidExpression(
            f"{type(value).__name__} values have no attribute '{name}'")
    # An object a registered function returned: its plain data only.
    item = getattr(value, name, _MISSING)
    if item is _MISSING:
        try:
            item = value[name]
        except (KeyError, TypeError, IndexError):
            raise simpleeval.InvalidExpression(
                f"{type(value).__name__} values have no attribute '{name}'") from None
    if callable(item) or isinstance(item, types.ModuleType):
        raise simpleeval.FeatureNotAvailable(
            f"'.{name}' of a {type(value).__name__} is not a plain value; expressions "
            f"cannot call or pass on methods and modules")
    return item

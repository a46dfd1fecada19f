"""The operators and the function table of expressions, each of which asks the
evaluation's `Budget` (`expression_limits`) before it builds anything or does
work that grows with its inputs.  The methods values offer are in
`expression_methods`.

The table is an allow-list of wrappers, never the builtins themselves: a
function can be passed as a value (`sorted(x, key=len)`), and C code then
calls it, so it must charge the budget on its own.
"""

from __future__ import annotations

import ast
import math
import operator
from itertools import chain
from typing import Any, Callable

import simpleeval

from flowforge.workflow.expression_format import percent
from flowforge.workflow.expression_limits import (CALL, CHARS, ITEM, MAX_INT_BITS, MAX_ITEMS,
                                                  MAX_WORK, OverBudget, current)

__all__ = ["OPERATORS", "FUNCTIONS", "deep_cost", "scan_cost"]

_CONTAINERS = (list, tuple, dict, set, frozenset)
_SEQUENCES = (list, tuple)
_MAX_DIGITS = MAX_INT_BITS * 30103 // 100_000        # decimal digits of the largest integer


def _room() -> int:
    """Work units left in this evaluation: the most any one walk may visit."""
    return max(MAX_WORK - current().work, 0)


def _deep_units(value: Any, room: int) -> int:
    """The work of visiting `value` through nesting: its items, plus the characters
    of its texts (two equal texts are compared character by character), or
    more than `room` once that is known."""
    budget = current()
    items = budget.size(value, room)
    if items > room:
        return items
    return items + budget.text(value, (room - items) * CHARS) // CHARS


def deep_cost(value: Any, factor: int = 1) -> None:
    """Charge an operation that visits every item of `value` through nesting
    (comparing, hashing, sorting) `factor` times; refuse when that is more
    work than the evaluation has left."""
    budget = current()
    if isinstance(value, str):
        budget.chars(len(value) * factor)
        return
    if type(value) not in _CONTAINERS:
        budget.charge(ITEM * factor)
        return
    room = _room() // max(factor, 1)
    units = _deep_units(value, room)
    if units > room:
        raise OverBudget(f"it would compare, hash or sort too many items (counted through "
                         f"nesting, with the characters of their texts): more work than an "
                         f"expression may do ({MAX_WORK:_} units)".replace("_", " "),
                         whole=True)
    budget.charge(units * ITEM * factor)


def scan_cost(items: Any, value: Any) -> None:
    """Charge comparing `value` with every item of `items` (`in`, `index`, `count`)."""
    if type(value) in _CONTAINERS:
        deep_cost(items)
    else:
        # A text is compared character by character with every item of its length.
        width = 1 + len(value) // CHARS if isinstance(value, str) else 1
        current().charge(len(items) * ITEM * width)


def _size(value: Any) -> int:
    """Items in `value` through nesting, refusing values whose measuring alone would
    exhaust the evaluation (the caller compares the answer with MAX_ITEMS)."""
    return current().size(value, MAX_ITEMS)


# -- operators ---------------------------------------------------------------------------

def _add(a: Any, b: Any) -> Any:
    budget = current()
    if isinstance(a, str) and isinstance(b, str):
        budget.string(len(a) + len(b))
    elif isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
        size = _size(a) + _size(b) - 1
        budget.items(size)
        return budget.remember(a + b, size)
    return budget.integer(a + b)


def _mul(a: Any, b: Any) -> Any:
    budget = current()
    seq, times = (a, b) if isinstance(a, (str, *_SEQUENCES)) else (b, a)
    if isinstance(seq, (str, *_SEQUENCES)) and isinstance(times, int):
        times = max(times, 0)
        if isinstance(seq, str):
            budget.string(len(seq) * times, given=len(seq) if times <= 1 else 0)
            return seq * times
        size = _size(seq)
        total = 1 + times * (size - 1)
        budget.items(total, given=size if times <= 1 else 0)
        result = seq * times
        return budget.remember(result, total) if total <= MAX_ITEMS else result
    if isinstance(a, int) and isinstance(b, int) and a and b:
        budget.bits(a.bit_length() + b.bit_length() - 1)
    return budget.integer(a * b)


def _pow(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        # a ** b has at least (bits(a) - 1) * b + 1 bits: refuse before computing it.
        current().bits((a.bit_length() - 1) * b + 1)
    return current().integer(a ** b)


def _lshift(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a and b > 0:
        current().bits(a.bit_length() + b)
    return current().integer(a << b)


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, str):
        return percent(a, b)
    return current().integer(a % b)


def _plain(function: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Arithmetic that cannot grow an integer past the sum of its operands' sizes,
    and set operations whose result holds at most both operands."""
    def run(a: Any, b: Any) -> Any:
        budget = current()
        if isinstance(a, (set, frozenset, dict)) and isinstance(b, (set, frozenset, dict)):
            budget.items(len(a) + len(b), given=max(len(a), len(b)))
        return budget.integer(function(a, b))
    return run


def _compare(function: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def run(a: Any, b: Any) -> Any:
        if type(a) in _CONTAINERS and type(b) in _CONTAINERS:
            # Comparing two containers costs at most the smaller one, through nesting.
            room = _room()
            first = _deep_units(a, room)
            current().charge(min(first, _deep_units(b, min(first, room))) * ITEM)
        elif isinstance(a, str) and isinstance(b, str):
            current().chars(min(len(a), len(b)))
        return function(a, b)
    return run


def _contains(container: Any, item: Any) -> bool:
    """`item in container`, charged for what it visits."""
    budget = current()
    if isinstance(container, str):
        budget.chars(len(container) + (len(item) if isinstance(item, str) else 0))
    elif isinstance(container, (dict, set, frozenset)):
        if type(item) is tuple:
            deep_cost(item)                  # hashing a tuple visits all of it
    elif isinstance(container, _SEQUENCES):
        scan_cost(container, item)
    return item in container


OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: _add,
    ast.Sub: _plain(operator.sub),
    ast.Mult: _mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: _plain(operator.floordiv),
    ast.Mod: _mod,
    ast.Pow: _pow,
    ast.LShift: _lshift,
    ast.RShift: _plain(operator.rshift),
    ast.BitOr: _plain(operator.or_),
    ast.BitAnd: _plain(operator.and_),
    ast.BitXor: _plain(operator.xor),
    ast.USub: lambda a: current().integer(-a),
    ast.UAdd: operator.pos,
    ast.Invert: lambda a: current().integer(~a),
    ast.Not: operator.not_,
    ast.Eq: _compare(operator.eq),
    ast.NotEq: _compare(operator.ne),
    ast.Lt: _compare(operator.lt),
    ast.LtE: _compare(operator.le),
    ast.Gt: _compare(operator.gt),
    ast.GtE: _compare(operator.ge),
    ast.In: lambda a, b: _contains(b, a),
    ast.NotIn: lambda a, b: not _contains(b, a),
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


# -- functions ----------------------------------------------------------------------------

def _called() -> Any:
    budget = current()
    budget.charge(CALL)
    return budget


def _check_key(key: Any) -> None:
    if key is not None and not getattr(key, "_expression_function", False):
        raise simpleeval.FeatureNotAvailable(
            "key= must be one of the expression functions (e.g. key=len)")


def _len(value: Any) -> int:
    _called()
    return 0 if value is None else len(value)


def _str(value: Any = "") -> str:
    budget = _called()
    if isinstance(value, str):
        return value
    budget.string(budget.text(value))
    result = str(value)
    budget.string(len(result))
    return result


def _int(value: Any = 0, *base: Any) -> int:
    budget = _called()
    if isinstance(value, str):
        budget.chars(len(value))
    return budget.integer(int(value, *base))


def _float(value: Any = 0.0) -> float:
    budget = _called()
    if isinstance(value, str):
        budget.chars(len(value))
    return float(value)


def _bool(value: Any = False) -> bool:
    _called()
    return bool(value)


def _abs(value: Any) -> Any:
    return _called().integer(abs(value))


def _round(number: Any, ndigits: Any = None) -> Any:
    budget = _called()
    if isinstance(ndigits, int) and ndigits < -_MAX_DIGITS:
        budget.bits(-ndigits * 10 // 3)     # rounding to 10**-ndigits builds that power
    return budget.integer(round(number, ndigits))


def _iterated(items: Any, factor: int = 1) -> None:
    """Charge `factor` passes over `items` (through nesting for containers)."""
    if isinstance(items, str) or type(items) in _CONTAINERS:
        deep_cost(items, factor)
    else:
        current().charge(len(items) * ITEM * factor + 1)


def _extreme(pick: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, key: Any = None, **options: Any) -> Any:
        _called()
        _check_key(key)
        _iterated(args[0] if len(args) == 1 else args)
        return pick(*args, key=key, **options)
    run.__name__ = pick.__name__
    return run


def _sum(items: Any, start: Any = 0) -> Any:
    budget = _called()
    _iterated(items)
    if isinstance(start, _SEQUENCES):
        # Concatenate once instead of Python's quadratic start + a + b + ...
        kinds = set(map(type, items))
        if not kinds <= {type(start)}:
            wrong = next(iter(kinds - {type(start)}))
            raise TypeError(f'can only concatenate {type(start).__name__} '
                            f'(not "{wrong.__name__}") to {type(start).__name__}')
        # The parts' items: all of `items` through nesting, less its own brackets.
        size = _size(start) + _size(items) - 1 - len(items)
        budget.items(size)
        return type(start)(chain(start, *items))
    return budget.integer(sum(items, start))


def _truth(pick: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def run(items: Any) -> bool:
        _called().charge(len(items) * ITEM)
        return pick(items)
    run.__name__ = pick.__name__
    return run


def _copied(items: Any) -> None:
    """Charge copying `items` into a new container; a string becomes one item per
    character, which is growth and must stay within MAX_ITEMS."""
    budget = current()
    if isinstance(items, str):
        budget.items(len(items) + 1)
    else:
        budget.charge(len(items) * ITEM)


def _sorted(items: Any, key: Any = None, reverse: bool = False) -> list:
    _called()
    _check_key(key)
    _copied(items)
    count = len(items)
    _iterated(items, max(1, math.ceil(math.log2(count + 1))))
    return sorted(items, key=key, reverse=reverse)


def _list(items: Any = ()) -> list:
    _called()
    _copied(items)
    return list(items)


def _tuple(items: Any = ()) -> tuple:
    _called()
    _copied(items)
    return tuple(items)


def _set(items: Any = ()) -> set:
    _called()
    _copied(items)
    _iterated(items)                 # hashing tuples visits them
    return set(items)


def _dict(*args: Any, **fields: Any) -> dict:
    _called()
    for arg in args:
        _copied(arg)
        _iterated(arg)
    return dict(*args, **fields)


def _lower(value: Any) -> str:
    text = _str(value)
    result = text.lower()
    current().string(len(result), given=len(text))
    return result


def _upper(value: Any) -> str:
    text = _str(value)
    result = text.upper()
    current().string(len(result), given=len(text))
    return result


def _contains_function(container: Any, item: Any) -> bool:
    _called()
    return container is not None and _contains(container, item)


def _pluck(items: Any, field: Any) -> list:
    """`pluck(results, "documentName")`: each item's field (None where it has
    none), the bounded stand-in for `results.map(r => r.documentName)` and a
    list comprehension, which the evaluator does not run."""
    _called()
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"pluck() takes a list, not {type(items).__name__}")
    _copied(items)
    _iterated(items)
    key = field if isinstance(field, int) and not isinstance(field, bool) else _str(field)
    out = []
    for item in items:
        if isinstance(item, dict):
            out.append(item.get(key))
        elif isinstance(item, (list, tuple)) and isinstance(key, int) and -len(item) <= key \
                < len(item):
            out.append(item[key])
        else:
            out.append(None)
    return out


def _now() -> str:
    """The time of evaluation, ISO 8601 in UTC with milliseconds (a response's
    `timestamp`)."""
    _called()
    from datetime import datetime, timezone
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": _len,
    "str": _str,
    "int": _int,
    "float": _float,
    "bool": _bool,
    "abs": _abs,
    "min": _extreme(min),
    "max": _extreme(max),
    "round": _round,
    "sum": _sum,
    "any": _truth(any),
    "all": _truth(all),
    "sorted": _sorted,
    "lower": _lower,
    "upper": _upper,
    "contains": _contains_function,
    "list": _list,
    "tuple": _tuple,
    "set": _set,
    "dict": _dict,
    "pluck": _pluck,
    "now": _now,
}
for _name, _function in FUNCTIONS.items():
    _function._expression_function = True      # type: ignore[attr-defined]
    _function.__qualname__ = _function.__name__ = _name     # "len() takes ..." in errors

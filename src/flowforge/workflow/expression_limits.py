"""What one evaluation of an expression may cost, and the accounting of it.

Expressions run synchronously on the event loop (conditions, `until`,
`{expr: ...}` values), inside the server process that also answers every other
run and `/health`.  An expression that runs for seconds stalls them all, and
one that builds a gigabyte string can take the process down, so every
evaluation gets a `Budget` and every operation that can grow or do much work
asks it first:

- an integer has at most MAX_INT_BITS bits (checked *before* `**`, `<<` and
  `*` compute, from the operands' bit lengths);
- a new string has at most MAX_LENGTH characters and a new list, tuple, dict
  or set at most MAX_ITEMS items counted through nesting (`[[0] * 300] * 300`
  holds 90 301), checked before the value is built wherever its size can be
  computed (repetition, padding widths, `%` and f-string widths, joins,
  `replace`, `expandtabs`, `str()` of a nested value);
- work is counted in units of roughly one item handled by C code (10 to 60 ns,
  from an idle core to a busy one): an AST node costs NODE, a call of a
  function of the table CALL, an item our size walk visits in Python VISIT, an
  item compared, copied or hashed ITEM, CHARS characters one unit.  An
  evaluation may spend MAX_WORK units (10 to 60 ms);
- a wall-clock deadline (MAX_SECONDS) is checked as work accrues: a backstop
  for a cost the model under-counts, never the limit a normal expression meets.

Values read from the scope are not limited (they exist already): only what an
expression builds and the work it does are.  An operation that returns no
more than it was given (a slice, `strip`, a case change of a long text) may
return a long value; one that grows a value may not pass the limits.

Nothing here is a sandbox by itself: what may be called at all is decided by
the allow-lists in `expression_ops`.
"""

from __future__ import annotations

import contextvars
import operator
import time
from itertools import repeat
from typing import Any

import simpleeval

__all__ = ["Budget", "OverBudget", "current", "MAX_INT_BITS", "MAX_LENGTH", "MAX_ITEMS",
           "MAX_WORK", "MAX_SECONDS"]

MAX_INT_BITS = 4096          # about 1233 decimal digits
MAX_LENGTH = 100_000         # characters of a string an expression builds
MAX_ITEMS = 100_000          # items, counted through nesting, of a container it builds
MAX_WORK = 1_000_000         # work units per evaluation
MAX_SECONDS = 0.05           # wall-clock backstop per evaluation

NODE = 100                   # one AST node evaluated (Python-level dispatch, ~1 µs)
CALL = 250                   # one call of a function of the table (e.g. as a sort key)
VISIT = 10                   # one item visited in Python by the size walk
ITEM = 1                     # one item handled by C code
CHARS = 16                   # characters handled by C code per unit

_CHECK_EVERY = 20_000        # units between two looks at the clock

_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})
_FLAT = frozenset({str, int, float, bool, type(None), complex})


class OverBudget(simpleeval.InvalidExpression):
    """The expression went over one of the limits; the message says which.
    `part` is the sub-expression that did (set by the evaluator) when the
    limit belongs to one operation rather than to the whole evaluation."""

    def __init__(self, message: str, *, whole: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.part: str | None = None
        self.located = whole      # a whole-evaluation limit names no part


_BUDGET: contextvars.ContextVar[Budget] = contextvars.ContextVar("expression_budget")


def current() -> Budget:
    """The budget of the evaluation under way (the table's functions are also
    called by C code, e.g. as a `sorted` key, so they find it here)."""
    budget = _BUDGET.get(None)
    # A function of the table called outside an evaluation gets a budget of its own.
    return Budget() if budget is None else budget


def _n(number: int) -> str:
    return f"{number:,}".replace(",", " ")


_INTEGERS = (f"integers in expressions have at most {MAX_INT_BITS} bits (about "
             f"{MAX_INT_BITS * 30103 // 100_000} digits)")


class Budget:
    """The accounting of one evaluation: work spent, the deadline, and the
    sizes already measured (by id, with the values kept alive so an id is
    never reused while its size is remembered)."""

    __slots__ = ("work", "_next_check", "_deadline", "_items", "_text", "_keep", "_token")

    def __init__(self) -> None:
        self.work = 0
        self._next_check = _CHECK_EVERY
        self._deadline = time.perf_counter() + MAX_SECONDS
        self._items: dict[int, int] = {}
        self._text: dict[int, int] = {}
        self._keep: list[Any] = []
        self._token: contextvars.Token | None = None

    # -- entering and leaving an evaluation --------------------------------------------

    def __enter__(self) -> Budget:
        self._token = _BUDGET.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _BUDGET.reset(self._token)
            self._token = None
        self._keep.clear()

    # -- work --------------------------------------------------------------------------

    def charge(self, units: int) -> None:
        self.work += units
        if self.work > self._next_check:
            self._look()

    def _look(self) -> None:
        if self.work > MAX_WORK:
            raise OverBudget(f"it needs more work than an expression may do ({_n(MAX_WORK)} "
                             f"units, each about one item handled); let it go through less "
                             f"data", whole=True)
        if time.perf_counter() > self._deadline:
            raise OverBudget(f"it ran longer than {MAX_SECONDS * 1000:g} ms, the limit of an "
                             f"expression", whole=True)
        self._next_check = min(self.work + _CHECK_EVERY, MAX_WORK)

    def chars(self, count: int) -> None:
        """Charge C-level work over `count` characters."""
        self.charge(count // CHARS + 1)

    # -- limits on what is built -------------------------------------------------------

    def integer(self, value: Any) -> Any:
        """`value`, refused when it is an integer over MAX_INT_BITS bits."""
        if type(value) is int and value.bit_length() > MAX_INT_BITS:
            raise OverBudget(f"the result would have {_n(value.bit_length())} bits; {_INTEGERS}")
        return value

    def bits(self, estimate: int) -> None:
        """Refuse before computing an integer of about `estimate` bits."""
        if estimate > MAX_INT_BITS:
            raise OverBudget(f"the result would have about {_n(estimate)} bits; {_INTEGERS}")

    def string(self, length: int, given: int = 0) -> None:
        """Before building a string of `length` characters from inputs of which the
        longest has `given`: refused past MAX_LENGTH unless it does not grow."""
        if length > MAX_LENGTH and length > given:
            raise OverBudget(f"the result would be a text of {_n(length)} characters; texts "
                             f"built by expressions have at most {_n(MAX_LENGTH)}")
        self.chars(length)

    def items(self, count: int, given: int = 0) -> None:
        """Before building a container of `count` items (counted through nesting)
        from inputs of which the largest has `given`."""
        if count > MAX_ITEMS and count > given:
            raise OverBudget(f"the result would hold {_n(count)} items (counted through "
                             f"nesting); lists, tuples, dicts and sets built by expressions "
                             f"hold at most {_n(MAX_ITEMS)}")
        self.charge(count * ITEM)

    # -- measuring values ---------------------------------------------------------------

    def size(self, value: Any, limit: int = MAX_ITEMS) -> int:
        """Items in `value` counted through nesting (an object counts 1, a container
        1 plus its items; a dict's keys count too), or `limit + 1` once it is known
        to be larger.  Remembered for the rest of the evaluation; the walk itself
        is charged, and a value shared many times is walked once."""
        if type(value) not in _CONTAINERS:
            return 1
        known = self._items.get(id(value))
        if known is not None:
            return known
        if len(value) >= limit:
            return limit + 1
        members = list(value.keys()) + list(value.values()) if type(value) is dict else value
        count = len(members)
        self.charge(count * ITEM)
        if set(map(type, members)) <= _FLAT:
            total = 1 + count
        else:
            total = 1
            for member, times in self._distinct(members):
                total += times * self.size(member, (limit - total) // times)
                if total > limit:
                    return limit + 1
        if total > limit:
            return limit + 1
        self._items[id(value)] = total
        self._keep.append(value)
        return total

    def _distinct(self, members: Any) -> list[tuple[Any, int]]:
        """The members to visit in Python, each with how many times it counts: a
        list of one object repeated (`[[1]] * 40000`) is visited once, found at C
        speed; any other list is visited member by member (charged VISIT each)."""
        count = len(members)
        first = members[0]
        self.charge(count * ITEM)
        if all(map(operator.is_, members, repeat(first))):
            return [(first, count)]
        self.charge(count * VISIT)
        return [(member, 1) for member in members]

    def remember(self, value: Any, size: int) -> Any:
        """Record the size of a value just built from parts already measured."""
        if type(value) in _CONTAINERS:
            self._items[id(value)] = size
            self._keep.append(value)
        return value

    def text(self, value: Any, limit: int = MAX_LENGTH) -> int:
        """An estimate of `len(str(value))` (escapes aside), or `limit + 1` once it
        is known to be larger; measured like `size`."""
        kind = type(value)
        if kind not in _CONTAINERS:
            return _scalar_text(value)
        known = self._text.get(id(value))
        if known is not None:
            return known
        if 2 * len(value) >= limit:
            return limit + 1
        members = list(value.keys()) + list(value.values()) if kind is dict else value
        count = len(members)
        self.charge(count * ITEM)
        kinds = set(map(type, members))
        total = 2 + 2 * count        # brackets, and ', ' or ': ' after each member
        if kinds <= {str}:
            total += sum(map(len, members))
        elif kinds <= {int, bool}:
            total += sum(map(int.bit_length, members)) * 30103 // 100_000 + 2 * count
        elif kinds <= {float}:
            total += 25 * count
        else:
            for member, times in self._distinct(members):
                total += times * self.text(member, (limit - total) // times)
                if total > limit:
                    return limit + 1
        if total > limit:
            return limit + 1
        self._text[id(value)] = total
        self._keep.append(value)
        return total


def _scalar_text(value: Any) -> int:
    kind = type(value)
    if kind is str:
        return len(value) + 2
    if kind is int:
        return value.bit_length() * 30103 // 100_000 + 2
    if kind is float:
        return 25
    if kind is complex:
        return 52
    if kind is bool or value is None:
        return 5
    return 100          # an object a registered function returned; checked after str()

"""n8n's If, Filter and Switch conditions as flowforge expressions.

n8n writes a condition as `{leftValue, operator: {type, operation},
rightValue}` (If v2, Filter v2, Switch v3) or, in the first versions,
`{value1, operation, value2}` grouped by data type.  Both become one
expression (`grade.accuracy >= 8 and contains(x.tags, "vip")`); an operator
flowforge's expression language has no counterpart for (regular
expressions, dates) makes the whole condition unconvertible, said so, never
approximated.
"""

from __future__ import annotations

from typing import Any

from flowforge.formats.n8n_expressions import Resolve, as_operand

__all__ = ["conditions_expression", "ConditionError"]


class ConditionError(ValueError):
    """A condition that has no flowforge expression; the message says which part."""


#: operation -> expression over `a` (left) and `b` (right)
_BINARY = {
    "equals": "{a} == {b}", "equal": "{a} == {b}", "notEquals": "{a} != {b}",
    "notEqual": "{a} != {b}", "gt": "{a} > {b}", "larger": "{a} > {b}", "lt": "{a} < {b}",
    "smaller": "{a} < {b}", "gte": "{a} >= {b}", "largerEqual": "{a} >= {b}",
    "lte": "{a} <= {b}", "smallerEqual": "{a} <= {b}",
    "contains": "contains({a}, {b})", "notContains": "not contains({a}, {b})",
    "startsWith": "str({a}).startswith({b})", "notStartsWith": "not str({a}).startswith({b})",
    "endsWith": "str({a}).endswith({b})", "notEndsWith": "not str({a}).endswith({b})",
    "lengthEquals": "len({a}) == {b}", "lengthNotEquals": "len({a}) != {b}",
    "lengthGt": "len({a}) > {b}", "lengthLt": "len({a}) < {b}",
    "lengthGte": "len({a}) >= {b}", "lengthLte": "len({a}) <= {b}",
}
_UNARY = {
    "exists": "{a} != none", "notExists": "{a} == none", "empty": "not {a}",
    "isEmpty": "not {a}", "notEmpty": "bool({a})", "isNotEmpty": "bool({a})",
    "true": "{a} == true", "false": "{a} == false",
}


def _one(left: Any, operation: str, right: Any, kind: str, resolve: Resolve) -> str:
    a = as_operand(left, resolve, kind)
    if a is None:
        raise ConditionError(f"the value {left!r} is not a field reference or a literal")
    if operation in _UNARY:
        return _UNARY[operation].format(a=a)
    if operation not in _BINARY:
        raise ConditionError(f"the operation '{operation}' has no flowforge expression")
    numeric = operation.startswith(("equal", "notEqual", "gt", "lt", "larger", "smaller"))
    right_kind = "number" if operation.startswith("length") else kind if numeric else "string"
    b = as_operand(right, resolve, right_kind)
    if b is None:
        raise ConditionError(f"the value {right!r} is not a field reference or a literal")
    return _BINARY[operation].format(a=a, b=b)


def _join(parts: list[str], combinator: str) -> str:
    if not parts:
        raise ConditionError("it has no conditions")
    if len(parts) == 1:
        return parts[0]
    word = " or " if combinator in ("or", "any") else " and "
    return word.join(f"({part})" for part in parts)


def conditions_expression(conditions: Any, resolve: Resolve,
                          combine: str | None = None) -> str:
    """One expression for an If/Filter/Switch rule's `conditions`."""
    if not isinstance(conditions, dict):
        raise ConditionError("its conditions are not a mapping")
    if isinstance(conditions.get("conditions"), list):            # v2 filter shape
        parts = []
        for item in conditions["conditions"]:
            operator = item.get("operator") or {}
            kind = operator.get("type", "string")
            parts.append(_one(item.get("leftValue"), operator.get("operation", "equals"),
                              item.get("rightValue"), kind, resolve))
        return _join(parts, conditions.get("combinator", "and"))
    parts = []                                                    # v1: grouped by type
    for kind in ("string", "number", "boolean", "dateTime"):
        for item in conditions.get(kind) or []:
            if kind == "dateTime":
                raise ConditionError("date comparisons have no flowforge expression")
            parts.append(_one(item.get("value1"), item.get("operation", "equal"),
                              item.get("value2"), kind, resolve))
    return _join(parts, combine or "and")

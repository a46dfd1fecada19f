"""Formatting inside expressions (`%`, f-strings), refused before the text is
built when its width, precision or length would pass the evaluation's limits.

Apart from the operators because it is its own small parser: CPython's
printf-style specs are read here (a mapping key's parentheses nest) so that
`"%999999999d" % 1` is refused by arithmetic, never by memory.
"""

from __future__ import annotations

import re
from typing import Any

import simpleeval

from flowforge.workflow.expression_limits import MAX_LENGTH, NODE, current

__all__ = ["percent", "format_value"]

_NUMBER_RE = re.compile(r"\d+")


def _spec_numbers(spec: str) -> int:
    """The sum of the widths and precisions written in a format spec (any run of
    digits counts: conservative, and specs are short)."""
    total = 0
    for run in _NUMBER_RE.findall(spec):
        if len(run) > 9:
            return MAX_LENGTH * 10
        total += int(run)
    return total


def _percent_specs(fmt: str) -> list[tuple[str | None, str]]:
    """(mapping key, width-and-precision text) of each conversion of a printf-style
    format, parsed as CPython does (a key's parentheses nest)."""
    specs: list[tuple[str | None, str]] = []
    index, end = 0, len(fmt)
    while (index := fmt.find("%", index)) >= 0:
        index += 1
        key = None
        if index < end and fmt[index] == "(":
            depth, start = 1, index + 1
            index += 1
            while index < end and depth:
                depth += {"(": 1, ")": -1}.get(fmt[index], 0)
                index += 1
            key = fmt[start:index - 1]
        start = index
        while index < end and fmt[index] in "#0- +*.0123456789hlL":
            index += 1
        if not (key is None and index == start and fmt[index:index + 1] == "%"):
            specs.append((key, fmt[start:index]))        # `%%` is a literal percent
        index += 1          # the conversion character
    return specs


def percent(fmt: str, args: Any) -> str:
    budget = current()
    budget.charge(fmt.count("%") * NODE)      # the specs are parsed in Python
    specs = _percent_specs(fmt)
    if any("*" in spec for _, spec in specs):
        raise simpleeval.FeatureNotAvailable(
            "a `*` width or precision in a `%` format is not available in expressions; "
            "write the number in the format")
    estimate = len(fmt) + sum(_spec_numbers(spec) for _, spec in specs)
    if isinstance(args, dict) and all(key is not None for key, spec in specs):
        estimate += sum(budget.text(args.get(key)) for key, _ in specs)
    else:
        estimate += budget.text(args)
    budget.string(estimate)
    result = fmt % args
    budget.string(len(result))
    return result


def format_value(value: Any, conversion: int, spec: str) -> str:
    """One `{value!conversion:spec}` of an f-string, refused before it is built
    when its width, precision or text would pass the limits."""
    budget = current()
    if conversion == -1 and not spec and isinstance(value, str):
        return value
    budget.string(budget.text(value) + _spec_numbers(spec))
    if conversion == ord("r"):
        value = repr(value)
    elif conversion == ord("a"):
        value = ascii(value)
    elif conversion == ord("s"):
        value = str(value)
    result = format(value, spec)
    budget.string(len(result))
    return result

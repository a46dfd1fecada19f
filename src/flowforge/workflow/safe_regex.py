"""Regular expressions written by users run on RE2, a linear-time engine.

Python's `re` backtracks: `^(a+)+$` against 29 a's and a `!` took a server 18 s,
doubling with each character, and that pattern can come from anyone who saves
a workflow (an input's JSON-schema `pattern`, a registry block's schema, a
tool's parameters, an agent's `tool_validation.patterns`).  RE2 matches in time
linear in the text, whatever the pattern, at the price of backreferences and
lookaround; a pattern that uses them is refused with its place and the reason,
when the document is checked, not when the first run trips on it.

JSON Schema validation goes through `validator_for(schema)`: jsonschema's own
validator class for the schema's draft, with `pattern`, `patternProperties`
and `additionalProperties` (which reads `patternProperties`) matched by RE2.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterator

from flowforge.errors import Problem

__all__ = ["RegexError", "compile_pattern", "search", "validator_for", "pattern_problems"]


class RegexError(ValueError):
    """A pattern RE2 cannot compile; the message says why and what to do."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str, ignore_case: bool = False) -> Any:
    """The RE2 program for `pattern` (cached); RegexError when RE2 refuses it."""
    try:
        import re2
    except ImportError:                      # pragma: no cover - a core dependency
        raise ImportError("user-supplied patterns need google-re2: "
                          "pip install google-re2") from None
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RegexError(f"the pattern {pattern[:80]!r} cannot be used: {reason}; patterns run "
                         f"on a linear-time engine (RE2), which has no backreferences "
                         f"(\\1) and no lookaround ((?=...), (?<=...), (?!...)): rewrite "
                         f"it without them") from None


def search(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """Whether `pattern` occurs in `text` (RE2; RegexError for a refused pattern)."""
    return compile_pattern(pattern, ignore_case).search(text) is not None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and isinstance(pattern, str) \
            and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any
                        ) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any
                           ) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in properties
              and not any(search(pattern, key) for pattern in patterns)]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        names = ", ".join(repr(each) for each in sorted(extras, key=str))
        if patterns:
            yield ValidationError(f"{names} {'does' if len(extras) == 1 else 'do'} not match "
                                  f"any of the regexes: "
                                  f"{', '.join(repr(p) for p in sorted(patterns))}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({names} "
                                  f"{'was' if len(extras) == 1 else 'were'} unexpected)")


@lru_cache(maxsize=None)
def _safe(cls: type) -> type:
    from jsonschema import validators

    return validators.extend(cls, {"pattern": _pattern,
                                   "patternProperties": _pattern_properties,
                                   "additionalProperties": _additional_properties})


def validator_for(schema: Any, default: Any = None) -> type:
    """jsonschema's validator class for `schema` (its `$schema`, else 2020-12),
    with every pattern matched by RE2."""
    from jsonschema import Draft202012Validator, validators

    return _safe(validators.validator_for(schema, default or Draft202012Validator))


def pattern_problems(schema: Any, where: str) -> list[Problem]:
    """Every `pattern` and `patternProperties` key inside `schema` that RE2
    refuses, located (`inputs.code.pattern`)."""
    problems: list[Problem] = []

    def walk(node: Any, at: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    _check(value, f"{at}.pattern")
                elif key == "patternProperties" and isinstance(value, dict):
                    for pattern, sub in value.items():
                        _check(pattern, f"{at}.patternProperties")
                        walk(sub, f"{at}.patternProperties.{pattern}")
                    continue
                if key in ("enum", "const", "default", "examples"):
                    continue                  # values, not schemas
                walk(value, f"{at}.{key}")
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{at}[{index}]")

    def _check(pattern: str, at: str) -> None:
        try:
            compile_pattern(pattern)
        except RegexError as exc:
            problems.append(Problem(at, str(exc)))

    walk(schema, where)
    return problems

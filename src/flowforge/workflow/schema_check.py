"""Checking a value against a JSON Schema, with every problem located.

Shared by structured LLM outputs, registry blocks and tool arguments, so
they all report schema problems the same way (`items.0.price: 'x' is not of
type 'number'`)."""

from __future__ import annotations

from typing import Any

from flowforge.workflow.safe_regex import validator_for

__all__ = ["schema_problems"]


def schema_problems(schema: dict[str, Any] | None, value: Any) -> list[str]:
    """Every way `value` breaks `schema`, located (empty when it fits)."""
    if not schema:
        return []
    validator = validator_for(schema)(schema)      # patterns on RE2: linear time
    problems = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.path)):
        where = ".".join(str(part) for part in error.path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems

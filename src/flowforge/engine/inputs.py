"""Checking run inputs against the workflow's `inputs` (JSON Schema
properties). An input without `default` is required; defaults are filled in.
Every problem is reported at once, each naming the input."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

from flowforge.errors import InputError

__all__ = ["validate_inputs", "inputs_schema"]


def inputs_schema(declared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    required = [name for name, schema in declared.items()
                if "default" not in schema and not schema.get("optional", False)]
    properties = {name: {k: v for k, v in schema.items() if k != "optional"}
                  for name, schema in declared.items()}
    return {"type": "object", "properties": properties, "required": required}


#: id(declared) -> (declared, validator); holding `declared` keeps its id from being reused.
_VALIDATORS: OrderedDict[int, tuple[dict, Any]] = OrderedDict()
_VALIDATORS_KEPT = 256


def _validator_for(declared: dict[str, dict[str, Any]]) -> Any:
    """Building a JSON-Schema validator costs more than the rest of a run's
    set-up; a workflow's `inputs` never change once compiled, so each is
    built once (a few hundred are kept, least recently used dropped)."""
    key = id(declared)
    cached = _VALIDATORS.get(key)
    if cached is not None and cached[0] is declared:
        _VALIDATORS.move_to_end(key)
        return cached[1]
    from flowforge.workflow.safe_regex import validator_for   # (jsonschema: not at the top)

    schema = inputs_schema(declared)
    validator = validator_for({}, None)(schema)     # 2020-12, patterns on RE2: linear time
    _VALIDATORS[key] = (declared, validator)
    if len(_VALIDATORS) > _VALIDATORS_KEPT:
        _VALIDATORS.popitem(last=False)
    return validator


def validate_inputs(declared: dict[str, dict[str, Any]], given: dict[str, Any] | None
                    ) -> dict[str, Any]:
    """Return the inputs with defaults applied, or raise InputError."""
    given = dict(given or {})
    if not declared:
        return given
    values = {name: copy.deepcopy(schema["default"]) for name, schema in declared.items()
              if "default" in schema and name not in given}
    values.update(given)
    problems = []
    try:
        validator = _validator_for(declared)
        errors = sorted(validator.iter_errors(values), key=lambda e: list(e.path))
    except Exception as exc:  # noqa: BLE001 - a schema validation did not catch: never a traceback
        raise InputError([f"the workflow's `inputs:` cannot check these values ({exc}); "
                          f"`flowforge validate` shows what to fix"]) from None
    for error in errors:
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else error.message
            problems.append(f"input '{missing}' is required (declared in `inputs:`); "
                            f"pass it with --input {missing}=...")
        else:
            where = ".".join(str(p) for p in error.path) or "inputs"
            problems.append(f"input '{where}': {error.message}")
    unknown = sorted(set(given) - set(declared))
    for name in unknown:
        problems.append(f"input '{name}' is not declared in `inputs:` "
                        f"(declared: {', '.join(declared)})")
    if problems:
        raise InputError(problems)
    return values

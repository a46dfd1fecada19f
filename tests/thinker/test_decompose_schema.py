"""The decompose stage's answer schema (the grammar a local model writes under)
admits only plans whose block schemas are JSON Schemas: issue 47's 0.5B model
wrote `"properties": {"celsius": "number"}` under the looser one, and the plan
failed twice at `output_schema: 'string' is not of type 'object'`."""

from __future__ import annotations

import copy

from flowforge.providers.local import _grammar
from flowforge.registry import schema_problems
from flowforge.apps.thinker.decompose import SCHEMA

PLAN = {"blocks": [{
    "suggested_id": "to_fahrenheit", "description": "Convert Celsius to Fahrenheit",
    "execution_type": "python", "category": "process", "use_when": "temperatures",
    "input_schema": {"type": "object", "properties": {"celsius": {"type": "number"}},
                     "required": ["celsius"]},
    "output_schema": {"type": "object", "properties": {
        "fahrenheit": {"type": "number", "description": "degrees F"},
        "steps": {"type": "array", "items": {"type": "string"}}}}}]}


def test_a_plan_with_typed_properties_fits():
    assert schema_problems(SCHEMA, PLAN) == []


def test_a_property_written_as_a_bare_type_name_is_refused_by_the_schema():
    plan = copy.deepcopy(PLAN)
    plan["blocks"][0]["output_schema"]["properties"]["fahrenheit"] = "number"
    problems = schema_problems(SCHEMA, plan)
    assert problems and "fahrenheit" in " ".join(map(str, problems))
    plan = copy.deepcopy(PLAN)
    plan["blocks"][0]["input_schema"]["properties"]["celsius"] = {"type": "celsius"}
    assert schema_problems(SCHEMA, plan)


def test_the_schema_compiles_to_a_local_grammar():
    assert _grammar(SCHEMA) is not None

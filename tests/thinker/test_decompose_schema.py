"""The decompose stage's answer schema (the grammar a local model writes under)
admits only plans whose block schemas are JSON Schemas: issue 47's 0.5B model
wrote `"properties": {"celsius": "number"}` under the looser one, and the plan
failed twice at `output_schema: 'string' is not of type 'object'`."""

from __future__ import annotations

import copy

from flowforge.providers._local_prompt import compiled_grammar as _grammar
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


def test_a_block_without_suggested_id_is_refused_and_the_grammar_always_writes_it():
    """Issue 47: the 0.5B model's plan failed twice at `blocks[0].suggested_id: missing`:
    the grammar let the id out.  Now the schema requires it, so the grammar's rule for a
    block writes it outside the optional part."""
    from flowforge.providers._local_prompt import grammar_text

    plan = copy.deepcopy(PLAN)
    del plan["blocks"][0]["suggested_id"]
    assert any("suggested_id" in str(p) for p in schema_problems(SCHEMA, plan))
    rule = next(line for line in grammar_text(SCHEMA).splitlines()
                if line.startswith("blocks-item ::="))
    assert "blocks-item-suggested-id-kv" in rule.split("(")[0]


async def test_a_planner_that_writes_name_for_suggested_id_is_still_understood():
    from flowforge.apps.thinker.decompose import decompose
    from flowforge.apps.thinker.events import BuildEvents

    plan = copy.deepcopy(PLAN)
    plan["blocks"][0]["name"] = plan["blocks"][0].pop("suggested_id")

    class Planner:
        local = False

        async def ask(self, stage, system, user, schema, *, check=None, repairs=1,
                      prepare=None):
            value = prepare(copy.deepcopy(plan))
            assert schema_problems(schema, value) == [] and check(value) == []
            return value

    class Registry:
        async def search(self, intent, limit=8):
            return []

    blocks = await decompose("Convert Celsius to Fahrenheit", Planner(), BuildEvents(),
                             Registry())
    assert [b.suggested_id for b in blocks] == ["to_fahrenheit"]

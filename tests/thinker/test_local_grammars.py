"""What a local model may write at each build stage (issue 47): the grammar it
decodes under admits only answers the stage accepts.  With the 0.5B model the
plan failed at `blocks[0].suggested_id: missing` and at `output_schema:
'string' is not of type 'object'`; the block it then had to write was `def
convert_temperature(old): ...` four times over (no `execute`), and the
wiring could name inputs a block does not have.

A grammar is compiled from a JSON Schema, so these tests read that schema
(`grammar_schema`, what `grammar_text` converts) and the GBNF made of it; a
string `pattern` in a grammar is matched against the string's JSON text."""

from __future__ import annotations

import copy
import json
import re

import pytest

from flowforge.apps.thinker import create, decompose, wire
from flowforge.apps.thinker.decompose import RequiredBlock
from flowforge.apps.thinker.events import BuildEvents
from flowforge.apps.thinker.llm import ThinkerLLM
from flowforge.providers.base import LLMResponse, grammar_schema
from flowforge.providers._local_prompt import grammar_text
from flowforge.registry import definition_from_data, schema_problems

PLAN = {"blocks": [{
    "suggested_id": "to_fahrenheit", "description": "Convert Celsius to Fahrenheit",
    "execution_type": "python",
    "input_schema": {"type": "object", "properties": {"celsius": {"type": "number"}}},
    "output_schema": {"type": "object", "properties": {"fahrenheit": {"type": "number"}}}}]}


def _rule(gbnf: str, name: str) -> str:
    return next(line for line in gbnf.splitlines() if line.startswith(f"{name} ::="))


def test_the_plan_grammar_refuses_a_missing_id_and_a_bare_string_schema():
    shaped = grammar_schema(decompose.SCHEMA)
    assert schema_problems(shaped, PLAN) == []
    missing = copy.deepcopy(PLAN)
    del missing["blocks"][0]["suggested_id"]
    assert any("suggested_id" in p for p in schema_problems(shaped, missing))
    bare = copy.deepcopy(PLAN)
    bare["blocks"][0]["output_schema"] = "string"
    assert any("output_schema" in p for p in schema_problems(shaped, bare))
    gbnf = grammar_text(decompose.SCHEMA)
    # the id is among the block's required keys, and a schema is an object with its type
    assert "blocks-item-suggested-id-kv" in _rule(gbnf, "blocks-item").split("(")[0]
    assert _rule(gbnf, "blocks-item-output-schema").split("::= ")[1].startswith('"{"')


NEED = RequiredBlock("to_fahrenheit", "Convert Celsius to Fahrenheit", "python",
                     {"type": "object", "properties": {"celsius": {"type": "number"}}},
                     {"type": "object", "properties": {"fahrenheit": {"type": "number"}}})


def _fits_source(source: str) -> bool:
    pattern = create.grammar_for(NEED)["properties"]["source_code"]["pattern"]
    return re.match(pattern, json.dumps(source)[1:-1]) is not None


def test_the_block_grammar_writes_execute_and_imports_only_allowed_modules():
    good = "import math\nasync def execute(inputs, context):\n    return {\"f\": 1}"
    assert _fits_source(good)
    assert not _fits_source("def convert_temperature(old): return {'change': old}")
    assert not _fits_source("import os\nasync def execute(inputs, context):\n    return {}")
    # a raw newline or quote inside the string would be JSON the answer cannot parse
    assert not re.match(create.grammar_for(NEED)["properties"]["source_code"]["pattern"],
                        'async def execute(inputs, context):\\n    "')
    gbnf = grammar_text(create.grammar_for(NEED))
    assert '"async def execute(inputs, context):\\\\n' in _rule(gbnf, "source-code")
    assert "use-when" not in gbnf            # nothing the stage does not need


def test_a_block_example_gives_every_declared_field_and_a_template_reads_an_input():
    shaped = grammar_schema(create.grammar_for(NEED))
    example = {"inputs": {"celsius": 0}, "outputs": {"fahrenheit": 32}}
    answer = {"source_code": "x", "examples": [example]}
    assert schema_problems({**shaped, "properties": {"examples": shaped["properties"][
        "examples"]}}, answer) == []
    answer["examples"] = [{"inputs": {"celsius": 0}, "outputs": {"change": 32}}]
    assert schema_problems({"properties": {"examples": shaped["properties"]["examples"]}},
                           answer)
    llm_need = copy.deepcopy(NEED)
    llm_need.execution_type = "llm"
    pattern = create.grammar_for(llm_need)["properties"]["prompt_template"]["pattern"]
    assert re.match(pattern, "Convert {celsius} degrees")
    assert not re.match(pattern, "Convert the temperature")
    # `{label}` failed the template check at every attempt: braces only around an input
    assert not re.match(pattern, "Convert {celsius} degrees to {label}")


def _block(block_id: str, inputs: dict, outputs: dict):
    return definition_from_data({
        "id": block_id, "name": block_id, "description": block_id, "execution_type": "python",
        "input_schema": {"type": "object", "properties": inputs, "required": list(inputs)},
        "output_schema": {"type": "object", "properties": outputs},
        "source_code": "async def execute(inputs, context):\n    return {}"}, block_id)


BLOCKS = [_block("count_words", {"text": {"type": "string"}},
                 {"word_count": {"type": "integer"}, "text": {"type": "string"}}),
          _block("summarise", {"text": {"type": "string"}, "words": {"type": "integer"}},
                 {"summary": {"type": "string"}})]
WIRED = {"id": "count-and-summarise", "name": "Count and summarise", "edges": [], "nodes": [
    {"id": "n1", "block_id": "count_words", "inputs": {"text": "{{input.text}}"}},
    {"id": "n2", "block_id": "summarise",
     "inputs": {"text": "{{n1.text}}", "words": "{{n1.word_count}}"}}]}


@pytest.mark.parametrize("change, why", [
    (lambda w: w["nodes"][1]["inputs"].pop("words"), "a required input left out"),
    (lambda w: w["nodes"][0].update(block_id="word_counter"), "a block it was not given"),
    (lambda w: w["nodes"][1]["inputs"].update(text="{{n1.summary}}"), "an output n1 lacks"),
    (lambda w: w["nodes"][1]["inputs"].update(words="{{n1.text}}"), "text for an integer"),
    (lambda w: w["nodes"][0]["inputs"].update(text="{{n2.summary}}"), "a later node's output"),
    (lambda w: w["nodes"][0]["inputs"].update(text="some words"), "a bare string"),
    (lambda w: w["edges"].append({"from": "n2", "to": "n1"}), "an edge of its own"),
])
def test_the_wiring_grammar_refuses(change, why):
    shaped = grammar_schema(wire.grammar_for(BLOCKS))
    assert schema_problems(shaped, WIRED) == []
    wired = copy.deepcopy(WIRED)
    change(wired)
    assert schema_problems(shaped, wired), why


def test_the_wiring_grammar_leaves_an_optional_input_to_its_default():
    """`top` (optional) was wired to `{{input.top}}`, a run input every user then had
    to pass."""
    counter = _block("text_word_count",
                     {"text": {"type": "string"}, "top": {"type": "integer"}},
                     {"words": {"type": "integer"}})
    counter.input_schema["required"] = ["text"]
    nodes = wire.grammar_for([counter])["properties"]["nodes"]
    inputs = nodes["prefixItems"][0]["properties"]["inputs"]
    assert list(inputs["properties"]) == ["text"] and inputs["required"] == ["text"]


def test_the_wiring_grammar_compiles_and_edges_come_from_the_references():
    gbnf = grammar_text(wire.grammar_for(BLOCKS))
    assert '"\\"{{n1.word_count}}\\""' in gbnf and "\\." not in gbnf
    assert wire.reference_edges(WIRED["nodes"]) == [{"from": "n1", "to": "n2"}]


@pytest.mark.parametrize("model, local", [("local/qwen2.5-0.5b", True),
                                          ("local/smollm2", True),
                                          ("openai/gpt-4o", False),
                                          ("scripted/rules.yaml", False)])
async def test_only_a_local_model_is_sent_the_grammar(monkeypatch, model, local):
    """Hosted providers get the stage's schema as before."""
    sent = []

    async def fake_call_model(name, request, **_):
        sent.append(request.response_format)
        return LLMResponse(text=json.dumps({"ok": True}))

    monkeypatch.setattr("flowforge.apps.thinker.llm.call_model", fake_call_model)
    llm = ThinkerLLM(model, BuildEvents())
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    grammar = {"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"]}
    assert await llm.ask("wire", "system", "user", schema, grammar=grammar) == {"ok": True}
    assert sent == [grammar if local else schema]


@pytest.mark.parametrize("local", [True, False])
async def test_a_local_planner_is_shown_only_blocks_near_the_task(local):
    """The 0.5B model planned `old -> change, percent, direction` for a temperature
    conversion: it copied math_percent_change, listed with a search score of 0.18."""
    from types import SimpleNamespace

    def hit(block_id, score):
        definition = SimpleNamespace(id=block_id, execution_type="python", description="d",
                                     input_schema={}, output_schema={})
        return SimpleNamespace(definition=definition, score=score)

    class Registry:
        async def search(self, intent, limit=8):
            return [hit("math_percent_change", 0.18), hit("date_shift", 0.1)]

    prompts = []

    class Planner:
        async def ask(self, stage, system, user, schema, **_):
            prompts.append(user)
            return copy.deepcopy(PLAN)

    planner = Planner()
    planner.local = local
    await decompose.decompose("Convert Celsius to Fahrenheit", planner, BuildEvents(),
                              Registry())
    assert ("math_percent_change" in prompts[0]) is not local
    assert ("(none)" in prompts[0]) is local
    assert ("one block for each action" in prompts[0]) is local


def test_a_local_model_retries_a_block_at_a_wider_temperature():
    """At 0 it wrote the same failing block at each of its four attempts."""
    local, hosted = ThinkerLLM("local/qwen2.5-0.5b", BuildEvents()), \
        ThinkerLLM("openai/gpt-4o", BuildEvents())
    assert local.retry_temperature(1) is None
    assert 0 < local.retry_temperature(2) < local.retry_temperature(3) <= 1.0
    assert [hosted.retry_temperature(n) for n in (1, 2, 3, 4)] == [None] * 4


def test_a_block_imports_at_most_three_modules():
    """The 0.5B model imported all 24 allowed modules, copied from the system prompt."""
    body = "async def execute(inputs, context):\n    return {}"
    assert _fits_source("import math\nimport re\nimport json\n" + body)
    assert not _fits_source("import math\nimport re\nimport json\nimport time\n" + body)


"""The `llm` prompt-template block and the `parser` block."""

from __future__ import annotations

import pytest

from flowforge.blocks.llm import placeholders, render_prompt
from flowforge.errors import ValidationFailed

from .helpers import requests, run_blocks, scripted, statuses


def test_render_prompt_fills_placeholders_and_leaves_other_braces():
    template = 'Hi {name}, order {order.id} ({items.0}). Reply as {"ok": true}.'
    assert placeholders(template) == ["name", "order.id", "items.0"]
    assert render_prompt(template, {"name": "Ada", "order": {"id": 7}, "items": ["hat"]}) == \
        'Hi Ada, order 7 (hat). Reply as {"ok": true}.'
    with pytest.raises(KeyError):
        render_prompt("{missing}", {})


async def test_llm_block_structured_output():
    schema = {"type": "object", "properties": {"summary": {"type": "string"},
                                               "words": {"type": "integer"}},
              "required": ["summary", "words"]}
    with scripted(lambda m, t: '{"summary": "refund ok", "words": 2}') as model:
        result = await run_blocks([{"id": "sum", "type": "llm", "with": {
            "prompt": "Summarize for a {audience}: {text}", "system": "You write for {audience}s.",
            "inputs": {"audience": "customer", "text": "{{input.text}}"},
            "output_schema": schema, "model": model}}], {"text": "Refunds are fine."},
            declare={"text": {"type": "string"}})
    output = result.results["sum"]
    assert output["summary"] == "refund ok" and output["words"] == 2
    assert output["model"] == model and output["tokens"]["total"] > 0
    sent = requests(result, "sum")[0]
    assert [m["content"] for m in sent["messages"]] == [
        "You write for customers.", "Summarize for a customer: Refunds are fine."]
    assert sent["response_format"] == schema


async def test_llm_block_plain_text_and_missing_placeholder():
    with scripted(lambda m, t: "Hello!") as model:
        ok = await run_blocks([{"id": "p", "type": "llm",
                                "with": {"prompt": "Greet {who}", "inputs": {"who": "Bo"},
                                         "model": model}}])
        with pytest.raises(ValidationFailed) as caught:     # refused before it runs
            await run_blocks([{"id": "p", "type": "llm",
                               "with": {"prompt": "Greet {who}", "model": model}}])
    assert ok.results["p"]["content"] == "Hello!"
    assert [str(p) for p in caught.value.problems] == [
        "blocks[0].with.prompt: the placeholder {who} has no value: add `who` to `inputs` "
        "(given: none)"]


SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}},
          "required": ["order_id"]}


@pytest.mark.parametrize("text", [
    '{"order_id": "A7"}',
    'Here you go:\n```json\n{"order_id": "A7"}\n```\nAnything else?',
    'The parsed value is {"order_id": "A7"} as requested.',
])
async def test_parser_extracts_json(text):
    result = await run_blocks([{"id": "p", "type": "parser",
                                "with": {"text": text, "schema": SCHEMA}}])
    assert result.results["p"] == {"order_id": "A7", "data": {"order_id": "A7"}}


@pytest.mark.parametrize("text, error", [
    ("no json here", "no JSON value found in the text"),
    ('{"order": 1}', "the value does not match the schema: 'order_id' is a required property"),
])
async def test_parser_failures_and_default(text, error):
    failed = await run_blocks([{"id": "p", "type": "parser",
                                "with": {"text": text, "schema": SCHEMA}}])
    assert statuses(failed) == {"p": "failed"} and error in failed.blocks["p"].error
    defaulted = await run_blocks([{"id": "p", "type": "parser",
                                   "with": {"text": text, "schema": SCHEMA, "default": []}}])
    assert defaulted.results["p"] == {"data": []}


async def test_parser_list_value():
    result = await run_blocks([{"id": "p", "type": "parser", "with": {"text": "[1, 2]"}}])
    assert result.results["p"] == {"data": [1, 2]}

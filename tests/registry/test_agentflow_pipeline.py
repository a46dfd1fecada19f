"""AgentFlow's own example pipeline, as its specification writes it (issue 42):
a web search whose `results` (an array) feed a summariser's `content` (a
string input) runs, the array arriving as JSON text; and an optional input
that is not supplied, or is supplied by a reference that reads nothing,
renders empty in the prompt, as AgentFlow's safe formatting does."""

from __future__ import annotations

import json

import pytest

from flowforge.providers.scripted import register_script, unregister_script
from tests.registry.test_uses import run, workflow

WEB_SEARCH = {
    "id": "web_search", "name": "Web Search",
    "description": "Search the web for information on a topic", "execution_type": "llm",
    "input_schema": {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "string"}, "num_results": {"type": "integer", "default": 5}}},
    "output_schema": {"type": "object", "properties": {"results": {"type": "array"}}},
    "prompt_template": "Search the web for: {query}. Return the top {num_results} results "
                       "as JSON array with fields: title, url, snippet."}
SUMMARIZE = {
    "id": "claude_summarize", "name": "Summarize Content",
    "description": "Summarize text content in a given style", "execution_type": "llm",
    "input_schema": {"type": "object", "required": ["content"], "properties": {
        "content": {"type": "string"}, "style": {"type": "string", "default": "concise"},
        "max_length": {"type": "integer", "default": 300}, "extra": {"type": "string"}}},
    "output_schema": {"type": "object", "properties": {"summary": {"type": "string"}}},
    "prompt_template": "Summarize the following in {style} style, max {max_length} "
                       "words:{extra}\n\n{content}"}
#: the specification's wiring example, as written
PIPELINE = {"id": "pipeline_hn", "name": "HN digest",
            "user_prompt": "Summarize the top Hacker News posts every morning",
            "nodes": [{"id": "n1", "block_id": "web_search",
                       "inputs": {"query": "top HN posts today"}},
                      {"id": "n2", "block_id": "claude_summarize",
                       "inputs": {"content": "{{n1.results}}"}}],
            "edges": [{"from": "n1", "to": "n2"}], "memory_keys": []}
POSTS = [{"title": "Show HN: a tiny engine", "url": "https://a.example", "snippet": "é"}]


@pytest.fixture
async def blocks(registry):
    await registry.add(WEB_SEARCH)
    await registry.add(SUMMARIZE)

    def answer(messages, tools):
        if messages[-1].content.startswith("Search"):
            return json.dumps({"results": POSTS})
        return json.dumps({"summary": "One post."})
    register_script("v42_agentflow", answer)
    yield registry
    unregister_script("v42_agentflow")


def prompts(result) -> list[str]:
    return [e["request"]["messages"][-1]["content"] for e in result.events
            if e["type"] == "llm_request"]


async def test_the_specifications_pipeline_runs_and_the_array_arrives_as_json_text(blocks):
    result = await run(PIPELINE, model="scripted/v42_agentflow")
    assert result.status == "succeeded", result.error
    assert result.results["n2"]["summary"] == "One post."
    assert prompts(result)[1] == ("Summarize the following in concise style, max 300 words:"
                                  "\n\n" + json.dumps(POSTS, ensure_ascii=False))


async def test_an_optional_input_read_from_nothing_renders_empty(blocks):
    pipeline = {**PIPELINE, "nodes": [PIPELINE["nodes"][0], {
        "id": "n2", "block_id": "claude_summarize",
        "inputs": {"content": "{{n1.results}}", "extra": "{{n1.note}}"}}]}
    result = await run(pipeline, model="scripted/v42_agentflow")     # n1 has no `note`
    assert result.status == "succeeded", result.error
    assert prompts(result)[1].startswith("Summarize the following in concise style, max 300 "
                                         "words:\n\n[")


async def test_a_written_array_for_a_text_input_validates_and_runs_the_same(blocks):
    result = await run(workflow({"id": "s", "uses": "claude_summarize",
                                 "with": {"content": ["one", "two"]}}),
                       model="scripted/v42_agentflow")
    assert result.status == "succeeded", result.error
    assert prompts(result)[0].endswith('\n\n["one", "two"]')


async def test_a_number_for_a_text_input_is_still_refused(blocks):
    result = await run(workflow(
        {"id": "n", "type": "set", "with": {"v": 3}},
        {"id": "s", "uses": "claude_summarize", "with": {"content": "{{n.v}}"}}),
        model="scripted/v42_agentflow")
    assert result.status == "failed"
    assert "content: 3 is not of type 'string'" in result.blocks["s"].error

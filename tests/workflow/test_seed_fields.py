"""Block fields as the Sim-style executor writes them (issue 26): `systemPrompt`,
`userPrompt`, `maxTokens`, `responseFormat`, `apiKey`, and the knowledge
block's `knowledgeBaseId`, `topK`, `tagFilters` load and run as flowforge's
own snake_case names, which stay canonical."""

from __future__ import annotations

import json

import pytest

import flowforge
from flowforge.errors import ValidationFailed
from flowforge.providers.scripted import register_script, unregister_script
from flowforge.workflow.seed_fields import canonical_fields, snake_case


@pytest.fixture
def echo_model():
    seen = []

    def answer(messages, tools):
        seen.append(messages)
        return '{"verdict": "refund", "reason": "within 30 days"}'
    register_script("seed_echo", answer)
    yield "scripted/seed_echo", seen
    unregister_script("seed_echo")


async def test_a_sim_style_agent_runs_with_the_seeds_field_names(echo_model, monkeypatch):
    model, seen = echo_model
    monkeypatch.setenv("TEAM_KEY", "sk-team-secret-123")
    doc = {"id": "sim", "blocks": [{"id": "agent1", "type": "agent", "with": {
        "systemPrompt": "You are a support agent.", "userPrompt": "Refund for order 42?",
        "model": model, "maxTokens": 50, "temperature": 0.2, "apiKey": "{{env.TEAM_KEY}}",
        "responseFormat": {"type": "object", "properties": {
            "verdict": {"type": "string"}, "reason": {"type": "string"}},
            "required": ["verdict"]}}}]}
    result = await flowforge.run(doc, storage=False)
    assert result.status == "succeeded", result.error
    assert result.results["agent1"]["verdict"] == "refund"
    sent = seen[0]
    assert sent[0].role == "system" and sent[0].content == "You are a support agent."
    assert sent[-1].content == "Refund for order 42?"
    request = next(e for e in result.events if e["type"] == "llm_request")["request"]
    assert request["max_tokens"] == 50 and request["temperature"] == 0.2
    started = next(e for e in result.events if e["type"] == "block_started")
    assert started["inputs"]["api_key"] == "***"          # masked under its canonical name
    assert "sk-team-secret-123" not in json.dumps(result.to_dict(), default=str)


async def test_a_sim_style_knowledge_block_loads(tmp_path):
    doc = {"id": "kb", "blocks": [{"id": "search", "type": "knowledge", "with": {
        "knowledgeBaseId": "policies", "query": "refund", "topK": 2,
        "tagFilters": {"category": ["policies"]}}}]}
    compiled = flowforge.load(doc)
    node = compiled.graph.nodes["search"]
    assert node.spec.with_ == {"knowledge_base": "policies", "query": "refund", "top_k": 2,
                               "filters": {"category": ["policies"]}}


def test_both_spellings_of_one_field_is_a_located_error():
    doc = {"id": "t", "blocks": [{"id": "a", "type": "agent", "with": {
        "system": "one", "systemPrompt": "two", "prompt": "hi"}}]}
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(doc)
    text = str(caught.value)
    assert "blocks[0].with.systemPrompt" in text
    assert "`systemPrompt` and `system` are the same field (`system` is the canonical name)" \
        in text


def test_an_unknown_camel_case_field_is_still_refused_with_its_own_name():
    doc = {"id": "t", "blocks": [{"id": "a", "type": "agent", "with": {
        "prompt": "hi", "maxTokenz": 5}}]}
    with pytest.raises(ValidationFailed, match="maxTokenz"):
        flowforge.load(doc)


def test_the_rule():
    assert snake_case("maxTokens") == "max_tokens" and snake_case("topK") == "top_k"
    renamed, problems = canonical_fields({"maxTokens": 5, "temperature": 1},
                                         {"max_tokens", "temperature"})
    assert renamed == {"max_tokens": 5, "temperature": 1} and problems == []

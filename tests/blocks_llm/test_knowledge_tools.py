"""Agents and guardrails reach the knowledge layer: `knowledge_search` as an
agent tool (pre-filled knowledge base and filters), and a guardrail whose
reference context comes from a knowledge base."""

from __future__ import annotations

import pytest

from flowforge.knowledge.api import Knowledge

from .helpers import events, requests, run_blocks, scripted, statuses

POLICY = ("Refund policy: items can be returned within 30 days of delivery for a full refund. "
          "Sale items are refunded as store credit only.")
SHIPPING = "Shipping policy: orders ship within 2 business days; express costs 9 euros."


@pytest.fixture
async def knowledge(tmp_path):
    kb = await Knowledge.open(f"sqlite:///{tmp_path / 'knowledge.db'}")
    await kb.create("policies")
    await kb.add_text("policies", POLICY, document_name="refunds", tags={"category": "refunds"})
    await kb.add_text("policies", SHIPPING, document_name="shipping",
                      tags={"category": "shipping"})
    yield kb
    await kb.close()


async def test_agent_searches_a_prefilled_knowledge_base(knowledge):
    def script(messages, tools):
        if messages[-1].role == "user":
            (tool,) = tools
            assert tool.name == "knowledge_search"
            assert "knowledge_base" not in tool.parameters["properties"]   # pre-filled
            return {"tool_calls": [{"name": "knowledge_search",
                                    "arguments": {"query": "refund within how many days"}}]}
        return f"Found: {messages[-1].content}"

    with scripted(script) as model:
        result = await run_blocks([{"id": "agent", "type": "agent", "with": {
            "prompt": "Can I return a sale item?", "model": model,
            "tools": [{"knowledge_search": {"knowledge_base": "policies",
                                            "filters": {"category": "refunds"}}}]}}],
            services={"knowledge": knowledge})
    assert statuses(result) == {"agent": "succeeded"}, result.error
    found = result.results["agent"]["toolCalls"]["list"][0]["result"]
    texts = [hit["content"] for hit in found["results"]]
    assert texts and all("Refund policy" in text for text in texts)   # the filter held
    assert "30 days" in result.results["agent"]["content"]
    assert events(result, "tool_called", "agent")[0]["status"] == "ok"


async def test_guardrail_takes_its_context_from_a_knowledge_base(knowledge):
    with scripted(lambda m, t: '{"score": 9, "reasoning": "stated in the policy"}') as model:
        result = await run_blocks([{"id": "check", "type": "guardrail", "with": {
            "content": "Sale items are refunded as store credit.", "model": model,
            "knowledge_base": "policies", "query": "sale item refund"}}],
            services={"knowledge": knowledge})
    assert result.results["check"]["passed"] is True
    sent = requests(result, "check")[0]
    assert "store credit only" in sent["messages"][0]["content"]

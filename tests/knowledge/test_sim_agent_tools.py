"""An agent's knowledge tool written Sim's way (issue 42): `{type: knowledge,
operation: search, params: {knowledgeBaseId, topK, tagFilters}}`, tag filters
as `[{tagName, tagValue}]` or `"a|OR|b"`, validates and runs, and searches
exactly as flowforge's own `knowledge_search` options do."""

from __future__ import annotations

import json

import pytest

import flowforge
from flowforge.errors import ValidationFailed
from flowforge.providers.resolve import clear_provider_cache
from flowforge.providers.scripted import register_script, unregister_script
from tests.knowledge.conftest import POLICIES


@pytest.fixture
async def policies(sqlite_kb):
    await sqlite_kb.create("policies")
    await sqlite_kb.add_paths("policies", [POLICIES])
    return sqlite_kb


@pytest.fixture
def searcher():
    """A model that searches once for "refund", then answers with what it found."""
    found: list[dict] = []

    def answer(messages, tools):
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return {"tool_calls": [{"name": "knowledge_search", "arguments": {"query": "refund"}}]}
        found.append(json.loads(results[-1].content))
        return "done"
    register_script("v42_searcher", answer)
    clear_provider_cache()                  # a provider built for an earlier test is kept
    yield found
    unregister_script("v42_searcher")
    clear_provider_cache()


def agent(tool: dict) -> dict:
    return {"id": "sim-tool", "blocks": [{"id": "ask", "type": "agent", "with": {
        "model": "scripted/v42_searcher", "prompt": "What is the refund policy?",
        "tools": [tool]}}]}


OWN = {"knowledge_search": {"knowledge_base": "policies", "top_k": 2,
                            "filters": {"category": "legal"}}}
SIM_WAYS = [
    {"type": "knowledge", "operation": "search", "title": "Knowledge", "usageControl": "auto",
     "params": {"knowledgeBaseId": "policies", "topK": 2,
                "tagFilters": [{"tagName": "category", "tagValue": "legal"}]}},
    {"type": "knowledge", "params": {"knowledgeBaseId": "policies", "topK": 2,
                                     "tagFilters": {"category": "legal"}}},
    {"knowledge_search": {"knowledgeBaseId": "policies", "topK": 2,
                          "tagFilters": [{"tagName": "category", "tagValue": "legal"}]}},
]


@pytest.mark.parametrize("tool", SIM_WAYS, ids=["sim-shape", "sim-shape-mapping",
                                                 "own-kind-sim-options"])
async def test_a_sim_knowledge_tool_searches_as_flowforges_own(policies, searcher, tool):
    ran = [await flowforge.run(agent(written), {}, storage=False,
                               services={"knowledge": policies}) for written in (OWN, tool)]
    assert [r.status for r in ran] == ["succeeded", "succeeded"], [r.error for r in ran]
    own, sim = searcher
    assert sim == own
    assert 1 <= len(sim["results"]) <= 2
    assert {hit["metadata"]["tags"]["category"][0] for hit in sim["results"]} == {"legal"}


@pytest.mark.parametrize("tool, expected", [
    ({"type": "knowledge", "operation": "upload_chunk", "params": {}},
     "operation: a knowledge tool searches (operation: search); 'upload_chunk' has no "
     "counterpart"),
    ({"type": "knowledge", "params": {"knowledgeBaseId": "p", "query": "x"}},
     "params.query: the model writes a knowledge search's query"),
    ({"type": "knowledge", "usageControl": "force", "params": {}},
     "usageControl: 'force' is written on the agent here: `required_tools"),
    ({"type": "knowledge", "params": {"tagFilters": [{"tagName": "category"}]}},
     "filters[0]: write a filter as {tagName: category, tagValue: policies}"),
    ({"type": "knowledge", "params": {"knowledgeBaseId": "p", "topk": 2}},
     "unknown field 'topk' - did you mean 'top_k'?"),
], ids=["operation", "query", "usage-control", "bad-tag-filter", "typo"])
def test_what_the_run_would_refuse_validate_refuses_located(tool, expected):
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(agent(tool))
    message = " ".join(str(caught.value).split())
    assert "blocks[0].with.tools[0]" in message and expected in message, message

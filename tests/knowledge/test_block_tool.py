"""The `knowledge` block in a workflow, the `knowledge_search` tool agents call,
and semantic ranking for routers."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ToolError
from flowforge.knowledge import tool as knowledge_tool
from flowforge.knowledge.semantic import rank_routes
from tests.knowledge.conftest import POLICIES

WORKFLOW = {
    "id": "kb-demo",
    "inputs": {"query": {"type": "string"}},
    "blocks": [
        {"id": "search", "type": "knowledge",
         "with": {"knowledge_base": "policies", "query": "{{input.query}}", "top_k": 2,
                  "filters": {"category": ["policies", "legal"]}}},
        {"id": "reply", "type": "response", "with": {"message": "{{search.context}}"}},
    ],
}


@pytest.fixture
async def policies(sqlite_kb):
    await sqlite_kb.create("policies")
    await sqlite_kb.add_paths("policies", [POLICIES])
    return sqlite_kb


async def test_block_searches_the_knowledge_service(policies):
    result = await flowforge.run(WORKFLOW, {"query": "Is my data sold to anyone?"},
                                 storage=False, services={"knowledge": policies})
    assert result.status == "succeeded", result.blocks
    output = result.results["search"]
    assert output["totalResults"] == 2 and output["results"][0]["documentName"] == "Privacy Policy"
    assert "never sell your personal data" in result.results["reply"]["message"] or \
        "never sell your personal data" in output["context"]


async def test_block_uses_the_default_store(tmp_path, monkeypatch):
    from flowforge.knowledge.api import close_all, open_knowledge
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{tmp_path / 'default.db'}")
    kb = await open_knowledge()
    await kb.create("policies")
    await kb.add_text("policies", "Refunds take five business days.", document_name="refunds",
                      tags={"category": "policies"})
    try:
        result = await flowforge.run(WORKFLOW, {"query": "refund time"}, storage=False)
        assert result.results["search"]["results"][0]["documentName"] == "refunds"
    finally:
        await close_all()


async def test_unknown_base_fails_the_block_with_a_hint(policies):
    doc = {**WORKFLOW, "blocks": [{**WORKFLOW["blocks"][0],
                                   "with": {"knowledge_base": "polices", "query": "x"}}]}
    result = await flowforge.run(doc, {"query": "x"}, storage=False,
                                 services={"knowledge": policies})
    assert result.status == "failed"
    assert "no knowledge base named 'polices'" in result.blocks["search"].error
    assert "existing: policies" in result.blocks["search"].error


def test_tool_spec_asks_the_model_only_for_what_the_workflow_left_open():
    fixed = knowledge_tool.tool_spec("policies")
    assert fixed["name"] == "knowledge_search"
    assert fixed["parameters"]["required"] == ["query"]
    assert set(fixed["parameters"]["properties"]) == {"query", "top_k", "filters"}
    assert "knowledge_base" in knowledge_tool.tool_spec()["parameters"]["required"]


async def test_tool_prefilled_filters_cannot_be_widened(policies):
    prefilled = {"knowledge_base": "policies", "filters": {"category": "legal"}, "top_k": 3}
    found = await knowledge_tool.execute({"query": "refund"}, prefilled, policies)
    assert found["totalResults"] == 3
    assert all(r["metadata"]["tags"]["category"] == ["legal"] for r in found["results"])
    with pytest.raises(ToolError, match=r"filters.category: policies is outside what this "
                                        r"workflow searches \(category = legal\)"):
        await knowledge_tool.execute({"query": "refund", "filters": {"category": "policies"}},
                                     prefilled, policies)
    narrowed = await knowledge_tool.execute({"query": "cookies", "top_k": 1,
                                             "filters": {"topic": "cookies"}}, prefilled, policies)
    assert [r["documentName"] for r in narrowed["results"]] == ["Cookie Policy"]
    with pytest.raises(ToolError, match="`query` must be a non-empty string"):
        await knowledge_tool.execute({"query": " "}, prefilled, policies)


async def test_tool_object_for_the_agent_loop(policies):
    class Block:
        services = {"knowledge": policies}

    tool = knowledge_tool.knowledge_search_tool(context=Block(), knowledge_base="policies")
    assert tool.kind == "knowledge" and tool.parameters["required"] == ["query"]
    found = await tool.execute({"query": "How long does shipping to Canada take?"}, None)
    assert found["results"][0]["documentName"] == "Shipping Policy"
    with pytest.raises(ToolError, match="unknown option"):
        knowledge_tool.knowledge_search_tool(knowledge_base="p", index="x")


async def test_semantic_ranking_picks_the_closest_route():
    routes = [
        {"id": "refunds", "text": "Refunds and returns", "examples": ["I want my money back"]},
        {"id": "shipping", "text": "Shipping, delivery times and tracking"},
        {"id": "privacy", "name": "Privacy", "description": "personal data, GDPR requests"},
    ]
    ranked = await rank_routes("where is my parcel? it has not arrived", routes)
    assert ranked[0][0] == "shipping" and ranked[0][1] > ranked[1][1]
    assert (await rank_routes("please delete all data you hold about me", routes))[0][0] == "privacy"
    assert (await rank_routes("give me a refund", routes))[0][0] == "refunds"
    assert await rank_routes("x", []) == []


async def test_block_sources_create_and_sync_the_base(sqlite_kb, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "hours.md").write_text("---\ntags: {category: policies}\n---\n"
                                     "The shop opens at nine and closes at six.")
    workflow = {"id": "kb-sources", "inputs": {"query": {"type": "string"}}, "blocks": [
        {"id": "search", "type": "knowledge",
         "with": {"knowledge_base": "shop", "sources": [str(folder)], "query": "{{input.query}}",
                  "top_k": 1}}]}
    first = await flowforge.run(workflow, {"query": "when do you open"}, storage=False,
                                services={"knowledge": sqlite_kb})
    assert "opens at nine" in first.results["search"]["context"]
    synced = [e for e in first.events if e["type"] == "progress" and "report" in e]
    assert synced[0]["report"]["added"] == ["hours.md"] or synced[0]["report"]["added"]
    (folder / "hours.md").write_text("---\ntags: {category: policies}\n---\n"
                                     "The shop opens at ten on Sundays.")
    second = await flowforge.run(workflow, {"query": "when do you open"}, storage=False,
                                 services={"knowledge": sqlite_kb})
    assert "ten on Sundays" in second.results["search"]["context"]
    assert len(await sqlite_kb.documents("shop")) == 1
    workflow["blocks"][0]["with"]["sources"] = [str(tmp_path / "missing")]
    broken = await flowforge.run(workflow, {"query": "x"}, storage=False,
                                 services={"knowledge": sqlite_kb})
    assert "knowledge sources not found" in broken.blocks["search"].error

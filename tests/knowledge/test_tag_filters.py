"""A knowledge block's tag filter in Sim's spellings (`a|OR|b`,
`[{tagName, tagValue}]`), and a filter that can never match: refused by
`flowforge validate` when the base exists, a located block failure at run
time - never a silent 0 results (issue 41)."""

from __future__ import annotations

import textwrap

import pytest

import flowforge
from flowforge.knowledge.api import close_all
from tests import in_process
from tests.knowledge.conftest import POLICIES, ROOT


def workflow(filters) -> dict:
    return {"id": "kb-filters", "inputs": {"query": {"type": "string"}},
            "blocks": [{"id": "search", "type": "knowledge",
                        "with": {"knowledgeBaseId": "policies", "query": "{{input.query}}",
                                 "topK": 5, "tagFilters": filters}}]}


@pytest.fixture
async def policies(sqlite_kb):
    await sqlite_kb.create("policies")
    await sqlite_kb.add_paths("policies", [POLICIES])
    return sqlite_kb


@pytest.mark.parametrize("filters", [{"category": "policies|OR|legal"},
                                     [{"tagName": "category", "tagValue": "policies"},
                                      {"tagName": "category", "tagValue": "legal"}]],
                         ids=["or-syntax", "tag-list"])
async def test_sim_filters_mean_any_of(policies, filters):
    result = await flowforge.run(workflow(filters), {"query": "refund"}, storage=False,
                                 services={"knowledge": policies})
    assert result.status == "succeeded", result.blocks
    categories = {hit["metadata"]["tags"]["category"][0]
                  for hit in result.results["search"]["results"]}
    assert result.results["search"]["totalResults"] == 5
    assert categories <= {"policies", "legal"} and len(categories) == 2


async def test_a_filter_that_never_matches_fails_the_block_located(policies):
    result = await flowforge.run(workflow({"category": "policy|OR|legl"}), {"query": "refund"},
                                 storage=False, services={"knowledge": policies})
    assert result.status == "failed" and result.blocks["search"].status == "failed"
    error = result.blocks["search"].error
    assert "filters.category: no document of knowledge base 'policies' has category = " \
           "legl|OR|policy (its values: legal, policies)" in error


def test_validate_refuses_a_filter_the_base_cannot_match(tmp_path):
    import asyncio

    url = f"sqlite:///{tmp_path / 'knowledge.db'}"

    async def fill():
        kb = await flowforge.knowledge.open_knowledge(url)
        await kb.create("policies")
        await kb.add_paths("policies", [POLICIES])
        await close_all()
    asyncio.run(fill())
    path = tmp_path / "search.yaml"

    def check(filters: str):
        path.write_text(textwrap.dedent(f"""\
            id: kb-filters
            inputs: {{query: {{type: string}}}}
            blocks:
              - id: search
                type: knowledge
                with: {{knowledgeBaseId: policies, query: "{{{{input.query}}}}",
                        tagFilters: {filters}}}
            """), encoding="utf-8")
        return in_process.flowforge("validate", str(path), cwd=ROOT,
                                    env={"FLOWFORGE_KNOWLEDGE_URL": url})

    refused = check('{region: "eu|OR|us"}')
    assert refused.returncode == 2, refused.stdout + refused.stderr
    message = " ".join(refused.stderr.split())
    assert "blocks[0].with.filters: no document of knowledge base 'policies' has the tag " \
           "'region' (its tags: category, topic)" in message
    assert check('{category: "policies|OR|legal"}').returncode == 0
    # a base the store does not hold is the run's to judge
    path_text = path.read_text().replace("knowledgeBaseId: policies", "knowledgeBaseId: other")
    path.write_text(path_text)
    assert in_process.flowforge("validate", str(path), cwd=ROOT,
                                env={"FLOWFORGE_KNOWLEDGE_URL": url}).returncode == 0

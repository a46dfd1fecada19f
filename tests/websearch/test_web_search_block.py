"""The `web_search` block (the chat's web search over a list of queries, as
the research workflows use it) and the `progress` block, in small workflows."""

from __future__ import annotations

from flowforge.service.runs import run

TENT = "https://trail-guide.example.net/pitching-a-tent-in-wind"


def search_workflow(**options):
    return {"version": 1, "id": "search", "inputs": {"queries": {"type": "array"}},
            "blocks": [{"id": "web", "type": "web_search",
                        "with": {"queries": "{{input.queries}}", "knowledge_base": "web",
                                 **options}}]}


async def test_each_query_is_searched_and_each_page_cited_once(knowledge):
    result = await run(search_workflow(max_results=2),
                       {"queries": ["pitching a tent in wind", "tent in strong wind",
                                    "pitching a tent in wind", "  "]},
                       storage=False, services={"knowledge": knowledge})
    assert result.status == "succeeded", result.error
    web = result.results["web"]
    assert [r["query"] for r in web["results"]] == ["pitching a tent in wind",
                                                    "tent in strong wind"]
    urls = [c["url"] for c in web["citations"]]
    assert urls[0] == TENT and len(urls) == len(set(urls))
    assert web["context"].startswith(f"[1] Pitching a tent in strong wind ({TENT})")
    assert any(e["type"] == "progress" and "quer" in e["message"] for e in result.events)


async def test_no_query_fails_the_block_with_a_clear_message(knowledge):
    result = await run(search_workflow(), {"queries": [" ", ""]}, storage=False,
                       services={"knowledge": knowledge})
    assert result.status == "failed"
    assert "no query to search: `queries` is empty" in result.blocks["web"].error


async def test_an_unknown_offline_base_names_the_fix(knowledge):
    result = await run(search_workflow(knowledge_base="nowhere"), {"queries": ["tents"]},
                       storage=False, services={"knowledge": knowledge})
    assert result.status == "failed"
    assert "no knowledge base named 'nowhere'" in result.blocks["web"].error


async def test_progress_publishes_its_fields_and_outputs_them():
    document = {"version": 1, "id": "milestones", "blocks": [
        {"id": "half", "type": "progress",
         "with": {"percent": 50, "phase": "first", "message": "half way",
                  "result": {"n": 1}}},
        {"id": "done", "type": "progress", "after": ["half"], "with": {"percent": 100}}]}
    result = await run(document, {}, storage=False)
    events = [e for e in result.events if e["type"] == "progress"]
    assert [(e["block_id"], e["percent"]) for e in events] == [("half", 50), ("done", 100)]
    assert events[0]["phase"] == "first" and events[0]["result"] == {"n": 1}
    assert result.results["half"] == {"percent": 50, "message": "half way", "phase": "first",
                                      "result": {"n": 1}}

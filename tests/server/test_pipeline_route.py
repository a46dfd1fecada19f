"""AgentFlow's `POST /api/pipeline/run`: a Pipeline JSON of registry blocks,
run for the caller, answered with results, memory and log."""

from __future__ import annotations

import pytest

PIPELINE = {
    "id": "count-clean-words",
    "nodes": [{"id": "n1", "block_id": "text_clean", "inputs": {"text": "{{input.text}}"}},
              {"id": "n2", "block_id": "text_word_count", "inputs": {"text": "{{n1.text}}"}}],
    "edges": [{"from": "n1", "to": "n2"}],
    "memory_keys": ["text"],
}


@pytest.fixture(autouse=True)
def _text_search(monkeypatch):
    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")   # no embedding model needed


async def test_a_pipeline_runs_for_its_user_and_answers_with_results(server):
    async with server.client() as client:
        response = await client.post("/api/pipeline/run", json={
            **PIPELINE, "user_id": "alice", "input": {"text": "<p>Hello   big  world</p>"}})
        body = response.json()
        history = (await client.get("/api/executions")).json()["executions"]
        memory = (await client.get("/api/memory/alice")).json()["memory"]
    assert response.status_code == 200, response.text
    assert body["status"] == "succeeded" and body["pipeline_id"] == "count-clean-words"
    assert body["results"]["n1"]["text"] == "Hello big world"
    assert body["results"]["n2"]["words"] == 3
    assert body["log"][0]["type"] == "run_started" and body["log"][-1]["type"] == \
        "run_finished"
    assert [e["execution_id"] for e in history] == [body["execution_id"]]
    assert memory == {"text": "Hello big world"}


async def test_a_broken_pipeline_lists_its_problems_in_pipeline_terms(server):
    broken = {**PIPELINE, "nodes": [PIPELINE["nodes"][0],
                                    {"id": "n2", "block_id": "text_word_count",
                                     "inputs": {"text": "{{n1.nothing}}"}}],
              "edges": [{"from": "n1", "to": "n9"}]}
    async with server.client() as client:
        unknown_edge = await client.post("/api/pipeline/run", json=broken)
        bad_field = await client.post("/api/pipeline/run", json={**broken, "edges": []})
        other_user = await client.post("/api/pipeline/run", json={**PIPELINE,
                                                                  "user_id": "bob"})
    assert unknown_edge.status_code == 422
    assert unknown_edge.json()["error"]["details"][0]["where"] == "edges[0].to"
    assert bad_field.status_code == 422
    assert bad_field.json()["error"]["details"][0]["where"] == "nodes[1].inputs.text"
    assert other_user.status_code == 404

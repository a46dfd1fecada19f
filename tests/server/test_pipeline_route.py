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
    assert body["events"][0]["type"] == "run_started" and body["events"][-1]["type"] == \
        "run_finished"
    # The doer's PipelineState: {pipeline_id, results, user, memory, log: [{node, block, output}]}
    assert body["user"]["id"] == body["user_id"] == server.users["alice"]["user_id"]
    assert body["memory"] == {"text": "Hello big world"}
    assert body["log"] == [
        {"node": "n1", "block": "text_clean", "output": body["results"]["n1"]},
        {"node": "n2", "block": "text_word_count", "output": body["results"]["n2"]}]
    assert [e["execution_id"] for e in history] == [body["execution_id"]]
    assert memory == {"text": "Hello big world"}


async def test_a_broken_pipeline_lists_its_problems_in_pipeline_terms(server):
    broken = {**PIPELINE, "nodes": [PIPELINE["nodes"][0],
                                    {"id": "n2", "block_id": "text_word_count",
                                     "inputs": {"text": "{{n1.nothing}}"}}],
              "edges": [{"from": "n1", "to": "n9"}]}
    async with server.client() as client:
        unknown_edge = await client.post("/api/pipeline/run", json=broken)
        bad_field = await client.post("/api/pipeline/run", json={**broken, "edges": [],
                                                                 "input": {"text": "x"}})
        other_user = await client.post("/api/pipeline/run", json={**PIPELINE,
                                                                  "user_id": "bob"})
    assert unknown_edge.status_code == 422
    assert unknown_edge.json()["error"]["details"][0]["where"] == "edges[0].to"
    # A missing field of a known node reads null, as in the seed: the pipeline
    # runs (and its node fails on the null), and the reference is pointed out.
    assert bad_field.status_code == 200, bad_field.text
    assert bad_field.json()["warnings"] == [{
        "where": "nodes[1].inputs.text",
        "message": "'n1' (text_clean) has no output 'nothing'; its outputs: text"}]
    assert bad_field.json()["status"] == "failed"
    assert other_user.status_code == 404


async def test_saved_pipelines_are_their_owners_and_run_by_id(server):
    async with server.client() as alice, server.client("bob") as bob:
        made = await alice.post("/api/pipelines", json=PIPELINE)
        again = await alice.post("/api/pipelines", json=PIPELINE)
        listed = (await alice.get("/api/pipelines")).json()
        ran = await alice.post("/api/pipelines/count-clean-words/run",
                               json={"input": {"text": "<b>One   two</b>"}})
        theirs = [await bob.get("/api/pipelines/count-clean-words"),
                  await bob.put("/api/pipelines/count-clean-words", json=PIPELINE),
                  await bob.delete("/api/pipelines/count-clean-words"),
                  await bob.post("/api/pipelines/count-clean-words/run", json={})]
        bob_list = (await bob.get("/api/pipelines")).json()
        renamed = await alice.put("/api/pipelines/count-clean-words",
                                  json={**PIPELINE, "name": "Words"})
        mismatched = await alice.put("/api/pipelines/count-clean-words",
                                     json={**PIPELINE, "id": "other"})
        got = (await alice.get("/api/pipelines/count-clean-words")).json()
        deleted = await alice.delete("/api/pipelines/count-clean-words")
        gone = await alice.get("/api/pipelines/count-clean-words")
        history = (await alice.get("/api/executions")).json()["executions"]
    assert made.status_code == 201, made.text
    assert made.json()["pipeline"] == PIPELINE and made.json()["pipeline_id"] == \
        "count-clean-words"
    assert made.json()["run_url"] == "/api/pipelines/count-clean-words/run"
    assert again.status_code == 409 and "PUT /api/pipelines/count-clean-words" in again.text
    assert listed["count"] == 1 and listed["pipelines"][0]["owner"] == \
        server.users["alice"]["user_id"]
    assert ran.status_code == 200, ran.text
    state = ran.json()
    assert state["pipeline_id"] == "count-clean-words" and state["status"] == "succeeded"
    assert [(e["node"], e["block"]) for e in state["log"]] == \
        [("n1", "text_clean"), ("n2", "text_word_count")]
    assert state["results"]["n2"]["words"] == 2 and state["memory"] == {"text": "One two"}
    assert [r.status_code for r in theirs] == [404, 404, 404, 404]
    assert "no pipeline 'count-clean-words'" in theirs[0].text
    assert bob_list == {"pipelines": [], "count": 0}
    assert renamed.status_code == 200 and renamed.json()["name"] == "Words"
    assert mismatched.status_code == 422 and "differs from the id in the URL" in mismatched.text
    assert got["pipeline"]["name"] == "Words"
    assert deleted.status_code == 204 and gone.status_code == 404
    assert [e["execution_id"] for e in history] == [state["execution_id"]]   # runs are kept


async def test_a_pipeline_is_checked_when_saved(server):
    broken = {**PIPELINE, "nodes": [PIPELINE["nodes"][0],
                                    {"id": "n2", "block_id": "text_word_count",
                                     "inputs": {"text": "{{n1.nothing}}"}}],
              "edges": [{"from": "n1", "to": "n9"}]}
    doubtful = {**broken, "id": "doubtful", "edges": []}
    async with server.client() as client:
        bad = await client.post("/api/pipelines", json=broken)
        warned = await client.post("/api/pipelines", json=doubtful)
        not_a_pipeline = await client.post("/api/pipelines", json={"id": "x"})
        good = await client.post("/api/pipelines", json=PIPELINE)
        bad_run = await client.post("/api/pipelines/count-clean-words/run",
                                    json={"inputs": {"text": "x"}})
        listed = (await client.get("/api/pipelines")).json()
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["where"] == "edges[0].to"
    assert warned.status_code == 201, warned.text
    assert [w["where"] for w in warned.json()["warnings"]] == ["nodes[1].inputs.text"]
    assert not_a_pipeline.status_code == 422 and "nodes" in not_a_pipeline.text
    assert good.status_code == 201 and good.json()["warnings"] == []
    assert bad_run.status_code == 422 and "inputs" in bad_run.text
    assert listed["count"] == 2


async def test_the_pipeline_routes_are_documented(server):
    async with server.client() as client:
        schema = (await client.get("/openapi.json")).json()
    paths = schema["paths"]
    assert set(paths["/api/pipelines"]) == {"get", "post"}
    assert set(paths["/api/pipelines/{pipeline_id}"]) == {"get", "put", "delete"}
    answer = paths["/api/pipelines/{pipeline_id}/run"]["post"]["responses"]["200"]
    assert answer["content"]["application/json"]["schema"]["$ref"].endswith("PipelineRunAnswer")
    state = schema["components"]["schemas"]["PipelineRunAnswer"]["properties"]
    assert {"pipeline_id", "results", "user", "memory", "log", "execution_id"} <= set(state)

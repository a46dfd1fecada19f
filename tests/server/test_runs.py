"""Starting runs (202 or wait=true), run details, cancel, history, versions."""

from __future__ import annotations

import asyncio

from tests.server.conftest import chain, read_sse, start_server, wait_for_status


async def _save(client, workflow: dict) -> dict:
    response = await client.post("/api/workflows", json=workflow)
    assert response.status_code == 201, response.text
    return response.json()


async def test_wait_true_returns_the_run_result(server):
    async with server.client() as client:
        await _save(client, chain(count=2, seconds=0))
        response = await client.post("/api/workflows/chain/runs?wait=true",
                                     json={"inputs": {"word": "hey"}})
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "succeeded" and body["outputs"] == {"b1": {"value": "hey"}}
    assert body["results"]["b0"] == {"value": "hey"} and body["workflow_version"] == 1
    assert set(body["blocks"]) == {"b0", "b1"} and body["events"][-1]["type"] == "run_finished"


async def test_a_started_run_answers_202_with_its_urls_and_its_details_later(server):
    async with server.client() as client:
        await _save(client, chain(count=2, seconds=0))
        started = await client.post("/api/workflows/chain/runs", json={})
        run_id = started.json()["run_id"]
        await wait_for_status(server, run_id, "succeeded")
        detail = (await client.get(started.json()["status_url"])).json()
    assert started.status_code == 202
    assert started.json()["events_url"] == f"/api/runs/{run_id}/events"
    assert detail["status"] == "succeeded" and detail["outputs"] == {"b1": {"value": "hi"}}
    assert detail["user_id"] == server.users["alice"]["user_id"]
    assert detail["blocks"]["b0"]["output"] == {"value": "hi"}
    assert detail["blocks"]["b1"]["status"] == "succeeded" and detail["workflow_version"] == 1


async def test_a_failing_block_makes_a_failed_run_with_the_error(server):
    workflow = {"id": "bad", "blocks": [{"id": "x", "type": "function",
                                         "with": {"function": "srv_fail",
                                                  "args": {"message": "disk full"}}}]}
    async with server.client() as client:
        await _save(client, workflow)
        body = (await client.post("/api/workflows/bad/runs?wait=true", json={})).json()
        detail = (await client.get(f"/api/runs/{body['run_id']}")).json()
    assert body["status"] == "failed"
    assert detail["status"] == "failed" and "disk full" in detail["blocks"]["x"]["error"]


async def test_cancel_during_a_long_block_keeps_the_completed_blocks(any_server):
    workflow = chain(count=3, seconds=0.01)
    workflow["blocks"][1]["with"]["args"]["seconds"] = 60
    async with any_server.client() as client:
        await _save(client, workflow)
        run_id = (await client.post("/api/workflows/chain/runs", json={})).json()["run_id"]

        async def cancel_when_b1_starts(event):
            if event["type"] == "block_started" and event["block_id"] == "b1":
                response = await client.post(f"/api/runs/{run_id}/cancel")
                assert response.status_code == 200, response.text
                assert response.json()["status"] == "cancelled"

        events = await asyncio.wait_for(
            read_sse(client, f"/api/runs/{run_id}/events", on_event=cancel_when_b1_starts), 20)
        detail = (await client.get(f"/api/runs/{run_id}")).json()
        again = await client.post(f"/api/runs/{run_id}/cancel")
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "cancelled"
    assert detail["status"] == "cancelled"
    assert detail["blocks"]["b0"]["status"] == "succeeded"
    assert detail["blocks"]["b0"]["output"] == {"value": "hi"}
    assert detail["blocks"]["b1"]["status"] == "cancelled"
    assert detail["blocks"]["b2"]["status"] == "cancelled"
    assert again.status_code == 409 and "already ended" in again.json()["error"]["message"]


async def test_runs_name_their_version_and_can_pin_an_older_one(server):
    v1 = {"id": "greet", "blocks": [{"id": "say", "type": "set", "with": {"text": "v1"}}]}
    v2 = {"id": "greet", "blocks": [{"id": "say", "type": "set", "with": {"text": "v2"}}]}
    async with server.client() as client:
        await _save(client, v1)
        second = await client.put("/api/workflows/greet", json=v2)
        latest = (await client.post("/api/workflows/greet/runs?wait=true", json={})).json()
        pinned = (await client.post("/api/workflows/greet/runs?wait=true",
                                    json={"version": 1})).json()
        missing = await client.post("/api/workflows/greet/runs", json={"version": 7})
        stored = (await client.get(f"/api/runs/{pinned['run_id']}")).json()
    assert second.status_code == 200 and second.json()["version"] == 2
    assert (latest["workflow_version"], latest["outputs"]) == (2, {"say": {"text": "v2"}})
    assert (pinned["workflow_version"], pinned["outputs"]) == (1, {"say": {"text": "v1"}})
    assert stored["workflow_version"] == 1
    assert missing.status_code == 404 and "version 7" in missing.json()["error"]["message"]


async def test_history_filters_and_pages(server):
    async with server.client() as client:
        await _save(client, chain(count=1, seconds=0))
        await _save(client, {"id": "bad", "blocks": [
            {"id": "x", "type": "function", "with": {"function": "srv_fail"}}]})
        ids = []
        for workflow_id in ("chain", "bad", "chain"):
            ids.append((await client.post(f"/api/workflows/{workflow_id}/runs?wait=true",
                                          json={})).json()["run_id"])
        everything = (await client.get("/api/runs")).json()
        chains = (await client.get("/api/runs?workflow=chain")).json()
        failed = (await client.get("/api/runs?status=failed")).json()
        page = (await client.get("/api/runs?limit=2")).json()
        rest = (await client.get(page["next"])).json()
    async with server.client("bob") as client:
        bobs = (await client.get("/api/runs")).json()
    assert [r["run_id"] for r in everything["runs"]] == ids[::-1]
    assert [r["run_id"] for r in chains["runs"]] == [ids[2], ids[0]]
    assert [r["run_id"] for r in failed["runs"]] == [ids[1]]
    assert [r["run_id"] for r in page["runs"] + rest["runs"]] == ids[::-1]
    assert rest["next"] is None and bobs["runs"] == []


async def test_bad_run_inputs_are_refused_before_anything_runs(server):
    workflow = {"id": "needs", "inputs": {"n": {"type": "integer"}},
                "blocks": [{"id": "s", "type": "set", "with": {"n": "{{input.n}}"}}]}
    async with server.client() as client:
        await _save(client, workflow)
        missing = await client.post("/api/workflows/needs/runs", json={"inputs": {}})
        wrong = await client.post("/api/workflows/needs/runs", json={"inputs": {"n": "x"}})
        extra = await client.post("/api/workflows/needs/runs", json={"inputs": {}, "bogus": 1})
        runs = (await client.get("/api/runs")).json()["runs"]
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "invalid_inputs"
    assert "n" in missing.json()["error"]["details"][0]["message"]
    assert wrong.status_code == 422
    assert extra.status_code == 422 and extra.json()["error"]["details"][0]["where"] == \
        "body.bogus"
    assert runs == []


async def test_cancel_reaches_a_run_that_another_server_process_runs(tmp_path):
    # Two server processes on one database (as behind a load balancer): the run
    # lives in the first, the cancel arrives at the second.
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first, stop_first = await start_server(url)
    second, stop_second = await start_server(url, users_of=first)
    workflow = chain(count=3, seconds=0.01)
    workflow["blocks"][1]["with"]["args"]["seconds"] = 60
    try:
        async with first.client() as one, second.client() as two:
            await _save(one, workflow)
            run_id = (await one.post("/api/workflows/chain/runs", json={})).json()["run_id"]
            for _ in range(200):
                detail = (await two.get(f"/api/runs/{run_id}")).json()
                if detail["blocks"].get("b1", {}).get("status") == "running":
                    break
                await asyncio.sleep(0.02)
            answer = await asyncio.wait_for(two.post(f"/api/runs/{run_id}/cancel"), 15)
            detail = (await one.get(f"/api/runs/{run_id}")).json()
    finally:
        await stop_second()
        await stop_first()
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"run_id": run_id, "status": "cancelled"}
    assert {b: v["status"] for b, v in detail["blocks"].items()} == {
        "b0": "succeeded", "b1": "cancelled", "b2": "cancelled"}


async def test_a_run_left_running_by_a_dead_process_is_resumed_by_the_server(server):
    """After a crash or a restart nothing stays `running` for ever: the server's
    resumer takes over runs whose lease lapsed and finishes them."""
    import time

    storage = server.storage
    alice = server.users["alice"]
    document = {"id": "cut", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}},
                                        {"id": "b", "type": "set", "with": {"w": "{{a.v}}"}}]}
    await storage.create_run({"run_id": "cut0ff", "workflow_id": "cut", "user_id":
                              alice["user_id"], "status": "running", "inputs": {},
                              "created_at": time.time(), "started_at": time.time(),
                              "document": document, "lease_owner": "gone-host:1:dead",
                              "lease_expires_at": time.time() - 1})
    started = await server.app.state.live.resume_due()
    assert started == ["cut0ff"]
    row = await wait_for_status(server, "cut0ff", "succeeded")
    assert row["outputs"] == {"b": {"w": 1}}

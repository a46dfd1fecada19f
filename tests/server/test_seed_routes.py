"""The seed systems' routes over the same runs: execution history, memory,
and agent-workflow sessions with WebSocket status and cancel."""

from __future__ import annotations

import asyncio
import json

import websockets

from tests.server.conftest import chain


async def test_executions_list_and_detail(server):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=2, seconds=0))
        run = (await client.post("/api/workflows/chain/runs?wait=true", json={})).json()
        listing = (await client.get("/api/executions")).json()
        detail = (await client.get(f"/api/executions/{run['run_id']}")).json()
    assert [(e["execution_id"], e["pipeline_id"], e["status"]) for e in
            listing["executions"]] == [(run["run_id"], "chain", "succeeded")]
    assert detail["results"] == {"b0": {"value": "hi"}, "b1": {"value": "hi"}}
    assert detail["outputs"] == {"b1": {"value": "hi"}} and detail["memory"] == {}
    assert [e["type"] for e in detail["log"]][0] == "run_started"
    assert detail["log"][-1]["type"] == "run_finished"


async def test_agent_workflow_session_from_a_saved_workflow_with_websocket_status(server):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=3, seconds=0.02))
        started = await client.post("/agent-workflow", json={"workflow_id": "chain",
                                                             "inputs": {"word": "go"}})
        session = started.json()
        url = f"{server.ws_url}{session['websocket_url']}?token={server.keys['alice']}"
        async with websockets.connect(url) as socket:
            events = [json.loads(m) async for m in socket]
        status = (await client.get(session["status_url"])).json()
    assert started.status_code == 202 and session["status"] == "running"
    assert events[-1]["type"] == "run_finished" and events[-1]["outputs"] == \
        {"b2": {"value": "go"}}
    assert status["session_id"] == session["session_id"] and status["status"] == "succeeded"


async def test_agent_workflow_session_from_an_inline_document_can_be_cancelled(server):
    document = chain("inline", count=2, seconds=0.01)
    document["blocks"][1]["with"]["args"]["seconds"] = 60
    async with server.client() as client:
        session = (await client.post("/agent-workflow", json={"workflow": document})).json()
        sid = session["session_id"]
        for _ in range(200):
            blocks = {b["block_id"]: b for b in await server.storage.get_blocks(sid)}
            if blocks.get("b1", {}).get("status") == "running":
                break
            await asyncio.sleep(0.02)
        cancelled = await client.post(session["cancel_url"])
        status = (await client.get(session["status_url"])).json()
        saved = (await client.get("/api/workflows")).json()["workflows"]
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert status["status"] == "cancelled" and status["blocks"]["b0"]["status"] == "succeeded"
    assert status["workflow_id"] == "inline" and saved == []


async def test_agent_workflow_needs_exactly_one_workflow(server):
    async with server.client() as client:
        neither = await client.post("/agent-workflow", json={"inputs": {}})
        both = await client.post("/agent-workflow", json={"workflow_id": "a",
                                                          "workflow": {"id": "a"}})
        invalid = await client.post("/agent-workflow", json={"workflow": {"id": "a",
                                                                          "blocks": 3}})
        unknown = await client.post("/agent-workflow", json={"workflow_id": "nope"})
    assert neither.status_code == 422 and "exactly one" in neither.json()["error"]["message"]
    assert both.status_code == 422
    assert invalid.status_code == 422 and invalid.json()["error"]["code"] == "invalid_workflow"
    assert unknown.status_code == 404

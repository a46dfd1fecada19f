"""Live progress: SSE and WebSocket read the stored events, so a late or
reconnecting client misses nothing and never sees an event twice."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from tests.server.conftest import chain, read_sse, wait_for_status

BLOCK_EVENTS = ["block_started", "block_succeeded"]


async def _start(client, workflow: dict, inputs: dict | None = None) -> str:
    assert (await client.post("/api/workflows", json=workflow)).status_code == 201
    response = await client.post(f"/api/workflows/{workflow['id']}/runs",
                                 json={"inputs": inputs or {}})
    assert response.status_code == 202, response.text
    return response.json()["run_id"]


async def test_a_live_subscriber_gets_every_event_in_order_ending_with_run_finished(
        any_server):
    async with any_server.client() as client:
        run_id = await _start(client, chain(seconds=0.05), {"word": "yo"})
        events = await read_sse(client, f"/api/runs/{run_id}/events")
    assert [e["seq"] for e in events] == list(range(1, 13))
    assert [e["type"] for e in events] == ["run_started", *BLOCK_EVENTS * 5, "run_finished"]
    assert events[-1]["status"] == "succeeded" and events[-1]["outputs"] == \
        {"b4": {"value": "yo"}}
    assert events == await any_server.storage.get_events(run_id)


async def test_a_late_subscriber_gets_the_whole_run_replayed(server):
    async with server.client() as client:
        run_id = await _start(client, chain(seconds=0))
        await wait_for_status(server, run_id, "succeeded")
        events = await read_sse(client, f"/api/runs/{run_id}/events")
    assert [e["type"] for e in events] == ["run_started", *BLOCK_EVENTS * 5, "run_finished"]


async def test_every_event_is_stored_before_a_client_receives_it(server):
    async with server.client() as client:
        run_id = await _start(client, chain(seconds=0.02))

        async def stored_already(event: dict) -> None:
            stored = await server.storage.get_events(run_id, event["seq"] - 1)
            assert stored and stored[0] == event

        events = await read_sse(client, f"/api/runs/{run_id}/events", on_event=stored_already)
    assert len(events) == 12


async def test_a_client_that_reconnects_with_last_event_id_gets_each_event_exactly_once(
        any_server):
    async with any_server.client() as client:
        run_id = await _start(client, chain(count=6, seconds=0.1))
        first = await read_sse(client, f"/api/runs/{run_id}/events", stop_after=4)
        await asyncio.sleep(0.25)                 # events keep coming while disconnected
        second = await read_sse(client, f"/api/runs/{run_id}/events",
                                headers={"Last-Event-ID": str(first[-1]["seq"])}, stop_after=3)
        third = await read_sse(client, f"/api/runs/{run_id}/events",
                               headers={"Last-Event-ID": str(second[-1]["seq"])})
    received = [e["seq"] for e in first + second + third]
    assert received == list(range(1, len(received) + 1))
    assert third[-1]["type"] == "run_finished"
    assert first + second + third == await any_server.storage.get_events(run_id)


async def test_after_query_and_json_listing(server):
    async with server.client() as client:
        run_id = await _start(client, chain(count=2, seconds=0))
        await wait_for_status(server, run_id, "succeeded")
        tail = await read_sse(client, f"/api/runs/{run_id}/events?after=5")
        listing = await client.get(f"/api/runs/{run_id}/events",
                                   headers={"Accept": "application/json"})
        bad = await client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "x"})
    assert [e["seq"] for e in tail] == [6]
    assert [e["seq"] for e in listing.json()["events"]] == [1, 2, 3, 4, 5, 6]
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]["message"]


async def test_many_concurrent_subscribers_each_get_the_full_stream(server):
    async with server.client() as client:
        run_id = await _start(client, chain(seconds=0.05))
        streams = await asyncio.gather(*(read_sse(client, f"/api/runs/{run_id}/events")
                                         for _ in range(10)))
    assert all([e["seq"] for e in s] == list(range(1, 13)) for s in streams)


# -- WebSocket ------------------------------------------------------------------------------

async def test_websocket_streams_the_run_then_closes(any_server):
    async with any_server.client() as client:
        run_id = await _start(client, chain(seconds=0.02))
    headers = {"Authorization": f"Bearer {any_server.keys['alice']}"}
    async with websockets.connect(f"{any_server.ws_url}/ws/runs/{run_id}",
                                  additional_headers=headers) as socket:
        events = [json.loads(message) async for message in socket]
        assert socket.close_code == 1000
    assert [e["seq"] for e in events] == list(range(1, 13))
    assert events[-1]["type"] == "run_finished"


async def test_websocket_cancel_message_cancels_the_run(server):
    async with server.client() as client:
        workflow = chain(count=3, seconds=0.01)
        workflow["blocks"][1]["with"]["args"]["seconds"] = 30
        run_id = await _start(client, workflow)
    url = f"{server.ws_url}/ws/runs/{run_id}?token={server.keys['alice']}"
    messages = []
    async with websockets.connect(url) as socket:
        async for raw in socket:
            message = json.loads(raw)
            messages.append(message)
            if message.get("type") == "block_started" and message["block_id"] == "b1":
                await socket.send(json.dumps({"type": "cancel"}))
    kinds = [m["type"] for m in messages]
    assert "cancel_requested" in kinds
    assert messages[-1]["type"] == "run_finished" and messages[-1]["status"] == "cancelled"
    blocks = {b["block_id"]: b for b in await server.storage.get_blocks(run_id)}
    assert blocks["b0"]["status"] == "succeeded" and blocks["b0"]["output"] == {"value": "hi"}
    assert blocks["b1"]["status"] == "cancelled"


@pytest.mark.parametrize("who, code", [(None, 4401), ("bob", 4404)])
async def test_websocket_refuses_bad_keys_and_other_users_runs(server, who, code):
    async with server.client() as client:
        run_id = await _start(client, chain(count=1, seconds=0))
    url = f"{server.ws_url}/ws/runs/{run_id}"
    if who:
        url += f"?token={server.keys[who]}"
    async with websockets.connect(url) as socket:
        message = json.loads(await socket.recv())
        with pytest.raises(websockets.ConnectionClosed):
            await socket.recv()
    assert message["type"] == "error" and socket.close_code == code


async def test_websocket_answers_unknown_messages_with_an_error(server):
    async with server.client() as client:
        workflow = chain(count=1, seconds=0.5)
        run_id = await _start(client, workflow)
    url = f"{server.ws_url}/ws/runs/{run_id}?token={server.keys['alice']}"
    async with websockets.connect(url) as socket:
        await socket.send("pause")
        replies = [json.loads(m) async for m in socket]
    errors = [m for m in replies if m.get("type") == "error"]
    assert errors and "cancel" in errors[0]["error"]["message"]
    assert replies[-1]["type"] == "run_finished" and replies[-1]["status"] == "succeeded"

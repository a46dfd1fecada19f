"""Approvals through the API: the run waits (nothing in memory), its owner
or an admin decides, the run continues (also on a restarted server), another
user gets 404; timeouts and long waits are resumed by the server itself."""

from __future__ import annotations

import asyncio
import json

import websockets

from tests.server.conftest import read_sse, start_server, wait_for_status


def _workflow(**approval) -> dict:
    blocks = [
        {"id": "prepare", "type": "function",
         "with": {"function": "srv_sleep", "args": {"value": "{{input.amount}}"}}},
        {"id": "ok", "type": "approval", "after": ["prepare"],
         "with": {"message": "Refund {{input.amount}} EUR?",
                  "data": {"amount": "{{prepare.value}}"}, **approval}},
        {"id": "pay", "type": "function", "after": ["ok"],
         "with": {"function": "srv_sleep", "args": {"value": "paid"}}}]
    if approval.get("on_reject"):
        blocks.append({"id": "refuse", "type": "function", "after": ["ok"],
                       "with": {"function": "srv_sleep", "args": {"value": "refused"}}})
    return {"id": "refund", "inputs": {"amount": {"type": "number", "default": 30}},
            "blocks": blocks}


async def _waiting(live, client, **approval) -> str:
    assert (await client.post("/api/workflows", json=_workflow(**approval))).status_code \
        in (200, 201)
    body = (await client.post("/api/workflows/refund/runs?wait=true", json={})).json()
    assert body["status"] == "waiting", body
    detail = (await client.get(f"/api/runs/{body['run_id']}")).json()
    assert detail["status"] == "waiting"
    shown = detail["blocks"]["ok"]
    assert shown["status"] == "waiting" and shown["output"]["message"] == "Refund 30 EUR?"
    assert shown["output"]["data"] == {"amount": 30}
    return body["run_id"]


async def test_owner_approves_after_a_server_restart_and_others_get_404(tmp_path):
    url = f"sqlite:///{tmp_path / 'server.db'}"
    first, stop_first = await start_server(url, resume_interval=0)
    async with first.client("alice") as alice:
        run_id = await _waiting(first, alice)
    await stop_first()
    second, stop = await start_server(url, users_of=first, resume_interval=0)
    try:
        async with second.client("alice") as alice, second.client("bob") as bob:
            denied = await bob.post(f"/api/runs/{run_id}/approvals/ok",
                                    json={"decision": "approve"})
            assert denied.status_code == 404
            wrong = await alice.post(f"/api/runs/{run_id}/approvals/pay",
                                     json={"decision": "approve"})
            assert wrong.status_code == 404 and "not waiting for a decision" in wrong.text
            bad = await alice.post(f"/api/runs/{run_id}/approvals/ok",
                                   json={"decision": "maybe"})
            assert bad.status_code == 422
            done = await alice.post(f"/api/runs/{run_id}/approvals/ok?wait=true",
                                    json={"decision": "approve", "comment": "ok by me"})
            assert done.status_code == 200, done.text
            result = done.json()
            assert result["status"] == "succeeded" and result["results"]["pay"]["value"] == "paid"
            decision = result["results"]["ok"]
            assert decision["by"] == "alice" and decision["comment"] == "ok by me"
            assert decision["decision"] == "approve" and decision["at"]
            again = await alice.post(f"/api/runs/{run_id}/approvals/ok",
                                     json={"decision": "approve"})
            assert again.status_code == 409
            stored = (await alice.get(f"/api/runs/{run_id}")).json()
            assert stored["status"] == "succeeded"
            assert stored["blocks"]["ok"]["output"]["by"] == "alice"
            assert stored["blocks"]["prepare"]["status"] == "succeeded"
    finally:
        await stop()


async def test_admin_rejects_to_on_reject_and_rejection_without_it_fails(server):
    async with server.client("alice") as alice, server.client("admin") as admin:
        run_id = await _waiting(server, alice, on_reject="refuse")
        started = await admin.post(f"/api/runs/{run_id}/approvals/ok",
                                   json={"decision": "reject", "comment": "too much"})
        assert started.status_code == 202 and started.json()["by"] == "admin"
        row = await wait_for_status(server, run_id, "succeeded", "failed")
        detail = (await alice.get(f"/api/runs/{run_id}")).json()
        assert row["status"] == "succeeded"
        assert detail["blocks"]["pay"]["status"] == "skipped"
        assert detail["blocks"]["refuse"]["output"] == {"value": "refused"}
        assert detail["blocks"]["ok"]["output"]["decision"] == "reject"

        run_id = await _waiting(server, alice)
        result = (await alice.post(f"/api/runs/{run_id}/approvals/ok?wait=true",
                                   json={"decision": "reject", "comment": "no"})).json()
        assert result["status"] == "failed"
        assert "rejected by alice: no" in result["blocks"]["ok"]["error"]


async def test_the_server_resumes_timeouts_and_long_waits_when_due(tmp_path):
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}",
                                    resume_interval=0.1)
    try:
        async with live.client("alice") as alice:
            run_id = await _waiting(live, alice, timeout=0.3, default="approve")
            row = await wait_for_status(live, run_id, "succeeded", "failed", timeout=10)
            assert row["status"] == "succeeded"
            detail = (await alice.get(f"/api/runs/{run_id}")).json()
            assert detail["blocks"]["ok"]["output"]["timed_out"] is True
            waiting = {"id": "later", "blocks": [
                {"id": "pause", "type": "wait", "with": {"seconds": 0.3, "sleep_limit": 0}}]}
            assert (await alice.post("/api/workflows", json=waiting)).status_code == 201
            body = (await alice.post("/api/workflows/later/runs?wait=true", json={})).json()
            assert body["status"] == "waiting"
            row = await wait_for_status(live, body["run_id"], "succeeded", timeout=10)
            assert row["resume_at"] is None
    finally:
        await stop()


async def test_cancelling_a_waiting_run(server):
    async with server.client("alice") as alice:
        run_id = await _waiting(server, alice)
        cancelled = await alice.post(f"/api/runs/{run_id}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        late = await alice.post(f"/api/runs/{run_id}/approvals/ok", json={"decision": "approve"})
        assert late.status_code == 409 and "cancelled" in late.text


async def test_followers_over_sse_and_websocket_learn_the_run_waits_and_follow_it_across_the_decision(
        tmp_path):
    """A run that stops at an approval has one `run_waiting` (its stream ends
    there, the blocks after the approval pending, never skipped) and one
    `run_finished` once decided; a follower reconnecting after the stop's seq
    gets the rest, once each."""
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}", resume_interval=0)
    try:
        async with live.client("alice") as alice:
            run_id = await _waiting(live, alice)
            first = await read_sse(alice, f"/api/runs/{run_id}/events")
            headers = {"Authorization": f"Bearer {live.keys['alice']}"}
            async with websockets.connect(f"{live.ws_url}/ws/runs/{run_id}",
                                          additional_headers=headers) as socket:
                over_ws = [json.loads(message) async for message in socket]
                assert socket.close_code == 1000
            assert over_ws == first
            stop_event = first[-1]
            assert stop_event["type"] == "run_waiting" and stop_event["pending"] == {"pay": "ok"}
            assert [w["block_id"] for w in stop_event["waiting_on"]] == ["ok"]
            assert not [e for e in first if e["type"] in ("block_skipped", "run_finished")]
            detail = (await alice.get(f"/api/runs/{run_id}")).json()
            assert "pay" not in detail["blocks"] or detail["blocks"]["pay"]["status"] != "skipped"

            async def rest_over_ws() -> list[dict]:
                async with websockets.connect(
                        f"{live.ws_url}/ws/runs/{run_id}?after={stop_event['seq']}",
                        additional_headers=headers) as socket:
                    return [json.loads(message) async for message in socket]

            following = asyncio.ensure_future(rest_over_ws())
            await asyncio.sleep(0.2)                  # connected, waiting with the run
            done = await alice.post(f"/api/runs/{run_id}/approvals/ok?wait=true",
                                    json={"decision": "approve"})
            assert done.json()["status"] == "succeeded"
            rest = await asyncio.wait_for(following, 20)
            over_sse = await read_sse(alice, f"/api/runs/{run_id}/events",
                                      headers={"Last-Event-ID": str(stop_event["seq"])})
        stored = await live.storage.get_events(run_id)
    finally:
        await stop()
    assert rest == over_sse == stored[len(first):]
    assert rest[-1]["type"] == "run_finished" and rest[-1]["status"] == "succeeded"
    assert [e["type"] for e in stored].count("run_finished") == 1
    assert [e["type"] for e in stored].count("run_waiting") == 1
    ran = [e["block_id"] for e in rest if e["type"] == "block_succeeded" and not e.get("resumed")]
    assert ran == ["ok", "pay"]                 # `prepare` is replayed from its checkpoint

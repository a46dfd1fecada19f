"""One user cannot take a server from the others (issue 23): runs in progress
per user, events per run and loop passes (or parallel items) per block are
capped, each refusal a 429 or a failed run that names the block and the
setting, each cap set by the administrator.  Replayed as ordinary users."""

from __future__ import annotations

import asyncio

from tests.server.conftest import chain, start_server, wait_for_status


def looping(workflow_id: str, **loop: object) -> dict:
    return {"id": workflow_id, "blocks": [
        {"id": "spin", "type": "loop", "with": loop,
         "blocks": [{"id": "step", "type": "set", "with": {"i": "{{loop.index}}"}}]}]}


async def _run(client, workflow: dict) -> dict:
    saved = await client.post("/api/workflows", json=workflow)
    assert saved.status_code == 201, saved.text
    started = await client.post(f"/api/workflows/{workflow['id']}/runs?wait=true", json={})
    assert started.status_code == 200, started.text
    return started.json()


async def test_a_user_at_the_cap_of_runs_in_progress_gets_429_and_others_do_not(tmp_path):
    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}", max_user_runs=2)
    try:
        slow = chain("slow", count=1, seconds=30)
        async with live.client("alice") as alice, live.client("bob") as bob:
            assert (await alice.post("/api/workflows", json=slow)).status_code == 201
            assert (await bob.post("/api/workflows", json=slow)).status_code == 201
            first = (await alice.post("/api/workflows/slow/runs", json={})).json()["run_id"]
            assert (await alice.post("/api/workflows/slow/runs", json={})).status_code == 202
            refused = await alice.post("/api/workflows/slow/runs", json={})
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "5"
            error = refused.json()["error"]
            assert error["code"] == "too_many_runs"
            assert "2 runs in progress" in error["message"]
            assert "FLOWFORGE_MAX_USER_RUNS" in error["message"]
            # another user is not held back by alice's runs
            assert (await bob.post("/api/workflows/slow/runs", json={})).status_code == 202
            # a run that ends gives its slot back
            assert (await alice.post(f"/api/runs/{first}/cancel")).status_code == 200
            await wait_for_status(live, first, "cancelled")
            for _ in range(50):
                again = await alice.post("/api/workflows/slow/runs", json={})
                if again.status_code != 429:
                    break
                await asyncio.sleep(0.05)
            assert again.status_code == 202, again.text
            for run in await live.storage.list_runs(status="running"):
                await alice.post(f"/api/runs/{run['run_id']}/cancel")
                await bob.post(f"/api/runs/{run['run_id']}/cancel")
    finally:
        await stop()


async def test_a_loop_over_the_pass_cap_fails_before_doing_the_work(tmp_path):
    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}", max_loop_passes=50)
    try:
        async with live.client() as alice:
            result = await _run(alice, looping("flood", times=100_000, max_iterations=100_000))
            until = await _run(alice, looping("until", until="step.i < 0",
                                              max_iterations=100_000))
            fits = await _run(alice, looping("fits", times=50, max_iterations=50))
            mapped = await _run(alice, {"id": "wide", "inputs": {}, "blocks": [
                {"id": "fan", "type": "parallel", "with": {"for_each": list(range(51))},
                 "blocks": [{"id": "one", "type": "set", "with": {"i": "{{loop.item}}"}}]}]})
    finally:
        await stop()
    assert result["status"] == "failed"
    message = result["blocks"]["spin"]["error"]
    assert "loop 'spin' would run 100000 passes" in message
    assert "limit of 50" in message and "FLOWFORGE_MAX_LOOP_PASSES" in message
    assert not any(e["type"] == "block_started" and e.get("block_id") == "step"
                   for e in result["events"])                  # no pass ran
    assert until["status"] == "failed"
    assert "more than 50 passes" in until["blocks"]["spin"]["error"]
    assert sum(e["type"] == "block_started" and e.get("block_id") == "step"
               for e in until["events"]) == 50
    assert fits["status"] == "succeeded" and fits["results"]["spin"]["count"] == 50
    assert mapped["status"] == "failed"
    assert "parallel 'fan' would run 51 items" in mapped["blocks"]["fan"]["error"]


async def test_a_run_past_the_event_cap_fails_naming_the_block(tmp_path):
    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}", max_run_events=300,
                                    max_loop_passes=0)
    try:
        async with live.client() as alice:
            result = await _run(alice, looping("noisy", times=10_000, max_iterations=10_000))
    finally:
        await stop()
    assert result["status"] == "failed"
    message = result["blocks"]["spin"]["error"]
    assert "limit of 300 events per run" in message and "FLOWFORGE_MAX_RUN_EVENTS" in message
    assert "step" in message                                       # the block that was refused
    assert len(result["events"]) < 320                             # it stopped at the cap


async def test_the_caps_are_the_servers_not_the_documents(tmp_path):
    """The same loop runs in full where the administrator set no cap."""
    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}", max_loop_passes=0,
                                    max_run_events=0)
    try:
        async with live.client() as alice:
            result = await _run(alice, looping("long", times=1_200, max_iterations=1_200))
    finally:
        await stop()
    assert result["status"] == "succeeded" and result["results"]["spin"]["count"] == 1_200

"""`flowforge serve --workers celery`: the server enqueues, a worker runs, and the
server's SSE clients see every event of the run (stored first), its webhook and
its cancel work as for a run of its own."""

from __future__ import annotations

from tests.server.conftest import read_sse, start_server
from tests.workers.test_pool import chain


async def test_the_server_sends_runs_to_the_pool_and_streams_their_events(pool, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    pool.start()
    live, stop = await start_server(pool.database, workers="celery")
    try:
        async with live.client("alice") as alice:
            saved = await alice.post("/api/workflows", json=chain(3, 0.05, tmp_path / "log"))
            assert saved.status_code == 201, saved.text
            started = await alice.post("/api/workflows/chain/runs", json={})
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            events = await read_sse(alice, f"/api/runs/{run_id}/events")
            kinds = [e["type"] for e in events]
            assert kinds[0] == "run_queued" and kinds[-1] == "run_finished"
            assert kinds.count("block_succeeded") == 3
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            shown = (await alice.get(f"/api/runs/{run_id}")).json()
            assert shown["status"] == "succeeded"
            waited = await alice.post("/api/workflows/chain/runs?wait=true", json={})
            assert waited.status_code == 200 and waited.json()["status"] == "succeeded"
        async with live.client("bob") as bob:
            assert (await bob.get(f"/api/runs/{run_id}")).status_code == 404
    finally:
        await stop()


async def test_cancel_through_the_server_reaches_the_worker(pool, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    pool.start()
    live, stop = await start_server(pool.database, workers="celery")
    try:
        async with live.client("alice") as alice:
            await alice.post("/api/workflows", json=chain(2, 30.0, tmp_path / "log"))
            run_id = (await alice.post("/api/workflows/chain/runs", json={})).json()["run_id"]
            seen = await read_sse(alice, f"/api/runs/{run_id}/events", stop_after=3)
            assert [e["type"] for e in seen][:2] == ["run_queued", "run_started"]
            cancelled = await alice.post(f"/api/runs/{run_id}/cancel")
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["status"] == "cancelled"
    finally:
        await stop()

"""`flowforge serve --workers celery`: the server enqueues, a worker runs, and the
server's SSE clients see every event of the run (stored first), its webhook and
its cancel work as for a run of its own."""

from __future__ import annotations

from tests.server.conftest import read_sse, start_server, wait_for_status
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


async def test_a_decision_through_the_server_continues_the_run_on_a_worker(pool, tmp_path,
                                                                          monkeypatch):
    """`--workers celery`: the approved run goes back to the pool (the step after the
    approval runs in the worker process, not the server's), and `?wait=true` answers
    once it ended."""
    from tests.workers.test_pool_approvals import approval_doc, pids

    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    worker = pool.start()
    log = tmp_path / "steps.log"
    live, stop = await start_server(pool.database, workers="celery", resume_interval=0)
    try:
        async with live.client("alice") as alice:
            assert (await alice.post("/api/workflows", json=approval_doc(log))).status_code \
                == 201
            run_id = (await alice.post("/api/workflows/refund/runs?wait=true",
                                       json={})).json()["run_id"]
            assert (await alice.get(f"/api/runs/{run_id}")).json()["status"] == "waiting"
            done = await alice.post(f"/api/runs/{run_id}/approvals/ok?wait=true",
                                    json={"decision": "approve", "comment": "go"})
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "succeeded"
            shown = (await alice.get(f"/api/runs/{run_id}")).json()
            assert shown["blocks"]["ok"]["output"]["by"] == "alice"
            assert shown["blocks"]["pay"]["status"] == "succeeded"
    finally:
        await stop()
    assert pids(log)[1] == str(worker.pid)


async def test_the_server_sends_a_due_wait_to_the_pool(pool, tmp_path, monkeypatch):
    """A worker that does not reap: only the server's resumer finds the due run, and
    it sends it to the pool instead of running it itself."""
    from tests.workers.test_pool_approvals import pids, wait_doc

    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    worker = pool.start(options=("--no-reap",))
    log = tmp_path / "steps.log"
    doc = wait_doc(log)
    live, stop = await start_server(pool.database, workers="celery", resume_interval=0.2)
    try:
        async with live.client("alice") as alice:
            assert (await alice.post("/api/workflows", json=doc)).status_code == 201
            waited = await alice.post("/api/workflows/later/runs?wait=true", json={})
            assert waited.json()["status"] == "waiting", waited.text
            run_id = waited.json()["run_id"]
            row = await wait_for_status(live, run_id, "succeeded", "failed", timeout=60)
    finally:
        await stop()
    assert row["status"] == "succeeded"
    assert pids(log)[1] == str(worker.pid)


async def test_an_idempotency_key_makes_one_queued_run_on_the_pool(pool, tmp_path, monkeypatch):
    """`--workers celery`: requests racing with one key queue one run (one
    `run_queued`, each block run once on the worker); the key again answers it."""
    import asyncio

    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    pool.start()
    live, stop = await start_server(pool.database, workers="celery")
    log = tmp_path / "log"
    try:
        async with live.client("alice") as alice:
            saved = await alice.post("/api/workflows", json=chain(3, 0.05, log))
            assert saved.status_code == 201, saved.text
            answers = await asyncio.gather(*(
                alice.post("/api/workflows/chain/runs", json={},
                           headers={"Idempotency-Key": "pool-1"}) for _ in range(4)))
            assert sorted(a.status_code for a in answers) == [200, 200, 200, 202], \
                [a.text for a in answers]
            run_ids = {a.json()["run_id"] for a in answers}
            assert len(run_ids) == 1
            run_id = run_ids.pop()
            waited = await alice.post("/api/workflows/chain/runs?wait=true", json={},
                                      headers={"Idempotency-Key": "pool-1"})
            assert waited.status_code == 200 and waited.json()["run_id"] == run_id
            assert waited.json()["status"] == "succeeded"
            refused = await alice.post("/api/workflows/chain/runs", json={"inputs": {"x": 1}},
                                       headers={"Idempotency-Key": "pool-1"})
            assert refused.status_code == 422
        events = await live.storage.get_events(run_id)
        assert [e["type"] for e in events].count("run_queued") == 1
        assert len(await live.storage.list_runs(user_id=live.users["alice"]["user_id"])) == 1
        started = [line.split()[1] for line in log.read_text().splitlines()
                   if line.startswith("start")]
        assert started == ["0", "1", "2"]                        # each block ran once
    finally:
        await stop()


async def test_a_workflow_naming_a_stored_one_by_id_runs_on_the_pool(pool, monkeypatch):
    """A parent that runs another stored workflow by id (`workflow: greet`) runs on a
    worker as on the server itself: the worker reads the owner's stored workflows,
    and only the owner's."""
    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    pool.start()
    child = {"id": "greet", "inputs": {"name": {"type": "string"}},
             "blocks": [{"id": "out", "type": "response",
                         "with": {"message": "hello {{input.name}}"}}]}
    parent = {"id": "parent", "blocks": [
        {"id": "kid", "type": "workflow", "with": {"workflow": "greet",
                                                   "inputs": {"name": "ada"}}},
        {"id": "reply", "type": "response", "with": {"message": "{{kid.out.message}}"}}]}
    live, stop = await start_server(pool.database, workers="celery")
    try:
        async with live.client("alice") as alice:
            for document in (child, parent):
                saved = await alice.post("/api/workflows", json=document)
                assert saved.status_code == 201, saved.text
            started = await alice.post("/api/workflows/parent/runs", json={})
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            row = await wait_for_status(live, run_id, "succeeded", "failed", timeout=60)
            assert row["status"] == "succeeded", row.get("error")
            shown = (await alice.get(f"/api/runs/{run_id}")).json()
            assert shown["outputs"]["reply"]["message"] == "hello ada", shown
    finally:
        await stop()

"""A worker's resume path on PostgreSQL, where it takes a queued run's lease,
row and events in one round trip (`take_run`): a run that comes back to the
pool with checkpoints (queued again after its wait, or taken over from a
process that died) restores what succeeded and runs none of it again.

`work` runs here, in the test's process, as a worker's loop runs it: the
messages' routes are tested with real workers in test_pool.py."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

import tests.workers.plugin  # noqa: F401  (registers ww_step in this process)
from flowforge.service.cancel import LEASE_SECONDS
from flowforge.service.pool import enqueue, work
from flowforge.service.pool.reaper import HANDOFF_PREFIX
from flowforge.storage import storage_from_url
from tests.workers.test_pool import chain, cut_off_run
from tests.workers.test_pool_approvals import wait_doc


@pytest.fixture
async def postgres(tmp_path):
    from flowforge.storage.testing import temporary_schema
    from tests.shared_servers import postgres_url

    with temporary_schema(postgres_url(), "pool_") as url:
        storage = storage_from_url(url)
        await storage.open()
        try:
            yield storage
        finally:
            await storage.close()


def lines(log: Path) -> list[tuple[str, int]]:
    return [(kind, int(n)) for kind, n, *_ in (line.split() for line in
                                                log.read_text().splitlines())]


async def test_a_run_queued_again_after_its_wait_restores_what_succeeded(postgres, tmp_path,
                                                                         redis_url):
    log = tmp_path / "steps.log"
    run_id = await enqueue(wait_doc(log, seconds=0.5), storage=postgres,
                           queue=f"nobody-{uuid.uuid4().hex[:6]}", broker=redis_url)
    assert await work(run_id, postgres) == "done"            # `before` ran, then it waits
    row = await postgres.get_run(run_id)
    assert row["status"] == "waiting" and row["lease_owner"] is None
    first = {b["block_id"]: b for b in await postgres.get_blocks(run_id)}
    assert first["before"]["status"] == "succeeded" and first["pause"]["status"] == "waiting"
    await asyncio.sleep(max(0.0, row["resume_at"] - time.time()) + 0.05)
    assert await postgres.queue_waiting(run_id)     # due: what a reaper does, then sends it
    assert await work(run_id, postgres) == "done"
    row = await postgres.get_run(run_id)
    assert row["status"] == "succeeded" and row["lease_owner"] is None, row
    assert lines(log) == [("start", 0), ("end", 0), ("start", 1), ("end", 1)]
    blocks = {b["block_id"]: b for b in await postgres.get_blocks(run_id)}
    assert {k: b["status"] for k, b in blocks.items()} == \
        {"before": "succeeded", "pause": "succeeded", "after": "succeeded"}
    # restored, not run again: its first outcome and times are kept
    assert blocks["before"]["started_at"] == first["before"]["started_at"]
    assert blocks["before"]["output"] == {"n": 0}
    resumed = [e for e in await postgres.get_events(run_id) if e.get("block_id") == "before"]
    assert [e["type"] for e in resumed if not e.get("resumed")] == \
        ["block_started", "block_succeeded"]


async def test_a_run_taken_over_from_a_dead_process_runs_no_succeeded_block_again(
        postgres, tmp_path):
    """A process died mid-run (step 0 stored as succeeded, step 1 cut off); a
    reaper's takeover message brings it to a worker, which resumes it."""
    import os

    log = tmp_path / "steps.log"
    run_id, pid = cut_off_run(postgres.url, log, tmp_path, dict(os.environ), steps=3)
    row = await postgres.get_run(run_id)
    assert row["status"] == "running" and pid in row["lease_owner"]
    token = f"{HANDOFF_PREFIX}test:{uuid.uuid4().hex[:8]}"
    assert await postgres.claim_run(run_id, token, LEASE_SECONDS,
                                    expected_owner=row["lease_owner"])     # the reaper's
    assert await work(run_id, postgres, handoff="handoff:stale:copy") == "busy"
    assert await work(run_id, postgres, handoff=token) == "done"
    row = await postgres.get_run(run_id)
    assert row["status"] == "succeeded" and row["lease_owner"] is None, row
    steps = lines(log)
    assert steps.count(("start", 0)) == 1 and steps.count(("end", 0)) == 1
    assert steps.count(("start", 1)) == 2 and steps.count(("end", 1)) == 1   # cut, run again
    assert steps.count(("start", 2)) == 1 and steps.count(("end", 2)) == 1
    blocks = {b["block_id"]: b["status"] for b in await postgres.get_blocks(run_id)}
    assert blocks == {"s0": "succeeded", "s1": "succeeded", "s2": "succeeded"}


async def test_a_queued_run_a_worker_gives_up_gives_its_lease_back(postgres, redis_url,
                                                                   tmp_path):
    """The worker holds a queued run's lease from its first read on: a run
    cancelled before it started ends without it, so nothing waits for it to lapse."""
    run_id = await enqueue(chain(2, 0.01, tmp_path / "log"), storage=postgres,
                           queue=f"nobody-{uuid.uuid4().hex[:6]}", broker=redis_url)
    await postgres.update_run(run_id, cancel_requested_at=time.time())
    assert await work(run_id, postgres) == "cancelled"
    row = await postgres.get_run(run_id)
    assert row["status"] == "cancelled" and row["lease_owner"] is None
    assert await work(run_id, postgres) == "ended"         # a copy of its message: dropped

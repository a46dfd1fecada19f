"""PostgreSQL wakes a follower in one process as soon as another process
records events (LISTEN/NOTIFY), instead of at its next poll."""

from __future__ import annotations

import asyncio
import time

from flowforge.storage import storage_from_url


async def test_a_follower_wakes_on_another_processes_commit_not_its_poll(postgres_schema_url):
    follower_side = storage_from_url(postgres_schema_url)
    writer_side = storage_from_url(postgres_schema_url)
    await follower_side.open()
    await writer_side.open()
    follower_side.poll_interval = 60.0          # a poll would come far too late
    try:
        await writer_side.create_run({"run_id": "r1", "workflow_id": "w", "status": "running",
                                      "created_at": time.time()})
        seen: list[tuple[int, float]] = []

        async def follow() -> None:
            async for event in follower_side.follow_events("r1"):
                seen.append((event["seq"], time.monotonic()))

        task = asyncio.create_task(follow())
        await asyncio.sleep(0.3)                 # the follower is listening and waiting
        written = time.monotonic()
        await writer_side.record("r1", [{"seq": 1, "type": "progress", "run_id": "r1",
                                         "time": time.time()}], [])
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        await writer_side.record("r1", [{"seq": 2, "type": "run_finished", "run_id": "r1",
                                         "time": time.time()}], [])
        await asyncio.wait_for(task, 5)
    finally:
        await writer_side.close()
        await follower_side.close()
    assert [seq for seq, _ in seen] == [1, 2]
    assert seen[0][1] - written < 1.0

"""A run cut off by a lost worker is taken over before the runs still waiting in
the queue: the reaper's message goes ahead of them, so the takeover stays the
lease plus the reaper's period however long the queue is, instead of waiting
for the backlog (or the broker's visibility timeout, a minute) to clear."""

from __future__ import annotations

import time

from flowforge.service.pool import enqueue
from flowforge.storage import storage_from_url
from tests.workers.test_pool import chain, ended, wait_for


async def test_a_cut_off_run_is_resumed_ahead_of_the_queued_ones(pool, tmp_path):
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        worker = pool.start(concurrency=1)
        cut = tmp_path / "cut.log"
        cut_id = await enqueue(chain(3, 1.5, cut), storage=storage, queue=pool.queue)
        await wait_for(storage, cut_id, lambda row: "end 0" in (
            cut.read_text() if cut.exists() else ""), timeout=60)
        # two runs queue up behind it: the only worker process is busy
        waiting = [await enqueue(chain(2, 2.5, tmp_path / f"q{n}.log"), storage=storage,
                                 queue=pool.queue) for n in range(2)]
        pool.kill(worker)
        killed_at = time.time()
        pool.start(concurrency=1)
        for run_id in [cut_id, *waiting]:
            assert (await wait_for(storage, run_id, ended, timeout=90))["status"] == \
                "succeeded"
        resumed_at = min(e["time"] for e in await storage.get_events(cut_id)
                         if e["time"] > killed_at)
        second_started_at = next(e["time"] for e in await storage.get_events(waiting[1])
                                 if e["type"] == "run_started")
        # the new worker took the first queued run at once; the cut-off run came next
        assert resumed_at < second_started_at
        assert [line.split()[:2] for line in cut.read_text().splitlines()
                if line.startswith("end")] == [["end", "0"], ["end", "1"], ["end", "2"]]
    finally:
        await storage.close()

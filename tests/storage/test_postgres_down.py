"""A PostgreSQL server that goes away fails a group's writes at once, each with
the error, instead of retrying them one by one (each retry would wait for a
connection: minutes for a loop turn's 500 writes)."""

from __future__ import annotations

import asyncio
import time

from flowforge.errors import StorageError
from flowforge.storage import storage_from_url


async def test_writes_fail_together_and_fast_when_the_server_is_gone():
    from flowforge.storage import testing

    server = testing.start()
    storage = storage_from_url(server.url)
    await storage.open()
    try:
        await storage.create_run({"run_id": "r1", "workflow_id": "wf", "status": "running",
                                  "created_at": time.time()})
        testing.stop(server)
        started = time.monotonic()
        results = await asyncio.gather(*(
            storage.record("r1", [{"seq": seq, "type": "progress", "run_id": "r1",
                                   "time": 1.0}], []) for seq in range(1, 51)),
            return_exceptions=True)
        assert all(isinstance(r, StorageError) for r in results), results[:3]
        assert time.monotonic() - started < 20     # one failed try, not 50 waits
    finally:
        await asyncio.wait_for(storage.close(), 30)

"""`Storage.record_later`, the default a back end without group commit gets:
each write starts after the run's previous one is stored, so a block's later
checkpoint never lands before its earlier one, and a failure stays its own."""

from __future__ import annotations

import asyncio
import time

from flowforge.errors import StorageError
from flowforge.service.recorder import Recorder
from flowforge.storage.base import Storage
from flowforge.storage.sqlite import SQLiteStorage


class OneWriteAtATime(SQLiteStorage):
    """SQLite as a back end that only has `record` (no group commit)."""

    record_later = Storage.record_later

    async def record(self, run_id, events, blocks):
        await asyncio.sleep(0.01 if blocks and blocks[0].get("status") == "running" else 0)
        await SQLiteStorage.record_later(self, run_id, events, blocks)


async def test_the_default_stores_a_runs_writes_in_order_and_keeps_failures_apart(tmp_path):
    storage = OneWriteAtATime(tmp_path / "runs.db")
    await storage.open()
    await storage.create_run({"run_id": "r1", "workflow_id": "wf", "status": "running",
                              "created_at": time.time()})
    recorder = Recorder(storage, "r1")
    recorder({"seq": 1, "type": "block_started", "block_id": "a", "time": 1.0, "run_id": "r1"})
    await asyncio.sleep(0)                     # the slow write (running) is handed over first
    recorder({"seq": 2, "type": "block_succeeded", "block_id": "a", "time": 2.0,
              "run_id": "r1", "output": {"n": 1}})
    await recorder.close()
    [block] = await storage.get_blocks("r1")
    assert (block["status"], block["output"]) == ("succeeded", {"n": 1})

    lost = Recorder(storage, "no-such-run")
    lost({"seq": 1, "type": "run_started", "block_id": None, "time": 1.0, "run_id": "x"})
    try:
        await lost.close()
    except StorageError as exc:
        assert "no-such-run" in str(exc)
    else:
        raise AssertionError("a record of a run that does not exist was accepted")
    await storage.close()

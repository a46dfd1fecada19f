"""`Storage.record_later`, the default a back end without group commit gets:
each write starts after the run's previous one is stored, so a block's later
checkpoint never lands before its earlier one, and a failure stays its own."""

from __future__ import annotations

import asyncio
import time

import pytest

from flowforge.errors import StorageError
from flowforge.service.recorder import Recorder, StoreUnreachable
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


async def test_a_write_after_a_failed_one_is_never_stored(storage):
    """A run's write made after one that failed is refused, even when it
    alone would be fine: the stored events of a run never have a gap."""
    await storage.create_run({"run_id": "r1", "workflow_id": "wf", "status": "running",
                              "created_at": time.time()})
    event = lambda seq, **more: {"seq": seq, "type": "progress", "run_id": "r1",  # noqa: E731
                                 "time": float(seq), **more}
    await storage.record("r1", [event(1)], [])
    clash = storage.record_later("r1", [event(1, other=True)], [])   # seq 1, other content
    behind = storage.record_later("r1", [event(2)], [], after=clash)
    later = storage.record_later("r1", [event(3)], [], after=behind)
    for write in (clash, behind, later):
        try:
            await write
        except StorageError:
            continue
        raise AssertionError("a write was stored after a failed one")
    assert [e["seq"] for e in await storage.get_events("r1")] == [1]
    await storage.record_later("r1", [event(2)], [])      # a fresh start is stored
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2]


async def test_the_recorder_retries_a_failed_write_and_keeps_the_order(tmp_path):
    """A write that fails because the store is away is retried with what came
    after it, in order; a gated block waits until then."""
    storage = FlakySQLite(tmp_path / "runs.db")
    await storage.open()
    await storage.create_run({"run_id": "r1", "workflow_id": "wf", "status": "running",
                              "created_at": time.time()})
    recorder = Recorder(storage, "r1", retry=10)
    storage.failures = 3
    for seq in (1, 2, 3):
        recorder({"seq": seq, "type": "progress", "run_id": "r1", "time": float(seq)})
        await asyncio.sleep(0)
    await asyncio.wait_for(recorder.until_stored(3), 10)
    assert storage.failures == 0
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2, 3]
    recorder({"seq": 4, "type": "run_finished", "run_id": "r1", "time": 4.0})
    await recorder.close({"status": "succeeded"})
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2, 3, 4]
    assert (await storage.get_run("r1"))["status"] == "succeeded"

    storage.failures = 10 ** 6                  # the store stays away: cut off
    cut = Recorder(storage, "r1", retry=0.2)
    cut({"seq": 5, "type": "progress", "run_id": "r1", "time": 5.0})
    try:
        await asyncio.wait_for(cut.close({"status": "failed"}), 10)
    except StoreUnreachable as exc:
        assert "flowforge runs resume r1" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("a store that stayed away did not cut the run off")
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2, 3, 4]
    await storage.close()


class FlakySQLite(SQLiteStorage):
    """SQLite whose next `failures` group commits fail as a full disk does."""

    failures = 0

    def _conn(self):
        db = super()._conn()
        return _Failing(self, db) if self.failures else db


class _Failing:
    def __init__(self, storage, db):
        self.storage, self.db = storage, db

    def execute(self, sql, *args):
        if sql == "BEGIN IMMEDIATE":
            self.storage.failures -= 1
            import sqlite3
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.db, name)


async def test_a_cancelled_waiter_never_cancels_the_write_it_waits_for(storage):
    """A gated block awaits its run's write directly: cancelling the block (its
    run was cancelled) must not cancel the write, whose outcome the recorder
    needs and behind which the run's next write is chained.  The waiter's
    cancellation arrives once the write has settled."""
    await storage.create_run({"run_id": "r1", "workflow_id": "wf", "status": "running",
                              "created_at": time.time()})
    event = lambda seq: {"seq": seq, "type": "progress", "run_id": "r1",  # noqa: E731
                         "time": float(seq)}
    writes = []

    async def gated_block() -> None:
        writes.append(storage.record_later("r1", [event(1)], []))
        await writes[0]

    waiter = asyncio.get_running_loop().create_task(gated_block())
    await asyncio.sleep(0)                  # it waits: the write is handed over, not stored
    [write] = writes
    assert not write.done()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert write.done() and not write.cancelled() and write.exception() is None
    await storage.record_later("r1", [event(2)], [], after=write)
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2]

"""Two processes never run one run: a process stalled past its run's lease
(the database or the machine paused it), whose lease another process then
took, stops the run as soon as its heartbeat sees that, and writes nothing
more - neither events nor the run's row, which are the new holder's now.
Found by bench/chaos.py: a worker went on running blocks (side effects) of a
run another worker had resumed."""

from __future__ import annotations

import asyncio
import time

import pytest

import flowforge
from flowforge.service import cancel
from flowforge.service.runs import RunStateError, start_run
from flowforge.storage import storage_from_url

SIDE_EFFECTS: list[str] = []


@flowforge.function("fence_step")
async def fence_step(n: int) -> dict:
    SIDE_EFFECTS.append(f"start {n}")
    await asyncio.sleep(2.0)
    SIDE_EFFECTS.append(f"end {n}")
    return {"n": n}


async def test_a_run_whose_lease_was_taken_stops_and_writes_nothing_more(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr(cancel, "LEASE_SECONDS", 0.6)       # renewed every 0.2 s
    SIDE_EFFECTS.clear()
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    await storage.open()
    storage.poll_interval = 0.05
    doc = {"id": "fenced", "blocks": [
        {"id": f"s{n}", "type": "function", "with": {"function": "fence_step", "args": {"n": n}},
         **({"after": [f"s{n - 1}"]} if n else {})} for n in range(3)]}
    try:
        handle = await start_run(doc, storage=storage)
        while "start 0" not in SIDE_EFFECTS:
            await asyncio.sleep(0.01)
        # another process takes the run over (as after this one stalled past the lease)
        await storage.update_run(handle.run_id, lease_owner="elsewhere:1:other",
                                 lease_expires_at=time.time() + 60)
        stored = await storage.get_events(handle.run_id)
        with pytest.raises(RunStateError, match="another process took its lease"):
            await asyncio.wait_for(handle.wait(), 10)
        assert SIDE_EFFECTS == ["start 0"]          # stopped in its first block
        assert await storage.get_events(handle.run_id) == stored
        row = await storage.get_run(handle.run_id)
        assert row["status"] == "running" and row["lease_owner"] == "elsewhere:1:other"
    finally:
        await storage.close()


async def test_a_run_that_ends_while_a_resumer_looks_is_not_run_again(tmp_path, monkeypatch):
    """A second message for a run (a reaper's, the broker's redelivery) can be taken
    just as the run ends: the resumer read it `running`, then its holder stored
    `run_finished` and freed the lease.  Found by bench/chaos.py: such a run got a
    second run_started ... run_finished after its end (SSE clients stop at the first)."""
    from flowforge.service import resuming
    from flowforge.service.runs import run

    SIDE_EFFECTS.clear()
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    await storage.open()
    doc = {"id": "ends", "blocks": [{"id": "only", "type": "function",
                                     "with": {"function": "fence_step", "args": {"n": 0}}}]}
    try:
        result = await run(doc, storage=storage)
        assert result.status == "succeeded"
        ended = await storage.get_run(result.run_id)
        assert ended["lease_owner"] is None
        stale = {**ended, "status": "running", "lease_owner": "vm:1:gone",
                 "lease_expires_at": 0}            # as read just before the end

        async def read_before_the_end(storage, run_id, doing):
            return stale

        monkeypatch.setattr(resuming, "stored_run", read_before_the_end)
        events = await storage.get_events(result.run_id)
        with pytest.raises(RunStateError, match="became succeeded"):
            await resuming.start_resume(result.run_id, storage=storage)
        assert await storage.get_events(result.run_id) == events
        assert SIDE_EFFECTS == ["start 0", "end 0"]
        assert (await storage.get_run(result.run_id))["status"] == "succeeded"
    finally:
        await storage.close()


TAKEN: dict = {}


@flowforge.function("fence_taken_over")
async def fence_taken_over() -> dict:
    """While it runs, another process takes the run's lease (as after this one's
    database stayed away for longer than the lease)."""
    storage, run_id = TAKEN["storage"], TAKEN["run_id"]
    await asyncio.sleep(0.2)                  # the run's first events are stored by then
    await storage.update_run(run_id, lease_owner="elsewhere:2:other",
                             lease_expires_at=time.time() + 60)
    SIDE_EFFECTS.append("taken")
    return {"done": True}


async def test_a_run_taken_over_before_it_ends_stores_neither_its_events_nor_its_outcome(
        tmp_path):
    """The fence is in the write itself, not only in the heartbeat: with the
    heartbeat far off, the last write (the block's success, `run_finished` and the
    run's row) is refused, the next block never starts, and the run stops here."""
    SIDE_EFFECTS.clear()
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    await storage.open()
    storage.poll_interval = 60.0          # the heartbeat does not come round in this test
    doc = {"id": "fenced-end", "blocks": [
        {"id": "a", "type": "function", "with": {"function": "fence_taken_over"}},
        {"id": "b", "type": "function", "with": {"function": "fence_step", "args": {"n": 1}},
         "after": ["a"]}]}
    try:
        handle = await start_run(doc, storage=storage)
        TAKEN.update(storage=storage, run_id=handle.run_id)
        with pytest.raises(RunStateError, match="another process took its lease"):
            await asyncio.wait_for(handle.wait(), 10)
        assert SIDE_EFFECTS == ["taken"]              # b never started
        events = await storage.get_events(handle.run_id)
        assert [(e["type"], e.get("block_id")) for e in events] == [
            ("run_started", None), ("block_started", "a")]
        row = await storage.get_run(handle.run_id)
        assert (row["status"], row["lease_owner"]) == ("running", "elsewhere:2:other")
    finally:
        await storage.close()

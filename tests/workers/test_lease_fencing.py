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

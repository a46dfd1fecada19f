"""A run whose PostgreSQL stays away for longer than the run's lease (issue
24): another process may take the run over as soon as the server is back.
The first process, whose in-flight block ended during the outage, then
retries its writes: each is fenced by its lease, so it stores nothing more
and starts nothing more (before, it stored the block's success and the next
block's start over the new holder's record, and ran that next block twice).
The block that was in flight runs again on the new holder - at least once is
inherent there, its success never reached the database - and the record says
so (`block_cancelled` with `runs_again`)."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

import flowforge
from flowforge.service import cancel, runs
from flowforge.service.resuming import resume
from flowforge.service.runs import RunStateError, start_run
from flowforge.storage import storage_from_url, testing

EFFECTS: list[tuple[str, str, float]] = []


@flowforge.function("takeover_step")
async def takeover_step(name: str) -> dict:
    EFFECTS.append(("start", name, time.time()))
    await asyncio.sleep(0.6)
    EFFECTS.append(("end", name, time.time()))
    return {"name": name}


@pytest.fixture(scope="module")
def server():
    """A server of this module's own, the test crashes it (durable, as in production)."""
    holder = {"server": testing.start(durable=True)}
    yield holder
    testing.stop(holder["server"])


def _stored_seqs(url: str, run_id: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute(
            "SELECT seq FROM run_events WHERE run_id = %s ORDER BY seq", (run_id,))]


def _starts(name: str) -> int:
    return sum(1 for kind, block, _ in EFFECTS if (kind, block) == ("start", name))


async def test_a_run_taken_over_during_a_long_outage_stores_and_starts_nothing_more(
        server, monkeypatch):
    monkeypatch.setattr(cancel, "LEASE_SECONDS", 1.0)
    monkeypatch.setattr(runs, "LEASE_SECONDS", 1.0)
    EFFECTS.clear()
    storage = storage_from_url(server["server"].url)
    await storage.open()
    # The heartbeat would also notice the takeover; it is held back here (as a slow
    # one would be) so that what is tested is the write the run retries, first.
    storage.poll_interval = 30.0
    doc = {"id": "takeover", "blocks": [
        {"id": f"s{n}", "type": "function",
         "with": {"function": "takeover_step", "args": {"name": f"s{n}"}},
         **({"after": [f"s{n - 1}"]} if n else {})} for n in range(4)]}
    try:
        handle = await start_run(doc, storage=storage)
        run_id = handle.run_id
        while _starts("s1") == 0:
            await asyncio.sleep(0.01)
        testing.crash(server["server"])
        await asyncio.sleep(2.5)        # s1 ends; its success cannot be stored; lease lapses
        assert ("end", "s1") in [(kind, block) for kind, block, _ in EFFECTS]
        assert _starts("s2") == 0
        # The server comes back and, before this run's loop goes on, another process
        # takes the lapsed lease (a reaper's compare-and-set) and reads the record.
        server["server"] = testing.restart(server["server"])
        url = server["server"].url
        with psycopg.connect(url, autocommit=True) as conn:
            now = time.time()
            claimed = conn.execute(
                "UPDATE runs SET lease_owner = %s, lease_expires_at = %s WHERE run_id = %s "
                "AND lease_expires_at < %s", ("elsewhere:1:b", now + 60, run_id, now)).rowcount
        assert claimed == 1, "the lease should have lapsed during the outage"
        at_takeover = _stored_seqs(url, run_id)

        with pytest.raises(RunStateError, match="another process took its lease"):
            await asyncio.wait_for(handle.wait(), 60)
        assert _stored_seqs(url, run_id) == at_takeover      # nothing stored after it
        assert _starts("s2") == 0                            # nothing started after it
        row = await storage.get_run(run_id)
        assert (row["status"], row["lease_owner"]) == ("running", "elsewhere:1:b")

        # The new holder finishes the run (here: it hands the lease to this process).
        await storage.update_run(run_id, lease_owner=None, lease_expires_at=None)
        result = await resume(run_id, storage=storage)
        assert result.status == "succeeded", result.error
        events = await storage.get_events(run_id)
    finally:
        await storage.close()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events].count("run_finished") == 1
    again = [e for e in events if e["type"] == "block_cancelled"]
    assert [(e["block_id"], e.get("runs_again")) for e in again] == [("s1", True)]
    # s1 was in flight when its process lost the run: it ran again, and only it
    assert [_starts(f"s{n}") for n in range(4)] == [1, 2, 1, 1]
    succeeded = {e["block_id"]: e["time"] for e in events if e["type"] == "block_succeeded"}
    for n in range(1, 4):                # each start after its predecessor's stored success
        starts = [at for kind, block, at in EFFECTS if (kind, block) == ("start", f"s{n}")]
        assert starts[-1] >= succeeded[f"s{n - 1}"], (n, starts, succeeded)

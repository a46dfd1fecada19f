"""SQLite's group commit (storage/sqlite_writes.py): the writes of one loop turn
share a transaction and one statement per table, yet each is stored as if alone
and in the order it was made.  (PostgreSQL commits each write by itself, on
connections of a pool, so writes made at once there have no order to keep.)"""

from __future__ import annotations

import asyncio
import time

import pytest

from flowforge.errors import StorageError
from flowforge.storage.sqlite import SQLiteStorage


@pytest.fixture
async def storage(tmp_path):
    store = SQLiteStorage(tmp_path / "flowforge.db")
    await store.open()
    yield store
    await store.close()


def _run(run_id: str, **extra):
    return {"run_id": run_id, "workflow_id": "wf", "status": extra.pop("status", "running"),
            "created_at": time.time(), **extra}


def _event(seq: int, kind: str = "progress", **data):
    return {"seq": seq, "type": kind, "run_id": "r", "time": 1000.0 + seq, **data}


async def test_writes_made_in_one_moment_are_stored_in_the_order_they_were_made(storage):
    # A run created, recorded and finished in one loop turn (SQLite stores the
    # turn's writes together, one statement per table): the later write wins.
    await asyncio.gather(
        storage.create_run(_run("r1", status="queued")),
        storage.record("r1", [_event(1, "run_started")], [{"block_id": "a", "status": "running"}]),
        storage.update_run("r1", status="running", error="first"),
        storage.record("r1", [_event(2)], [{"block_id": "a", "status": "succeeded",
                                            "output": {"n": 1}}]),
        storage.update_run("r1", status="succeeded", error=None, outputs={"n": 1}),
        storage.create_run(_run("r2")),
        storage.update_run("r2", status="failed", error="boom"))
    first, second = await storage.get_run("r1"), await storage.get_run("r2")
    assert (first["status"], first["error"], first["outputs"]) == ("succeeded", None, {"n": 1})
    assert (second["status"], second["error"]) == ("failed", "boom")
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2]
    [block] = await storage.get_blocks("r1")
    assert (block["status"], block["output"]) == ("succeeded", {"n": 1})


async def test_a_bad_write_in_a_group_fails_alone_and_the_others_keep_their_order(storage):
    await storage.create_run(_run("r1"))
    results = await asyncio.gather(
        storage.update_run("r1", status="running", error="first"),
        storage.record("missing", [_event(1)], []),              # no run row: refused
        storage.update_run("r1", status="succeeded", error=None),
        return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StorageError) and "missing" in str(results[1])
    assert (await storage.get_run("r1"))["status"] == "succeeded"


async def test_the_log_is_checkpointed_by_a_thread_not_by_commits(storage, tmp_path):
    # The loop's connection never checkpoints (a commit would stall every run
    # while pages are copied); the thread copies the log into the database file.
    assert storage._conn().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    database = tmp_path / "flowforge.db"
    before = database.stat().st_size
    for index in range(30):
        await asyncio.gather(*(storage.create_run(_run(f"r{index}-{n}", document={"x": "y" * 300}))
                               for n in range(400)))
        await asyncio.sleep(0.01)
    for _ in range(200):                          # the thread works beside the loop
        if database.stat().st_size > before + 1_000_000:
            break
        await asyncio.sleep(0.05)
    assert database.stat().st_size > before + 1_000_000, "nothing was checkpointed"
    assert len(await storage.list_runs(limit=20_000)) == 12_000


async def test_while_another_process_holds_the_write_lock_the_loop_goes_on(storage, tmp_path):
    # Another process (here: another connection) writing to the file holds its
    # write lock; the writes made meanwhile wait for it without holding up the
    # event loop (SQLite's busy handler used to sleep on the loop's thread, every
    # run of a worker process with it), keep their order, and are stored once
    # the lock is free.  A lease's compare-and-set waits the same way.
    import sqlite3

    await storage.create_run(_run("r1", status="queued"))
    other = sqlite3.connect(tmp_path / "flowforge.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        writes = asyncio.gather(
            storage.update_run("r1", status="running", error="first"),
            storage.claim_run("r1", "me", 30.0),
            storage.update_run("r1", error="second"))
        loop = asyncio.get_running_loop()
        began = loop.time()
        for _ in range(20):                      # ~20 ms of a loop that keeps running
            await asyncio.sleep(0.001)
        # (held up, the loop took the busy timeout, 10 s, for the first write alone)
        assert loop.time() - began < 5.0 and not writes.done()
    finally:
        other.execute("COMMIT")
        other.close()
    results = await asyncio.wait_for(writes, 5)
    assert results == [None, True, None]
    row = await storage.get_run("r1")
    assert (row["status"], row["error"], row["lease_owner"]) == ("running", "second", "me")


async def test_a_group_of_big_events_commits_in_parts_in_order_with_the_loop_free_between(
        storage, monkeypatch):
    """One transaction on the loop's thread holds every other request: a loop
    turn's writes holding megabytes commit in groups of at most GROUP_BYTES,
    one per turn, in the order they were made."""
    from flowforge.storage import sqlite_writes

    monkeypatch.setattr(sqlite_writes, "GROUP_BYTES", 250_000)
    committed: list[int] = []
    real = sqlite_writes.commit_group

    def counting(db, batch, **options):
        committed.append(len(batch))
        return real(db, batch, **options)

    monkeypatch.setattr(sqlite_writes, "commit_group", counting)
    await asyncio.gather(*(storage.create_run(_run(f"r{k}")) for k in range(4)))
    committed.clear()
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.ensure_future(count_turns())
    big = "x" * 100_000
    await asyncio.gather(*(storage.record(f"r{k}", [_event(seq, text=big)], [])
                           for seq in (1, 2) for k in range(4)))
    counter.cancel()
    assert committed == [2, 2, 2, 2]       # a group holds at most 250 KB (2 x 100 KB)
    assert turns >= 3                      # other work ran between the groups
    for k in range(4):
        assert [e["seq"] for e in await storage.get_events(f"r{k}")] == [1, 2]
        assert (await storage.get_events(f"r{k}"))[0]["text"] == big


async def test_a_big_event_is_stored_as_text_and_reads_back_exactly(storage):
    """Events reach SQLite as orjson's UTF-8 bytes (no str made on the loop) and
    are stored as TEXT, as before: a megabytes event with non-ASCII text reads
    back equal, SQL's JSON functions read the column, and a row an older
    version stored as text reads as it did."""
    await storage.create_run(_run("r1"))
    text = ("héllo ☃ 𝄞 \"quoted\" \\ \n" * 100_000)[:2_000_000]
    await storage.record("r1", [_event(1, text=text, n=2**40)], [])
    db = storage._conn()
    db.execute("INSERT INTO run_events (run_id, seq, type, block_id, time, data) "
               "VALUES ('r1', 2, 'progress', NULL, 1002.0, ?)",
               ('{"seq": 2, "type": "progress", "run_id": "r1", "text": "é"}',))
    first, second = await storage.get_events("r1")
    assert first["text"] == text and first["n"] == 2**40
    assert second["text"] == "é"
    assert tuple(db.execute("SELECT typeof(data), json_extract(data, '$.n') FROM run_events "
                            "WHERE seq = 1").fetchone()) == ("text", 2**40)
    # replayed as it was stored (a resumed run): accepted, not a conflict
    await storage.record("r1", [_event(1, text=text, n=2**40)], [])


async def test_one_write_of_big_events_commits_in_parts_each_event_whole(storage, monkeypatch):
    """A run's write may hold megabytes (every event of the blocks that ran in
    one turn, and its outcome): its events commit in groups of at most
    GROUP_BYTES, one per loop turn, each event whole and in order, the run's
    outcome with the last of them; the write is settled once all are stored."""
    from flowforge.storage import sqlite_writes

    monkeypatch.setattr(sqlite_writes, "GROUP_BYTES", 250_000)
    committed: list[list[int]] = []
    real = sqlite_writes.commit_group

    def counting(db, batch, **options):
        committed.append([len(w.events) for w in batch])
        return real(db, batch, **options)

    monkeypatch.setattr(sqlite_writes, "commit_group", counting)
    await storage.create_run(_run("r1"))
    committed.clear()
    big = "x" * 100_000
    seen: list[tuple[int, str]] = []

    async def watch() -> None:           # what a reader sees between the parts
        while True:
            row = await storage.get_run("r1")
            seen.append((len(await storage.get_events("r1")), row["status"]))
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch())
    await storage.record_later("r1", [_event(seq, text=big) for seq in range(1, 6)], (),
                               update={"status": "succeeded"})
    watcher.cancel()
    assert committed == [[2], [2], [1]]
    assert (2, "running") in seen and (4, "running") in seen     # a prefix, never a gap
    assert all(status == "running" for count, status in seen if count < 5)
    events = await storage.get_events("r1")
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5] and all(e["text"] == big
                                                                 for e in events)
    assert (await storage.get_run("r1"))["status"] == "succeeded"


async def test_a_write_in_parts_whose_first_part_fails_stores_nothing_after_it(
        storage, monkeypatch):
    from flowforge.storage import sqlite_writes

    monkeypatch.setattr(sqlite_writes, "GROUP_BYTES", 250_000)
    big = "x" * 100_000
    with pytest.raises(StorageError, match="missing"):      # no run row: refused
        await storage.record_later("missing", [_event(s, text=big) for s in (1, 2, 3)], ())
    assert await storage.get_events("missing") == []


async def test_an_event_orjson_refuses_is_stored_in_its_group_with_the_others(storage):
    # A group's events are encoded a list at a time; an integer beyond 64 bits
    # (orjson refuses it) sends that group through the standard encoder: every
    # event of it is stored, the big integer exactly, none lost or reordered.
    await storage.create_run(_run("r1"))
    await storage.create_run(_run("r2"))
    await asyncio.gather(
        storage.record("r1", [_event(1, "run_started"), _event(2, big=2 ** 70)], []),
        storage.record("r2", [_event(1, "run_started", text="é")], []))
    first = await storage.get_events("r1")
    assert [e["seq"] for e in first] == [1, 2] and first[1]["big"] == 2 ** 70
    assert (await storage.get_events("r2"))[0]["text"] == "é"

"""Idempotency keys of submitted runs, on every back end (the `storage`
fixture runs each test on SQLite and on PostgreSQL): a key is stored in its
run's row, unique per user, so two submissions with one key make one run
however they interleave - in one group commit, or in two processes."""

from __future__ import annotations

import asyncio
import time

import pytest

from flowforge.errors import StorageError
from flowforge.storage import storage_from_url
from flowforge.storage.base import AlreadyExists, IdempotencyKeyTaken


def _run(run_id: str, user_id: str | None = "ann", key: str | None = None, **extra):
    return {"run_id": run_id, "workflow_id": "wf", "status": "running",
            "created_at": time.time(), "user_id": user_id, "idempotency_key": key,
            "request_fingerprint": extra.pop("fingerprint", "f1" if key else None), **extra}


async def test_a_key_makes_one_run_per_user(storage):
    await storage.create_run(_run("r1", key="k-1", inputs={"a": 1}))
    with pytest.raises(IdempotencyKeyTaken) as taken:
        await storage.create_run(_run("r2", key="k-1", fingerprint="other"))
    assert isinstance(taken.value, AlreadyExists)
    assert (taken.value.user_id, taken.value.key) == ("ann", "k-1")
    assert await storage.get_run("r2") is None                 # nothing of it was stored
    found = await storage.run_for_idempotency_key("ann", "k-1")
    assert (found["run_id"], found["request_fingerprint"], found["inputs"]) == \
        ("r1", "f1", {"a": 1})
    await storage.create_run(_run("r3", user_id="bob", key="k-1"))   # keys are per user
    assert (await storage.run_for_idempotency_key("bob", "k-1"))["run_id"] == "r3"
    assert await storage.run_for_idempotency_key("ann", "k-2") is None
    for index in range(3):                                       # runs without a key: any number
        await storage.create_run(_run(f"plain{index}"))
    assert len(await storage.list_runs(user_id="ann")) == 4


async def test_one_group_with_a_key_twice_stores_one_run_and_every_other_write(storage):
    writes = [storage.create_run(_run(f"dup{index}", key="same")) for index in range(5)]
    writes += [storage.create_run(_run(f"other{index}", key=f"k{index}")) for index in range(3)]
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    created = [index for index, outcome in enumerate(outcomes[:5]) if outcome is None]
    assert len(created) == 1
    assert all(isinstance(outcome, IdempotencyKeyTaken) for index, outcome in
               enumerate(outcomes[:5]) if index not in created)
    assert outcomes[5:] == [None, None, None]
    winner = await storage.run_for_idempotency_key("ann", "same")
    assert winner["run_id"] == f"dup{created[0]}"
    assert len(await storage.list_runs(user_id="ann")) == 4


async def test_two_connections_racing_with_one_key_store_one_run(storage, storage_url):
    other = storage_from_url(storage_url)
    await other.open()
    try:
        for attempt in range(5):
            key = f"race-{attempt}"
            outcomes = await asyncio.gather(
                storage.create_run(_run(f"a{attempt}", key=key)),
                other.create_run(_run(f"b{attempt}", key=key)), return_exceptions=True)
            assert sorted(type(o).__name__ for o in outcomes) == \
                ["IdempotencyKeyTaken", "NoneType"], outcomes
            won = "a" if outcomes[0] is None else "b"
            assert (await other.run_for_idempotency_key("ann", key))["run_id"] == \
                f"{won}{attempt}"
    finally:
        await other.close()


async def test_a_run_id_clash_is_not_mistaken_for_a_key_clash(storage):
    await storage.create_run(_run("r1", key="k-1"))
    with pytest.raises(StorageError) as error:
        await storage.create_run(_run("r1", key="k-2"))
    assert not isinstance(error.value, IdempotencyKeyTaken)


async def test_a_key_without_a_user_is_refused(storage):
    with pytest.raises(StorageError, match="idempotency key needs the run's user_id"):
        await storage.create_run(_run("r1", user_id=None, key="k-1"))
    assert await storage.get_run("r1") is None

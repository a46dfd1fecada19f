"""One conformance suite for every storage back end (SQLite and PostgreSQL).

A back end is correct when it passes all of these; a new back end adds a
parameter to the `storage` fixture and nothing else."""

from __future__ import annotations

import asyncio
import time

import pytest

from flowforge.errors import StorageError
from flowforge.storage import storage_from_url
from flowforge.storage.base import AlreadyExists


def _run(run_id: str, **extra):
    return {"run_id": run_id, "workflow_id": extra.pop("workflow_id", "wf"),
            "status": extra.pop("status", "running"), "created_at": extra.pop("created_at",
                                                                                 time.time()),
            **extra}


def _event(seq: int, kind: str = "progress", **data):
    return {"seq": seq, "type": kind, "run_id": "r", "time": 1000.0 + seq, **data}


# -- lifecycle and migrations ------------------------------------------------------------

async def test_reopening_keeps_rows_and_applies_no_migration_twice(storage_url):
    first = storage_from_url(storage_url)
    await first.open()
    await first.create_run(_run("r1"))
    await first.close()
    second = storage_from_url(storage_url)
    await second.open()
    try:
        assert (await second.get_run("r1"))["workflow_id"] == "wf"
    finally:
        await second.close()


async def test_a_closed_storage_says_how_to_open_it(storage_url):
    store = storage_from_url(storage_url)
    with pytest.raises(StorageError, match="open"):
        await store.get_run("r1")


# -- runs --------------------------------------------------------------------------------

async def test_run_round_trip_keeps_json_values_exactly(storage):
    inputs = {"text": "héllo ✓", "nested": {"list": [1, 2.5, None, True]}, "nul": "a\x00b",
              "order": {"z": 1, "a": 2, "m": 3}}
    await storage.create_run(_run("r1", inputs=inputs, user_id="ann", workflow_version=3,
                                  document={"id": "wf"}, webhook="http://127.0.0.1:1/hook"))
    run = await storage.get_run("r1")
    assert run["inputs"] == inputs
    assert list(run["inputs"]["order"]) == ["z", "a", "m"]
    assert run["workflow_version"] == 3 and run["user_id"] == "ann"
    assert run["document"] == {"id": "wf"} and run["webhook"] == "http://127.0.0.1:1/hook"
    assert run["outputs"] is None and run["finished_at"] is None


async def test_update_run_changes_only_the_named_columns(storage):
    await storage.create_run(_run("r1", inputs={"a": 1}))
    await storage.update_run("r1", status="succeeded", outputs={"out": {"x": 1}},
                             finished_at=5.0)
    run = await storage.get_run("r1")
    assert (run["status"], run["outputs"], run["finished_at"]) == \
        ("succeeded", {"out": {"x": 1}}, 5.0)
    assert run["inputs"] == {"a": 1}
    with pytest.raises(StorageError, match="unknown run fields: bogus"):
        await storage.update_run("r1", bogus=1)


async def test_unknown_run_is_none(storage):
    assert await storage.get_run("nope") is None
    assert await storage.get_events("nope") == []
    assert await storage.get_blocks("nope") == []


async def test_list_runs_filters_newest_first_and_pages(storage):
    for index in range(5):
        await storage.create_run(_run(f"r{index}", workflow_id="a" if index % 2 else "b",
                                      user_id="ann" if index < 3 else "bob",
                                      status="succeeded" if index != 2 else "failed",
                                      created_at=100.0 + index, document={"big": "x"}))
    assert [r["run_id"] for r in await storage.list_runs()] == ["r4", "r3", "r2", "r1", "r0"]
    assert [r["run_id"] for r in await storage.list_runs(workflow_id="a")] == ["r3", "r1"]
    assert [r["run_id"] for r in await storage.list_runs(user_id="bob")] == ["r4", "r3"]
    assert [r["run_id"] for r in await storage.list_runs(status="failed")] == ["r2"]
    assert [r["run_id"] for r in await storage.list_runs(limit=2, offset=1)] == ["r3", "r2"]
    assert all("document" not in r for r in await storage.list_runs())


async def test_user_usage_since_sums_the_users_runs_of_the_period(storage):
    usage = lambda tokens, cost: {"tokens": {"prompt": 0, "completion": tokens,  # noqa: E731
                                             "total": tokens}, "cost": cost, "blocks": {}}
    await storage.create_run(_run("old", user_id="ann", created_at=50.0, usage=usage(900, 9.0)))
    await storage.create_run(_run("a1", user_id="ann", created_at=120.0, usage=usage(10, 0.25)))
    await storage.create_run(_run("a2", user_id="ann", created_at=130.0, usage=usage(5, 0.5)))
    await storage.create_run(_run("a3", user_id="ann", created_at=140.0))   # still running
    await storage.create_run(_run("b1", user_id="bob", created_at=130.0, usage=usage(7, 1.0)))
    assert await storage.user_usage_since("ann", 100.0) == {"tokens": 15, "cost": 0.75,
                                                            "runs": 3}
    assert (await storage.user_usage_since("cid", 0.0))["tokens"] == 0


async def test_due_runs_are_waiting_runs_whose_time_has_come(storage):
    await storage.create_run(_run("late", status="waiting", resume_at=90.0))
    await storage.create_run(_run("later", status="waiting", resume_at=95.0))
    await storage.create_run(_run("future", status="waiting", resume_at=500.0))
    await storage.create_run(_run("approval", status="waiting"))          # no time: a person
    await storage.create_run(_run("done", status="succeeded", resume_at=10.0))
    assert await storage.due_runs(100.0) == ["late", "later"]
    await storage.update_run("late", status="running", resume_at=None)
    assert await storage.due_runs(100.0) == ["later"]
    assert (await storage.get_run("later"))["resume_at"] == 95.0


async def test_a_waiting_run_is_taken_or_cancelled_once(storage):
    await storage.create_run(_run("w1", status="waiting", resume_at=5.0))
    await storage.create_run(_run("w2", status="waiting", resume_at=5.0))
    assert await storage.take_waiting("w1") is True
    assert await storage.take_waiting("w1") is False          # a second taker loses
    row = await storage.get_run("w1")
    assert row["status"] == "running" and row["resume_at"] is None
    assert await storage.cancel_waiting("w1", 9.0) is False   # running: not this way
    assert await storage.cancel_waiting("w2", 9.0) is True
    row = await storage.get_run("w2")
    assert row["status"] == "cancelled" and row["finished_at"] == 9.0
    assert await storage.due_runs(100.0) == []


async def test_runs_created_in_the_same_instant_list_newest_insert_first(storage):
    for run_id in ("first", "second", "third"):
        await storage.create_run(_run(run_id, created_at=50.0))
    assert [r["run_id"] for r in await storage.list_runs()] == ["third", "second", "first"]


# -- events and block checkpoints ----------------------------------------------------------

async def test_record_appends_events_in_order_and_ignores_replays(storage):
    await storage.create_run(_run("r1"))
    await storage.record("r1", [_event(1, "run_started"), _event(2)], [])
    await storage.record("r1", [_event(2), _event(3, "block_started", block_id="a")], [])
    events = await storage.get_events("r1")
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert events[2] == _event(3, "block_started", block_id="a")
    assert [e["seq"] for e in await storage.get_events("r1", after_seq=2)] == [3]


async def test_block_rows_upsert_and_keep_first_recorded_order(storage):
    await storage.create_run(_run("r1"))
    await storage.record("r1", [], [{"block_id": "b", "status": "running", "started_at": 1.0,
                                     "inputs": {"q": "x"}, "type": "set"}])
    await storage.record("r1", [], [{"block_id": "a", "status": "running", "started_at": 1.5}])
    await storage.record("r1", [], [{"block_id": "b", "status": "succeeded",
                                     "output": {"v": [1]}, "finished_at": 2.0,
                                     "duration_ms": 1000.0}])
    await storage.record("r1", [], [{"block_id": "a", "scope": "loop[0]",
                                     "status": "succeeded"}])
    blocks = await storage.get_blocks("r1")
    assert [(b["scope"], b["block_id"]) for b in blocks] == [("", "b"), ("", "a"),
                                                             ("loop[0]", "a")]
    b = blocks[0]
    assert (b["status"], b["inputs"], b["output"], b["started_at"], b["finished_at"],
            b["type"]) == ("succeeded", {"q": "x"}, {"v": [1]}, 1.0, 2.0, "set")


async def test_a_failed_record_stores_neither_events_nor_blocks(storage):
    await storage.create_run(_run("r1"))
    with pytest.raises(StorageError, match="r1"):
        await storage.record("r1", [_event(1)], [{"block_id": None, "status": "succeeded"}])
    assert await storage.get_events("r1") == []
    assert await storage.get_blocks("r1") == []


async def test_concurrent_records_of_many_runs_all_land(storage):
    for index in range(30):
        await storage.create_run(_run(f"r{index}"))

    async def write(run_id: str) -> None:
        for seq in range(1, 6):
            await storage.record(run_id, [_event(seq)], [{"block_id": f"b{seq}",
                                                          "status": "succeeded"}])

    await asyncio.gather(*(write(f"r{index}") for index in range(30)))
    for index in range(30):
        assert [e["seq"] for e in await storage.get_events(f"r{index}")] == [1, 2, 3, 4, 5]
        assert len(await storage.get_blocks(f"r{index}")) == 5


# -- following a run live -------------------------------------------------------------------

async def test_a_follower_gets_past_then_live_events_and_stops_at_run_finished(storage):
    await storage.create_run(_run("r1"))
    await storage.record("r1", [_event(1, "run_started")], [])
    seen: list[int] = []

    async def follow():
        async for event in storage.follow_events("r1"):
            seen.append(event["seq"])

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.02)
    for seq in (2, 3):
        await storage.record("r1", [_event(seq)], [])
        await asyncio.sleep(0)
    await storage.record("r1", [_event(4, "run_finished"), _event(5, "progress")], [])
    await asyncio.wait_for(task, 5)
    assert seen == [1, 2, 3, 4]


async def test_a_follower_resumes_after_a_sequence_number(storage):
    await storage.create_run(_run("r1"))
    await storage.record("r1", [_event(1), _event(2), _event(3, "run_finished")], [])
    seen = [e["seq"] async for e in storage.follow_events("r1", after_seq=1)]
    assert seen == [2, 3]


async def test_a_follower_of_a_run_that_ended_without_run_finished_stops(storage):
    await storage.create_run(_run("r1", status="failed"))
    await storage.record("r1", [_event(1)], [])
    seen = await asyncio.wait_for(_collect(storage.follow_events("r1")), 5)
    assert [e["seq"] for e in seen] == [1]
    assert await asyncio.wait_for(_collect(storage.follow_events("missing")), 5) == []


async def test_a_follower_sees_events_written_by_another_connection(storage, storage_url):
    await storage.create_run(_run("r1"))
    other = storage_from_url(storage_url)
    await other.open()
    try:
        task = asyncio.create_task(_collect(storage.follow_events("r1")))
        await asyncio.sleep(0.05)
        await other.record("r1", [_event(1), _event(2, "run_finished")], [])
        seen = await asyncio.wait_for(task, 5)
    finally:
        await other.close()
    assert [e["seq"] for e in seen] == [1, 2]


async def _collect(stream):
    return [event async for event in stream]


# -- memory -----------------------------------------------------------------------------------

async def test_memory_is_per_user_and_overwritten_by_key(storage):
    await storage.save_memory("ann", {"topic": "refunds", "count": 1})
    await storage.save_memory("ann", {"count": 2})
    await storage.save_memory("bob", {"topic": "billing"})
    assert await storage.get_memory("ann") == {"count": 2, "topic": "refunds"}
    assert await storage.get_memory("ann", ["topic", "absent"]) == {"topic": "refunds"}
    assert await storage.get_memory("bob") == {"topic": "billing"}
    assert await storage.get_memory("nobody") == {}


# -- workflows and versions -------------------------------------------------------------------

async def test_every_save_is_a_new_version(storage):
    assert await storage.save_workflow("ann", "desk", {"id": "desk", "name": "Desk"}) == 1
    assert await storage.save_workflow("ann", "desk", {"id": "desk", "name": "Desk 2"}) == 2
    latest = await storage.get_workflow("ann", "desk")
    assert (latest["version"], latest["latest_version"], latest["name"]) == (2, 2, "Desk 2")
    assert latest["document"] == {"id": "desk", "name": "Desk 2"}
    first = await storage.get_workflow("ann", "desk", version=1)
    assert (first["version"], first["latest_version"], first["document"]["name"]) == \
        (1, 2, "Desk")
    assert await storage.get_workflow("ann", "desk", version=9) is None
    assert [v["version"] for v in await storage.list_workflow_versions("ann", "desk")] == [1, 2]


async def test_a_version_keeps_the_text_it_was_saved_from(storage):
    text = "# the author's note\nid: desk   # keep me\nblocks: []\n"
    await storage.save_workflow("ann", "desk", {"id": "desk", "blocks": []}, text)
    await storage.save_workflow("ann", "desk", {"id": "desk", "name": "no text"})
    assert (await storage.get_workflow("ann", "desk", version=1))["source"] == text
    assert (await storage.get_workflow("ann", "desk"))["source"] is None


async def test_workflows_belong_to_their_owner(storage):
    await storage.save_workflow("ann", "desk", {"id": "desk"})
    await storage.save_workflow("bob", "desk", {"id": "desk", "name": "Bob's"})
    await storage.save_workflow("bob", "triage", {"id": "triage"})
    assert await storage.get_workflow("ann", "triage") is None
    assert (await storage.get_workflow("bob", "desk"))["name"] == "Bob's"
    assert [w["workflow_id"] for w in await storage.list_workflows("bob")] == ["desk", "triage"]
    everyone = await storage.list_workflows(None)
    assert [(w["owner"], w["workflow_id"]) for w in everyone] == \
        [("ann", "desk"), ("bob", "desk"), ("bob", "triage")]
    assert "document" not in everyone[0]


async def test_deleting_hides_a_workflow_and_saving_again_continues_the_numbers(storage):
    await storage.save_workflow("ann", "desk", {"id": "desk"})
    assert await storage.delete_workflow("ann", "desk") is True
    assert await storage.delete_workflow("ann", "desk") is False
    assert await storage.get_workflow("ann", "desk") is None
    assert await storage.list_workflow_versions("ann", "desk") == []
    assert await storage.list_workflows("ann") == []
    assert await storage.save_workflow("ann", "desk", {"id": "desk"}) == 2


async def test_list_workflows_pages(storage):
    for name in ("c", "a", "b"):
        await storage.save_workflow("ann", name, {"id": name})
    page = await storage.list_workflows("ann", limit=2, offset=1)
    assert [w["workflow_id"] for w in page] == ["b", "c"]


async def test_the_list_says_what_a_list_page_shows(storage):
    """Description and the owner's last run status come with the list: a list
    page makes one request, not one per workflow."""
    await storage.save_workflow("ann", "desk", {"id": "desk", "description": "old words"})
    await storage.save_workflow("ann", "desk", {"id": "desk", "description": "Answers"})
    await storage.save_workflow("ann", "idle", {"id": "idle"})
    await storage.create_run(_run("r1", workflow_id="desk", user_id="ann",
                                  status="failed", created_at=100.0))
    await storage.create_run(_run("r2", workflow_id="desk", user_id="ann",
                                  status="succeeded", created_at=200.0))
    await storage.create_run(_run("r3", workflow_id="desk", user_id="bob",
                                  status="running", created_at=300.0))
    rows = {w["workflow_id"]: w for w in await storage.list_workflows("ann")}
    assert (rows["desk"]["description"], rows["desk"]["last_run_status"]) == \
        ("Answers", "succeeded")
    assert (rows["idle"]["description"], rows["idle"]["last_run_status"]) == (None, None)
    assert "document" not in rows["desk"]


# -- users and keys -----------------------------------------------------------------------------

def _user(user_id: str, name: str, role: str = "user"):
    return {"user_id": user_id, "name": name, "role": role, "webhook_secret": f"s-{name}",
            "created_at": time.time()}


async def test_users_are_unique_by_name_and_found_by_id_or_name(storage):
    await storage.create_user(_user("u1", "ann", "admin"))
    await storage.create_user(_user("u2", "bob"))
    with pytest.raises(AlreadyExists, match="ann"):
        await storage.create_user(_user("u3", "ann"))
    assert (await storage.get_user("u1"))["role"] == "admin"
    assert (await storage.get_user_by_name("bob"))["user_id"] == "u2"
    assert await storage.get_user("u9") is None
    assert [u["name"] for u in await storage.list_users()] == ["ann", "bob"]


async def test_keys_are_found_by_hash_until_revoked(storage):
    await storage.create_user(_user("u1", "ann"))
    await storage.add_api_key({"key_id": "k1", "user_id": "u1", "key_hash": "h1",
                               "prefix": "ff_abc", "created_at": 1.0})
    await storage.add_api_key({"key_id": "k2", "user_id": "u1", "key_hash": "h2",
                               "prefix": "ff_def", "created_at": 2.0})
    assert (await storage.user_for_key_hash("h1"))["name"] == "ann"
    assert await storage.user_for_key_hash("nope") is None
    assert await storage.revoke_api_key("k1") is True
    assert await storage.revoke_api_key("k1") is False
    assert await storage.user_for_key_hash("h1") is None
    assert (await storage.user_for_key_hash("h2"))["user_id"] == "u1"
    keys = await storage.list_api_keys("u1")
    assert [(k["key_id"], k["revoked_at"] is not None) for k in keys] == \
        [("k1", True), ("k2", False)]


async def test_runs_recording_at_once_are_each_stored_and_one_failure_fails_only_its_run(storage):
    # SQLite commits the calls of one loop turn together; each must still stand alone.
    for run_id in ("r1", "r2"):
        await storage.create_run(_run(run_id))
    results = await asyncio.gather(
        storage.record("r1", [_event(1), _event(2)], []),
        storage.record("no-such-run", [_event(1)], []),          # no run row: refused
        storage.record("r2", [_event(1)], [{"block_id": "a", "status": "running"}]),
        return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StorageError) and "no-such-run" in str(results[1])
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2]
    assert [e["seq"] for e in await storage.get_events("r2")] == [1]
    assert [b["status"] for b in await storage.get_blocks("r2")] == ["running"]
    assert await storage.get_events("no-such-run") == []


async def test_a_record_with_the_runs_outcome_stores_both_or_neither(storage):
    # A run's last events and its final status go in one write (Recorder.close).
    await storage.create_run(_run("r1"))
    await storage.record_later("r1", [_event(1, "run_finished")], [],
                               update={"status": "succeeded", "outputs": {"a": 1}})
    row = await storage.get_run("r1")
    assert (row["status"], row["outputs"]) == ("succeeded", {"a": 1})
    assert [e["type"] for e in await storage.get_events("r1")] == ["run_finished"]
    with pytest.raises(StorageError, match="r1"):           # seq 1 holds another event
        await storage.record_later("r1", [_event(1, "other")], [],
                                   update={"status": "failed", "error": "late"})
    row = await storage.get_run("r1")
    assert (row["status"], row["error"]) == ("succeeded", None)


async def test_an_event_stored_by_an_older_encoder_replays_without_a_conflict(storage):
    # Resuming replays stored events; text written with other spacing is the same event.
    import json

    await storage.create_run(_run("r1"))
    event = _event(1, "run_started", note="é")
    await storage.record("r1", [event], [])
    older = json.dumps(event, ensure_ascii=True, indent=1)
    await storage._sql_change("UPDATE run_events SET data = " +
                              ("?" if storage.url.startswith("sqlite") else "%s") +
                              " WHERE run_id = 'r1'", (older,))
    await storage.record("r1", [event], [])                     # a replay: fine
    with pytest.raises(StorageError, match="r1"):
        await storage.record("r1", [_event(1, "run_started", note="other")], [])
    assert await storage.get_events("r1") == [event]


# -- cancel requests ------------------------------------------------------------------------------

async def test_a_cancel_request_is_seen_through_another_connection(storage, storage_url):
    # The process running a run and the one asking to cancel it share only the database.
    for run_id in ("r1", "r2", "r3"):
        await storage.create_run(_run(run_id))
    other = storage_from_url(storage_url)
    await other.open()
    try:
        assert await storage.cancel_requests(["r1", "r2", "r3"]) == set()
        await other.update_run("r2", cancel_requested_at=123.5)
    finally:
        await other.close()
    assert await storage.cancel_requests(["r1", "r2", "r3", "unknown"]) == {"r2"}
    assert await storage.cancel_requests([]) == set()
    assert (await storage.get_run("r2"))["cancel_requested_at"] == 123.5
    await storage.update_run("r2", cancel_requested_at=None)
    assert await storage.cancel_requests(["r2"]) == set()


async def test_many_run_ids_can_be_checked_at_once(storage):
    ids = [f"run-{i}" for i in range(1200)]            # past SQLite's parameter limit
    for run_id in ids[::100]:
        await storage.create_run(_run(run_id, cancel_requested_at=1.0))
    assert await storage.cancel_requests(ids) == set(ids[::100])


# -- webhook deliveries ---------------------------------------------------------------------------

async def test_delivery_attempts_are_recorded_in_order(storage):
    await storage.create_run(_run("r1"))
    await storage.add_delivery({"run_id": "r1", "attempt": 1, "url": "http://x/h",
                                "status_code": 500, "error": "HTTP 500", "succeeded": False,
                                "duration_ms": 3.5, "created_at": 1.0})
    await storage.add_delivery({"run_id": "r1", "attempt": 2, "url": "http://x/h",
                                "status_code": 200, "succeeded": True, "duration_ms": 2.0,
                                "created_at": 2.0})
    attempts = await storage.list_deliveries("r1")
    assert [(a["attempt"], a["status_code"], a["succeeded"], a["error"]) for a in attempts] == \
        [(1, 500, False, "HTTP 500"), (2, 200, True, None)]
    assert await storage.list_deliveries("other") == []


async def test_an_event_under_a_stored_seq_with_other_content_is_refused(storage):
    """Replays are idempotent, but a different event under a stored seq means
    two processes write one run: refused, never dropped silently (issue 17)."""
    await storage.create_run(_run("r1"))
    await storage.record("r1", [_event(1, "run_started"), _event(2)], [])
    with pytest.raises(StorageError, match="two processes are writing this run"):
        await storage.record("r1", [_event(2, "block_failed", block_id="other")], [])
    assert [e["type"] for e in await storage.get_events("r1")] == ["run_started",
                                                                  _event(2)["type"]]


async def test_an_owed_webhook_is_claimed_by_one_process_once_the_run_ended(storage):
    await storage.create_run(_run("r1", status="running", webhook="https://x.test/h",
                                  webhook_state="pending"))
    await storage.create_run(_run("r2", status="succeeded", webhook="https://x.test/h"))
    assert await storage.owed_webhooks(time.time()) == []            # r1 has not ended
    assert not await storage.claim_webhook("r1", ttl=60)
    await storage.update_run("r1", status="succeeded")
    assert await storage.owed_webhooks(time.time()) == ["r1"]        # r2 owes none
    assert await storage.claim_webhook("r1", ttl=60)
    assert not await storage.claim_webhook("r1", ttl=60)             # a second process
    assert await storage.owed_webhooks(time.time()) == []            # being delivered
    assert await storage.owed_webhooks(time.time() + 120) == ["r1"]  # its claim lapsed
    await storage.settle_webhook("r1", "delivered")
    row = await storage.get_run("r1")
    assert row["webhook_state"] == "delivered" and row["webhook_lease_until"] is None
    assert not await storage.claim_webhook("r1", ttl=60)             # delivered: never again
    assert await storage.owed_webhooks(time.time() + 120) == []


async def test_leases_let_one_process_run_a_run(storage):
    await storage.create_run(_run("r1"))
    assert await storage.claim_run("r1", "host:1:a", ttl=60)
    assert await storage.claim_run("r1", "host:1:a", ttl=60)          # its own: renewed
    assert not await storage.claim_run("r1", "host:2:b", ttl=60)      # held and alive
    assert await storage.claim_run("r1", "host:2:b", ttl=60, expected_owner="host:1:a")
    await storage.renew_leases(["r1"], "host:2:b", ttl=-1)             # let it lapse
    assert await storage.claim_run("r1", "host:3:c", ttl=60)           # expired: taken
    row = await storage.get_run("r1")
    assert row["lease_owner"] == "host:3:c" and row["lease_expires_at"] > 0
    # a run that ended while a resumer looked (its lease freed as it ended) is not taken
    await storage.update_run("r1", status="succeeded", lease_owner=None, lease_expires_at=None)
    assert not await storage.claim_run("r1", "host:4:d", ttl=60, expected_status="running")
    assert await storage.claim_run("r1", "host:3:c", ttl=60, expected_status="succeeded")
    # the heartbeat tells a holder that lost its lease: it must stop the run
    assert await storage.renew_leases(["r1"], "host:2:b", ttl=60) == ["r1"]
    assert await storage.renew_leases(["r1"], "host:3:c", ttl=60) == []


async def test_take_run_claims_as_claim_run_does_and_reads_what_a_resumer_needs(storage):
    """A worker takes a queued run's lease and reads its row, events and
    checkpoints in one call: the same compare-and-set as `claim_run`, and
    what it reads is what `get_run`, `get_events` and `get_blocks` say once
    the lease is held."""
    await storage.create_run(_run("r1", status="queued", inputs={"a": 1}))
    await storage.record("r1", [_event(1, "run_queued", trusted=True)], [])
    taken = await storage.take_run("r1", "host:1:a", ttl=60, expected_status="queued")
    assert taken["row"]["lease_owner"] == "host:1:a" and taken["row"]["inputs"] == {"a": 1}
    assert taken["row"] == await storage.get_run("r1")
    assert [e["type"] for e in taken["events"]] == ["run_queued"]
    assert taken["blocks"] == []                       # no block ever ran: nothing read
    # held and alive: refused, as claim_run; a status that moved on: refused
    assert await storage.take_run("r1", "host:2:b", ttl=60) is None
    assert await storage.take_run("r1", "host:1:a", ttl=60, expected_status="running") is None
    assert (await storage.get_run("r1"))["lease_owner"] == "host:1:a"
    # a run with checkpoints (queued again after a takeover): they come folded, as stored
    await storage.record("r1", [
        _event(2, "block_started", block_id="a", block_type="set", inputs={"x": 1}),
        _event(3, "block_succeeded", block_id="a", output={"y": 2}),
        _event(4, "block_started", block_id="b", block_type="set")],
        [{"scope": "", "block_id": "b", "status": "running", "reason": "kept"}])
    taken = await storage.take_run("r1", "host:2:b", ttl=60, expected_owner="host:1:a")
    assert taken["row"]["lease_owner"] == "host:2:b"
    assert [e["seq"] for e in taken["events"]] == [1, 2, 3, 4]
    assert taken["blocks"] == await storage.get_blocks("r1")
    assert [(b["block_id"], b["status"], b["output"]) for b in taken["blocks"]] == \
        [("a", "succeeded", {"y": 2}), ("b", "running", None)]
    assert taken["blocks"][1]["reason"] == "kept"
    assert await storage.take_run("nope", "host:1:a", ttl=60) is None


async def test_takes_at_once_each_get_their_own_run_and_a_run_goes_to_one_taker(storage):
    """A worker takes its messages' runs in the same moment (PostgreSQL answers
    them together): each taker gets its own run and events, and of two takers
    of one run exactly one gets it, as one after the other."""
    for n in range(4):
        await storage.create_run(_run(f"r{n}", status="queued", inputs={"n": n}))
        await storage.record(f"r{n}", [{**_event(1, "run_queued"), "run_id": f"r{n}",
                                        "n": n}], [])
    found = await asyncio.gather(
        *(storage.take_run(f"r{n}", "host:1:a", ttl=60, expected_status="queued")
          for n in range(4)),
        storage.take_run("r0", "host:2:b", ttl=60),                        # held by a
        storage.take_run("r1", "host:1:a", ttl=60, expected_status="running"),
        storage.take_run("nope", "host:1:a", ttl=60))
    for n in range(4):
        assert found[n]["row"]["run_id"] == f"r{n}" and found[n]["row"]["inputs"] == {"n": n}
        assert [e["n"] for e in found[n]["events"]] == [n] and found[n]["blocks"] == []
    assert found[4:] == [None, None, None]
    assert {(await storage.get_run(f"r{n}"))["lease_owner"] for n in range(4)} == {"host:1:a"}
    await storage.renew_leases(["r2"], "host:1:a", ttl=-1)               # r2's lapses
    second = await asyncio.gather(storage.take_run("r2", "host:2:b", ttl=60),
                                  storage.take_run("r2", "host:3:c", ttl=60))
    assert [bool(taken) for taken in second] == [True, False]
    assert (await storage.get_run("r2"))["lease_owner"] == "host:2:b"


async def test_a_write_fenced_by_a_lease_is_stored_only_while_its_owner_holds_it(storage):
    """Issue 24: a process stalled past its lease (its database away for longer)
    must store nothing once another process took the run over, whatever it had
    queued; a fenced write also extends a lease that is running out (the
    heartbeat could not renew it), so no reaper takes a run whose holder is
    storing its progress."""
    from flowforge.storage.base import LeaseLost

    await storage.create_run(_run("r1"))
    await storage.create_run(_run("r2"))
    assert await storage.claim_run("r1", "host:1:a", ttl=60)
    assert await storage.claim_run("r2", "host:1:a", ttl=0.5)        # running out
    await asyncio.gather(storage.record_later("r1", [_event(1)], [], fence=("host:1:a", 60)),
                         storage.record_later("r2", [_event(1)], [], fence=("host:1:a", 60)))
    assert (await storage.get_run("r2"))["lease_expires_at"] > time.time() + 30   # extended
    # the lease lapses; another process takes r1 over; the stalled one's writes come
    await storage.renew_leases(["r1"], "host:1:a", ttl=-1)
    assert await storage.claim_run("r1", "host:2:b", ttl=60)
    refused = storage.record_later("r1", [_event(2)], [], fence=("host:1:a", 60),
                                   update={"status": "succeeded"})
    behind = storage.record_later("r1", [_event(3)], [], after=refused,
                                  fence=("host:1:a", 60))
    other = storage.record_later("r2", [_event(2)], [], fence=("host:1:a", 60))
    results = await asyncio.gather(refused, behind, other, return_exceptions=True)
    assert isinstance(results[0], LeaseLost) and "r1" in str(results[0]), results
    assert isinstance(results[1], StorageError), results        # nothing behind it either
    assert results[2] is None                                  # its other run is unaffected
    assert [e["seq"] for e in await storage.get_events("r1")] == [1]
    row = await storage.get_run("r1")
    assert (row["status"], row["lease_owner"]) == ("running", "host:2:b")
    # the new holder's fenced writes go in; a write without a fence is not checked
    await storage.record_later("r1", [_event(2)], [], fence=("host:2:b", 60))
    await storage.record_later("r1", [_event(3)], [])
    assert [e["seq"] for e in await storage.get_events("r1")] == [1, 2, 3]
    assert [e["seq"] for e in await storage.get_events("r2")] == [1, 2]


async def test_pipelines_belong_to_their_owner_and_keep_their_json(storage):
    from flowforge.storage.base import AlreadyExists

    doc = {"id": "digest", "name": "Digest", "nodes": [{"id": "n1", "block_id": "text_clean",
                                                        "inputs": {"text": "{{input.text}}"}}],
           "edges": [], "memory_keys": []}
    made = await storage.create_pipeline("alice", doc)
    assert made["pipeline"] == doc and made["name"] == "Digest" and made["owner"] == "alice"
    with pytest.raises(AlreadyExists, match="PUT /api/pipelines/digest"):
        await storage.create_pipeline("alice", doc)
    await storage.create_pipeline("bob", {**doc, "name": "Bob's"})      # same id, other owner
    assert (await storage.get_pipeline("bob", "digest"))["name"] == "Bob's"
    changed = await storage.update_pipeline("alice", "digest", {**doc, "name": "Daily"})
    assert changed["name"] == "Daily" and changed["created_at"] == made["created_at"]
    assert await storage.update_pipeline("alice", "nothing", doc) is None
    await storage.create_pipeline("alice", {**doc, "id": "other", "name": None})
    assert [p["pipeline_id"] for p in await storage.list_pipelines("alice")] == \
        ["other", "digest"]
    assert await storage.delete_pipeline("alice", "digest")
    assert not await storage.delete_pipeline("alice", "digest")
    assert await storage.get_pipeline("alice", "digest") is None
    assert (await storage.get_pipeline("bob", "digest"))["pipeline"]["nodes"] == doc["nodes"]


async def test_chat_sessions_belong_to_their_user_and_keep_their_messages(storage):
    first = [{"role": "user", "content": "Warranty? ✓"},
             {"role": "assistant", "content": "Two years.", "sources": [{"kind": "kb",
                                                                        "title": "Warranty"}],
              "run_id": "r1"}]
    await storage.append_chat_messages("ana", "s1", first, title="Warranty? ✓")
    await storage.append_chat_messages("ana", "s1", [{"role": "user", "content": "Tents?"}],
                                       title="ignored for an existing session")
    await storage.append_chat_messages("ana", "s2", [{"role": "user", "content": "Hi"}],
                                       title="Hi")
    await storage.append_chat_messages("bob", "s1", [{"role": "user", "content": "Mine"}],
                                       title="Mine")
    found = await storage.chat_session("ana", "s1")
    assert found["messages"] == first + [{"role": "user", "content": "Tents?"}]
    assert found["title"] == "Warranty? ✓" and found["message_count"] == 3
    assert found["updated_at"] >= found["created_at"]
    listed = await storage.list_chat_sessions("ana")
    assert [s["session_id"] for s in listed] == ["s2", "s1"]         # newest first
    assert "messages" not in listed[0]
    assert (await storage.chat_session("bob", "s1"))["messages"] == [
        {"role": "user", "content": "Mine"}]
    assert await storage.chat_session("carl", "s1") is None
    assert await storage.delete_chat_session("carl", "s1") is False
    assert await storage.delete_chat_session("ana", "s1") is True
    assert await storage.chat_session("ana", "s1") is None
    assert await storage.chat_session("bob", "s1") is not None


async def test_a_schedule_firing_is_claimed_once(storage):
    import asyncio

    claims = await asyncio.gather(*(storage.claim_firing("ana", "daily", 0, 1_800_000_000.0,
                                                         f"run{i}") for i in range(5)))
    assert sorted(claims) == [False] * 4 + [True]
    assert await storage.claim_firing("ana", "daily", 1, 1_800_000_000.0, "other") is True
    assert await storage.claim_firing("bob", "daily", 0, 1_800_000_000.0, "bobs") is True
    last = await storage.last_firings("ana", "daily")
    assert set(last) == {0, 1} and last[0]["fire_at"] == 1_800_000_000.0
    assert last[1]["run_id"] == "other"

"""Runs that wait for time and for people: `wait` sleeps or stops the run
(`waiting`, resumed when due), `approval` stops it until someone decides;
both continue from the checkpoints, also from a new Storage on the same file
(a restarted process)."""

from __future__ import annotations

import asyncio
import time

import pytest
from rich.console import Console

import flowforge
from flowforge.cli.runs_view import list_runs
from flowforge.service.approvals import decide
from flowforge.service.resuming import resume_due
from flowforge.service.runs import RunStateError
from flowforge.storage import storage_from_url

COUNTS: dict[str, int] = {}


@flowforge.function("wt_count")
def count(name: str) -> dict:
    COUNTS[name] = COUNTS.get(name, 0) + 1
    return {"name": name}


def _step(block_id: str, **extra) -> dict:
    return {"id": block_id, "type": "function",
            "with": {"function": "wt_count", "args": {"name": block_id}}, **extra}


def _statuses(result) -> dict[str, str]:
    return {bid: record.status for bid, record in result.blocks.items()}


@pytest.fixture
def db(tmp_path):
    COUNTS.clear()
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def test_a_short_wait_sleeps_in_the_process():
    doc = {"id": "w", "blocks": [{"id": "pause", "type": "wait", "with": {"seconds": 0.2}},
                                 _step("after", after=["pause"])]}
    started = time.monotonic()
    result = await flowforge.run(doc, storage=False)
    assert result.status == "succeeded" and time.monotonic() - started >= 0.2
    assert result.results["pause"]["waited_seconds"] >= 0.2


async def test_cancelling_a_run_interrupts_its_wait(db):
    doc = {"id": "w", "blocks": [{"id": "pause", "type": "wait", "with": {"seconds": 20}}]}
    handle = await flowforge.start_run(doc, storage=db)
    await asyncio.sleep(0.1)
    handle.cancel()
    result = await asyncio.wait_for(handle.wait(), 5)
    assert result.status == "cancelled"


async def test_a_long_wait_frees_the_process_and_is_resumed_when_due(db):
    doc = {"id": "w", "blocks": [_step("before"),
                                 {"id": "pause", "type": "wait", "after": ["before"],
                                  "with": {"seconds": 0.5, "sleep_limit": 0}},
                                 _step("after", after=["pause"]), _step("aside")]}
    result = await flowforge.run(doc, storage=db)
    assert result.status == "waiting"
    assert _statuses(result) == {"before": "succeeded", "pause": "waiting",
                                 "after": "pending", "aside": "succeeded"}
    storage = storage_from_url(db)               # a new process: nothing in memory
    await storage.open()
    row = await storage.get_run(result.run_id)
    assert row["status"] == "waiting" and row["lease_owner"] is None
    assert row["resume_at"] == pytest.approx(time.time() + 0.5, abs=0.4)
    assert await resume_due(storage=storage) == []          # not due yet
    early = await flowforge.resume(result.run_id, storage=storage)   # early: waits again
    assert early.status == "waiting"
    await asyncio.sleep(0.6)
    [done] = await resume_due(storage=storage)
    await storage.close()
    assert done.run_id == result.run_id and done.status == "succeeded"
    assert COUNTS == {"before": 1, "aside": 1, "after": 1}     # nothing ran twice
    assert done.results["pause"]["waited_seconds"] >= 0.5


async def test_a_long_wait_inside_a_loop_sleeps(db):
    doc = {"id": "w", "blocks": [{"id": "again", "type": "loop", "with": {"times": 2},
                                  "blocks": [{"id": "pause", "type": "wait",
                                              "with": {"seconds": 0.05, "sleep_limit": 0}}]}]}
    result = await flowforge.run(doc, storage=db)
    assert result.status == "succeeded"


async def test_wait_until_a_past_time_does_not_wait_and_bad_input_is_clear():
    doc = {"id": "w", "blocks": [{"id": "pause", "type": "wait",
                                  "with": {"until": "2020-01-01T00:00:00Z"}}]}
    assert (await flowforge.run(doc, storage=False)).status == "succeeded"
    doc["blocks"][0]["with"] = {"seconds": 1, "until": "2020-01-01"}
    with pytest.raises(flowforge.ValidationFailed, match="exactly one of `seconds`"):
        flowforge.load(doc)


def _approval_doc(**extra) -> dict:
    return {"id": "pay", "inputs": {"amount": {"type": "number"}}, "blocks": [
        _step("prepare"),
        {"id": "ok", "type": "approval", "after": ["prepare"],
         "with": {"message": "Refund {{input.amount}} EUR?", "data": {"amount": "{{input.amount}}"},
                  **extra}},
        _step("pay", after=["ok"]),
        *([_step("notify")] if extra.get("on_reject") == "notify" else []),
    ]}


async def _waiting_run(db, **extra):
    doc = _approval_doc(**extra)
    if extra.get("on_reject") == "notify":
        doc["blocks"][3]["after"] = ["ok"]
    result = await flowforge.run(doc, {"amount": 30}, storage=db)
    assert result.status == "waiting" and result.blocks["ok"].status == "waiting"
    requested = [e for e in result.events if e["type"] == "approval_requested"]
    assert requested[0]["message"] == "Refund 30 EUR?" and requested[0]["data"] == {"amount": 30}
    return result


async def test_approve_continues_the_run_after_a_restart(db):
    first = await _waiting_run(db)
    storage = storage_from_url(db)
    result = await decide(first.run_id, "ok", "approve", by="ann", comment="fine",
                          storage=storage)
    assert result.status == "succeeded" and COUNTS == {"prepare": 1, "pay": 1}
    decision = result.results["ok"]
    assert decision["decision"] == "approve" and decision["by"] == "ann"
    assert decision["comment"] == "fine" and decision["data"] == {"amount": 30}
    await storage.open()
    blocks = {b["block_id"]: b for b in await storage.get_blocks(first.run_id)}
    events = await storage.get_events(first.run_id)
    await storage.close()
    assert blocks["ok"]["output"]["by"] == "ann"
    assert any(e["type"] == "approval_decided" and e["by"] == "ann" for e in events)


async def test_a_waiting_run_stops_once_and_finishes_once_with_pending_blocks_never_skipped(db):
    first = await _waiting_run(db)
    # The stop: `run_waiting` says what waits and what is held behind it; nothing
    # is "skipped" and the run has not finished.
    stop = first.events[-1]
    assert stop["type"] == "run_waiting" and stop["status"] == "waiting"
    assert [w["block_id"] for w in stop["waiting_on"]] == ["ok"]
    assert stop["pending"] == {"pay": "ok"}
    assert not any(e["type"] in ("run_finished", "block_skipped") for e in first.events)
    assert first.blocks["pay"].status == "pending"
    storage = storage_from_url(db)
    await storage.open()
    try:
        # A follower of the stored stream ends at the stop (the run waits) ...
        followed = [e async for e in storage.follow_events(first.run_id)]
        assert followed[-1]["type"] == "run_waiting"
        after = followed[-1]["seq"]
        result = await decide(first.run_id, "ok", "approve", by="ann", storage=storage)
        assert result.status == "succeeded" and _statuses(result)["pay"] == "succeeded"
        # ... and following again after it picks up the decision and the one end.
        rest = [e async for e in storage.follow_events(first.run_id, after)]
        events = await storage.get_events(first.run_id)
    finally:
        await storage.close()
    assert rest[-1]["type"] == "run_finished" and rest[-1]["status"] == "succeeded"
    assert [e["type"] for e in events].count("run_finished") == 1
    assert [e["type"] for e in events].count("run_waiting") == 1
    assert not any(e["type"] == "block_skipped" for e in events)
    # From the start, a follower now goes past the stop to the end.
    storage = storage_from_url(db)
    await storage.open()
    try:
        whole = [e async for e in storage.follow_events(first.run_id)]
    finally:
        await storage.close()
    assert whole[-1]["type"] == "run_finished" and len(whole) == len(events)


async def test_reject_routes_to_on_reject(db):
    first = await _waiting_run(db, on_reject="notify")
    result = await decide(first.run_id, "ok", "reject", by="ann", comment="too much",
                          storage=db)
    assert result.status == "succeeded"
    assert _statuses(result)["pay"] == "skipped" and COUNTS.get("notify") == 1
    assert "pay" not in COUNTS and result.results["ok"]["decision"] == "reject"


async def test_reject_without_on_reject_fails_the_run(db):
    first = await _waiting_run(db)
    result = await decide(first.run_id, "ok", "reject", by="ann", comment="no", storage=db)
    assert result.status == "failed"
    assert "rejected by ann: no" in result.blocks["ok"].error and "pay" not in COUNTS


async def test_deciding_what_is_not_waiting_is_refused(db):
    first = await _waiting_run(db)
    with pytest.raises(flowforge.NotFound, match="not waiting for a decision"):
        await decide(first.run_id, "prepare", "approve", by="ann", storage=db)
    with pytest.raises(ValueError, match="approve or reject"):
        await decide(first.run_id, "ok", "maybe", by="ann", storage=db)
    await decide(first.run_id, "ok", "approve", by="ann", storage=db)
    with pytest.raises(RunStateError, match="not waiting"):
        await decide(first.run_id, "ok", "approve", by="ann", storage=db)


async def test_timeout_takes_the_default_decision(db):
    first = await _waiting_run(db, timeout=0.3, default="approve")
    await asyncio.sleep(0.4)
    [result] = await resume_due(storage=db)
    assert result.run_id == first.run_id and result.status == "succeeded"
    assert result.results["ok"]["timed_out"] is True
    assert result.results["ok"]["decision"] == "approve" and COUNTS["pay"] == 1


async def test_cancelling_a_waiting_run_ends_it_at_once(db):
    first = await _waiting_run(db, timeout=0.2, default="approve")
    assert await flowforge.cancel_run(first.run_id, storage=db, wait=1) == "cancelled"
    storage = storage_from_url(db)
    await storage.open()
    row = await storage.get_run(first.run_id)
    events = await storage.get_events(first.run_id)
    blocks = {b["block_id"]: b["status"] for b in await storage.get_blocks(first.run_id)}
    await asyncio.sleep(0.3)
    assert await resume_due(storage=storage) == []        # no longer due
    await storage.close()
    assert row["status"] == "cancelled" and row["resume_at"] is None
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "cancelled"
    assert blocks["ok"] == "cancelled" and "pay" not in COUNTS


def test_a_default_needs_a_timeout():
    with pytest.raises(flowforge.ValidationFailed, match="set `timeout` too"):
        flowforge.load(_approval_doc(default="approve"))


async def test_resume_due_without_a_server_leaves_server_users_runs_alone(db):
    from flowforge.service.users import create_user

    storage = storage_from_url(db)
    await storage.open()
    user, _ = await create_user(storage, "ann", "user")
    doc = {"id": "w", "blocks": [{"id": "pause", "type": "wait",
                                  "with": {"seconds": 0.1, "sleep_limit": 0}}]}
    mine = await flowforge.run(doc, storage=storage)
    theirs = await flowforge.run(doc, storage=storage, user=user["user_id"])
    await asyncio.sleep(0.2)
    resumed = await resume_due(storage=storage)
    assert [r.run_id for r in resumed] == [mine.run_id]
    assert (await storage.get_run(theirs.run_id))["status"] == "waiting"
    await storage.close()


async def test_an_approval_decided_before_a_long_wait_keeps_its_route_on_resume(db):
    doc = {"id": "both", "blocks": [
        {"id": "ok", "type": "approval", "with": {"on_reject": "refuse"}},
        {"id": "pause", "type": "wait", "after": ["ok"], "with": {"seconds": 0.2,
                                                                  "sleep_limit": 0}},
        _step("pay", after=["pause"]), _step("refuse", after=["ok"])]}
    first = await flowforge.run(doc, storage=db)
    second = await decide(first.run_id, "ok", "approve", by="ann", storage=db)
    assert second.status == "waiting" and second.blocks["pause"].status == "waiting"
    await asyncio.sleep(0.3)
    [done] = await resume_due(storage=db)
    assert done.status == "succeeded"
    assert _statuses(done) == {"ok": "succeeded", "pause": "succeeded", "pay": "succeeded",
                               "refuse": "skipped"}
    assert COUNTS == {"pay": 1}


@flowforge.function("wt_flaky")
def flaky(name: str) -> dict:
    """Fails the first time it is called for `name`, then succeeds."""
    COUNTS[name] = COUNTS.get(name, 0) + 1
    if COUNTS[name] == 1:
        raise RuntimeError(f"{name} failed")
    return {"name": name}


def _flaky(block_id: str, **extra) -> dict:
    return {"id": block_id, "type": "function",
            "with": {"function": "wt_flaky", "args": {"name": block_id}}, **extra}


async def test_a_failed_branch_leaves_a_waiting_approval_decidable_and_is_kept(db):
    doc = {"id": "two", "blocks": [
        _flaky("lookup"),
        {"id": "ok", "type": "approval", "with": {"message": "Refund?"}},
        _step("pay", after=["ok"])]}
    first = await flowforge.run(doc, storage=db)
    # The approval's branch still runs: the person already asked can decide it.
    assert first.status == "waiting" and "lookup: RuntimeError: lookup failed" in first.error
    assert _statuses(first) == {"lookup": "failed", "ok": "waiting", "pay": "pending"}
    listed = Console(record=True, width=200)
    await list_runs(db, None, "waiting", None, 10, False, listed)
    assert "waiting (a branch failed)" in listed.export_text()   # `runs list` says so
    decided = await decide(first.run_id, "ok", "approve", by="ann", storage=db)
    # Deciding runs the approval's branch; the failure is kept, not tried again
    # (it would succeed now), and it fails the run once nothing waits.
    assert decided.status == "failed" and "lookup failed" in decided.error
    assert _statuses(decided) == {"lookup": "failed", "ok": "succeeded", "pay": "succeeded"}
    assert COUNTS == {"lookup": 1, "pay": 1}
    # Resuming the failed run tries the failure again, and nothing else.
    again = await flowforge.resume(first.run_id, storage=db)
    assert again.status == "succeeded" and COUNTS == {"lookup": 2, "pay": 1}


async def test_trying_a_failed_run_again_keeps_a_failure_its_on_error_handled(db):
    doc = {"id": "handled", "blocks": [
        _flaky("charge", on_error="refund"), _step("refund"), _step("ship", after=["charge"]),
        _flaky("report")]}
    first = await flowforge.run(doc, storage=db)
    assert first.status == "failed" and first.error == "report: RuntimeError: report failed"
    assert _statuses(first) == {"charge": "failed", "refund": "succeeded", "ship": "skipped",
                                "report": "failed"}
    again = await flowforge.resume(first.run_id, storage=db)
    # `charge` would succeed now; running it again would take both of its
    # routes (the refund already made, and the shipping).
    assert again.status == "succeeded"
    assert _statuses(again) == {"charge": "failed", "refund": "succeeded", "ship": "skipped",
                                "report": "succeeded"}
    assert COUNTS == {"charge": 1, "refund": 1, "report": 2}

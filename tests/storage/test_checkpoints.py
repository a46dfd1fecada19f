"""A block's checkpoint is the fold of its events, with stored rows laid over it
while they describe the block's current state (both back ends)."""

from __future__ import annotations

import time


def _run(run_id: str) -> dict:
    return {"run_id": run_id, "workflow_id": "wf", "status": "running",
            "created_at": time.time()}


def _block_event(seq: int, kind: str, block_id: str, **data) -> dict:
    return {"seq": seq, "type": kind, "run_id": "r1", "time": 1000.0 + seq,
            "block_id": block_id, **data}


async def test_checkpoints_come_from_the_events_alone(storage):
    await storage.create_run(_run("r1"))
    await storage.record("r1", [
        _block_event(1, "block_started", "a", block_type="set", inputs={"q": 1}),
        _block_event(2, "block_started", "b", block_type="llm"),
        _block_event(3, "block_succeeded", "a", output={"v": 2}, duration_ms=5.0),
        _block_event(4, "block_failed", "b", error="boom"),
        _block_event(5, "block_started", "c", scope="loop[0]"),
        _block_event(6, "progress", "c", scope="loop[0]"),         # not a block status
    ], [])
    blocks = await storage.get_blocks("r1")
    assert [(b["scope"], b["block_id"], b["status"]) for b in blocks] == [
        ("", "a", "succeeded"), ("", "b", "failed"), ("loop[0]", "c", "running")]
    a = blocks[0]
    assert (a["type"], a["inputs"], a["output"], a["started_at"], a["finished_at"],
            a["duration_ms"], a["run_id"]) == ("set", {"q": 1}, {"v": 2}, 1001.0, 1003.0,
                                               5.0, "r1")
    assert blocks[1]["error"] == "boom" and blocks[1]["output"] is None


async def test_a_replayed_outcome_on_resume_keeps_the_first_one(storage):
    await storage.create_run(_run("r1"))
    await storage.record("r1", [_block_event(1, "block_started", "a"),
                                _block_event(2, "block_succeeded", "a", output=1)], [])
    await storage.record("r1", [_block_event(3, "block_succeeded", "a", output=1,
                                             resumed=True)], [])
    [a] = await storage.get_blocks("r1")
    assert (a["status"], a["finished_at"]) == ("succeeded", 1002.0)


async def test_a_row_about_the_current_state_is_laid_over_the_events(storage):
    # the pool stores an approval's decision with the waiting block's state
    await storage.create_run(_run("r1"))
    await storage.record("r1", [_block_event(1, "block_started", "ok", block_type="approval"),
                                _block_event(2, "block_waiting", "ok", output={"asked": 1},
                                             reason="approval")], [])
    await storage.record("r1", [], [{"block_id": "ok", "status": "waiting",
                                     "output": {"asked": 1, "decision": {"by": "ann"}}}])
    [ok] = await storage.get_blocks("r1")
    assert (ok["status"], ok["type"], ok["output"]) == (
        "waiting", "approval", {"asked": 1, "decision": {"by": "ann"}})


async def test_a_row_left_behind_by_a_later_state_gives_way_to_the_events(storage):
    # cut off (row: cancelled), then run again on resume and succeeded
    await storage.create_run(_run("r1"))
    await storage.record("r1", [_block_event(1, "block_started", "a"),
                                _block_event(2, "block_cancelled", "a", reason="cut")],
                         [{"block_id": "a", "status": "cancelled", "reason": "cut off; resumed"}])
    [a] = await storage.get_blocks("r1")
    assert (a["status"], a["reason"]) == ("cancelled", "cut off; resumed")
    await storage.record("r1", [_block_event(3, "block_started", "a"),
                                _block_event(4, "block_succeeded", "a", output=7)], [])
    [a] = await storage.get_blocks("r1")
    assert (a["status"], a["output"]) == ("succeeded", 7)


async def test_cancelling_a_waiting_run_cancels_its_waiting_blocks(storage):
    from flowforge.service.cancel import request_cancel

    await storage.create_run({**_run("r1"), "status": "waiting"})
    await storage.record("r1", [_block_event(1, "block_started", "ok"),
                                _block_event(2, "block_waiting", "ok", reason="approval")], [])
    await request_cancel(storage, "r1")
    [ok] = await storage.get_blocks("r1")
    assert (ok["status"], ok["reason"]) == ("cancelled", "the run was cancelled while it waited")
    assert [e["type"] for e in await storage.get_events("r1")][-2:] == [
        "block_cancelled", "run_finished"]
    assert (await storage.get_run("r1"))["status"] == "cancelled"

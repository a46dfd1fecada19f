"""A run's stored record is complete whatever way it ended, and a run cut
off mid-way resumes without re-running what already succeeded."""

from __future__ import annotations

import asyncio

import pytest

import flowforge
from flowforge.service.cancel import request_cancel
from flowforge.storage import storage_from_url

EXECUTED: list[str] = []


@flowforge.function("rec_step")
async def rec_step(name: str, ms: float = 0, fail: bool = False) -> dict:
    EXECUTED.append(name)
    await asyncio.sleep(ms / 1000)
    if fail:
        raise RuntimeError(f"{name} broke")
    return {"name": name}


def step(id, after=None, **args):
    block = {"id": id, "type": "function", "with": {"function": "rec_step",
                                                     "args": {"name": id, **args}}}
    if after:
        block["after"] = after
    return block


async def stored(run_id):
    storage = storage_from_url()
    await storage.open()
    try:
        return (await storage.get_run(run_id), await storage.get_blocks(run_id),
                await storage.get_events(run_id))
    finally:
        await storage.close()


async def test_a_failed_run_is_fully_recorded():
    doc = {"id": "rec", "env": {}, "blocks": [step("a"), step("b", after=["a"], fail=True),
                                              step("c", after=["b"])]}
    result = await flowforge.run(doc, {})
    row, blocks, events = await stored(result.run_id)
    assert row["status"] == "failed" and "b broke" in row["error"]
    assert {b["block_id"]: b["status"] for b in blocks} == {"a": "succeeded", "b": "failed",
                                                            "c": "skipped"}
    assert [e["seq"] for e in events] == [e["seq"] for e in result.events]
    assert events[-1]["type"] == "run_finished"
    b = next(b for b in blocks if b["block_id"] == "b")
    assert b["inputs"] == {"function": "rec_step", "args": {"name": "b", "fail": True}}
    assert b["error"] == "RuntimeError: b broke"


async def test_a_cancelled_run_is_fully_recorded():
    doc = {"id": "rec2", "blocks": [step("a"), step("slow", after=["a"], ms=5000),
                                    step("c", after=["slow"])]}
    handle = await _start(doc)
    await asyncio.sleep(0.05)
    handle.cancel()
    result = await handle.wait()
    row, blocks, _ = await stored(result.run_id)
    assert row["status"] == "cancelled"
    assert {b["block_id"]: b["status"] for b in blocks} == {"a": "succeeded",
                                                            "slow": "cancelled", "c": "cancelled"}


async def _start(doc):
    from flowforge.service.runs import open_storage, start_run

    cm = open_storage(None)
    storage = await cm.__aenter__()
    handle = await start_run(doc, {}, storage=storage)
    handle.task.add_done_callback(lambda _: asyncio.ensure_future(cm.__aexit__(None, None, None)))
    return handle


async def test_environment_values_never_reach_the_record(monkeypatch):
    monkeypatch.setenv("FF_TEST_SECRET", "s3cr3t-value-123")
    doc = {"id": "rec3", "blocks": [
        {"id": "call", "type": "set", "with": {"auth": "Bearer {{env.FF_TEST_SECRET}}"}}]}
    result = await flowforge.run(doc, {})
    assert result.results["call"] == {"auth": "Bearer s3cr3t-value-123"}   # the run saw it
    row, blocks, events = await stored(result.run_id)
    text = repr((row, blocks, events))
    assert "s3cr3t-value-123" not in text
    assert blocks[0]["output"] == {"auth": "Bearer ***"}


async def test_resume_skips_blocks_that_already_succeeded():
    doc = {"id": "rec4", "blocks": [step("a"), step("b", after=["a"]),
                                    step("c", after=["b"], ms=5000)]}
    EXECUTED.clear()
    handle = await _start(doc)
    while "c" not in EXECUTED:            # a and b are done, c is in flight: "crash" now
        await asyncio.sleep(0.01)
    handle.cancel()
    first = await handle.wait()
    assert first.status == "cancelled"
    # Make c fast this time, as if the crash had been transient.
    EXECUTED.clear()
    storage = storage_from_url()
    await storage.open()
    row = await storage.get_run(first.run_id)
    row["document"]["blocks"][2]["with"]["args"]["ms"] = 1
    await storage.update_run(first.run_id, document=row["document"])
    await storage.close()
    resumed = await flowforge.resume(first.run_id)
    assert resumed.status == "succeeded"
    assert EXECUTED == ["c"]
    assert resumed.results["a"] == {"name": "a"} and resumed.results["c"] == {"name": "c"}
    row, blocks, events = await stored(first.run_id)
    assert row["status"] == "succeeded"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))      # the resumed run continued the sequence


async def test_resume_keeps_the_routing_decision_of_a_finished_condition():
    doc = {"id": "rec5", "inputs": {"n": {"type": "integer"}}, "blocks": [
        {"id": "gate", "type": "condition",
         "with": {"cases": [{"when": "input.n > 5", "goto": "big"}], "default": "small"}},
        step("big", ms=5000), step("small", ms=5000),
        {"id": "done", "type": "set", "after": ["big", "small"], "with": {"ok": True}}]}
    EXECUTED.clear()
    from flowforge.service.runs import open_storage, start_run

    async with open_storage(None) as storage:
        handle = await start_run(doc, {"n": 9}, storage=storage)
        while "big" not in EXECUTED:
            await asyncio.sleep(0.01)
        handle.cancel()
        first = await handle.wait()
        row = await storage.get_run(first.run_id)
        row["document"]["blocks"][1]["with"]["args"]["ms"] = 1
        await storage.update_run(first.run_id, document=row["document"])
    EXECUTED.clear()
    resumed = await flowforge.resume(first.run_id)
    assert EXECUTED == ["big"]
    assert {k: r.status for k, r in resumed.blocks.items()} == {
        "gate": "succeeded", "big": "succeeded", "small": "skipped", "done": "succeeded"}


async def test_a_finished_run_leaves_no_reference_cycles():
    import gc

    doc = flowforge.load({"id": "cycles", "blocks": [step("a"), step("b", after=["a"], ms=1)]})
    await flowforge.run(doc, {}, storage=False)
    gc.collect()
    gc.disable()
    try:
        result = await flowforge.run(doc, {}, storage=False)
        assert result.status == "succeeded"
        assert gc.collect() == 0      # everything of the run was freed by reference counting
    finally:
        gc.enable()


async def test_a_cancel_request_from_another_process_cancels_the_run_and_it_is_recorded():
    # Another process shares only the database with the one running the run:
    # here, a second connection marks the row; the running side notices.
    doc = {"id": "far-cancel", "blocks": [step("first"), step("long", after=["first"], ms=20000),
                                          step("after_long", after=["long"])]}
    storage = storage_from_url()
    await storage.open()
    storage.poll_interval = 0.05
    elsewhere = storage_from_url()
    await elsewhere.open()
    try:
        handle = await flowforge.start_run(doc, {}, storage=storage)
        for _ in range(100):
            if any(b["block_id"] == "long" for b in await elsewhere.get_blocks(handle.run_id)):
                break
            await asyncio.sleep(0.02)
        await request_cancel(elsewhere, handle.run_id)
        result = await asyncio.wait_for(handle.wait(), 5)
    finally:
        await elsewhere.close()
        await storage.close()
    assert result.status == "cancelled"
    assert {b: r.status for b, r in result.blocks.items()} == {
        "first": "succeeded", "long": "cancelled", "after_long": "cancelled"}
    row, blocks, _ = await stored(handle.run_id)
    assert row["status"] == "cancelled" and row["cancel_requested_at"] is not None
    assert {b["block_id"]: b["status"] for b in blocks}["long"] == "cancelled"


async def test_resuming_a_run_supersedes_an_earlier_cancel_request():
    doc = {"id": "resume-after-cancel", "blocks": [step("only")]}
    first = await flowforge.run(doc, {})
    storage = storage_from_url()
    await storage.open()
    try:
        await storage.update_run(first.run_id, status="running", finished_at=None)
        await request_cancel(storage, first.run_id)          # nobody was running it
        storage.poll_interval = 0.05
        resumed = await flowforge.resume(first.run_id, storage=storage)
    finally:
        await storage.close()
    assert resumed.status == "succeeded"
    row, _, _ = await stored(first.run_id)
    assert row["status"] == "succeeded" and row["cancel_requested_at"] is None


async def test_cancel_run_from_python_reaches_a_run_in_another_process(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    doc = {"id": "py-cancel", "blocks": [step("first"), step("long", after=["first"], ms=20000)]}
    running_side = storage_from_url(url)
    await running_side.open()
    running_side.poll_interval = 0.05
    try:
        handle = await flowforge.start_run(doc, {}, storage=running_side)
        await asyncio.sleep(0.1)
        status = await flowforge.cancel_run(handle.run_id, storage=url, wait=5)
        result = await asyncio.wait_for(handle.wait(), 5)
        again = await flowforge.cancel_run(handle.run_id, storage=url)
        with pytest.raises(flowforge.NotFound, match="no run with id 'nope'"):
            await flowforge.cancel_run("nope", storage=url)
    finally:
        await running_side.close()
    assert (status, result.status, again) == ("cancelled", "cancelled", "cancelled")


async def test_resume_does_not_run_finished_loop_passes_again():
    """A loop cut in its third pass resumes there: the children of the first two
    passes succeeded before the cut and are not run again (issue 15)."""
    doc = {"id": "rec-loop", "blocks": [
        {"id": "each", "type": "loop", "with": {"for_each": ["x", "y", "z"]}, "blocks": [
            {"id": "work", "type": "function", "with": {
                "function": "rec_step", "args": {
                    "name": "{{loop.item}}", "ms": {"expr": "5000 if loop.index == 2 else 1"}}}}]},
        step("after", after=["each"])]}
    EXECUTED.clear()
    handle = await _start(doc)
    while "z" not in EXECUTED:
        await asyncio.sleep(0.01)
    handle.cancel()
    first = await handle.wait()
    assert first.status == "cancelled" and EXECUTED == ["x", "y", "z"]
    storage = storage_from_url()
    await storage.open()
    row = await storage.get_run(first.run_id)
    row["document"]["blocks"][0]["blocks"][0]["with"]["args"]["ms"] = 1
    await storage.update_run(first.run_id, document=row["document"])
    await storage.close()
    EXECUTED.clear()
    resumed = await flowforge.resume(first.run_id)
    assert resumed.status == "succeeded", resumed.error
    assert EXECUTED == ["z", "after"]              # passes x and y were not run again
    assert [p["work"]["name"] for p in resumed.results["each"]["iterations"]] == ["x", "y", "z"]

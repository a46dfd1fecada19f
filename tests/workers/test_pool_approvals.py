"""Waiting runs on the pool: an approval approved, rejected (to `on_reject`) or
timed out (its default decision) while the worker that ran the run's first part
is gone; the run finishes on a new worker with the decision in its record.  A
`wait` block's run is finished by a worker's reaper (no server needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowforge.service.pool import decide_on_pool, enqueue
from flowforge.storage import storage_from_url
from tests.workers.conftest import ROOT
from tests.workers.test_pool import ended, wait_for


def _step(block_id: str, n: int, log: Path, after: str | None = None) -> dict:
    return {"id": block_id, "type": "function",
            "with": {"function": "ww_step", "args": {"n": n, "seconds": 0.01,
                                                     "log": str(log)}},
            **({"after": [after]} if after else {})}


def wait_doc(log: Path, seconds: float = 1) -> dict:
    """before -> a wait of `seconds` that frees the worker -> after."""
    return {"id": "later", "blocks": [
        _step("before", 0, log),
        {"id": "pause", "type": "wait", "after": ["before"],
         "with": {"seconds": seconds, "sleep_limit": 0}},
        _step("after", 1, log, after="pause")]}


def approval_doc(log: Path, **approval) -> dict:
    return {"id": "refund", "blocks": [
        _step("prepare", 0, log),
        {"id": "ok", "type": "approval", "after": ["prepare"],
         "with": {"message": "Refund 30 EUR?", "on_reject": "refuse", **approval}},
        _step("pay", 1, log, after="ok"),
        _step("refuse", 2, log, after="ok")]}


def pids(log: Path) -> dict[int, str]:
    """Step number -> the pid of the process that ran it."""
    return {int(n): pid for kind, n, _key, pid in
            (line.split() for line in log.read_text().splitlines()) if kind == "end"}


async def _waiting_then_restart(pool, storage, doc: dict) -> str:
    """The run waits on the first worker; that worker is killed, a new one started."""
    first = pool.start()
    run_id = await enqueue(doc, storage=storage, queue=pool.queue)
    await wait_for(storage, run_id, lambda row: row["status"] == "waiting")
    pool.kill(first)
    pool.wait_ready(pool.start())
    return run_id


@pytest.fixture
async def storage(pool):
    """The pool's database, open for the test."""
    opened = storage_from_url(pool.database)
    await opened.open()
    yield opened
    await opened.close()


async def _decided(storage, run_id: str) -> tuple[dict, dict, list[dict]]:
    row = await wait_for(storage, run_id, ended, timeout=60)
    blocks = {b["block_id"]: b for b in await storage.get_blocks(run_id) if not b["scope"]}
    events = [e for e in await storage.get_events(run_id) if e["type"] == "approval_decided"]
    return row, blocks, events


async def test_approved_after_a_worker_restart_the_run_finishes_on_the_new_worker(
        pool, tmp_path, storage):
    log = tmp_path / "steps.log"
    run_id = await _waiting_then_restart(pool, storage, approval_doc(log))
    await decide_on_pool(run_id, "ok", "approve", by="carol", comment="fine",
                         storage=storage)
    row, blocks, decided = await _decided(storage, run_id)
    assert row["status"] == "succeeded", row
    assert blocks["pay"]["status"] == "succeeded" and blocks["refuse"]["status"] == "skipped"
    output = blocks["ok"]["output"]
    assert (output["decision"], output["by"], output["comment"]) == ("approve", "carol", "fine")
    assert len(decided) == 1 and decided[0]["by"] == "carol"
    ran = pids(log)
    assert ran[1] != ran[0] and ran[1] != str(os.getpid())   # on the new worker


async def test_rejected_with_the_cli_after_a_worker_restart_routes_to_on_reject(
        pool, tmp_path, storage):
    log = tmp_path / "steps.log"
    run_id = await _waiting_then_restart(pool, storage, approval_doc(log))
    done = subprocess.run([sys.executable, "-m", "flowforge.cli.main", "runs", "reject",
                           run_id, "ok", "--comment", "too much", "--by", "dave",
                           "--json"], cwd=ROOT, env=pool.env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["status"] == "succeeded" and shown["results"]["refuse"] == {"n": 2}
    row, blocks, decided = await _decided(storage, run_id)
    assert row["status"] == "succeeded"
    assert blocks["refuse"]["status"] == "succeeded" and blocks["pay"]["status"] == "skipped"
    output = blocks["ok"]["output"]
    assert (output["decision"], output["by"], output["comment"]) == ("reject", "dave",
                                                                     "too much")
    assert decided and decided[0]["decision"] == "reject"
    ran = pids(log)
    assert ran[2] != ran[0]                          # not the killed worker, nor the CLI
    assert ran[2] in {str(w.pid) for w in pool.workers}


async def test_timed_out_after_a_worker_restart_takes_the_default_on_the_new_worker(
        pool, tmp_path, storage):
    log = tmp_path / "steps.log"
    run_id = await _waiting_then_restart(
        pool, storage, approval_doc(log, timeout=4, default="reject"))
    row, blocks, decided = await _decided(storage, run_id)   # the reaper's doing
    assert row["status"] == "succeeded", row
    assert blocks["refuse"]["status"] == "succeeded" and blocks["pay"]["status"] == "skipped"
    output = blocks["ok"]["output"]
    assert output["decision"] == "reject" and output["timed_out"] is True
    assert output["by"] is None
    ran = pids(log)
    assert ran[2] == str(pool.workers[-1].pid)


async def test_a_worker_finishes_a_wait_without_a_server(pool, tmp_path, storage):
    log = tmp_path / "steps.log"
    doc = wait_doc(log, seconds=2)
    pool.start()
    run_id = await enqueue(doc, storage=storage, queue=pool.queue)
    await wait_for(storage, run_id, lambda row: row["status"] == "waiting")
    row = await wait_for(storage, run_id, ended, timeout=60)
    assert row["status"] == "succeeded"
    ran = pids(log)
    assert ran[1] == ran[0] == str(pool.workers[0].pid)


async def test_a_decision_the_broker_cannot_take_leaves_the_run_waiting(tmp_path):
    """The broker is down: the decision is refused with a message, the run still
    waits, undecided, for a decision that can reach a worker."""
    import flowforge
    import pytest

    from flowforge.service.pool import QueueError

    database = f"sqlite:///{tmp_path / 'runs.db'}"
    doc = {"id": "ask", "blocks": [{"id": "ok", "type": "approval",
                                    "with": {"message": "Go?"}}]}
    result = await flowforge.run(doc, storage=database)
    assert result.status == "waiting"
    storage = storage_from_url(database)
    await storage.open()
    try:
        with pytest.raises(QueueError, match="broker could not be reached.*still waiting"):
            await decide_on_pool(result.run_id, "ok", "approve", by="carol", storage=storage,
                                 broker="redis://127.0.0.1:1/0")
        assert (await storage.get_run(result.run_id))["status"] == "waiting"
        block = [b for b in await storage.get_blocks(result.run_id) if b["block_id"] == "ok"]
        assert "decision" not in (block[0]["output"] or {})
    finally:
        await storage.close()


async def test_resume_due_from_the_cli_sends_a_pool_run_back_to_the_pool(pool, tmp_path,
                                                                         storage):
    """`flowforge runs resume-due` with a broker configured: a due run that was
    queued goes to the pool (the step after the wait runs on the worker, not in
    the CLI's process), and the CLI says so, one line per run."""
    import asyncio
    import time

    from tests.workers.conftest import PLUGIN

    worker = pool.start(options=("--no-reap",))          # only the CLI finds the due run
    log = tmp_path / "steps.log"
    doc = wait_doc(log)
    run_id = await enqueue(doc, storage=storage, queue=pool.queue)
    row = await wait_for(storage, run_id, lambda row: row["status"] == "waiting")
    await asyncio.sleep(max(0.0, row["resume_at"] - time.time()) + 0.05)
    done = subprocess.run([sys.executable, "-m", "flowforge.cli.main", "runs",
                           "resume-due", "--import", PLUGIN], cwd=ROOT, env=pool.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{run_id} sent to the pool (queue {pool.queue})"]
    row = await wait_for(storage, run_id, ended, timeout=30)
    assert row["status"] == "succeeded", row
    assert pids(log)[1] == str(worker.pid)

"""Runs on `flowforge worker` processes through a real Redis: a queued run ends
with its events stored, cancel reaches it within a second, a lost worker's run
is taken over and resumed without running a succeeded block again, and every
block run again gets the key it had before."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowforge.service.pool import QueueError, enqueue, work
from flowforge.service.runs import cancel_run
from flowforge.storage import storage_from_url
from tests.workers.conftest import PLUGIN, ROOT


def chain(count: int, seconds: float, log: Path) -> dict:
    blocks = []
    for n in range(count):
        blocks.append({"id": f"s{n}", "type": "function",
                       "with": {"function": "ww_step",
                                "args": {"n": n, "seconds": seconds, "log": str(log)}},
                       **({"after": [f"s{n - 1}"]} if n else {})})
    return {"id": "chain", "blocks": blocks}


async def wait_for(storage, run_id: str, predicate, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = await storage.get_run(run_id)
        if row is not None and predicate(row):
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not get there in {timeout} s: {row}")


def ended(row: dict) -> bool:
    return row["status"] in ("succeeded", "failed", "cancelled")


async def test_a_queued_run_runs_on_a_worker_with_every_event_stored(pool, tmp_path):
    log = tmp_path / "steps.log"
    pool.start()
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(3, 0.02, log), storage=storage, queue=pool.queue)
        assert (await storage.get_run(run_id))["status"] in ("queued", "running", "succeeded")
        row = await wait_for(storage, run_id, ended)
        assert row["status"] == "succeeded"
        kinds = [e["type"] for e in await storage.get_events(run_id)]
        assert kinds[0] == "run_queued" and kinds[1] == "run_started"
        assert kinds[-1] == "run_finished" and kinds.count("block_succeeded") == 3
    finally:
        await storage.close()
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [line[:2] for line in lines] == [["start", "0"], ["end", "0"], ["start", "1"],
                                            ["end", "1"], ["start", "2"], ["end", "2"]]
    assert {line[3] for line in lines} != {str(os.getpid())}     # a worker process ran it


async def test_cancel_reaches_a_run_on_a_worker_within_a_second(pool, tmp_path):
    pool.start()
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(2, 30.0, tmp_path / "log"), storage=storage,
                               queue=pool.queue)
        await wait_for(storage, run_id, lambda row: row["status"] == "running")
        started = time.monotonic()
        status = await cancel_run(run_id, storage=storage, wait=5)
        took = time.monotonic() - started
        assert status == "cancelled" and took < 1.0, (status, took)
        blocks = {b["block_id"]: b["status"] for b in await storage.get_blocks(run_id)}
        assert blocks["s0"] == "cancelled"
    finally:
        await storage.close()


async def test_a_lost_worker_is_taken_over_and_nothing_that_succeeded_runs_again(pool,
                                                                                 tmp_path):
    log = tmp_path / "steps.log"
    first = pool.start()
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(6, 0.6, log), storage=storage, queue=pool.queue)
        await wait_for(storage, run_id, lambda row: "end 1 " in (log.read_text()
                                                                  if log.exists() else ""),
                       timeout=60)
        pool.kill(first)                          # mid-run, as a lost machine
        killed_at = time.monotonic()
        pool.start()
        row = await wait_for(storage, run_id, ended, timeout=90)
        took = time.monotonic() - killed_at
    finally:
        await storage.close()
    assert row["status"] == "succeeded", row
    lines = [line.split() for line in log.read_text().splitlines()]
    ends = [int(n) for kind, n, *_ in lines if kind == "end"]
    starts = [int(n) for kind, n, *_ in lines if kind == "start"]
    assert sorted(set(ends)) == list(range(6))
    # a block that had ended is never run again; only the one in flight starts twice
    for n in range(6):
        assert ends.count(n) <= 2 and starts.count(n) <= 2
    again = [n for n in range(6) if starts.count(n) == 2]
    assert len(again) <= 1
    assert all(ends.count(n) == 1 for n in range(6) if n not in again)
    keys = {}
    for kind, n, key, pid in lines:
        keys.setdefault(n, set()).add(key)
    assert all(len(found) == 1 for found in keys.values())     # the same key when re-run
    assert len({pid for *_, pid in lines}) == 2                 # two worker processes ran it
    assert took < 30, took


async def test_without_a_broker_the_queue_says_how_to_configure_one(monkeypatch, tmp_path):
    monkeypatch.delenv("FLOWFORGE_BROKER_URL", raising=False)
    from flowforge.service.pool import celery_app

    celery_app.cache_clear()
    with pytest.raises(QueueError, match="set FLOWFORGE_BROKER_URL"):
        await enqueue({"id": "x", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]},
                      storage=f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(QueueError, match="use redis://"):
        celery_app("http://nope")
    done = subprocess.run([sys.executable, "-m", "flowforge.cli.main", "run",
                           "examples/branch_join.yaml", "--queue"], cwd=ROOT,
                          env={k: v for k, v in os.environ.items()
                               if k != "FLOWFORGE_BROKER_URL"},
                          capture_output=True, text=True)
    assert done.returncode == 2 and "set FLOWFORGE_BROKER_URL" in done.stderr


async def test_the_cli_queues_and_follows_a_run(pool):
    pool.start()
    done = subprocess.run([sys.executable, "-m", "flowforge.cli.main", "run",
                           "examples/branch_join.yaml", "--queue", "--input", "amount=1500",
                           "--json"],
                          cwd=ROOT, env=pool.env | {"FLOWFORGE_BROKER_URL": pool.broker},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["status"] == "succeeded" and shown["workflow_id"] == "branch-join"
    assert shown["outputs"] == {"reply": {"message": "Order for guest: manual review",
                                          "status": 200}}
    # the worker that took it started it: `runs show` has its start (issue 25)
    assert shown["created_at"] <= shown["started_at"] <= shown["finished_at"]


def cut_off_run(database: str, log: Path, folder: Path, env: dict,
                steps: int = 3) -> tuple[str, str]:
    """A process starts a `steps`-step run and dies (os._exit) once step 1 started,
    leaving it `running` with step 0 stored as succeeded (step 1, a function,
    starts only once step 0's outcome is stored; waiting for step 0's own last
    line instead raced that write): (run id, the dead pid)."""
    script = folder / "die.py"
    script.write_text(f"""
import asyncio, json, os, sys
sys.path.insert(0, {str(ROOT / 'src')!r})
import importlib.util
spec = importlib.util.spec_from_file_location("plugin", {PLUGIN!r})
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
import flowforge
async def main():
    handle = await flowforge.start_run(json.loads({json.dumps(chain(steps, 0.5, log))!r}),
                                       storage={database!r})
    print(handle.run_id, os.getpid(), flush=True)
    while "start 1" not in (open({str(log)!r}).read() if os.path.exists({str(log)!r}) else ""):
        await asyncio.sleep(0.05)
    os._exit(9)
asyncio.run(main())
""")
    died = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)
    assert died.stdout.strip(), died.stderr[-2000:]
    run_id, pid = died.stdout.split()
    return run_id, pid



async def test_a_run_whose_process_died_is_resumed_by_a_worker(pool, tmp_path):
    """A run left `running` by a process that no longer exists (its lease lapses) is
    found by a worker's reaper and finished from its checkpoints."""
    log = tmp_path / "steps.log"
    run_id, _ = cut_off_run(pool.database, log, tmp_path, pool.env, steps=4)
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        assert (await storage.get_run(run_id))["status"] == "running"
        pool.start()
        row = await wait_for(storage, run_id, ended, timeout=60)
    finally:
        await storage.close()
    assert row["status"] == "succeeded"
    ends = [line.split()[1] for line in log.read_text().splitlines() if line.startswith("end")]
    assert sorted(ends) == ["0", "1", "2", "3"]


async def test_work_on_an_ended_or_unknown_run_does_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert await work("nope", url) == "ended"


async def test_a_queued_run_taken_by_a_worker_that_died_is_reaped(pool, tmp_path):
    """A worker killed between taking a run's lease and starting it leaves the run
    `queued` with a lease (its message waits out the broker's visibility timeout):
    the reaper gives it to a live worker once the lease lapses."""
    log = tmp_path / "steps.log"
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(2, 0.02, log), storage=storage, queue="nobody-listens")
        assert await storage.claim_run(run_id, "gone-host:1:dead", -1.0)   # taken, lapsed
        pool.start()
        row = await wait_for(storage, run_id, ended, timeout=60)
    finally:
        await storage.close()
    assert row["status"] == "succeeded"


def test_a_worker_shares_the_same_provider_keys_a_server_would():
    from flowforge.providers.resolve import provider_keys_in

    environ = {"OPENAI_API_KEY": "sk-1", "OPENAI_COMPATIBLE_OLLAMA_API_KEY": "k-2",
               "OPENAI_COMPATIBLE_OLLAMA_BASE_URL": "http://x", "HOME": "/root",
               "DATABASE_PASSWORD": "p"}
    assert provider_keys_in(environ) == {"OPENAI_API_KEY": "sk-1",
                                         "OPENAI_COMPATIBLE_OLLAMA_API_KEY": "k-2"}

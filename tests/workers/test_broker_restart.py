"""Workers survive their broker: Redis killed (-9) and started again empty under
a worker with runs in flight.  The worker reconnects and keeps serving: the
runs in flight end once, each block once, and a run queued after the restart
runs.  A worker that does stop on an error exits non-zero (a Celery worker
used to exit 0 after Kombu's AttributeError, leaving nothing to restart it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flowforge.service.pool import celery_app, enqueue
from flowforge.storage import storage_from_url
from tests.workers.conftest import Pool, _redis_module
from tests.workers.test_pool import chain, ended, wait_for


@pytest.fixture
def own_redis():
    """A Redis of this test's own: restarting it must not disturb the others'."""
    with _redis_module().RedisServer() as server:
        yield server


@pytest.fixture
def own_pool(own_redis, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_BROKER_URL", own_redis.url)
    live = Pool(own_redis.url, f"sqlite:///{tmp_path / 'runs.db'}", tmp_path)
    monkeypatch.setenv("FLOWFORGE_QUEUE", live.queue)
    yield live
    live.stop()
    celery_app.cache_clear()


def _ends(log: Path) -> list[str]:
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("end")]


async def test_a_worker_reconnects_to_a_restarted_broker_and_keeps_serving(own_pool, own_redis,
                                                                         tmp_path):
    worker = own_pool.start(concurrency=4)
    own_pool.wait_ready(worker)
    storage = storage_from_url(own_pool.database)
    await storage.open()
    try:
        logs = [tmp_path / f"flight{n}.log" for n in range(2)]
        flying = [await enqueue(chain(4, 0.7, log), storage=storage, queue=own_pool.queue,
                                broker=own_redis.url) for log in logs]
        for run_id, log in zip(flying, logs):
            await wait_for(storage, run_id, lambda row, log=log: "end 0" in (
                log.read_text() if log.exists() else ""))
        own_redis.restart(down=1.0)              # kill -9: every message is gone with it
        for run_id, log in zip(flying, logs):
            row = await wait_for(storage, run_id, ended, timeout=60)
            assert row["status"] == "succeeded", row
            assert sorted(_ends(log)) == ["0", "1", "2", "3"]       # each block once
        after = tmp_path / "after.log"
        started = time.monotonic()
        new = await enqueue(chain(2, 0.05, after), storage=storage, queue=own_pool.queue,
                            broker=own_redis.url)
        row = await wait_for(storage, new, ended, timeout=60)
        assert row["status"] == "succeeded" and sorted(_ends(after)) == ["0", "1"]
        assert time.monotonic() - started < 30
        assert worker.poll() is None                       # still serving
    finally:
        await storage.close()
    log = (tmp_path / "worker-0.log").read_text()
    assert "Unrecoverable error" not in log, log[-3000:]
    assert "Connection to broker lost" in log              # it did see Redis go


def test_a_worker_that_stops_on_an_error_exits_non_zero(own_pool, own_redis, tmp_path):
    """An error Redis answers that no retry mends (here a database number the
    server does not have): the worker stops, and `flowforge worker` says so by
    its status and in words, instead of retrying for ever."""
    worker = own_pool.start(options=("--broker", own_redis.url[:-1] + "99"))
    status = worker.wait(60)
    text = (tmp_path / "worker-0.log").read_text()
    assert "Unrecoverable error: ResponseError('DB index is out of range')" in text, \
        text[-3000:]
    assert status == 1
    assert "the worker stopped on an error (exit status 1)" in text


def test_a_celery_worker_that_stops_on_an_error_exits_non_zero(own_pool, tmp_path):
    """A broker other than Redis keeps Celery's worker: a consumer step that
    fails (as Kombu's AttributeError did) stops it, and `flowforge worker`
    says so by its status and in words (it used to exit 0)."""
    plugin = tmp_path / "failing_step.py"
    plugin.write_text(
        "from celery import bootsteps\n"
        "from flowforge.service.pool import worker_app\n"
        "class Failing(bootsteps.StartStopStep):\n"
        "    requires = {'celery.worker.consumer.tasks:Tasks'}\n"
        "    def start(self, consumer):\n"
        "        raise RuntimeError('a consumer step failed')\n"
        "worker_app('memory://').steps['consumer'].add(Failing)\n")
    worker = own_pool.start(options=("--broker", "memory://", "--import", str(plugin)))
    status = worker.wait(60)
    text = (tmp_path / "worker-0.log").read_text()
    assert "Unrecoverable error: RuntimeError('a consumer step failed')" in text, text[-3000:]
    assert status == 1
    assert "the worker stopped on an error (exit status 1)" in text


async def test_runs_whose_messages_a_restarted_broker_lost_are_sent_once_and_run(
        own_pool, own_redis, tmp_path):
    """Two runs wait in the queue behind a busy worker when Redis restarts empty:
    their messages are gone.  The reaper sees the broker is a new one (its run
    id) and sends each run once more; both run, once."""
    worker = own_pool.start(concurrency=1)
    own_pool.wait_ready(worker)
    storage = storage_from_url(own_pool.database)
    await storage.open()
    try:
        logs = [tmp_path / f"run{n}.log" for n in range(3)]
        ids = [await enqueue(chain(2, 1.0, log), storage=storage, queue=own_pool.queue,
                             broker=own_redis.url) for log in logs]
        await wait_for(storage, ids[0], lambda row: row["status"] == "running")
        own_redis.restart(down=1.0)
        for run_id, log in zip(ids, logs):
            row = await wait_for(storage, run_id, ended, timeout=90)
            assert row["status"] == "succeeded", row
            assert sorted(_ends(log)) == ["0", "1"]
            kinds = [e["type"] for e in await storage.get_events(run_id)]
            assert kinds.count("run_started") == 1 and kinds.count("run_finished") == 1
    finally:
        await storage.close()
    text = (tmp_path / "worker-0.log").read_text()
    assert text.count("(its message was lost)") == 2, text[-3000:]
    assert all(text.count(f"sent run {run_id} ") <= 1 for run_id in ids)

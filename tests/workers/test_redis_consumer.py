"""A worker on Redis takes run messages on the runs' loop (`RedisConsumer`),
reading what kombu writes: lower priority numbers first across every queue
it serves (a takeover before new runs), kombu's unacknowledged bookkeeping
kept so a message taken by a worker that died comes back after the
visibility timeout (put back by a Celery worker's sweep or by this one's),
and a warm shutdown on SIGTERM: the runs in flight finish, nothing more is
taken."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import redis

from flowforge.service.pool import RedisConsumer, enqueue
from flowforge.service.pool.redis_consumer import SWEEP_LOCK_SECONDS, UNACKED_MUTEX
from flowforge.service.pool.broker import send_run
from flowforge.storage import storage_from_url
from tests.workers.conftest import ROOT
from tests.workers.test_pool import chain, ended, wait_for


_DATABASES = itertools.count()


@pytest.fixture
def broker(redis_url):
    """A Redis database of the test's own on the session's server, emptied: the
    pool tests kill workers (-9) on database 0, and one killed in the middle
    of its sweep leaves kombu's sweep mutex held there for a while."""
    url = f"{redis_url.rsplit('/', 1)[0]}/{next(_DATABASES) % 15 + 1}"
    redis.Redis.from_url(url).flushdb()
    return url


def _queue(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def _serve_until(consumer: RedisConsumer, predicate, timeout: float = 20.0) -> None:
    serving = asyncio.ensure_future(consumer.serve())
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline and not serving.done(), "no message came"
        await asyncio.sleep(0.02)
    consumer.stop()
    await asyncio.wait_for(serving, 10)


def _run_of(message: dict) -> str:
    return json.loads(base64.b64decode(message["body"]))[0][0]


def _unacked_runs(broker: str) -> set[str]:
    """The run ids of the messages kombu's unacknowledged hash holds."""
    return {_run_of(json.loads(raw)[0])
            for raw in redis.Redis.from_url(broker).hvals("unacked")}


async def test_lower_priority_numbers_go_first_across_every_queue_served(broker):
    queues = [_queue("a"), _queue("b")]
    send_run("new-a", "db", queue=queues[0], broker=broker)
    send_run("new-b", "db", queue=queues[1], broker=broker)
    send_run("takeover-b", "db", queue=queues[1], priority=0, handoff="handoff:x",
             broker=broker)
    send_run("not-served", "db", queue=_queue("c"), priority=0, broker=broker)
    seen: list[list] = []

    async def handle(args: list) -> str:
        seen.append(args)
        return "done"

    consumer = RedisConsumer(broker, queues, 1, handle=handle)
    await _serve_until(consumer, lambda: len(seen) >= 3)
    assert seen[0] == ["takeover-b", "db", "handoff:x"]
    assert sorted(args[0] for args in seen[1:]) == ["new-a", "new-b"]
    assert len(seen) == 3
    # each was acknowledged when its run ended: nothing left for a sweep to send again
    assert not _unacked_runs(broker) & {"new-a", "new-b", "takeover-b"}


_TAKE_AND_HANG = """
import asyncio, sys
from flowforge.service.pool import RedisConsumer

async def hang(args):
    print("taken", flush=True)
    await asyncio.Event().wait()

asyncio.run(RedisConsumer(sys.argv[1], [sys.argv[2]], 4, handle=hang).serve())
"""


async def _kill_when_it_says(line: str, script: str, *args: str) -> None:
    """Run `script` in a process of its own and kill it (-9) once it printed `line`."""
    process = subprocess.Popen([sys.executable, "-c", script, *args],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert await asyncio.to_thread(process.stdout.readline) == line + "\n"
    finally:
        process.kill()
        process.wait(10)


async def _take_and_die(broker: str, queue: str, run_id: str) -> None:
    """A worker process takes `run_id`'s message and is killed (-9) before its
    run ends: nothing acknowledged."""
    await _kill_when_it_says("taken", _TAKE_AND_HANG, broker, queue)
    client = redis.Redis.from_url(broker)
    assert client.llen(queue + "\x06\x163") == 0                    # taken off the queue
    [(tag, record)] = [(tag, json.loads(raw)) for tag, raw in client.hgetall("unacked").items()
                       if _run_of(json.loads(raw)[0]) == run_id]
    message, exchange, routing_key = record                     # as kombu records it
    assert (message["properties"]["delivery_tag"], exchange, routing_key) == \
        (tag.decode(), "", queue)
    assert client.zscore("unacked_index", tag) is not None


async def test_a_message_taken_by_a_lost_worker_comes_back_through_a_celery_workers_sweep(
        broker):
    """The bookkeeping is kombu's own: kombu's QoS (what a Celery worker on the
    same queue sweeps with) puts the message back once the timeout passed."""
    from kombu import Connection

    queue = _queue("lost")
    send_run("lost-1", "db", queue=queue, broker=broker)
    await _take_and_die(broker, queue, "lost-1")
    time.sleep(1.2)
    with Connection(broker, transport_options={"visibility_timeout": 1}) as connection:
        connection.default_channel.qos.restore_visible(num=1000, interval=1)
    seen: list[list] = []

    async def handle(args: list) -> str:
        seen.append(args)
        return "done"

    await _serve_until(RedisConsumer(broker, [queue], 4, handle=handle), lambda: seen)
    assert seen == [["lost-1", "db"]]


async def test_a_message_taken_by_a_lost_worker_comes_back_through_this_ones_sweep(
        broker):
    queue = _queue("lost")
    send_run("lost-2", "db", queue=queue, broker=broker)
    await _take_and_die(broker, queue, "lost-2")
    seen: list[list] = []

    async def handle(args: list) -> str:
        seen.append(args)
        return "done"

    started = time.monotonic()
    await _serve_until(RedisConsumer(broker, [queue], 4, handle=handle, visibility=1.0,
                                     restore_every=0.2), lambda: seen)
    assert seen == [["lost-2", "db"]]
    assert time.monotonic() - started >= 0.9 - 0.2       # not before the timeout passed
    assert "lost-2" not in _unacked_runs(broker)


_SWEEP_AND_DIE = """
import asyncio, sys
from flowforge.service.pool import RedisConsumer

async def hang(tag):
    print("sweeping", flush=True)                 # the mutex is held: killed here
    await asyncio.Event().wait()

async def never(args):
    await asyncio.Event().wait()

consumer = RedisConsumer(sys.argv[1], [sys.argv[2]], 1, handle=never, visibility=0.5,
                         restore_every=0.1)
consumer._restore = hang
asyncio.run(consumer.serve())
"""


async def test_a_worker_killed_in_the_middle_of_its_sweep_holds_the_others_back_seconds(
        broker):
    """kombu's sweep mutex outlived a worker killed while it swept for five
    minutes, and every other worker's sweep (and the lost messages) waited that
    long; a flowforge worker holds it for SWEEP_LOCK_SECONDS at most."""
    queue = _queue("lost")
    send_run("lost-3", "db", queue=queue, broker=broker)
    await _take_and_die(broker, queue, "lost-3")
    await _kill_when_it_says("sweeping", _SWEEP_AND_DIE, broker, _queue("x"))
    killed = time.monotonic()
    held = redis.Redis.from_url(broker).pttl(UNACKED_MUTEX) / 1000
    assert 0 < held <= SWEEP_LOCK_SECONDS, held
    seen: list[list] = []

    async def handle(args: list) -> str:
        seen.append(args)
        return "done"

    await _serve_until(RedisConsumer(broker, [queue], 4, handle=handle, visibility=1.0,
                                     restore_every=0.2), lambda: seen)
    assert seen == [["lost-3", "db"]]
    assert time.monotonic() - killed <= SWEEP_LOCK_SECONDS + 2


async def test_a_run_longer_than_the_visibility_timeout_keeps_its_message(broker):
    """A message whose run still runs is not put back on the queue by a sweep
    (kombu's would, after the timeout, only for the copy to be dropped)."""
    queue = _queue("long")
    send_run("long-1", "db", queue=queue, broker=broker)
    seen: list[list] = []

    async def handle(args: list) -> str:
        seen.append(args)
        await asyncio.sleep(2.5)
        return "done"

    consumer = RedisConsumer(broker, [queue], 4, handle=handle, visibility=1.0,
                             restore_every=0.2)
    serving = asyncio.ensure_future(consumer.serve())
    await asyncio.sleep(3.5)
    consumer.stop()
    await asyncio.wait_for(serving, 10)
    assert seen == [["long-1", "db"]]                   # taken once, never again
    assert "long-1" not in _unacked_runs(broker)


async def test_sigterm_lets_the_runs_in_flight_finish_and_takes_nothing_more(pool, tmp_path):
    worker = pool.start(concurrency=2)
    pool.wait_ready(worker)
    log, later_log = tmp_path / "steps.log", tmp_path / "later.log"
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(2, 1.0, log), storage=storage, queue=pool.queue)
        await wait_for(storage, run_id, lambda row: "start 0" in (
            log.read_text() if log.exists() else ""))
        os.killpg(worker.pid, signal.SIGTERM)
        worker_log = tmp_path / "worker-0.log"
        deadline = time.monotonic() + 20
        while "warm shutdown" not in worker_log.read_text():
            assert time.monotonic() < deadline, worker_log.read_text()[-3000:]
            await asyncio.sleep(0.05)
        later = await enqueue(chain(1, 0.05, later_log), storage=storage, queue=pool.queue)
        assert await asyncio.to_thread(worker.wait, 30) == 0
        row = await wait_for(storage, run_id, ended, timeout=5)
        assert row["status"] == "succeeded", row
        assert [line.split()[:2] for line in log.read_text().splitlines()] == [
            ["start", "0"], ["end", "0"], ["start", "1"], ["end", "1"]]
        assert (await storage.get_run(later))["status"] == "queued"    # left for others
        assert not later_log.exists()
    finally:
        await storage.close()
    assert redis.Redis.from_url(pool.broker).llen(pool.queue + "\x06\x163") == 1

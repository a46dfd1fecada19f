"""One takeover message per lapse of a run's lease, however many reapers look:
each takes the lapse with a compare-and-set on the lease (a handoff token)
and only the one that did sends the run, carrying the token.  (Every reaper
used to send every lapsed run every 2 s until a worker took it: 2,553 sends
for 150 runs in bench/chaos.py, most dropped as busy or ended.)"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import redis

from flowforge.service.pool import enqueue, reap
from flowforge.storage import storage_from_url
from tests.workers.test_pool import chain, ended, wait_for


def _messages(broker: str, queue: str) -> list[dict]:
    """The run messages waiting in `queue`, every priority (Kombu keeps one Redis
    list per priority step: `queue`, then `queue\\x06\\x16N`)."""
    client = redis.Redis.from_url(broker)
    found = []
    for key in [queue.encode()] + sorted(client.keys(queue.encode() + b"\x06\x16*")):
        for raw in client.lrange(key, 0, -1):
            message = json.loads(raw)
            found.append({"args": json.loads(_body(message))[0],
                          "priority": message["properties"].get("priority")})
    return found


def _body(message: dict) -> str:
    import base64
    return base64.b64decode(message["body"]).decode()


def _reap_in_threads(database: str, broker: str, queue: str, reapers: int) -> list[str]:
    """`reapers` reapers looking at once, each on its own thread and loop, as the
    reapers of as many worker processes do."""
    sent: list[str] = []
    barrier = threading.Barrier(reapers)

    def one() -> None:
        barrier.wait()
        sent.extend(asyncio.run(reap(database, broker=broker, queue=queue)))

    threads = [threading.Thread(target=one) for _ in range(reapers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return sent


async def test_a_lapse_is_sent_once_by_one_of_many_reapers(pool, tmp_path):
    queue = pool.queue + "-nobody"                 # no worker takes what is sent
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(2, 0.05, tmp_path / "log"), storage=storage,
                               queue="elsewhere", broker=pool.broker)
        # a worker on another machine took it, ran it, and was lost: its lease lapsed
        await storage.update_run(run_id, status="running", lease_owner="far-host:7:gone",
                                 lease_expires_at=time.time() - 1)
        sent = []
        for _ in range(3):                           # three looks of four reapers each
            sent += _reap_in_threads(pool.database, pool.broker, queue, 4)
        assert sent == [run_id]
        [message] = _messages(pool.broker, queue)
        row = await storage.get_run(run_id)
        assert row["lease_owner"].startswith("handoff:")
        assert message["args"] == [run_id, pool.database, row["lease_owner"]]
        assert message["priority"] == 0                  # ahead of the new runs
        # the handoff lapses while its message waits its turn (a saturated pool):
        # nothing is sent again
        await storage.update_run(run_id, lease_expires_at=time.time() - 1)
        for _ in range(3):
            assert _reap_in_threads(pool.database, pool.broker, queue, 4) == []
        # the message is lost (taken by a worker killed before it recorded it): the
        # run is sent once more, with a new token
        redis.Redis.from_url(pool.broker).delete(queue)
        sent = []
        for _ in range(3):
            sent += _reap_in_threads(pool.database, pool.broker, queue, 4)
        assert sent == [run_id]
        [again] = _messages(pool.broker, queue)
        token = (await storage.get_run(run_id))["lease_owner"]
        assert again["args"][2] == token != message["args"][2]
    finally:
        await storage.close()


async def test_a_lost_worker_s_run_is_sent_once_and_a_stale_copy_is_dropped(pool, tmp_path):
    """Two workers on one machine; the one running a run is killed: both reapers
    (the survivor's, the replacement's) see the lapse at once (the dead process's
    lease), one sends it; the run ends, and a copy of the takeover message
    delivered afterwards finds its token replaced and is dropped."""
    log = tmp_path / "steps.log"
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        workers = [pool.start(concurrency=1) for _ in range(2)]
        for worker in workers:
            pool.wait_ready(worker)
        run_id = await enqueue(chain(4, 0.6, log), storage=storage, queue=pool.queue)
        await wait_for(storage, run_id, lambda row: "end 0" in (
            log.read_text() if log.exists() else ""))
        [ran] = {line.split()[3] for line in log.read_text().splitlines()}
        [running] = [worker for worker in workers if str(worker.pid) == ran]
        pool.kill(running)
        survivor = next(worker for worker in workers if worker is not running)
        third = pool.start(concurrency=1)
        row = await wait_for(storage, run_id, ended, timeout=60)
        assert row["status"] == "succeeded"
        time.sleep(2 * 2.0 + 0.5)                       # two more looks of every reaper
        logs = "".join((tmp_path / f"worker-{n}.log").read_text() for n in range(3))
        assert logs.count(f"sent run {run_id} ") == 1, logs[-4000:]
        assert "dropped" not in logs, logs[-4000:]
        ends = [line.split()[1] for line in log.read_text().splitlines()
                if line.startswith("end")]
        assert sorted(set(ends)) == ["0", "1", "2", "3"] and len(ends) <= 5
        assert survivor.poll() is None and third.poll() is None
    finally:
        await storage.close()

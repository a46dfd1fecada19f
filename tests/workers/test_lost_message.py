"""A queued run whose message never reached a worker is not lost: a process
killed between storing the run and sending its id, or a worker killed between
taking the message from Redis and recording it as unacknowledged (Kombu's
window; found by bench/chaos.py, a run left `queued` forever), leaves the run
queued with no message anywhere.  The reapers send it again once their queue
is empty and the run has waited a lease with no worker taking it."""

from __future__ import annotations

from flowforge.service.pool import celery_app, enqueue
from flowforge.storage import storage_from_url
from tests.workers.test_pool import chain, ended, wait_for


async def test_a_queued_run_whose_message_was_lost_runs(pool, tmp_path, monkeypatch):
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        app = celery_app(pool.broker)
        monkeypatch.setattr(app, "send_task", lambda *args, **kwargs: None)  # never sent
        lost = await enqueue(chain(2, 0.05, tmp_path / "lost.log"), storage=storage,
                             queue=pool.queue, broker=pool.broker)
        monkeypatch.undo()
        pool.start()
        sent = await enqueue(chain(2, 0.05, tmp_path / "sent.log"), storage=storage,
                             queue=pool.queue, broker=pool.broker)
        assert (await wait_for(storage, sent, ended, timeout=60))["status"] == "succeeded"
        row = await wait_for(storage, lost, ended, timeout=60)
        assert row["status"] == "succeeded"
        kinds = [e["type"] for e in await storage.get_events(lost)]
        assert kinds.count("run_started") == 1 and kinds[-1] == "run_finished"
    finally:
        await storage.close()

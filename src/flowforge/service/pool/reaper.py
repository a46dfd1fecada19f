"""Every worker's reaper: runs no process runs any more go back to the pool,
due `waiting` runs too, schedules fire, owed webhooks are delivered.

A run's lease lapses when its process died (a lost machine: the lease
expires within `LEASE_SECONDS`; a dead process of this host: at once).  Any
number of reapers see the same lapse; each tries to take it with a
compare-and-set on the row, putting a handoff token in the lease
(`claim_run`), and only the one that did sends the run's id, with the token,
ahead of the new runs (`TAKEOVER_PRIORITY`): one message per lapse.  The
worker that takes the message takes the lease from the token (`work`).  A
message lost on the way (the broker restarted empty, a worker killed between
taking it and acknowledging it) leaves the token to lapse like any lease,
and the next look sends the run once more.

A queued run nobody ever took whose message is nowhere (the process that
queued it died before sending, the broker lost it) is sent again the same
way once it has waited a lease while its queue is empty.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from typing import Any

from flowforge.errors import StorageError
from flowforge.service.cancel import LEASE_SECONDS, lease_holder_alive, lease_lapsed
from flowforge.service.pool.broker import (QUEUED_PRIORITY, TAKEOVER_PRIORITY, QueueError,
                                           broker_url, celery_app, default_queue, send_run)
from flowforge.service.pool.loop import process_loop
from flowforge.service.pool.owed import deliver_owed_webhooks
from flowforge.service.pool.queued import fail_cut_off_run, how_queued, resumes
from flowforge.service.pool.schedules import fire_due
from flowforge.service.pool.waiting import requeue_due
from flowforge.service.runs import open_storage

__all__ = ["REAP_EVERY", "HANDOFF_PREFIX", "reap", "start_reaper"]

#: Seconds between two looks of a worker's reaper.
REAP_EVERY = 2.0
#: A lease held by a takeover message rather than a process (`handoff:<random>`).
HANDOFF_PREFIX = "handoff:"

log = logging.getLogger("flowforge.queue")


async def reap(database: str | None = None, *, broker: str | None = None,
               queue: str | None = None, limit: int = 200) -> list[str]:
    """Send the runs no process runs any more (running, or queued and taken,
    with the lease lapsed), the queued runs whose message was lost, and the
    pool's due `waiting` runs back to the pool (`queue`, default this
    process's): the ids this reaper sent.  A lapse another reaper took first
    is left to it.  With resuming off (here, or by whoever queued the run), a
    cut-off running run is marked failed instead."""
    broker_url(broker)                   # no broker configured: say so before any change
    queue = queue or default_queue()
    sent = []
    async with open_storage(database) as storage:
        # a queued run whose lease is set was taken by a worker (or a takeover
        # message) that is gone before the run started
        running = await storage.list_runs(status="running", limit=limit)
        queued = await storage.list_runs(status="queued", limit=limit)
        now = time.time()
        lapsed = [row for row in running + [r for r in queued if r.get("lease_owner")]
                  if lease_lapsed(row, now)]
        lost = [row for row in queued if not row.get("lease_owner")
                and row["created_at"] < now - LEASE_SECONDS]
        # Celery's application only when there is a message to send
        broker_now = _look_at(celery_app(broker), queue) if lapsed or lost else None
        for row in lapsed:
            owner = row.get("lease_owner") or ""
            if owner.startswith(HANDOFF_PREFIX) and not broker_now.lost(owner):
                continue                 # its message still waits in the queue
            if row["status"] == "running" and \
                    not resumes(await how_queued(storage, row["run_id"])):
                if await fail_cut_off_run(storage, row["run_id"]):
                    log.warning("run %s was cut off; marked failed (resuming is off)",
                                row["run_id"])
                continue
            # a run that never started waits behind the runs under way, as it did
            priority = QUEUED_PRIORITY if row["status"] == "queued" and \
                owner.startswith(HANDOFF_PREFIX) else TAKEOVER_PRIORITY
            if await _take_over(storage, row, queue, broker, broker_now, priority):
                sent.append(row["run_id"])
        for row in lost:
            if broker_now.lost_since(row["created_at"]) and \
                    (await how_queued(storage, row["run_id"])).get("queue", queue) == queue:
                if await _take_over(storage, row, queue, broker, broker_now, QUEUED_PRIORITY):
                    sent.append(row["run_id"])
        sent += [run_id for run_id, outcome in
                 await requeue_due(storage, broker=broker, now=now, limit=limit)
                 if outcome.startswith("sent")]
    return sent


class _Broker:
    """What one look of a reaper knows of the broker: which Redis server it is
    (its `run_id`, new at each start: a restart lost every message), since when
    it runs, and how many messages wait in the queue."""

    def __init__(self, server: str, started_at: float, waiting: int) -> None:
        self.server, self.started_at, self.waiting = server, started_at, waiting

    def lost(self, token: str) -> bool:
        """Whether a takeover message sent with `token` is lost: it was sent to a
        broker that has restarted since, or the queue holds no message at all (a
        worker killed between taking it and recording it as unacknowledged).
        Otherwise it still waits its turn, however long the queue is."""
        return token.split(":")[1] != self.server or not self.waiting

    def lost_since(self, created_at: float) -> bool:
        """Whether the message of a run queued at `created_at`, that no worker
        took, is lost: the broker restarted since (a margin of a second: its
        uptime is in whole seconds), or the queue holds no message at all (the
        process that queued the run died before sending it)."""
        return created_at < self.started_at - 1.0 or not self.waiting


def _look_at(app: Any, queue: str) -> _Broker:
    from kombu.exceptions import ChannelError

    try:
        with app.connection_for_read() as connection:
            channel = connection.default_channel
            try:
                waiting = channel.queue_declare(queue, passive=True).message_count
            except ChannelError:
                waiting = 0                       # Redis: an empty queue does not exist
            info = channel.client.info("server") if hasattr(channel, "client") else {}
    except Exception as exc:  # noqa: BLE001 - kombu's and redis-py's errors, whatever they are
        raise QueueError(f"the broker could not be reached ({type(exc).__name__}: "
                         f"{exc})") from None
    server = str(info.get("run_id") or "broker")[:12]
    started = time.time() - float(info.get("uptime_in_seconds") or 0) if info else 0.0
    return _Broker(server, started, waiting)


async def _take_over(storage: Any, row: dict[str, Any], queue: str, broker: str | None,
                     broker_now: _Broker, priority: int) -> bool:
    """Take this lapse of the run's lease for a takeover message (compare-and-set)
    and send the message; False when another reaper took it first or the run
    moved on.  A broker that cannot be reached gives the lapse back (QueueError)."""
    run_id, holder = row["run_id"], row.get("lease_owner")
    token = f"{HANDOFF_PREFIX}{broker_now.server}:{uuid.uuid4().hex[:16]}"
    if not await storage.claim_run(run_id, token, LEASE_SECONDS,
                                   expected_owner=holder if lease_holder_alive(holder)
                                   is False else None, expected_status=row["status"]):
        return False
    try:
        send_run(run_id, storage.url, queue=queue, priority=priority, handoff=token,
                 broker=broker)
    except QueueError:
        await storage.claim_run(run_id, token, -1.0)     # lapsed again: the next look
        raise
    log.info("reaper: sent run %s to queue %s (%s)", run_id, queue,
             "its message was lost" if not holder or holder.startswith(HANDOFF_PREFIX)
             else f"a takeover: the lease of {holder} lapsed")
    return True


def start_reaper(database: str | None, *, broker: str | None = None,
                 queue: str | None = None, every: float = REAP_EVERY) -> threading.Event:
    """A thread that reaps every `every` seconds (and starts the schedules' due
    firings, exactly once across workers, and the deliveries of owed webhooks,
    on the process's loop) until the returned event is set.  Each of the three
    goes on when another fails (a broker away stops no webhook)."""
    stop = threading.Event()

    def reaping() -> None:
        found = asyncio.run(reap(database, broker=broker, queue=queue))
        if found:
            log.info("reaper: sent %d run(s) back to the pool: %s", len(found),
                     ", ".join(found))

    def firing() -> None:
        fired = asyncio.run(fire_due(database))
        if fired:
            log.info("scheduler: started %d scheduled run(s)", len(fired))

    def delivering() -> None:
        process_loop().spawn(deliver_owed_webhooks, database).result()

    def loop() -> None:
        while not stop.wait(every):
            for step in (reaping, firing, delivering):
                try:
                    step()
                except (StorageError, QueueError, OSError) as exc:
                    log.warning("reaper: %s", exc)
                except Exception:  # noqa: BLE001 - a reaper that dies leaves runs cut off
                    log.exception("reaper failed; trying again")

    threading.Thread(target=loop, name="flowforge-reaper", daemon=True).start()
    return stop

"""A worker runs a queued run on the process's one event loop
(`loop.process_loop`), so one process runs many runs at once: a worker on
Redis takes the run's id there itself (`redis_consumer`), on another broker
Celery's task hands it over and waits. The run's lease (a compare-and-set on
its row) stops two processes from running one run, and `work` drops a second
message for a run this process is running already. The run goes through
`resume`: checkpointed blocks are not run again, whether the run is new or
taken over.

A message a reaper sent for a run whose lease lapsed carries the handoff token
the reaper left on the row: the worker that takes the message takes the lease
from the token (`claim_run(expected_owner=token)`), so the takeover does not
wait for the token to lapse, and a stale copy of the message, whose token was
replaced, is dropped at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
import time
from typing import Any

from flowforge.errors import WorkflowError
from flowforge.processes import settle_heap
from flowforge.service.cancel import LEASE_SECONDS, lease_lapsed, process_id
from flowforge.service.pool.broker import TASK_NAME, celery_app
from flowforge.service.pool.loop import process_loop
from flowforge.service.pool.owed import deliver_when_ended
from flowforge.service.pool.queued import (fail_cut_off_run, how_queued, how_queued_in,
                                            resumes)
from flowforge.service.loading import load
from flowforge.service.resuming import RunDiedTooOften, resume
from flowforge.service.runs import RunStateError, open_storage
from flowforge.workflow.paths import DOCUMENT_DIR, FILES_ROOT
from flowforge.workflow.policy import TRUSTED

__all__ = ["work", "worker_app", "prepare_worker"]

log = logging.getLogger("flowforge.queue")


def worker_app(url: str | None = None) -> Any:
    """`celery_app` with the task that runs a run: what `flowforge worker` runs
    on a broker other than Redis (on Redis: `redis_consumer`)."""
    app = celery_app(url)
    if TASK_NAME not in app.tasks:
        app.task(name=TASK_NAME, bind=True, ignore_result=True)(_run_task)
    return app


#: What a worker compiles before it says it is ready (the loaders' imports).
_WARM_UP = {"id": "warm-up", "blocks": [{"id": "ready", "type": "set", "with": {}}]}


#: The worker process's GIL switch interval (Python's default: 5 ms).  Its threads (the
#: runs' loop, the reaper; on a broker other than Redis, Celery's consumer) hand the GIL
#: to each other at every socket and SQLite call, and one that gets it back waits up to
#: this long: at 5 ms, a commit holding SQLite's write lock across processes spent most
#: of its time waiting for the GIL, and other processes for the lock (measured with 4
#: worker processes on a loaded machine: 20-45x the commit's CPU time; 7-15x at 0.5 ms).
SWITCH_INTERVAL = 0.0005


def prepare_worker(database: str | None = None) -> None:
    """Ready this process to run runs: pay now, before the worker says it is
    ready, what its first run would pay instead (~0.7 s of CPU, while the runs
    it took wait): the block types' and the loaders' imports, the run storage
    opened on the process's loop, and the collector's walk over what they
    left (`settle_heap`, below); and shorten the GIL's switch interval
    (`SWITCH_INTERVAL`).  A database that cannot be opened now is left to the
    first run to report."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    load(_WARM_UP)
    try:
        process_loop().call(lambda storage: asyncio.sleep(0), database)
    except Exception as exc:  # noqa: BLE001 - each run opens it again and says why
        log.warning("the run database could not be opened yet (%s): runs will try again",
                    exc)
    # The imports leave ~100,000 objects that live as long as the process, and the
    # first full collection walked them all: 90-160 ms per worker process, on the
    # runs' loop, in its first burst of runs (4 x 64 on PostgreSQL drained at half
    # the rate of later bursts; bench/RESULTS.md).  Collected once here and frozen
    # (kept out of the collector's generations), they are never walked again; and
    # the young generation is collected less often (see flowforge.processes).
    settle_heap()


def _run_task(task: Any, run_id: str, database: str | None = None,
              handoff: str | None = None) -> str:
    """The Celery task: run (or finish) one stored run on this worker process's
    shared loop, returning when the run ends or waits: the message is
    acknowledged then.  Many tasks (threads) share the loop, so one process
    runs many runs at once."""
    return process_loop().call(lambda storage: work(run_id, storage, handoff=handoff),
                               database)


async def work(run_id: str, database: str | Any = None, *, handoff: str | None = None) -> str:
    """Run (or resume) a stored run here (`database`: a URL or an open storage);
    what happened: `done`, `busy` (a live process holds its lease), `ended`
    (nothing to do) or `cancelled`.  `handoff`: the token of a reaper's
    takeover message."""
    if run_id in _WORKING:
        # A copy of its message (the reaper's, or one back from a lost worker) while
        # this process runs it: the lease cannot tell, it is this process's own.
        log.info("run %s: dropped a copy of its message (this process runs it)", run_id)
        return "busy"
    _WORKING.add(run_id)
    try:
        return await _work(run_id, database, handoff)
    finally:
        _WORKING.discard(run_id)


#: The runs `work` is running in this process (many at once on its loop).
_WORKING: set[str] = set()


async def _work(run_id: str, database: str | Any, handoff: str | None) -> str:
    async with open_storage(database) as storage:
        taken = None
        if handoff is None:
            # Most messages: a run queued and never taken.  Its lease, row and events
            # in one go (one round trip on PostgreSQL); any other run is read first.
            taken = await storage.take_run(run_id, process_id(), LEASE_SECONDS,
                                           expected_status="queued")
        row = taken["row"] if taken else await storage.get_run(run_id)
        if row is None or row["status"] not in ("queued", "running"):
            log.info("run %s: dropped its message (the run is %s)", run_id,
                     row["status"] if row else "unknown")
            return "ended"      # a `waiting` run is sent again when it is due or decided
        if handoff and not await storage.claim_run(run_id, process_id(), LEASE_SECONDS,
                                                   expected_owner=handoff,
                                                   expected_status=row["status"]):
            log.info("run %s: dropped a stale takeover message (its handoff was replaced "
                     "or the run moved on)", run_id)
            return "busy"
        try:
            return await _work_on(storage, run_id, row, taken)
        finally:
            if row.get("webhook_state") == "pending":
                await deliver_when_ended(storage, run_id, later=storage is database)


async def _work_on(storage: Any, run_id: str, row: dict[str, Any],
                   taken: dict[str, Any] | None) -> str:
    """`_work` on the run's row, read once it was found queued or running;
    `taken`: what `take_run` read, this process holding the lease already
    (a run that does not start here gives it back)."""
    how = how_queued_in(taken["events"]) if taken else await how_queued(storage, run_id)
    if row["status"] == "running" and not resumes(how) and lease_lapsed(row):
        # a message back from a lost worker: with resuming off, the run fails, saying so
        await fail_cut_off_run(storage, run_id)
        return "ended"
    freed = {"lease_owner": None, "lease_expires_at": None} if taken else {}
    try:
        options = await _options(storage, run_id, row, how, freed)
    except BaseException:
        if freed:
            await storage.update_run(run_id, **freed)
        raise
    if isinstance(options, str):
        return options
    try:
        await resume(run_id, storage=storage, row=row, taken=taken, **options)
    except RunDiedTooOften:          # failed, saying why (logged where it was decided)
        return "ended"
    except RunStateError as exc:
        log.info("run %s: %s", run_id, exc)
        return "busy"
    except WorkflowError as exc:     # the stored document no longer loads: say so
        await storage.update_run(run_id, status="failed", finished_at=time.time(),
                                 error=str(exc))
        return "ended"
    return "done"


async def _options(storage: Any, run_id: str, row: dict[str, Any], how: dict[str, Any],
                   freed: dict[str, Any]) -> dict[str, Any] | str:
    """`resume`'s options for the run as it was queued (`how`), or what became
    of a run that does not start: `cancelled` (before it started) or `ended`
    (its user is gone); `freed`: the lease columns such a run gives back."""
    if row["status"] == "queued" and row.get("cancel_requested_at"):
        await storage.update_run(run_id, status="cancelled", finished_at=time.time(),
                                 error="cancelled before a worker started it", **freed)
        return "cancelled"
    policy, owned = TRUSTED, {}
    if not how.get("trusted"):
        from flowforge.service.grants import policy_for
        user = await storage.get_user(row["user_id"])
        if user is None:
            await storage.update_run(run_id, status="failed", finished_at=time.time(),
                                     error=f"the user {row['user_id']} no longer exists",
                                     **freed)
            return "ended"
        policy = await policy_for(storage, user,
                                  shared_keys=bool(how.get("share_provider_keys")))
        owned = {"stored_workflows": _stored_workflows(storage, row["user_id"])}
    # A server's run resolves relative paths against its files root (None: refused),
    # a CLI's against its document's folder (workflow.paths).
    services = {FILES_ROOT: how.get("files_root")} if not how.get("trusted") else \
        {DOCUMENT_DIR: how[DOCUMENT_DIR]} if how.get(DOCUMENT_DIR) else {}
    services.update(how.get("limits") or {})           # the submitting server's caps
    keys = None
    if how.get("share_provider_keys"):       # the keys of this worker's environment
        from flowforge.providers.resolve import provider_keys_in
        keys = provider_keys_in(os.environ)
    return {"model": how.get("model"), "services": services or None, "policy": policy,
            **owned, **({"provider_keys": keys} if keys else {})}


def _stored_workflows(storage: Any, owner: str) -> Any:
    """A run a server submitted names its children by id: the worker reads the
    owner's stored workflows from the same database, compiled once per process."""
    return _workflow_store(storage).reader(owner)


@functools.lru_cache(maxsize=8)       # a worker process opens one storage
def _workflow_store(storage: Any) -> Any:
    from flowforge.service.workflows import WorkflowStore

    return WorkflowStore(storage)

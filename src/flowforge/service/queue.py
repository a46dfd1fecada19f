"""Runs on a pool of workers: Celery, with Redis (or any Celery broker) as the
queue and the run storage (PostgreSQL across machines, SQLite on one) as the
state.  No second engine: a worker runs a queued run with `resume`, the same
code that finishes a run cut off by a crash.

    FLOWFORGE_BROKER_URL=redis://127.0.0.1:6379/0 flowforge worker --concurrency 16
    flowforge run flow.yaml --queue            # or `flowforge serve --workers celery`

How a run travels:
- `enqueue` checks the document and the user's grants, stores the run as
  `queued` with a `run_queued` event holding how it must run (model, whether
  it is trusted, files root: never a secret), and sends its id to the broker.
- A worker takes the id (a thread of Celery's threads pool, which hands the
  run to the process's one event loop, `process_loop`, and waits: many runs
  at once per process), takes the run's lease (the compare-and-set on the
  row that stops two processes from running one run; within a process,
  `work` drops a second message for a run it is running), and runs it with
  `resume`: checkpointed blocks are not run again.  Its events are stored as
  they happen, so SSE and WebSocket clients of any server see them.
- A run that waits (an approval, a long wait) frees the worker; when it is
  decided or due it goes back to the queue (`requeue_waiting`).
- Cancel is the row's cancel mark, seen by the worker within `poll_interval`.
- A run's webhook is owed on its row (`webhook_state`): the worker that ends
  the run, the server, or any reaper delivers it, after a claim on the row
  (`webhooks.deliver_owed`), so a server that died after queueing loses none.
- Resuming off (`--no-resume`, FLOWFORGE_RESUME_CUT_OFF=0) where the run was
  queued travels with it (`run_queued`): whoever finds it cut off fails it.
- A worker killed at any point: its messages were not acknowledged
  (`acks_late`), so the broker gives them back after its visibility timeout
  (`visibility_timeout()`), and every worker's reaper enqueues runs whose
  lease has expired; the next worker resumes from the checkpoints, so what
  succeeded never runs again.  Takeover of a started run takes at most the
  lease (15 s) plus the reaper's period.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from functools import lru_cache
from typing import Any

from flowforge.engine.ids import new_run_id
from flowforge.errors import FlowforgeError, StorageError, WorkflowError
from flowforge.service.cancel import lease_lapsed, process_id
from flowforge.service.loading import load
from flowforge.service.queue_follow import QueuedHandle, start_queued, stored_result
from flowforge.service.resuming import fail_cut_off, resume, resume_cut_off
from flowforge.service.runs import RunStateError, idempotency_columns, open_storage
from flowforge.service.webhooks import deliver_when_ended
from flowforge.workflow.policy import TRUSTED, Policy, check_policy

__all__ = ["QueuedHandle", "start_queued", "stored_result",
           "BROKER_ENV", "DEFAULT_QUEUE", "QUEUE_ENV", "default_queue", "broker_url", "celery_app", "enqueue", "work",
           "reap", "start_reaper", "QueueError", "TASK_NAME", "born_on_pool",
           "requeue_waiting", "requeue_due", "decide_on_pool"]

BROKER_ENV = "FLOWFORGE_BROKER_URL"
DEFAULT_QUEUE = "flowforge"
QUEUE_ENV = "FLOWFORGE_QUEUE"          # the queue runs go to when none is named


def default_queue() -> str:
    return os.environ.get(QUEUE_ENV) or DEFAULT_QUEUE
TASK_NAME = "flowforge.run"
#: Seconds between two looks of a worker's reaper for runs whose lease expired.
REAP_EVERY = 2.0
#: A new run's message priority.  Redis hands out a queue's lower numbers first, so
#: a cut-off run the reaper sends again (priority 0) goes ahead of the queued runs:
#: its takeover is the lease plus REAP_EVERY, not the wait for the whole backlog.
QUEUED_PRIORITY = 3

log = logging.getLogger("flowforge.queue")


class QueueError(FlowforgeError):
    """The worker pool cannot be used as asked (no broker configured, a bad URL)."""


def visibility_timeout() -> float:
    """Seconds after which a message a worker took and never acknowledged goes back
    to the queue (FLOWFORGE_QUEUE_VISIBILITY, default 60).  A whole worker killed
    with the messages it had taken is recovered this way; a run still running
    when its message comes back is not run twice: the copy finds the lease held
    and is dropped."""
    try:
        value = float(os.environ.get("FLOWFORGE_QUEUE_VISIBILITY") or 60.0)
    except ValueError:
        return 60.0
    return value if value >= 1.0 else 60.0


def broker_url(url: str | None = None) -> str:
    found = url or os.environ.get(BROKER_ENV)
    if not found:
        raise QueueError(f"no broker configured: set {BROKER_ENV} (e.g. "
                         f"redis://127.0.0.1:6379/0) or pass --broker; without one, runs "
                         f"run in this process as usual")
    if not found.startswith(("redis://", "rediss://", "amqp://", "memory://")):
        raise QueueError(f"broker URL {found!r}: use redis://HOST:PORT/DB (or amqp://...)")
    return found


@lru_cache(maxsize=8)
def celery_app(url: str | None = None) -> Any:
    """The Celery application for this broker, with the one task that runs a run."""
    try:
        from celery import Celery
    except ImportError:
        raise QueueError("the worker pool needs Celery: pip install 'flowforge[workers]'") \
            from None
    app = Celery("flowforge", broker=broker_url(url))
    app.conf.update(
        task_acks_late=True,                  # a message is done only when the run is
        task_reject_on_worker_lost=True,      # a killed child puts its message back
        worker_prefetch_multiplier=1,         # a busy worker does not hoard runs
        task_default_queue=default_queue(), task_ignore_result=True,
        task_serializer="json", accept_content=["json"],
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        # unacknowledged messages are looked for every 5 s (Kombu's default sweep is
        # every ~100 s), so a lost worker's runs come back after the visibility timeout
        broker_transport_options={"visibility_timeout": visibility_timeout(),
                                  "unacked_restore_interval": 5,
                                  "unacked_restore_throttle": 1})
    app.task(name=TASK_NAME, bind=True, ignore_result=True)(_run_task)
    return app


def _run_task(task: Any, run_id: str, database: str | None = None) -> str:
    """The Celery task: run (or finish) one stored run on this worker process's
    shared loop (`process_loop`), returning when the run ends or waits: the
    message is acknowledged then.  Many tasks (threads) share the loop, so one
    process runs many runs at once."""
    from flowforge.service.process_loop import process_loop
    return process_loop().call(lambda storage: work(run_id, storage), database)


async def enqueue(workflow: Any, inputs: dict[str, Any] | None = None, *,
                  user: str | dict[str, Any] | None = None, storage: Any = None,
                  model: str | None = None, policy: Policy = TRUSTED,
                  files_root: str | None = None, queue: str | None = None,
                  broker: str | None = None, run_id: str | None = None,
                  workflow_version: int | None = None,
                  share_provider_keys: bool = False, budget: Any = None,
                  resume_cut_off: bool | None = None, webhook: str | None = None,
                  webhook_delivery: dict[str, Any] | None = None,
                  idempotency: tuple[str, str] | None = None,
                  limits: dict[str, int] | None = None) -> str:
    """Store the run as `queued` and hand it to the pool; its id.

    `resume_cut_off` (default: this process's `FLOWFORGE_RESUME_CUT_OFF`) is the
    submitter's choice for the run if a process running it dies: stored with
    the run, so every worker and reaper that finds it cut off honours it (a
    worker's own `--no-resume` still applies to every run it finds).

    `webhook`: POSTed when the run ends by whichever process sees it ended
    first (`webhooks.deliver_owed`), as `webhook_delivery`
    (`webhooks.delivery_options`) says; the caller checked the URL.

    `idempotency` (key, request fingerprint) is stored in the row: when the
    user already has a run with that key, IdempotencyKeyTaken and nothing is
    queued.

    `limits` (a server's `max_run_events`, `max_loop_passes`) travel with the
    run: the worker gives them to it as services."""
    from flowforge.service.resuming import resume_cut_off as resuming_here
    from flowforge.engine.inputs import validate_inputs

    app = celery_app(broker)
    queue = queue or default_queue()
    compiled = load(workflow)
    check_policy(compiled, policy, model_override=model)
    validate_inputs(compiled.doc.inputs, inputs or {})
    user_id = (user.get("id") if isinstance(user, dict) else user) or "default"
    run_id = run_id or new_run_id()
    async with open_storage(storage) as opened:
        if opened is None:
            raise QueueError("a queued run needs the run storage (workers read it): give a "
                             "database, not storage=False")
        now = time.time()
        await opened.create_run({
            "run_id": run_id, "workflow_id": compiled.id, "workflow_version": workflow_version,
            "user_id": user_id, "status": "queued", "inputs": inputs or {},
            "created_at": now, "document": compiled.document,
            # a request's budget travels with the run, as for a run in a process
            "budget": budget if budget is None or isinstance(budget, dict)
            else budget.model_dump(), **idempotency_columns(idempotency),
            **({"webhook": webhook, "webhook_state": "pending"} if webhook else {})})
        await opened.record(run_id, [{
            "seq": 1, "type": "run_queued", "run_id": run_id, "time": now, "block_id": None,
            "queue": queue, "model": model, "trusted": policy is TRUSTED,
            "files_root": files_root, "share_provider_keys": share_provider_keys,
            "resume_cut_off": resuming_here() if resume_cut_off is None else resume_cut_off,
            **({"webhook_delivery": webhook_delivery or {}} if webhook else {}),
            **({"limits": limits} if limits else {}),
            "by": process_id()}], [])
        database = opened.url
    app.send_task(TASK_NAME, args=[run_id, database], queue=queue, priority=QUEUED_PRIORITY)
    return run_id


async def _how(storage: Any, run_id: str) -> dict[str, Any]:
    for event in await storage.get_events(run_id):
        if event["type"] == "run_queued":
            return event
    return {"trusted": True}          # a run started in a process, cut off, then queued


def _resumes(how: dict[str, Any]) -> bool:
    """Whether a cut-off run is resumed: only if both this process (its
    `--no-resume`, FLOWFORGE_RESUME_CUT_OFF) and whoever queued the run (the
    choice stored in its `run_queued` event) resume cut-off runs."""
    return resume_cut_off() and how.get("resume_cut_off", True) is not False


async def _fail_cut_off(storage: Any, run_id: str) -> bool:
    """`fail_cut_off`, its reason naming where resuming was turned off."""
    return await fail_cut_off(storage, run_id, where="here" if not resume_cut_off()
                              else "where the run was queued")


async def work(run_id: str, database: str | Any = None) -> str:
    """Run (or resume) a stored run here (`database`: a URL or an open storage);
    what happened: `done`, `busy` (a live process holds its lease), `ended`
    (nothing to do) or `cancelled`."""
    if run_id in _WORKING:
        # A copy of its message (the reaper's, or one back from a lost worker) while
        # this process runs it: the lease cannot tell, it is this process's own.
        return "busy"
    _WORKING.add(run_id)
    try:
        return await _work(run_id, database)
    finally:
        _WORKING.discard(run_id)


#: The runs `work` is running in this process (many at once on its loop).
_WORKING: set[str] = set()


async def _work(run_id: str, database: str | Any) -> str:
    async with open_storage(database) as storage:
        row = await storage.get_run(run_id)
        if row is None or row["status"] not in ("queued", "running"):
            return "ended"      # a `waiting` run is sent again when it is due or decided
        try:
            return await _work_on(storage, run_id, row)
        finally:
            if row.get("webhook_state") == "pending":
                await deliver_when_ended(storage, run_id, later=storage is database)


async def _work_on(storage: Any, run_id: str, row: dict[str, Any]) -> str:
    """`_work` on the run's row, read once it was found queued or running."""
    how = await _how(storage, run_id)
    if row["status"] == "running" and not _resumes(how) and lease_lapsed(row):
        # a message back from a lost worker: with resuming off, the run fails, saying so
        await _fail_cut_off(storage, run_id)
        return "ended"
    if row["status"] == "queued" and row.get("cancel_requested_at"):
        await storage.update_run(run_id, status="cancelled", finished_at=time.time(),
                                 error="cancelled before a worker started it")
        return "cancelled"
    policy = TRUSTED
    if not how.get("trusted"):
        from flowforge.service.grants import policy_for
        user = await storage.get_user(row["user_id"])
        if user is None:
            await storage.update_run(run_id, status="failed", finished_at=time.time(),
                                     error=f"the user {row['user_id']} no longer exists")
            return "ended"
        policy = await policy_for(storage, user)
    services = {"files_root": how.get("files_root")} if how.get("files_root") else {}
    services.update(how.get("limits") or {})           # the submitting server's caps
    keys = None
    if how.get("share_provider_keys"):       # the keys of this worker's environment
        from flowforge.providers.registry import provider_keys_in
        keys = provider_keys_in(os.environ)
    try:
        await resume(run_id, storage=storage, model=how.get("model"), services=services or None,
                     policy=policy, **({"provider_keys": keys} if keys else {}))
    except RunStateError as exc:
        log.info("run %s: %s", run_id, exc)
        return "busy"
    except WorkflowError as exc:     # the stored document no longer loads: say so
        await storage.update_run(run_id, status="failed", finished_at=time.time(),
                                 error=str(exc))
        return "ended"
    return "done"


async def reap(database: str | None = None, *, broker: str | None = None,
               queue: str | None = None, limit: int = 200) -> list[str]:
    """Enqueue the runs no process runs any more (running, or queued and taken,
    with the lease expired or its process gone), and the pool's `waiting` runs
    that are due (a `wait` ended, an approval timed out): the ids sent.
    Duplicates are harmless: the lease decides.  With resuming off
    (here, or by whoever queued the run: `_resumes`), a cut-off running run is
    marked failed instead."""
    app = celery_app(broker)
    queue = queue or default_queue()
    sent = []
    async with open_storage(database) as storage:
        # a queued run whose lease is set was taken by a worker that died before it
        # started it (its message waits out the broker's visibility timeout)
        running = await storage.list_runs(status="running", limit=limit)
        taken = [row for row in await storage.list_runs(status="queued", limit=limit)
                 if row.get("lease_owner")]
        now = time.time()
        for row in running + taken:
            if not lease_lapsed(row, now):
                continue
            how = await _how(storage, row["run_id"]) if row["status"] == "running" else {}
            if row["status"] == "running" and not _resumes(how):
                if await _fail_cut_off(storage, row["run_id"]):
                    log.warning("run %s was cut off; marked failed (resuming is off)",
                                row["run_id"])
                continue
            app.send_task(TASK_NAME, args=[row["run_id"], storage.url], queue=queue,
                          priority=0)            # ahead of the queued runs
            sent.append(row["run_id"])
        for run_id in await _lost(app, storage, queue, now, limit):
            app.send_task(TASK_NAME, args=[run_id, storage.url], queue=queue, priority=0)
            sent.append(run_id)
        sent += [run_id for run_id, outcome in
                 await requeue_due(storage, broker=broker, now=now, limit=limit)
                 if outcome.startswith("sent")]
    return sent


async def requeue_due(storage: Any, *, broker: str | None = None, now: float | None = None,
                      limit: int = 100) -> list[tuple[str, str]]:
    """Send the due `waiting` runs that were born on the pool back to it (the
    compare-and-set of `requeue_waiting`: a run another resumer took first is
    left to it); `(run id, what happened)` for each such run, in words.  A
    broker that cannot be reached leaves the run waiting, saying so; the
    others are still tried."""
    done = []
    for run_id in await storage.due_runs(time.time() if now is None else now, limit):
        if not await born_on_pool(storage, run_id):
            continue
        try:
            if await requeue_waiting(storage, run_id, broker=broker):
                queue = (await _how(storage, run_id)).get("queue") or default_queue()
                done.append((run_id, f"sent to the pool (queue {queue})"))
            else:
                done.append((run_id, "left alone: another resumer took it first"))
        except QueueError as exc:
            done.append((run_id, f"still waiting: {exc}"))
    return done


async def born_on_pool(storage: Any, run_id: str) -> bool:
    """Whether the run was queued (its `run_queued` event says how it runs): such
    a run continues on the pool; one started in a process continues there."""
    return any(e["type"] == "run_queued" for e in await storage.get_events(run_id))


async def requeue_waiting(storage: Any, run_id: str, *, broker: str | None = None,
                          decision: tuple[str, dict[str, Any]] | None = None) -> bool:
    """Send a `waiting` run (due, or with `decision` = (approval block, `{decision,
    by, at, comment}`)) back to the pool: its status goes `queued` (a
    compare-and-set: of two deciders or reapers, one wins; False for the other),
    the decision is stored with the block's state, where the resumed block finds
    it, then its id goes to the queue it first ran on."""
    app = celery_app(broker)
    before = await storage.get_run(run_id)
    if before is None or not await storage.queue_waiting(run_id):
        return False
    state = None
    if decision is not None:
        block_id, made = decision
        state = next((dict(b["output"] or {}) for b in await storage.get_blocks(run_id)
                      if b["scope"] == "" and b["block_id"] == block_id), {})
        await storage.record(run_id, [], [{"scope": "", "block_id": block_id,
                                           "status": "waiting",      # about the wait only
                                           "output": {**state, "decision": made}}])
    how = await _how(storage, run_id)
    try:
        app.send_task(TASK_NAME, args=[run_id, storage.url], queue=how.get("queue")
                      or default_queue(), priority=0)     # a run under way goes first
    except Exception as exc:  # noqa: BLE001 - the broker is down: the run waits on
        if decision is not None:
            await storage.record(run_id, [], [{"scope": "", "block_id": decision[0],
                                               "status": "waiting", "output": state}])
        await storage.update_run(run_id, status="waiting", resume_at=before.get("resume_at"))
        raise QueueError(f"run {run_id}: the broker could not be reached ({exc}); the run "
                         f"is still waiting, try again") from None
    return True


async def decide_on_pool(run_id: str, block_id: str, decision: str, *, by: str | None,
                         storage: Any, comment: str | None = None,
                         broker: str | None = None) -> None:
    """Approve or reject a waiting pool run's approval block: checked as
    `approvals.check_decision`, then the run goes back to the pool with the
    decision (RunStateError when another decision or resumer came first)."""
    from flowforge.service.approvals import check_decision

    await check_decision(storage, run_id, block_id, decision)
    made = {"decision": decision, "by": by, "at": time.time(), "comment": comment}
    if not await requeue_waiting(storage, run_id, broker=broker, decision=(block_id, made)):
        raise RunStateError(f"run {run_id} is no longer waiting: another decision or "
                            f"resumer came first")


async def _lost(app: Any, storage: Any, queue: str, now: float, limit: int) -> list[str]:
    """Queued runs of `queue` whose message is nowhere: no worker took them for a
    lease while the queue holds no message.  (A process killed between storing a
    run and sending its id; a worker killed between taking a message from Redis
    and recording it as unacknowledged.)  A message only in flight is sent twice
    at worst: harmless, the lease decides."""
    from kombu.exceptions import ChannelError

    from flowforge.service.cancel import LEASE_SECONDS

    old = [row for row in await storage.list_runs(status="queued", limit=limit)
           if not row.get("lease_owner") and row["created_at"] < now - LEASE_SECONDS]
    if not old:
        return []
    try:
        with app.connection_for_read() as connection:
            waiting = connection.default_channel.queue_declare(
                queue, passive=True).message_count
    except ChannelError:
        waiting = 0                       # Redis: an empty queue does not exist
    if waiting:
        return []                         # their messages may be among these
    return [row["run_id"] for row in old
            if (await _how(storage, row["run_id"])).get("queue", queue) == queue]


async def _fire(database: str | None) -> list[str]:
    from flowforge.service.schedules import fire_due
    return await fire_due(database)


def start_reaper(database: str | None, *, broker: str | None = None,
                 queue: str | None = None, every: float = REAP_EVERY) -> threading.Event:
    """A thread that reaps every `every` seconds (and starts the schedules' due
    firings, exactly once across workers, and the deliveries of owed webhooks,
    on the process's loop) until the returned event is set."""
    from flowforge.service.process_loop import process_loop
    from flowforge.service.webhooks import deliver_owed_webhooks
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            try:
                found = asyncio.run(reap(database, broker=broker, queue=queue))
                fired = asyncio.run(_fire(database))
                if fired:
                    log.info("scheduler: started %d scheduled run(s)", len(fired))
                process_loop().spawn(deliver_owed_webhooks, database).result()
            except (StorageError, QueueError, OSError) as exc:
                log.warning("reaper: %s", exc)
                continue
            except Exception:  # noqa: BLE001 - a reaper that dies leaves runs cut off
                log.exception("reaper failed; trying again")
                continue
            if found:
                log.info("reaper: resumed %d cut-off run(s): %s", len(found), ", ".join(found))

    threading.Thread(target=loop, name="flowforge-reaper", daemon=True).start()
    return stop


"""A pool run that waits (an approval, a long `wait`) frees its worker; when it
is decided or due it goes back to the queue it first ran on, ahead of new
runs (it is under way).  The status change `waiting` -> `queued` is a
compare-and-set, so of two deciders or reapers one sends it."""

from __future__ import annotations

import time
from typing import Any

from flowforge.service.pool.broker import TAKEOVER_PRIORITY, QueueError, default_queue, send_run
from flowforge.service.pool.queued import born_on_pool, how_queued
from flowforge.service.runs import RunStateError

__all__ = ["requeue_waiting", "requeue_due", "decide_on_pool"]


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
                queue = (await how_queued(storage, run_id)).get("queue") or default_queue()
                done.append((run_id, f"sent to the pool (queue {queue})"))
            else:
                done.append((run_id, "left alone: another resumer took it first"))
        except QueueError as exc:
            done.append((run_id, f"still waiting: {exc}"))
    return done


async def requeue_waiting(storage: Any, run_id: str, *, broker: str | None = None,
                          decision: tuple[str, dict[str, Any]] | None = None) -> bool:
    """Send a `waiting` run (due, or with `decision` = (approval block, `{decision,
    by, at, comment}`)) back to the pool: its status goes `queued` (a
    compare-and-set: of two deciders or reapers, one wins; False for the other),
    the decision is stored with the block's state, where the resumed block finds
    it, then its id goes to the queue it first ran on."""
    from flowforge.service.pool.broker import celery_app

    celery_app(broker)                  # no broker configured: say so before changing
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
    how = await how_queued(storage, run_id)
    try:
        send_run(run_id, storage.url, queue=how.get("queue") or default_queue(),
                 priority=TAKEOVER_PRIORITY, broker=broker)   # a run under way goes first
    except QueueError as exc:  # the broker is down: the run waits on
        if decision is not None:
            await storage.record(run_id, [], [{"scope": "", "block_id": decision[0],
                                               "status": "waiting", "output": state}])
        await storage.update_run(run_id, status="waiting", resume_at=before.get("resume_at"))
        raise QueueError(f"{exc}; the run is still waiting, try again") from None
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

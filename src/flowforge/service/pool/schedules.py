"""Schedules: stored workflows with `triggers:` run by themselves.

Every worker's scheduler looks at the clock (`fire_due`, on the reaper's
thread): for each trigger of each stored workflow, the latest time its cron
names that is not in the future, not older than `GRACE` seconds and not
older than the trigger itself (`trigger_since`: a workflow saved at 21:24:05
with `* * * * *` first fires at 21:25:00) is a firing; the firing is claimed in the storage (a row keyed by workflow,
trigger and time), and only the scheduler whose claim went in starts the
run.  So each firing happens exactly once with any number of schedulers; a
firing missed by more than `GRACE` (every scheduler was down) is skipped, not
replayed in a burst.  The run is the workflow owner's, with the owner's grants,
on the pool.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from flowforge.engine.ids import new_run_id
from flowforge.errors import FlowforgeError
from flowforge.service.grants import policy_for
from flowforge.service.pool.enqueue import enqueue
from flowforge.service.runs import open_storage
from flowforge.workflow.loader import document_from_data

__all__ = ["GRACE", "fire_due", "list_schedules", "due_time", "next_time", "trigger_since"]

#: Seconds after its time that a firing may still start (a scheduler's tick, a restart).
GRACE = 120.0


def due_time(cron: str, zone: str, now: float) -> float:
    """The latest time at or before `now` that `cron` (read in `zone`) names."""
    from croniter import croniter

    local = datetime.fromtimestamp(now, ZoneInfo(zone))
    if croniter.match(cron, local.replace(second=0, microsecond=0)) and local.second == 0 \
            and local.microsecond == 0:
        return now
    return croniter(cron, local).get_prev(datetime).timestamp()


def next_time(cron: str, zone: str, now: float) -> float:
    from croniter import croniter

    return croniter(cron, datetime.fromtimestamp(now, ZoneInfo(zone))).get_next(
        datetime).timestamp()


async def _workflows_with_triggers(storage: Any) -> list[tuple[dict[str, Any], Any]]:
    found = []
    offset = 0
    while True:
        rows = await storage.list_workflows(None, limit=200, offset=offset)
        for row in rows:
            stored = await storage.get_workflow(row["owner"], row["workflow_id"])
            if stored is None or not (stored["document"] or {}).get("triggers"):
                continue
            try:
                doc = document_from_data(stored["document"])
            except FlowforgeError:
                continue               # a document that no longer loads has no schedule
            found.append((stored, doc))
        if len(rows) < 200:
            return found
        offset += 200


async def fire_due(database: Any = None, *, now: float | None = None,
                   start: Any = None) -> list[str]:
    """Start every firing that is due and not yet claimed; the run ids started.

    `start(storage, stored_row, trigger, run_id)` starts one run (default: on the
    worker pool, as the workflow's owner)."""
    now = time.time() if now is None else now
    started = []
    async with open_storage(database) as storage:
        for stored, doc in await _workflows_with_triggers(storage):
            for index, trigger in enumerate(doc.triggers):
                if not trigger.enabled:
                    continue
                fire_at = due_time(trigger.cron, trigger.timezone, now)
                if now - fire_at > GRACE:
                    continue
                if fire_at < stored["created_at"] and \
                        fire_at < await trigger_since(storage, stored, index):
                    continue                        # the trigger did not exist yet
                run_id = new_run_id()
                if not await storage.claim_firing(stored["owner"], stored["workflow_id"],
                                                  index, fire_at, run_id):
                    continue                        # another scheduler fired it
                await (start or _start_on_pool)(storage, stored, trigger, run_id)
                started.append(run_id)
    return started


async def trigger_since(storage: Any, stored: dict[str, Any], index: int) -> float:
    """When the workflow's trigger `index`, as it is in `stored` (its latest
    version), began: the saving time of the oldest version, going back without
    a gap, whose document has the very same trigger there.  (Saving an
    unrelated change keeps a trigger's age; changing its cron, zone, inputs or
    `enabled` makes a new trigger.)"""
    trigger = ((stored["document"] or {}).get("triggers") or [])[index]
    since = stored["created_at"]
    for version in range(stored["version"] - 1, 0, -1):
        older = await storage.get_workflow(stored["owner"], stored["workflow_id"], version)
        triggers = ((older or {}).get("document") or {}).get("triggers") or []
        if older is None or index >= len(triggers) or triggers[index] != trigger:
            break
        since = older["created_at"]
    return since


async def _start_on_pool(storage: Any, stored: dict[str, Any], trigger: Any,
                         run_id: str) -> None:
    user = await storage.get_user(stored["owner"])
    if user is None:
        return                                      # the owner is gone: nothing to run as
    await enqueue(stored["document"], trigger.inputs, storage=storage,
                  user={"id": user["user_id"], "name": user["name"], "role": user["role"]},
                  policy=await policy_for(storage, user), run_id=run_id,
                  workflow_version=stored["version"])


async def list_schedules(database: Any = None, *, owner: str | None = None,
                         now: float | None = None) -> list[dict[str, Any]]:
    """Every trigger of every stored workflow (or one owner's), with its next time
    and its last firing."""
    now = time.time() if now is None else now
    out = []
    async with open_storage(database) as storage:
        for stored, doc in await _workflows_with_triggers(storage):
            if owner is not None and stored["owner"] != owner:
                continue
            last = await storage.last_firings(stored["owner"], stored["workflow_id"])
            for index, trigger in enumerate(doc.triggers):
                fired = last.get(index)
                out.append({"owner": stored["owner"], "workflow_id": stored["workflow_id"],
                            "trigger": index, "cron": trigger.cron,
                            "timezone": trigger.timezone, "enabled": trigger.enabled,
                            "next": _iso(next_time(trigger.cron, trigger.timezone, now)),
                            "last": _iso(fired["fire_at"]) if fired else None,
                            "last_run_id": fired["run_id"] if fired else None})
    return out


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")

"""A pool run's owed webhook (`webhook_state` on its row): whoever sees the run
ended first (the worker that finished it, the server that queued it, any
reaper) claims the delivery with a compare-and-set on the row, posts it as
`webhooks.deliver_webhook` does, and marks it delivered or failed.  The
server that queued the run may be gone by then: what the delivery needs
(attempts, backoff, whether private addresses are allowed) was stored with
the run when it was queued."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from flowforge.errors import StorageError
from flowforge.service.pool.follow import stored_result
from flowforge.service.webhooks import deliver_webhook, delivery_options, webhook_payload
from flowforge.storage.base import Storage
from flowforge.tls import verified_context

if TYPE_CHECKING:
    import httpx

__all__ = ["deliver_owed", "deliver_when_ended", "deliver_owed_webhooks"]

log = logging.getLogger("flowforge.webhooks")


async def deliver_owed(storage: Storage, run_id: str, *,
                       client: httpx.AsyncClient | None = None) -> bool | None:
    """Deliver an ended run's owed webhook if no other process is delivering
    it (the compare-and-set `claim_webhook`), then mark it delivered or failed:
    True delivered, False every attempt failed, None nothing to do here (not
    owed, not ended, or another process has it)."""
    options = delivery_options(**_stored_options(await storage.get_events(run_id)))
    attempts, backoff, timeout = options["attempts"], options["backoff"], options["timeout"]
    # the claim outlives every attempt and wait of one delivery
    ttl = attempts * (timeout + 5) + backoff * 2 ** attempts + 30
    if not await storage.claim_webhook(run_id, ttl):
        return None
    settled = "failed"
    try:
        row = await storage.get_run(run_id) or {}
        url = row.get("webhook")
        owner = await storage.get_user(row["user_id"]) if row.get("user_id") else None
        first = len(await storage.list_deliveries(run_id)) + 1
        if not url or owner is None:
            await storage.add_delivery({
                "run_id": run_id, "attempt": first, "url": url or "", "status_code": None,
                "error": "no webhook URL" if not url else f"the run's owner "
                f"{row.get('user_id')} no longer exists: nothing signs the webhook",
                "succeeded": False, "created_at": time.time(), "duration_ms": 0.0})
            settled = "failed"
            return False
        payload = webhook_payload(await stored_result(storage, run_id), row)
        http = client or _client(timeout)
        try:
            delivered = await deliver_webhook(
                storage, http, run_id, url, payload, owner["webhook_secret"],
                attempts=attempts, backoff=backoff, allow_private=options["allow_private"],
                first_attempt=first)
        finally:
            if client is None:
                await http.aclose()
        settled = "delivered" if delivered else "failed"
        return delivered
    except (asyncio.CancelledError, StorageError):
        settled = "pending"       # stopped (a shutdown, the database): another process will
        raise
    finally:
        await storage.settle_webhook(run_id, settled)


def _client(timeout: float) -> httpx.AsyncClient:
    """httpx imported here, not with this module: it is ~0.1 s of every worker's
    start, and most workers deliver no webhook."""
    import httpx

    return httpx.AsyncClient(timeout=timeout, verify=verified_context())


def _stored_options(events: list[dict[str, Any]]) -> dict[str, Any]:
    for event in events:
        if event["type"] == "run_queued":
            return dict(event.get("webhook_delivery") or {})
    return {}


#: Deliveries under way in this process (a reference keeps each task alive).
_DELIVERING: set[asyncio.Task] = set()


async def deliver_when_ended(storage: Storage, run_id: str, *, later: bool) -> None:
    """`deliver_owed`, errors logged: `later`, in the background on this loop
    (the storage must stay open: a worker process's), so a run's queue message
    is acknowledged without waiting on the receiver; a process that dies
    meanwhile leaves the delivery to a reaper once its claim lapses."""
    async def deliver() -> None:
        try:
            await deliver_owed(storage, run_id)
        except Exception:  # noqa: BLE001 - a reaper tries again once the claim lapses
            log.exception("run %s: delivering its webhook failed", run_id)

    if not later:
        await deliver()
        return
    task = asyncio.get_running_loop().create_task(deliver())
    _DELIVERING.add(task)
    task.add_done_callback(_DELIVERING.discard)


async def deliver_owed_webhooks(storage: Storage, limit: int = 100) -> list[str]:
    """Start delivering, in the background on this loop, the webhooks owed by
    ended runs that no process is delivering (the one that finished the run
    died, or the server that queued it); the ids.  Each is claimed first, so
    however many reapers look, one posts it."""
    found = await storage.owed_webhooks(time.time(), limit)
    for run_id in found:
        await deliver_when_ended(storage, run_id, later=True)
    return found

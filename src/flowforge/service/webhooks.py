"""Webhooks: when a run ends, POST its result to the URL the workflow or the
run named, signed so the receiver can trust it.

    X-Flowforge-Timestamp: 1767000000
    X-Flowforge-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">
    X-Flowforge-Delivery:  <run id>/<attempt>

The key is the run owner's webhook secret (`GET /api/me`).  Signing the
timestamp with the body lets a receiver refuse replays of old deliveries.
A non-2xx answer or a network error is retried with exponential backoff;
every attempt is recorded (`GET /api/runs/{id}/deliveries`).

A webhook URL is checked by the SSRF guard when it is given (a run request or a
saved workflow: 422) and again before delivery (its host may resolve
differently by then): loopback, private and link-local addresses are refused
unless the server allows them (`--allow-private-webhooks`).

A pool run's webhook is durable (`deliver_owed`): the run row says it is owed
(`webhook_state`), and whoever sees the run ended first (the worker that
finished it, the server that queued it, any worker's or server's reaper) takes
the delivery with a compare-and-set on the row, so one process posts it, and
marks it delivered or failed.  The server that queued the run may be gone by
then: what the delivery needs (attempts, backoff, whether private addresses
are allowed) was stored with the run when it was queued.  A process killed
after a successful POST and before it marked it leaves the claim to lapse, and
the webhook is posted again: receivers tell a repeat by `X-Flowforge-Delivery`'s
run id.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from typing import Any

import httpx

from flowforge.engine.result import RunResult
from flowforge.errors import StorageError, ToolError
from flowforge.storage.base import Storage
from flowforge.tools.network import check_url

__all__ = ["sign", "verify", "webhook_payload", "deliver_webhook", "webhook_refusal",
           "deliver_owed", "deliver_when_ended", "deliver_owed_webhooks", "delivery_options",
           "SIGNATURE_HEADER", "TIMESTAMP_HEADER"]

log = logging.getLogger("flowforge.webhooks")

SIGNATURE_HEADER = "X-Flowforge-Signature"
TIMESTAMP_HEADER = "X-Flowforge-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """What a receiver does (in Python): constant-time comparison."""
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


def webhook_payload(result: RunResult, row: dict[str, Any] | None) -> dict[str, Any]:
    """The RunResult without its event log (fetch it from the events URL)."""
    payload = result.to_dict()
    payload.pop("events", None)
    payload["event"] = "run_finished"
    payload["error"] = result.error
    payload["workflow_version"] = (row or {}).get("workflow_version")
    payload["user_id"] = (row or {}).get("user_id")
    return payload


_PRIVATE_HINT = ("webhooks go to public addresses only unless the server is started with "
                 "--allow-private-webhooks (FLOWFORGE_ALLOW_PRIVATE_WEBHOOKS=1)")


async def webhook_refusal(url: str, allow_private: bool) -> str | None:
    """Why the server will not POST to `url` (None: it will)."""
    try:
        await check_url(url, allow_private=allow_private, hint=_PRIVATE_HINT)
    except ToolError as exc:
        return f"webhook {exc}"
    return None


async def deliver_webhook(storage: Storage, client: httpx.AsyncClient, run_id: str,
                          url: str, payload: dict[str, Any], secret: str, *,
                          attempts: int = 5, backoff: float = 1.0,
                          allow_private: bool = False, traceparent: str | None = None,
                          first_attempt: int = 1) -> bool:
    """POST until a 2xx or `attempts` tries; True when delivered.  A URL the
    SSRF guard refuses is recorded as one failed attempt and not retried.
    `traceparent` (the run's span, when traced) lets the receiver join the trace.
    `first_attempt`: the number of the first attempt recorded (after those of
    an earlier delivery of the run)."""
    refusal = await webhook_refusal(url, allow_private)
    if refusal is not None:
        await storage.add_delivery({
            "run_id": run_id, "attempt": first_attempt, "url": url, "status_code": None,
            "error": refusal, "succeeded": False, "created_at": time.time(),
            "duration_ms": 0.0})
        return False
    body = json.dumps(payload, default=str, ensure_ascii=False).encode()
    for attempt in range(first_attempt, first_attempt + attempts):
        timestamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: timestamp,
                   SIGNATURE_HEADER: sign(secret, timestamp, body),
                   "X-Flowforge-Delivery": f"{run_id}/{attempt}",
                   "User-Agent": "flowforge-webhook"}
        if traceparent:
            headers["traceparent"] = traceparent
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        try:
            response = await client.post(url, content=body, headers=headers)
            status = response.status_code
            if not 200 <= status < 300:
                error = f"HTTP {status}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        succeeded = error is None
        await storage.add_delivery({
            "run_id": run_id, "attempt": attempt, "url": url, "status_code": status,
            "error": error, "succeeded": succeeded, "created_at": time.time(),
            "duration_ms": round((time.perf_counter() - started) * 1000, 3)})
        if succeeded:
            return True
        if attempt < first_attempt + attempts - 1:
            await asyncio.sleep(backoff * 2 ** (attempt - first_attempt))
    return False


def delivery_options(attempts: int = 5, backoff: float = 1.0, timeout: float = 10.0,
                     allow_private: bool = False) -> dict[str, Any]:
    """How a pool run's webhook is delivered, as stored with the run when it is
    queued (the server's settings: the process that delivers may be a worker)."""
    return {"attempts": attempts, "backoff": backoff, "timeout": timeout,
            "allow_private": allow_private}


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
        from flowforge.service.queue_follow import stored_result
        payload = webhook_payload(await stored_result(storage, run_id), row)
        http = client or httpx.AsyncClient(timeout=timeout)
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

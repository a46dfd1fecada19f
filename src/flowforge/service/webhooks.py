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

A pool run's webhook is durable (`pool.owed.deliver_owed`): the run row says it is owed
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
import time
from typing import TYPE_CHECKING, Any

from flowforge.engine.result import RunResult
from flowforge.errors import ToolError
from flowforge.storage.base import Storage
from flowforge.tools.network import check_url

if TYPE_CHECKING:
    import httpx

__all__ = ["sign", "verify", "webhook_payload", "deliver_webhook", "webhook_refusal",
           "delivery_options", "SIGNATURE_HEADER", "TIMESTAMP_HEADER"]


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
    import httpx       # here, not at import: a worker that delivers none never loads it

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

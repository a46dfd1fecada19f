"""`Idempotency-Key` on starting a run (the header Stripe uses and the IETF
draft `draft-ietf-httpapi-idempotency-key-header` describes).

A client whose request broke off (a restart, a dropped connection) cannot
tell whether its run was created.  Sent again with the same key, the request
gets the run the first one created (200, `Idempotent-Replayed: true`)
instead of a second run.  The key is stored in the run's own row, unique per
user (`Storage.create_run`), so two requests racing with one key create one
run, in one server process or several, in process or on the worker pool.
The row also keeps a fingerprint of the request: the same key with another
request is the client's mistake and is refused (422), never answered with a
run that is not what it asked for.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Awaitable, Callable, TypeVar

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from flowforge.server.errors import ApiError
from flowforge.server.json_body import json_response_in_steps
from flowforge.server.views import run_links
from flowforge.storage.base import IdempotencyKeyTaken

__all__ = ["HEADER", "MAX_KEY_LENGTH", "HEADER_DESCRIPTION", "REPLAYED", "submission_key",
           "fingerprint", "earlier_run", "once", "replay", "run_result"]

T = TypeVar("T")

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
HEADER_DESCRIPTION = (
    "A key of your choosing (1-255 printable ASCII characters; a UUID is a good one) that "
    "makes retrying safe: the same key sent again by the same user with the same request "
    "answers 200 with the run the first request created (header `Idempotent-Replayed: "
    "true`) instead of starting another; with a different request it is refused (422). "
    "Keys are per user and kept with the run.")
REPLAYED = {"Idempotent-Replayed": "true"}


def submission_key(value: str | None) -> str | None:
    """The header's key, checked (400 naming the header and the fix), or None."""
    if value is None:
        return None
    if not value.strip():
        raise ApiError(400, f"the {HEADER} header is empty: send 1-{MAX_KEY_LENGTH} printable "
                            f"characters (a UUID, say), or leave the header out",
                       code="invalid_idempotency_key")
    if len(value) > MAX_KEY_LENGTH:
        raise ApiError(400, f"the {HEADER} header is {len(value)} characters long: at most "
                            f"{MAX_KEY_LENGTH} are allowed (a UUID is 36)",
                       code="invalid_idempotency_key")
    if not all(" " <= char <= "~" for char in value):
        raise ApiError(400, f"the {HEADER} header holds characters other than printable "
                            f"ASCII: use letters, digits and punctuation (a UUID, say)",
                       code="invalid_idempotency_key")
    return value


def fingerprint(**request: Any) -> str:
    """What makes two submissions the same request: a SHA-256 of its fields as
    canonical JSON (key order and defaults left out do not count)."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


async def earlier_run(request: Request, user: dict[str, Any], key: str,
                      fingerprint: str) -> dict[str, Any] | None:
    """The row of the run `key` started for `user`, or None when the key is
    unused; 422 when that run was started by a different request."""
    row = await request.app.state.storage.run_for_idempotency_key(user["user_id"], key)
    if row is None:
        return None
    if row.get("request_fingerprint") != fingerprint:
        raise ApiError(422, f"the {HEADER} {key!r} was already used for another request "
                            f"(it started run {row['run_id']} from another route or with "
                            f"different inputs, version, webhook, budget or owner): repeat "
                            f"that request exactly to get its run, or send a new key to "
                            f"start a new run",
                       code="idempotency_key_reused")
    return row


async def once(request: Request, user: dict[str, Any], key: str | None, fingerprint: str,
               start: Callable[[tuple[str, str] | None], Awaitable[T]],
               replayed: Callable[[dict[str, Any]], Awaitable[T]]) -> T:
    """Start a run at most once per key: `start(idempotency)` (None without a
    key) creates it; a key used before answers `replayed(row)` with the run
    it created, also when a request racing with the same key won."""
    if key is None:
        return await start(None)
    row = await earlier_run(request, user, key, fingerprint)
    if row is not None:
        return await replayed(row)
    try:
        return await start((key, fingerprint))
    except IdempotencyKeyTaken:
        # a request with the same key created its run meanwhile: answer with it
        row = await earlier_run(request, user, key, fingerprint)
        if row is None:      # the run was there an instant ago: it cannot vanish
            raise
        return await replayed(row)


async def replay(request: Request, row: dict[str, Any], *, workflow_id: str,
                 wait: bool) -> Response:
    """A stored workflow's run answered again: its result with `wait`, else
    its URLs (200, `Idempotent-Replayed: true`)."""
    run_id = row["run_id"]
    if wait:
        result, redact = await run_result(request, run_id)
        return await json_response_in_steps({**redact(result.to_dict()),
                                             "workflow_version": row.get("workflow_version")},
                                            headers=REPLAYED)
    return JSONResponse({"run_id": run_id, "workflow_id": workflow_id,
                         "workflow_version": row.get("workflow_version"),
                         "status": row["status"], **run_links(run_id)},
                        status_code=200, headers=REPLAYED)


async def run_result(request: Request, run_id: str) -> tuple[Any, Any]:
    """The run's result once it stops: from this process's handle when it runs
    here, else followed through the store (another process, the pool, or
    already over).  The store's copy is redacted already."""
    handle = request.app.state.live.handles.get(run_id)
    if handle is not None:
        result = await handle.wait()
        if handle.recorder is not None:
            return result, handle.recorder.redact
        return result, _same
    from flowforge.service.pool import QueuedHandle
    return await QueuedHandle(request.app.state.storage, run_id).wait(), _same


def _same(data: Any) -> Any:
    return data

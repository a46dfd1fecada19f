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
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from flowforge.server.errors import ApiError
from flowforge.server.views import run_links

__all__ = ["HEADER", "MAX_KEY_LENGTH", "HEADER_DESCRIPTION", "submission_key", "fingerprint",
           "replay"]

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
HEADER_DESCRIPTION = (
    "A key of your choosing (1-255 printable ASCII characters; a UUID is a good one) that "
    "makes retrying safe: the same key sent again by the same user with the same request "
    "answers 200 with the run the first request created (header `Idempotent-Replayed: "
    "true`) instead of starting another; with a different request it is refused (422). "
    "Keys are per user and kept with the run.")


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


async def replay(request: Request, user: dict[str, Any], key: str, fingerprint: str, *,
                 workflow_id: str, wait: bool) -> JSONResponse | None:
    """The answer for a key the user has used before, or None when unused:
    the run it created (its result with `wait`), or 422 when that run was
    started by a different request."""
    storage = request.app.state.storage
    row = await storage.run_for_idempotency_key(user["user_id"], key)
    if row is None:
        return None
    run_id = row["run_id"]
    if row.get("request_fingerprint") != fingerprint:
        raise ApiError(422, f"the {HEADER} {key!r} was already used for another request "
                            f"(it started run {run_id} with different inputs, version, "
                            f"webhook, budget or owner): repeat that request exactly to get "
                            f"its run, or send a new key to start a new run",
                       code="idempotency_key_reused")
    headers = {"Idempotent-Replayed": "true"}
    if wait:
        result, redact = await _result(request, run_id)
        return JSONResponse({**redact(result.to_dict()),
                             "workflow_version": row.get("workflow_version")},
                            status_code=200, headers=headers)
    return JSONResponse({"run_id": run_id, "workflow_id": workflow_id,
                         "workflow_version": row.get("workflow_version"),
                         "status": row["status"], **run_links(run_id)},
                        status_code=200, headers=headers)


async def _result(request: Request, run_id: str) -> tuple[Any, Any]:
    """The run's result once it stops: from this process's handle when it runs
    here, else followed through the store (another process, the pool, or
    already over).  The store's copy is redacted already."""
    handle = request.app.state.live.handles.get(run_id)
    if handle is not None:
        result = await handle.wait()
        if handle.recorder is not None:
            return result, handle.recorder.redact
        return result, _same
    from flowforge.service.queue import QueuedHandle
    return await QueuedHandle(request.app.state.storage, run_id).wait(), _same


def _same(data: Any) -> Any:
    return data

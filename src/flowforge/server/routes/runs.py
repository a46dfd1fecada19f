"""Runs: status and results, the event stream (SSE, or JSON on request),
cancel, history, webhook delivery attempts."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode

from typing import Literal

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from flowforge.server.auth import CurrentUser, is_admin, owned_run
from flowforge.server.errors import ApiError
from flowforge.server.json_body import json_response_in_steps
from flowforge.server.sse import after_seq, event_stream
from flowforge.server.views import run_detail, run_summary
from flowforge.service.cancel import request_cancel, wait_until_ended
from flowforge.service.runs import RunStateError
from flowforge.storage.base import TERMINAL_STATUSES

__all__ = ["router", "history", "cancel_run", "Decision"]

router = APIRouter(prefix="/api/runs", tags=["runs"])


async def history(request: Request, user: dict[str, Any], *, workflow: str | None,
                  status: str | None, for_user: str | None, limit: int, offset: int
                  ) -> list[dict[str, Any]]:
    """A user's runs, newest first; an admin's view spans every user unless
    `for_user` narrows it."""
    if for_user is not None and for_user != user["user_id"] and not is_admin(user):
        raise ApiError(403, "only an admin may list another user's runs (leave out ?user=)")
    user_id = for_user if is_admin(user) else user["user_id"]
    return await request.app.state.storage.list_runs(
        workflow_id=workflow, status=status, user_id=user_id, limit=limit, offset=offset)


@router.get("", summary="Run history, newest first, paginated")
async def list_runs(request: Request, user: CurrentUser, workflow: str | None = None,
                    status: str | None = None, user_id: str | None = Query(None, alias="user"),
                    limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=2**63 - 1)
                    ) -> dict[str, Any]:
    rows = await history(request, user, workflow=workflow, status=status, for_user=user_id,
                         limit=limit, offset=offset)
    next_url = None
    if len(rows) == limit:
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != "offset"]
        next_url = f"/api/runs?{urlencode([*kept, ('offset', offset + limit)])}"
    return {"runs": [run_summary(r) for r in rows], "limit": limit, "offset": offset,
            "next": next_url}


@router.get("/{run_id}", summary="A run: status, outputs, every block's result")
async def get_run(request: Request, run_id: str, user: CurrentUser) -> dict[str, Any]:
    storage = request.app.state.storage
    row = await owned_run(storage, user, run_id)
    return run_detail(row, await storage.get_blocks(run_id))


def _sequence_header(schema: dict[str, Any]) -> None:
    """The `Last-Event-ID` header's documented schema: a string of digits.  An
    absent header is simply not sent; documented as `string | null`, a client
    generated from the API (or a fuzzer) sends the text "null", which is not
    a sequence number (400)."""
    schema.pop("anyOf", None)
    schema.update(type="string", pattern="^[0-9]{1,19}$")


@router.get("/{run_id}/events",
            summary="The run's events: SSE (replayed from the start, then live), or JSON",
            responses={200: {"content": {"text/event-stream": {}, "application/json": {}}}})
async def run_events(request: Request, run_id: str, user: CurrentUser,
                     after: int | None = Query(None, ge=0, le=2**63 - 1,
                                               description="Only events after this seq"),
                     last_event_id: str | None = Header(
                         None, description="Resume after this event's `id:` (its seq)",
                         json_schema_extra=_sequence_header)) -> Any:
    storage = request.app.state.storage
    await owned_run(storage, user, run_id)
    start = after_seq(last_event_id, after)
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/event-stream" not in accept:
        return {"run_id": run_id, "events": await storage.get_events(run_id, start)}
    return event_stream(storage, run_id, start, request.app.state.settings.sse_ping_seconds)


async def cancel_run(request: Request, user: dict[str, Any], run_id: str) -> JSONResponse:
    """Cancel, then wait (a bounded time) for the run to settle, so the answer
    says how it ended: blocks that finished keep their results.  A run of
    another process (another server process, a CLI, a worker) is cancelled
    through its row: that process sees the request within its poll interval."""
    storage = request.app.state.storage
    row = await owned_run(storage, user, run_id)
    if row["status"] in TERMINAL_STATUSES:
        raise ApiError(409, f"run '{run_id}' already ended ({row['status']})")
    wait = request.app.state.settings.cancel_wait_seconds
    handle = request.app.state.live.cancel(run_id)
    if handle is not None:
        done, _ = await asyncio.wait({handle.task}, timeout=wait)
        settled = bool(done)
    else:
        await request_cancel(storage, run_id)
        settled = await wait_until_ended(storage, run_id, wait)
    if not settled:
        return JSONResponse({"run_id": run_id, "status": "cancelling", "note": (
            "asked to cancel; if no process is running it any more (cut off), "
            f"`flowforge runs resume {run_id}` finishes it instead")}, status_code=202)
    row = await storage.get_run(run_id)
    return JSONResponse({"run_id": run_id, "status": row["status"]}, status_code=200)


@router.post("/{run_id}/cancel", summary="Cancel a running run")
async def cancel(request: Request, run_id: str, user: CurrentUser) -> JSONResponse:
    return await cancel_run(request, user, run_id)


@router.get("/{run_id}/deliveries", summary="Webhook delivery attempts of a run")
async def deliveries(request: Request, run_id: str, user: CurrentUser) -> dict[str, Any]:
    storage = request.app.state.storage
    row = await owned_run(storage, user, run_id)
    return {"run_id": run_id, "webhook": row.get("webhook"),
            "attempts": await storage.list_deliveries(run_id)}


class Decision(BaseModel):
    """A person's decision on an `approval` block."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    decision: Literal["approve", "reject"]
    """`approve` continues the run; `reject` routes to the block's `on_reject`, else fails the run."""
    comment: str | None = Field(None, max_length=10_000)
    """Why: kept in the block's output and the run's events."""


@router.post("/{run_id}/approvals/{block_id}", status_code=202,
             summary="Approve or reject a waiting approval block; the run continues",
             responses={200: {"description": "With ?wait=true: the RunResult once the run "
                                             "stops again (ends, or waits once more)"},
                        404: {"description": "No such run for this user, or the block is "
                                             "not waiting for a decision"},
                        409: {"description": "The run is not waiting (already decided, "
                                             "running or ended)"}})
async def decide(request: Request, run_id: str, block_id: str, body: Decision,
                 user: CurrentUser, wait: bool = False) -> Response:
    """The run's owner or an admin decides; the decision, who and when, goes
    into the block's output and the run's events (`approval_decided`)."""
    await owned_run(request.app.state.storage, user, run_id)
    try:
        handle = await request.app.state.live.decide(run_id, block_id, body.decision, by=user,
                                                     comment=body.comment)
    except RunStateError as exc:
        raise ApiError(409, str(exc)) from None
    if wait:
        result = await handle.wait()
        shown = handle.recorder.redact(result.to_dict()) if handle.recorder else \
            result.to_dict()
        return await json_response_in_steps(shown)
    return JSONResponse({"run_id": run_id, "block_id": block_id, "decision": body.decision,
                         "by": user["name"], "status": "running"}, status_code=202)

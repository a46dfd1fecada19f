"""The RAG chat over HTTP: ask (whole answer, or streamed over SSE with the
tool calls as they happen) and the caller's sessions.

Each question is a run of the chat workflow for the calling user, with that
user's grants, secrets and knowledge bases, exactly like a run they started
(`service.chat.ask` is what the CLI calls too).  A session id that belongs
to someone else is simply not found.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from flowforge.engine.ids import new_run_id
from flowforge.server.auth import CurrentUser
from flowforge.server.errors import ApiError, error_body
from flowforge.errors import CapabilityDenied, InputError, NotFound
from flowforge.service.chat import (ChatError, ask, check_base, delete_session, get_session,
                                    list_sessions)
from flowforge.service.secrets import load_secrets

__all__ = ["router"]

router = APIRouter(prefix="/api/chat", tags=["chat"])

#: Event types a streaming client receives while the chat works (then `answer` or `error`).
STREAMED = ("run_started", "block_started", "llm_delta", "llm_restart", "tool_called",
            "block_failed",
            "run_finished")


class ChatQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    query: str = Field(min_length=1, max_length=4000)
    """The question."""
    session_id: str | None = Field(None, min_length=1, max_length=100,
                                   pattern=r"^[A-Za-z0-9_.-]+$")
    """Continue this session (yours); a new one is made when absent."""
    kb_id: str | None = Field(None, min_length=1, max_length=107,
                              pattern=r"^(shared/)?[^/\\]+$")
    """Knowledge base searched first (yours or a shared one, `shared/NAME` to name the
    shared one explicitly; default `default_kb`)."""


class ChatSource(BaseModel):
    kind: str
    """`kb` or `web`."""
    title: str
    url: str | None = None
    document_id: str | None = None


class ChatReply(BaseModel):
    answer: str
    sources: list[ChatSource]
    confidence_score: float | None
    used_internal_kb: bool
    used_external_kb: bool
    session_id: str
    run_id: str
    formatted_response: str = ""
    """The answer followed by its sources, one per line, marked [KB] or [WEB]."""


def _options(request: Request, user: dict[str, Any], body: ChatQuery) -> dict[str, Any]:
    live = request.app.state.live
    settings = request.app.state.settings
    return {"session_id": body.session_id, "kb": body.kb_id, "model": settings.model,
            "user": {"id": user["user_id"], "name": user["name"], "role": user["role"]},
            "storage": request.app.state.storage,
            "services": {"files_root": settings.files_root,
                         "sandbox_isolated_only": not settings.allow_process_sandbox},
            "_live": live}


async def _ask(request: Request, user: dict[str, Any], body: ChatQuery, *,
               run_id: str | None = None, on_event: Any = None) -> Any:
    options = _options(request, user, body)
    live = options.pop("_live")
    storage = request.app.state.storage
    run_options = {"secrets": await load_secrets(storage, user["user_id"]),
                   "provider_keys": request.app.state.settings.shared_provider_keys()}
    if run_id:
        run_options["run_id"] = run_id
    return await ask(body.query, policy=await live.policy(user), on_event=on_event,
                     run_options=run_options, **options)


@router.post("/query", summary="Ask the chat; the answer with its sources", response_model=ChatReply,
             responses={424: {"description": "The chat could not answer (the model kept "
                                             "skipping a mandatory tool, a provider failed); "
                                             "`details[0].run_id` names the stored run"}})
async def query(request: Request, body: ChatQuery, user: CurrentUser) -> dict[str, Any]:
    try:
        answer = await _ask(request, user, body)
    except ChatError as exc:
        raise ApiError(424, str(exc), code="chat_failed",
                       details=[{"run_id": exc.run_id, "session_id": exc.session_id}]) from None
    return {key: value for key, value in answer.to_dict().items()
            if key in ChatReply.model_fields}


@router.post("/query/stream", summary="Ask the chat; its progress and answer over SSE",
             response_class=EventSourceResponse,
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "Events as stored (`tool_called`, `llm_delta`, "
                                             "...), then `answer` (the /query body) or `error`"}})
async def query_stream(request: Request, body: ChatQuery, user: CurrentUser
                       ) -> EventSourceResponse:
    storage = request.app.state.storage
    # refused before the stream starts, as /query refuses them: a 403 for a base
    # this user may not name, a 404 for one that does not exist - not error events
    options = _options(request, user, body)
    await check_base(kb=body.kb_id, session_id=body.session_id, user=options["user"],
                     storage=storage, services=options["services"],
                     policy=await request.app.state.live.policy(user))
    run_id = new_run_id()
    task = asyncio.create_task(_ask(request, user, body, run_id=run_id))

    async def events() -> Any:
        try:
            # Stored first, then delivered: a slow client never sees an event the store lacks.
            while not task.done() and await storage.get_run(run_id) is None:
                await asyncio.sleep(0.02)
            if await storage.get_run(run_id) is not None:
                async for event in storage.follow_events(run_id, 0):
                    if event["type"] in STREAMED:
                        yield ServerSentEvent(data=json.dumps(event, default=str,
                                                              ensure_ascii=False),
                                              id=str(event["seq"]), event=event["type"])
            answer = await task
            reply = {key: value for key, value in answer.to_dict().items()
                     if key in ChatReply.model_fields}
            yield ServerSentEvent(data=json.dumps(reply, ensure_ascii=False, default=str),
                                  event="answer")
        except ChatError as exc:
            yield ServerSentEvent(data=json.dumps(error_body(
                424, str(exc), "chat_failed", [{"run_id": exc.run_id,
                                                "session_id": exc.session_id}])), event="error")
        except Exception as exc:  # noqa: BLE001 - a client gets an error event, never a cut
            # the status /query would answer (a base deleted since the check is a 404)
            status = 404 if isinstance(exc, NotFound) else 403 if isinstance(
                exc, CapabilityDenied) else 422 if isinstance(exc, InputError) else 500
            yield ServerSentEvent(data=json.dumps(error_body(status, str(exc))), event="error")
        finally:
            if not task.done():
                task.cancel()

    return EventSourceResponse(events(), headers={"Cache-Control": "no-store"})


@router.get("/sessions", summary="Your chat sessions, newest first")
async def sessions(request: Request, user: CurrentUser) -> dict[str, Any]:
    return {"sessions": await list_sessions(user=user["user_id"],
                                            storage=request.app.state.storage)}


def _check(session_id: str) -> None:
    if not session_id or len(session_id) > 100 or \
            not all(c.isalnum() or c in "-_." for c in session_id):
        raise ApiError(404, f"no chat session '{session_id[:100]}'")


@router.get("/sessions/{session_id}", summary="One of your sessions, with its messages")
async def session(request: Request, session_id: str, user: CurrentUser) -> dict[str, Any]:
    _check(session_id)
    found = await get_session(session_id, user=user["user_id"],
                              storage=request.app.state.storage)
    if found is None:
        raise ApiError(404, f"no chat session '{session_id}'")
    return found


@router.delete("/sessions/{session_id}", status_code=204, summary="Delete one of your sessions")
async def remove_session(request: Request, session_id: str, user: CurrentUser) -> Response:
    _check(session_id)
    if not await delete_session(session_id, user=user["user_id"],
                                storage=request.app.state.storage):
        raise ApiError(404, f"no chat session '{session_id}'")
    return Response(status_code=204)

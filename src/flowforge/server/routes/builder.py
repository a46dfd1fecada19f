"""The builder's routes: the block registry, the clarifier, the thinker.

    GET  /api/blocks                  list (filters: category, created_by, execution_type)
    POST /api/blocks                  add a definition (a new version if the id exists)
    GET  /api/blocks/{id}             one definition (`?version=`)
    GET  /api/blocks/{id}/source      its Python source or prompt template
    POST /api/blocks/search           {query, limit, execution_type, category}
    POST /api/clarify                 {conversation: [{role, content}]} -> {ready, question | refined_intent}
    POST /api/create-agent            {intent} -> the build (pipeline, blocks, events, and
                                      `result {pipeline_json, status, log}` as `complete` has)
    POST /api/create-agent/stream     the same as Server-Sent Events, ending with `complete`
    POST /api/automate                {intent, input, user_id?} -> build, then run

Every route needs an API key (the app's `CurrentUser`).  The model that
builds is the body's `model` (which passes the user's policy gate), else the
server's `--model`, else `FLOWFORGE_BUILD_MODEL`, else the default model.  A
build's model calls get the user's provider keys (and the server's only when
it shares them), never the process environment; the blocks it writes are the
user's (an administrator's: shared).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Body, Query, Request, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from flowforge.apps.thinker import BuildEvents, clarify
from flowforge.apps.thinker.builder import build_pipeline, provider_env_for
from flowforge.registry import get_registry, registry_for
from flowforge.registry.owned import SharedBlock
from flowforge.server.auth import CurrentUser, is_admin
from flowforge.server.errors import ApiError
from flowforge.service.pipeline import automate
from flowforge.service.secrets import load_secrets

__all__ = ["router"]

router = APIRouter(tags=["builder"])

_MODEL = {"type": "string", "description": (
    "The model that builds (default: the server's).  It passes the policy gate: a "
    "model that reads a server file or calls a loopback server needs that capability, "
    "a hosted one the user's own key unless the server shares its keys.")}


def _body(**properties: Any) -> dict[str, Any]:
    """The documented fields of a builder request (it is read as a free object)."""
    return {"requestBody": {"content": {"application/json": {"schema": {
        "type": "object", "properties": {**properties, "model": _MODEL}}}}}}


_INTENT = {"type": "string", "description": "One sentence of what to automate."}
_BUILD = _body(intent=_INTENT)


async def _model(request: Request, user: dict[str, Any], body: dict[str, Any]
                 ) -> tuple[str | None, dict[str, Any]]:
    """The model that builds for `user` (the body's passes the policy gate; the
    server's own is the administrator's choice) and how the build runs: the
    keys its calls may use (`env`) and whose the blocks it writes are."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(422, "`model` must be a model string such as openai/gpt-4o")
    settings = request.app.state.settings
    storage = request.app.state.storage
    policy = await request.app.state.live.policy(user)
    if model:
        policy.check_model(model, "model")
    env = provider_env_for(policy, await load_secrets(storage, user["user_id"]),
                           settings.shared_provider_keys())
    return model or getattr(settings, "model", None), \
        {"env": env, "owner": None if is_admin(user) else user["user_id"]}


def _intent(body: dict[str, Any]) -> str:
    intent = body.get("intent") or body.get("prompt") or body.get("user_prompt")
    if not isinstance(intent, str) or not intent.strip():
        raise ApiError(422, "give the request as `intent`: one sentence of what to automate")
    return intent.strip()


_OWNER = Query(None, min_length=1, max_length=200,
               description="Administrators: see the registry as this user id does")


@router.get("/api/blocks", summary="List registry blocks (without their bodies)")
async def list_blocks(user: CurrentUser, category: str | None = None,
                      created_by: str | None = None,
                      execution_type: str | None = None,
                      owner: str | None = _OWNER) -> dict[str, Any]:
    blocks = [b for b in await _registry(user, owner).list(
        category=category, created_by=created_by, execution_type=execution_type)
        if _visible(b, user)]
    return {"blocks": [b.public() for b in blocks], "count": len(blocks)}


def _registry(user: dict[str, Any], owner: str | None) -> Any:
    """The request's view of the registry; an administrator may ask for one
    user's (`?owner=USER_ID`: that user's blocks over the shared ones)."""
    if owner is None:
        return get_registry()
    if not is_admin(user):
        raise ApiError(403, "`owner` is for administrators: your view is your blocks "
                            "and the shared ones - drop `owner`")
    return registry_for(get_registry(), owner)


def _visible(block: Any, user: dict[str, Any]) -> bool:
    """Library and build blocks are everyone's; a user's own additions are
    theirs (and an admin's) only."""
    owner = getattr(block.metadata, "owner", None)
    return not owner or owner == user["user_id"] or is_admin(user)


def _owned(block: Any, user: dict[str, Any]) -> Any:
    if not _visible(block, user):
        raise ApiError(404, f"no block '{block.id}' in the registry")
    return block


@router.post("/api/blocks", status_code=201, summary="Add a block (checked; a new version)")
async def add_block(user: CurrentUser, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    """A user's block is theirs alone, under an id of their choosing (it shadows
    a shared block of that id for them); an administrator's is shared."""
    metadata = {k: v for k, v in dict(body.get("metadata") or {}).items() if k != "owner"}
    metadata["created_by"] = "user"
    if not is_admin(user):
        metadata["owner"] = user["user_id"]
    saved = await get_registry().add({**body, "metadata": metadata})
    return {"block": saved.model_dump(mode="json")}


@router.get("/api/blocks/{block_id}", summary="One block definition, body included")
async def get_block(block_id: str, user: CurrentUser,
                    version: int | None = Query(None, ge=1, le=2**31 - 1),
                    owner: str | None = _OWNER) -> dict[str, Any]:
    registry = _registry(user, owner)
    block = _owned(await registry.get(block_id, version), user)
    return {"block": block.model_dump(mode="json"),
            "versions": await registry.versions(block_id),
            "shadows_shared": await registry.shadows(block_id)}


@router.delete("/api/blocks/{block_id}", status_code=204,
               summary="Delete one of your blocks (its versions stay for old runs)")
async def delete_block(block_id: str, user: CurrentUser) -> Response:
    try:
        await get_registry().delete(block_id)
    except SharedBlock as exc:
        raise ApiError(403, str(exc)) from None
    return Response(status_code=204)


@router.get("/api/blocks/{block_id}/source", summary="A block's Python source or prompt")
async def block_source(block_id: str, user: CurrentUser,
                       version: int | None = Query(None, ge=1, le=2**31 - 1)) -> dict[str, Any]:
    registry = get_registry()
    block = _owned(await registry.get(block_id, version), user)
    return {"id": block.id, "version": block.version, "execution_type": block.execution_type,
            "source": await registry.source(block_id, version)}


@router.post("/api/blocks/search", summary="Find blocks by what they do (hybrid search)")
async def search_blocks(user: CurrentUser, body: dict[str, Any] = Body(
        ..., examples=[{"query": "summarise a long article", "limit": 5}])) -> dict[str, Any]:
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ApiError(422, "`query` must be a non-empty string")
    limit = body.get("limit", 5)
    if not isinstance(limit, int) or not 1 <= limit <= 50:
        raise ApiError(422, "`limit` must be an integer from 1 to 50")
    registry = get_registry()
    hits = await registry.search(query, limit * 3, execution_type=body.get("execution_type"),
                                 category=body.get("category"))
    hits = [h for h in hits if _visible(h.definition, user)][:limit]
    return {"results": [h.to_dict() for h in hits], "mode": registry.search_mode}


@router.post("/api/clarify", summary="One clarifier turn: a question, or the refined intent",
             openapi_extra=_body(conversation={
                 "type": "array", "items": {"type": "object"},
                 "description": "The conversation so far: `{role, content}` messages, the "
                                "user's first."}))
async def clarify_route(request: Request, user: CurrentUser, body: dict[str, Any] = Body(
        ..., examples=[{"conversation": [{"role": "user", "content": "summarise AI papers"}]}])
        ) -> dict[str, Any]:
    conversation = body.get("conversation") or body.get("messages")
    if conversation is None and isinstance(body.get("intent"), str):
        conversation = [{"role": "user", "content": body["intent"]}]
    if not isinstance(conversation, list) or not conversation or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in conversation):
        raise ApiError(422, "`conversation` must be a list of {role: user|assistant, content}")
    model, build = await _model(request, user, body)
    result = await clarify(conversation, model=model, env=build["env"])
    return result.to_dict()


@router.post("/api/create-agent", summary="Build a pipeline for an intent (blocking)",
             openapi_extra=_BUILD)
async def create_agent(request: Request, user: CurrentUser,
                       body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    intent = _intent(body)
    model, build = await _model(request, user, body)
    result = await build_pipeline(intent, model=model, **build)
    complete = result.events[-1] if result.events else {}
    return {**result.to_dict(), "result": complete.get("result"), "events": result.events}


_SSE = {200: {"content": {"text/event-stream": {}},
              "description": "The build's events as Server-Sent Events, `complete` last"}}


@router.post("/api/create-agent/stream", summary="Build a pipeline, progress as SSE",
             openapi_extra=_BUILD, response_class=EventSourceResponse, responses=_SSE)
async def create_agent_stream(request: Request, user: CurrentUser,
                              body: dict[str, Any] = Body(...)) -> EventSourceResponse:
    return await _build_stream(request, user, body)


@router.get("/api/create-agent/stream", summary="Build a pipeline, progress as SSE (EventSource)",
            response_class=EventSourceResponse, responses=_SSE)
async def create_agent_stream_get(request: Request, user: CurrentUser,
                                  intent: str = Query(..., min_length=1, max_length=4000),
                                  model: str | None = Query(None, max_length=200)
                                  ) -> EventSourceResponse:
    """The same stream for a browser's `EventSource`, which can only GET: the
    seed's clients open it as `?intent=...`; `model` passes the same gate."""
    return await _build_stream(request, user,
                               {"intent": intent, **({"model": model} if model else {})})


async def _build_stream(request: Request, user: dict[str, Any],
                        body: dict[str, Any]) -> EventSourceResponse:
    intent = _intent(body)
    model, build = await _model(request, user, body)
    events = BuildEvents()
    queue: asyncio.Queue[dict] = asyncio.Queue()
    events.bus.subscribe(queue.put_nowait)

    async def stream() -> Any:
        task = asyncio.create_task(build_pipeline(intent, model=model, events=events, **build))
        try:
            while True:
                event = await queue.get()
                yield ServerSentEvent(data=json.dumps(event, default=str), event=event["type"],
                                      id=str(event["seq"]))
                if event["type"] == "complete":
                    break
            await task
        finally:
            if not task.done():
                task.cancel()

    return EventSourceResponse(stream())


@router.post("/api/automate", summary="Build a pipeline for an intent, then run it",
             openapi_extra=_body(intent=_INTENT, input={
                 "type": "object", "description": "The run's inputs: the values the built "
                                                  "pipeline reads as `{{input.x}}`."}))
async def automate_route(request: Request, user: CurrentUser,
                         body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    inputs = body.get("input") or body.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise ApiError(422, "`input` must be an object: the run's values for {{input.x}}")
    storage = request.app.state.storage
    intent = _intent(body)
    model, build = await _model(request, user, body)
    return await automate(intent, inputs, model=model, **build,
                          user=user["user_id"], storage=storage,
                          policy=await request.app.state.live.policy(user),
                          services={"sandbox_isolated_only":
                                    not request.app.state.settings.allow_process_sandbox})

"""The prompt-chain engine's API, kept for its clients: an Agent task is a run.

    POST /api/agent   {"name": "My agent", "variables": {...}, "promptChain": [...]}
                      {"agent": {...an Agent...}, "variables": {...}}
                      {"workflow_id": "movie-script", "variables": {"script": "..."}}
      -> 202 {"id", "status": "running", "logs": [], "output": null, "status_url"}
    GET  /api/agent/tasks/{id}
      -> {"id", "status", "logs": ["plots: running", ...], "output", "error", ...}

The Agent is imported into a native workflow (`flowforge.apps.chains`) and
started through the server's run machinery, so a task is stored, streamed
(`/api/runs/{id}/events`), cancellable and concurrent like any run.  The
variables that an `apiKey` reads travel as the run's secrets: hidden from
every record, answer and webhook, never stored.  When a task completes or
fails, the frontend the administrator configured (`agent_webhook_url`)
receives the task, signed, retried and recorded like every webhook.  A task
belongs to the user who started it: another user's id answers 404.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import JSONResponse

from flowforge.apps.chains import agent_to_workflow, is_agent, key_values, split_variables
from flowforge.engine.events import STOP_EVENTS
from flowforge.engine.inputs import validate_inputs
from flowforge.engine.result import RunResult
from flowforge.server.auth import CurrentUser, owned_run
from flowforge.server.errors import ApiError
from flowforge.server.idempotency import (HEADER_DESCRIPTION, REPLAYED, fingerprint, once,
                                          submission_key)
from flowforge.service.loading import compile_document
from flowforge.storage.base import Storage
from flowforge.workflow.loader import check_data, document_from_data

__all__ = ["router", "task_view"]

router = APIRouter(prefix="/api/agent", tags=["prompt-chain agents"])

_EXAMPLE = {"name": "Echo", "variables": {"topic": "tides", "apiKey": ""},
            "promptChain": [
                {"type": "prompt", "name": "Draft", "system": "You write one sentence.",
                 "user": "About {topic}", "apiKey": "{apiKey}", "llm": "claude",
                 "model": "claude-3-5-haiku-latest", "output": "draft"},
                {"type": "return", "name": "Return", "output": ["draft"]}]}

_LOG = {"block_started": "running", "block_succeeded": "succeeded", "block_failed": "failed",
        "block_skipped": "skipped", "block_cancelled": "cancelled"}


@router.post("", status_code=202, summary="Start a prompt-chain Agent task (a run)",
             responses={200: {"description": "With an Idempotency-Key already used for this "
                                             "request: the task it started (header "
                                             "Idempotent-Replayed: true)"}})
async def start_task(request: Request, user: CurrentUser,
                     body: dict[str, Any] = Body(..., examples=[_EXAMPLE]),
                     idempotency_key: str | None = Header(
                         None, alias="Idempotency-Key", description=HEADER_DESCRIPTION)
                     ) -> Any:
    """Start a task.  Retry safely with an `Idempotency-Key` header: the same
    key and body answer 200 with the task first started; another body, 422."""
    key = submission_key(idempotency_key)
    check_data(body, "request body")
    storage: Storage = request.app.state.storage

    async def replayed(row: dict[str, Any]) -> Any:
        return JSONResponse({**await task_view(storage, row), **_links(row["run_id"])},
                            status_code=200, headers=REPLAYED)

    # the whole body is the request (an Agent, or a workflow id, and its variables);
    # a key used before answers its task before the body is looked at again
    return await once(request, user, key, fingerprint(route="agent_task", body=body),
                      lambda idempotency: _start(request, user, body, idempotency), replayed)


async def _start(request: Request, user: dict[str, Any], body: dict[str, Any],
                 idempotency: tuple[str, str] | None) -> dict[str, Any]:
    live = request.app.state.live
    settings = request.app.state.settings
    variables = body.get("variables")
    if variables is None:
        variables = {}
    if not isinstance(variables, dict):
        raise ApiError(422, "`variables` must be an object of variable names to values")
    version = None
    agent_given: dict[str, Any] | None = None
    if is_agent(body) or "agent" in body:
        agent = body if is_agent(body) else body.get("agent")
        if not is_agent(agent):
            raise ApiError(422, "`agent` must be an Agent definition with `promptChain`")
        agent_given = agent
        # Run as given and never stored: a key written in it is a run secret.
        data = agent_to_workflow(agent, base_url=settings.chain_base_url, source="agent",
                                 literal_keys=True)
        compiled = compile_document(document_from_data(data, "agent"), seed_format=True)
    elif isinstance(body.get("workflow_id"), str) and body["workflow_id"]:
        row, compiled = await live.workflows.compiled(user["user_id"], body["workflow_id"])
        version = row["version"]
    else:
        raise ApiError(422, "give an Agent (`promptChain`, or `agent`) or the `workflow_id` of "
                            "a stored workflow, with its `variables`")
    inputs, secrets = split_variables(compiled, variables)
    if agent_given is not None:
        secrets = {**key_values(agent_given), **secrets}    # keys in the Agent's variables
    validate_inputs(compiled.doc.inputs, inputs)
    task_id = uuid.uuid4().hex
    webhook = settings.agent_webhook_url
    if webhook:
        webhook = webhook.replace("{task_id}", task_id)
        await live.check_webhook(webhook, "the server's agent webhook (--agent-webhook-url, "
                                          "FLOWFORGE_AGENT_WEBHOOK_URL)")
    storage: Storage = request.app.state.storage

    async def payload(result: RunResult, row: dict[str, Any] | None) -> dict[str, Any]:
        return {"event": "task_finished", **await task_view(storage, row or {"run_id": task_id})}

    await live.start(compiled, inputs, user=user, version=version, webhook=webhook,
                     run_secrets=secrets or None, run_id=task_id, payload=payload,
                     idempotency=idempotency)
    return {"id": task_id, "status": "running", "logs": [], "output": None, **_links(task_id)}


def _links(task_id: str) -> dict[str, str]:
    return {"status_url": f"/api/agent/tasks/{task_id}",
            "events_url": f"/api/runs/{task_id}/events"}


@router.get("/tasks/{task_id}", summary="A task: status, logs and result")
async def get_task(request: Request, task_id: str, user: CurrentUser) -> dict[str, Any]:
    storage: Storage = request.app.state.storage
    row = await owned_run(storage, user, task_id)
    return await task_view(storage, row)


async def task_view(storage: Storage, row: dict[str, Any]) -> dict[str, Any]:
    """The prompt-chain Task of a run: `logs` a line per node state, in order
    (`send result: failed: ... answered HTTP 500`), `output` the returned
    variables (the return node's), else the last nodes' results."""
    run_id = row["run_id"]
    document = row.get("document") if isinstance(row.get("document"), dict) else {}
    blocks = [b for b in document.get("blocks", []) if isinstance(b, dict)]
    names = {b.get("id"): b.get("name") or b.get("id") for b in blocks}
    logs = []
    for event in await storage.get_events(run_id):
        state = _LOG.get(event.get("type", ""))
        if state is not None and not event.get("scope"):
            line = f"{names.get(event.get('block_id'), event.get('block_id'))}: {state}"
            if state == "failed" and event.get("error"):
                line += f": {event['error']}"
            logs.append(line)
        elif event.get("type") in STOP_EVENTS:          # run_waiting, then run_finished
            logs.append(f"task: {event.get('status')}")
    outputs = row.get("outputs") or {}
    returns = [b.get("id") for b in blocks if b.get("type") == "response"]
    output: Any = outputs
    if len(returns) == 1 and isinstance(outputs.get(returns[0]), dict):
        output = outputs[returns[0]].get("data")
    return {"id": run_id, "status": row.get("status"), "logs": logs, "output": output,
            "error": row.get("error"), "created_at": row.get("created_at"),
            "finished_at": row.get("finished_at")}

"""The seed systems' routes, as thin aliases over the same runs and storage.

AgentFlow kept an execution history and per-user memory
(`/api/executions`, `/api/memory/{user_id}`); the research orchestrator
started a research "session" followed over a WebSocket (`/agent-workflow`).
Here an execution and a session are runs.

`POST /agent-workflow {question, threshold?, max_iterations?, kb?, brief?}` starts the
research orchestrator (`service.research`); its WebSocket
(`/ws/agent-workflow/{session_id}`) sends the session's status / phase /
complete / error events.  The older form, `{workflow_id | workflow, inputs}`,
still starts any workflow as a session (its WebSocket sends the run's raw
events).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from flowforge.apps.research.session import (PHASE_PERCENT, RESEARCH_WORKFLOW_ID, phases_of,
                                             research_inputs)
from flowforge.engine.inputs import validate_inputs
from flowforge.errors import NotFound
from flowforge.server.auth import CurrentUser, is_admin, owned_run
from flowforge.server.errors import ApiError
from flowforge.server.idempotency import (HEADER_DESCRIPTION, REPLAYED, fingerprint, once,
                                          submission_key)
from flowforge.server.routes.runs import cancel_run, history
from flowforge.server.views import run_detail, run_summary
from flowforge.service.loading import compile_document
from flowforge.service.research import orchestrator
from flowforge.service.users import find_user
from flowforge.workflow.loader import document_from_data

__all__ = ["router"]

router = APIRouter(tags=["seed routes"])


def _execution(row: dict[str, Any]) -> dict[str, Any]:
    summary = run_summary(row)
    summary["execution_id"] = summary.pop("run_id")
    summary["pipeline_id"] = summary.pop("workflow_id")
    return summary


@router.get("/api/executions", summary="Execution history (runs), newest first")
async def list_executions(request: Request, user: CurrentUser, status: str | None = None,
                          pipeline_id: str | None = None,
                          limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=2**63 - 1)
                          ) -> dict[str, Any]:
    rows = await history(request, user, workflow=pipeline_id, status=status, for_user=None,
                         limit=limit, offset=offset)
    return {"executions": [_execution(r) for r in rows], "limit": limit, "offset": offset}


@router.get("/api/executions/{execution_id}",
            summary="One execution: status, per-block results, memory and log")
async def get_execution(request: Request, execution_id: str, user: CurrentUser
                        ) -> dict[str, Any]:
    storage = request.app.state.storage
    row = await owned_run(storage, user, execution_id)
    blocks = await storage.get_blocks(execution_id)
    return {**_execution(row), "results": {b["block_id"]: b["output"] for b in blocks
                                           if not b["scope"] and b["status"] == "succeeded"},
            "outputs": row.get("outputs"), "memory": row.get("memory") or {},
            "log": await storage.get_events(execution_id)}


@router.get("/api/memory/{user_id}", summary="A user's memory (your own; any, for an admin)")
async def get_memory(request: Request, user_id: str, user: CurrentUser) -> dict[str, Any]:
    storage = request.app.state.storage
    if user_id in (user["user_id"], user["name"]):
        target = user
    elif is_admin(user):
        try:
            target = await find_user(storage, user_id)
        except NotFound:
            raise ApiError(404, f"no user '{user_id}'") from None
    else:
        raise ApiError(404, f"no user '{user_id}'")
    return {"user_id": target["user_id"], "name": target["name"],
            "memory": await storage.get_memory(target["user_id"])}


class AgentWorkflowRequest(BaseModel):
    """Start a session: a research question (the research orchestrator), or
    any workflow - a stored one by id, or a document sent inline."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    question: str | None = Field(None, min_length=1, max_length=4000)
    """A research question: the session runs the research orchestrator."""
    threshold: float | None = Field(None, ge=0, le=1)
    """Research: each phase stops once its score reaches this (default 0.8)."""
    max_iterations: int | None = Field(None, ge=1, le=10)
    """Research: passes per phase at most (default 3)."""
    kb: str | None = Field(None, min_length=1, max_length=200)
    """Research: a knowledge base (its name) searched beside the web."""
    web_source: str | None = Field(None, min_length=1, max_length=200)
    """Research: the knowledge base standing in for the web (offline search; default `web`)."""
    web_backend: Literal["offline", "perplexity", "tavily"] | None = None
    """Research: where the web search looks (default offline)."""
    brief: bool | None = None
    """Research: one search and one answer from the numbered passages (`true`), or every
    phase with its scores and retries (`false`); default: brief on the embedded models,
    as `flowforge research --brief/--full`."""
    workflow_id: str | None = None
    """A workflow saved with POST /api/workflows."""
    workflow: dict[str, Any] | None = None
    """Or the whole workflow document, run without being saved."""
    version: int | None = Field(None, ge=1, le=2**31 - 1)
    """With `workflow_id`: run this version instead of the latest."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """A workflow session's inputs, checked against the workflow's `inputs`."""
    webhook: str | None = Field(None, pattern=r"^https?://", max_length=2000)
    """URL to POST the signed result to when the session ends."""

    @model_validator(mode="after")
    def _one_workflow(self) -> "AgentWorkflowRequest":
        given = [self.question is not None, self.workflow_id is not None,
                 self.workflow is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of `question` (a research session), "
                             "`workflow_id` (a saved workflow) or `workflow` (a document)")
        research_only = [name for name in ("threshold", "max_iterations", "kb", "web_source",
                                           "web_backend", "brief")
                         if getattr(self, name) is not None]
        if self.question is None and research_only:
            raise ValueError(f"{', '.join(research_only)}: only for a research session "
                             f"(with `question`); a workflow takes `inputs`")
        if self.question is not None and (self.inputs or self.version is not None):
            raise ValueError("a research session takes `question`, `threshold`, "
                             "`max_iterations`, `kb`, `web_source`, `web_backend` and "
                             "`brief`, not `inputs` or `version`")
        if self.question is not None and not self.question.strip():
            raise ValueError("question: the question is empty: ask something")
        return self


def _session(run_id: str) -> dict[str, str]:
    return {"session_id": run_id, "status_url": f"/agent-workflow/{run_id}",
            "websocket_url": f"/ws/agent-workflow/{run_id}",
            "events_url": f"/api/runs/{run_id}/events",
            "cancel_url": f"/agent-workflow/{run_id}/cancel"}


@router.post("/agent-workflow", status_code=202,
             summary="Start a research session (`question`) or a workflow session",
             responses={200: {"description": "With an Idempotency-Key already used for this "
                                             "request: the session it started (header "
                                             "Idempotent-Replayed: true)"}})
async def start_session(request: Request, body: AgentWorkflowRequest, user: CurrentUser,
                        idempotency_key: str | None = Header(
                            None, alias="Idempotency-Key", description=HEADER_DESCRIPTION)
                        ) -> JSONResponse:
    """Start a session.  Retry safely with an `Idempotency-Key` header: the
    same key and body answer 200 with the session first started; another
    body, 422."""
    live = request.app.state.live

    async def start(idempotency: tuple[str, str] | None) -> JSONResponse:
        if body.question is not None:
            policy = await live.policy(user)          # names of bases, never folders
            policy.check_kb_id(body.kb, "kb")
            policy.check_kb_id(body.web_source, "web_source")
            inputs = research_inputs(body.question, threshold=body.threshold,
                                     max_iterations=body.max_iterations, kb=body.kb,
                                     web_backend=body.web_backend, web_source=body.web_source,
                                     brief=body.brief, model=live.settings.model)
            handle = await live.start(orchestrator(), inputs, user=user, webhook=body.webhook,
                                      idempotency=idempotency)
        elif body.workflow_id is not None:
            handle, _ = await live.launch(user, user["user_id"], body.workflow_id,
                                          body.version, body.inputs, webhook=body.webhook,
                                          idempotency=idempotency)
        else:
            compiled = compile_document(document_from_data(body.workflow, "workflow"))
            validate_inputs(compiled.doc.inputs, body.inputs)
            handle = await live.start(compiled, body.inputs, user=user, webhook=body.webhook,
                                      idempotency=idempotency)
        return JSONResponse({**_session(handle.run_id), "status": "running"}, status_code=202)

    async def replayed(row: dict[str, Any]) -> JSONResponse:
        return JSONResponse({**_session(row["run_id"]), "status": row["status"]},
                            status_code=200, headers=REPLAYED)

    return await once(request, user, submission_key(idempotency_key),
                      fingerprint(route="agent_workflow", body=body.model_dump(mode="json")),
                      start, replayed)


@router.get("/agent-workflow/{session_id}", summary="A session's status and results")
async def get_session(request: Request, session_id: str, user: CurrentUser) -> dict[str, Any]:
    storage = request.app.state.storage
    row = await owned_run(storage, user, session_id)
    blocks = await storage.get_blocks(session_id)
    detail = {**run_detail(row, blocks), **_session(session_id)}
    if row.get("workflow_id") == RESEARCH_WORKFLOW_ID:      # finished phases, kept
        phases = phases_of({b["block_id"]: b["output"] for b in blocks
                            if not b["scope"] and b["status"] == "succeeded"})
        detail["phases"] = phases
        detail["progress"] = max([PHASE_PERCENT[name][1] for name in phases], default=0)
    return detail


@router.post("/agent-workflow/{session_id}/cancel", summary="Cancel a session")
async def cancel_session(request: Request, session_id: str, user: CurrentUser) -> JSONResponse:
    return await cancel_run(request, user, session_id)

"""Workflows: every save is a new version; runs start from the latest or a
pinned version.  A workflow belongs to the user who saved it; an admin may
name another owner with `?owner=<user id>`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from flowforge.errors import WorkflowError
from flowforge.server.auth import CurrentUser, is_admin
from flowforge.server.errors import ApiError
from flowforge.server.idempotency import (HEADER_DESCRIPTION, fingerprint, once, replay,
                                          submission_key)
from flowforge.server.json_body import json_response_in_steps
from flowforge.server.views import run_links, workflow_view
from flowforge.service.compiling import BIG_BODY
from flowforge.workflow.loader import parse_text
from flowforge.workflow.model import Budget

__all__ = ["router", "RunRequest", "owner_of"]

router = APIRouter(prefix="/api/workflows", tags=["workflows"])

_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
_DOCUMENT_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/WorkflowDocument"}},
    "application/yaml": {"schema": {"type": "object"}}}}}     # a YAML mapping: the document
#: A PUT takes the document's `id` from the path: the body may leave it out.
_PUT_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/WorkflowDocumentWithoutId"}},
    "application/yaml": {"schema": {"type": "object"}}}}}


class RunRequest(BaseModel):
    """Start a run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    inputs: dict[str, Any] = Field(default_factory=dict)
    """The run's inputs, checked against the workflow's `inputs`."""
    version: int | None = Field(None, ge=1, le=2**31 - 1)
    """Run this version instead of the latest."""
    webhook: str | None = Field(None, pattern=r"^https?://", max_length=2000)
    """URL to POST the signed result to when the run ends (overrides the workflow's)."""
    budget: Budget | None = None
    """What this run may spend on models; replaces the workflow's `budget:`."""


def owner_of(user: dict[str, Any], owner: str | None) -> str:
    if owner is None or owner == user["user_id"]:
        return user["user_id"]
    if not is_admin(user):
        raise ApiError(403, "only an admin may name another owner (leave out ?owner=)")
    return owner


async def _document(request: Request) -> Any:
    """The JSON (default) or YAML document of the body."""
    media = request.headers.get("content-type", "application/json").split(";")[0].strip()
    body = await request.body()
    if not body.strip():
        raise ApiError(400, "the request body is empty: send a workflow document as JSON "
                            "(or YAML with Content-Type: application/yaml)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not UTF-8 text") from None
    if media not in _YAML_TYPES and media not in ("application/json", "text/json", ""):
        raise ApiError(415, f"unsupported Content-Type {media!r}: send application/json or "
                            f"application/yaml")
    yaml = media in _YAML_TYPES
    # a big body is parsed in another process: YAML (and the limits walk) is Python
    compiler = request.app.state.live.workflows.compiler
    try:                                      # the same limits as every document
        return await compiler.run(parse_text, text,
                                  "<request body>.yaml" if yaml else "<request body>.json",
                                  big=len(body) >= BIG_BODY)
    except WorkflowError as exc:
        raise ApiError(400, str(exc), code="malformed_yaml" if yaml else "malformed_json"
                       ) from None


async def _source(request: Request, sent: Any, saved: Any) -> str | None:
    """The body's text, kept as the author wrote it (comments, key order, no
    defaults filled in); None when what is saved is not that text's document
    (a foreign document saved as the workflow it imports to)."""
    if saved is not sent:
        return None
    return (await request.body()).decode("utf-8")


def _imported(request: Request, document: Any, workflow_id: str | None = None) -> Any:
    """A document of a foreign format (a prompt-chain Agent, a Pipeline: the
    formats room's) is saved as the workflow it imports to (an Agent's
    relative event endpoints resolved against the server's `chain_base_url`)."""
    from flowforge.service.loading import imported_document

    imported = imported_document(document, "<request body>", options={
        "agent": {"base_url": request.app.state.settings.chain_base_url}})
    if imported is None:
        return document
    data = imported.document
    if workflow_id is not None:
        data["id"] = workflow_id
    return data


def _with_warnings(view: dict[str, Any], row: dict[str, Any], files_root: str | None,
                   joins: list[Any]) -> dict[str, Any]:
    """Saved, but a relative path it names (a knowledge source, a nested
    workflow file) is missing under the server's files root, or the server
    has none, or a block runs less often than under the old any-edge rule
    (workflow/joins.py): say so now rather than at the first run."""
    from pathlib import Path

    from flowforge.workflow.model import Workflow
    from flowforge.workflow.paths import resolve_path
    from flowforge.workflow.policy import looks_like_path

    root = Path(files_root) if files_root else None
    warnings = [str(problem) for problem in joins]      # found when the save compiled it
    for where, spec in Workflow.model_validate(row["document"]).iter_blocks():
        named = [(f"{where}.with.sources[{index}]", source) for index, source in
                 enumerate(spec.with_.get("sources") or [] if spec.type == "knowledge" and
                           isinstance(spec.with_.get("sources"), list) else [])]
        nested = spec.with_.get("workflow") if spec.type == "workflow" else None
        if isinstance(nested, str) and looks_like_path(nested):
            named.append((f"{where}.with.workflow", nested))
        for place, reference in named:
            if not isinstance(reference, str) or "{{" in reference:
                continue
            try:
                path = resolve_path(reference, root, "the path")
            except WorkflowError as exc:
                warnings.append(f"{place}: {exc.message} (until then, runs fail)")
                continue
            if not path.exists():
                warnings.append(f"{place}: {path} does not exist on the server (relative "
                                f"paths resolve against the files root {files_root}, "
                                f"`flowforge serve --files-root`); runs will fail until it does")
    if warnings:
        view["warnings"] = warnings
    return view


async def _check_document_webhook(live: Any, document: Any) -> None:
    """A saved workflow's `webhook:` is refused at save time, not at its first run."""
    webhook = document.get("webhook") if isinstance(document, dict) else None
    if isinstance(webhook, str) and webhook:
        await live.check_webhook(webhook, where="webhook (in the document)")


@router.post("", status_code=201, openapi_extra=_DOCUMENT_BODY,
             summary="Save a new workflow (or a new version of one)")
async def create_workflow(request: Request, user: CurrentUser,
                          owner: str | None = None) -> dict[str, Any]:
    live = request.app.state.live
    sent = await _document(request)
    document = _imported(request, sent)
    await _check_document_webhook(live, document)
    joins: list[Any] = []
    row = await live.workflows.save(owner_of(user, owner), document,
                                    policy=await live.policy(user),
                                    model_override=live.settings.model,
                                    source=await _source(request, sent, document),
                                    warnings=joins)
    return _with_warnings(workflow_view(row), row, live.settings.files_root, joins)


@router.get("", summary="List workflows (latest versions)")
async def list_workflows(request: Request, user: CurrentUser, owner: str | None = None,
                         all: bool = Query(False, description="Every owner's (admin only)"),
                         limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=2**63 - 1)
                         ) -> dict[str, Any]:
    storage = request.app.state.storage
    if all and not is_admin(user):
        raise ApiError(403, "only an admin may list every owner's workflows (leave out ?all=)")
    rows = await storage.list_workflows(None if all else owner_of(user, owner),
                                        limit=limit, offset=offset)
    return {"workflows": [workflow_view(r) for r in rows], "limit": limit, "offset": offset}


@router.get("/{workflow_id}", summary="A workflow's document (latest or ?version=)")
async def get_workflow(request: Request, workflow_id: str, user: CurrentUser,
                       version: int | None = Query(None, ge=1, le=2**31 - 1), owner: str | None = None
                       ) -> dict[str, Any]:
    store = request.app.state.live.workflows
    return workflow_view(await store.get(owner_of(user, owner), workflow_id, version))


@router.put("/{workflow_id}", openapi_extra=_PUT_BODY,
            summary="Save a new version of a workflow (creates it when new)",
            responses={201: {"description": "Created: the first version of a new workflow"}})
async def put_workflow(request: Request, workflow_id: str, user: CurrentUser,
                       owner: str | None = None) -> JSONResponse:
    live = request.app.state.live
    sent = await _document(request)
    document = _imported(request, sent, workflow_id)
    await _check_document_webhook(live, document)
    joins: list[Any] = []
    row = await live.workflows.save(owner_of(user, owner), document, expected_id=workflow_id,
                                    policy=await live.policy(user),
                                    model_override=live.settings.model,
                                    source=await _source(request, sent, document),
                                    warnings=joins)
    return JSONResponse(_with_warnings(workflow_view(row), row, live.settings.files_root,
                                       joins),
                        status_code=201 if row["version"] == 1 else 200)


@router.delete("/{workflow_id}", status_code=204, summary="Delete a workflow (runs are kept)")
async def delete_workflow(request: Request, workflow_id: str, user: CurrentUser,
                          owner: str | None = None) -> Response:
    storage = request.app.state.storage
    if not await storage.delete_workflow(owner_of(user, owner), workflow_id):
        raise ApiError(404, f"no workflow '{workflow_id}'")
    return Response(status_code=204)


@router.get("/{workflow_id}/versions", summary="Every saved version, oldest first")
async def list_versions(request: Request, workflow_id: str, user: CurrentUser,
                        owner: str | None = None) -> dict[str, Any]:
    storage = request.app.state.storage
    versions = await storage.list_workflow_versions(owner_of(user, owner), workflow_id)
    if not versions:
        raise ApiError(404, f"no workflow '{workflow_id}'")
    return {"id": workflow_id, "versions": [workflow_view({"workflow_id": workflow_id, **v})
                                            for v in versions]}


@router.post("/{workflow_id}/runs", status_code=202,
             summary="Start a run (202 with its URLs, or ?wait=true for the RunResult)",
             responses={200: {"description": "With ?wait=true: the finished run's RunResult. "
                                             "With an Idempotency-Key already used for this "
                                             "request: the run it started (header "
                                             "Idempotent-Replayed: true)"}})
async def start_run(request: Request, workflow_id: str, body: RunRequest, user: CurrentUser,
                    wait: bool = False, owner: str | None = None,
                    idempotency_key: str | None = Header(
                        None, alias="Idempotency-Key", description=HEADER_DESCRIPTION)
                    ) -> Response:
    """Start a run of the latest (or `version`) of a stored workflow.  Retry
    safely with an `Idempotency-Key` header: the same key and request answer
    200 with the run first created; the same key with another request, 422;
    an empty or over-long key, 400."""
    live = request.app.state.live
    owner_id = owner_of(user, owner)
    key = submission_key(idempotency_key)
    request_print = fingerprint(route="start_run", owner=owner_id, workflow_id=workflow_id,
                                body=body.model_dump(mode="json"))

    async def start(idempotency: tuple[str, str] | None) -> Any:
        return await live.launch(user, owner_id, workflow_id, body.version, body.inputs,
                                 webhook=body.webhook, budget=body.budget,
                                 idempotency=idempotency)

    async def replayed(row: dict[str, Any]) -> Any:
        return await replay(request, row, workflow_id=workflow_id, wait=wait)

    started = await once(request, user, key, request_print, start, replayed)
    if isinstance(started, Response):
        return started
    handle, version = started
    if wait:
        result = await handle.wait()
        shown = handle.recorder.redact(result.to_dict()) if handle.recorder else \
            result.to_dict()
        return await json_response_in_steps({**shown, "workflow_version": version})
    return JSONResponse({"run_id": handle.run_id, "workflow_id": workflow_id,
                         "workflow_version": version, "status": "running",
                         **run_links(handle.run_id)}, status_code=202)

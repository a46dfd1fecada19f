"""AgentFlow's `POST /api/pipeline/run`: run a Pipeline JSON for a user.

    {"id": "digest", "nodes": [{"id": "n1", "block_id": "text_clean",
                                "inputs": {"text": "{{input.text}}"}}],
     "edges": [], "memory_keys": [], "user_id": "alice", "input": {"text": "..."}}

(`input` holds the run's values; a pipeline's own `inputs`, when given, is
their JSON Schema) answers `{pipeline_id, execution_id, status, results,
outputs, memory, log}`
when the run has ended.  The pipeline is checked first (every problem
located as `nodes[i].inputs.x`), converted to a workflow of registry blocks
(`flowforge.service.pipeline`) and run like any other run: stored, streamed,
cancellable, with the user's memory loaded before and saved after.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Request

from flowforge.engine.inputs import validate_inputs
from flowforge.errors import NotFound
from flowforge.registry import get_registry, use_registry
from flowforge.server.auth import CurrentUser, is_admin
from flowforge.server.errors import ApiError
from flowforge.service.loading import compile_document
from flowforge.service.pipeline import pipeline_to_workflow, validate_pipeline
from flowforge.service.users import find_user
from flowforge.workflow.loader import document_from_data

__all__ = ["router"]

router = APIRouter(tags=["seed routes"])

_EXAMPLE = {"id": "clean-text", "nodes": [{"id": "n1", "block_id": "text_clean",
                                           "inputs": {"text": "{{input.text}}"}}],
            "edges": [], "memory_keys": [], "user_id": "alice",
            "input": {"text": "  Hello   world  "}}


async def _run_as(request: Request, user: dict[str, Any], named: Any) -> dict[str, Any]:
    """The pipeline's `user_id`: the caller (by id or name), or anyone for an admin."""
    if named in (None, "", user["user_id"], user["name"]):
        return user
    if is_admin(user):
        try:
            return await find_user(request.app.state.storage, str(named))
        except NotFound:
            pass
    raise ApiError(404, f"no user '{named}'")


@router.post("/api/pipeline/run", summary="Run a Pipeline JSON and answer with its results")
async def run_pipeline(request: Request, user: CurrentUser,
                       body: dict[str, Any] = Body(..., examples=[_EXAMPLE])) -> dict[str, Any]:
    data = dict(body)
    owner = await _run_as(request, user, data.pop("user_id", None))
    inputs = data.pop("input", None) or {}
    if "id" not in data and "pipeline_id" in data:
        data["id"] = data.pop("pipeline_id")
    if not isinstance(inputs, dict):
        raise ApiError(422, "`input` must be an object: the run's values for {{input.x}}")
    registry = get_registry()
    problems = validate_pipeline(data, registry)
    if problems:
        raise ApiError(422, f"{len(problems)} problem(s) in the pipeline", code="invalid_pipeline",
                       details=[{"where": p.where, "message": p.message} for p in problems])
    with use_registry(registry):
        compiled = compile_document(document_from_data(pipeline_to_workflow(data, registry),
                                                       "pipeline"))
        validate_inputs(compiled.doc.inputs, inputs)
        handle = await request.app.state.live.start(compiled, inputs, user=owner,
                                                    services={"registry": registry})
    result = await handle.wait()
    shown = handle.recorder.redact(result.to_dict()) if handle.recorder else result.to_dict()
    return {"pipeline_id": data["id"], "execution_id": handle.run_id, "user_id":
            owner["user_id"], "status": shown["status"], "results": shown["results"],
            "outputs": shown["outputs"], "memory": shown["memory"], "log": shown["events"],
            "error": result.error}

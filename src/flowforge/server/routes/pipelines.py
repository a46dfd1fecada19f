"""Saved pipelines: the intent-to-pipeline system's `/api/pipelines`.

    POST   /api/pipelines              save a Pipeline JSON (201; 409 if the id is taken)
    GET    /api/pipelines              the caller's pipelines, most recently changed first
    GET    /api/pipelines/{id}         one pipeline
    PUT    /api/pipelines/{id}         replace it
    DELETE /api/pipelines/{id}         delete it (204; executions are kept)
    POST   /api/pipelines/{id}/run     {input} -> the run's PipelineState, when it ended

A pipeline belongs to the user who saved it: another user's ids answer 404.
It is checked when saved (every problem located as `nodes[i].inputs.x`, and
the saver's capabilities) and again when it runs, since the registry and
the grants may have changed since.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Header, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from flowforge.engine.result import iso_time
from flowforge.formats.pipeline_json import pipeline_warnings, validate_pipeline
from flowforge.registry import get_registry
from flowforge.server.auth import CurrentUser
from flowforge.server.errors import ApiError
from flowforge.server.idempotency import HEADER_DESCRIPTION, fingerprint, submission_key
from flowforge.server.routes.pipeline import (REPLAY_ANSWER, PipelineRunAnswer, invalid_pipeline,
                                              located, run_for)
from flowforge.service.pipeline import compile_pipeline

__all__ = ["router", "SavedPipeline", "PipelineList", "PipelineRunRequest"]

router = APIRouter(prefix="/api/pipelines", tags=["pipelines"])

_EXAMPLE = {"id": "clean-text", "name": "Clean a text",
            "nodes": [{"id": "n1", "block_id": "text_clean", "inputs": {"text": "{{input.text}}"}}],
            "edges": [], "memory_keys": []}


class SavedPipeline(BaseModel):
    """A stored pipeline."""

    pipeline_id: str = Field(description="The pipeline's id (its `id`).")
    name: str | None = Field(None, description="Its name.")
    owner: str = Field(description="The user it belongs to.")
    pipeline: dict[str, Any] = Field(description="The Pipeline JSON, as saved.")
    created_at: str | None = Field(None, description="When it was first saved (ISO 8601).")
    updated_at: str | None = Field(None, description="When it was last replaced (ISO 8601).")
    run_url: str = Field(description="Where to POST {input} to run it.")
    warnings: list[dict[str, str]] = Field(
        default_factory=list, description="Allowed but likely mistakes, located "
        "(`{where, message}`): a field a node's block does not give reads null, as in the seed.")


class PipelineList(BaseModel):
    pipelines: list[SavedPipeline]
    count: int


class PipelineRunRequest(BaseModel):
    """Run a saved pipeline."""

    model_config = ConfigDict(extra="forbid")

    input: dict[str, Any] = Field(default_factory=dict)
    """The run's values for `{{input.x}}`."""


def _view(row: dict[str, Any]) -> SavedPipeline:
    return SavedPipeline(pipeline_id=row["pipeline_id"], name=row["name"], owner=row["owner"],
                         pipeline=row["pipeline"], created_at=iso_time(row["created_at"]),
                         updated_at=iso_time(row["updated_at"]),
                         run_url=f"/api/pipelines/{row['pipeline_id']}/run",
                         warnings=located(pipeline_warnings(row["pipeline"], get_registry())))


async def _checked(request: Request, user: dict[str, Any], body: Any,
                   expected_id: str | None = None) -> dict[str, Any]:
    """The body as a valid pipeline the user may run, or the located problems."""
    if not isinstance(body, dict):
        raise ApiError(422, "send a Pipeline JSON object: {id, nodes, edges, memory_keys}")
    data = dict(body)
    if expected_id is not None:
        given = data.setdefault("id", expected_id)
        if given != expected_id:
            raise ApiError(422, f"the pipeline's id '{given}' differs from the id in the URL "
                                f"'{expected_id}': make them the same", code="invalid_pipeline",
                           details=[{"where": "id", "message": "differs from the URL"}])
    registry = get_registry()
    problems = validate_pipeline(data, registry)
    if problems:
        raise invalid_pipeline(problems)
    live = request.app.state.live
    compile_pipeline(data, registry, policy=await live.policy(user),
                     model_override=live.settings.model)
    return data


async def _row(request: Request, user: dict[str, Any], pipeline_id: str) -> dict[str, Any]:
    row = await request.app.state.storage.get_pipeline(user["user_id"], pipeline_id)
    if row is None:
        raise ApiError(404, f"no pipeline '{pipeline_id}' (see GET /api/pipelines)")
    return row


@router.post("", status_code=201, response_model=SavedPipeline,
             summary="Save a Pipeline JSON (checked first)")
async def create_pipeline(request: Request, user: CurrentUser,
                          body: dict[str, Any] = Body(..., examples=[_EXAMPLE])) -> Any:
    data = await _checked(request, user, body)
    return _view(await request.app.state.storage.create_pipeline(user["user_id"], data))


@router.get("", response_model=PipelineList, summary="Your saved pipelines")
async def list_pipelines(request: Request, user: CurrentUser) -> Any:
    rows = await request.app.state.storage.list_pipelines(user["user_id"])
    return PipelineList(pipelines=[_view(row) for row in rows], count=len(rows))


@router.get("/{pipeline_id}", response_model=SavedPipeline, summary="One saved pipeline")
async def get_pipeline(request: Request, pipeline_id: str, user: CurrentUser) -> Any:
    return _view(await _row(request, user, pipeline_id))


@router.put("/{pipeline_id}", response_model=SavedPipeline,
            summary="Replace a saved pipeline (checked first)")
async def put_pipeline(request: Request, pipeline_id: str, user: CurrentUser,
                       body: dict[str, Any] = Body(..., examples=[_EXAMPLE])) -> Any:
    await _row(request, user, pipeline_id)
    data = await _checked(request, user, body, expected_id=pipeline_id)
    row = await request.app.state.storage.update_pipeline(user["user_id"], pipeline_id, data)
    if row is None:                               # deleted meanwhile
        raise ApiError(404, f"no pipeline '{pipeline_id}' (see GET /api/pipelines)")
    return _view(row)


@router.delete("/{pipeline_id}", status_code=204,
               summary="Delete a saved pipeline (its executions are kept)")
async def delete_pipeline(request: Request, pipeline_id: str, user: CurrentUser) -> Response:
    if not await request.app.state.storage.delete_pipeline(user["user_id"], pipeline_id):
        raise ApiError(404, f"no pipeline '{pipeline_id}' (see GET /api/pipelines)")
    return Response(status_code=204)


@router.post("/{pipeline_id}/run", response_model=PipelineRunAnswer, responses=REPLAY_ANSWER,
             summary="Run a saved pipeline; its PipelineState when it has ended")
async def run_saved_pipeline(request: Request, pipeline_id: str, user: CurrentUser,
                             body: PipelineRunRequest | None = None,
                             idempotency_key: str | None = Header(
                                 None, alias="Idempotency-Key", description=HEADER_DESCRIPTION)
                             ) -> Any:
    """Run a saved pipeline.  Retry safely with an `Idempotency-Key` header:
    the same key and input answer with the run first started; another input,
    or the pipeline changed since (PUT), 422."""
    key = submission_key(idempotency_key)
    row = await _row(request, user, pipeline_id)
    inputs = (body or PipelineRunRequest()).input
    # the saved pipeline is part of what the request means: its answer is built from it
    request_print = fingerprint(route="saved_pipeline_run", pipeline_id=pipeline_id,
                                pipeline=row["pipeline"], input=inputs)
    return await run_for(request, user, row["pipeline"], inputs, key, request_print)

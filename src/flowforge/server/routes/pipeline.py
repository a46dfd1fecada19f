"""AgentFlow's `POST /api/pipeline/run`: run a Pipeline JSON for a user.

    {"id": "digest", "nodes": [{"id": "n1", "block_id": "text_clean",
                                "inputs": {"text": "{{input.text}}"}}],
     "edges": [], "memory_keys": [], "user_id": "alice", "input": {"text": "..."}}

(`input` holds the run's values; a pipeline's own `inputs`, when given, is
their JSON Schema) answers, when the run has ended, the doer's
PipelineState `{pipeline_id, results, user, memory, log: [{node, block,
output}]}` with `execution_id`, `user_id`, `status`, `outputs`, `error` and
the run's `events`.  The pipeline is checked first (every problem
located as `nodes[i].inputs.x`), converted to a workflow of registry blocks
(`flowforge.service.pipeline`) and run like any other run: stored, streamed,
cancellable, with the user's memory loaded before and saved after.  The
answer's shape is the application's (`flowforge.apps.thinker.pipeline`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import Field

from flowforge.apps.thinker.pipeline import PipelineState, pipeline_state
from flowforge.engine.inputs import validate_inputs
from flowforge.errors import NotFound
from flowforge.formats.pipeline_json import pipeline_warnings, validate_pipeline
from flowforge.registry import get_registry, use_registry
from flowforge.server.auth import CurrentUser, is_admin
from flowforge.server.errors import ApiError
from flowforge.server.idempotency import (HEADER_DESCRIPTION, REPLAYED, fingerprint, once,
                                          run_result, submission_key)
from flowforge.service.pipeline import compile_pipeline
from flowforge.service.users import find_user

__all__ = ["router", "PipelineRunAnswer", "run_for", "REPLAY_ANSWER", "located"]

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


class PipelineRunAnswer(PipelineState):
    """A finished pipeline run: the PipelineState and the execution's record."""

    execution_id: str = Field(description="The run's id (GET /api/executions/{id}).")
    user_id: str = Field(description="The user the pipeline ran for.")
    status: str = Field(description="succeeded, failed or cancelled.")
    outputs: dict[str, Any] = Field(description="The outputs of the sink nodes.")
    error: str | None = Field(None, description="Why the run failed, when it did.")
    events: list[dict[str, Any]] = Field(description="Every event of the run, in order.")
    warnings: list[dict[str, str]] = Field(
        default_factory=list, description="Allowed but likely mistakes, located "
        "(`{where, message}`): a field a node's block does not give reads null, as in the seed.")


def located(problems: list[Any]) -> list[dict[str, str]]:
    """Problems (or warnings) as the API shows them."""
    return [{"where": p.where, "message": p.message} for p in problems]


REPLAY_ANSWER = {200: {"description": "The run's PipelineState; with an Idempotency-Key "
                                     "already used for this request, that of the run it "
                                     "started (header Idempotent-Replayed: true)"}}


def invalid_pipeline(problems: list[Any]) -> ApiError:
    return ApiError(422, f"{len(problems)} problem(s) in the pipeline", code="invalid_pipeline",
                    details=[{"where": p.where, "message": p.message} for p in problems])


async def run_for(request: Request, owner: dict[str, Any], data: dict[str, Any],
                  inputs: Any, key: str | None = None, request_print: str = "") -> Any:
    """Check and run `data` for `owner` (a user row); the answer when it ended.
    With an Idempotency-Key (`key`, the request's fingerprint) a request seen
    before gets the answer of the run it started (200, Idempotent-Replayed)."""
    if not isinstance(inputs, dict):
        raise ApiError(422, "`input` must be an object: the run's values for {{input.x}}")
    registry = get_registry()

    async def start(idempotency: tuple[str, str] | None) -> tuple[str, Any, Any, bool]:
        problems = validate_pipeline(data, registry)
        if problems:
            raise invalid_pipeline(problems)
        live = request.app.state.live
        compiled = compile_pipeline(data, registry)
        with use_registry(registry):
            validate_inputs(compiled.doc.inputs, inputs)
            handle = await live.start(compiled, inputs, user=owner,
                                      services={"registry": registry}, idempotency=idempotency)
        result = await handle.wait()
        redact = handle.recorder.redact if handle.recorder else (lambda value: value)
        return handle.run_id, result, redact, False

    async def replayed(row: dict[str, Any]) -> tuple[str, Any, Any, bool]:
        result, redact = await run_result(request, row["run_id"])
        return row["run_id"], result, redact, True

    # keys are the run's user's: an admin running as alice uses alice's keys
    run_id, result, redact, again = await once(request, owner, key, request_print, start,
                                               replayed)
    state = pipeline_state(data, result, {"id": owner["user_id"], "name": owner["name"]})
    shown = redact({**state.model_dump(), "outputs": result.outputs, "error": result.error,
                    "events": result.events})
    answer = PipelineRunAnswer(**shown, execution_id=run_id, user_id=owner["user_id"],
                               status=result.status,
                               warnings=located(pipeline_warnings(data, registry)))
    if again:
        return JSONResponse(jsonable_encoder(answer), headers=REPLAYED)
    return answer


@router.post("/api/pipeline/run", summary="Run a Pipeline JSON and answer with its results",
             response_model=PipelineRunAnswer, responses=REPLAY_ANSWER)
async def run_pipeline(request: Request, user: CurrentUser,
                       body: dict[str, Any] = Body(..., examples=[_EXAMPLE]),
                       idempotency_key: str | None = Header(
                           None, alias="Idempotency-Key", description=HEADER_DESCRIPTION)
                       ) -> Any:
    """Run a pipeline.  Retry safely with an `Idempotency-Key` header: the
    same key and body answer with the run first started; another body, 422."""
    key = submission_key(idempotency_key)
    request_print = fingerprint(route="pipeline_run", caller=user["user_id"], body=body)
    data = dict(body)
    owner = await _run_as(request, user, data.pop("user_id", None))
    inputs = data.pop("input", None) or {}
    if "id" not in data and "pipeline_id" in data:
        data["id"] = data.pop("pipeline_id")
    return await run_for(request, owner, data, inputs, key, request_print)

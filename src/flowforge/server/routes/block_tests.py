"""Test one block without running the workflow (the editor's "Test this block").

`POST /api/block-tests/reads` says what a block reads and the values a past
run (by default this user's latest run of the workflow) would give it;
`POST /api/block-tests` runs the block alone with sample values and answers
its status, output or error, the requests as sent to the model, tokens and
time.  Nothing is stored: no run appears in the runs list.  The logic is
service/block_test.py's; here the document is loaded (the editor's text, or a
stored version) and the request's samples are merged over a past run's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from flowforge.server.auth import CurrentUser, owned_run
from flowforge.server.errors import ApiError
from flowforge.server.routes.workflows import owner_of
from flowforge.service.block_test import (BlockTestRefused, describe_block, merge_samples,
                                          samples_from_run, run_one_block)
from flowforge.service.compiling import check_block_count
from flowforge.workflow.graph import CompiledWorkflow

__all__ = ["router", "BlockTestRequest", "Samples"]

router = APIRouter(prefix="/api/block-tests", tags=["workflows"])


class Samples(BaseModel):
    """Values for what the block reads, by template namespace."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    input: dict[str, Any] = Field(default_factory=dict)
    """Workflow inputs by name (`{{input.query}}`), checked against their declarations."""
    vars: dict[str, Any] = Field(default_factory=dict)
    """Variables that replace the document's (`{{vars.company}}`)."""
    memory: dict[str, Any] = Field(default_factory=dict)
    """Memory keys (`{{memory.topic}}`); others come from the user's stored memory."""
    loop: dict[str, Any] = Field(default_factory=dict)
    """For a block inside a loop or parallel: `index`, `item`, `previous`."""
    blocks: dict[str, Any] = Field(default_factory=dict)
    """Other blocks' outputs by id (`{"classify": {"content": "..."}}`)."""


class BlockTestRequest(BaseModel):
    """Which block of which document, and where the values it reads come from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    block_id: str = Field(min_length=1, max_length=200)
    """The block to run, by id (a block inside a loop or parallel too)."""
    document: str | None = Field(None, min_length=1)
    """The workflow as YAML or JSON text (the editor's, saved or not); else `workflow_id`."""
    workflow_id: str | None = Field(None, min_length=1, max_length=200)
    """A stored workflow of this user (its latest version, or `version`)."""
    version: int | None = Field(None, ge=1, le=2**31 - 1)
    """With `workflow_id`: this version instead of the latest."""
    samples: Samples = Field(default_factory=Samples)
    """Values for what the block reads; they win over a past run's."""
    run_id: str | None = Field(None, min_length=1, max_length=200)
    """A past run of this user whose inputs and block outputs fill what `samples` leave out."""
    last_run: bool = False
    """Fill from this user's latest run of the workflow (a succeeded one first), when
    there is one and no `run_id` is given."""


async def _compiled(request: Request, body: BlockTestRequest, user: dict[str, Any],
                    owner: str | None) -> CompiledWorkflow:
    live = request.app.state.live
    if (body.document is None) == (body.workflow_id is None):
        raise ApiError(422, "give the workflow as `document` (its text) or as `workflow_id` "
                            "(a stored one), not both or neither",
                       details=[{"where": "body.document", "message": "one of `document`, "
                                 "`workflow_id`"}])
    if body.workflow_id is not None:
        _, compiled = await live.workflows.compiled(owner_of(user, owner), body.workflow_id,
                                                    body.version)
        return compiled
    if body.version is not None:
        raise ApiError(422, "`version` goes with `workflow_id`: a `document` is its own text",
                       details=[{"where": "body.version", "message": "leave it out"}])

    def compile_text(text: str, max_blocks: int) -> CompiledWorkflow:
        from flowforge.service.loading import compile_document
        from flowforge.workflow.loader import document_from_data, parse_text

        data = parse_text(text, "<document>")
        check_block_count(data, max_blocks)
        return compile_document(document_from_data(data, "<document>"))

    # in a thread (never the pool: a compiled workflow cannot cross processes)
    return await live.workflows.compiler.run(compile_text, body.document,
                                             live.settings.max_document_blocks, big=False)


async def _samples(request: Request, body: BlockTestRequest, user: dict[str, Any],
                   workflow_id: str) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The request's samples over a past run's values, and that run's id."""
    storage = request.app.state.storage
    row = None
    if body.run_id is not None:
        row = await owned_run(storage, user, body.run_id)
    elif body.last_run:
        for status in ("succeeded", None):
            rows = await storage.list_runs(workflow_id=workflow_id, status=status,
                                           user_id=user["user_id"], limit=1)
            if rows:
                row = rows[0]
                break
    from_run = await samples_from_run(storage, row) if row is not None else None
    return merge_samples(from_run, body.samples.model_dump()), \
        row["run_id"] if row is not None else None


def _refused(exc: BlockTestRefused) -> ApiError:
    return ApiError(422, str(exc), code=exc.code,
                    details=[{"where": p.where, "message": p.message} for p in exc.problems])


@router.post("/reads", summary="What a block reads, with the values a past run would give it "
                               "(for a block test's form)")
async def block_reads(request: Request, body: BlockTestRequest, user: CurrentUser,
                      owner: str | None = None) -> dict[str, Any]:
    """Each value the block reads (`input.query`, `vars.company`, `classify.content`) and,
    when known, its `value`: from `samples`, the past run, an input's default or the
    document's variables.  `runnable` is false (with the `reason`) for blocks that
    cannot run alone."""
    compiled = await _compiled(request, body, user, owner)
    samples, run_id = await _samples(request, body, user, compiled.id)
    try:
        described = describe_block(compiled, body.block_id, samples)
    except BlockTestRefused as exc:
        raise _refused(exc) from None
    return {**described, "workflow_id": compiled.id, "run_id": run_id}


@router.post("", summary="Run one block alone with sample values: its output, the prompt as "
                         "sent, tokens and time (nothing is stored)",
             responses={422: {"description": "The block cannot run alone (a container, an "
                                             "approval, a wait, a nested workflow), or values "
                                             "it reads are missing (each named)"}})
async def run_block(request: Request, body: BlockTestRequest, user: CurrentUser,
                    owner: str | None = None) -> dict[str, Any]:
    """The block runs with this user's policy, secrets, keys and limits, as in a run;
    a block that fails answers 200 with `status: failed` and its located `error`."""
    live = request.app.state.live
    live.slots.check(user)                       # a test spends like a run: the same cap
    compiled = await _compiled(request, body, user, owner)
    samples, run_id = await _samples(request, body, user, compiled.id)
    slot = live.slots.claim(user)
    try:
        options = await live.run_options(user)
        options.pop("storage")
        answer = await run_one_block(compiled, body.block_id, samples,
                                  storage=request.app.state.storage, **options)
    except BlockTestRefused as exc:
        raise _refused(exc) from None
    finally:
        live.slots.free(slot)
    return {**answer, "workflow_id": compiled.id, "run_id": run_id}

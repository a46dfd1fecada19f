"""What an editor asks of a document: `POST /api/validate` (every problem at
its line, and the graph while the text is valid), a stored workflow's
graph (`GET /api/workflows/{id}/graph`) and the document format itself
(`GET /api/schema`, what `flowforge schema` prints: the canvas builds its
palette and its block forms from it, so a new block type needs no UI code).  The web app's YAML editor and graph
use only these, so the picture and the messages are the engine's own."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from flowforge.server.auth import CurrentUser
from flowforge.server.document_view import check_text_view, graph_view, located
from flowforge.server.errors import ApiError
from flowforge.server.routes.workflows import owner_of
from flowforge.service.compiling import BIG_BODY
from flowforge.blocks.type_table import block_types
from flowforge.service.schema import workflow_json_schema

__all__ = ["router"]

router = APIRouter(tags=["workflows"])

#: Optional: an empty text is a document too, answered 200 like any other
#: ("the document is empty"), as an editor checking as the user types needs.
#: Any text is a document to check (its problems are the answer), and any JSON
#: object: one that breaks the workflow schema is what this route reports on.
_TEXT_BODY = {"requestBody": {"required": False, "content": {
    "application/yaml": {"schema": {}},
    "application/json": {"schema": {"type": "object"}},
    "text/plain": {"schema": {}}}}}


@router.post("/api/validate", openapi_extra=_TEXT_BODY,
             summary="Check a document without saving it: every problem at its line, "
                     "and its graph when valid")
async def validate(request: Request, user: CurrentUser) -> dict[str, Any]:
    """The same problems as `flowforge validate` (and what this user's grants
    would refuse at save time), each with `where`, `message` and the 1-based
    `line` of the text; `graph` is the compiled graph when there are none, and
    `warnings` (located the same way) the blocks whose outcome the explicit-join
    rule changed (workflow/joins.py)."""
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not UTF-8 text") from None
    if "json" in request.headers.get("content-type", "") and text.lstrip()[:1] not in ("{", ""):
        # the declared JSON body is a document: a mapping (YAML and text may be anything)
        raise ApiError(422, "a JSON workflow document is an object with `id` and `blocks`",
                       details=[{"where": "body", "message": "expected a JSON object"}])
    if not text.strip():
        return {"valid": False, "graph": None, "problems": [
            {"where": "", "message": "the document is empty: write `id:` and `blocks:`",
             "line": 1}]}
    live = request.app.state.live
    # Off the event loop: checking a document of the body limit's size takes
    # its time (YAML is read in Python, compiling is Python); a big one is
    # checked in another process (service/compiling.py), since a thread would
    # still hold the interpreter that /health and every stream need.
    policy = await live.policy(user)
    problems, checked, graph, warnings = await live.workflows.compiler.run(
        check_text_view, text, policy, live.settings.model, live.settings.chain_base_url,
        live.settings.max_document_blocks, big=len(body) >= BIG_BODY)
    if checked is not None:          # the stored workflows it runs, as a save checks them
        problems = [located(text, problem) for problem in await live.workflows.nested_problems(
            user["user_id"], checked, policy, live.settings.model)]
    if problems:
        graph, warnings = None, []
    return {"valid": not problems, "problems": problems, "graph": graph,
            "warnings": warnings}


@router.get("/api/schema", summary="The JSON Schema of the workflow document "
                                   "(`flowforge schema`), every block type's config included")
async def document_schema(user: CurrentUser) -> dict[str, Any]:
    return workflow_json_schema()


@router.get("/api/workflows/{workflow_id}/graph",
            summary="A workflow's graph: blocks (children under their container) and edges")
async def workflow_graph(request: Request, workflow_id: str, user: CurrentUser,
                         version: int | None = Query(None, ge=1, le=2**31 - 1),
                         owner: str | None = None) -> dict[str, Any]:
    store = request.app.state.live.workflows
    row, compiled = await store.compiled(owner_of(user, owner), workflow_id, version)
    return {**graph_view(compiled), "version": row["version"]}


#: Models an editor offers for `defaults.model` when this user may use them:
#: the embedded ones (no key, no network) and the hosted providers' usual ones.
#: A suggestion list, not a limit: any model string the policy allows is valid.
SUGGESTED_MODELS = ("local/qwen2.5-0.5b", "local/smollm2", "openai/gpt-4o", "openai/gpt-4o-mini",
                    "anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash")


@router.get("/api/models", summary="Models this user's workflows may name (for an editor's "
                                   "`defaults.model` choice); the server's own model first")
async def allowed_models(request: Request, user: CurrentUser) -> dict[str, Any]:
    live = request.app.state.live
    policy = await live.policy(user)
    server_model = live.settings.model
    candidates = ([server_model] if server_model else []) + list(SUGGESTED_MODELS)
    models = [model for model in dict.fromkeys(candidates)
              if policy.model_problem(model) is None]
    return {"models": models, "server_model": server_model}


@router.get("/api/block-outputs", summary="The output fields each block type declares "
                                          "(what `{{block.field}}` may read), for an editor")
async def block_outputs(user: CurrentUser) -> dict[str, Any]:
    """Each type's declared `outputs` (the declaration validation and the
    manual read) and `more`: what a document adds (a `set` block's keys) or
    why the output is open (a function's result). Answers for any document,
    valid or not, so an editor's `{{` completion works mid-build."""
    return {"types": {name: {"outputs": [{"name": field, "type": out.type,
                                          "description": out.description}
                                         for field, out in block_type.outputs.items()],
                             "more": block_type.more_outputs}
                      for name, block_type in sorted(block_types().items())}}

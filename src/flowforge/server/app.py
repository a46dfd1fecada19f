"""The FastAPI application: `create_app(settings)`.

The app owns one storage (opened on start, migrations applied) and one
`LiveRuns` registry; routes reach them through `app.state`.  On shutdown
the runs still going are cancelled, so their records end `cancelled` rather
than hanging in `running`.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx
from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

from flowforge.errors import StorageError
from flowforge.server.errors import ApiError, install_error_handlers
from flowforge.server.json_body import FastJSONResponse
from flowforge.server import log_redaction
from flowforge.server.limits import BodyLimit
from flowforge.server.live import LiveRuns
from flowforge.server.media_types import BodyMediaTypes
from flowforge.server.rate_limit import RateLimit
from flowforge.server.routes import (agent, apps, block_tests, chat, compat, documents, edits,
                                      imports, knowledge, pipeline, pipelines, runs, secrets,
                                      users, workflows)
from flowforge.sandbox.memory import install_budget, installed_budget
from flowforge.server.settings import ServerSettings
from flowforge.server.websocket import router as websocket_router
from flowforge.storage import storage_from_url
from flowforge.storage.base import Storage
from flowforge.workflow.model import Workflow

__all__ = ["create_app"]

_DESCRIPTION = """Run flowforge workflows as a service.

Every route but `/health` and this document needs `Authorization: Bearer <key>`
(create a key with `flowforge users create NAME`).  Errors are JSON:
`{"error": {"code", "message", "details"}}`.

Starting a run (`POST /api/workflows/{workflow_id}/runs`, `/api/agent`,
`/agent-workflow`, `/api/pipeline/run`, `/api/pipelines/{pipeline_id}/run`) is
safe to retry with an `Idempotency-Key` header: the same user, key and request
answer 200 with the run the first request created (`Idempotent-Replayed:
true`), never a second run; the same key with another request answers 422."""


def create_app(settings: ServerSettings | None = None, *, storage: Storage | None = None,
               webhook_client: httpx.AsyncClient | None = None) -> FastAPI:
    """A new app.  `storage` (opened here if needed) overrides the settings'
    database URL; `webhook_client` lets tests catch webhooks in memory."""
    settings = settings or ServerSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log_redaction.install()      # after the ASGI server configured its loggers
        store = storage or storage_from_url(settings.database_url)
        await store.open()
        app.state.storage = store
        app.state.settings = settings
        app.state.live = LiveRuns(store, settings, webhook_client)
        app.state.live.start_resumer()
        # every sandboxed block of this process is charged to it (sandbox/memory.py)
        budget = settings.memory_budget()
        install_budget(budget)
        try:
            yield
        finally:
            await app.state.live.shutdown()
            if installed_budget() is budget:
                install_budget(None)
            if storage is None:
                await store.close()

    from flowforge import __version__ as version
    # /docs and /redoc with their scripts, styles and favicon served from the
    # package (fastapi-offline): FastAPI's own pages load them from a CDN and
    # are blank offline.  No validator badge either: it calls validator.swagger.io.
    app = FastAPIOffline(title="flowforge", version=version, description=_DESCRIPTION,
                         lifespan=lifespan, static_url="/docs/assets",
                         default_response_class=FastJSONResponse,     # runs' big bodies
                         swagger_ui_parameters={"validatorUrl": None})
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(BodyMediaTypes)        # a wrong type is refused unread
    # outermost: a user over their request rate is refused before anything else
    app.add_middleware(RateLimit, rate=settings.max_user_rate, burst=settings.max_user_burst)
    log_redaction.install()
    install_error_handlers(app)

    @app.get("/health", tags=["health"], summary="Liveness and database reachability (no key)")
    async def health(request: Request) -> dict[str, Any]:
        store: Storage = request.app.state.storage
        try:
            await store.get_run("-")
        except StorageError as exc:
            raise ApiError(503, f"the database is unreachable: {exc}") from None
        return {"status": "ok", "version": version, "database": store.url.split(":")[0]}

    for module in (documents, block_tests, imports, apps, workflows, edits, runs, users,
                   secrets, compat, pipeline, pipelines, chat, agent, knowledge):
        app.include_router(module.router)
    from flowforge.server.routes import builder      # blocks, clarify, create-agent, automate
    app.include_router(builder.router)
    app.include_router(websocket_router)
    from flowforge.server.manual_pages import install_manual; install_manual(app)  # /manual/
    from flowforge.server.webui import install_web_app   # `/`: the web app, after the API
    install_web_app(app)
    made = tuple(map(id, app.router.routes))
    app.openapi = lambda: _openapi(app, made)      # type: ignore[method-assign]
    return app


#: The API document of an app as `create_app` made it.  Every such app has the
#: same routes (none depends on the settings), so the document is a function
#: of the code: it is built once per process, not on each app's first request
#: with a body (the media-type check reads it), where it cost ~0.15 s of CPU.
_MADE_DOCUMENT: dict[str, Any] | None = None


def _openapi(app: FastAPI, made: tuple[int, ...]) -> dict[str, Any]:
    """FastAPI's document plus the workflow format, which routes read from a
    raw body (JSON or YAML) and so cannot declare as a parameter.  An app
    whose routes changed after `create_app` (a program that added its own)
    gets a document of its own."""
    global _MADE_DOCUMENT
    if app.openapi_schema:
        return app.openapi_schema
    as_made = tuple(map(id, app.router.routes)) == made
    if as_made and _MADE_DOCUMENT is not None:
        app.openapi_schema = _MADE_DOCUMENT
        return _MADE_DOCUMENT
    app.openapi_schema = _build_openapi(app)
    if as_made:
        _MADE_DOCUMENT = app.openapi_schema
    return app.openapi_schema


def _build_openapi(app: FastAPI) -> dict[str, Any]:
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    workflow = Workflow.model_json_schema(by_alias=True,
                                          ref_template="#/components/schemas/{model}")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in workflow.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components["WorkflowDocument"] = workflow
    properties = dict(workflow.get("properties", {}))
    if "id" in properties:                  # absent or null: the path's id
        properties["id"] = {"anyOf": [properties["id"], {"type": "null"}],
                            "description": "May be left out: the path names the workflow "
                                           "(when given, it must be the path's id)."}
    components["WorkflowDocumentWithoutId"] = {   # a PUT names the id in its path
        **workflow, "properties": properties,
        "required": [name for name in workflow.get("required", []) if name != "id"]}
    components["Error"] = _ERROR_SCHEMA
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, description in _ERROR_RESPONSES.items():
                if path == "/health" and status not in ("405", "503"):
                    continue
                responses.setdefault(status, {
                    "description": description,
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Error"}}}})
            for parameter in operation.get("parameters", ()):
                if parameter.get("name", "").lower() == "idempotency-key":
                    # what server/idempotency.py accepts, so clients can know it
                    parameter["schema"] = {"type": "string", "minLength": 1,
                                           "maxLength": 255, "pattern": "^[!-~][ -~]*$"}
    return schema


#: Every answer but a success is this JSON (server/errors.py).
_ERROR_SCHEMA = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "string"}, "message": {"type": "string"},
        "details": {"type": "array", "items": {"type": "object"}}}}}}

#: What any route may answer besides its own successes: the same shape every
#: time, declared for each operation so clients (and schemathesis) know them.
_ERROR_RESPONSES = {
    "400": "Malformed request: a body that is not JSON/YAML, too deep, or a bad header",
    "401": "Missing, unknown or revoked API key",
    "403": "Not allowed: an admin route, another owner, or a capability not granted",
    "404": "No such run, workflow, user, secret or block (another user's ids too)",
    "409": "Conflict: a name already taken, or a run in the wrong state",
    "405": "The path takes other methods (listed in the Allow header)",
    "413": "The request body is larger than the server's limit",
    "415": "Unsupported Content-Type",
    "422": "Invalid input, each problem located",
    "429": "This user is at one of the server's limits (requests a second, runs in "
           "progress); retry after the Retry-After seconds",
    "503": "The database is unreachable",
}

"""Every error answers as JSON of one shape, never as a traceback:

    {"error": {"code": "not_found", "message": "no run 'abc'", "details": [...]}}

`details` lists located problems (`{"where": "body.inputs", "message": ...}`)
when there are several.  flowforge's own errors map to statuses here, so
routes raise what the service raises and nothing else.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from flowforge.errors import (CapabilityDenied, FlowforgeError, InputError, InvalidValue,
                              NotFound, StorageError, ValidationFailed, WorkflowError)
from flowforge.storage.base import AlreadyExists

__all__ = ["ApiError", "error_body", "install_error_handlers"]

log = logging.getLogger("flowforge.server")

_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
          415: "unsupported_media_type", 422: "invalid", 429: "too_many_requests",
          500: "internal_error",
          503: "unavailable"}


class ApiError(Exception):
    """Raise from a route to answer `status` with a JSON error."""

    def __init__(self, status: int, message: str, *, code: str | None = None,
                 details: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or _CODES.get(status, "error")
        self.details = details
        self.headers = headers


def error_body(status: int, message: str, code: str | None = None,
               details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code or _CODES.get(status, "error"), "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def _json(status: int, message: str, code: str | None = None,
          details: list[dict[str, Any]] | None = None,
          headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, code, details), status_code=status,
                        headers=headers)


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _from_flowforge(exc: FlowforgeError) -> JSONResponse:
    if isinstance(exc, CapabilityDenied):
        message = (f"the workflow needs capabilities this user has not been granted: "
                   f"{', '.join(exc.capabilities)}; an administrator grants them with "
                   f"`flowforge users grant NAME CAPABILITY`") if exc.capabilities else \
            f"not allowed on this server: {exc.problems[0].message}"
        return _json(403, message, "capability_denied",
                     [{"where": p.where, "message": p.message,
                       "capability": getattr(p, "capability", "")} for p in exc.problems])
    if isinstance(exc, NotFound):
        return _json(404, str(exc))
    if isinstance(exc, AlreadyExists):
        return _json(409, str(exc))
    if isinstance(exc, ValidationFailed):
        return _json(422, f"{len(exc.problems)} problem(s) in the workflow",
                     "invalid_workflow",
                     [{"where": p.where, "message": p.message} for p in exc.problems])
    if isinstance(exc, WorkflowError):
        return _json(422, str(exc), "invalid_workflow",
                     [{"where": exc.where, "message": exc.message}])
    if isinstance(exc, InvalidValue):
        return _json(422, str(exc), "invalid_value",
                     [{"where": exc.where or "body", "message": exc.message}])
    if isinstance(exc, InputError):
        return _json(422, "invalid run inputs", "invalid_inputs",
                     [{"where": "inputs", "message": p} for p in exc.problems])
    if isinstance(exc, StorageError):
        log.error("storage error: %s", exc)
        return _json(503, f"the database is unavailable: {exc}")
    return _json(400, str(exc))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _json(exc.status, exc.message, exc.code, exc.details, exc.headers)

    @app.exception_handler(FlowforgeError)
    async def flowforge_error(request: Request, exc: FlowforgeError) -> JSONResponse:
        return _from_flowforge(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return _json(400, "the request body is not valid JSON", "malformed_json",
                         [{"where": _where(tuple(e["loc"])), "message": e["msg"]}
                          for e in errors])
        details = [{"where": _where(tuple(e["loc"])), "message": e["msg"]} for e in errors]
        return _json(422, "; ".join(f"{d['where']}: {d['message']}" for d in details),
                     "invalid_request", details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        headers = getattr(exc, "headers", None)
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path} (see /docs)"
        if exc.status_code == 405:
            # The router names one route's methods; the path may have several
            # routes (GET and POST /api/workflows): Allow lists them all.
            from flowforge.server.webui import methods_at

            allowed = methods_at(request.app, request.url.path)
            if allowed:
                headers = {**(headers or {}), "Allow": ", ".join(allowed)}
                message = (f"{request.url.path} does not answer {request.method}; it takes "
                           f"{', '.join(allowed)}")
        return _json(exc.status_code, message, headers=headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return _json(500, f"internal error: {type(exc).__name__} (logged on the server)")

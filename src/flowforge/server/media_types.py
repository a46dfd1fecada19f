"""A request body of a type its route does not take answers 415, on every route.

curl sends `-d '{"inputs": ...}'` as `application/x-www-form-urlencoded`
unless told otherwise.  FastAPI would then hand the route raw bytes and
answer a puzzling 422 ("Input should be a valid dictionary"); a user needs
to hear "send Content-Type: application/json" instead.

What a route takes is read from the OpenAPI document, the one place every
route declares its body (a model parameter, or `openapi_extra` for the
routes that parse JSON or YAML themselves), so a new route is covered
without code of its own.  A JSON type is `application/json` or any
`application/*+json`; a body sent without a Content-Type is read as JSON
on a route that takes JSON (FastAPI alone would refuse it with a 422).
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.server.errors import error_body

__all__ = ["BodyMediaTypes", "accepted_media_types"]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def accepted_media_types(openapi: dict[str, Any]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(METHOD, path template) -> the media types its request body may have,
    for every operation of the document that declares a request body."""
    accepted: dict[tuple[str, str], tuple[str, ...]] = {}
    for path, operations in openapi.get("paths", {}).items():
        for method, operation in operations.items():
            content = (operation.get("requestBody") or {}).get("content") if \
                isinstance(operation, dict) else None
            if content:
                accepted[(method.upper(), path)] = tuple(content)
    return accepted


def _media_type(scope: dict) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return value.decode("latin-1").split(";")[0].strip().lower()
    return None


def _is_json(media: str) -> bool:
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _takes(media: str, accepted: tuple[str, ...]) -> bool:
    if media in accepted or (_is_json(media) and "application/json" in accepted):
        return True
    return any(kind.endswith("/*") and media.startswith(kind[:-1]) for kind in accepted)


class BodyMediaTypes:
    """Pure ASGI middleware: checks the Content-Type header only (the body is
    not read), so it costs nothing on the routes it lets through."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._routes: list[tuple[str, re.Pattern[str], tuple[str, ...]]] | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in _BODY_METHODS:
            accepted = self._route_accepts(scope)
            media = _media_type(scope)
            if accepted and media is None and "application/json" in accepted:
                # no type at all: read as JSON, what such a client means
                scope = {**scope, "headers": [*scope.get("headers", ()),
                                              (b"content-type", b"application/json")]}
            elif accepted and media is not None and not _takes(media, accepted):
                await _refuse(send, media, accepted)
                return
        await self.app(scope, receive, send)

    def _route_accepts(self, scope: dict) -> tuple[str, ...] | None:
        app = scope.get("app")
        if app is None:
            return None
        if self._routes is None:         # every route is included by the first request
            self._routes = _patterns(accepted_media_types(app.openapi()))
        path = scope.get("path", "")
        for method, pattern, accepted in self._routes:
            if method == scope["method"] and pattern.fullmatch(path):
                return accepted
        return None


def _patterns(accepted: dict[tuple[str, str], tuple[str, ...]]
              ) -> list[tuple[str, re.Pattern[str], tuple[str, ...]]]:
    """Path templates as patterns, literal ones first (`/api/blocks/search`
    before `/api/blocks/{block_id}`), as the router itself prefers them."""
    found = []
    for (method, template), types in accepted.items():
        parts = re.split(r"(\{[^}]+\})", template)
        regex = "".join("[^/]+" if part.startswith("{") else re.escape(part)
                        for part in parts)
        found.append((template.count("{"), method, re.compile(regex), types))
    found.sort(key=lambda item: item[0])
    return [(method, pattern, types) for _, method, pattern, types in found]


async def _refuse(send: Any, media: str, accepted: tuple[str, ...]) -> None:
    wanted = " or ".join(accepted)
    hint = " (curl: add -H 'Content-Type: application/json')" \
        if "application/json" in accepted else ""
    payload = json.dumps(error_body(
        415, f"unsupported Content-Type '{media}': this route takes {wanted}{hint}")).encode()
    await send({"type": "http.response.start", "status": 415,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})

"""Refuse oversized and hostile request bodies before any route parses them.

A declared `Content-Length` over the limit is refused at once (413); a chunked
body is counted as it arrives and refused as soon as it passes the limit, so a
client cannot make the server buffer more than `max_bytes`.  A JSON body
nested deeper than documents may be (its parser would recurse past Python's
stack) is a 400, and one holding a lone UTF-16 surrogate (`"\\ud800"`, text no
database can store) a 422 naming the field (`body_text`); both name the place.
"""

from __future__ import annotations

import json
from typing import Any

from flowforge.server.body_text import lone_surrogate
from flowforge.server.errors import error_body

__all__ = ["BodyLimit"]


class BodyLimit:
    """Pure ASGI middleware (works for streaming responses such as SSE)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._refuse(send, 400, "invalid Content-Length header")
                    return
                if declared > self.max_bytes:
                    await self._too_large(send)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        refusal = _hostile(body)
        if refusal is not None:
            await self._refuse(send, *refusal)
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Any) -> None:  # noqa: D401
        await self._refuse(send, 413, f"the request body is larger than the server's limit of "
                                      f"{self.max_bytes} bytes (FLOWFORGE_MAX_BODY_BYTES or "
                                      f"`flowforge serve --max-body-bytes`)")

    @staticmethod
    async def _refuse(send: Any, status: int, message: str,
                      details: list[dict[str, Any]] | None = None) -> None:
        payload = json.dumps(error_body(status, message, None, details)).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload})


def _hostile(body: bytes) -> tuple[int, str, list[dict[str, Any]] | None] | None:
    """(status, message, details) for a body no route should have to parse, else None."""
    if not body or body.lstrip()[:1] not in (b"{", b"["):
        return None
    from flowforge.workflow.loader import json_depth_error

    deep = json_depth_error(body.decode("utf-8", "replace"), "the request body")
    if deep is not None:
        return 400, str(deep), None
    surrogate = lone_surrogate(body)
    if surrogate is not None:
        where, problem = surrogate
        return 422, f"{where}: {problem}", [{"where": where, "message": problem}]
    return None

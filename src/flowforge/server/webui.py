"""The web app's files: the built single-page app in `server/static/`
(committed, so users need no Node.js and nothing comes from a CDN).

`/` and any client route (`/workflows/support`, `/runs/<id>`) answer the
app's `index.html`; `/assets/...` its files.  The build keeps a brotli and a
gzip copy beside each large asset (`make ui`, web/scripts/compress.mjs), so
a browser that accepts one is sent it as is: nothing is compressed per
request, and the first page costs a third of the bytes.  API paths are never shadowed:
an unknown `/api/...`, `/ws/...` path still answers the API's JSON 404.
"""

from __future__ import annotations

import mimetypes
import re
from functools import lru_cache
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from flowforge.server.errors import ApiError
from flowforge.server.served_files import file_under

__all__ = ["STATIC", "accepted_encodings", "install_web_app", "methods_at"]

STATIC = Path(__file__).parent / "static"
_API_PREFIXES = ("api/", "api", "ws/", "docs", "redoc", "openapi.json", "health", "agent-workflow")
#: The page runs only its own scripts and talks only to this server: an answer
#: or document shown in it cannot load code or send the key elsewhere.  Inline
#: styles are allowed (the graph and the editor position elements with them).
_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self'; "
                                       "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                       "connect-src 'self'; frame-ancestors 'none'; "
                                       "base-uri 'none'; form-action 'self'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
_NOT_BUILT = ("<!doctype html><title>flowforge</title><p>The web app is not built in this "
              "installation: run <code>make ui</code> in a source checkout. The API is at "
              "<a href=\"/docs\">/docs</a>.</p>")


def methods_at(app: FastAPI, path: str) -> list[str]:
    """The methods the API document declares at `path` (empty: no API route
    there).  This catch-all GET would otherwise answer 404 for a GET on a
    POST-only route."""
    paths = app.openapi().get("paths", {})
    if path in paths:                      # `/api/blocks/search` before `/api/blocks/{id}`
        return sorted(method.upper() for method in paths[path])
    methods: set[str] = set()
    for template, operations in paths.items():
        if _template(template).fullmatch(path):
            methods.update(method.upper() for method in operations)
    return sorted(methods)


@lru_cache(maxsize=512)
def _template(path: str) -> re.Pattern:
    """`/api/runs/{run_id}/cancel` as a pattern of the paths it stands for."""
    return re.compile(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)))


#: the precompressed copies the build writes, best first
_SUFFIX = {"br": "br", "gzip": "gz"}


def accepted_encodings(header: str) -> list[str]:
    """Of the encodings the build keeps, those `Accept-Encoding` allows, best
    first (`br;q=0` or `identity` alone refuse; `*` accepts both)."""
    weights: dict[str, float] = {}
    for part in header.split(","):
        token, _, params = part.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if token.strip():
            weights[token.strip().lower()] = quality
    wildcard = weights.get("*", 0.0)
    return [encoding for encoding in _SUFFIX if weights.get(encoding, wildcard) > 0]


def install_web_app(app: FastAPI) -> None:
    """Add the app's routes last, after every API route."""

    @app.get("/assets/{name:path}", include_in_schema=False)
    async def asset(request: Request, name: str) -> Response:
        path = file_under(STATIC / "assets", name)
        if path is None:             # the name echoed short: it may be 5,000 characters
            shown = name if len(name) <= 100 else f"{name[:100]}…"
            raise ApiError(404, f"no asset {shown!r}")
        headers = {"Cache-Control": "public, max-age=31536000, immutable",
                   "X-Content-Type-Options": "nosniff", "Vary": "Accept-Encoding"}
        media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if media_type.startswith("text/") or media_type.endswith("javascript"):
            media_type += "; charset=utf-8"
        for encoding in accepted_encodings(request.headers.get("accept-encoding", "")):
            packed = file_under(path.parent, f"{path.name}.{_SUFFIX[encoding]}")
            if packed is not None:
                return FileResponse(packed, media_type=media_type,
                                    headers={**headers, "Content-Encoding": encoding})
        return FileResponse(path, media_type=media_type, headers=headers)

    @app.get("/{path:path}", include_in_schema=False)
    async def page(path: str) -> Response:
        if path.startswith(_API_PREFIXES):
            allowed = methods_at(app, f"/{path}")
            if allowed:              # an API route that takes other methods: not a page
                raise ApiError(405, f"'/{path}' does not answer GET; it takes "
                                    f"{', '.join(allowed)}", headers={"Allow": ", ".join(allowed)})
            raise ApiError(404, f"no route '/{path}' (the API's routes are listed at /docs)")
        index = STATIC / "index.html"
        if not index.is_file():
            return HTMLResponse(_NOT_BUILT, status_code=200, headers=_HEADERS)
        return FileResponse(index, headers={"Cache-Control": "no-cache", **_HEADERS})

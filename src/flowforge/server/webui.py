"""The web app's files: the built single-page app in `server/static/`
(committed, so users need no Node.js and nothing comes from a CDN).

`/` and any client route (`/workflows/support`, `/runs/<id>`) answer the
app's `index.html`; `/assets/...` its files.  API paths are never shadowed:
an unknown `/api/...`, `/ws/...` path still answers the API's JSON 404.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

from flowforge.server.errors import ApiError

__all__ = ["STATIC", "install_web_app", "methods_at"]

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


def install_web_app(app: FastAPI) -> None:
    """Add the app's routes last, after every API route."""

    @app.get("/assets/{name:path}", include_in_schema=False)
    async def asset(name: str) -> Response:
        path = (STATIC / "assets" / name).resolve()
        if not path.is_file() or (STATIC / "assets").resolve() not in path.parents:
            raise ApiError(404, f"no asset '{name}'")
        return FileResponse(path, headers={"Cache-Control": "public, max-age=31536000, "
                                                            "immutable",
                                           "X-Content-Type-Options": "nosniff"})

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

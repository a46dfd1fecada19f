"""The manual at `/manual/`: the static site `make docs` builds into
`server/manual/` (MkDocs, generated from the code; not committed, so it
cannot be stale in git).

Pages are plain files and link to each other relatively, so the same folder
reads straight from disk too.  The site asks for nothing outside this
server (no web fonts, no CDN, search runs in the page), and the headers
hold it to that.  An installation without a built manual answers a 404 page
that says how to build one.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from flowforge.server.served_files import file_under

__all__ = ["MANUAL", "install_manual"]

MANUAL = Path(__file__).parent / "manual"
#: Material's pages carry small inline scripts and styles of their own (never a
#: user's text): everything else, requests included, stays on this server.
_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                                       "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                       "font-src 'self'; connect-src 'self'; "
                                       "worker-src 'self' blob:; frame-ancestors 'none'; "
                                       "base-uri 'none'; form-action 'self'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
_NOT_BUILT = ("<!doctype html><title>flowforge manual</title><h1>The manual is not built</h1>"
              "<p>This installation has no built manual: run <code>make docs</code> in a "
              "source checkout, then reload. The API's routes are at "
              "<a href=\"/docs\">/docs</a>.</p>")
_NOT_FOUND = ("<!doctype html><title>Not found</title><h1>No such page in the manual</h1>"
              "<p><a href=\"/manual/\">The manual's front page</a>.</p>")


def install_manual(app: FastAPI) -> None:
    """Add `/manual/...`; call before the web app's catch-all route."""

    @app.get("/manual", include_in_schema=False)
    async def manual_root() -> Response:
        return RedirectResponse("/manual/", status_code=307)

    @app.get("/manual/{path:path}", include_in_schema=False)
    async def manual_page(path: str) -> Response:
        if not (MANUAL / "index.html").is_file():
            return HTMLResponse(_NOT_BUILT, status_code=404, headers=_HEADERS)
        found = file_under(MANUAL, path, index="index.html")
        if found is None:
            return HTMLResponse(_NOT_FOUND, status_code=404, headers=_HEADERS)
        media = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return FileResponse(found, media_type=media,
                            headers={"Cache-Control": "no-cache", **_HEADERS})

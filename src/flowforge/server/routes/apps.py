"""What the web app shows of a run whatever it ran: the shipped applications'
workflows (the chat, the research phases) and the graph of the document a run
actually ran.

A chat or research run names a workflow (`rag-chat`, `research`) that no user
stored, so `GET /api/workflows/{id}/graph` cannot draw it; the run's record
keeps its document, and the application's file is in the package.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from fastapi import APIRouter, Request

from flowforge.apps import shipped_workflows
from flowforge.server.auth import CurrentUser, owned_run
from flowforge.server.document_view import graph_view
from flowforge.server.errors import ApiError

__all__ = ["router"]

router = APIRouter(tags=["workflows"])


def _compiled(target: Any) -> Any:
    from flowforge.service.loading import load

    return load(target)


@router.get("/api/apps", summary="The applications' shipped workflows (chat, research)")
async def list_apps(request: Request, user: CurrentUser) -> dict[str, Any]:
    shown = []
    for app_id, path in shipped_workflows().items():
        compiled = await asyncio.to_thread(_compiled, path)
        shown.append({"id": app_id, "name": compiled.doc.name or app_id,
                      "description": compiled.doc.description or ""})
    return {"apps": shown}


@router.get("/api/apps/{app_id}",
            summary="One application's shipped workflow: its YAML source and its graph")
async def get_app(request: Request, app_id: str, user: CurrentUser) -> dict[str, Any]:
    path = shipped_workflows().get(app_id)
    if path is None:
        known = ", ".join(sorted(shipped_workflows()))
        raise ApiError(404, f"no application workflow '{app_id[:100]}' (there are: {known})")
    compiled = await asyncio.to_thread(_compiled, path)
    return {"id": app_id, "name": compiled.doc.name or app_id,
            "description": compiled.doc.description or "",
            "source": path.read_text(encoding="utf-8"), "graph": graph_view(compiled)}


@router.get("/api/runs/{run_id}/graph",
            summary="The graph of the document this run ran (an application's too)")
async def run_graph(request: Request, run_id: str, user: CurrentUser) -> dict[str, Any]:
    """The document is the run's own record of it, so the picture is what ran,
    whichever version of the workflow is stored now.  `app` names the shipped
    application workflow the run is of (`/api/apps/{app}`), else null."""
    run = await owned_run(request.app.state.storage, user, run_id)
    app_id = run["workflow_id"] if run.get("workflow_version") is None and \
        run["workflow_id"] in shipped_workflows() else None
    document = run.get("document")
    try:
        compiled = await asyncio.to_thread(_compiled, document) if document else None
    except Exception:  # noqa: BLE001 - a record older than today's checks: the app's file
        compiled = None
    if compiled is None and app_id is not None:
        compiled = await asyncio.to_thread(_compiled, shipped_workflows()[app_id])
    if compiled is None:
        raise ApiError(404, f"run '{run_id}' kept no document to draw")
    return {**graph_view(compiled), "version": run.get("workflow_version"), "app": app_id,
            "layout": _saved_layout(compiled.doc.metadata)}


def _saved_layout(metadata: Any) -> dict[str, dict[str, float]]:
    """The positions the editor saved (`metadata.layout.<block>: {x, y}`), so the
    run view draws the graph as its author arranged it; anything that is not a
    pair of numbers is left out (the engine never reads `metadata`)."""
    layout = metadata.get("layout") if isinstance(metadata, dict) else None
    if not isinstance(layout, dict):
        return {}

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value)

    return {str(block): {"x": float(at["x"]), "y": float(at["y"])}
            for block, at in layout.items()
            if isinstance(at, dict) and number(at.get("x")) and number(at.get("y"))}

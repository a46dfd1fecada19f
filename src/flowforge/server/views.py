"""How stored rows are shown to clients: times as ISO 8601 (as in a
RunResult), the links a client follows, never secrets."""

from __future__ import annotations

from typing import Any

from flowforge.engine.result import iso_time

__all__ = ["run_links", "run_summary", "run_detail", "workflow_view"]

_TIMES = ("created_at", "started_at", "finished_at", "updated_at", "resume_at")


def _times(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (iso_time(v) if k in _TIMES else v) for k, v in row.items()}


def run_links(run_id: str) -> dict[str, str]:
    return {"status_url": f"/api/runs/{run_id}", "events_url": f"/api/runs/{run_id}/events",
            "websocket_url": f"/ws/runs/{run_id}", "cancel_url": f"/api/runs/{run_id}/cancel"}


def run_summary(row: dict[str, Any]) -> dict[str, Any]:
    """A history entry: no document, inputs or outputs (fetch the run for those)."""
    keep = ("run_id", "workflow_id", "workflow_version", "user_id", "status", "error",
            "created_at", "started_at", "finished_at")
    return _times({k: row.get(k) for k in keep})


def run_detail(row: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Status, outputs and every block's result; blocks of loop passes, parallel
    items and nested workflows are listed under `scoped_blocks`."""
    top: dict[str, Any] = {}
    scoped: list[dict[str, Any]] = []
    for block in blocks:
        view = {"type": block["type"], "status": block["status"],
                "started_at": iso_time(block["started_at"]),
                "finished_at": iso_time(block["finished_at"]),
                "duration_ms": block["duration_ms"], "inputs": block["inputs"],
                "output": block["output"], "error": block["error"], "reason": block["reason"]}
        if block["scope"]:
            scoped.append({"scope": block["scope"], "block_id": block["block_id"], **view})
        else:
            top[block["block_id"]] = view
    # the fingerprint only tells a repeated submission from another (idempotency.py)
    shown = {k: v for k, v in row.items() if k not in ("document", "request_fingerprint")}
    return {**_times(shown), "blocks": top, "scoped_blocks": scoped,
            **run_links(row["run_id"])}


def workflow_view(row: dict[str, Any]) -> dict[str, Any]:
    view = _times(dict(row))
    view["id"] = view.pop("workflow_id")
    return view

"""Saved workflows and every version of each, as both back ends store them:
the SQL written once with `?` placeholders (`sql.SQLBackend`).  A version is
never changed once saved (runs name the version they ran); deleting a
workflow hides it and keeps its versions."""

from __future__ import annotations

import time
from typing import Any

from flowforge.storage.encoding import dumps, loads
from flowforge.storage.sql import SQLBackend

__all__ = ["WorkflowStore"]


class WorkflowStore(SQLBackend):
    """Workflows and their versions, mixed into a back end."""

    async def save_workflow(self, owner: str, workflow_id: str, document: dict[str, Any],
                            source: str | None = None) -> int:
        now = time.time()
        name = document.get("name") if isinstance(document, dict) else None
        async with self._sql_transaction() as transaction:
            [row] = await transaction.rows(
                "INSERT INTO workflows (owner, workflow_id, latest_version, name, created_at, "
                "updated_at) VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT (owner, workflow_id) DO "
                "UPDATE SET latest_version = workflows.latest_version + 1, name = excluded.name, "
                "updated_at = excluded.updated_at, deleted_at = NULL RETURNING latest_version",
                (owner, workflow_id, name, now, now))
            version = row["latest_version"]
            await transaction.rows(
                "INSERT INTO workflow_versions (owner, workflow_id, version, name, document, "
                "created_at, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (owner, workflow_id, version, name, dumps(document), now, source))
        return version

    async def get_workflow(self, owner: str, workflow_id: str, version: int | None = None
                           ) -> dict[str, Any] | None:
        rows = await self._sql_rows(
            "SELECT w.owner, w.workflow_id, v.version, w.latest_version, v.name, v.document, "
            "v.source, v.created_at, w.updated_at FROM workflows w JOIN workflow_versions v ON "
            "v.owner = w.owner AND v.workflow_id = w.workflow_id AND v.version = "
            "COALESCE(?, w.latest_version) WHERE w.owner = ? AND w.workflow_id = ? AND "
            "w.deleted_at IS NULL", (version, owner, workflow_id))
        if not rows:
            return None
        item = rows[0]
        item["document"] = loads(item["document"])
        return item

    async def list_workflows(self, owner: str | None = None, *, limit: int = 50,
                             offset: int = 0) -> list[dict[str, Any]]:
        clause, args = ("AND w.owner = ?", [owner]) if owner is not None else ("", [])
        return await self._sql_rows(
            "SELECT w.owner, w.workflow_id, w.latest_version AS version, w.name, "
            f"{self._json_text('v.document', 'description')} AS description, "
            "(SELECT r.status FROM runs r WHERE r.workflow_id = w.workflow_id AND "
            f"r.user_id = w.owner ORDER BY r.created_at DESC, "
            f"r.{self._inserted_order['runs']} DESC LIMIT 1) "
            "AS last_run_status, w.created_at, w.updated_at FROM workflows w "
            "JOIN workflow_versions v ON v.owner = w.owner AND v.workflow_id = w.workflow_id "
            f"AND v.version = w.latest_version WHERE w.deleted_at IS NULL {clause} "
            "ORDER BY w.workflow_id, w.owner LIMIT ? OFFSET ?", [*args, limit, offset])

    async def list_workflow_versions(self, owner: str, workflow_id: str
                                     ) -> list[dict[str, Any]]:
        return await self._sql_rows(
            "SELECT v.version, v.name, v.created_at FROM workflow_versions v JOIN workflows w "
            "ON v.owner = w.owner AND v.workflow_id = w.workflow_id WHERE w.owner = ? AND "
            "w.workflow_id = ? AND w.deleted_at IS NULL ORDER BY v.version",
            (owner, workflow_id))

    async def delete_workflow(self, owner: str, workflow_id: str) -> bool:
        return await self._sql_change(
            "UPDATE workflows SET deleted_at = ? WHERE owner = ? AND workflow_id = ? AND "
            "deleted_at IS NULL", (time.time(), owner, workflow_id)) > 0

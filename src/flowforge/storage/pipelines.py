"""Saved Pipeline JSON documents, per user: what `/api/pipelines` stores and
runs by id (the intent-to-pipeline system's `pipelines` table).

A pipeline is kept whole, as the JSON the thinker wrote or the user sent;
its owner and id are the key, so two users may both have a pipeline
`digest` and never see each other's.  Both back ends run the same SQL,
written once here with `?` placeholders, as `access.py` does.
"""

from __future__ import annotations

import json
import time
from typing import Any

__all__ = ["PipelineStore", "PIPELINE_TABLES", "PIPELINE_FIELDS"]

#: The table, as both back ends create it.  Times are DOUBLE PRECISION, which
#: SQLite reads as REAL: PostgreSQL's own REAL is 4 bytes, too coarse for a time.
PIPELINE_TABLES = (
    """CREATE TABLE pipelines (
        owner TEXT NOT NULL,
        pipeline_id TEXT NOT NULL,
        name TEXT,
        document TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (owner, pipeline_id))""",
)

#: Keys of a pipeline row as the store returns it (`pipeline`: the document).
PIPELINE_FIELDS = ("pipeline_id", "owner", "name", "pipeline", "created_at", "updated_at")


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {"pipeline_id": row["pipeline_id"], "owner": row["owner"], "name": row["name"],
            "pipeline": json.loads(row["document"]), "created_at": row["created_at"],
            "updated_at": row["updated_at"]}


class PipelineStore:
    """Pipelines, mixed into `Storage`."""

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        raise NotImplementedError

    async def create_pipeline(self, owner: str, pipeline: dict[str, Any]) -> dict[str, Any]:
        """Store a new pipeline under its `id`; AlreadyExists when the owner has one."""
        from flowforge.storage.base import AlreadyExists

        now = time.time()
        changed = await self._sql_change(
            "INSERT INTO pipelines VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (owner, pipeline_id) DO NOTHING",
            (owner, pipeline["id"], pipeline.get("name") or None,
             json.dumps(pipeline, ensure_ascii=False), now, now))
        if not changed:
            raise AlreadyExists(f"a pipeline '{pipeline['id']}' already exists: replace it "
                                f"with PUT /api/pipelines/{pipeline['id']} or choose another id")
        return await self.get_pipeline(owner, pipeline["id"])  # type: ignore[return-value]

    async def update_pipeline(self, owner: str, pipeline_id: str,
                              pipeline: dict[str, Any]) -> dict[str, Any] | None:
        """Replace the owner's pipeline `pipeline_id`; None when there is none."""
        changed = await self._sql_change(
            "UPDATE pipelines SET name = ?, document = ?, updated_at = ? "
            "WHERE owner = ? AND pipeline_id = ?",
            (pipeline.get("name") or None, json.dumps(pipeline, ensure_ascii=False),
             time.time(), owner, pipeline_id))
        return await self.get_pipeline(owner, pipeline_id) if changed else None

    async def get_pipeline(self, owner: str, pipeline_id: str) -> dict[str, Any] | None:
        rows = await self._sql_rows(
            "SELECT * FROM pipelines WHERE owner = ? AND pipeline_id = ?", (owner, pipeline_id))
        return _row(rows[0]) if rows else None

    async def list_pipelines(self, owner: str) -> list[dict[str, Any]]:
        """The owner's pipelines, most recently changed first."""
        rows = await self._sql_rows(
            "SELECT * FROM pipelines WHERE owner = ? ORDER BY updated_at DESC, pipeline_id",
            (owner,))
        return [_row(row) for row in rows]

    async def delete_pipeline(self, owner: str, pipeline_id: str) -> bool:
        return bool(await self._sql_change(
            "DELETE FROM pipelines WHERE owner = ? AND pipeline_id = ?", (owner, pipeline_id)))

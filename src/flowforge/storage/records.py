"""A run's record as both back ends read it, and what sits beside it: the
run's row, its events and block checkpoints, per-user memory and the
attempts to deliver a run's webhook.  The SQL is written once here with `?`
placeholders (`sql.SQLBackend`); the writes of a running run are the back
ends' own, committed in groups (`grouping`, `sqlite_writes`, `postgres_writes`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from flowforge.storage.base import BLOCK_FIELDS, DELIVERY_FIELDS, RUN_FIELDS
from flowforge.storage.checkpoints import BLOCK_EVENT_TYPES, fold, merged
from flowforge.storage.encoding import dumps, loads
from flowforge.storage.grouping import created, decoded_block, decoded_run, recorded, updated
from flowforge.storage.sql import SQLBackend

__all__ = ["RecordStore"]

_RUN_COLUMNS = ", ".join(RUN_FIELDS)
_LISTED_COLUMNS = ", ".join(f for f in RUN_FIELDS if f != "document")


class RecordStore(SQLBackend):
    """Runs, events, block checkpoints, memory and deliveries, mixed into a back end."""

    # -- a running run's writes: committed in groups by the back end (`_join`) -------
    async def create_run(self, run: dict[str, Any]) -> None:
        await self._join(created(run))

    async def update_run(self, run_id: str, **fields: Any) -> None:
        write = updated(run_id, fields)
        if fields:
            await self._join(write)

    async def record(self, run_id: str, events: list[dict[str, Any]],
                     blocks: list[dict[str, Any]]) -> None:
        await self.record_later(run_id, events, blocks)

    def record_later(self, run_id: str, events: list[dict[str, Any]],
                     blocks: list[dict[str, Any]], *, after: Any = None,
                     update: dict[str, Any] | None = None,
                     fence: tuple[str, float] | None = None) -> asyncio.Future:
        """Joins the next group; groups commit one after the other, in order, so
        `after` is stored first by construction (and this one not at all when
        `after` failed: `grouping.refuse_behind`; nor when `fence`'s owner lost
        the lease: `LeaseLost`)."""
        return self._join(recorded(run_id, events, blocks, update, after, fence))

    # -- runs ------------------------------------------------------------------------
    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        rows = await self._sql_rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?",
                                    (run_id,))
        return decoded_run(rows[0]) if rows else None

    async def list_runs(self, *, workflow_id: str | None = None, status: str | None = None,
                        user_id: str | None = None, limit: int = 50, offset: int = 0
                        ) -> list[dict[str, Any]]:
        where, args = [], []
        for column, value in (("workflow_id", workflow_id), ("status", status),
                              ("user_id", user_id)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._sql_rows(
            f"SELECT {_LISTED_COLUMNS} FROM runs {clause} ORDER BY created_at DESC, "
            f"{self._inserted_order['runs']} DESC LIMIT ? OFFSET ?", [*args, limit, offset])
        return [decoded_run(row) for row in rows]

    # -- events and block checkpoints --------------------------------------------------
    async def get_events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        data = await self._sql_values("SELECT data FROM run_events WHERE run_id = ? AND "
                                      "seq > ? ORDER BY seq", (run_id, after_seq))
        return [loads(item) for item in data]

    async def get_blocks(self, run_id: str) -> list[dict[str, Any]]:
        events = await self._sql_values(
            f"SELECT data FROM run_events WHERE run_id = ? AND type IN "
            f"({', '.join('?' * len(BLOCK_EVENT_TYPES))}) ORDER BY seq",
            (run_id, *BLOCK_EVENT_TYPES))
        rows = await self._sql_rows(
            f"SELECT {', '.join(BLOCK_FIELDS)} FROM run_blocks WHERE run_id = ? "
            f"ORDER BY {self._inserted_order['run_blocks']}", (run_id,))
        return merged(fold(run_id, (loads(item) for item in events)),
                      [decoded_block(row) for row in rows])

    # -- per-user memory ---------------------------------------------------------------
    async def get_memory(self, user_id: str, keys: list[str] | None = None) -> dict[str, Any]:
        rows = await self._sql_rows("SELECT key, value FROM memory WHERE user_id = ? "
                                    "ORDER BY key", (user_id,))
        values = {row["key"]: loads(row["value"]) for row in rows}
        if keys is not None:
            values = {k: v for k, v in values.items() if k in keys}
        return values

    async def save_memory(self, user_id: str, values: dict[str, Any]) -> None:
        if not values:
            return
        now = time.time()
        async with self._sql_transaction() as transaction:
            await transaction.many(
                "INSERT INTO memory (user_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at",
                [(user_id, k, dumps(v), now) for k, v in values.items()])

    # -- webhook deliveries ------------------------------------------------------------
    async def add_delivery(self, delivery: dict[str, Any]) -> None:
        values = [delivery.get(f) for f in DELIVERY_FIELDS]
        # a BOOLEAN column on PostgreSQL; SQLite stores a bool as 1 or 0
        values[DELIVERY_FIELDS.index("succeeded")] = bool(delivery.get("succeeded"))
        await self._sql_change(
            f"INSERT INTO webhook_deliveries ({', '.join(DELIVERY_FIELDS)}) VALUES "
            f"({', '.join('?' * len(DELIVERY_FIELDS))})", values)

    async def list_deliveries(self, run_id: str) -> list[dict[str, Any]]:
        rows = await self._sql_rows(
            f"SELECT {', '.join(DELIVERY_FIELDS)} FROM webhook_deliveries WHERE run_id = ? "
            "ORDER BY attempt", (run_id,))
        return [{**row, "succeeded": bool(row["succeeded"])} for row in rows]

"""The schedule firings: one row per (workflow, trigger, time it fired for), so
a firing happens exactly once however many schedulers look at the clock: the
row is a compare-and-set, and only the scheduler whose insert went in starts
the run.  Both back ends run the same SQL (as `access.AccessStore` does)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ScheduleStore", "SCHEDULE_TABLES"]

SCHEDULE_TABLES = (
    """CREATE TABLE schedule_firings (
        owner TEXT NOT NULL,
        workflow_id TEXT NOT NULL,
        trigger_index INTEGER NOT NULL,
        fire_at DOUBLE PRECISION NOT NULL,
        run_id TEXT NOT NULL,
        fired_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (owner, workflow_id, trigger_index, fire_at))""",
)


class ScheduleStore:
    """Schedule firings, mixed into `Storage`."""

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        raise NotImplementedError

    async def claim_firing(self, owner: str, workflow_id: str, trigger_index: int,
                           fire_at: float, run_id: str) -> bool:
        """True for the one caller whose claim of this firing went in."""
        return bool(await self._sql_change(
            "INSERT INTO schedule_firings VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (owner, workflow_id, trigger_index, fire_at) DO NOTHING",
            (owner, workflow_id, trigger_index, fire_at, run_id, time.time())))

    async def last_firings(self, owner: str, workflow_id: str) -> dict[int, dict[str, Any]]:
        """trigger index -> its latest firing `{fire_at, run_id, fired_at}`."""
        rows = await self._sql_rows(
            "SELECT trigger_index, fire_at, run_id, fired_at FROM schedule_firings "
            "WHERE owner = ? AND workflow_id = ? ORDER BY fire_at", (owner, workflow_id))
        return {row["trigger_index"]: dict(row) for row in rows}

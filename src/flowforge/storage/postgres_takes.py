"""Leases taken together on PostgreSQL: the `take_run` calls of one loop turn
share one round trip.

A worker takes up to its free slots' worth of messages at once
(`service/pool/redis_consumer.py`) and starts each run in the same loop turn;
each run then took its lease and read its row and events, a round trip of
its own each, answered by server processes that share the cores with the
workers: on 2 cores, 64 runs taken at once spent most of their start there
(bench/RESULTS.md, "Worker pool").  Here the claims of a turn are one UPDATE
over all their rows in one transaction, committed before one read of their
events and one of their block rows, all in one pipeline, as the group
writer does for writes (`postgres_writes.py`).  While a group is out, the
next one gathers.  Each claim keeps `claim_run`'s compare-and-set, row by
row; a run named twice in a turn waits for the next group (one UPDATE
changes a row once).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from psycopg.rows import dict_row

from flowforge.storage.base import BLOCK_FIELDS, RUN_FIELDS
from flowforge.storage.checkpoints import BLOCK_EVENT_TYPES, fold, merged
from flowforge.storage.encoding import dumps, loads
from flowforge.storage.grouping import decoded_block, decoded_run
from flowforge.storage.postgres_writes import rolled_back_on_error
from flowforge.storage.turns import TurnGatherer

__all__ = ["PostgresTakes"]

#: The claims of a group, one row each: [run_id, owner, until, now, expected owner,
#: expected status]; the row comes back as it is after the claim.
_CLAIM = (
    "UPDATE runs SET lease_owner = v.owner, lease_expires_at = v.until FROM (SELECT "
    "r->>0 AS run_id, r->>1 AS owner, (r->>2)::float8 AS until, (r->>3)::float8 AS now, "
    "r->>4 AS expected_owner, r->>5 AS expected_status FROM jsonb_array_elements(%s::jsonb) "
    "AS r) AS v WHERE runs.run_id = v.run_id AND (runs.lease_owner IS NULL OR "
    "runs.lease_owner = v.owner OR runs.lease_expires_at < v.now OR runs.lease_owner = "
    "v.expected_owner) AND (v.expected_status IS NULL OR runs.status = v.expected_status) "
    "RETURNING " + ", ".join(f"runs.{name}" for name in RUN_FIELDS))
_EVENTS = "SELECT run_id, data FROM run_events WHERE run_id = ANY(%s) ORDER BY run_id, seq"
_BLOCKS = (f"SELECT {', '.join(BLOCK_FIELDS)} FROM run_blocks WHERE run_id = ANY(%s) "
           f"ORDER BY position")


@dataclass
class _Take:
    run_id: str
    owner: str
    ttl: float
    expected_owner: str | None
    expected_status: str | None
    future: asyncio.Future = field(default=None)  # type: ignore[assignment]


class PostgresTakes(TurnGatherer[_Take]):
    """Gathers `take_run` calls and answers them a group at a time."""

    _task_name = "flowforge-postgres-takes"

    def __init__(self, connection: Callable[[], Any]) -> None:
        """`connection()`: an async context manager giving a pooled connection."""
        super().__init__()
        self._connection = connection

    def join(self, run_id: str, owner: str, ttl: float, expected_owner: str | None,
             expected_status: str | None) -> asyncio.Future:
        take = _Take(run_id, owner, ttl, expected_owner, expected_status,
                     asyncio.get_running_loop().create_future())
        self._gather(take)
        return take.future

    def _next_group(self, waiting: list[_Take]) -> tuple[list[_Take], list[_Take]]:
        """A run named twice waits for the next group (one UPDATE changes a row once)."""
        group: list[_Take] = []
        later: list[_Take] = []
        named: set[str] = set()
        for take in waiting:
            (later if take.run_id in named else group).append(take)
            named.add(take.run_id)
        return group, later

    async def _answer(self, group: list[_Take]) -> None:
        try:
            found = await self._take_group(group)
        except Exception as exc:  # noqa: BLE001 - each caller gets it
            for take in group:
                if not take.future.done():
                    take.future.set_exception(exc)
        else:
            for take in group:
                if not take.future.done():
                    take.future.set_result(found.get(take.run_id))

    def _abandon(self, left: list[_Take], exc: BaseException) -> None:
        for take in left:
            take.future.cancel()

    async def _take_group(self, group: list[_Take]) -> dict[str, dict[str, Any]]:
        """Claim the group's runs; what each claimed run reads, by run id."""
        now = time.time()
        claims = [[t.run_id, t.owner, now + t.ttl, now, t.expected_owner or t.owner,
                   t.expected_status] for t in group]
        ids = [t.run_id for t in group]
        async with self._connection() as conn:
            claim, events, blocks = (conn.cursor(row_factory=dict_row) for _ in range(3))
            async with rolled_back_on_error(conn), conn.pipeline() as pipeline:
                await conn.execute("BEGIN")
                await claim.execute(_CLAIM, (dumps(claims),))
                await conn.execute("COMMIT")      # the reads see the run as claimed
                await events.execute(_EVENTS, (ids,))
                await blocks.execute(_BLOCKS, (ids,))
                await pipeline.sync()
            rows = await claim.fetchall()
            event_rows = await events.fetchall()
            block_rows = await blocks.fetchall()
        taken: dict[str, dict[str, Any]] = {}
        for row in rows:
            taken[row["run_id"]] = {"row": decoded_run(row), "events": [], "blocks": []}
        for item in event_rows:
            if item["run_id"] in taken:
                taken[item["run_id"]]["events"].append(loads(item["data"]))
        by_run: dict[str, list[dict[str, Any]]] = {}
        for item in block_rows:
            if item["run_id"] in taken:
                by_run.setdefault(item["run_id"], []).append(item)
        for run_id, found in taken.items():
            # as `get_blocks`, read only when an event says a block ran
            if any(event["type"] in BLOCK_EVENT_TYPES for event in found["events"]):
                found["blocks"] = merged(fold(run_id, found["events"]),
                                         [decoded_block(item) for item in by_run.get(run_id, [])])
        return taken

"""Group commit for PostgreSQL (the shared part: `grouping.py`).

Each run write used to be a transaction of its own on a pooled connection:
500 concurrent runs made ~7,000 transactions per round, and the client's
work per statement, not the server, bounded them (recorded S4 ran 34 times
slower than in memory).  Now the writes of a loop turn share one
transaction on one connection, and each table gets one statement for all
its rows: psycopg's per-row work was most of the cost even in a pipeline.
While a group commits, the next one
gathers, so a busy process commits bigger groups instead of more of them.
Followers in every process are woken by one NOTIFY per run, at commit.

A statement's rows travel as one parameter, a JSON array of arrays that
orjson writes in C; the server casts each value (`float8` reads back the
exact float Python wrote).  psycopg's text arrays, one per column, cost the
loop ~10 us a row in Python: recorded S4 on PostgreSQL ran ~10% slower.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from functools import lru_cache
from typing import Any, AsyncIterator, Callable

from psycopg import OperationalError
from psycopg.pq import TransactionStatus
from psycopg_pool import PoolTimeout

from flowforge.errors import StorageError
from flowforge.storage.base import BLOCK_FIELDS, RUN_FIELDS, LeaseLost, conflicting_events
from flowforge.storage.encoding import dumps, same_json
from flowforge.storage.grouping import (IDEMPOTENCY_INDEX, Statements, Step, Write,
                                       WriteFuture, behind, behind_failed, key_taken, plan,
                                       refuse_behind, settle)
from flowforge.storage.turns import TurnGatherer

__all__ = ["PostgresGroupWriter", "CHANNEL", "rolled_back_on_error"]

#: NOTIFY channel: the payload is the id of a run that has new events.
CHANNEL = "flowforge_runs"
#: Seconds a group waits for a pooled connection (the pool's default, 30 s, is
#: the whole time a run waits for its server to come back: each try of a
#: run's failed writes must end well before it, `service/recorder.py`).
CONNECT_WAIT = 5.0


@contextlib.asynccontextmanager
async def rolled_back_on_error(conn: Any) -> AsyncIterator[None]:
    """Around a pipeline that opens a transaction by hand (BEGIN ... COMMIT): what
    an error left open is rolled back, and the first error is the one raised."""
    try:
        yield
    except BaseException:
        if conn.info.transaction_status in (TransactionStatus.INTRANS,
                                            TransactionStatus.INERROR):
            with contextlib.suppress(Exception):
                await conn.execute("ROLLBACK")
        raise


class PostgresGroupWriter(TurnGatherer[Write]):
    """Gathers writes and commits them a group at a time."""

    _task_name = "flowforge-postgres-writes"

    def __init__(self, pool: Callable[[], Any], notify: Callable[[str], None]) -> None:
        """`pool()` is the open connection pool; `notify(run_id)` wakes this
        process's followers of the run."""
        super().__init__()
        self._pool, self._notify = pool, notify

    def join(self, write: Write) -> asyncio.Future:
        write.future = WriteFuture(loop=asyncio.get_running_loop())
        self._gather(write)
        return write.future

    async def _answer(self, batch: list[Write]) -> None:
        settle(batch, await self._commit_group(batch), self._notify)

    def _abandon(self, left: list[Write], exc: BaseException) -> None:
        settle(left, [StorageError(f"the write was interrupted ({exc!r})")] * len(left),
               self._notify)

    async def close(self) -> None:
        """Wait until everything gathered is committed."""
        while self._drainer is not None:
            try:
                await asyncio.shield(self._drainer)
            except Exception:  # noqa: BLE001 - each write's caller has its error
                pass

    async def _commit_group(self, batch: list[Write]) -> list[Exception | None]:
        errors: list[Exception | None] = [None] * len(batch)
        failed: set = set()
        live = refuse_behind(batch, errors, failed)     # never a write behind a failed one
        if not live:
            return errors
        try:
            await self._commit_at_once(plan(live, _FIRST_TRY), live)
            return errors
        except (OperationalError, PoolTimeout) as exc:
            if getattr(exc, "sqlstate", None) != LEASE_LOST:
                # the server, not a write: one by one would wait N times
                return [error or exc for error in errors]
        except Exception:  # noqa: BLE001 - a replayed event or one write's bad data
            pass
        for index, write in enumerate(batch):
            if errors[index] is not None:
                continue
            if behind_failed(write, failed):
                errors[index] = behind(write)
                failed.add(write.future)
                continue
            try:
                await self._commit(plan([write], _SQL), [write])
            except Exception as exc:  # noqa: BLE001 - handed to that write's caller
                errors[index] = _named(exc, write)
                failed.add(write.future)
        return errors

    async def _commit_at_once(self, steps: list[Step], batch: list[Write]) -> None:
        """The group in one round trip: BEGIN, its statements and COMMIT in one
        pipeline (each wait costs a turn of a busy event loop).  Events go in
        with a plain INSERT: a replay (a resumed run storing again what was
        stored) is rare, and a plain INSERT costs the server less than ON
        CONFLICT; any error rolls back and the writes go one by one (`_commit`)."""
        notified = sorted({write.notify for write in batch if write.notify})
        async with self._pool().connection(timeout=CONNECT_WAIT) as conn:
            async with rolled_back_on_error(conn), conn.pipeline() as pipeline:
                await conn.execute("BEGIN")
                for sql, rows, _ in steps:
                    if sql is _FIRST_TRY.upsert_blocks:
                        rows = _merged(rows)
                    await conn.execute(sql, (dumps(rows),))
                if notified:      # delivered at commit, to every process LISTENing
                    await conn.execute("SELECT pg_notify(%s, run_id) FROM "
                                       "unnest(%s::text[]) AS run_id", (CHANNEL, notified))
                await conn.execute("COMMIT")
                await pipeline.sync()

    async def _commit(self, steps: list[Step], batch: list[Write]) -> None:
        """One transaction, its statements sent together (a pipeline): a round
        trip per statement cost a turn of a busy event loop each."""
        notified = sorted({write.notify for write in batch if write.notify})
        async with self._pool().connection(timeout=CONNECT_WAIT) as conn:
            async with conn.pipeline() as pipeline, conn.transaction():
                checks = []
                for sql, rows, check in steps:
                    if sql is _SQL.upsert_blocks:
                        rows = _merged(rows)
                    cursor = conn.cursor()
                    await cursor.execute(sql, (dumps(rows),))
                    if check:
                        checks.append((cursor, rows))
                if notified:          # delivered at commit, to every process LISTENing
                    await conn.execute("SELECT pg_notify(%s, run_id) FROM unnest(%s::text[]) "
                                       "AS run_id", (CHANNEL, notified))
                await pipeline.sync()
                for cursor, rows in checks:
                    if cursor.rowcount != len(rows):
                        await _check_replays(conn.cursor(), rows)


#: SQLSTATE of `flowforge_fence` (migration 0016) refusing a write: LeaseLost.
LEASE_LOST = "FF001"


def _named(exc: Exception, write: Write) -> Exception:
    """A new run refused by the idempotency index becomes IdempotencyKeyTaken
    (another transaction may have inserted the key while this one waited); a
    write refused by its lease's fence, LeaseLost."""
    if getattr(exc, "sqlstate", None) == LEASE_LOST and write.fence is not None:
        return LeaseLost(write.run_id, write.fence[0])
    diag = getattr(exc, "diag", None)
    if getattr(exc, "sqlstate", None) == "23505" and diag is not None and \
            diag.constraint_name == IDEMPOTENCY_INDEX:
        return key_taken(write) or exc
    return exc


async def _check_replays(cursor: Any, events: list[tuple]) -> None:
    """A replay of stored events is fine; another event under a stored seq is
    two processes writing one run: an error, never silently dropped."""
    by_run: dict[str, list[tuple]] = {}
    for row in events:
        by_run.setdefault(row[0], []).append(row)
    for run_id, rows in by_run.items():
        await cursor.execute("SELECT seq, data FROM run_events WHERE run_id = %s AND "
                             "seq = ANY(%s)", (run_id, [r[1] for r in rows]))
        stored = dict(await cursor.fetchall())
        clash = [r[1] for r in rows if r[1] in stored and not same_json(stored[r[1]], r[5])]
        if clash:
            raise StorageError(conflicting_events(run_id, clash))


def _merged(rows: list[list[Any]]) -> list[list[Any]]:
    """One row per block: a statement may not upsert a row twice, so a block's
    later checkpoints are folded into its first as the upserts one after the
    other would have (a value that is not NULL wins)."""
    merged: dict[tuple, list[Any]] = {}
    for row in rows:
        key = (row[0], row[1], row[2])
        first = merged.get(key)
        if first is None:
            merged[key] = list(row)
        else:
            for index, value in enumerate(row):
                if value is not None:
                    first[index] = value
    return list(merged.values())


_TYPES = {"workflow_version": "int", "seq": "int", "created_at": "float8",
          "started_at": "float8", "finished_at": "float8", "cancel_requested_at": "float8",
          "lease_expires_at": "float8", "resume_at": "float8", "time": "float8",
          "webhook_lease_until": "float8", "cut_off_resumes": "int",
          "duration_ms": "float8"}


def _from_json(columns: tuple[str, ...]) -> str:
    """`SELECT` of `columns` from the rows of one JSON array parameter (an array
    per row), cast to their types."""
    values = ", ".join(f"(r->>{i})::{_TYPES.get(c, 'text')} AS {c}"
                       for i, c in enumerate(columns))
    return f"SELECT {values} FROM jsonb_array_elements(%s::jsonb) AS r"


@lru_cache(maxsize=64)
def _update_runs(names: tuple[str, ...]) -> str:
    sets = ", ".join(f"{n} = v.{n}" for n in names)
    return (f"UPDATE runs SET {sets} FROM ({_from_json((*names, 'run_id'))}) AS v "
            f"WHERE runs.run_id = v.run_id")


_EVENT_FIELDS = ("run_id", "seq", "type", "block_id", "time", "data")
_SQL = Statements(
    insert_runs=f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) {_from_json(RUN_FIELDS)}",
    insert_events=(f"INSERT INTO run_events ({', '.join(_EVENT_FIELDS)}) "
                   f"{_from_json(_EVENT_FIELDS)} ON CONFLICT DO NOTHING"),
    upsert_blocks=(
        f"INSERT INTO run_blocks ({', '.join(BLOCK_FIELDS)}) {_from_json(BLOCK_FIELDS)} "
        f"ON CONFLICT (run_id, scope, block_id) DO UPDATE SET "
        + ", ".join(f"{f} = COALESCE(EXCLUDED.{f}, run_blocks.{f})"
                    for f in BLOCK_FIELDS if f not in ("run_id", "scope", "block_id"))),
    update_runs=_update_runs, fence="SELECT flowforge_fence(%s::jsonb)")
#: The statements of a group's first try, which a replayed event fails (`_commit_at_once`).
_FIRST_TRY = replace(_SQL, insert_events=_SQL.insert_events.replace(" ON CONFLICT DO NOTHING", ""))

"""PostgreSQL back end for a shared service: `postgresql://user@host:port/db`.

psycopg 3 in async mode with a connection pool; the runs' writes are
committed in groups (`postgres_writes.py`).  Migrations run
under an advisory lock, so several servers starting at once apply each step
exactly once.  JSON is stored as text, exactly as SQLite stores it (see
`migrations.POSTGRES_MIGRATIONS`).  A URL option `?pool_max=N` sizes the pool
(default 20); `?options=-csearch_path%3Dname` selects a schema, as the
conformance suite does to give every test an empty database.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

try:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("PostgreSQL storage needs psycopg 3: pip install 'flowforge[postgres]'"
                      ) from exc

from flowforge.errors import StorageError
from flowforge.storage.base import Migration, Storage
from flowforge.storage.grouping import Write
from flowforge.storage.migrate import PostgresSteps, apply_migrations
from flowforge.storage.migrations import POSTGRES_MIGRATIONS
from flowforge.storage.postgres_takes import PostgresTakes
from flowforge.storage.postgres_writes import CHANNEL, PostgresGroupWriter
from flowforge.storage.records import RecordStore
from flowforge.storage.users import UserStore
from flowforge.storage.workflows import WorkflowStore

__all__ = ["PostgresStorage", "split_url"]

_MIGRATION_LOCK = 0x666C6F77   # "flow": one advisory lock id for schema changes


def split_url(url: str) -> tuple[str, int]:
    """The libpq URL without our own options, and the pool size."""
    if url.startswith("postgresql+psycopg://"):
        url = "postgresql://" + url[len("postgresql+psycopg://"):]
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    pool_max = 20
    kept = []
    for key, value in query:
        if key == "pool_max":
            try:
                pool_max = max(2, int(value))
            except ValueError:
                raise StorageError(f"pool_max={value!r} in the database URL must be a "
                                   f"whole number") from None
        else:
            kept.append((key, value))
    # %20, not +: libpq decodes no + (`options=-ca%3D1%20-cb%3D2` sets two settings)
    return urlunsplit(parts._replace(query=urlencode(kept, quote_via=quote))), pool_max


class PostgresStorage(RecordStore, WorkflowStore, UserStore, Storage):
    """The shared SQL (`records`, `workflows`, `users` and the mixins of
    `Storage`) over a connection pool; here: the pool, LISTEN, group commit."""

    # `position` (BIGSERIAL) gives rows the insertion order SQLite's rowid gives
    _inserted_order = {"runs": "position", "run_blocks": "position", "users": "user_id",
                       "api_keys": "key_id"}
    _unique_violation = psycopg.errors.UniqueViolation

    def __init__(self, url: str, migrations: list[Migration] | None = None) -> None:
        self.url = url
        self.conninfo, self.pool_max = split_url(url)
        self.migrations = migrations or POSTGRES_MIGRATIONS
        self.pool: AsyncConnectionPool | None = None
        self._listener: asyncio.Task | None = None      # LISTEN for other processes' events
        self._writer = PostgresGroupWriter(self._pool, self._notify)
        self._takes = PostgresTakes(self._connection)

    # -- lifecycle ---------------------------------------------------------------
    async def open(self) -> None:
        if self.pool is not None:
            return
        # An unreachable server fails the open within seconds, in one line.
        # reconnect_timeout: the pool's reconnection attempts back off (1, 2, 4, 8...
        # s) until it gives up; the next request starts them again from 1 s.
        # Giving up after 10 s keeps the gap under ~4 s, so a run waiting for
        # its server (service/recorder.py) goes on soon after it is back.
        pool = AsyncConnectionPool(self.conninfo, min_size=1, max_size=self.pool_max,
                                   open=False, kwargs={"autocommit": True,
                                                       "connect_timeout": 3},
                                   name="flowforge", reconnect_timeout=10)
        try:
            await pool.open(wait=True, timeout=5)
            self.pool = pool
            await self._migrate()
        except Exception as exc:
            await pool.close()
            self.pool = None
            if isinstance(exc, StorageError):
                raise
            raise StorageError(f"cannot open the PostgreSQL database {_safe(self.url)}: "
                               f"{exc} (is the server running? check FLOWFORGE_DATABASE_URL)"
                               ) from None

    async def _migrate(self) -> None:
        async with self._pool().connection() as conn:
            await apply_migrations(self.migrations, PostgresSteps(
                conn, "schema_migrations", f"the database {_safe(self.url)}",
                lock=str(_MIGRATION_LOCK)))

    async def close(self) -> None:
        await self._writer.close()
        if self._listener is not None:
            self._listener.cancel()
            try:
                await self._listener
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
            self._listener = None
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def _watch_other_processes(self) -> None:
        """One connection per storage LISTENs on `flowforge_runs`; `record`
        NOTIFYs the run id on commit, so a follower in any process wakes at
        once instead of at its next poll.  If the connection drops, followers
        poll until the next follow starts listening again."""
        if self._listener is not None and not self._listener.done():
            return
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
            await conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error:
            return                                       # polling still works
        self._listener = asyncio.get_running_loop().create_task(
            self._listen(conn), name="flowforge-postgres-listen")

    async def _listen(self, conn: Any) -> None:
        try:
            async for note in conn.notifies():
                self._notify(note.payload)
        except psycopg.Error:
            pass
        finally:
            await conn.close()

    @contextlib.asynccontextmanager
    async def _connection(self) -> Any:
        """A pooled connection; the server going away (stopped, restarting, out
        of reach) is a StorageError in one line, never psycopg's traceback."""
        try:
            async with self._pool().connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            detail = str(exc).strip().splitlines()
            raise StorageError(f"the PostgreSQL database {_safe(self.url)} is unreachable: "
                               f"{detail[0] if detail else type(exc).__name__}") from None

    def _pool(self) -> AsyncConnectionPool:
        if self.pool is None:
            raise StorageError("storage is not open: call `await storage.open()` first")
        return self.pool

    async def _fetch(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(sql, args)
            return await cursor.fetchall()

    async def _execute(self, sql: str, args: Any = ()) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute(sql, args)
            return cursor.rowcount

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        return await self._fetch(sql.replace("?", "%s"), args)

    async def _sql_values(self, sql: str, args: Any = ()) -> list[Any]:
        async with self._connection() as conn:
            cursor = await conn.execute(sql.replace("?", "%s"), args)
            return [row[0] for row in await cursor.fetchall()]

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        return await self._execute(sql.replace("?", "%s"), args)

    @contextlib.asynccontextmanager
    async def _sql_transaction(self) -> AsyncIterator[_Transaction]:
        async with self._connection() as conn:
            async with conn.transaction():
                yield _Transaction(conn)

    def _json_text(self, column: str, key: str) -> str:
        return f"{column}::json ->> '{key}'"

    # -- runs: their writes are committed in groups (postgres_writes.py) ----------------
    def _join(self, write: Write) -> asyncio.Future:
        return self._writer.join(write)

    async def take_run(self, run_id: str, owner: str, ttl: float,
                       expected_owner: str | None = None,
                       expected_status: str | None = None) -> dict[str, Any] | None:
        """With the other takes of this loop turn, in one round trip (`postgres_takes`)."""
        return await self._takes.join(run_id, owner, ttl, expected_owner, expected_status)

    async def cancel_requests(self, run_ids: list[str]) -> set[str]:
        if not run_ids:
            return set()
        rows = await self._fetch("SELECT run_id FROM runs WHERE cancel_requested_at IS NOT NULL "
                                 "AND run_id = ANY(%s)", (list(run_ids),))
        return {row["run_id"] for row in rows}


class _Transaction:
    """Statements inside `PostgresStorage._sql_transaction`, `?` turned into `%s`."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        cursor = self.conn.cursor(row_factory=dict_row)
        await cursor.execute(sql.replace("?", "%s"), args)
        return await cursor.fetchall() if cursor.description else []

    async def many(self, sql: str, rows: Any) -> None:
        await self.conn.cursor().executemany(sql.replace("?", "%s"), rows)


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url

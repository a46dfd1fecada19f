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
import time
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

try:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("PostgreSQL storage needs psycopg 3: pip install 'flowforge[postgres]'"
                      ) from exc

from flowforge.errors import StorageError
from flowforge.storage.base import (BLOCK_FIELDS, DELIVERY_FIELDS, KEY_FIELDS, RUN_FIELDS,
                                    USER_FIELDS, AlreadyExists, Migration, Storage)
from flowforge.storage.checkpoints import BLOCK_EVENT_TYPES, fold, merged
from flowforge.storage.encoding import dumps as _dumps, loads as _loads
from flowforge.storage.grouping import (created, decoded_block, decoded_run, recorded,
                                        updated)
from flowforge.storage.migrations import POSTGRES_MIGRATIONS
from flowforge.storage.postgres_takes import PostgresTakes
from flowforge.storage.postgres_writes import CHANNEL, PostgresGroupWriter

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


class PostgresStorage(Storage):
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
            # Up to date: nothing to write (a read-only server still serves reads).
            cursor = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
            if (await cursor.fetchone())[0]:
                cursor = await conn.execute("SELECT name FROM schema_migrations")
                done = {row[0] for row in await cursor.fetchall()}
                if all(migration.name in done for migration in self.migrations):
                    return
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                await conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                                   "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION "
                                   "NOT NULL)")
                cursor = await conn.execute("SELECT name FROM schema_migrations")
                done = {row[0] for row in await cursor.fetchall()}
                for migration in self.migrations:
                    if migration.name in done:
                        continue
                    for statement in migration.statements:
                        await conn.execute(statement)
                    await conn.execute("INSERT INTO schema_migrations VALUES (%s, %s)",
                                       (migration.name, time.time()))

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

    async def _fetchone(self, sql: str, args: Any = ()) -> dict[str, Any] | None:
        rows = await self._fetch(sql, args)
        return rows[0] if rows else None

    async def _execute(self, sql: str, args: Any = ()) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute(sql, args)
            return cursor.rowcount

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        return await self._fetch(sql.replace("?", "%s"), args)

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        return await self._execute(sql.replace("?", "%s"), args)

    # -- runs --------------------------------------------------------------------
    async def create_run(self, run: dict[str, Any]) -> None:
        await self._writer.join(created(run))

    async def update_run(self, run_id: str, **fields: Any) -> None:
        write = updated(run_id, fields)
        if fields:
            await self._writer.join(write)

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        row = await self._fetchone(f"SELECT {', '.join(RUN_FIELDS)} FROM runs "
                                   f"WHERE run_id = %s", (run_id,))
        return decoded_run(row) if row else None

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

    async def list_runs(self, *, workflow_id: str | None = None, status: str | None = None,
                        user_id: str | None = None, limit: int = 50, offset: int = 0
                        ) -> list[dict[str, Any]]:
        where, args = [], []
        for column, value in (("workflow_id", workflow_id), ("status", status),
                              ("user_id", user_id)):
            if value is not None:
                where.append(f"{column} = %s")
                args.append(value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        columns = ", ".join(f for f in RUN_FIELDS if f != "document")
        rows = await self._fetch(
            f"SELECT {columns} FROM runs {clause} ORDER BY created_at DESC, position DESC "
            f"LIMIT %s OFFSET %s", [*args, limit, offset])
        return [decoded_run(row) for row in rows]

    # -- events and blocks ---------------------------------------------------------
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
        the lease: `LeaseLost`, raised by the `flowforge_fence` function)."""
        return self._writer.join(recorded(run_id, events, blocks, update, after, fence))

    async def get_events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        rows = await self._fetch("SELECT data FROM run_events WHERE run_id = %s AND seq > %s "
                                 "ORDER BY seq", (run_id, after_seq))
        return [_loads(row["data"]) for row in rows]

    async def get_blocks(self, run_id: str) -> list[dict[str, Any]]:
        events = await self._fetch("SELECT data FROM run_events WHERE run_id = %s AND "
                                   "type = ANY(%s) ORDER BY seq",
                                   (run_id, list(BLOCK_EVENT_TYPES)))
        rows = await self._fetch(f"SELECT {', '.join(BLOCK_FIELDS)} FROM run_blocks "
                                 f"WHERE run_id = %s ORDER BY position", (run_id,))
        return merged(fold(run_id, (_loads(row["data"]) for row in events)),
                      [decoded_block(item) for item in rows])

    # -- memory ------------------------------------------------------------------
    async def get_memory(self, user_id: str, keys: list[str] | None = None) -> dict[str, Any]:
        rows = await self._fetch("SELECT key, value FROM memory WHERE user_id = %s "
                                 "ORDER BY key", (user_id,))
        values = {row["key"]: _loads(row["value"]) for row in rows}
        if keys is not None:
            values = {k: v for k, v in values.items() if k in keys}
        return values

    async def save_memory(self, user_id: str, values: dict[str, Any]) -> None:
        if not values:
            return
        now = time.time()
        async with self._connection() as conn:
            async with conn.transaction():
                await conn.cursor().executemany(
                    "INSERT INTO memory (user_id, key, value, updated_at) VALUES "
                    "(%s, %s, %s, %s) ON CONFLICT (user_id, key) DO UPDATE SET "
                    "value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
                    [(user_id, k, _dumps(v), now) for k, v in values.items()])

    # -- workflows -----------------------------------------------------------------
    async def save_workflow(self, owner: str, workflow_id: str, document: dict[str, Any],
                            source: str | None = None) -> int:
        now = time.time()
        name = document.get("name") if isinstance(document, dict) else None
        async with self._connection() as conn:
            async with conn.transaction():
                cursor = await conn.execute(
                    "INSERT INTO workflows (owner, workflow_id, latest_version, name, "
                    "created_at, updated_at) VALUES (%s, %s, 1, %s, %s, %s) ON CONFLICT "
                    "(owner, workflow_id) DO UPDATE SET latest_version = "
                    "workflows.latest_version + 1, name = EXCLUDED.name, updated_at = "
                    "EXCLUDED.updated_at, deleted_at = NULL RETURNING latest_version",
                    (owner, workflow_id, name, now, now))
                version = (await cursor.fetchone())[0]
                await conn.execute(
                    "INSERT INTO workflow_versions (owner, workflow_id, version, name, "
                    "document, created_at, source) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (owner, workflow_id, version, name, _dumps(document), now, source))
        return version

    async def get_workflow(self, owner: str, workflow_id: str, version: int | None = None
                           ) -> dict[str, Any] | None:
        row = await self._fetchone(
            "SELECT w.owner, w.workflow_id, v.version, w.latest_version, v.name, v.document, "
            "v.source, v.created_at, w.updated_at FROM workflows w JOIN workflow_versions v ON "
            "v.owner = w.owner AND v.workflow_id = w.workflow_id AND v.version = "
            "COALESCE(%s, w.latest_version) WHERE w.owner = %s AND w.workflow_id = %s AND "
            "w.deleted_at IS NULL", (version, owner, workflow_id))
        if row is None:
            return None
        row["document"] = _loads(row["document"])
        return row

    async def list_workflows(self, owner: str | None = None, *, limit: int = 50,
                             offset: int = 0) -> list[dict[str, Any]]:
        clause, args = ("AND w.owner = %s", [owner]) if owner is not None else ("", [])
        return await self._fetch(
            "SELECT w.owner, w.workflow_id, w.latest_version AS version, w.name, "
            "v.document::json ->> 'description' AS description, "
            "(SELECT r.status FROM runs r WHERE r.workflow_id = w.workflow_id AND "
            "r.user_id = w.owner ORDER BY r.created_at DESC, r.position DESC LIMIT 1) "
            "AS last_run_status, w.created_at, w.updated_at FROM workflows w "
            "JOIN workflow_versions v ON v.owner = w.owner AND v.workflow_id = w.workflow_id "
            f"AND v.version = w.latest_version WHERE w.deleted_at IS NULL {clause} "
            "ORDER BY w.workflow_id, w.owner LIMIT %s OFFSET %s", [*args, limit, offset])

    async def list_workflow_versions(self, owner: str, workflow_id: str
                                     ) -> list[dict[str, Any]]:
        return await self._fetch(
            "SELECT v.version, v.name, v.created_at FROM workflow_versions v JOIN workflows w "
            "ON v.owner = w.owner AND v.workflow_id = w.workflow_id WHERE w.owner = %s AND "
            "w.workflow_id = %s AND w.deleted_at IS NULL ORDER BY v.version",
            (owner, workflow_id))

    async def delete_workflow(self, owner: str, workflow_id: str) -> bool:
        return await self._execute(
            "UPDATE workflows SET deleted_at = %s WHERE owner = %s AND workflow_id = %s AND "
            "deleted_at IS NULL", (time.time(), owner, workflow_id)) > 0

    # -- users and keys ----------------------------------------------------------------
    async def create_user(self, user: dict[str, Any]) -> None:
        try:
            await self._execute(
                f"INSERT INTO users ({', '.join(USER_FIELDS)}) VALUES "
                f"({', '.join(['%s'] * len(USER_FIELDS))})", [user.get(f) for f in USER_FIELDS])
        except psycopg.errors.UniqueViolation:
            raise AlreadyExists(f"a user named '{user.get('name')}' already exists "
                                f"(choose another name)") from None

    async def get_user(self, user_id: str) -> dict[str, Any] | None:
        return await self._fetchone(f"SELECT {', '.join(USER_FIELDS)} FROM users "
                                    f"WHERE user_id = %s", (user_id,))

    async def get_user_by_name(self, name: str) -> dict[str, Any] | None:
        return await self._fetchone(f"SELECT {', '.join(USER_FIELDS)} FROM users "
                                    f"WHERE name = %s", (name,))

    async def list_users(self) -> list[dict[str, Any]]:
        return await self._fetch(f"SELECT {', '.join(USER_FIELDS)} FROM users "
                                 f"ORDER BY created_at, user_id")

    async def add_api_key(self, key: dict[str, Any]) -> None:
        await self._execute(
            f"INSERT INTO api_keys ({', '.join(KEY_FIELDS)}) VALUES "
            f"({', '.join(['%s'] * len(KEY_FIELDS))})", [key.get(f) for f in KEY_FIELDS])

    async def user_for_key_hash(self, key_hash: str) -> dict[str, Any] | None:
        columns = ", ".join(f"u.{f}" for f in USER_FIELDS)
        return await self._fetchone(
            f"SELECT {columns} FROM api_keys k JOIN users u ON u.user_id = k.user_id "
            "WHERE k.key_hash = %s AND k.revoked_at IS NULL", (key_hash,))

    async def list_api_keys(self, user_id: str) -> list[dict[str, Any]]:
        return await self._fetch(f"SELECT {', '.join(KEY_FIELDS)} FROM api_keys WHERE "
                                 f"user_id = %s ORDER BY created_at, key_id", (user_id,))

    async def revoke_api_key(self, key_id: str) -> bool:
        return await self._execute(
            "UPDATE api_keys SET revoked_at = %s WHERE key_id = %s AND revoked_at IS NULL",
            (time.time(), key_id)) > 0

    # -- webhook deliveries ----------------------------------------------------------------
    async def add_delivery(self, delivery: dict[str, Any]) -> None:
        values = [delivery.get(f) for f in DELIVERY_FIELDS]
        values[DELIVERY_FIELDS.index("succeeded")] = bool(delivery.get("succeeded"))
        await self._execute(
            f"INSERT INTO webhook_deliveries ({', '.join(DELIVERY_FIELDS)}) VALUES "
            f"({', '.join(['%s'] * len(DELIVERY_FIELDS))})", values)

    async def list_deliveries(self, run_id: str) -> list[dict[str, Any]]:
        return await self._fetch(f"SELECT {', '.join(DELIVERY_FIELDS)} FROM "
                                 f"webhook_deliveries WHERE run_id = %s ORDER BY attempt",
                                 (run_id,))



def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
